"""A run's attempt in progress, seen from its supervisor: waiting, killing, following it.

Design note: ``RunHandle`` is what ``launch_attempt`` returns. Its reader thread forwards the
child's live events, and at the end of the child (its whole process group) settles the attempt
(``runner.outcome``) and releases the run lock. An attempt that ends ``waiting`` asks
``continue_with`` whether its wait was answered while it left; if so the handle follows the
next attempt, so a caller waiting on it sees the run's end. Nothing here blocks the caller's
thread except ``wait`` and ``cancel``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay_notebook.errors import DiskFullError, codes
from relay_notebook.errors.storage import is_disk_full
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import decode_event, now_ms
from relay_notebook.record.ledger_events import Event
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import lend_session
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.crash import CRASH_EXIT_CODE
from relay_notebook.runner.disk_full import record_disk_full, release_space, unrecorded_message
from relay_notebook.runner.locks import RunLock
from relay_notebook.runner.log_scrubber import AttemptLogs
from relay_notebook.runner.outcome import AttemptExit, RunOutcome, settle_attempt
from relay_notebook.runner.warm import ForkedProcess

__all__ = ["AttemptEnds", "AttemptProcess", "EventCallback", "RunHandle"]

#: told of each ledger event of the attempt as the child writes it
EventCallback = Callable[[Event], None]
AttemptProcess = subprocess.Popen[bytes] | ForkedProcess


@dataclass(frozen=True)
class AttemptEnds:
    """The supervisor's ends of an attempt's plumbing, handed to the reader thread."""

    attempt_dir: Path
    logs: AttemptLogs
    #: the run's record as read under the run lock, which settling updates (the lock is held
    #: until then, so no other process writes run.json meanwhile)
    record: RunRecord
    #: settling reads the run's checkpoints with the database's password
    backend: Backend
    #: the values the attempt could read (see ``runner.leak_check``)
    secrets: Mapping[str, str]
    lifeline: int | None = None
    report_fd: int | None = None
    mechanism: str | None = None


class RunHandle:
    """One attempt in progress. ``wait`` blocks; ``outcome`` is ``None`` until it ends."""

    def __init__(
        self,
        folder: RunFolder,
        attempt: int,
        *,
        process: AttemptProcess | None,
        on_event: EventCallback | None,
        finished: RunOutcome | None = None,
    ) -> None:
        self.folder = folder
        self.attempt = attempt
        self.process = process
        self._on_event = on_event
        self._done = threading.Event()
        self._outcome = finished
        self._deadline_hit = False
        #: what stopped the reader thread from settling the attempt (``wait`` raises it)
        self._failure: Exception | None = None
        self._callbacks: list[Callable[[RunOutcome], None]] = []
        self._callbacks_lock = threading.Lock()
        #: this attempt's child has ended (the handle may go on with the run's next attempt)
        self._ended = threading.Event()
        #: asked when the attempt ends ``waiting``: the next attempt, if its wait was answered
        #: while it left (the handle then follows that attempt to the run's end)
        self.continue_with: Callable[[], RunHandle | None] | None = None
        if finished is not None:
            self._done.set()
            self._ended.set()

    def add_done_callback(self, fn: Callable[[RunOutcome], None]) -> None:
        """Call ``fn(outcome)`` when the attempt ends (at once if it already has)."""
        with self._callbacks_lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        if self._outcome is not None:  # (none: its end could not be recorded; see ``wait``)
            fn(self._outcome)

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    @property
    def outcome(self) -> RunOutcome | None:
        return self._outcome if self._done.is_set() else None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until the attempt has ended; ``TimeoutError`` if ``timeout`` passes first.

        ``DiskFullError`` if the disk filled: the run is left ``interrupted`` (recoverable
        once there is room), and the message names the folder.
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} attempt {self.attempt} is still going")
        outcome = self._outcome
        error = (outcome.error or {}) if outcome is not None else {}
        if error.get("code") == codes.DISK_FULL.code:
            raise DiskFullError(str(error.get("message")))
        if outcome is None and self._failure is not None:
            if is_disk_full(self._failure):
                raise DiskFullError(unrecorded_message(self.folder, self.attempt))
            raise self._failure
        assert outcome is not None
        return outcome

    def _signal(self, sig: signal.Signals) -> None:
        # the child leads its own session; the group includes bwrap's inner process
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL the child at once (crash testing); the attempt ends ``interrupted``."""
        self._signal(signal.SIGKILL)

    def cancel(self, grace: float = 3.0) -> RunOutcome:
        """Stop the attempt: SIGINT, then SIGTERM, then SIGKILL, ``grace`` seconds apart."""
        if self.process is not None:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                if self.process.poll() is not None:
                    break
                self._signal(sig)
                try:
                    self.process.wait(grace)
                except subprocess.TimeoutExpired:
                    continue
        return self.wait()

    # -- the reader thread --------------------------------------------------------------------

    def _read(self, pipe_r: int | None, lock: RunLock, ends: AttemptEnds) -> None:
        try:
            report = (
                _read_report(ends.report_fd, ends.mechanism) if ends.report_fd is not None else None
            )
            if pipe_r is not None:
                self._forward(pipe_r)
            assert self.process is not None
            returncode = self.process.wait()
            _wait_for_group(self.process.pid)
            ends.logs.wait()  # the stderr tail is read from the complete, scrubbed log
            end = AttemptExit(
                self.attempt,
                ends.attempt_dir,
                returncode,
                crashed_on_purpose=returncode == CRASH_EXIT_CODE,
                deadline_hit=self._deadline_hit,
                confinement=report,
            )
            try:
                with lend_session(ends.backend, lock.session):  # no new session to settle
                    self._outcome = settle_attempt(
                        self.folder, ends.record, end, on_event=self._on_event,
                        backend=ends.backend, secrets=ends.secrets,
                    )  # fmt: skip
            except Exception as exc:
                # the disk filled: run.json still says the run ends interrupted (the lock is
                # held), in the room the reserve kept, so no run is left "running" unattended
                self._failure = exc
                if is_disk_full(exc):
                    self._outcome = record_disk_full(self.folder, ends.record, end)
        except Exception as exc:  # told to the caller by ``wait``, never a thread's traceback
            self._failure = self._failure or exc
        finally:
            release_space(ends.attempt_dir)
            lock.release()
            if ends.lifeline is not None:
                os.close(ends.lifeline)
            self._ended.set()
            if not self._go_on():
                self._complete(self._outcome)

    def _go_on(self) -> bool:
        """After a ``waiting`` end: follow the next attempt if the wait was answered meanwhile."""
        if self._outcome is None or self._outcome.status != "waiting":
            return False
        if self.continue_with is None:
            return False
        try:
            nxt = self.continue_with()
        except Exception:
            return False
        if nxt is None:
            return False
        self.attempt, self.process = nxt.attempt, nxt.process
        nxt.add_done_callback(self._complete)
        return True

    def _complete(self, outcome: RunOutcome | None) -> None:
        with self._callbacks_lock:
            self._outcome = outcome
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            if outcome is not None:
                with contextlib.suppress(Exception):  # a view's bug must not hide the end
                    fn(outcome)

    def _forward(self, pipe_r: int) -> None:
        """Hand each live event from the child to ``on_event`` until the child closes the pipe."""
        with os.fdopen(pipe_r, "rb") as stream:
            for line in stream:
                if self._on_event is None:
                    continue
                event = decode_event(line)
                if event is None:
                    continue
                with contextlib.suppress(Exception):  # a view's bug must not stop the run
                    self._on_event(event)

    def _watch_deadline(self, deadline_ms: float) -> None:
        remaining = (deadline_ms - now_ms()) / 1000
        if self._ended.wait(max(remaining, 0)):
            return
        self._deadline_hit = True
        self.cancel(grace=2.0)


def _read_report(fd: int, mechanism: str | None) -> dict[str, Any]:
    """The child's confinement check, sent before the relay was imported (see runner.confine)."""
    # one line: bwrap keeps a copy of the pipe open, and only the child's first line counts
    with os.fdopen(fd, "rb") as stream:
        data = stream.readline(64 * 1024)
    try:
        report = json.loads(data)
    except ValueError:
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("confined"), bool):
        why = "the child ended before reporting its confinement check"
        return {"confined": False, "mechanism": mechanism, "reason": why}
    return report


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies have let go of files)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _wait_for_group(pgid: int, timeout: float = 10.0) -> None:
    """Wait until no process of the child's group is left running.

    Under bubblewrap the process we waited for is bwrap; the relay's interpreter dies just
    after it and holds the run lock until the kernel has torn it down. Settling (and any
    recovery) must not start before that, or the next attempt would find the run locked.
    A zombie has already closed its files, so it counts as gone.
    """
    deadline = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)
