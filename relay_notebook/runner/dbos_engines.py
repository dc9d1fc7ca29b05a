"""The engines an attempt gives DBOS for its system database, instead of letting DBOS make one.

Design note: three reasons to make DBOS's engine rather than let ``DBOS.launch`` make it.

- **PostgreSQL** (``postgres_engine``): made as DBOS makes its own (its pool settings and
  session options, checked by the canary test), but given to DBOS, which then opens no session
  to the server's ``postgres`` database to check that the run's database exists (about 10 ms of
  server CPU per attempt); the supervisor has created it (``runner.backend``). And its pool
  shares its sessions before it opens more (``SharingPool``): DBOS's launch starts five
  threads that each want a session at once, for a few milliseconds, and a pool that opens one
  whenever none is free opened five or six for them; each is a backend process the server
  starts, about 10 ms of its CPU with the catalog it reads again, on every attempt. Beyond
  ``FREE_SESSIONS`` (the notification listener keeps one for good), a checkout waits up to
  ``GROW_AFTER_S`` for a session another thread gives back and opens a new one only then:
  the pool still grows to DBOS's size under lasting demand (a relay's steps run at once).
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
- **PostgreSQL, forked from a warm parent** (``rehearse_postgres``): the same, on the run's
  database itself, since every attempt a worker forks runs on one database (a worker's warm
  parent rehearses before it says it is ready: ``warm_launch.rehearse_on``; another process's,
  such as a kernel's, once it is idle after its first attempt on a PostgreSQL database). The
  engine is the one ``postgres_engine`` would make, its dialect set up by the rehearsal's first
  connection (the server's version and settings, read once instead of in every attempt); DBOS
  runs on it as an application of its own (``REHEARSAL_APP``), and its workflow is deleted
  again. What it leaves in the database is that application's version row. A forked
  attempt's leader opens its sessions ahead on that engine, and the relay's process gives it
  to DBOS: launching DBOS and a one-step workflow cost the relay's process about 8 ms less CPU
  than with a new engine. DBOS's rehearsal launch migrated the database (this build's
  migrations, its refusal of a sharded schema), so an attempt on the rehearsed engine launches
  DBOS with its own ``run_migrations`` off (``rehearsed_on``): DBOS then verifies the schema's
  version instead, one statement where the migration check took three; one of them, on
  ``information_schema``, cost the server about 5 ms of CPU in a session that had not read
  the catalog yet. Tried once per database and process: a server that cannot be
  reached, or a database that does not exist yet, keeps nothing, and attempts make their own.
  The rehearsal blocks the parent's forks, so its sessions wait for no statement or lock
  longer than ``REHEARSAL_LIMIT_MS`` (a session of the workspace's holding a lock on DBOS's
  tables cannot stall the parent; DBOS's migration lock it tries for its own 30 s).

And one reason to connect it early (``connect_ahead``): a confined attempt has a network
namespace of its own, which reaches the host's loopback through pasta, a userspace process. A
step on PostgreSQL makes about 13 round trips to the server (DBOS's statements, their BEGIN and
COMMIT, the pool's pre-ping): through pasta, about 1 ms a step, a quarter of the step rate. A
connected socket keeps the namespace it was made in, so a forked PostgreSQL attempt's group
leader opens the sessions DBOS's pool will need before it enters the sandbox, and the relay's
process (its fork) gives DBOS an engine whose pool takes those before it connects any (the
dialect's ``do_connect`` event, SQLAlchemy's hook for it). It grants the relay nothing new:
the same server, the same role, whose URL the relay's process holds anyway; sessions DBOS
needs beyond those go through pasta, as do DBOS's notification listener's and the kit's own.
Only a sandbox whose network reaches the server anyway gets them (an isolated one, without
pasta, reaches none), and only a forked attempt: a spawned one's leader is
``runner.sandbox_exec``, which imports no database driver (its start is kept short).

The hazard is the descriptors: libpq keeps each socket's number, and between the leader and
the child program the descriptors are closed and moved to their target numbers
(``warm_parent._arrange``). A socket closed there and its number reused would have libpq write
into another file (the ledger, say). So the sockets are opened above every number that is
moved to (``above``: the lower ones are filled first), ``_arrange`` keeps them, and the child
checks each is the socket it was (device and inode) before the pool may take it; if one is
not, the sessions are parked, never used nor collected (collecting a connection closes it,
writing to its number), and DBOS's pool connects its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "ENGINE_CONNECT_ARGS",
    "ENGINE_KWARGS",
    "FREE_SESSIONS",
    "GROW_AFTER_S",
    "IDLE_TRANSACTION_TIMEOUT_MS",
    "SESSIONS_AHEAD",
    "connect_ahead",
    "engine_ahead_rehearsed",
    "numbers_taken",
    "open_sessions",
    "postgres_engine",
    "rehearse",
    "rehearse_postgres",
    "rehearsed_on",
    "sessions_ahead",
    "sharing_pool",
    "socket_identity",
    "sockets_in_place",
    "sqlite_engine_for",
    "tried_postgres",
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

#: sessions the pool opens whenever none is free (``SharingPool``): the notification listener's,
#: which it keeps for good, and one more
FREE_SESSIONS = 2
#: how long a checkout beyond those waits for a session given back before one more is opened
GROW_AFTER_S = 0.05
#: how many sessions ``connect_ahead`` opens: as many as the sharing pool opens while DBOS
#: launches and runs a workflow
SESSIONS_AHEAD = 3
#: PostgreSQL engines a warm parent rehearsed DBOS on, by database URL (``rehearse_postgres``);
#: a URL whose rehearsal failed maps to ``None`` (tried once)
_rehearsed_pg: dict[str, Any] = {}
#: what the rehearsal on a run's database names itself: DBOS's rows of its own application
REHEARSAL_APP = "relay-rehearsal"
#: the longest a statement or a lock wait of the rehearsal's may take (it blocks the parent)
REHEARSAL_LIMIT_MS = 5_000
#: what ``connect_ahead`` made: the URL, the engine, its sessions (DBAPI connections) not yet
#: handed to the pool, each socket's (fd, device, inode)
_ahead: dict[str, Any] = {}
#: what was connected ahead but not found as it was left (see the note): never used, never
#: collected
_parked: list[Any] = []


def postgres_engine(database_url: str) -> Any:
    """DBOS's system database engine for a PostgreSQL run, made as DBOS makes its own; the
    one ``connect_ahead`` made in this process's leader if it is for ``database_url`` and its
    sockets are where they were (its pool's first sessions are then those)."""
    ahead = _take_ahead(database_url)
    if ahead is not None:
        return ahead
    return _rehearsed_pg.get(database_url) or _new_postgres_engine(database_url)


def connect_ahead(
    database_url: str,
    above: int,
    sessions: int = SESSIONS_AHEAD,
    given: list[Any] | None = None,
) -> set[int]:
    """In a forked PostgreSQL attempt's group leader, before the sandbox's network: the run's
    engine, and ``sessions`` sessions its pool takes before it connects any, each socket at a
    number above ``above``. Returns those numbers, to be kept open on the way to the child
    program (none if the server cannot be reached now: the child's DBOS then says why).
    libpq reads ``PG*`` variables (a password, TLS settings) from this process's environment:
    the leader has taken on the child's by then (see ``runner.warm_parent``). ``given``: the
    sessions the warm parent kept for this attempt (``runner.warm_sessions``), opened with
    that environment, taken instead of opening any."""
    _ahead.clear()
    engine = _rehearsed_pg.get(database_url) or _new_postgres_engine(database_url)
    opened = list(given) if given else open_sessions(database_url, above, sessions, engine)
    if not opened:
        return set()
    sockets = [(c.fileno(), *socket_identity(c.fileno())) for c in opened]
    if any(fd <= above for fd, _, _ in sockets):  # (opened here: cannot be; given: low ones)
        _parked.append(opened)
        return set()
    _ahead.update(url=database_url, engine=engine, connections=opened, sockets=sockets)
    return {fd for fd, _, _ in sockets}


def open_sessions(
    database_url: str, above: int, count: int, engine: Any = None, **connect: Any
) -> list[Any]:
    """``count`` sessions as DBOS's pool for ``database_url`` opens them (DBAPI connections),
    each socket at a number above ``above``; none if one cannot be opened. ``connect``: libpq
    settings of the caller's, over the pool's (a shorter ``connect_timeout``)."""
    opened: list[Any] = []
    with numbers_taken(above):
        engine = engine or _rehearsed_pg.get(database_url) or _new_postgres_engine(database_url)
        # what the engine's pool would connect with: the dialect's arguments for the URL, and
        # the engine's own (``sqlalchemy.create_engine`` joins them so)
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        cparams = {**cparams, **_connect_args(), **connect}
        try:
            for _ in range(count):
                opened.append(engine.dialect.connect(*cargs, **cparams))
        except Exception:  # no message kept: it could hold the URL's password
            for connection in opened:
                connection.close()
            return []
    if any(c.fileno() <= above for c in opened):  # (cannot be: the numbers were taken)
        _parked.append(opened)
        return []
    return opened


def sessions_ahead() -> int:
    """How many sessions ``connect_ahead`` opened in this process's leader that are still
    where it left them (for the attempt's confinement record)."""
    return len(_ahead["sockets"]) if _ahead and sockets_in_place(_ahead["sockets"]) else 0


def engine_ahead_rehearsed() -> bool:
    """Whether the engine ``connect_ahead`` made in this process's leader is one its warm
    parent rehearsed DBOS on (for the attempt's confinement record)."""
    return sessions_ahead() > 0 and _ahead["engine"] is _rehearsed_pg.get(_ahead["url"])


@contextlib.contextmanager
def numbers_taken(above: int) -> Iterator[None]:
    """Every free descriptor number up to ``above`` taken meanwhile, so that whatever is
    opened meanwhile (a session's socket) lands above it."""
    null = os.open(os.devnull, os.O_RDONLY)
    fillers = [null]
    try:
        while fillers[-1] <= above:
            fillers.append(os.dup(null))
        os.close(fillers.pop())
        yield
    finally:
        for fd in fillers:
            os.close(fd)


def _take_ahead(database_url: str) -> Any | None:
    if not _ahead:
        return None
    url, engine, opened = _ahead["url"], _ahead["engine"], _ahead["connections"]
    sockets = _ahead["sockets"]
    _ahead.clear()
    if url != database_url or not sockets_in_place(sockets):
        _parked.append(opened)
        return None
    import sqlalchemy as sa

    def hand_out(*_: Any) -> Any:
        # a new session for the pool: one opened ahead while any is left (``None``: connect)
        return opened.pop() if opened else None

    sa.event.listen(engine, "do_connect", hand_out)
    return engine


def socket_identity(fd: int) -> tuple[int, int]:
    """The (device, inode) of the file at ``fd``: whether a socket is still where it was left."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def sockets_in_place(sockets: list[tuple[int, int, int]]) -> bool:
    """Whether each ``(fd, device, inode)`` is still the file at its number."""
    for fd, dev, ino in sockets:
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (dev, ino):
            return False
    return True


def _new_postgres_engine(database_url: str) -> Any:
    import sqlalchemy as sa

    url = sa.make_url(database_url).set(drivername="postgresql+psycopg")
    return sa.create_engine(
        url, **ENGINE_KWARGS, connect_args=_connect_args(), poolclass=sharing_pool()
    )


@functools.cache
def sharing_pool() -> Any:
    """``SharingPool``: SQLAlchemy's ``QueuePool`` (DBOS's, same size and timeout), which waits
    up to ``GROW_AFTER_S`` for a session to come back before it opens one beyond
    ``FREE_SESSIONS`` (see the note). It overrides the pool's private ``_do_get`` and reads its
    queue ``_pool``: ``tests/unit/test_sharing_pool.py`` checks both as a canary. (Made on first
    use: this module imports SQLAlchemy only when an engine is made.)"""
    from sqlalchemy.pool import QueuePool
    from sqlalchemy.util.queue import Empty

    class SharingPool(QueuePool):
        def _do_get(self) -> Any:
            if self.checkedout() >= FREE_SESSIONS:
                try:
                    return self._pool.get(True, GROW_AFTER_S)
                except Empty:
                    pass  # none came back: open one (or wait as DBOS's pool would)
            return super()._do_get()

    return SharingPool


def _connect_args() -> dict[str, Any]:
    options = f"-c idle_in_transaction_session_timeout={IDLE_TRANSACTION_TIMEOUT_MS}"
    return {**ENGINE_CONNECT_ARGS, "options": options}


def _connect() -> sqlite3.Connection:
    # what SQLAlchemy's pysqlite dialect opens for a file URL (a pooled connection may be used
    # by DBOS's threads in turn), for the file pointed at
    return sqlite3.connect(_target["path"], check_same_thread=False)


def _rehearsal_workflow() -> Callable[[int], Coroutine[Any, Any, int]]:
    """The one-step workflow a rehearsal runs, registered with the DBOS just configured."""
    from dbos import DBOS

    @DBOS.step(name="relay_rehearsal_step")
    async def step(x: int) -> int:
        return x + 1

    @DBOS.workflow(name="relay_rehearsal_workflow")
    async def workflow(x: int) -> int:
        return await step(x)

    return workflow


def _left_nothing(engine: Any) -> bool:
    """After a rehearsal: whether DBOS's threads ended (given ``_THREADS_END_S``) and
    ``engine`` holds no connection. A parent never forks with either alive."""
    deadline = time.monotonic() + _THREADS_END_S
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count() == 1 and not engine.pool.checkedout()


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
                    "name": REHEARSAL_APP,
                    "system_database_url": url,
                    "system_database_engine": engine,
                    "application_version": "rehearsal",
                    "executor_id": "rehearsal",
                    "log_level": "WARNING",
                    # its listener thread sleeps this long between polls: ends at once
                    "notification_listener_polling_interval_sec": 0.01,
                }
            )
            workflow = _rehearsal_workflow()
            DBOS.launch()
            asyncio.run(workflow(1))
        finally:
            DBOS.destroy(destroy_registry=True)
            engine.dispose()
            _target.clear()
    if not _left_nothing(engine):
        return False
    _rehearsed = engine
    return True


def rehearse_postgres(database_url: str) -> bool:
    """In a warm parent where no other thread runs, once per database: the engine
    ``postgres_engine`` would make for ``database_url``, with DBOS run on it (launched as
    application ``REHEARSAL_APP``, a one-step workflow, destroyed), so its dialect is set up
    and DBOS's statements are compiled; the workflow's rows are deleted again. The attempts
    this parent forks for that database take the engine (``connect_ahead``,
    ``postgres_engine``) and compile nothing it compiled. Whether it is kept: not if DBOS
    failed on the database, or left a thread or a connection behind (the caller then forks
    no more: see ``runner.warm_parent``)."""
    if database_url in _rehearsed_pg:
        return _rehearsed_pg[database_url] is not None
    _rehearsed_pg[database_url] = None  # tried: a failure is not tried again
    if threading.active_count() != 1:
        return False
    import sqlalchemy as sa
    from dbos import DBOS, SetWorkflowID

    engine = _new_postgres_engine(database_url)
    workflow_id = f"{REHEARSAL_APP}-{os.getpid()}"

    def bounded(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        # the rehearsal's own sessions wait for no lock and no statement longer than this
        # (a relay of the same workspace holding DBOS's migration lock must not stop the
        # parent's forks); removed before any attempt takes the engine
        limit = f" -c statement_timeout={REHEARSAL_LIMIT_MS} -c lock_timeout={REHEARSAL_LIMIT_MS}"
        cparams["options"] = cparams.get("options", "") + limit

    sa.event.listen(engine, "do_connect", bounded)
    try:
        DBOS(
            config={
                "name": REHEARSAL_APP,
                "system_database_url": database_url,
                "system_database_engine": engine,
                "application_version": REHEARSAL_APP,
                "executor_id": REHEARSAL_APP,
                "log_level": "WARNING",
            }
        )
        workflow = _rehearsal_workflow()
        DBOS.launch()
        try:
            with SetWorkflowID(workflow_id):
                asyncio.run(workflow(1))
        finally:
            DBOS.delete_workflow(workflow_id)
    except Exception:  # no message kept: it could hold the URL's password
        return False
    finally:
        DBOS.destroy(destroy_registry=True)
        engine.dispose()
        sa.event.remove(engine, "do_connect", bounded)
    if not _left_nothing(engine):
        return False
    _rehearsed_pg[database_url] = engine
    return True


def rehearsed_on(database_url: str, engine: Any) -> bool:
    """Whether ``engine`` is the one this process's warm parent rehearsed DBOS on for
    ``database_url``: that launch migrated the database, so an attempt's may only verify it
    (DBOS's ``run_migrations: False``; a schema found behind fails the launch, saying so)."""
    return engine is not None and engine is _rehearsed_pg.get(database_url)


def tried_postgres(database_url: str) -> bool:
    """Whether ``rehearse_postgres`` was tried for ``database_url`` in this process."""
    return database_url in _rehearsed_pg


def sqlite_engine_for(database: Path) -> Any | None:
    """In a forked child: the rehearsed engine, its connections opening ``database`` (``None``
    if this process's warm parent made none)."""
    if _rehearsed is None:
        return None
    _target["path"] = str(database)
    return _rehearsed
