"""A run's DBOS checkpoints read through the one opener (``record.store``), and the lost check."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend, backend_for_run
from relay_notebook.record.ledger import read_events
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import open_database, open_postgres_run, open_run_database

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder

__all__ = [
    "Checkpoint",
    "LostCheckpoints",
    "find_lost_checkpoints",
    "read_checkpoints",
    "read_workflow_status",
]


@dataclass(frozen=True)
class Checkpoint:
    """One row of DBOS's ``operation_outputs``: a step's saved outcome."""

    function_id: int
    name: str
    started_at_ms: int | None
    completed_at_ms: int | None
    failed: bool
    child_workflow_id: str | None


def read_checkpoints(
    folder: RunFolder,
    backend: Backend | None = None,
    *,
    live: bool = True,
    record: RunRecord | None = None,
) -> list[Checkpoint]:
    """Every checkpoint of the run's workflow in function-id order ([] if none yet).

    ``live``: an attempt may be writing now (see ``record.store``); pass ``False`` once it ended.
    ``record``: the run's record if the caller has it (else run.json is read for its database).
    """
    record = RunRecord.load(folder) if record is None else record
    try:
        with open_run_database(folder, record, live=live, backend=backend) as conn:
            if conn is None:
                return []
            rows = conn.execute(dbos_tables.CHECKPOINTS, (folder.run_id,)).fetchall()
    except sqlite3.OperationalError:
        return []
    return [Checkpoint(int(r[0]), str(r[1]), r[2], r[3], bool(r[4]), r[5]) for r in rows]


def read_workflow_status(
    folder: RunFolder, backend: Backend | None = None, *, live: bool = True
) -> dict[str, object] | None:
    """DBOS's status row for the run (status, recovery_attempts, version...), or None."""
    try:
        with open_run_database(folder, RunRecord.load(folder), live=live, backend=backend) as conn:
            if conn is None:
                return None
            row = conn.execute(dbos_tables.STATUS, (folder.run_id,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return dict(zip(dbos_tables.STATUS_COLUMNS, row, strict=True)) if row is not None else None


@dataclass(frozen=True)
class LostCheckpoints:
    """Checkpoints the run's own records say DBOS saved, and that its database lacks."""

    where: str
    problem: str
    missing: tuple[tuple[int, str], ...]
    unreadable: bool = False

    def describe(self) -> str:
        """``load (function id 1), square #2 (function id 3)``."""
        return ", ".join(f"{name} (function id {fid})" for fid, name in self.missing)

    def message(self, run_id: str) -> str:
        """Why recovery of ``run_id`` is refused, and the two ways on."""
        return (
            f"Cannot recover run {run_id}: {self.where} {self.problem}, but the run's records "
            f"show these steps checkpointed: {self.describe()}. Recovering now would run them "
            f"again. Restore the database from a backup, or run them again on purpose with: "
            f"relay recover {run_id} --accept-lost-checkpoints"
        )


def _recorded(folder: RunFolder, record: RunRecord) -> tuple[set[int], dict[int, str]]:
    """Function ids the supervisor saw checkpointed (run.json), and step names the ledger gives.

    The ids come from DBOS itself, read by the supervisor as each attempt ended; the ledger's
    ``step_end`` events only name them (a kill between a step's end and its checkpoint leaves a
    ``step_end`` without a checkpoint, so those alone never prove a checkpoint was written).
    """
    saved: set[int] = set()
    for a in record.attempts:
        saved.update(a.executed, a.reused)
    names: dict[int, str] = {}
    counts: dict[str, int] = {}
    for e in read_events(folder.events):
        if e.get("kind") != "step_end" or e.get("workflow_id") != folder.run_id:
            continue
        fid, step = e.get("step_id"), str(e.get("step"))
        if isinstance(fid, int) and fid not in names:
            counts[step] = counts.get(step, 0) + 1
            names[fid] = step if counts[step] == 1 else f"{step} #{counts[step]}"
    return saved, names


def _store(
    folder: RunFolder, record: RunRecord, backend: Backend | None
) -> tuple[str, set[int] | None, str | None]:
    """Where the run's checkpoints live, the function ids saved there, and what is wrong."""
    backend = backend_for_run(record, backend)
    if backend.is_postgres:
        where = f"the PostgreSQL database {backend.display}"
        with open_postgres_run(backend, folder.run_id) as reader:
            if reader is None:
                return where, None, "holds no DBOS tables"
            return where, _saved_ids(reader, folder.run_id), None
    where = str(folder.database)
    if not folder.database.is_file():
        return where, None, "is missing"
    try:
        with open_database(folder.database, live=False) as conn:
            return where, _saved_ids(conn, folder.run_id), None
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return where, None, "holds no DBOS tables (it was emptied or replaced)"
        return where, None, f"cannot be read ({exc})"
    except sqlite3.DatabaseError as exc:
        return where, None, f"cannot be read ({exc})"


def _saved_ids(conn: Any, run_id: str) -> set[int] | None:
    """The workflow's checkpointed function ids, or ``None`` if DBOS has no such workflow."""
    row = conn.execute(dbos_tables.STATUS_ONLY, (run_id,)).fetchone()
    if row is None:
        return None
    rows = conn.execute(dbos_tables.FUNCTION_IDS, (run_id,)).fetchall()
    return {int(r[0]) for r in rows}


def find_lost_checkpoints(
    folder: RunFolder,
    record: RunRecord,
    backend: Backend | None = None,
) -> LostCheckpoints | None:
    """Compare DBOS's checkpoints with the run's own records before an attempt; ``None`` if
    every checkpoint they name is there (or nothing was ever checkpointed).

    A missing or unreadable database, one without the workflow although steps of it ended, or
    one without a checkpoint the supervisor saw: DBOS would run those steps again silently.
    Called before an attempt, when none is live: the SQLite file is opened so that no byte of
    the run folder changes (the recovery preview reads it the same way).
    """
    saved, names = _recorded(folder, record)
    if not saved and not names:
        return None
    where, present, problem = _store(folder, record, backend)
    if problem is None and present is None:
        problem = f"has no record of workflow {folder.run_id}"
    expected = saved | set(names) if present is None else saved - present
    if not expected:
        return None
    missing = tuple((fid, names.get(fid, "a step")) for fid in sorted(expected))
    if problem is None:
        problem = f"lacks {len(missing)} of them"
    return LostCheckpoints(where, problem, missing, problem.startswith("cannot be read"))
