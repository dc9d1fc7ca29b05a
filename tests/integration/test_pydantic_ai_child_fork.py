"""Forking from inside Pydantic AI's ``DBOSAgent`` child workflow with the real ``relay`` CLI:
``--from`` a model request or a tool call of the agent, ``--set`` a model request's answer to
try "what if the model had said X". The fork's child is DBOS's fork of the agent's child, its
copied calls replayed (the copied model request is not asked again, nor paid), the parent
untouched; on the per-run SQLite default and on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.record.folders import find_run
from relay_notebook.runner.fault_points import ENV_KILL_AT
from relay_notebook.testing import PostgresServer
from relay_notebook.workspace import Manifest, Workspace
from tests.integration.test_pydantic_ai_child import agent_node
from tests.integration.test_pydantic_ai_relays import MODEL

pytest.importorskip("pydantic_ai.durable_exec.dbos")

ROOT = Path(__file__).resolve().parents[2]

# the model notes each time it is asked in its run's execution/models.log (its working folder)
COUNTED = MODEL.replace(
    "    returned = [",
    "    with open('models.log', 'a') as log:\n        log.write(f'{len(messages)}\\n')\n"
    "    returned = [",
).replace('"lookup"', '"stock"')

# a DBOSAgent (its agent runs in the child workflow clerk.run) with one tool, stock
SOURCE = (
    COUNTED
    + '''
from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent

agent = Agent(FunctionModel(reply, model_name="offline-clerk"), name="clerk",
              instructions="Look stock up.")


@agent.tool_plain
@DBOS.step()
async def stock(sku: str) -> str:
    """How many of a product the shop has."""
    return f"{sku}: {len(sku) * 3} left"


dbos_agent = DBOSAgent(agent)


@DBOS.workflow()
async def run(INPUT):
    result = await dbos_agent.run(INPUT["prompt"])
    return {"output": result.output, "requests": result.usage().requests}
'''
)
MODEL_REQUEST = "clerk__model.request"
ANSWER = "found: A-1: 9 left"


def relay(
    home: Path, *args: str, database_url: str | None = None, kill_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RELAY_DATABASE_URL", ENV_KILL_AT)}
    env["PYTHONPATH"] = str(ROOT)
    if database_url is not None:
        env["RELAY_DATABASE_URL"] = database_url
    if kill_at is not None:
        env[ENV_KILL_AT] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def outcome(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["status"] == "succeeded", out
    return out


def folder(ws: Workspace, run_id: str) -> Path:
    return find_run(ws, run_id).path


def asked(ws: Workspace, run_id: str) -> list[int]:
    """How many messages the model was given each time it was asked in the run's attempts."""
    log = folder(ws, run_id) / "execution" / "models.log"
    return [int(n) for n in log.read_text().split()] if log.exists() else []


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def workflows(ws: Workspace, run_id: str) -> list[tuple[str, str | None]]:
    """The workflows in the run's own SQLite database, with their parents."""
    with contextlib.closing(sqlite3.connect(find_run(ws, run_id).database)) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid, parent_workflow_id FROM workflow_status ORDER BY workflow_uuid"
        ).fetchall()
    return [(str(w), p) for w, p in rows]


def child_lines(shown: str, run_id: str) -> list[list[str]]:
    """``relay logs``' lines of the calls of the child workflow clerk.run started, split."""
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("child workflow"))
    assert lines[start].strip().startswith(f"child workflow {run_id}-1 (clerk.run)"), lines
    return [line.split(maxsplit=3)[1:] for line in lines[start + 1 : start + 4]]


def parent_run(ws: Workspace, database_url: str | None = None) -> tuple[str, dict[str, bytes]]:
    """The DBOSAgent relay run once: its id and its folder's bytes."""
    ws.save_draft("shop", textwrap.dedent(SOURCE), Manifest())
    done = outcome(relay(ws.home, "run", "shop", "--input", '{"prompt": "Find A-1"}', "--json",
                         database_url=database_url))  # fmt: skip
    assert done["result"] == {"output": ANSWER, "requests": 2}
    run_id = str(done["run_id"])
    assert asked(ws, run_id) == [1, 3]  # asked twice: the tool call, then the answer
    return run_id, snapshot(folder(ws, run_id))


#: a finished parent run, shared by a module's tests: (its workspace, its id, its folder's bytes)
Parent = tuple[Workspace, str, dict[str, bytes]]


@pytest.fixture(scope="module")
def _sqlite_parent(tmp_path_factory: pytest.TempPathFactory) -> tuple[Parent, Path]:
    """The SQLite parent run, made once for the module, and a copy of its workspace as it was.
    A run folder names its workspace by absolute path, so each test gets the copy back at the
    same path, not a copy elsewhere."""
    base = tmp_path_factory.mktemp("child-fork")
    ws, kept = Workspace(base / "relays"), base / "kept"
    parent, before = parent_run(ws)
    shutil.copytree(ws.home, kept, symlinks=True)
    return (ws, parent, before), kept


@pytest.fixture
def sqlite_parent(_sqlite_parent: tuple[Parent, Path]) -> Parent:
    """The module's workspace holding its SQLite parent run as it was when it finished."""
    (ws, parent, before), kept = _sqlite_parent
    shutil.rmtree(ws.home)
    shutil.copytree(kept, ws.home, symlinks=True)
    return ws, parent, before


def _admin(postgres: PostgresServer, *statements: str) -> None:
    """Run ``statements`` on the server's maintenance database (``postgres``)."""
    import psycopg

    with psycopg.connect(postgres.database_url("postgres"), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture(scope="module")
def _pg_parent(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer
) -> tuple[Parent, Path, str]:
    """The same on PostgreSQL, made once for the module: (the parent, a copy of its workspace,
    its database's name); the database is kept as it was in ``<name>_kept``, a template."""
    base = tmp_path_factory.mktemp("child-fork-pg")
    ws, kept = Workspace(base / "relays"), base / "kept"
    name = postgres.database_url().rsplit("/", 1)[1]
    parent, before = parent_run(ws, postgres.database_url(name))
    shutil.copytree(ws.home, kept, symlinks=True)
    _admin(postgres, f'CREATE DATABASE "{name}_kept" TEMPLATE "{name}"')
    return (ws, parent, before), kept, name


@pytest.fixture
def pg_parent(_pg_parent: tuple[Parent, Path, str], postgres: PostgresServer) -> tuple[Parent, str]:
    """(the parent, its database's URL) with the PostgreSQL parent run as it was when it
    finished: its workspace copied back, its database made again from the template."""
    (ws, parent, before), kept, name = _pg_parent
    shutil.rmtree(ws.home)
    shutil.copytree(kept, ws.home, symlinks=True)
    _admin(
        postgres,
        f'DROP DATABASE "{name}" WITH (FORCE)',
        f'CREATE DATABASE "{name}" TEMPLATE "{name}_kept"',
    )
    return (ws, parent, before), postgres.database_url(name)


def check_edited_fork(ws: Workspace, parent: str, database_url: str | None = None) -> str:
    """Forked from the agent's tool call with its first model answer edited, the tool and the
    second request run fresh on the edited answer; the copied request is not asked again."""
    answer = {"tool_calls": [{"tool": "stock", "args": {"sku": "B-77"}}]}
    done = outcome(relay(
        ws.home, "fork", parent, "--from", "stock#1", "--set",
        f"{MODEL_REQUEST}#1={json.dumps(answer)}", "--json", database_url=database_url,
    ))  # fmt: skip
    fork = str(done["run_id"])
    assert done["result"] == {"output": "found: B-77: 12 left", "requests": 2}
    assert asked(ws, fork) == [3]  # only the second request: the first was copied
    shown = relay(ws.home, "logs", fork, database_url=database_url).stdout
    assert child_lines(shown, fork) == [
        [MODEL_REQUEST, "checkpointed", f"model; copied from {parent}, edited"],
        ["stock", "checkpointed", "tool; executed in 1"],
        [MODEL_REQUEST, "checkpointed", "model; executed in 1"],
    ], shown
    return fork


def test_a_fork_from_inside_a_dbos_agent_edits_the_models_answer(sqlite_parent: Parent) -> None:
    """``relay fork RUN --from stock#1 --set 'clerk__model.request#1=...'`` and ``--from
    clerk__model.request#2``: the result follows the edited answer, the copied requests are not
    asked again nor paid, logs and the run graph say copied and edited, the parent is untouched,
    lineage draws both forks, and what is still refused says what to type."""
    ws, parent, before = sqlite_parent
    fork = check_edited_fork(ws, parent)
    # relay runs: the copied request as not paid
    listed = {r["run_id"]: r for r in json.loads(relay(ws.home, "runs", "--json").stdout)}
    usage = listed[fork]["usage"]
    assert (usage["paid"]["calls"], usage["saved"]["calls"]) == (1, 1), usage
    # the run graph: the agent's node shows the copy and the fresh calls
    from relay_notebook import commands

    node = agent_node(commands.run_detail(ws, fork)["graph"])
    calls = node["details"]["calls"]
    assert [(c["name"], c["executed_in"], c.get("copied_from")) for c in calls] == [
        (MODEL_REQUEST, [], parent), ("stock", [1], None), (MODEL_REQUEST, [1], None),
    ]  # fmt: skip
    # from the second request, nothing edited: the same answer, only that request asked again
    again = outcome(relay(ws.home, "fork", parent, "--from", f"{MODEL_REQUEST}#2", "--json"))
    assert again["result"] == {"output": ANSWER, "requests": 2}
    assert asked(ws, str(again["run_id"])) == [3]
    shown = relay(ws.home, "logs", str(again["run_id"])).stdout
    assert [line[2].split(";")[1].strip() for line in child_lines(shown, again["run_id"])] == [
        f"copied from {parent}", f"copied from {parent}", "executed in 1",
    ]  # fmt: skip
    # the parent: its bytes, its child's calls, its two asks
    assert snapshot(folder(ws, parent)) == before
    assert workflows(ws, fork) == [(fork, None), (f"{fork}-1", fork)]  # not the parent's child
    lineage = relay(ws.home, "lineage", fork).stdout.splitlines()
    assert lineage[0] == f"{parent}  succeeded" and len(lineage) == 3, lineage
    assert f"{fork}  succeeded  from stock#1" in lineage[1] + lineage[2], lineage
    # a call after the one forked from is not copied: refused, naming the fork that edits it
    later = f'{MODEL_REQUEST}#2="x"'
    refused = relay(ws.home, "fork", parent, "--from", "stock#1", "--set", later)
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert line.endswith("[fork-refused]") and "only calls before stock#1 are copied" in line


def test_a_fork_from_inside_a_dbos_agent_on_postgresql(pg_parent: tuple[Parent, str]) -> None:
    """On PostgreSQL the fork's child is forked into the fork's own DBOS application: the
    edited answer is followed, the copied request not asked again, the parent's rows kept."""
    import psycopg

    (ws, parent, before), database_url = pg_parent
    fork = check_edited_fork(ws, parent, database_url)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid, status, parent_workflow_id, application_name "
            "FROM dbos.workflow_status WHERE workflow_uuid IN (%s, %s) ORDER BY workflow_uuid",
            (f"{parent}-1", f"{fork}-1"),
        ).fetchall()
        apps = dict(conn.execute(
            "SELECT workflow_uuid, application_name FROM dbos.workflow_status "
            "WHERE workflow_uuid IN (%s, %s)", (parent, fork),
        ).fetchall())  # fmt: skip
    assert rows == [
        (f"{parent}-1", "SUCCESS", parent, apps[parent]),
        (f"{fork}-1", "SUCCESS", fork, apps[fork]),
    ]
    assert apps[parent] != apps[fork]
    assert snapshot(folder(ws, parent)) == before
    # deleting the fork deletes its child with it, and leaves the parent's
    assert relay(ws.home, "delete", fork, database_url=database_url).returncode == 0
    with psycopg.connect(database_url) as conn:
        left = conn.execute(
            "SELECT workflow_uuid FROM dbos.workflow_status ORDER BY workflow_uuid"
        ).fetchall()
    assert [r[0] for r in left] == [parent, f"{parent}-1"]


def check_killed_fork(made: Parent, database_url: str | None = None) -> str:
    """Kill ``relay fork`` right after DBOS forked the agent's child (before the run's own
    workflow); ``relay recover`` completes the fork with the edit, the copied request not asked
    again. ``made``: the parent run, finished. The fork's id."""
    ws, parent, before = made
    answer = {"tool_calls": [{"tool": "stock", "args": {"sku": "B-77"}}]}
    killed = relay(
        ws.home, "fork", parent, "--from", "stock#1", "--set",
        f"{MODEL_REQUEST}#1={json.dumps(answer)}", kill_at="fork:child-forked",
        database_url=database_url,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    fork = "shop-2"
    assert json.loads((folder(ws, fork) / "run.json").read_text())["status"] == "creating"
    done = outcome(relay(ws.home, "recover", fork, "--json", database_url=database_url))
    assert done["result"] == {"output": "found: B-77: 12 left", "requests": 2}
    assert asked(ws, fork) == [3]
    assert snapshot(folder(ws, parent)) == before
    return fork


def test_a_fork_from_inside_a_dbos_agent_killed_while_made_is_completed(
    sqlite_parent: Parent,
) -> None:
    """Killed between DBOS's fork of the child and of the run's workflow, the fork (a staging
    database that never was placed) is made again from the parent by ``relay recover``."""
    check_killed_fork(sqlite_parent)


def test_a_fork_from_inside_a_dbos_agent_on_postgresql_killed_while_made(
    pg_parent: tuple[Parent, str],
) -> None:
    """On PostgreSQL the killed maker left the forked child held, without its parent:
    ``relay recover`` keeps it (no second child), forks the run's workflow onto it and runs."""
    import psycopg

    made, database_url = pg_parent
    fork = check_killed_fork(made, database_url)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid, parent_workflow_id FROM dbos.workflow_status "
            "WHERE workflow_uuid LIKE %s ORDER BY workflow_uuid", (f"{fork}%",),
        ).fetchall()  # fmt: skip
    assert rows == [(fork, None), (f"{fork}-1", fork)]


def test_a_fork_from_inside_an_interrupted_dbos_agent_leaves_the_parent_recoverable(
    tmp_path: Path,
) -> None:
    """Forked from the tool call of a run killed during the agent's second request, the fork
    runs that request on the edited answer and never recovers the parent's unfinished child
    (not in its database); the parent still recovers to its own answer."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("shop", textwrap.dedent(SOURCE), Manifest())
    crashed = relay(ws.home, "run", "shop", "--input", '{"prompt": "Find A-1"}', "--json",
                    "--crash", f"during:{MODEL_REQUEST}#2")  # fmt: skip
    parent = str(json.loads(crashed.stdout)["run_id"])
    assert json.loads(crashed.stdout)["status"] == "interrupted", crashed.stdout
    answer = {"tool_calls": [{"tool": "stock", "args": {"sku": "C-5"}}]}
    done = outcome(relay(
        ws.home, "fork", parent, "--from", "stock#1", "--set",
        f"{MODEL_REQUEST}#1={json.dumps(answer)}", "--json",
    ))  # fmt: skip
    fork = str(done["run_id"])
    assert done["result"] == {"output": "found: C-5: 9 left", "requests": 2}
    assert asked(ws, fork) == [3]
    assert workflows(ws, fork) == [(fork, None), (f"{fork}-1", fork)]
    recovered = outcome(relay(ws.home, "recover", parent, "--json"))
    assert recovered["result"] == {"output": ANSWER, "requests": 2}
