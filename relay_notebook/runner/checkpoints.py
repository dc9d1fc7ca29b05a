"""Read-only access to a run's DBOS checkpoints, in its SQLite file or in PostgreSQL."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay_notebook.runner.backend import backend_for_run, open_postgres_run

if TYPE_CHECKING:
    from relay_notebook.runner.folders import RunFolder

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


@contextlib.contextmanager
def _open(folder: RunFolder) -> Iterator[Any]:
    backend = backend_for_run(folder.read_meta())
    if backend.is_postgres:
        with open_postgres_run(backend, folder.run_id) as reader:
            yield reader
        return
    if not folder.database.exists():
        yield None
        return
    conn = sqlite3.connect(f"file:{folder.database}?mode=ro", uri=True, timeout=5)
    try:
        yield conn
    finally:
        conn.close()


def read_checkpoints(folder: RunFolder) -> list[Checkpoint]:
    """Every checkpoint of the run's workflow in function-id order ([] if none yet)."""
    try:
        with _open(folder) as conn:
            if conn is None:
                return []
            rows = conn.execute(
                "SELECT function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, "
                "error IS NOT NULL, child_workflow_id FROM operation_outputs "
                "WHERE workflow_uuid = ? ORDER BY function_id",
                (folder.run_id,),
            ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [Checkpoint(int(r[0]), str(r[1]), r[2], r[3], bool(r[4]), r[5]) for r in rows]


_STATUS_COLUMNS = (
    "status",
    "recovery_attempts",
    "application_version",
    "executor_id",
    "created_at",
    "updated_at",
)


def read_workflow_status(folder: RunFolder) -> dict[str, object] | None:
    """DBOS's status row for the run (status, recovery_attempts, version...), or None."""
    try:
        with _open(folder) as conn:
            if conn is None:
                return None
            row = conn.execute(
                f"SELECT {', '.join(_STATUS_COLUMNS)} FROM workflow_status WHERE workflow_uuid = ?",
                (folder.run_id,),
            ).fetchone()
    except sqlite3.OperationalError:
        return None
    return dict(zip(_STATUS_COLUMNS, row, strict=True)) if row is not None else None
