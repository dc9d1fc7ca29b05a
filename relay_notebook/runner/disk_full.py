"""A disk that fills during an attempt: room kept aside to record the run ``interrupted``.

Design note: settling an attempt writes the ledger, the trace and run.json. When the disk
fills during the attempt (a relay's step, another program), those writes fail and the run
would stay ``running`` with no process. So each attempt's supervisor sets a small reserve
aside before the child starts (``reserve_space``); if settling meets a full disk, the reserve
is deleted and run.json is rewritten in its room: the attempt ``interrupted``, coded
``disk-full``, recoverable as soon as there is space. The reserve goes when the attempt ends.
A new run keeps one more reserve in its ``.relay_ipc`` from its record to its first attempt's
start: a disk that fills in between (the template copy, the attempt's folders, its spec) ends
the start with the run recorded ``interrupted`` there (``record_start_disk_full``), never
``pending`` or ``running`` with no process. A child that meets a full disk before its outcome is
written exits with ``DISK_FULL_EXIT_CODE``, which settling reads as the same.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from relay_notebook.errors import DiskFullError, codes
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import EventWriter, now_ms, read_events
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.outcome import AttemptExit, RunOutcome, full_message, write_trace

__all__ = [
    "RESERVE_BYTES",
    "full_message",
    "record_disk_full",
    "record_start_disk_full",
    "release_space",
    "reserve_space",
    "unrecorded_message",
]

#: room for run.json, the ledger's last line and the trace of a run of a few hundred steps
RESERVE_BYTES = 256 * 1024
_RESERVE = "reserve"


def reserve_space(attempt_dir: Path, take_from: Path | None = None) -> None:
    """Set ``RESERVE_BYTES`` aside in ``attempt_dir`` (none if the disk has no room now):
    the reserve in ``take_from`` if there is one (a new run's, moved: no room is given back
    to the disk in between), else a new one."""
    path = attempt_dir / _RESERVE
    if take_from is not None:
        try:
            os.rename(take_from / _RESERVE, path)
            return
        except OSError:
            pass
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


def record_start_disk_full(
    folder: RunFolder, record: RunRecord, attempt: int, attempt_dir: Path | None
) -> DiskFullError | None:
    """A full disk stopped attempt ``attempt`` before its child ran: a new run (``pending``)
    or the begun attempt is recorded ``interrupted`` (``disk-full``) in the reserves' room;
    the error to raise, or ``None`` when the record was not the start's to change (a recovery
    refused before it began: the run is as it was). Call with the run lock held."""
    release_space(folder.ipc)
    if attempt_dir is not None:
        release_space(attempt_dir)
    entry = record.attempt_entry(attempt)
    begun = entry is not None and not entry.ended
    if not begun and record.status != "pending":
        return None
    message = (
        f"The disk holding {folder.path} is full: attempt {attempt} of run {folder.run_id} "
        f"could not start, and the run is interrupted. Free space there "
        f"(df -h {folder.path}), then recover it with: relay recover {folder.run_id}"
    )
    try:
        if entry is not None and begun:
            entry.end(
                ended_at=now_ms(), returncode=None, status="interrupted", executed=[], reused=[]
            )
        record.status, record.error = "interrupted", codes.DISK_FULL.record(message)
        record.raw["waiting"] = None
        record.save(folder)
    except OSError:
        return DiskFullError(unrecorded_message(folder, attempt))
    return DiskFullError(message)


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
