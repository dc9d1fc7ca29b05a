"""An attempt SIGKILLed, from outside or by its own relay, is reported killed by its signal on
every start path (forked from a kernel's warm parent, from `relay run`'s own, or spawned with
``RELAY_WARM_START=0``), with no traceback of the kit's on the terminal or in run.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.procs import alive, command, descendants, name_of, parent_of

ROOT = Path(__file__).resolve().parents[2]
SELF_KILL = """\
import os
import signal

from dbos import DBOS


@DBOS.step()
async def boom(x):
    os.kill(os.getpid(), signal.SIGKILL)
    return x


@DBOS.workflow()
async def run(INPUT):
    return await boom(1)
"""
NAP = """\
import time
from pathlib import Path

from dbos import DBOS

from agentworks import run_dir


@DBOS.step()
async def nap(x):
    (Path(run_dir) / "napping").write_text(str(__import__("os").getpid()))
    time.sleep(120)
    return x


@DBOS.workflow()
async def run(INPUT):
    return await nap(1)
"""
KILLED = "killed by SIGKILL"


def _relay_process(top: int) -> int:
    """The relay's own process below ``top``: the deepest one running the child program."""

    candidates = [p for p in descendants(top) if b"pasta" not in command(p)]
    assert candidates, f"no process below {top}"
    return candidates[-1]


def _napping(home: Path, run_id: str) -> bool:
    number = run_id.rsplit("-", 1)[1]
    return (home / "nap" / "runs" / f"iteration-{number}-hook" / "execution" / "napping").exists()


def _check_record(home: Path, relay: str, run_id: str) -> None:
    number = run_id.rsplit("-", 1)[1]
    meta = json.loads((home / relay / "runs" / f"iteration-{number}-hook" / "run.json").read_text())
    assert meta["status"] == "interrupted", meta
    assert KILLED in meta["error"]["message"], meta["error"]
    assert "Traceback" not in json.dumps(meta), meta["error"]
    assert meta["attempts"][-1]["returncode"] == -signal.SIGKILL


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm", "spawned"])
@pytest.mark.parametrize("how", ["outside", "itself"])
def test_a_terminal_attempt_killed_is_reported_killed_by_sigkill(
    warm: str, how: str, tmp_path: Path
) -> None:
    """`relay run` whose attempt is SIGKILLed (its relay's process, from outside; or the relay
    kills itself): exit 3, "killed by SIGKILL" on stderr and in run.json, no traceback."""
    home = tmp_path / "relays"
    source = tmp_path / ("self_kill.py" if how == "itself" else "nap.py")
    source.write_text(SELF_KILL if how == "itself" else NAP)
    env = {**os.environ, "RELAY_WARM_START": warm, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "run", str(source)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    relay = source.stem
    if how == "outside":
        wait_until(lambda: _napping(home, "nap-1") or proc.poll() is not None, timeout=120,
                   what="the relay's step to start")  # fmt: skip
        os.kill(_relay_process(proc.pid), signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, f"{out}\n{err}"
    assert KILLED in err and "Traceback" not in err + out, err
    assert "status 70" not in err
    _check_record(home, relay, f"{relay}-1")


@pytest.mark.parametrize("how", ["outside", "itself"])
def test_an_attempt_forked_from_a_kernels_warm_parent_killed_is_reported_killed_by_sigkill(
    how: str, workspace: Workspace
) -> None:
    """In a kernel's process (its long-lived warm parent forks the attempts), an attempt
    SIGKILLed from outside or by its relay ends interrupted, "killed by SIGKILL", no
    traceback; a second attempt forked the same way is reported the same."""
    relay = "self_kill" if how == "itself" else "nap"
    workspace.save_draft(relay, SELF_KILL if how == "itself" else NAP)
    for n in (1, 2):
        handle: Any = commands.run(workspace, relay)
        if how == "outside":
            wait_until(lambda: _napping(workspace.home, f"nap-{n}"), timeout=120,  # noqa: B023
                       what="the relay's step to start")  # fmt: skip
            os.kill(_relay_process(handle.process.pid), signal.SIGKILL)
        outcome = handle.wait(120)
        assert outcome.status == "interrupted", outcome
        assert KILLED in outcome.error["message"] and "Traceback" not in json.dumps(
            outcome.error
        ), outcome.error
        _check_record(workspace.home, relay, outcome.run_id)


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm", "spawned"])
def test_an_attempts_processes_are_named_by_their_part_in_it(warm: str, tmp_path: Path) -> None:
    """`top` and `ps -o comm` show a running attempt's processes by their part, not as
    "python": the relay's process and every thread of it (DBOS's) ``relay-child``, below the
    sandbox's ``relay-init`` and the attempt's ``relay-leader``; a warm parent ``relay-warm``."""
    home = tmp_path / "relays"
    source = tmp_path / "nap.py"
    source.write_text(NAP)
    env = {**os.environ, "RELAY_WARM_START": warm, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "run", str(source)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    relay = None
    try:
        wait_until(lambda: _napping(home, "nap-1") or proc.poll() is not None, timeout=120,
                   what="the relay's step to start")  # fmt: skip
        relay = _relay_process(proc.pid)
        threads = Path(f"/proc/{relay}/task").iterdir()
        assert {(Path(t) / "comm").read_text().strip() for t in threads} == {"relay-child"}
        meta = json.loads((home / "nap" / "runs" / "iteration-1-hook" / "run.json").read_text())
        confined = meta["attempts"][0]["confinement"]["mechanism"] != "none"
        chain = []
        pid = parent_of(relay)
        while pid is not None and pid != proc.pid:
            chain.append(name_of(pid))
            pid = parent_of(pid)
        assert chain[: 2 if confined else 1] == (
            ["relay-init", "relay-leader"] if confined else ["relay-leader"]
        ), chain
        names = {name_of(p) for p in descendants(proc.pid) if alive(p)}
        assert ("relay-warm" in names) == (warm == "1"), names
        assert "python" not in names, names
    finally:
        if relay is not None:
            os.kill(relay, signal.SIGKILL)  # the run ends interrupted, the command with it
        else:
            proc.kill()
        proc.communicate(timeout=60)
