"""Read-only access to a run's DBOS checkpoints in its SQLite file (never ``DBOS.launch``)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Checkpoint", "read_checkpoints", "read_workflow_status"]


@dataclass(frozen=True)
class Checkpoint:
    """One row of DBOS's ``operation_outputs``: a step's saved outcome."""

    function_id: int
    name: str
    started_at_ms: int | None
    completed_at_ms: int | None
    failed: bool
    child_workflow_id: str | None


def _connect(database: Path) -> sqlite3.Connection | None:
    if not database.exists():
        return None
    return sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)


def read_checkpoints(database: Path, workflow_id: str) -> list[Checkpoint]:
    """Every checkpoint of ``workflow_id`` in function-id order ([] if none yet)."""
    conn = _connect(database)
    if conn is None:
        return []
    try:
        rows = conn.execute(
            "SELECT function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, "
            "error IS NOT NULL, child_workflow_id FROM operation_outputs "
            "WHERE workflow_uuid = ? ORDER BY function_id",
            (workflow_id,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [Checkpoint(int(r[0]), str(r[1]), r[2], r[3], bool(r[4]), r[5]) for r in rows]


def read_workflow_status(database: Path, workflow_id: str) -> dict[str, object] | None:
    """DBOS's status row for ``workflow_id`` (status, recovery_attempts, version...), or None."""
    conn = _connect(database)
    if conn is None:
        return None
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute(
            "SELECT status, recovery_attempts, application_version, executor_id, created_at, "
            "updated_at FROM workflow_status WHERE workflow_uuid = ?",
            (workflow_id,),
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return dict(row) if row is not None else None
