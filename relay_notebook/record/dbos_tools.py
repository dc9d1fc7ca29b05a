"""What DBOS's own tools (``dbos workflow fork|cancel|resume``) did to a run's database.

Design note: DBOS's CLI writes ``workflow_status`` rows directly, beside the kit. ``fork``
adds a root workflow ENQUEUED on DBOS's internal queue (``forked_from`` names the workflow it
copied), ``cancel`` sets a workflow CANCELLED, ``resume`` sets it ENQUEUED again. The kit's
next attempt launches DBOS on the run's database, and DBOS's queue runs every ENQUEUED row it
may dequeue: a fork would run inside the run's attempt, unseen. So whenever the kit opens a
run (to recover it, to list it, to show its logs) it reads the rows here and compares them
with its record: a root workflow that is not the run's own was made outside the kit (the
run's children, and a kit fork's copied children, all have a parent), and the run's own
workflow CANCELLED means DBOS will not run it. ``record.rules`` decides what to do with it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from relay_notebook.errors import RelayError, RunRecordDamagedError
from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend, backend_for_run, workspace_backend
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import open_run_database

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder
    from relay_notebook.workspace import Workspace

__all__ = [
    "RUNNABLE",
    "DbosTools",
    "OutsideWorkflow",
    "RunDatabases",
    "cancelled_message",
    "inspect_run",
    "outside_message",
    "read_dbos_tools",
    "resumed_message",
    "shown_status",
]

#: DBOS statuses a launch may run (its queue dequeues ENQUEUED; recovery takes PENDING)
RUNNABLE: Final = frozenset({"ENQUEUED", "PENDING", "DELAYED"})


@dataclass(frozen=True)
class OutsideWorkflow:
    """A root workflow in a run's database that the kit did not make."""

    workflow_id: str
    status: str
    #: the workflow it was forked from (``dbos workflow fork``), if any
    forked_from: str | None

    @property
    def runnable(self) -> bool:
        return self.status in RUNNABLE

    def describe(self) -> str:
        """``copy-1 (ENQUEUED, forked from invoice-3 with dbos workflow fork)``."""
        if self.forked_from is not None:
            made = f"forked from {self.forked_from} with dbos workflow fork"
        else:
            made = "made outside the kit"
        return f"{self.workflow_id} ({self.status}, {made})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "status": self.status,
            "forked_from": self.forked_from,
        }


@dataclass(frozen=True)
class DbosTools:
    """DBOS's own view of a run beside the kit's: its workflow's status, and the workflows in
    its database that the kit did not make."""

    #: DBOS's status of the run's own workflow (``None``: no row yet)
    run_status: str | None = None
    outside: tuple[OutsideWorkflow, ...] = ()
    #: the ``-s`` value DBOS's CLI takes for this database (a PostgreSQL URL is the user's
    #: own, with its password, so it is never written out)
    url: str = "DATABASE_URL"

    @property
    def cancelled(self) -> bool:
        """The run's workflow was cancelled in DBOS (``dbos workflow cancel``)."""
        return self.run_status == "CANCELLED"

    @property
    def resumed(self) -> bool:
        """The run's workflow is runnable in DBOS (``dbos workflow resume`` re-enqueues even a
        workflow DBOS gave up on, MAX_RECOVERY_ATTEMPTS_EXCEEDED)."""
        return self.run_status in RUNNABLE

    @property
    def runnable(self) -> tuple[OutsideWorkflow, ...]:
        """The outside workflows DBOS would run in the kit's next attempt."""
        return tuple(w for w in self.outside if w.runnable)


def read_dbos_tools(conn: Any, run_id: str, url: str = "DATABASE_URL") -> DbosTools:
    """The rows of an open run database (``record.store``) as ``DbosTools``."""
    rows = conn.execute(dbos_tables.WORKFLOW_ORIGINS).fetchall()
    status = next((str(r[1]) for r in rows if r[0] == run_id), None)
    outside = tuple(
        OutsideWorkflow(str(r[0]), str(r[1]), None if r[3] is None else str(r[3]))
        for r in rows
        if r[0] != run_id and r[2] is None
    )
    return DbosTools(status, outside, url)


def shown_status(status: str, found: DbosTools, *, live: bool = False) -> str:
    """The run's status as the kit shows it: ``cancelled`` once DBOS's tool cancelled an
    unfinished run (the kit's record says how its last attempt ended, DBOS what comes next)."""
    if found.cancelled and not live and status not in ("succeeded", "failed", "running"):
        return "cancelled"
    return status


def inspect_run(
    folder: RunFolder,
    record: RunRecord,
    backend: Backend | None = None,
    *,
    live: bool = False,
) -> DbosTools:
    """``read_dbos_tools`` on ``folder``'s database (nothing found: no database or no tables
    yet, or one that cannot be read, which the lost-checkpoint check reports, or one the
    relay replaced by a link, which is not opened and fails the run as its attempt settles)."""
    url = "DATABASE_URL"
    if not backend_for_run(record, backend).is_postgres:
        url = f"sqlite:///{folder.database}"
    try:
        with open_run_database(folder, record, live=live, backend=backend) as conn:
            return DbosTools(url=url) if conn is None else read_dbos_tools(conn, folder.run_id, url)
    except (sqlite3.DatabaseError, RunRecordDamagedError):
        return DbosTools(url=url)


class RunDatabases:
    """``inspect_run`` for the runs one listing shows (``relay runs``, a lineage tree): a run's
    SQLite file, or for a run on PostgreSQL its rows through the workspace's database setting
    (which holds the password). A PostgreSQL server that cannot be reached is tried once per
    listing: its runs read as nothing found, so they keep the status their record holds."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._backend: Backend | None = None
        self._unreachable: set[str] = set()

    def inspect(self, folder: RunFolder, record: RunRecord) -> DbosTools:
        """What DBOS's tools left in ``record``'s run database."""
        if not record.database:
            return inspect_run(folder, record)
        database = str(record.database.get("url"))
        if database in self._unreachable:
            return DbosTools()
        try:
            if self._backend is None:
                self._backend = workspace_backend(self._workspace)
            return inspect_run(folder, record, self._backend)
        except RelayError:  # the server is down, or the setting unusable: nothing found
            self._unreachable.add(database)
            return DbosTools()


def outside_message(record: RunRecord, found: DbosTools) -> str:
    """Why the next attempt of the run is refused while an outside workflow could run."""
    run_id, verb = record.run_id, "recover" if record.attempts else "start"
    workflows = found.runnable
    names = "; ".join(w.describe() for w in workflows)
    which = "a workflow" if len(workflows) == 1 else "workflows"
    url = found.url
    cancels = " and ".join(f"dbos workflow cancel {w.workflow_id} -s {url}" for w in workflows)
    return (
        f"Cannot {verb} run {run_id}: its DBOS database holds {which} the kit did not make: "
        f"{names}. DBOS would run {'it' if len(workflows) == 1 else 'them'} inside the run's "
        f"next attempt, unseen by the kit. Cancel with: {cancels}, then relay recover "
        f"{run_id}. To run the run again from a step, fork it with the kit: relay fork "
        f"{run_id} --from CALL"
    )


def cancelled_message(record: RunRecord, found: DbosTools) -> str:
    """What a run cancelled with ``dbos workflow cancel`` is, and the two ways on."""
    run_id = record.run_id
    return (
        f"Run {run_id} was cancelled with DBOS's own tool (its workflow is CANCELLED in DBOS), "
        f"so DBOS will not run it: recovering it runs nothing. Resume it with: dbos workflow "
        f"resume {run_id} -s {found.url}, then relay recover {run_id}; or start a new run "
        f"with: relay run {record.relay}"
    )


def resumed_message(record: RunRecord, found: DbosTools) -> str:
    """A finished run whose workflow DBOS's tool made runnable again: the kit keeps it finished."""
    run_id = record.run_id
    return (
        f"Run {run_id} {record.status}, though its workflow was re-enqueued with DBOS's own tool "
        f"(DBOS says {found.run_status}, as after dbos workflow resume): the kit does not run a "
        f"finished run again, so recovering it runs nothing. Keep its completed steps by forking "
        f"it: relay fork {run_id} --from CALL, or start a new run with: relay run {record.relay}"
    )
