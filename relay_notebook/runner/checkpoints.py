"""Refusing an attempt whose checkpoints were lost (the check itself is ``record.checkpoints``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_notebook.record.backend import Backend
from relay_notebook.record.checkpoints import find_lost_checkpoints
from relay_notebook.record.run_record import RunRecord

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder

__all__ = ["guard_checkpoints"]


def guard_checkpoints(
    folder: RunFolder, record: RunRecord, backend: Backend | None, *, accept: bool
) -> None:
    """Refuse the next attempt of a run whose checkpoints were lost, unless ``accept``.

    Accepting records what will run again in the ledger and sets an unreadable SQLite file
    (with its WAL and shared memory) aside in ``.relay_dbos/lost-<ms>/``, so that DBOS starts
    from an empty database; call it under the run lock.
    """
    from relay_notebook.errors import CheckpointsLostError
    from relay_notebook.record.ledger import EventWriter, now_ms

    lost = find_lost_checkpoints(folder, record, backend)
    if lost is None:
        return
    attempts = record.attempts_used
    if not accept:
        raise CheckpointsLostError(lost.message(folder.run_id))
    kept = None
    if lost.unreadable:
        kept = folder.dbos_dir / f"lost-{int(now_ms())}"
        kept.mkdir()
        for part in (folder.database, *(folder.database.with_name(folder.database.name + s)
                                         for s in ("-wal", "-shm"))):  # fmt: skip
            if part.exists():
                part.rename(kept / part.name)
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=attempts)
    try:
        writer.emit(
            "checkpoints_lost_accepted",
            where=lost.where,
            problem=lost.problem,
            function_ids=[fid for fid, _ in lost.missing],
            set_aside=str(kept) if kept else None,
        )
    finally:
        writer.close()
