"""Canaries: the private parts of DBOS the kit relies on, checked by name against the installed
DBOS, so an upgrade that changes one fails here with the name, not somewhere in a run.

The kit pins ``dbos>=3.4,<3.5`` (what is tested). Each entry says where the kit uses it.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sqlite3
from pathlib import Path
from typing import Any

import dbos
import pytest
from dbos import DBOS, DBOSConfig

from relay_notebook.record import dbos_tables


def test_the_installed_dbos_is_the_tested_minor_version() -> None:
    """pyproject pins dbos to 3.4.x; a different minor version is untested."""
    from importlib.metadata import version

    assert version("dbos").startswith("3.4."), version("dbos")


def test_private_callables_the_runner_uses_exist_with_their_shape() -> None:
    """The registry's internal queue (fast recovery poll) and pending-workflow recovery
    (runner/dbos_private.py, for runner/child.py, replay_child.py and worker.py), the error
    classes matched on through the public ``dbos.error`` (runner/child.py, instrument.py,
    replay_child.py, agentworks/platform.py) and the client (runner/pool.py)."""
    from dbos import DBOSClient
    from dbos._dbos import _get_or_create_dbos_registry

    DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded = (
        dbos.error.DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded
    )
    DBOSException = dbos.error.DBOSException
    DBOSUnexpectedStepError = dbos.error.DBOSUnexpectedStepError

    registry = _get_or_create_dbos_registry()
    queue = registry.get_internal_queue()
    assert isinstance(queue._polling_interval_sec, int | float)
    assert callable(DBOS._recover_pending_workflows)
    params = inspect.signature(DBOS._recover_pending_workflows).parameters
    assert list(params)[:1] == ["executor_ids"]
    assert issubclass(DBOSUnexpectedStepError, DBOSException)
    # runner/replay_child.py reads (workflow_id, step_id, called name, recorded name) from it
    unexpected = DBOSUnexpectedStepError("wf", 3, "wrap", "pack")
    assert unexpected.inputs == ("wf", 3, "wrap", "pack")
    assert "function pack was recorded when wrap was expected" in str(unexpected)
    # ... and replaces these to stop bodies past the history
    assert callable(DBOS.run_step) and callable(DBOS.run_step_async)
    assert issubclass(DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, DBOSException)
    assert "system_database_url" in inspect.signature(DBOSClient).parameters
    assert dbos.SetWorkflowID is not None


def test_every_statement_the_kit_runs_on_dbos_tables_prepares(tmp_path: Path) -> None:
    """Each SQL statement of record/dbos_tables.py (the only module that spells DBOS's tables)
    is prepared against the SQLite schema the installed DBOS makes; a failure names it."""
    url = f"sqlite:///{tmp_path / 'canary.sqlite'}"
    config: DBOSConfig = {"name": "relay-canary", "system_database_url": url}

    @DBOS.step()
    async def one() -> int:
        return 1

    @DBOS.workflow()
    async def flow() -> int:
        return await one()

    DBOS(config=config)
    DBOS.launch()
    try:
        assert asyncio.run(flow()) == 1
    finally:
        DBOS.destroy(destroy_registry=True)
    broken = {}
    with sqlite3.connect(tmp_path / "canary.sqlite") as conn:
        for name, sql in dbos_tables.SQLITE.items():
            try:
                conn.execute(f"EXPLAIN {sql}", ("x",) * sql.count("?")).fetchall()
            except sqlite3.Error as exc:
                broken[name] = str(exc)
        steps = conn.execute(dbos_tables.STEP_ROWS).fetchall()
    assert not broken, f"DBOS changed the tables these statements read: {broken}"
    assert [row[2] for row in steps] == [one.__qualname__]  # STEP_ROWS reads StepRow's order
    from dbos._client import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        assert callable(client._sys_db.run_migrations)  # runner/dbos_private.py, for pool.py
        # runner/pool.py's wait polls a run's status on the client's pooled connections
        import sqlalchemy as sa

        assert isinstance(client._sys_db.engine, sa.Engine)
        with client._sys_db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        client.destroy()


def test_every_postgres_statement_on_dbos_tables_prepares(database_url: str) -> None:
    """record/dbos_tables.py's PostgreSQL statements (the worker pool, the replay export, the
    secret check) prepare on the ``dbos`` schema the installed DBOS makes on the server."""
    import psycopg

    DBOS(config={"name": "relay-canary", "system_database_url": database_url})
    DBOS.launch()  # creates the database and DBOS's schema in it
    DBOS.destroy(destroy_registry=True)
    filled = {
        "PG_EXPORT": dbos_tables.PG_EXPORT.format(table="operation_outputs"),
        "PG_PENDING_ON_EXECUTOR": "SELECT "
        + dbos_tables.PG_PENDING_ON_EXECUTOR.format(app="canary")
        + " FROM (SELECT 'e'::text AS executor_id) l",
        "PG_DEAD_EXECUTORS": dbos_tables.PG_DEAD_EXECUTORS.format(
            leases="(SELECT 'e'::text AS executor_id, now() AS expires_at) leases"
        ),
        "PG_STATUS_BY_ID": dbos_tables.PG_STATUS_BY_ID.replace(":id", "%s"),
    }
    broken = {}
    with psycopg.connect(database_url, autocommit=True) as conn:
        for name, sql in dbos_tables.POSTGRES.items():
            text = filled.get(name, sql)
            try:
                conn.execute(f"EXPLAIN {text}", ("x",) * text.count("%s"))
            except psycopg.Error as exc:
                broken[name] = str(exc).splitlines()[0]
    assert not broken, f"DBOS changed the tables these statements read: {broken}"


def test_no_module_but_dbos_tables_spells_a_dbos_table_in_sql() -> None:
    """DBOS's tables are named in SQL only in record/dbos_tables.py (and the fork's rewrites in
    runner/dbos_private.py, the private surface's other module): a new query elsewhere would
    escape the canary above."""
    import re

    import relay_notebook

    root = Path(str(relay_notebook.__file__)).parent
    tables = (
        "workflow_status|operation_outputs|workflow_events|workflow_events_history|streams|"
        "notifications|workflow_input"
    )
    sql = re.compile(rf"\b(FROM|JOIN|INTO|UPDATE)\s+(dbos\.)?({tables})\b")
    allowed = {"record/dbos_tables.py", "runner/dbos_private.py"}
    found = sorted(
        f"{path.relative_to(root)}:{number}"
        for path in root.rglob("*.py")
        if str(path.relative_to(root)) not in allowed
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if sql.search(line) and not line.lstrip().startswith("#") and "``" not in line
    )
    assert not found, f"SQL on DBOS's tables outside record/dbos_tables.py: {found}"


def test_the_childs_postgres_engine_is_made_as_dbos_makes_its_own() -> None:
    """A PostgreSQL child gives DBOS an engine (runner/child.py) with DBOS's own settings: its
    engine defaults (dbos._dbos_config) and its idle-in-transaction timeout (dbos._sys_db)."""
    from dbos._dbos_config import configure_db_engine_parameters
    from dbos._sys_db import DEFAULT_IDLE_TRANSACTION_TIMEOUT_SEC

    from relay_notebook.runner import dbos_engines

    data: dict[str, Any] = {}
    configure_db_engine_parameters(data)  # type: ignore[arg-type]
    assert data["sys_db_engine_kwargs"] == {
        **dbos_engines.ENGINE_KWARGS,
        "connect_args": dbos_engines.ENGINE_CONNECT_ARGS,
    }
    assert DEFAULT_IDLE_TRANSACTION_TIMEOUT_SEC * 1000 == dbos_engines.IDLE_TRANSACTION_TIMEOUT_MS
    engine = dbos_engines.postgres_engine("postgresql://relay@127.0.0.1:5432/runs")
    assert engine.url.drivername == "postgresql+psycopg" and engine.pool.size() == 20


def _check_sqlite_engine(tmp_path: Path) -> None:
    """A warm parent's SQLite engine (runner/dbos_engines.py) comes from DBOS's private SQLite
    factory (``SQLiteSystemDatabase._create_engine``, named in runner/dbos_private.py): its
    sessions are set up as those of the engine DBOS makes for the run's URL, in the same pool."""
    import sqlite3

    from dbos._sys_db_sqlite import SQLiteSystemDatabase

    from relay_notebook.runner import dbos_engines
    from relay_notebook.runner.dbos_private import sqlite_engine

    path = tmp_path / "run.sqlite"
    url = f"sqlite:///{path}"
    ours = sqlite_engine(
        url,
        {**dbos_engines.ENGINE_KWARGS,
         "creator": lambda: sqlite3.connect(path, check_same_thread=False)},
    )  # fmt: skip
    theirs = SQLiteSystemDatabase._create_engine(None, url, dict(dbos_engines.ENGINE_KWARGS))  # type: ignore[arg-type]

    def session(engine: Any) -> tuple[Any, ...]:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            return (
                raw.isolation_level,
                raw.execute("PRAGMA busy_timeout").fetchone()[0],
                raw.execute("PRAGMA foreign_keys").fetchone()[0],
                raw.execute("PRAGMA database_list").fetchone()[2],
                type(engine.pool).__name__,
                engine.pool.size(),
            )

    assert session(ours) == session(theirs)
    assert session(ours)[:3] == ("IMMEDIATE", 30000, 1)


@pytest.mark.parametrize("name", ["fork_workflow", "patch", "recv", "send", "set_event"])
def test_the_public_apis_the_next_issues_build_on_are_there(name: str) -> None:
    """Fork, patch, messages and events (dbos-3.4-apis.md) exist on DBOS."""
    assert callable(getattr(DBOS, name))


def test_what_waiting_runs_rely_on_is_there() -> None:
    """Waiting runs (runner/dbos_private.py for waits.py, record/messages.py, runner/messages.py):
    the stored form of topic ``None``, the sleep recorder behind recv's timeout and the
    client's ``send``."""
    from dbos import _sys_db
    from dbos._client import DBOSClient

    from relay_notebook.record.messages import NULL_TOPIC

    assert _sys_db._dbos_null_topic == NULL_TOPIC
    record_sleep = inspect.signature(_sys_db.SystemDatabase.record_sleep).parameters
    assert "project_completion_time" in record_sleep
    assert set(inspect.signature(DBOSClient.send).parameters) >= {
        "destination_id", "message", "topic", "idempotency_key",
    }  # fmt: skip
    assert "self.tables.notifications" in inspect.getsource(_sys_db.SystemDatabase.recv_check)


def test_a_waiting_workflows_rows_read_as_the_kit_reads_them(tmp_path: Path) -> None:
    """A recv that timed out and a sleep leave ``DBOS.sleep`` rows whose output is the wake
    time in epoch seconds (runner/waits.py reads it with list_workflow_steps); a message sent
    with a key is stored unconsumed under ``KEY::WORKFLOW`` (record/messages.py)."""
    import time

    from dbos import DBOSClient

    url = f"sqlite:///{tmp_path / 'canary.sqlite'}"
    DBOS.destroy(destroy_registry=True)
    DBOS(config={"name": "canary-wait", "system_database_url": url})

    @DBOS.workflow()
    async def waits() -> None:
        await DBOS.recv_async("never", timeout_seconds=0.2)
        await DBOS.sleep_async(0.2)

    DBOS.launch()
    try:
        before = time.time()
        asyncio.run(waits())
        status = DBOS.list_workflows()[0]
        steps = DBOS.list_workflow_steps(status.workflow_id)
        names = [s["function_name"] for s in steps]
        assert names == ["DBOS.recv", "DBOS.sleep", "DBOS.sleep"], names
        for s in steps[1:]:
            assert isinstance(s["output"], float) and before < s["output"] < time.time() + 1
        client = DBOSClient(system_database_url=url)
        client.send(status.workflow_id, {"x": 1}, "t", idempotency_key="k")
        client.send(status.workflow_id, {"x": 1}, "t", idempotency_key="k")
        client.destroy()
    finally:
        DBOS.destroy(destroy_registry=True)
    with sqlite3.connect(tmp_path / "canary.sqlite") as conn:
        rows = conn.execute(
            "SELECT message_uuid, topic, consumed FROM notifications WHERE destination_uuid = ?",
            (status.workflow_id,),
        ).fetchall()
    assert rows == [(f"k::{status.workflow_id}", "t", 0)]


# -- runner/dbos_private.py: one check per private name the kit uses -------------------------


def _check_internal_queue_poll() -> None:
    from relay_notebook.runner import dbos_private

    before = dbos_private.internal_queue_poll()
    dbos_private.set_internal_queue_poll(0.5)
    try:
        assert dbos_private.internal_queue_poll() == 0.5
    finally:
        dbos_private.set_internal_queue_poll(before)


def _check_recover_pending_workflows() -> None:
    params = inspect.signature(DBOS._recover_pending_workflows).parameters
    assert list(params)[:1] == ["executor_ids"], list(params)


def _check_client_sys_db(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from relay_notebook.runner import dbos_private

    client = dbos.DBOSClient(system_database_url=f"sqlite:///{tmp_path / 'client.sqlite'}")
    try:
        dbos_private.run_client_migrations(client)
        assert isinstance(dbos_private.client_engine(client), sa.Engine)
    finally:
        client.destroy()


def _check_serializers() -> None:
    from dbos import _serialization

    for cls in (_serialization.DefaultSerializer, _serialization.DBOSPortableJSONSerializer):
        assert callable(cls.serialize), cls
    # DBOS looks the converter up in its module at each call: replacing it there takes effect
    assert "exception_to_workflow_error_data(value)" in inspect.getsource(
        _serialization.serialize_exception
    )


def _check_serialize_value_and_args() -> None:
    from dbos._serialization import (
        DefaultSerializer,
        deserialize_args,
        deserialize_value,
    )

    from relay_notebook.runner import dbos_private

    serializer = DefaultSerializer()
    text = dbos_private._serialize_value({"total": 12}, serializer.name())
    assert deserialize_value(text, serializer.name(), serializer) == {"total": 12}
    args = deserialize_args(dbos_private._serialize_input({"n": 3}), None, serializer)
    assert args == {"args": ({"n": 3},), "kwargs": {}}


def _check_null_topic_and_notifications() -> None:
    from dbos import _sys_db
    from dbos._dbos import _get_dbos_instance

    from relay_notebook.record.messages import NULL_TOPIC

    assert _sys_db._dbos_null_topic == NULL_TOPIC
    assert callable(_get_dbos_instance)
    source = inspect.getsource(_sys_db.SystemDatabase)
    assert "self.tables.notifications" in source and "self.engine" in source


def _check_preload_modules() -> None:
    import importlib

    from relay_notebook.runner.dbos_private import PRELOAD_MODULES, PRELOAD_POSTGRES

    for name in (*PRELOAD_MODULES, *PRELOAD_POSTGRES):
        importlib.import_module(name)


def _check_schema_files() -> None:
    from relay_notebook.runner.dbos_private import SCHEMA_FILES

    package = Path(str(dbos.__file__)).parent
    missing = [name for name in SCHEMA_FILES if not (package / name).is_file()]
    assert not missing, f"DBOS no longer has {missing}"


def _check_migrations(tmp_path: Path) -> None:
    from relay_notebook.runner import dbos_private

    migrations = dbos_private.sqlite_migrations()
    assert migrations and all(isinstance(m, str) for m in migrations)
    with sqlite3.connect(tmp_path / "migrated.sqlite") as conn:
        for migration in migrations:
            conn.executescript(migration)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"workflow_status", "operation_outputs", "notifications"} <= tables


def _check_fork_rows(tmp_path: Path) -> None:
    from relay_notebook.runner import dbos_private

    url = f"sqlite:///{tmp_path / 'fork.sqlite'}"
    DBOS.destroy(destroy_registry=True)
    DBOS(config={"name": "canary-fork", "system_database_url": url})

    @DBOS.step()
    async def price() -> int:
        return 10

    @DBOS.workflow()
    async def flow(run_input: Any) -> int:
        return await price()

    DBOS.launch()
    try:
        from dbos import SetWorkflowID

        with SetWorkflowID("canary-1"):
            assert asyncio.run(flow({"n": 1})) == 10
    finally:
        DBOS.destroy(destroy_registry=True)
    with sqlite3.connect(tmp_path / "fork.sqlite") as conn:
        assert dbos_private.root_calls(conn, "canary-1", pg=False)[0][1].endswith("price")
        edits = dbos_private.ForkRowEdits(
            outputs={1: 8}, attributes={"relay_fork": {}}, run_input={"n": 2}, input_edited=True
        )
        dbos_private.edit_fork_rows(conn, "canary-1", edits, pg=False)
    client = dbos.DBOSClient(system_database_url=url)
    try:
        steps = client.list_workflow_steps("canary-1")
        status = client.list_workflows(workflow_ids=["canary-1"], load_input=True)[0]
    finally:
        client.destroy()
    assert steps[0]["output"] == 8, steps
    assert status.input == {"args": ({"n": 2},), "kwargs": {}}, status.input
    with sqlite3.connect(tmp_path / "fork.sqlite") as conn:
        dbos_private.delete_workflow_rows(conn, "canary-1")
        assert conn.execute("SELECT count(*) FROM workflow_status").fetchone() == (0,)


def _check_queue_loop() -> None:
    # runner/worker.py runs DBOS's own loop for relay-runs on an event it can wake early
    # (runner/queue_wake.py): the loop only waits on it and asks whether it is set
    from dbos._core import ActiveWorkflowById
    from dbos._queue import queue_worker_thread

    params = list(inspect.signature(queue_worker_thread).parameters)
    assert params == ["stop_event", "dbos", "queue"], params
    source = inspect.getsource(queue_worker_thread)
    uses = set(re.findall(r"stop_event\.(\w+)", source))
    assert uses == {"wait", "is_set"}, uses
    assert "_active_workflows_set.count_for_queue(queue.name)" in source
    active = ActiveWorkflowById()
    entry = active.add("wf-1", "relay-runs")
    assert active.count_for_queue("relay-runs") == 1
    entry.release()
    assert active.count_for_queue("relay-runs") == 0
    assert "self._active_workflows_set" in inspect.getsource(DBOS.__init__)


#: every private name of DBOS that runner/dbos_private.py uses, and its check
def _check_declared_queue() -> None:
    # runner/queues.py: a relay's module-level DBOS.register_queue gets the queue object
    # DBOS.enqueue_workflow makes, built with the private token while DBOS is not launched
    from dbos._queue import _INTERNAL_QUEUE_CONSTRUCTION, Queue

    from relay_notebook.runner.dbos_private import declared_queue

    assert _INTERNAL_QUEUE_CONSTRUCTION is not None
    queue = declared_queue("orders")
    assert isinstance(queue, Queue) and queue.name == "orders"
    assert queue.database_backed_queue is True
    assert callable(queue.enqueue) and callable(queue.enqueue_async)


def _check_step_context(tmp_path: Path) -> None:
    # runner/instrument.py reads the step running now once per step, as the public
    # DBOS.workflow_id, DBOS.step_id and DBOS.step_status give it
    from relay_notebook.runner.dbos_private import step_context

    def now(workflow_id: Any, step_id: Any, status: Any) -> tuple[Any, ...]:
        attempt = status and (status.step_id, status.current_attempt, status.max_attempts)
        return workflow_id, step_id, attempt  # the status as it is now: DBOS resets it after

    def read() -> tuple[Any, ...]:
        return now(*step_context()())

    def public() -> tuple[Any, ...]:
        return now(DBOS.workflow_id, DBOS.step_id, DBOS.step_status)

    seen: list[tuple[Any, Any]] = []
    DBOS.destroy(destroy_registry=True)
    DBOS(config={"name": "canary-step", "system_database_url": f"sqlite:///{tmp_path}/s.db"})

    @DBOS.step(retries_allowed=True, max_attempts=3)
    async def flaky() -> int:
        seen.append((read(), public()))
        if len(seen) < 3:
            raise ValueError("again")
        return 1

    @DBOS.step()
    def plain() -> int:
        seen.append((read(), public()))
        return 2

    @DBOS.workflow()
    async def flow() -> int:
        seen.append((read(), public()))
        return await flaky() + await asyncio.to_thread(plain)

    DBOS.launch()
    try:
        from dbos import SetWorkflowID

        with SetWorkflowID("canary-step-1"):
            assert asyncio.run(flow()) == 3
        assert read() == public() == (None, None, None)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert [ours == theirs for ours, theirs in seen] == [True] * 4, seen
    (workflow_level, _), (first, _), (retried, _), (sync_step, _) = seen
    assert workflow_level == ("canary-step-1", None, None)
    assert (first, retried) == (("canary-step-1", 1, (1, 0, 3)), ("canary-step-1", 1, (1, 1, 3)))
    assert sync_step == ("canary-step-1", 2, (2, None, None))


_PRIVATE_CHECKS: dict[str, Any] = {
    "dbos._context.get_local_dbos_context and its workflow_id, curr_step_function_id, "
    "function_id and step_status (the step running now)": _check_step_context,
    "dbos._queue._INTERNAL_QUEUE_CONSTRUCTION (a relay's queue before launch)": (
        _check_declared_queue
    ),
    "dbos._dbos._get_or_create_dbos_registry().get_internal_queue()._polling_interval_sec": (
        _check_internal_queue_poll
    ),
    "dbos._queue.queue_worker_thread and DBOS()._active_workflows_set.count_for_queue": (
        _check_queue_loop
    ),
    "DBOS._recover_pending_workflows": _check_recover_pending_workflows,
    "DBOSClient._sys_db.run_migrations / .engine": _check_client_sys_db,
    "dbos._serialization serializers and exception_to_workflow_error_data": _check_serializers,
    "dbos._serialization.serialize_value_as / serialize_args": _check_serialize_value_and_args,
    "dbos._sys_db._dbos_null_topic and dbos._dbos._get_dbos_instance()._sys_db": (
        _check_null_topic_and_notifications
    ),
    "PRELOAD_MODULES, PRELOAD_POSTGRES (dbos._dbos, _sys_db_sqlite, _client, _sys_db_postgres)": (
        _check_preload_modules
    ),
    "SCHEMA_FILES (_migration.py, _sys_db_sqlite.py, _sys_db.py)": _check_schema_files,
    "dbos._migration.sqlite_migrations (the template's expected schema)": _check_migrations,
    "fork rows: operation_outputs, workflow_input, workflow_status by SQL": _check_fork_rows,
    "dbos._sys_db_sqlite.SQLiteSystemDatabase._create_engine (the rehearsed engine)": (
        _check_sqlite_engine
    ),
}


@pytest.mark.parametrize("name", list(_PRIVATE_CHECKS))
def test_each_private_dbos_name_the_kit_uses_is_there(name: str, tmp_path: Path) -> None:
    """Each private DBOS name runner/dbos_private.py relies on still works as the kit uses it;
    a failure names it."""
    check = _PRIVATE_CHECKS[name]
    try:
        if "tmp_path" in inspect.signature(check).parameters:
            check(tmp_path)
        else:
            check()
    except Exception as exc:  # the name first: what changed in DBOS, then how
        pytest.fail(f"DBOS changed {name} (runner/dbos_private.py): {type(exc).__name__}: {exc}")


def test_every_private_dbos_name_in_the_kit_has_a_check() -> None:
    """runner/dbos_private.py reaches no private DBOS module or attribute without a check above,
    and no other module of the kit reaches one at all."""
    import re

    import relay_notebook
    from relay_notebook.runner import dbos_private

    source = inspect.getsource(dbos_private)
    own = set(re.findall(r"^(?:def|class) (_\w+)|^(_[A-Z_]+)\b", source, re.M))
    own_names = {n for pair in own for n in pair if n}
    modules = set(re.findall(r"\bdbos\.(_\w+)", source)) | set(
        re.findall(r"from dbos import (_\w+)", source)
    )
    attributes = set(re.findall(r"\.(_[a-z]\w*)", source)) - own_names
    checked = " ".join(_PRIVATE_CHECKS)
    unchecked = sorted(n for n in modules | attributes if n not in checked)
    assert not unchecked, f"private DBOS names without a canary: {unchecked}"
    root = Path(str(relay_notebook.__file__)).parent
    pattern = re.compile(r"dbos\._|_recover_pending|_sys_db|_serialization")
    elsewhere = sorted(
        str(path.relative_to(root.parent))
        for folder in (root, root.parent / "agentworks")
        for path in folder.rglob("*.py")
        if path.name != "dbos_private.py"
        and any(pattern.search(line) and not line.lstrip().startswith("#")
                for line in path.read_text(encoding="utf-8").splitlines())
    )  # fmt: skip
    assert not elsewhere, f"private DBOS names outside runner/dbos_private.py: {elsewhere}"
