"""DBOS's own tools on a relay run kept in PostgreSQL: `dbos workflow cancel`, `resume` and
`fork`, run as a user runs them (the real `dbos` CLI on the workspace's database), then the kit's
`relay runs` (the API and the CLI), `logs`, `lineage` and `recover`, as for a SQLite run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from test_dbos_tools import dbos, recover_cancelled
from test_runner import go

from relay_notebook import commands
from relay_notebook.errors import OutsideWorkflowError
from relay_notebook.record.folders import find_run
from relay_notebook.workspace import Workspace
from tests.relays import relay_source


def rows(database_url: str, run_id: str) -> dict[str, str]:
    """The run's workflows in PostgreSQL (its own and those forked from it) and their status."""
    with psycopg.connect(database_url) as conn:
        found = conn.execute(
            "SELECT workflow_uuid, status FROM dbos.workflow_status "
            "WHERE workflow_uuid = %s OR forked_from = %s",
            (run_id, run_id),
        ).fetchall()
    return {str(w): str(s) for w, s in found}


def cli_runs(ws: Workspace, database_url: str) -> list[tuple[str, str]]:
    """`relay runs` in a fresh interpreter whose RELAY_DATABASE_URL is the workspace's."""
    env = {**os.environ, "RELAY_DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home), "runs"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [tuple(line.split()[:2]) for line in done.stdout.splitlines()]  # type: ignore[misc]


@pytest.fixture
def crashed(tmp_path: Path, database_url: str, warm_start: bool) -> tuple[Workspace, str]:
    """A run of `five` on PostgreSQL killed after its second `fetch`: the workspace, run id."""
    ws = Workspace(tmp_path / "relays", database_url=database_url, warm_start=warm_start)
    ws.save_draft("five", relay_source("five"))
    first = go(commands.run(ws, "five", run_input={"n": 3}, crash="after:fetch#2"))
    assert first.status == "interrupted", first.error
    assert not find_run(ws, first.run_id).database.exists()  # its state is in PostgreSQL
    return ws, first.run_id


def test_a_postgres_run_cancelled_with_dbos_is_listed_cancelled_and_recovers_once_resumed(
    crashed: tuple[Workspace, str], database_url: str
) -> None:
    """After `dbos workflow cancel` on the database, `relay runs` (API and CLI), lineage and
    logs say cancelled and recover runs nothing; after `dbos workflow resume` the run is listed
    interrupted again and recovers from its PostgreSQL checkpoints."""
    ws, run_id = crashed
    assert [r.status for r in commands.runs(ws)] == ["interrupted"]
    dbos("cancel", run_id, "-s", database_url)
    assert rows(database_url, run_id) == {run_id: "CANCELLED"}
    assert [r.status for r in commands.runs(ws)] == ["cancelled"]
    assert [r.status for r in commands.runs(ws, "five")] == ["cancelled"]
    assert [r.run_id for r in commands.runs(ws)] == [run_id]
    assert cli_runs(ws, database_url) == [(run_id, "cancelled")]
    held = recover_cancelled(ws, run_id, "DATABASE_URL")
    # the user's URL is never written out
    assert held.error is not None and database_url not in held.error["message"]
    assert rows(database_url, run_id) == {run_id: "CANCELLED"}

    dbos("resume", run_id, "-s", database_url)
    assert [r.status for r in commands.runs(ws)] == ["interrupted"]  # DBOS: ENQUEUED again
    assert cli_runs(ws, database_url) == [(run_id, "interrupted")]
    final = go(commands.recover(ws, run_id))
    assert final.status == "succeeded" and final.result == {"total": 30}
    assert final.reused[:2] == [1, 2]  # the fetches checkpointed before the crash
    assert rows(database_url, run_id) == {run_id: "SUCCESS"}
    assert [r.status for r in commands.runs(ws)] == ["succeeded"]


def test_a_dbos_fork_of_a_postgres_run_is_refused_before_recovery_would_run_it(
    crashed: tuple[Workspace, str], database_url: str
) -> None:
    """`dbos workflow fork` on PostgreSQL leaves an ENQUEUED workflow: the logs name it, recover
    refuses in one coded line; cancelled with DBOS's tool, recovery goes on and never runs it."""
    ws, run_id = crashed
    dbos("fork", run_id, "-S", "2", "-f", "copy-1", "-s", database_url)
    assert rows(database_url, run_id) == {run_id: "PENDING", "copy-1": "ENQUEUED"}
    log = commands.logs(ws, run_id)
    assert [(w.workflow_id, w.status, w.forked_from) for w in log.run.outside] == [
        ("copy-1", "ENQUEUED", run_id)
    ]
    with pytest.raises(OutsideWorkflowError) as refused:
        go(commands.recover(ws, run_id))
    message = str(refused.value)
    assert "copy-1 (ENQUEUED, forked from " + run_id in message
    assert "dbos workflow cancel copy-1 -s DATABASE_URL" in message and "\n" not in message
    assert [r.status for r in commands.runs(ws)] == ["interrupted"]
    assert rows(database_url, run_id) == {run_id: "PENDING", "copy-1": "ENQUEUED"}  # nothing ran

    dbos("cancel", "copy-1", "-s", database_url)
    final = go(commands.recover(ws, run_id))
    assert final.status == "succeeded" and final.result == {"total": 30}
    assert rows(database_url, run_id) == {run_id: "SUCCESS", "copy-1": "CANCELLED"}
