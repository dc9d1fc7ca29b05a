"""Run graphs from history: the calls a run made in call order, and the events it published.

Design note: a run graph is a ``relay-graph/v1`` document with the run fields of
``history.run_nodes``. The path a run took on the static flow graph is ``history.run_overlay``'s;
``overlay_run`` and ``blocked_steps`` are re-exported here, where callers have found them.
"""

from __future__ import annotations

import itertools
from typing import Final

from relay_notebook.history.log_records import StepCall
from relay_notebook.history.records import RunLog
from relay_notebook.history.run_events import LatestEvents
from relay_notebook.history.run_nodes import RunEdge, RunNode, call_status, end_status, mark
from relay_notebook.history.run_overlay import blocked_steps, overlay_run
from relay_notebook.history.run_path import call_key
from relay_notebook.record.run_record import TERMINAL
from relay_notebook.source.graph import FlowGraph, Node

__all__ = [
    "RunEdge",
    "RunNode",
    "blocked_steps",
    "build_run_graph",
    "call_key",
    "overlay_events",
    "overlay_run",
]

_CALL_TYPES: Final = {"step": "step", "workflow": "workflow", "agent": "agent", "mcp": "mcp"}
#: run graphs longer than this keep their first and last calls and say how many are hidden
MAX_CALL_NODES: Final = 400
_TAIL: Final = 50


def _visible(step: StepCall) -> bool:
    """DBOS's own operations are left out, except the ones a relay calls (DBOS.sleep...)."""
    return step.kind != "dbos" or step.child_workflow_id is None


def _label(step: StepCall, repeated: bool) -> str:
    name = step.name
    if step.kind in ("agent", "mcp"):
        name = name.split(":", 1)[1]  # the node's type already says agent or MCP
    return f"{name} #{step.occurrence}" if repeated else name


def _run_node(node_id: str, step: StepCall, label: str) -> RunNode:
    details = {
        "workflow_id": step.workflow_id,
        "function_id": step.function_id,
        "name": step.name,
        "occurrence": step.occurrence,
        "executed_in": list(step.executed_in),
        "reused_in": list(step.reused_in),
        "retries": len(step.retries),
        "duration_ms": step.duration_ms,
        "output_preview": step.output_preview,
        "error_preview": step.error_preview,
        "receipts": list(step.receipts),
    }
    node_type = "step" if step.kind == "dbos" else _CALL_TYPES.get(step.kind, "step")
    node = RunNode(node_id, node_type, label, details={k: v for k, v in details.items() if v})
    node.details["function_id"] = step.function_id
    mark(
        node,
        call_status(step),
        reused=bool(step.reused_in),
        count=len(step.executed_in),
        attempts=list(step.executed_in),
    )
    return node


def build_run_graph(log: RunLog, *, limit: int = MAX_CALL_NODES) -> FlowGraph:
    """One node per step call the run made, in call order (a child workflow's calls follow
    the call that started it); reused calls carry the badge. Over ``limit`` calls, the first
    and last ones are kept around a node saying how many are hidden."""
    graph = FlowGraph(relay=log.run.relay, kind="run")
    children = {c.parent_function_id: c for c in log.children}
    calls: list[tuple[str, StepCall]] = []
    for step in log.steps:
        if _visible(step):
            calls.append((f"call-{step.function_id}", step))
        child = children.get(step.function_id) if step.kind == "workflow" else None
        if child is not None:
            calls.extend(
                (f"call-{step.function_id}-{s.function_id}", s) for s in child.steps if _visible(s)
            )
    counts: dict[tuple[str, str], int] = {}
    for _, s in calls:
        counts[(s.workflow_id, s.name)] = counts.get((s.workflow_id, s.name), 0) + 1
    start = RunNode("input", "input", "input")
    mark(start, "succeeded" if log.attempts else "pending", reused=False, count=1, attempts=[])
    nodes: list[Node] = [start]
    hidden = len(calls) - limit
    if hidden > 0:
        head, tail = calls[: limit - _TAIL], calls[-_TAIL:]
        gap = RunNode("hidden-calls", "loop", f"{hidden:,} more calls", details={"hidden": hidden})
        graph.notes.append(
            f"The run made {len(calls):,} step calls; the graph shows the first "
            f"{len(head):,} and the last {len(tail):,}. The tables list them all."
        )
        nodes += [_run_node(i, s, _label(s, counts[(s.workflow_id, s.name)] > 1)) for i, s in head]
        nodes.append(gap)
        nodes += [_run_node(i, s, _label(s, counts[(s.workflow_id, s.name)] > 1)) for i, s in tail]
    else:
        nodes += [_run_node(i, s, _label(s, counts[(s.workflow_id, s.name)] > 1)) for i, s in calls]
    end = RunNode("output", "output", "output")
    mark(end, end_status(log), reused=False, count=int(end_status(log) != "pending"), attempts=[])
    nodes.append(end)
    graph.nodes = nodes
    graph.edges = [RunEdge(a.id, b.id, taken=True) for a, b in itertools.pairwise(nodes)]
    if log.run.status not in TERMINAL:
        graph.edges[-1].taken = False  # type: ignore[attr-defined]
    return graph


def overlay_events(graph: FlowGraph, latest: LatestEvents) -> FlowGraph:
    """``graph`` (changed in place) with what the run published: ``run.events`` (the latest
    events and stream values, ``RunEvents.latest``), each event node's latest value
    (``details.latest``), each stream node's values (``details.stream``), and a waiting wait
    node's view of the events to decide on (``details.events``)."""
    if not latest.get("events") and not latest.get("streams"):
        return graph
    if graph.run is not None:
        graph.run["events"] = latest
    root = graph.run.get("run_id") if graph.run else None
    events = {e["key"]: e for e in latest.get("events", []) if e["workflow_id"] == root}
    streams = {s["key"]: s for s in latest.get("streams", []) if s["workflow_id"] == root}
    for node in graph.nodes:
        key = node.details.get("key")
        if node.type == "event" and key in events:
            node.details["latest"] = events[key]["preview"]
        elif node.type == "stream" and key in streams:
            node.details["stream"] = streams[key]
        elif node.type == "wait" and node.details.get("status") == "waiting":
            node.details["events"] = latest.get("events", [])
    return graph
