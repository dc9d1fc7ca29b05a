"""Runs on a PostgreSQL system database: the same runner, checkpoints in a shared database."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_runner import go, side_effects

from relay_notebook.commands.settings import Settings
from relay_notebook.errors import DatabaseOwnedError, InvalidDatabaseUrlError, RunLockedError
from relay_notebook.history import read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.store import lend_session, open_postgres_run
from relay_notebook.runner import parse_crash_spec, start_recovery, start_run
from relay_notebook.runner.backend import Backend, prepare_database, resolve_backend
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.pool import ensure_dbos_schema
from relay_notebook.runner.runs import create_run
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source

FIVE_STEPS = relay_source("five_steps")


@pytest.fixture
def five(workspace: Workspace) -> tuple[Workspace, Any, dict[str, Any]]:
    draft = workspace.save_draft("five", FIVE_STEPS)
    return workspace, draft, {"ledger": "effects.log", "n": 3}


def test_a_run_keeps_its_state_in_postgres_and_recovers(five: Any, database_url: str) -> None:
    """Crash after square#2, recover: reused checkpoints come from PostgreSQL, not a file."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    crash = parse_crash_spec("after:square#2")
    first = go(start_run(ws, draft, run_input=inp, crash=crash, backend=backend))
    assert first.status == "interrupted" and first.executed == [1, 2, 3]
    folder = find_run(ws, first.run_id)
    assert not folder.database.exists()  # no SQLite file: DBOS state is in PostgreSQL
    assert folder.read_meta()["database"] == {"kind": "postgresql", "url": backend.display}
    second = go(start_recovery(ws, first.run_id, backend=backend))
    assert second.status == "succeeded" and second.result == {"squares": [0, 1, 4], "total": 5}
    assert second.reused == [1, 2, 3] and second.executed == [4, 5]
    assert side_effects(ws, first.run_id) == Counter(
        ["load", "square 0", "square 1", "square 2", "total"]
    )
    steps = read_run_log(ws, first.run_id).steps
    assert [list(s.reused_in) for s in steps] == [[2]] * 3 + [[]] * 2
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT status, application_name FROM dbos.workflow_status WHERE workflow_uuid = %s",
            (first.run_id,),
        ).fetchone()
    assert row == ("SUCCESS", "relay-run-five-1")


def test_the_database_password_is_never_written(five: Any, postgres: Any) -> None:
    """A URL's password reaches the child through a pipe; run.json keeps the URL without it."""
    ws, draft, inp = five
    with psycopg.connect(postgres.database_url("postgres"), autocommit=True) as conn:
        conn.execute("CREATE ROLE keeper LOGIN PASSWORD 'Sekr1t-pw' SUPERUSER")
    url = f"postgresql://keeper:Sekr1t-pw@127.0.0.1:{postgres.port}/pwtest"
    out = go(start_run(ws, draft, run_input=inp, backend=resolve_backend(url)))
    assert out.status == "succeeded"
    for path in Path(ws.home).rglob("*"):
        if path.is_file():
            assert b"Sekr1t-pw" not in path.read_bytes(), path
    meta = find_run(ws, out.run_id).read_meta()
    assert meta["database"]["url"] == f"postgresql://keeper@127.0.0.1:{postgres.port}/pwtest"


def test_one_database_serves_one_workspace(five: Any, database_url: str, tmp_path: Path) -> None:
    """A second workspace pointed at the same database is refused: run ids would collide."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    assert go(start_run(ws, draft, run_input=inp, backend=backend)).status == "succeeded"
    other = Workspace(tmp_path / "other")
    other_draft = other.save_draft("five", FIVE_STEPS)
    with pytest.raises(DatabaseOwnedError, match="another workspace"):
        start_run(other, other_draft, run_input=inp, backend=backend)


def test_a_bad_url_is_refused_without_showing_the_password() -> None:
    """Only postgresql:// URLs are accepted; the message never repeats a password."""
    with pytest.raises(InvalidDatabaseUrlError) as info:
        resolve_backend("mysql://u:hunter2@host/db")
    assert "hunter2" not in str(info.value)
    assert "Unix socket" not in str(info.value)
    assert resolve_backend("") == Backend(None)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://relay:hunter2@/runs?host=/var/run/postgresql",
        "postgresql:///runs",
        "postgresql://relay:hunter2@/runs",
    ],
)
def test_a_unix_socket_url_is_refused_with_what_to_give_instead(url: str) -> None:
    """libpq's form for a server on a Unix socket: one line that says it is not supported and
    asks for the server's TCP address; never the password."""
    with pytest.raises(InvalidDatabaseUrlError) as info:
        resolve_backend(url)
    message = str(info.value)
    assert "Unix socket is not supported" in message and "TCP address" in message, message
    assert "hunter2" not in message and "\n" not in message


def test_a_second_supervisor_is_refused_by_the_advisory_lock(five: Any, database_url: str) -> None:
    """While one supervisor holds a PostgreSQL run, another cannot start an attempt of it."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    first = go(
        start_run(ws, draft, run_input=inp, crash=parse_crash_spec("after:load"), backend=backend)
    )
    lock = take_run_lock(find_run(ws, first.run_id), backend)
    try:
        with pytest.raises(RunLockedError, match="single executor"):
            start_recovery(ws, first.run_id, backend=backend)
    finally:
        lock.release()
    assert go(start_recovery(ws, first.run_id, backend=backend)).status == "succeeded"
    events = (find_run(ws, first.run_id).events).read_text()
    assert json.loads(events.splitlines()[-1])["kind"] == "attempt_end"


def test_the_child_never_sees_the_database_url(
    workspace: Workspace, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RELAY_DATABASE_URL, resolved at a boundary, is the default for new runs of its workspace,
    and is not in the relay's environment."""
    monkeypatch.setenv("RELAY_DATABASE_URL", database_url)
    workspace = Settings.from_environment(home=str(workspace.home)).workspace()
    probe = (
        "import os\nfrom dbos import DBOS\n\n\n@DBOS.workflow()\nasync def run(INPUT):\n"
        "    return {'url': os.environ.get('RELAY_DATABASE_URL')}\n"
    )
    out = go(start_run(workspace, workspace.save_draft("probe", probe)))
    assert out.status == "succeeded" and out.result == {"url": None}
    assert find_run(workspace, out.run_id).read_meta()["database"]["kind"] == "postgresql"


def test_the_workspace_id_is_whole_when_many_processes_create_it(tmp_path: Path) -> None:
    """Processes racing to create the workspace id all read the same, complete id."""
    import subprocess
    import sys

    home = tmp_path / "ws"
    code = (
        "import sys\nfrom pathlib import Path\nfrom relay_notebook.runner.backend import "
        "_workspace_id\nprint(_workspace_id(Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(home)], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    ids = {p.communicate()[0].strip() for p in procs}
    assert len(ids) == 1 and len(ids.pop()) == 32
    assert [p.name for p in home.iterdir()] == [".relay_workspace_id"]


def test_reading_while_dbos_creates_its_tables_reads_nothing(five: Any, database_url: str) -> None:
    """A half-migrated DBOS schema (another process still creating it: creating a run now
    migrates it fully first, so it is replaced by half of it here) reads as no rows yet."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    from relay_notebook.record.checkpoints import read_checkpoints, read_workflow_status
    from relay_notebook.runner.runs import create_run

    folder = create_run(ws, draft, run_input=inp, backend=backend)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA dbos CASCADE")
        conn.execute("CREATE SCHEMA dbos")
        conn.execute("CREATE TABLE dbos.workflow_status (workflow_uuid text PRIMARY KEY)")
        conn.execute("CREATE TABLE dbos.operation_outputs (workflow_uuid text, function_id int)")
    assert read_checkpoints(folder) == [] and read_workflow_status(folder) is None
    log = read_run_log(ws, folder.run_id)
    assert log.steps == () and log.run.status == "pending"


SLOW_STEPS = (
    "import asyncio\nfrom dbos import DBOS\n\n\n@DBOS.step()\nasync def work(i):\n"
    "    await asyncio.sleep(0.3)\n    return i\n\n\n@DBOS.workflow()\nasync def run(INPUT):\n"
    "    return {'total': sum([await work(i) for i in range(INPUT['n'])])}\n"
)


def test_the_run_lock_outlives_an_idle_session_timeout(
    workspace: Workspace, database_url: str
) -> None:
    """A server ending idle sessions (idle_session_timeout) must not end a running attempt's
    lock: a recovery during the attempt is still refused."""
    backend = resolve_backend(database_url)
    draft = workspace.save_draft("slow", SLOW_STEPS)
    prepare_database(backend, workspace.home)
    # DBOS's tables first: a migration on a busy machine may pause past a 1 s timeout itself
    ensure_dbos_schema(backend)
    with psycopg.connect(database_url, autocommit=True) as conn:
        name = database_url.rsplit("/", 1)[1]
        conn.execute(f"ALTER DATABASE {name} SET idle_session_timeout = '1s'")
    handle = start_run(workspace, draft, run_input={"n": 30}, backend=backend)
    time.sleep(3.0)  # the lock sessions have idled past the timeout
    assert not handle.done()
    with pytest.raises(RunLockedError):
        start_recovery(workspace, handle.run_id, backend=backend)
    assert go(handle).status == "succeeded"


def test_two_recoveries_at_once_number_their_attempts_under_the_lock(
    five: Any, database_url: str
) -> None:
    """Racing recoveries of one run: one runs, the other is refused or finds it finished; no
    two attempts share a number."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    crash = parse_crash_spec("after:load")
    first = go(start_run(ws, draft, run_input=inp, crash=crash, backend=backend))
    results: list[Any] = []

    def recover() -> None:
        try:
            results.append(go(start_recovery(ws, first.run_id, backend=backend)))
        except RunLockedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=recover) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    numbers = [a["attempt"] for a in find_run(ws, first.run_id).read_meta()["attempts"]]
    assert len(numbers) == len(set(numbers)), numbers
    assert any(getattr(r, "status", None) == "succeeded" for r in results)


def test_dbos_tables_exist_before_the_first_child_starts(five: Any, database_url: str) -> None:
    """Creating a run on a fresh database migrates DBOS's tables in the supervisor: a child left
    to migrate them deadlocked with the supervisor reading its rows (PostgreSQL aborted it)."""
    ws, draft, inp = five
    create_run(ws, draft, run_input=inp, backend=resolve_backend(database_url))
    with psycopg.connect(database_url) as conn:
        tables = conn.execute(
            "SELECT to_regclass('dbos.operation_outputs'), to_regclass('dbos.workflow_status')"
        ).fetchone()
    assert tables == ("dbos.operation_outputs", "dbos.workflow_status")


def _sessions_opened(postgres: Any, action: Any) -> Counter[tuple[str, str]]:
    """The sessions the server authorized while ``action`` ran, by (database, application)."""
    admin = postgres.database_url("postgres")
    log = Path(postgres.folder) / "server.log"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_connections = on")
        conn.execute("SELECT pg_reload_conf()")

    def logging_on() -> bool:  # a new session starts with what the postmaster read again
        with psycopg.connect(admin) as conn:
            return bool(conn.execute("SHOW log_connections").fetchone()[0] == "on")

    wait_until(logging_on, timeout=10, what="log_connections to take effect")
    mark = log.stat().st_size
    try:
        action()  # a session's line is written as it is authorized, before it does anything
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET log_connections")
            conn.execute("SELECT pg_reload_conf()")
    with log.open("rb") as stream:
        stream.seek(mark)
        text = stream.read().decode(errors="replace")
    seen: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        if "connection authorized:" not in line:
            continue
        fields = dict(f.split("=", 1) for f in line.split("authorized:", 1)[1].split() if "=" in f)
        seen[(fields.get("database", "?"), fields.get("application_name", ""))] += 1
    return seen


def test_an_attempt_opens_at_most_its_child_lock_session(five: Any, postgres: Any) -> None:
    """The kit's only new session per attempt is the child's run lock, and none when the
    attempt's warm parent kept one from the relay's last attempt (``runner.warm_sessions``,
    said in the attempt's record), as it keeps DBOS's.

    The supervisor's checks and its settling of the attempt read on its lock's session, which
    the process kept from its earlier attempt; the child reads the run's status on its own
    lock's, and DBOS is given an engine, so nothing connects to the server's ``postgres``
    database to look for the run's (each new session costs the server about 9 ms of CPU).
    """
    ws, draft, inp = five
    url = postgres.database_url()
    name = url.rsplit("/", 1)[1]
    backend = resolve_backend(url)
    go(start_run(ws, draft, run_input=inp, backend=backend))  # the database is made and migrated
    outcomes: list[Any] = []
    crash = parse_crash_spec("after:square#2")

    def run() -> None:
        outcomes.append(go(start_run(ws, draft, run_input=inp, crash=crash, backend=backend)))

    def recover() -> None:
        outcomes.append(go(start_recovery(ws, outcomes[0].run_id, backend=backend)))

    for action in (run, recover):
        seen = _sessions_opened(postgres, action)
        attempt = find_run(ws, outcomes[-1].run_id).read_meta()["attempts"][-1]
        given = attempt.get("confinement", {}).get("run_lock_session") == "given"
        assert seen[(name, "relay_notebook")] == (0 if given else 1), (action.__name__, seen)
        if not given:
            assert seen[(name, "dbos_transact")] >= 1, seen  # the attempt's DBOS did connect
        assert not [key for key in seen if key[0] != name and key[1]], (action.__name__, seen)
    assert [o.status for o in outcomes] == ["interrupted", "succeeded"]
    assert outcomes[1].reused == [1, 2, 3]


def test_a_lent_lock_session_reads_read_only_and_keeps_its_lock(
    five: Any, database_url: str
) -> None:
    """Readers on the lock's lent session run READ ONLY; an error in one is rolled back, and
    the session still holds the run's lock afterwards (a second supervisor is refused)."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    first = go(
        start_run(ws, draft, run_input=inp, crash=parse_crash_spec("after:load"), backend=backend)
    )
    folder = find_run(ws, first.run_id)
    lock = take_run_lock(folder, backend)
    try:
        with lend_session(backend, lock.session):
            with open_postgres_run(backend, first.run_id) as reader:
                assert reader is not None and reader._conn is lock.session
                rows = reader.execute("SELECT status FROM workflow_status").fetchall()
                assert rows == [("PENDING",)]
            with (
                pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
                open_postgres_run(backend, first.run_id) as reader,
            ):
                assert reader is not None
                reader._conn.execute("UPDATE dbos.workflow_status SET status = 'ERROR'")
        assert lock.session.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(RunLockedError, match="single executor"):
            start_recovery(ws, first.run_id, backend=backend)
    finally:
        lock.release()
    assert go(start_recovery(ws, first.run_id, backend=backend)).status == "succeeded"


def _holds(database_url: str, key: str) -> bool:
    """Whether some session holds advisory lock ``key`` (tried from a session of its own)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        taken = conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)
        ).fetchone()[0]
        if taken:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
        return not taken


def test_a_released_run_lock_is_free_at_once_and_its_session_serves_the_next(
    five: Any, database_url: str
) -> None:
    """A released PostgreSQL run lock is free for anyone at once, and the next lock of this
    process takes it on the same session instead of opening one (no server session per
    attempt)."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    folder = create_run(ws, draft, run_input=inp, backend=backend)
    key = f"relay-supervisor:{folder.run_id}"
    lock = take_run_lock(folder, backend)
    session = lock.session.info.backend_pid
    assert _holds(database_url, key)
    lock.release()
    assert not _holds(database_url, key)
    again = take_run_lock(folder, backend)
    try:
        assert again.session.info.backend_pid == session
        assert _holds(database_url, key)
        with pytest.raises(RunLockedError, match="single executor"):
            take_run_lock(folder, backend)
    finally:
        again.release()
    assert not _holds(database_url, key)


def test_a_kept_lock_session_the_server_ended_is_not_used(five: Any, database_url: str) -> None:
    """A kept lock session that the server ended meanwhile is dropped: the next lock is taken
    on a new session and holds (a second supervisor is refused)."""
    ws, draft, inp = five
    backend = resolve_backend(database_url)
    folder = create_run(ws, draft, run_input=inp, backend=backend)
    lock = take_run_lock(folder, backend)
    ended = lock.session.info.backend_pid
    lock.release()
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (ended,)).fetchone()[0]
    again = take_run_lock(folder, backend)
    try:
        assert again.session.info.backend_pid != ended
        assert _holds(database_url, f"relay-supervisor:{folder.run_id}")
        with pytest.raises(RunLockedError, match="single executor"):
            take_run_lock(folder, backend)
    finally:
        again.release()


@pytest.mark.parametrize("older_server", [False, True])
def test_a_lock_session_is_exempt_from_idle_timeouts_and_keeps_alive(
    workspace: Workspace, database_url: str, monkeypatch: pytest.MonkeyPatch, older_server: bool
) -> None:
    """A lock session is set up not to be ended for idling and to notice a dead peer, also on a
    server that lacks one of those settings (an older PostgreSQL: the others still apply)."""
    from relay_notebook.runner import locks

    if older_server:
        monkeypatch.setattr(locks, "_SESSION", (("no_such_setting", "0"), *locks._SESSION))
    backend = resolve_backend(database_url)
    prepare_database(backend, workspace.home)
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url, autocommit=True) as admin:  # as a managed service does
        for setting in ("idle_session_timeout", "idle_in_transaction_session_timeout"):
            admin.execute(f"ALTER DATABASE {name} SET {setting} = '1h'")
    conn = locks._lock_connection(backend)
    try:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("idle_session_timeout", "idle_in_transaction_session_timeout")
        }
        assert shown == {"idle_session_timeout": "0", "idle_in_transaction_session_timeout": "0"}
        assert conn.execute("SHOW tcp_keepalives_count").fetchone()[0] == "3"
    finally:
        conn.close()
