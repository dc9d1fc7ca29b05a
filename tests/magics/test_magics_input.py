"""%relay run input on a real IPython shell: variables and files held to the 1 MiB JSON rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from relay_notebook.runner.run_input import MAX_INPUT_BYTES
from tests.relays import relay_source


def runs_of(tmp_path: Path, relay: str) -> list[Path]:
    """The run folders of ``relay`` in the test's workspace."""
    return sorted((tmp_path / "relays" / relay / "runs").glob("iteration-*-hook"))


def test_variables_that_are_not_bounded_json_are_usage_errors(ip: Any, tmp_path: Path) -> None:
    """NaN, lone surrogates, deep nesting or over 1 MiB in a variable: one coded line, no run."""
    ip.run_cell_magic("relay", "nap", relay_source("nap"))
    deep: list[Any] = []
    for _ in range(150):
        deep = [deep]
    bad = {
        "nan": {"seconds": float("nan")},
        "surrogate": {"text": "\udcff"},
        "deep": deep,
        "big": {"blob": "x" * MAX_INPUT_BYTES},
    }
    for name, value in bad.items():
        ip.user_ns[name] = value
        with pytest.raises(UsageError) as info:
            ip.run_line_magic("relay", f"run nap --input {name} --wait")
        message = str(info.value)
        assert message.endswith("[invalid-input]") and "\n" not in message and len(message) < 400
    assert runs_of(tmp_path, "nap") == []


def test_input_files_are_read_bounded_and_strict(ip: Any, tmp_path: Path) -> None:
    """--input-file that is missing, not UTF-8, NaN or over 1 MiB is a coded UsageError."""
    ip.run_cell_magic("relay", "nap", relay_source("nap"))
    files = {
        "latin.json": b'{"a": "caf\xe9"}',
        "nan.json": b'{"seconds": NaN}',
        "big.json": b'["' + b"y" * MAX_INPUT_BYTES + b'"]',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    for name in [*files, "missing.json"]:
        with pytest.raises(UsageError, match=r"\[invalid-input\]$"):
            ip.run_line_magic("relay", f"run nap --input-file {tmp_path / name} --wait")
    assert runs_of(tmp_path, "nap") == []
    (tmp_path / "ok.json").write_text('{"seconds": 0}')
    with capture_output():
        result = ip.run_line_magic("relay", f"run nap --input-file {tmp_path / 'ok.json'} --wait")
    assert result == {"slept": 0}
