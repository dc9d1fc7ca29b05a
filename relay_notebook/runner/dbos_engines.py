"""The engines an attempt gives DBOS for its system database, instead of letting DBOS make one.

Design note: two reasons to make DBOS's engine rather than let ``DBOS.launch`` make it.

- **PostgreSQL** (``postgres_engine``): made as DBOS makes its own (its pool settings and
  session options, checked by the canary test), but given to DBOS, which then opens no session
  to the server's ``postgres`` database to check that the run's database exists (about 10 ms of
  server CPU per attempt); the supervisor has created it (``runner.backend``).
- **SQLite, forked from a warm parent** (``rehearse``, ``sqlite_engine_for``): SQLAlchemy
  compiles each statement once per engine and keeps the compiled form in the engine; DBOS made
  a new engine in every attempt, which compiled the same few dozen statements again (launching
  DBOS and running a one-step workflow: about half of that CPU, some 30 ms). A warm parent that
  forks many attempts makes one engine with DBOS's own SQLite factory
  (``dbos_private.sqlite_engine``: DBOS's IMMEDIATE transactions, busy timeout and foreign
  keys), whose connections open the file this module is pointed at, and rehearses on it: DBOS
  launched on a scratch copy of the template, a workflow with one step run, DBOS destroyed, the
  engine's connections closed. Only then does the parent fork. A forked SQLite attempt points
  the engine at its run's database and gives it to DBOS, which compiles nothing it compiled in
  the rehearsal. When the parent forks, the engine holds no connection and no thread runs (both
  checked: a rehearsal that leaves either is not used), and DBOS's global state is what
  ``DBOS.destroy`` leaves, which the child's ``DBOS(config=...)`` sets again (its name, version
  and executor). Spawned attempts and a one-attempt parent's child let DBOS make its engine.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = [
    "ENGINE_CONNECT_ARGS",
    "ENGINE_KWARGS",
    "IDLE_TRANSACTION_TIMEOUT_MS",
    "postgres_engine",
    "rehearse",
    "sqlite_engine_for",
]

#: DBOS's settings for an engine it makes itself (the canary test compares them with DBOS's)
ENGINE_KWARGS: dict[str, Any] = {
    "pool_timeout": 30,
    "max_overflow": 0,
    "pool_size": 20,
    "pool_pre_ping": True,
}
ENGINE_CONNECT_ARGS: dict[str, Any] = {"application_name": "dbos_transact", "connect_timeout": 10}
#: what DBOS sets on its engine's sessions (its default, 60 s)
IDLE_TRANSACTION_TIMEOUT_MS = 60_000
#: how long the rehearsal's DBOS threads are given to end after ``DBOS.destroy``
_THREADS_END_S = 5.0

#: the database file the rehearsed engine's connections open (``sqlite_engine_for``)
_target: dict[str, str] = {}
_rehearsed: Any = None


def postgres_engine(database_url: str) -> Any:
    """DBOS's system database engine for a PostgreSQL run, made as DBOS makes its own."""
    import sqlalchemy as sa

    url = sa.make_url(database_url).set(drivername="postgresql+psycopg")
    options = f"-c idle_in_transaction_session_timeout={IDLE_TRANSACTION_TIMEOUT_MS}"
    connect_args = {**ENGINE_CONNECT_ARGS, "options": options}
    return sa.create_engine(url, **ENGINE_KWARGS, connect_args=connect_args)


def _connect() -> sqlite3.Connection:
    # what SQLAlchemy's pysqlite dialect opens for a file URL (a pooled connection may be used
    # by DBOS's threads in turn), for the file pointed at
    return sqlite3.connect(_target["path"], check_same_thread=False)


def rehearse() -> bool:
    """In a warm parent where no other thread runs: make the SQLite engine and compile DBOS's
    statements on it. Whether it is kept for the children (they let DBOS make one if not)."""
    global _rehearsed
    if threading.active_count() != 1:
        return False
    from dbos import DBOS

    from relay_notebook.runner.dbos_private import sqlite_engine
    from relay_notebook.runner.dbos_template import copy_template

    with tempfile.TemporaryDirectory(prefix="relay-rehearsal-") as scratch:
        database = Path(scratch) / "rehearsal.sqlite"
        if not copy_template(database):
            return False  # no template yet: the next parent rehearses
        url = f"sqlite:///{database}"
        _target["path"] = str(database)
        engine = sqlite_engine(url, {**ENGINE_KWARGS, "creator": _connect})
        try:
            DBOS(
                config={
                    "name": "relay-rehearsal",
                    "system_database_url": url,
                    "system_database_engine": engine,
                    "application_version": "rehearsal",
                    "executor_id": "rehearsal",
                    "log_level": "WARNING",
                    # its listener thread sleeps this long between polls: ends at once
                    "notification_listener_polling_interval_sec": 0.01,
                }
            )

            @DBOS.step(name="relay_rehearsal_step")
            async def step(x: int) -> int:
                return x + 1

            @DBOS.workflow(name="relay_rehearsal_workflow")
            async def workflow(x: int) -> int:
                return await step(x)

            DBOS.launch()
            asyncio.run(workflow(1))
        finally:
            DBOS.destroy(destroy_registry=True)
            engine.dispose()
            _target.clear()
    deadline = time.monotonic() + _THREADS_END_S
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if threading.active_count() > 1 or engine.pool.checkedout():
        return False  # never fork with DBOS's threads or connections alive
    _rehearsed = engine
    return True


def sqlite_engine_for(database: Path) -> Any | None:
    """In a forked child: the rehearsed engine, its connections opening ``database`` (``None``
    if this process's warm parent made none)."""
    if _rehearsed is None:
        return None
    _target["path"] = str(database)
    return _rehearsed
