"""The worker pool seen from outside: queueing runs, waiting for them, listing workers.

A queued run is a run folder (``create_run``) plus one *invocation*: a workflow of the kit's
own DBOS application ``relay-worker`` on the DBOS queue ``relay-runs``, enqueued with
``DBOSClient`` for ``relay worker`` processes to take (see ``runner.worker``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from relay_notebook.errors import DatabaseUnavailableError
from relay_notebook.record import dbos_tables
from relay_notebook.runner.backend import KIT_SCHEMA, Backend, connect
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.dbos_private import client_engine, run_client_migrations
from relay_notebook.runner.queue_wake import CHANNEL

__all__ = [
    "INVOCATION",
    "QUEUE",
    "WORKER_APP",
    "WORKER_VERSION",
    "WorkerInfo",
    "enqueue_run",
    "invocation_id",
    "list_workers",
    "resume_invocation_id",
    "wait_for_invocation",
]

QUEUE = "relay-runs"
WORKER_APP = "relay-worker"
#: the DBOS application version of every worker: DBOS dequeues only rows of a worker's own
#: version, so it names the invocation protocol, not a release
WORKER_VERSION = "relay-worker-1"
INVOCATION = "relay_invocation"
_FINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


def invocation_id(run_id: str, n: int = 1) -> str:
    """The DBOS workflow id of a run's ``n``-th invocation (``invoice-3.invocation-1``)."""
    return f"{run_id}.invocation-{n}"


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def _client(backend: Backend) -> Any:
    """One ``DBOSClient`` per database for this process, its DBOS tables made sure of once."""
    from dbos import DBOSClient

    key = backend.url or ""
    with _clients_lock:
        if key in _clients:
            return _clients[key]
        try:
            client = DBOSClient(system_database_url=backend.dbos_url, application_name=WORKER_APP)
            # DBOS's tables at their latest version, before any worker ran (the client never
            # migrates by itself). DBOS serialises migrations on an advisory lock and skips
            # them when the schema is current, so this is safe while a worker is starting.
            run_client_migrations(client)
        except Exception as exc:  # DBOS wraps driver errors in several types
            raise DatabaseUnavailableError(
                f"Cannot use PostgreSQL at {backend.display}: {backend.scrub(str(exc))}"
            ) from None
        _clients[key] = client
        return client


def ensure_dbos_schema(backend: Backend) -> None:
    """DBOS's tables in ``backend`` at their latest version, made sure of by this process.

    Run before a child starts: a child that migrates a fresh database itself can deadlock with
    the supervisor reading its rows (PostgreSQL then aborts the child's migration).
    """
    _client(backend)


def resume_invocation_id(run_id: str, attempt: int) -> str:
    """The invocation that resumes a waiting run as its attempt ``attempt`` (one per attempt:
    two workers that find the run due enqueue the same workflow, which DBOS keeps once)."""
    return f"{run_id}.resume-{attempt}"


def enqueue_run(
    backend: Backend,
    run_id: str,
    *,
    crash: CrashSpec | None = None,
    n: int = 1,
    workflow_id: str | None = None,
) -> str:
    """Put run ``run_id`` (already created) on the workers' queue; returns the invocation id."""
    import sqlalchemy as sa

    workflow_id = workflow_id or invocation_id(run_id, n)
    client = _client(backend)
    client.enqueue(
        {
            "queue_name": QUEUE,
            "workflow_name": INVOCATION,
            "workflow_id": workflow_id,
            "app_version": WORKER_VERSION,
        },
        {"run_id": run_id, "crash": crash.to_dict() if crash else None},
    )
    # the workers take it now rather than at their next poll (runner.queue_wake); on the
    # client's pooled session, which the enqueue just used. The run is queued already: were
    # this to fail, a worker's regular poll takes it
    with contextlib.suppress(sa.exc.SQLAlchemyError), client_engine(client).begin() as conn:
        conn.execute(sa.text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
    return workflow_id


def wait_for_invocation(
    backend: Backend, workflow_id: str, timeout: float | None = None, *, run_id: str
) -> dict[str, Any] | None:
    """The outcome a worker returned for run ``run_id``'s invocation ``workflow_id``; ``None``
    if ``timeout`` passed first."""
    import sqlalchemy as sa

    deadline = None if timeout is None else time.monotonic() + timeout
    client = _client(backend)
    # polled on the client's pooled connections: a session of its own per wait would cost the
    # server about 9 ms of CPU for each queued run
    engine = client_engine(client)
    query = sa.text(dbos_tables.PG_STATUS_BY_ID)
    while True:
        try:
            with engine.connect() as conn:
                row = conn.execute(query, {"id": workflow_id}).fetchone()
        except sa.exc.OperationalError as exc:  # the server went away while we waited
            raise DatabaseUnavailableError(
                f"Lost PostgreSQL at {backend.display} while waiting for run {run_id}: "
                f"{backend.sentence(str(exc.orig or exc))}The run is kept in the database; start "
                f"the server, then wait again with: relay wait {run_id}"
            ) from None
        if row is not None and row[0] in _FINAL:
            break
        if deadline is not None and time.monotonic() > deadline:
            return None
        time.sleep(0.1)
    result: dict[str, Any] = client.retrieve_workflow(workflow_id).get_result()
    return result


@dataclass(frozen=True)
class WorkerInfo:
    """One worker's lease: alive while ``expires_in_s`` is positive."""

    executor_id: str
    host: str
    pid: int
    concurrency: int
    heartbeat_age_s: float
    expires_in_s: float
    running: int

    @property
    def alive(self) -> bool:
        return self.expires_in_s > 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "alive": self.alive}


def list_workers(backend: Backend) -> list[WorkerInfo]:
    """Every worker that holds or held a lease, with the runs it is executing."""
    import psycopg

    try:
        conn = connect(backend)
    except DatabaseUnavailableError as exc:
        if "does not exist" in exc.message:
            return []  # nothing has used the database yet: no workers
        raise
    with conn:
        if conn.execute(f"SELECT to_regclass('{KIT_SCHEMA}.worker_leases')").fetchone()[0] is None:
            return []
        has_dbos = conn.execute(dbos_tables.PG_SCHEMA_READY).fetchone()[0]
        running = dbos_tables.PG_PENDING_ON_EXECUTOR.format(app=WORKER_APP) if has_dbos else "0"
        query = (
            "SELECT executor_id, host, pid, concurrency, "
            "extract(epoch FROM now() - heartbeat_at), extract(epoch FROM expires_at - now()), "
            f"{{running}} FROM {KIT_SCHEMA}.worker_leases l ORDER BY executor_id"
        )
        try:
            rows = conn.execute(query.format(running=running)).fetchall()
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
            # the first worker is still creating DBOS's tables: it runs nothing yet
            rows = conn.execute(query.format(running="0")).fetchall()
    return [
        WorkerInfo(r[0], r[1], int(r[2]), int(r[3]), float(r[4]), float(r[5]), int(r[6]))
        for r in rows
    ]
