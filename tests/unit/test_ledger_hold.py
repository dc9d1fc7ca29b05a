"""A holding writer (the child's) keeps the ledger's lock between its lines, lets other writers
in within a tick, and never shares its lock with a process forked from it or outlives its
process: sequence numbers stay 1, 2, 3... whoever writes."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from relay_notebook.record import ledger
from relay_notebook.record.ledger import HOLD_TICK_S, EventWriter, check_events, read_events

RUN = "r-1"


def _locked_elsewhere(path: Path) -> bool:
    """Whether the ledger's lock is taken, seen through a descriptor of this test's own."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and the lock with it, if this took it
    return False


def _numbered(path: Path) -> list[tuple[int, str]]:
    events = check_events(read_events(path), RUN, path)  # 1, 2, 3... or it raises
    return [(e["seq"], e["kind"]) for e in events]


def test_a_holding_writer_keeps_the_lock_between_its_lines_and_lets_go_within_ticks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id=RUN, attempt=1, hold=True)
    try:
        child.emit("step_start", step="a")
        with child._thread_lock:  # the keeper waits: the lock is held after the line
            assert _locked_elsewhere(path)
        # the keeper gives it back at its next tick (the wait is a bound, not a timing)
        for _ in range(int(10 / HOLD_TICK_S)):
            if not _locked_elsewhere(path):
                break
            threading.Event().wait(HOLD_TICK_S / 5)
        else:
            pytest.fail("the holding writer never let go of the ledger's lock")
    finally:
        child.close()


def test_another_writer_blocked_on_a_holding_writer_gets_in_and_both_number_on(
    tmp_path: Path,
) -> None:
    """A refused ``recover`` next door appends while the child holds the ledger: it waits
    for the keeper's tick, and the child's next line numbers on after it."""
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id=RUN, attempt=1, hold=True)
    child.emit("step_start", step="a")
    done = threading.Event()

    def refused_recover() -> None:
        other = EventWriter(path, run_id=RUN, attempt=1)
        try:
            other.emit("recovery_held", status="running", error=None)
        finally:
            other.close()
            done.set()

    try:
        with child._thread_lock:  # the lock is the child's now: the other writer must wait
            waiter = threading.Thread(target=refused_recover, daemon=True)
            waiter.start()
            assert not done.wait(HOLD_TICK_S * 2)
        assert done.wait(10), "a writer waiting on a holding writer was never let in"
        waiter.join()
        child.emit("step_end", step="a")
        child.emit("step_start", step="b")
    finally:
        child.close()  # a waiter still blocked gets in, and ends
    assert _numbered(path) == [
        (1, "step_start"),
        (2, "recovery_held"),
        (3, "step_end"),
        (4, "step_start"),
    ]


def test_closing_a_holding_writer_gives_the_lock_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger, "HOLD_TICK_S", 3600.0)  # no tick lets go meanwhile
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id=RUN, attempt=1, hold=True)
    child.emit("step_start", step="a")
    assert _locked_elsewhere(path)
    child.close()
    assert not _locked_elsewhere(path)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_process_forked_from_a_holding_child_writes_under_a_lock_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relay's step may fork (``multiprocessing``'s default here): the forked process does
    not write under its parent's lock (the two would number alike), and does not keep the
    parent's lock when the parent ends while it lives on."""
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id=RUN, attempt=1, hold=True)
    child.emit("step_start", step="a")
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: one line, once the parent says so; then it lingers
        try:
            os.read(go_r, 1)
            child.emit("log", level="INFO", logger="fork", message="from the fork")
            os.write(ready_w, b"1")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    try:
        child.emit("step_end", step="a")  # under the lock the parent holds since its last line
        os.write(go_w, b"1")  # the fork waits for the parent's keeper to let go
        readable, _, _ = select.select([ready_r], [], [], 10)
        assert readable, "the forked process was never let in to write"
        assert os.read(ready_r, 1) == b"1"
        monkeypatch.setattr(ledger, "HOLD_TICK_S", 3600.0)
        threading.Event().wait(0.2)  # the keeper's last short tick has passed
        child.emit("step_start", step="b")
        assert _locked_elsewhere(path)  # held by the parent
        child.close()
        assert not _locked_elsewhere(path)  # the fork, still alive, does not keep it
    finally:
        os.write(go_w, b"11")
        child.close()
        os.waitpid(pid, 0)
    assert _numbered(path) == [(1, "step_start"), (2, "step_end"), (3, "log"), (4, "step_start")]


def test_a_holding_child_killed_leaves_the_lock_to_the_next_writer(tmp_path: Path) -> None:
    """SIGKILL ends the child's hold with it: the supervisor's ``attempt_end`` goes in."""
    path = tmp_path / "dbos_events.jsonl"
    script = (
        "import time\n"
        "from pathlib import Path\n"
        "from relay_notebook.record import ledger\n"
        "ledger.HOLD_TICK_S = 3600.0\n"
        f"w = ledger.EventWriter(Path({str(path)!r}), run_id={RUN!r}, attempt=1, hold=True)\n"
        "w.emit('step_start', step='a')\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert _locked_elsewhere(path)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    supervisor = EventWriter(path, run_id=RUN, attempt=1)
    supervisor.emit("attempt_end", status="interrupted")
    supervisor.close()
    assert _numbered(path) == [(1, "step_start"), (2, "attempt_end")]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_after_a_holding_writer_closed_leaves_it_closed(tmp_path: Path) -> None:
    """A closed writer is forgotten: a later fork neither opens its ledger again nor closes
    a descriptor number that may be another file's by then."""
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id=RUN, attempt=1, hold=True)
    child.emit("step_start", step="a")
    child.close()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if child._fd == -1 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
