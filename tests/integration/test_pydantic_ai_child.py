"""Pydantic AI's ``DBOSAgent`` runs its agent in a DBOS child workflow (``clerk.run``): its
model requests and tool calls are the child's steps, yet they are painted on the agent's node
as ``DBOSDurability``'s are (kinds, counts, tokens), listed by ``relay logs``, crash points
recovered from the child's checkpoints; a fork edit it cannot make is refused saying what to do."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.runner.fork import ForkError, ForkRequest
from relay_notebook.runner.runs import start_fork
from relay_notebook.views.live import RunMonitor
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.workspace import Workspace
from tests.integration.framework_runs import crashed_and_recovered, go
from tests.integration.test_pydantic_ai_relays import CAPABILITY, WRAPPED, save

pytest.importorskip("pydantic_ai.durable_exec.dbos")


def agent_node(graph: dict[str, Any]) -> dict[str, Any]:
    """The one agent node of a run graph document."""
    [node] = [n for n in graph["nodes"] if n["type"] == "agent"]
    return node


def calls_of(node: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each call on a node: name, attempts that executed and reused it, its tokens' line."""
    return [
        (c["name"], c["executed_in"], c["reused_in"], c.get("tokens"))
        for c in node["details"]["calls"]
    ]


def relay_cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home), *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def _wrapped_run(
    tmp_path_factory: pytest.TempPathFactory, warm_start: bool
) -> tuple[Workspace, str, Path]:
    """One succeeded run of the DBOSAgent relay, made once for the module: (its workspace, its
    id, a copy of the workspace as it was). A run folder names its workspace by absolute path,
    so each test gets the copy back at the same path, not a copy elsewhere."""
    base = tmp_path_factory.mktemp("pydantic-child")
    ws, kept = Workspace(base / "relays", warm_start=warm_start), base / "kept"
    save(ws, WRAPPED)
    out = go(ws)
    assert out.status == "succeeded", out.error
    shutil.copytree(ws.home, kept, symlinks=True)
    return ws, out.run_id, kept


@pytest.fixture
def wrapped_run(_wrapped_run: tuple[Workspace, str, Path]) -> tuple[Workspace, str]:
    """The module's workspace holding its DBOSAgent run as it was when it finished: (the
    workspace, the run's id)."""
    ws, run_id, kept = _wrapped_run
    shutil.rmtree(ws.home)
    shutil.copytree(kept, ws.home, symlinks=True)
    return ws, run_id


def test_a_dbos_agents_calls_are_on_its_node_as_the_capabilitys_are(
    wrapped_run: tuple[Workspace, str],
) -> None:
    """The run graph, the notebook's run view and ``relay logs`` of a DBOSAgent run show its
    two model requests and its tool call on the agent's node, as the same agent written with
    DBOSDurability shows them: same calls, count, kinds and tokens; nothing left unplaced."""
    workspace, run_id = wrapped_run  # succeeded (``_wrapped_run``)
    graph = commands.run_detail(workspace, run_id)["graph"]
    node = agent_node(graph)
    assert (node["label"], node["details"]["status"], node["details"]["count"]) == (
        "clerk ×3", "succeeded", 3,
    )  # fmt: skip
    assert calls_of(node) == [
        ("clerk__model.request", [1], [], "offline-clerk · 52 in + 5 out tokens"),
        ("lookup", [1], [], None),
        ("clerk__model.request", [1], [], "offline-clerk · 57 in + 11 out tokens"),
    ]
    # the calls are the child workflow's, not the relay's own
    child = node["details"]["calls"][0]
    assert child["function_id"] == 1
    assert not graph.get("notes")
    assert all(e["taken"] for e in graph["edges"])
    # the notebook's run view paints the same node
    monitor = RunMonitor(
        commands.run_flow(workspace, run_id).graph,
        lambda run_id: commands.logs(workspace, run_id),
        run_id=run_id,
    )
    monitor.refresh()
    viewed = agent_node(monitor.bundle()[GRAPH_MIME])
    assert calls_of(viewed) == calls_of(node) and viewed["details"]["count"] == 3
    # relay logs: the child's calls with their kinds under the call that started it
    shown = relay_cli(workspace, "logs", run_id).stdout.splitlines()
    start = next(i for i, line in enumerate(shown) if " clerk.run " in line)
    assert "workflow; executed in 1" in shown[start]
    assert shown[start + 1].strip().startswith(f"child workflow {run_id}-1 (clerk.run)")
    assert [line.split()[1:] for line in shown[start + 2 : start + 5]] == [
        ["clerk__model.request", "checkpointed", "model;", "executed", "in", "1"],
        ["lookup", "checkpointed", "tool;", "executed", "in", "1"],
        ["clerk__model.request", "checkpointed", "model;", "executed", "in", "1"],
    ]
    # the capability form: the same calls on the same node
    save(workspace, CAPABILITY, name="direct")
    same = go(workspace, name="direct")
    assert same.status == "succeeded", same.error
    direct = agent_node(commands.run_detail(workspace, same.run_id)["graph"])
    assert calls_of(direct) == calls_of(node)
    assert direct["details"]["count"] == node["details"]["count"]


def test_a_crash_during_a_childs_model_request_recovers_reusing_the_first(
    workspace: Workspace,
) -> None:
    """Killed inside the child's second model request, the agent node says where the run
    stopped; recovered, the first request and the tool call come back from the child's
    checkpoints (not paid again) and the second runs again."""
    save(workspace, WRAPPED)
    first = go(workspace, crash="during:clerk__model.request#2")
    assert first.status == "interrupted", first.error
    node = agent_node(commands.run_detail(workspace, first.run_id)["graph"])
    assert (node["details"]["status"], node["details"].get("stopped")) == (
        "interrupted", "interrupted",
    )  # fmt: skip
    assert [c["name"] for c in node["details"]["calls"]] == [
        "clerk__model.request", "lookup", "clerk__model.request",
    ]  # fmt: skip
    out = commands.recover(workspace, first.run_id).wait(180)
    assert out.status == "succeeded", out.error
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    node = agent_node(commands.run_detail(workspace, first.run_id)["graph"])
    assert calls_of(node) == [
        ("clerk__model.request", [1], [2],
         "offline-clerk · 52 in + 5 out tokens; not paid again in attempt 2"),
        ("lookup", [1], [2], None),
        ("clerk__model.request", [1, 2], [], "offline-clerk · 57 in + 11 out tokens; paid 2×"),
    ]  # fmt: skip
    assert node["details"]["summary"] == "2 of 3 reused"
    log = commands.logs(workspace, first.run_id)
    assert log.usage is not None and log.usage.saved.calls == 1


def test_a_crash_after_a_childs_model_request_recovers_reusing_it(workspace: Workspace) -> None:
    """Killed right after the child's first model request was checkpointed, the recovery
    reuses it and runs the tool and the second request: the agent's answer is the same."""
    save(workspace, WRAPPED)
    first, out = crashed_and_recovered(workspace, "after:clerk__model.request#1")
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    node = agent_node(commands.run_detail(workspace, first.run_id)["graph"])
    assert [c[:3] for c in calls_of(node)] == [
        ("clerk__model.request", [1], [2]),
        ("lookup", [2], []),
        ("clerk__model.request", [2], []),
    ]
    log = commands.logs(workspace, first.run_id)
    assert log.usage is not None
    assert (log.usage.paid.calls, log.usage.saved.calls) == (2, 1)


def test_editing_a_dbos_agents_call_the_fork_does_not_copy_is_refused_saying_what_to_type(
    wrapped_run: tuple[Workspace, str],
) -> None:
    """A fork from the relay's own call after the agent replays the agent's child as it ran:
    ``--set`` of one of its model requests is refused in one coded line naming the fork from
    inside the agent that edits it, and that fork runs on the edited answer (``relay fork``
    from a DBOSAgent's calls: ``test_pydantic_ai_child_fork.py``)."""
    workspace, run_id = wrapped_run
    edit = ForkRequest("DBOS.getResult#1", sets={"clerk__model.request#1": "what if"})
    with pytest.raises(ForkError) as refused:
        start_fork(workspace, run_id, edit)
    assert str(refused.value) == (
        f"Cannot set the output of clerk__model.request#1: it is a call of child workflow "
        f"{run_id}-1 (started by clerk.run#1), and a fork from DBOS.getResult#1 replays that "
        f"child as it ran, unedited. To edit it, fork from a later call of that child: relay "
        f"fork {run_id} --from lookup#1 --set 'clerk__model.request#1=VALUE' [fork-refused]"
    )
    assert [r.run_id for r in commands.runs(workspace)] == [run_id]
    # what the refusal says to type, from the terminal: the agent ends on the edited answer
    shown = relay_cli(
        workspace, "fork", run_id, "--from", "lookup#1", "--set",
        'clerk__model.request#1="what if"', "--json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["result"]["output"] == "what if"
