"""A disk that fills during an attempt: room kept aside to record the run ``interrupted``.

Design note: settling an attempt writes the ledger, the trace and run.json. When the disk
fills during the attempt (a relay's step, another program), those writes fail and the run
would stay ``running`` with no process. So each attempt's supervisor sets a small reserve
aside before the child starts (``reserve_space``); if settling meets a full disk, the reserve
is deleted and run.json is rewritten in its room: the attempt ``interrupted``, coded
``disk-full``, recoverable as soon as there is space. The reserve goes when the attempt ends.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from relay_notebook.errors import codes
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import EventWriter, now_ms, read_events
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.outcome import AttemptExit, RunOutcome, write_trace

__all__ = [
    "RESERVE_BYTES",
    "full_message",
    "record_disk_full",
    "release_space",
    "reserve_space",
    "unrecorded_message",
]

#: room for run.json, the ledger's last line and the trace of a run of a few hundred steps
RESERVE_BYTES = 256 * 1024
_RESERVE = "reserve"


def reserve_space(attempt_dir: Path) -> None:
    """Set ``RESERVE_BYTES`` aside in ``attempt_dir`` (none if the disk has no room now)."""
    path = attempt_dir / _RESERVE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
    finally:
        os.close(fd)


def release_space(attempt_dir: Path) -> None:
    """Give the attempt's reserve back to the disk."""
    with contextlib.suppress(OSError):
        (attempt_dir / _RESERVE).unlink()


def full_message(folder: RunFolder, attempt: int) -> str:
    """Why the attempt stopped and what to type next."""
    return (
        f"The disk holding {folder.path} is full: attempt {attempt} of run {folder.run_id} "
        f"stopped, and the run is interrupted with its checkpoints kept. Free space there "
        f"(df -h {folder.path}), then recover it with: relay recover {folder.run_id}"
    )


def unrecorded_message(folder: RunFolder, attempt: int) -> str:
    """What to say when even the reserve could not hold the attempt's end."""
    return (
        f"The disk holding {folder.path} is full: attempt {attempt} of run {folder.run_id} "
        f"ended, but its end could not be recorded, so relay runs shows it running until it "
        f"is recovered. Its checkpoints are kept. Free space there (df -h {folder.path}), then "
        f"recover it with: relay recover {folder.run_id}"
    )


def record_disk_full(folder: RunFolder, record: RunRecord, end: AttemptExit) -> RunOutcome | None:
    """Record ``end`` as ``interrupted`` (``disk-full``) in run.json, in the reserve's room;
    ``None`` if even that could not be written. Call with the run lock held."""
    release_space(end.attempt_dir)
    error = codes.DISK_FULL.record(full_message(folder, end.attempt))
    entry = record.attempt_entry(end.attempt)
    try:
        if entry is not None:
            entry.end(
                ended_at=now_ms(),
                returncode=end.returncode,
                status="interrupted",
                executed=entry.executed,
                reused=entry.reused,
            )
        record.status, record.error = "interrupted", error
        record.raw["waiting"] = None
        record.save(folder)
    except OSError:
        return None
    # then, as room allows: the ledger's end of the attempt, the trace
    with contextlib.suppress(OSError):
        ended = any(
            e.get("kind") == "attempt_end" and e.get("attempt") == end.attempt
            for e in read_events(folder.events)
        )
        if not ended:
            writer = EventWriter(folder.events, run_id=folder.run_id, attempt=end.attempt)
            try:
                writer.emit(
                    "attempt_end", status="interrupted", returncode=end.returncode,
                    exit="disk full", executed=entry.executed if entry else [],
                    reused=entry.reused if entry else [], error_code=codes.DISK_FULL.code,
                )  # fmt: skip
            finally:
                writer.close()
        write_trace(folder, record)
    return RunOutcome(folder.run_id, folder.relay, "interrupted", end.attempt, error=error)
