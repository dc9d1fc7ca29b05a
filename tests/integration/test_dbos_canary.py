"""Canaries: the private parts of DBOS the kit relies on, checked by name against the installed
DBOS, so an upgrade that changes one fails here with the name, not somewhere in a run.

The kit pins ``dbos>=3.4,<3.5`` (what is tested). Each entry says where the kit uses it.
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
from pathlib import Path
from typing import Any

import dbos
import pytest
from dbos import DBOS, DBOSConfig

from relay_notebook.history.steps import SQL_COLUMNS


def test_the_installed_dbos_is_the_tested_minor_version() -> None:
    """pyproject pins dbos to 3.4.x; a different minor version is untested."""
    from importlib.metadata import version

    assert version("dbos").startswith("3.4."), version("dbos")


def test_private_callables_the_runner_uses_exist_with_their_shape() -> None:
    """The registry's internal queue (fast recovery poll, runner/child.py and replay_child.py),
    pending-workflow
    recovery (runner/child.py, runner/worker.py), the error classes matched on
    (runner/child.py, runner/instrument.py) and the client's migrations (runner/pool.py)."""
    from dbos._client import DBOSClient
    from dbos._dbos import _get_or_create_dbos_registry
    from dbos._error import (
        DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded,
        DBOSException,
        DBOSUnexpectedStepError,
    )

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


def test_the_tables_and_columns_history_reads_exist(tmp_path: Path) -> None:
    """DBOS's SQLite schema has the tables and columns the kit reads by SQL
    (history/steps.py SQL_COLUMNS, record/checkpoints.py, history/records.py)."""
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
    with sqlite3.connect(tmp_path / "canary.sqlite") as conn:
        conn.execute(f"SELECT {SQL_COLUMNS} FROM operation_outputs").fetchall()
        conn.execute(
            "SELECT workflow_uuid, function_id, output, error, serialization FROM operation_outputs"
        ).fetchall()
        columns = {row[1] for row in conn.execute("PRAGMA table_info(workflow_status)")}
    needed = {
        "workflow_uuid",
        "status",
        "name",
        "recovery_attempts",
        "application_version",
        "executor_id",
        "created_at",
        "updated_at",
        "parent_workflow_id",
        "application_name",
    }
    missing = needed - columns
    assert not missing, f"workflow_status lost columns the kit reads: {sorted(missing)}"
    from dbos._client import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        assert callable(client._sys_db.run_migrations)  # runner/pool.py
        # runner/pool.py's wait polls a run's status on the client's pooled connections
        import sqlalchemy as sa

        assert isinstance(client._sys_db.engine, sa.Engine)
        with client._sys_db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        client.destroy()


def test_the_childs_postgres_engine_is_made_as_dbos_makes_its_own() -> None:
    """A PostgreSQL child gives DBOS an engine (runner/child.py) with DBOS's own settings: its
    engine defaults (dbos._dbos_config) and its idle-in-transaction timeout (dbos._sys_db)."""
    from dbos._dbos_config import configure_db_engine_parameters
    from dbos._sys_db import DEFAULT_IDLE_TRANSACTION_TIMEOUT_SEC

    from relay_notebook.runner import child

    data: dict[str, Any] = {}
    configure_db_engine_parameters(data)  # type: ignore[arg-type]
    assert data["sys_db_engine_kwargs"] == {
        **child.ENGINE_KWARGS,
        "connect_args": child.ENGINE_CONNECT_ARGS,
    }
    assert DEFAULT_IDLE_TRANSACTION_TIMEOUT_SEC * 1000 == child.IDLE_TRANSACTION_TIMEOUT_MS
    engine = child._postgres_engine("postgresql://relay@127.0.0.1:5432/runs")
    assert engine.url.drivername == "postgresql+psycopg" and engine.pool.size() == 20


@pytest.mark.parametrize("name", ["fork_workflow", "patch", "recv", "send", "set_event"])
def test_the_public_apis_the_next_issues_build_on_are_there(name: str) -> None:
    """Fork, patch, messages and events (dbos-3.4-apis.md) exist on DBOS."""
    assert callable(getattr(DBOS, name))


def test_what_waiting_runs_rely_on_is_there() -> None:
    """Waiting runs (runner/waits.py, record/messages.py, runner/messages.py): the stored form
    of topic ``None``, the sleep recorder behind recv's timeout and the client's ``send``."""
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
