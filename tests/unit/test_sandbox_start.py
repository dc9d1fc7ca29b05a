"""A spawned attempt's way into its sandbox (``runner.sandbox_exec``) starts lean: until the
child's program runs, its process imports none of the Python modules that cost tens of
milliseconds on every attempt, and it reads its plan exactly as ``json`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from relay_notebook.runner.sandbox_exec import read_plan

#: Python modules a fresh interpreter does not load, each importing ``enum``, ``re`` or more
COSTLY = ("enum", "re", "json", "typing", "pathlib", "socket", "signal", "subprocess",
          "tempfile", "traceback", "contextlib", "functools", "ctypes.util")  # fmt: skip


def test_entering_the_sandbox_imports_no_costly_module() -> None:
    """What a spawned attempt imports before its child's program: ``sandbox_exec`` and the
    modules it enters the sandbox with (``landlock`` is imported on the way, too)."""
    probe = (
        "import sys\n"
        "import relay_notebook.runner.sandbox_exec, relay_notebook.runner.landlock\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "relay_notebook.runner.sandbox" in loaded and "ctypes" in loaded
    assert [name for name in COSTLY if name in loaded] == []


def test_the_plan_is_read_as_json_reads_it(tmp_path: Path) -> None:
    plan = {
        "staging": "/tmp/relay-root-é", "cwd": "/w/run/execution", "abi": 6, "net_fd": 7,
        "mounts": [["read", "/usr"], ["write", "/w/run"], ["empty", "/w/vault"]],
        "links": [["/lib", "usr/lib"]], "network": {"mode": "outside", "allow": []},
        "writable": ["/w/run"], "quota": 1.5, "none": None, "flag": False, "quote": 'a"b\\c',
    }  # fmt: skip
    path = tmp_path / "sandbox.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    assert read_plan(str(path)) == plan == json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("text", ['{"cwd": "/w"} trailing', '{"cwd": ', "[1, 2]", ""])
def test_a_plan_not_as_written_is_refused_with_jsons_own_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sandbox.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        read_plan(str(path))
