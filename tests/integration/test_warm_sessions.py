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


def _ahead(handle: Any) -> Any:
    (attempt,) = json.loads((handle.folder.path / "run.json").read_text())["attempts"]
    assert attempt["start"]["how"] == "forked"
    return attempt["confinement"].get("database_sessions_ahead")


def _lock_free(database_url: str) -> bool:
    with psycopg.connect(resolve_backend(database_url).libpq_url, autocommit=True) as conn:
        took = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
        conn.execute("SELECT pg_advisory_unlock_all()")
    return bool(took and took[0])


def test_a_relays_next_attempt_gets_its_sessions_again_with_nothing_of_the_last_left(
    workspace: Workspace, database_url: str
) -> None:
    """Attempt 1 leaves on each session it holds a setting, a temporary table, a prepared
    statement, a LISTEN and an advisory lock. Attempt 2 of the same relay is given the same
    server sessions (the same backends: no new ones started) and finds none of that; the lock
    was released as soon as attempt 1 ended."""
    with fresh_warm_parent():
        ws = Workspace(workspace.home, warm_start=True)
        draft = ws.save_draft("sessions", SESSIONS)
        first, tainted = _run(ws, draft, database_url, "taint")
        assert tainted.status == "succeeded", tainted
        assert [s["search_path"] for s in tainted.result] == ["relay_taint", "relay_taint"]
        assert all(s["temp"] and s["listening"] == 1 and s["locks"] for s in tainted.result)
        if _ahead(first) is None:
            pytest.skip("this sandbox opens no sessions ahead (no Landlock here)")
        assert _lock_free(database_url), "a relay's advisory lock outlived its attempt"
        second, checked = _run(ws, draft, database_url, "check")
        assert checked.status == "succeeded", checked
        assert _ahead(second) == _ahead(first)  # the relay's process took every one given
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
