"""A disk that fills between a new run's record and its first attempt: one coded line, the run
``interrupted``, recovered once space is freed.

``relay run`` (a real CLI process) is stopped at a named point of the start
(``RELAY_TEST_STOP_AT``, ``runner.fault_points``): after run.json is written, before the
attempt's folder and spec are, after run.json says attempt 1 is running (before its child, its
logs and its ledger lines), and in the child before the run's database is copied from the DBOS
template. The test then fills the real tmpfs to the last byte and lets the process go on: the
command ends with ``relay: error: ... [disk-full]`` naming the run's folder, never an internal
error; the run is listed ``interrupted`` (never ``pending`` or ``running`` with no process) and
no run folder lacks its run.json; once the filler is deleted ``relay recover`` finishes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay_notebook.runner.fault_points import ENV_STOP_AT, START_POINTS
from tests.integration.test_disk_full import (
    assert_disk_full,
    folders_without_record,
    relay,
    statuses,
)
from tests.mounts import fill, tmpfs
from tests.polling import wait_until
from tests.relays import relay_path


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, mounted for this test alone, with the ``five`` relay saved on it."""
    with tmpfs(tmp_path / "disk", "16m") as where:
        assert relay(where / "relays", "check", str(relay_path("five"))).returncode == 0
        yield where


def stopped_at(point: str, mark: str | None = None) -> int | None:
    """The process that stopped itself at ``point`` (state ``T``, armed with it), if any;
    ``mark``: one with this ``NAME=value`` in its environment too."""
    armed = f"{ENV_STOP_AT}={point}".encode()
    marked = mark.encode() if mark is not None else armed
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                environ = fh.read().split(b"\0")
        except OSError:
            continue
        if state == b"T" and armed in environ and marked in environ:
            return int(entry.name)
    return None


def run_filled_at(
    home: Path, disk: Path, point: str, relay: str = "five", run_input: str = '{"n": 2}'
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``relay run RELAY`` stopped at ``point``, the disk filled, then let go: its end and the
    filler."""
    cmd = [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "run", relay]
    cmd += ["--input", run_input]
    env = {**os.environ, "RELAY_DEBUG": "", ENV_STOP_AT: point}
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        pid = wait_until(lambda: stopped_at(point), 120, what=f"relay run stopped at {point}")
        filler = fill(disk)
        os.kill(pid, signal.SIGCONT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return subprocess.CompletedProcess(cmd, run.returncode, out, err), filler


@pytest.mark.parametrize("point", START_POINTS)
def test_a_disk_filled_before_the_first_attempt_leaves_the_run_interrupted(
    disk: Path, point: str
) -> None:
    """Filled at each point of the start: one ``[disk-full]`` line naming the run's folder
    and the recover command; the run is ``interrupted`` (coded ``disk-full`` in run.json) with
    no leftover reserve; freed, ``relay recover`` finishes it."""
    home = disk / "relays"
    proc, filler = run_filled_at(home, disk, point)
    folder = home / "five" / "runs" / "iteration-1-hook"
    line = assert_disk_full(proc, folder)
    assert "relay recover five-1" in line, line
    record = json.loads((folder / "run.json").read_text())
    assert record["status"] == "interrupted", record
    assert record["error"]["code"] == "disk-full", record["error"]
    assert all(a["status"] == "interrupted" for a in record["attempts"]), record["attempts"]
    assert list(folder.glob(".relay_ipc/**/reserve")) == []  # the room is the disk's again
    assert statuses(home) == {"five-1": "interrupted"} and folders_without_record(home) == []
    filler.unlink()
    recovered = relay(home, "recover", "five-1", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["result"] == {"total": 10}
    assert statuses(home) == {"five-1": "succeeded"} and list(home.rglob("reserve")) == []
