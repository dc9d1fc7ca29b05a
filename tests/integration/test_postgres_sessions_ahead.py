"""A forked PostgreSQL attempt's sessions, opened by its leader before the sandbox's network
(``runner.dbos_engines.connect_ahead``): where their sockets sit, what happens when one is not
where it was left, and what a run's record says.

Each libpq connection keeps its socket's number. The tests below move and reuse numbers on
purpose and check that no byte lands in the file that took one."""

from __future__ import annotations

import contextlib
import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from relay_notebook.runner import dbos_engines, start_run
from relay_notebook.runner.backend import resolve_backend
from relay_notebook.testing import PostgresServer
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.warm_parents import fresh_warm_parent

#: above every number these tests hold open (pytest's own files included)
ABOVE = 60

LOOP = """\
from dbos import DBOS


@DBOS.step()
async def tick(i: int) -> int:
    return i + 1


@DBOS.workflow()
async def run(n: int) -> int:
    total = 0
    for i in range(n):
        total = await tick(total)
    return total
"""


@pytest.fixture
def url(database_url: str) -> str:
    """The run's database, created as the supervisor creates it before an attempt."""
    with psycopg.connect(_server(database_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{_database(database_url)}"')
    return database_url


@pytest.fixture(autouse=True)
def nothing_left_ahead() -> Iterator[None]:
    yield
    dbos_engines._ahead.clear()


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _database(url: str) -> str:
    return _plain(url).rsplit("/", 1)[1]


def _server(url: str) -> str:
    return _plain(url).rsplit("/", 1)[0] + "/postgres"


def _sessions(url: str) -> int:
    with psycopg.connect(_plain(url)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dbos_transact'"
            " AND datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_sessions_sit_above_every_moved_number_and_are_the_pools_first(url: str) -> None:
    sockets = dbos_engines.connect_ahead(url, above=ABOVE)
    assert len(sockets) == dbos_engines.SESSIONS_AHEAD
    assert min(sockets) > ABOVE, sockets
    assert dbos_engines.sessions_ahead() == dbos_engines.SESSIONS_AHEAD
    assert _sessions(url) == dbos_engines.SESSIONS_AHEAD
    engine = dbos_engines.postgres_engine(url)
    assert dbos_engines.sessions_ahead() == 0  # taken once
    held = []
    try:
        for _ in range(dbos_engines.SESSIONS_AHEAD):  # the pool's first sessions: those
            held.append(engine.connect())
            assert held[-1].exec_driver_sql("SELECT 41 + 1").scalar() == 42
        assert {c.connection.dbapi_connection.fileno() for c in held} == sockets
        assert _sessions(url) == dbos_engines.SESSIONS_AHEAD  # none opened besides
        held.append(engine.connect())  # one more: the pool connects it itself
        assert held[-1].connection.dbapi_connection.fileno() not in sockets
        assert held[-1].exec_driver_sql("SELECT 1").scalar() == 1
        assert _sessions(url) == dbos_engines.SESSIONS_AHEAD + 1
    finally:
        for connection in held:
            connection.close()
        engine.dispose()


def test_a_socket_whose_number_was_reused_is_never_written_to(url: str, tmp_path: Path) -> None:
    """As if the descriptors' arranging had closed one socket and a file took its number: the
    sessions are parked, nothing is written into the file, and DBOS's pool connects its own."""
    sockets = sorted(dbos_engines.connect_ahead(url, above=ABOVE))
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b"")
    file_fd = os.open(ledger, os.O_RDWR)
    moved = sockets[2]
    try:
        os.dup2(file_fd, moved)  # the socket closed, its number now the file's
        assert dbos_engines.sessions_ahead() == 0
        engine = dbos_engines.postgres_engine(url)
        try:
            with engine.connect() as conn:
                assert conn.connection.dbapi_connection.fileno() not in sockets
                assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        finally:
            engine.dispose()
        gc.collect()  # the parked sessions are kept: collected, each would close its socket
        assert ledger.read_bytes() == b""
        assert _identity(moved) == _identity(file_fd)
    finally:
        os.close(file_fd)
        os.close(moved)  # freed before the parked sessions are closed (libpq: EBADF)
        for connection in dbos_engines._parked.pop():
            connection.close()
    assert ledger.read_bytes() == b""


def test_sessions_for_another_database_are_not_given(url: str, postgres: PostgresServer) -> None:
    dbos_engines.connect_ahead(url, above=ABOVE)
    other = postgres.database_url()
    engine = dbos_engines.postgres_engine(other)
    try:
        assert engine.url.database == _database(other) != _database(url)
    finally:
        engine.dispose()
        for connection in dbos_engines._parked.pop():
            connection.close()
    assert _sessions(url) == 0


def test_an_unreachable_server_opens_nothing_and_leaves_no_descriptor() -> None:
    before = set(os.listdir("/proc/self/fd"))
    dead = "postgresql://relay:s3cret-pw@127.0.0.1:9/runs"  # port 9: nothing listens
    assert dbos_engines.connect_ahead(dead, above=ABOVE) == set()
    assert set(os.listdir("/proc/self/fd")) == before
    assert dbos_engines.sessions_ahead() == 0
    engine = dbos_engines.postgres_engine(dead)  # made anew; DBOS says why it cannot connect
    assert engine.pool.checkedin() == 0
    engine.dispose()


def test_the_sessions_are_opened_with_the_processs_libpq_settings(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq reads ``PG*`` variables from the environment of the process that connects."""
    monkeypatch.setenv("PGSSLMODE", "require")  # this server has no TLS
    assert dbos_engines.connect_ahead(url, above=ABOVE) == set()
    monkeypatch.setenv("PGSSLMODE", "disable")
    assert len(dbos_engines.connect_ahead(url, above=ABOVE)) == dbos_engines.SESSIONS_AHEAD
    _close_all(dbos_engines.postgres_engine(url))


def test_a_forked_attempts_sessions_use_the_runs_environment_not_the_warm_parents(
    workspace: Workspace, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm parent started while ``PGSSLMODE=require`` was set (this server has no TLS) forks
    an attempt after it was unset: the leader connects as the run's own process would."""
    monkeypatch.setenv("PGSSLMODE", "require")
    with fresh_warm_parent():
        monkeypatch.delenv("PGSSLMODE")
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("loop", LOOP)
        handle = start_run(ws, draft, run_input=5, backend=resolve_backend(database_url))
        outcome = handle.wait(timeout=120)
        assert outcome.status == "succeeded" and outcome.result == 5, outcome
        (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
        assert attempt["start"]["how"] == "forked"
        assert attempt["confinement"]["database_sessions_ahead"] == dbos_engines.SESSIONS_AHEAD


def _close_all(engine: Any) -> None:
    """Every session opened ahead taken into the pool, then closed by it (a session closed
    otherwise would have libpq write its goodbye to whatever took its number later)."""
    held = [engine.connect() for _ in range(dbos_engines.SESSIONS_AHEAD)]
    for connection in held:
        connection.close()
    engine.dispose()


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_a_confined_run_on_postgres_records_its_sessions_opened_ahead(
    confined: tuple[str, Workspace], database_url: str
) -> None:
    """Forked from the warm parent, the attempt's leader opened the sessions outside the
    sandbox's network and the relay's process used them; a spawned attempt opens none."""
    mechanism, ws = confined
    draft = ws.save_draft("loop", LOOP)
    handle = start_run(ws, draft, run_input=50, backend=resolve_backend(database_url))
    outcome = handle.wait(timeout=120)
    assert outcome.status == "succeeded" and outcome.result == 50, outcome
    (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
    report: dict[str, Any] = attempt["confinement"]
    assert attempt["confined"] is True and report["mechanism"] == mechanism
    if mechanism == "landlock":
        assert attempt["start"]["how"] == "forked"
        assert report["database_sessions_ahead"] == dbos_engines.SESSIONS_AHEAD
        assert report["network_namespace"] is True  # the sandbox's own network all the same
    else:
        assert "database_sessions_ahead" not in report


def test_a_kernels_warm_parent_rehearses_on_the_database_of_its_first_postgres_attempt(
    workspace: Workspace, database_url: str
) -> None:
    """A warm parent that no worker started learns the database from its first PostgreSQL
    attempt and rehearses DBOS on it once that attempt is forked: the next attempt's engine
    is the rehearsed one, its statements compiled by the parent (runner.dbos_engines)."""
    with fresh_warm_parent():
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("loop", LOOP)
        engines = []
        for n in (3, 4):
            handle = start_run(ws, draft, run_input=n, backend=resolve_backend(database_url))
            outcome = handle.wait(timeout=120)
            assert outcome.status == "succeeded" and outcome.result == n, outcome
            (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
            assert attempt["start"]["how"] == "forked"
            engines.append(attempt["confinement"].get("database_engine"))
        assert engines == [None, "rehearsed"]
        with psycopg.connect(resolve_backend(database_url).libpq_url) as conn:
            names = conn.execute("SELECT DISTINCT name FROM dbos.workflow_status").fetchall()
        assert names == [("run",)]  # the rehearsal's workflow was deleted


def test_an_attempt_on_the_rehearsed_engine_verifies_dbos_schema_instead_of_migrating(
    workspace: Workspace, database_url: str, postgres: PostgresServer
) -> None:
    """The rehearsal's launch migrated the database (and refused a sharded schema), so the
    next attempt launches DBOS with ``run_migrations`` off: the server is asked for the
    schema's version, not the migration check's statements (its ``information_schema``
    query cost about 5 ms of server CPU per attempt). The first attempt, on an engine of its
    own, still runs DBOS's migration check."""
    backend = resolve_backend(database_url)
    log = postgres.folder / "server.log"
    with fresh_warm_parent(), _every_statement_logged(_server(database_url)):
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("loop", LOOP)
        seen: list[str] = []
        for n in (3, 4):
            start = log.stat().st_size
            handle = start_run(ws, draft, run_input=n, backend=backend)
            outcome = handle.wait(timeout=120)
            assert outcome.status == "succeeded" and outcome.result == n, outcome
            (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
            seen.append(attempt["confinement"].get("database_engine", "own"))
            with open(log, "rb") as f:
                f.seek(start)
                statements = f.read().decode(errors="replace")
            assert "dbos_migrations" in statements  # the schema's version: checked, or verified
            assert ("shard_key" in statements) == (n == 3)  # DBOS's migration check: first only
        assert seen == ["own", "rehearsed"]


@contextlib.contextmanager
def _every_statement_logged(url: str) -> Iterator[None]:
    """The server logs every statement of every session (those a warm parent keeps too)."""

    def setting(value: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET log_statement = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        wait_until(lambda: _log_statement(url) == value, timeout=10, what="the server's reload")

    setting("all")
    try:
        yield
    finally:
        setting("none")


def _log_statement(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW log_statement").fetchone()
    assert row is not None
    return str(row[0])
