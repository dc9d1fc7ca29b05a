"""What the agent-framework tests (OpenAI Agents SDK, Pydantic AI) share: a run of the ``shop``
relay, its model calls as the events file holds them, and the agent node its graph draws."""

from __future__ import annotations

from typing import Any

from relay_notebook import commands
from relay_notebook.commands.runs import RunOutcome
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import Node
from relay_notebook.workspace import Workspace


def go(ws: Workspace, crash: str | None = None, name: str = "shop") -> RunOutcome:
    """A run of relay ``name`` asked to find A-1, waited for (3 minutes at most)."""
    out: RunOutcome = commands.run(ws, name, run_input={"prompt": "Find A-1"}, crash=crash).wait(
        180
    )
    return out


def crashed_and_recovered(ws: Workspace, crash: str) -> tuple[RunOutcome, RunOutcome]:
    """A run of ``shop`` killed at ``crash`` (so interrupted), then recovered to success: the
    outcomes of its first attempt and of the recovery."""
    first = go(ws, crash=crash)
    assert first.status == "interrupted", first.error
    out: RunOutcome = commands.recover(ws, first.run_id).wait(180)
    assert out.status == "succeeded", out.error
    return first, out


def model_calls(ws: Workspace, run_id: str) -> list[dict[str, Any]]:
    """The run's ``model_call`` events, in the order they were written."""
    folder = find_run(ws, run_id)
    return [dict(e) for e in read_events(folder.events) if e["kind"] == "model_call"]


def files_holding(ws: Workspace, run_id: str, value: str) -> list[str]:
    """The files of the run's folder (paths relative to it) whose bytes hold ``value``; the
    folder read has the calls' receipts in it."""
    folder = find_run(ws, run_id).path
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "receipt.json" for p in files)
    return [str(p.relative_to(folder)) for p in files if value.encode() in p.read_bytes()]


def agent_node(source: str) -> Node:
    """The one agent node of the ``shop`` relay's flow graph, which resolves every call."""
    graph = build_flow_graph(source, relay="shop")
    [node] = [n for n in graph.nodes if n.type == "agent"]
    assert not [n for n in graph.nodes if n.type == "unresolved"]
    return node
