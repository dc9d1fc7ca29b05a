"""The run's event ledger, ``dbos_events.jsonl``: the kit's own events and DBOS log records.

Design note: DBOS keeps only each step's final output and no "reused" flag, so the runner
records what happened itself. Each event is one JSON line written with a single ``write`` on
an ``O_APPEND`` descriptor: a process killed mid-run loses at most the line it was writing
(readers skip a torn last line), and lines reach the OS page cache at once, so they survive
``os._exit`` and SIGKILL. Sequence numbers increase across attempts. Writers in different
processes (the child, its supervisor, a refused ``recover`` next door) serialise on a ``flock``
of the ledger itself and number from what is on disk, so no writer needs the run lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from relay_notebook.workspace.files import write_bytes_atomic

__all__ = [
    "EventWriter",
    "check_events",
    "now_ms",
    "read_events",
    "write_json_atomic",
]


def now_ms() -> float:
    """Wall-clock milliseconds since the epoch, to 0.1 ms (DBOS stores whole ms)."""
    return round(time.time() * 1000, 1)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(path, text.encode())


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete event in ``path`` (missing file → none; a torn last line is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def check_events(events: list[dict[str, Any]], run_id: str, where: Path) -> list[dict[str, Any]]:
    """``events`` if they belong to ``run_id`` with sequence numbers 1, 2, 3...; else raise.

    A ledger with a gap or another run's events cannot be trusted to say what happened.
    """
    from relay_notebook.errors import LedgerCorruptError

    for expected, event in enumerate(events, start=1):
        if event.get("run_id") != run_id:
            raise LedgerCorruptError(
                f"The ledger {where} holds an event of run {event.get('run_id')!r} (seq "
                f"{event.get('seq')}), not of run {run_id}; it was copied or edited by hand."
            )
        if event.get("seq") != expected:
            raise LedgerCorruptError(
                f"The ledger {where} skips from event {expected - 1} to {event.get('seq')}; "
                f"events are missing, so the run's history cannot be trusted."
            )
    return events


class EventWriter:
    """Appends tagged events to the ledger and, optionally, mirrors them to a live pipe.

    Any number of writers, in any processes, may hold the ledger open: each append takes an
    exclusive ``flock`` on the ledger and, if another writer appended since, numbers on from
    the ledger as it is now, so sequence numbers never collide.
    """

    def __init__(
        self, path: Path, *, run_id: str, attempt: int, pipe_fd: int | None = None
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.attempt = attempt
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pipe_fd = pipe_fd
        #: applied to every line before it is written (the child scrubs vault values)
        self.scrub: Callable[[str], str] | None = None
        self._seq = 0
        self._size = -1  # the ledger's size after this writer's last append
        with self._locked():
            self._catch_up()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _catch_up(self) -> None:
        """Under the lock: if the ledger grew behind this writer's back, count it again."""
        size = os.fstat(self._fd).st_size
        if size == self._size:
            return
        self._seq = len(read_events(self.path))
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    os.write(self._fd, b"\n")  # end a line torn by a killed writer
                    size += 1
        self._size = size

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Write one event now; returns it as written."""
        with self._locked():
            self._catch_up()
            self._seq += 1
            event = {
                "seq": self._seq,
                "ts": now_ms(),
                "run_id": self.run_id,
                "attempt": self.attempt,
                "kind": kind,
                **fields,
            }
            text = json.dumps(event, default=repr, separators=(",", ":"))
            if self.scrub is not None:
                text = self.scrub(text)
            line = (text + "\n").encode()
            written = os.write(self._fd, line)
            self._size = -1 if written != len(line) else self._size + written
        if self._pipe_fd is not None:
            try:
                os.write(self._pipe_fd, line)
            except OSError:
                self._pipe_fd = None  # the supervisor went away; the file still has it
        return event

    def sync(self) -> None:
        """Make every event so far durable on disk."""
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
