"""The PostgreSQL sessions a warm parent keeps for a relay's next attempt
(``runner.warm_sessions``): given again, with nothing of the last attempt left in them, and
never one whose attempt was killed in the middle of a statement.

The relays below reach DBOS's own sessions as a hostile relay would (DBOS's engine, through
a private name), leave what a session can keep, and report what they find."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from relay_notebook.runner import start_run
from relay_notebook.runner.backend import resolve_backend
from relay_notebook.runner.dbos_engines import SESSIONS_AHEAD
from relay_notebook.runner.warm_sessions import FLOOR, KEPT_SESSIONS, Lease, WarmSessions, _quiet
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.procs import descendants, name_of
from tests.warm_parents import fresh_warm_parent

LOCK_KEY = 4242
SESSIONS = """\
import time
from pathlib import Path

from dbos import DBOS
from dbos._dbos import _get_dbos_instance

from agentworks import run_dir

LOCK_KEY = 4242


def _engine():
    return _get_dbos_instance()._sys_db.engine


@DBOS.step()
async def sessions(mode: str) -> list:
    engine = _engine()
    held = [engine.connect() for _ in range(2)]  # two of the pool's sessions at once
    seen = []
    for c in held:
        q = c.exec_driver_sql
        pid = q("SELECT pg_backend_pid()").scalar()
        if mode == "taint":
            q("SET search_path = relay_taint")
            q("CREATE TEMP TABLE relay_taint (x int)")
            q("PREPARE relay_taint_plan AS SELECT 1")
            q("LISTEN relay_taint")
            q(f"SELECT pg_advisory_lock_shared({LOCK_KEY})")
            c.commit()
        elif mode == "sleep":
            (Path(run_dir) / "sleeping").write_text(str(pid))
            q("SELECT pg_sleep(60)")
        seen.append({
            "pid": pid,
            "search_path": q("SELECT current_setting('search_path')").scalar(),
            "temp": q("SELECT to_regclass('pg_temp.relay_taint') IS NOT NULL").scalar(),
            "prepared": q("SELECT count(*) FROM pg_prepared_statements").scalar(),
            "listening": q("SELECT count(*) FROM pg_listening_channels()").scalar(),
            "locks": q("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                       "AND pid = pg_backend_pid()").scalar(),
        })
        c.commit()
    for c in held:
        c.close()
    return seen


@DBOS.workflow()
async def run(mode: str) -> list:
    return await sessions(mode)
"""
CLEAN = {"search_path": '"$user", public', "temp": False, "prepared": 0, "listening": 0}


def _run(ws: Workspace, draft: Any, database_url: str, mode: str) -> tuple[Any, Any]:
    handle = start_run(ws, draft, run_input=mode, backend=resolve_backend(database_url))
    return handle, handle.wait(timeout=120)


def _confinement(handle: Any) -> dict[str, Any]:
    """What the run's one attempt, forked from the warm parent, says of its confinement."""
    (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
    assert attempt["start"]["how"] == "forked"
    report: dict[str, Any] = attempt["confinement"]
    return report


def _ahead(handle: Any) -> Any:
    return _confinement(handle).get("database_sessions_ahead")


def _sessions_opened(database_url: str) -> int:
    """How many sessions the server has started for the run's database so far (this one's
    included)."""
    with psycopg.connect(resolve_backend(database_url).libpq_url) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _lock_free(database_url: str) -> bool:
    with psycopg.connect(resolve_backend(database_url).libpq_url, autocommit=True) as conn:
        took = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
        conn.execute("SELECT pg_advisory_unlock_all()")
    return bool(took and took[0])


def test_a_relays_next_attempt_gets_its_sessions_again_with_nothing_of_the_last_left(
    workspace: Workspace, url: str
) -> None:
    """Attempt 1 leaves on each session it holds a setting, a temporary table, a prepared
    statement, a LISTEN and an advisory lock. Attempt 2 of the same relay is given the same
    server sessions (the same backends: no new ones started) and finds none of that; the lock
    was released as soon as attempt 1 ended."""
    database_url = url
    with fresh_warm_parent():
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("sessions", SESSIONS)
        before = _sessions_opened(database_url)
        first, tainted = _run(ws, draft, database_url, "taint")
        opened_first = _sessions_opened(database_url) - before - 1  # (less the count's own)
        assert tainted.status == "succeeded", tainted
        assert [s["search_path"] for s in tainted.result] == ["relay_taint", "relay_taint"]
        assert all(s["temp"] and s["listening"] == 1 and s["locks"] for s in tainted.result)
        if _ahead(first) is None:
            pytest.skip("this sandbox opens no sessions ahead (no Landlock here)")
        assert _lock_free(database_url), "a relay's advisory lock outlived its attempt"
        opened = _sessions_opened(database_url)
        second, checked = _run(ws, draft, database_url, "check")
        assert checked.status == "succeeded", checked
        assert _ahead(second) == _ahead(first)  # the relay's process took every one given
        assert _confinement(second).get("run_lock_session") == "given"
        opened_second = _sessions_opened(database_url) - opened - 1
        # the four given sessions (DBOS's three, the run lock's) were not started again
        assert opened_second <= opened_first - 4, (opened_first, opened_second)
    for seen in checked.result:
        assert {k: seen[k] for k in CLEAN} == CLEAN, seen
        assert seen["locks"] == 0, seen
    # the same backends: both attempts hold two of the three sessions given to them
    assert {s["pid"] for s in tainted.result} & {s["pid"] for s in checked.result}


def test_a_session_whose_attempt_was_killed_mid_statement_is_not_given_again(
    workspace: Workspace, database_url: str
) -> None:
    """The relay's process is SIGKILLed while a session of its runs ``pg_sleep(60)``: the
    next attempt of the relay does not wait for that statement's answer, nor get the session
    (its backend is still sleeping, held by no attempt), and succeeds at once."""
    with fresh_warm_parent():
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("sessions", SESSIONS)
        first, warmed = _run(ws, draft, database_url, "check")  # the parent's sessions kept
        assert warmed.status == "succeeded", warmed
        if _ahead(first) is None:
            pytest.skip("this sandbox opens no sessions ahead (no Landlock here)")
        handle = start_run(ws, draft, run_input="sleep", backend=resolve_backend(database_url))
        marker = Path(handle.folder.path) / "execution" / "sleeping"
        wait_until(marker.exists, timeout=60, what="the relay's statement to start")
        sleeping = int(marker.read_text())
        relay = [p for p in descendants(handle.process.pid) if name_of(p) == "relay-child"]
        assert relay, "no relay process"
        os.kill(relay[0], signal.SIGKILL)
        assert handle.wait(timeout=60).status == "interrupted"
        started = time.monotonic()
        _, checked = _run(ws, draft, database_url, "check")
        took = time.monotonic() - started
        assert checked.status == "succeeded", checked
    assert sleeping not in {s["pid"] for s in checked.result}
    assert took < 30, f"the next attempt waited {took:.0f} s"  # not for the 60 s statement
    with psycopg.connect(resolve_backend(database_url).libpq_url) as conn:
        row = conn.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (sleeping,))
        assert row.fetchone() == ("active",)  # still sleeping: the session was not reused


def _request(database_url: str, relay: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A fork request as a supervisor sends one for a confined attempt on PostgreSQL."""
    plan = {"relay": relay, "network": {"mode": "database", "allow": []}}
    return {"database_url": database_url, "confine": {"plan": plan}, "env": env or {}}


@pytest.fixture
def url(database_url: str) -> str:
    """The run's database, created as the supervisor creates it before an attempt."""
    server = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database_url.rsplit("/", 1)[1]}"')
    return database_url


def test_kept_sessions_go_back_to_their_relay_only_and_at_most_two_attempts_worth(url: str) -> None:
    """Given back, the sessions (DBOS's pool's and the run lock's) are given again to the same
    relay's next attempt (the same sockets, above the floor); another relay's attempt gets
    sessions of its own; at most ``KEPT_SESSIONS`` stay idle, the longest unused relay's
    closed first."""

    def ids(lease: Lease | None) -> set[int]:
        assert lease is not None
        return {id(c) for _, c in lease.all()}

    pool = WarmSessions()
    try:
        a = pool.give(_request(url, "/ws/a"), sandboxed=True)
        assert a is not None and len(a.connections) == SESSIONS_AHEAD and a.lock is not None
        assert all(c.fileno() >= FLOOR for _, c in a.all())
        assert a.lock.info.parameter_status("application_name") == "relay_notebook"
        assert a.lock.execute("SHOW idle_session_timeout").fetchone() == ("0",)
        assert pool.give(_request(url, "/ws/a"), sandboxed=False) is None  # no sessions ahead
        pool.ended(a, keep=True)
        assert pool.idle() == SESSIONS_AHEAD + 1
        again = pool.give(_request(url, "/ws/a"), sandboxed=True)
        assert ids(again) == ids(a) and again is not None and again.lock is a.lock
        other = pool.give(_request(url, "/ws/b"), sandboxed=True)
        assert not ids(other) & ids(a)
        pool.ended(again, keep=True)
        pool.ended(other, keep=True)
        third = pool.give(_request(url, "/ws/c"), sandboxed=True)
        pool.ended(third, keep=True)
        assert pool.idle() == KEPT_SESSIONS
        assert all(c.closed for _, c in a.all())  # /ws/a's: the longest unused
        assert third is not None and other is not None
        assert not any(c.closed for _, c in [*other.all(), *third.all()])
    finally:
        pool.close()


def test_a_session_is_kept_only_if_it_answers_its_reset(url: str, database_url: str) -> None:
    """Left inside a transaction: rolled back and kept. Left with a statement whose answer
    has not been read: closed, at once (not after the statement). Ended by the server while
    idle: not given again, a new one opened instead. The run lock's session, its lock taken
    and left: kept, and the lock released."""
    pool = WarmSessions()
    try:
        lease = pool.give(_request(url, "/ws/a"), sandboxed=True)
        assert lease is not None and lease.lock is not None
        in_transaction, busy, ended = lease.connections
        in_transaction.execute("SELECT 1")  # psycopg opened a transaction (no autocommit)
        busy.pgconn.send_query(b"SELECT pg_sleep(30)")
        lease.lock.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        assert not _lock_free(database_url)
        started = time.monotonic()
        pool.ended(lease, keep=True)
        assert time.monotonic() - started < 5
        assert busy.closed and not in_transaction.closed and not lease.lock.closed
        assert pool.idle() == 3 and _lock_free(database_url)
        pid = ended.pgconn.backend_pid
        with psycopg.connect(resolve_backend(database_url).libpq_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(lambda: not _quiet(ended), timeout=10, what="the server to end the session")
        again = pool.give(_request(url, "/ws/a"), sandboxed=True)
        assert again is not None and ended.closed
        assert ended not in again.connections and in_transaction in again.connections
        assert len(again.connections) == SESSIONS_AHEAD  # the missing ones opened anew
        row = in_transaction.execute("SELECT 1").fetchone()  # usable: reset, out of any transaction
        assert row == (1,)
    finally:
        pool.close()
