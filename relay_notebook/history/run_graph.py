"""Run graphs from history: the calls a run made, and the path it took on the static flow graph.

Design note: both are ``relay-graph/v1`` documents with the schema's run fields (``status``,
``reused``, ``count``, ``attempts`` on nodes, ``taken`` on edges), mirrored into ``details``
where the SVG renderer and the live view read them (``FlowGraph.from_dict`` keeps only the
mirror). How the path is found is ``history.run_path``'s business.
"""

from __future__ import annotations

import calendar
import copy
import itertools
import time
from dataclasses import dataclass
from typing import Any, Final

from relay_notebook.history.records import RunLog
from relay_notebook.history.run_path import PathWalk, call_key, walk_calls
from relay_notebook.history.run_summary import run_header
from relay_notebook.source.graph import Edge, FlowGraph, Node

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
_TERMINAL: Final = frozenset({"succeeded", "failed"})
#: calls listed in a node's details (a loop's node keeps its first and last ones)
MAX_NODE_CALLS: Final = 12
_CALL_FACTS: Final = (
    "name",
    "function_id",
    "copied_from",
    "edited",
    "occurrence",
    "status",
    "executed_in",
    "reused_in",
    "duration_ms",
    "input_preview",
    "output_preview",
    "error_preview",
)


@dataclass
class RunNode(Node):
    """A node with the run fields of ``relay-graph/v1``."""

    status: str | None = None
    reused: bool | None = None
    count: int | None = None
    attempts: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for name in ("status", "reused", "count", "attempts"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass
class RunEdge(Edge):
    """An edge that says whether the run went along it."""

    taken: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.taken is not None:
            out["taken"] = self.taken
        return out


def _mark(node: RunNode, status: str, *, reused: bool, count: int, attempts: list[int]) -> None:
    node.status, node.reused, node.count, node.attempts = status, reused, count, attempts
    node.details["status"] = status
    node.details["count"] = count
    if reused:
        node.details["reused"] = True


def _call_status(step: dict[str, Any]) -> str:
    if step["status"] in ("running", "waiting"):
        return str(step["status"])
    if step["status"] == "error":
        return "failed"
    if step["status"] == "interrupted":
        return "pending"  # its body runs again on recovery
    if step.get("copied_from") and not step["executed_in"]:
        return "copied"  # a fork's checkpoint, copied from its parent run
    return "reused" if step["reused_in"] else "succeeded"


def _visible(step: dict[str, Any]) -> bool:
    """DBOS's own operations are left out, except the ones a relay calls (DBOS.sleep...)."""
    return step["kind"] != "dbos" or step["child_workflow_id"] is None


def _label(step: dict[str, Any], repeated: bool) -> str:
    name = str(step["name"])
    if step["kind"] in ("agent", "mcp"):
        name = name.split(":", 1)[1]  # the node's type already says agent or MCP
    return f"{name} #{step['occurrence']}" if repeated else name


def _run_node(node_id: str, step: dict[str, Any], label: str) -> RunNode:
    details = {
        "workflow_id": step["workflow_id"],
        "function_id": step["function_id"],
        "name": step["name"],
        "occurrence": step["occurrence"],
        "executed_in": step["executed_in"],
        "reused_in": step["reused_in"],
        "retries": len(step["retries"]),
        "duration_ms": step["duration_ms"],
        "output_preview": step["output_preview"],
        "error_preview": step["error_preview"],
        "receipts": step["receipts"],
    }
    node_type = "step" if step["kind"] == "dbos" else _CALL_TYPES.get(step["kind"], "step")
    node = RunNode(node_id, node_type, label, details={k: v for k, v in details.items() if v})
    node.details["function_id"] = step["function_id"]
    _mark(
        node,
        _call_status(step),
        reused=bool(step["reused_in"]),
        count=len(step["executed_in"]),
        attempts=list(step["executed_in"]),
    )
    return node


def _end_status(log: RunLog) -> str:
    status = log.run.get("status")
    return {"succeeded": "succeeded", "failed": "failed"}.get(str(status), "pending")


def build_run_graph(log: RunLog, *, limit: int = MAX_CALL_NODES) -> FlowGraph:
    """One node per step call the run made, in call order (a child workflow's calls follow
    the call that started it); reused calls carry the badge. Over ``limit`` calls, the first
    and last ones are kept around a node saying how many are hidden."""
    graph = FlowGraph(relay=str(log.run["relay"]), kind="run")
    children = {c["parent_function_id"]: c for c in log.children}
    calls: list[tuple[str, dict[str, Any]]] = []
    for step in log.steps:
        if _visible(step):
            calls.append((f"call-{step['function_id']}", step))
        child = children.get(step["function_id"]) if step["kind"] == "workflow" else None
        if child is not None:
            calls.extend(
                (f"call-{step['function_id']}-{s['function_id']}", s)
                for s in child["steps"]
                if _visible(s)
            )
    counts: dict[tuple[str, str], int] = {}
    for _, s in calls:
        counts[(s["workflow_id"], s["name"])] = counts.get((s["workflow_id"], s["name"]), 0) + 1
    start = RunNode("input", "input", "input")
    _mark(start, "succeeded" if log.attempts else "pending", reused=False, count=1, attempts=[])
    nodes: list[Node] = [start]
    hidden = len(calls) - limit
    if hidden > 0:
        head, tail = calls[: limit - _TAIL], calls[-_TAIL:]
        gap = RunNode("hidden-calls", "loop", f"{hidden:,} more calls", details={"hidden": hidden})
        graph.notes.append(
            f"The run made {len(calls):,} step calls; the graph shows the first "
            f"{len(head):,} and the last {len(tail):,}. The tables list them all."
        )
        nodes += [
            _run_node(i, s, _label(s, counts[(s["workflow_id"], s["name"])] > 1)) for i, s in head
        ]
        nodes.append(gap)
        nodes += [
            _run_node(i, s, _label(s, counts[(s["workflow_id"], s["name"])] > 1)) for i, s in tail
        ]
    else:
        nodes += [
            _run_node(i, s, _label(s, counts[(s["workflow_id"], s["name"])] > 1)) for i, s in calls
        ]
    end = RunNode("output", "output", "output")
    _mark(
        end, _end_status(log), reused=False, count=int(_end_status(log) != "pending"), attempts=[]
    )
    nodes.append(end)
    graph.nodes = nodes
    graph.edges = [RunEdge(a.id, b.id, taken=True) for a, b in itertools.pairwise(nodes)]
    if log.run.get("status") not in _TERMINAL:
        graph.edges[-1].taken = False  # type: ignore[attr-defined]
    return graph


def overlay_run(flow: FlowGraph, log: RunLog) -> FlowGraph:
    """``flow`` (a copy) with the path ``log``'s run took: calls per node (``count``), the
    attempts that ran them, reused badges, edges ``taken``, branches and loops counted, and
    nodes the run never reached (``not_reached`` once it ended, ``pending`` while it can go on)."""
    graph = copy.deepcopy(flow)
    graph.kind = "run"
    graph.relay = graph.relay or str(log.run["relay"])
    facts = log.call_facts()
    sites = {key: f["site"] for key, f in facts.items() if "site" in f}
    walk, calls, unseen = walk_calls(
        graph, blocked_steps(log), finished=log.run.get("status") == "succeeded", sites=sites
    )
    _paint(graph, walk, calls, log, ended=log.run.get("status") in _TERMINAL)
    _describe_calls(graph, calls, facts, log)
    graph.run = run_header(log)
    error = graph.run.get("error")
    if log.run.get("status") == "failed" and error:
        for node in graph.nodes:
            if node.id == "output" or node.details.get("status") == "failed":
                node.details["error"] = error
    if unseen:
        graph.notes.append(
            f"{unseen} step call{'s' if unseen != 1 else ''} of the run could not be placed on "
            f"the flow graph (made through code the graph cannot follow); see the run graph."
        )
    return graph


def _sleep_end_s(step: dict[str, Any]) -> float | None:
    """When a ``DBOS.sleep`` ends: DBOS saves its end time (epoch seconds) as its output,
    previewed as ``wakes YYYY-MM-DD HH:MM:SS UTC`` (to the second)."""
    text = str(step.get("output_preview"))
    try:
        if text.startswith("wakes "):
            return float(calendar.timegm(time.strptime(text[6:], "%Y-%m-%d %H:%M:%S UTC")))
        return float(text)
    except ValueError:
        return None


def blocked_steps(log: RunLog, now_s: float | None = None) -> list[dict[str, Any]]:
    """The root workflow's calls, with the wait the run is blocked in marked ``waiting``.

    DBOS records a ``recv`` only once a message came (or its timeout ran out), but records the
    timeout's sleep (the next function id) as the wait begins: a last call that is a sleep with
    no call recorded just before it is a ``recv`` still waiting, added here as that call. A
    ``DBOS.sleep`` of the relay is recorded as it starts, with its end time: the last call, a
    sleep not over yet, is the run sleeping. Only a run that is waiting (run.json) or has a
    live attempt can be blocked.
    """
    steps = log.steps
    status = log.run.get("status")
    if not steps or not (status == "waiting" or log.run.get("live")):
        return steps
    waiting = log.run.get("waiting") if status == "waiting" else None
    kind = waiting.get("kind") if isinstance(waiting, dict) else None
    last = steps[-1]
    if last["name"] != "DBOS.sleep":
        return steps
    recorded = {s["function_id"] for s in steps}
    fid = int(last["function_id"])
    if fid - 1 >= 1 and fid - 1 not in recorded and kind in (None, "message"):
        recv = {
            **last,
            "name": "DBOS.recv",
            "function_id": fid - 1,
            "status": "waiting",
            "output_preview": None,
            "completed_at_ms": None,
            "duration_ms": None,
        }
        if isinstance(waiting, dict) and waiting.get("topic") is not None:
            recv["topic"] = waiting["topic"]
        return [*steps[:-1], recv, last]
    end = _sleep_end_s(last)
    if kind == "sleep" or (
        kind is None and end is not None and end > (time.time() if now_s is None else now_s)
    ):
        return [*steps[:-1], {**last, "status": "waiting"}]
    return steps


def overlay_events(graph: FlowGraph, latest: dict[str, Any]) -> FlowGraph:
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


def _describe_calls(
    graph: FlowGraph,
    calls: dict[str, list[dict[str, Any]]],
    facts: dict[tuple[str, int], dict[str, Any]],
    log: RunLog,
) -> None:
    """Per-call facts on each node that made calls: attempts that ran and reused them, counts,
    each call's input, output and error previews (already redacted) and duration, and the
    ``execution/call-N`` folders of an agent call (``folders``, from its receipts)."""
    for node in graph.nodes:
        made = calls.get(node.id)
        if not made:
            continue
        rows = []
        for step in made:
            row = {k: step.get(k) for k in _CALL_FACTS if step.get(k) is not None}
            extra = facts.get((step["workflow_id"], step["function_id"]), {})
            if "input_preview" in extra:
                row["input_preview"] = extra["input_preview"]
            folders = sorted({r["call_dir"] for r in log.receipts_of(step) if r.get("call_dir")})
            if folders:
                row["folders"] = folders
            rows.append(row)
        if len(rows) > MAX_NODE_CALLS:
            half = MAX_NODE_CALLS // 2
            rows = [*rows[:half], {"hidden": len(rows) - 2 * half}, *rows[-half:]]
        reused = sum(1 for s in made if s["reused_in"] and not s.get("copied_from"))
        copied = [s for s in made if s.get("copied_from")]
        node.details["calls"] = rows
        again = [f"{s['name']}#{s['occurrence']}" for s in made if len(s["executed_in"]) > 1]
        guarantee = node.details.get("guarantee")
        if again and isinstance(guarantee, dict):
            guarantee["ran_again"] = again  # the record confirms: these bodies ran twice
        node.details["executed_in"] = sorted({a for s in made for a in s["executed_in"]})
        node.details["reused_in"] = sorted({a for s in made for a in s["reused_in"]})
        node.details["reused_calls"] = reused
        if copied:
            node.details["copied_from"] = copied[0]["copied_from"]
            edited = "edited · " if any(s.get("edited") for s in copied) else ""
            many = f"{len(copied)} of {len(made)} " if len(made) > 1 else ""
            node.details["summary"] = f"{edited}{many}copied from {copied[0]['copied_from']}"
        elif len(made) > 1 and reused:
            node.details["summary"] = f"{reused} of {len(made)} reused"
        elif reused:
            node.details["summary"] = "reused"


def _paint(
    graph: FlowGraph,
    walk: PathWalk,
    calls: dict[str, list[dict[str, Any]]],
    log: RunLog,
    *,
    ended: bool,
) -> None:
    started = bool(log.attempts)
    absent = "not_reached" if ended else "pending"
    receipts = {(r["kind"], r["name"]) for r in log.receipts}
    nodes: list[Node] = []
    by_id: dict[str, RunNode] = {}
    for node in graph.nodes:
        run_node = RunNode(node.id, node.type, node.label, node.line, node.details, node.x, node.y)
        by_id[node.id] = run_node
        nodes.append(run_node)
        made = calls.get(node.id, [])
        if made:
            statuses = [_call_status(s) for s in made]
            status = next(
                (s for s in ("running", "waiting", "failed", "pending") if s in statuses),
                next(
                    (k for k in ("reused", "copied") if all(s == k for s in statuses)),
                    "succeeded",
                ),
            )
            executed = sorted({a for s in made for a in s["executed_in"]})
            _mark(
                run_node,
                status,
                reused=any(s["reused_in"] for s in made),
                count=len(made),
                attempts=executed,
            )
            if len(made) > 1:
                run_node.label = f"{node.label} ×{len(made)}"
        elif node.id == "input":
            _mark(
                run_node, "succeeded" if started else "pending", reused=False, count=1, attempts=[]
            )
        elif node.id == "output":
            status = _end_status(log)
            _mark(run_node, status, reused=False, count=int(status != "pending"), attempts=[])
        elif walk.passes.get(node.id):
            count = walk.passes[node.id]
            if node.type == "loop":
                count = sum(
                    walk.taken.get(i, 0)
                    for i, e in enumerate(graph.edges)
                    if e.source == node.id and e.label != "done"
                )
            _mark(run_node, "succeeded", reused=False, count=count, attempts=[])
            if node.type == "loop":
                run_node.label = f"{node.label} ×{count}"
        else:
            _mark(run_node, absent, reused=False, count=0, attempts=[])
    for node in nodes:
        parent = node.details.get("in_step")
        if not isinstance(parent, str) or parent not in by_id or not calls.get(parent):
            continue
        owner = by_id[parent]
        made_call = (
            node.type not in ("agent", "mcp")
            or (
                node.type,
                node.details.get("name")
                if node.type == "agent"
                else f"{node.details.get('server')}.{node.details.get('tool')}",
            )
            in receipts
        )
        node_obj = by_id[node.id]
        if made_call:
            _mark(
                node_obj,
                str(owner.status),
                reused=bool(owner.reused),
                count=int(owner.count or 0),
                attempts=list(owner.attempts or []),
            )
    graph.nodes = nodes
    edges: list[Edge] = []
    for i, e in enumerate(graph.edges):
        taken = walk.taken.get(i, 0) > 0
        if not taken and e.source in calls and e.target in by_id:
            # an adapter call hanging off a step the run made
            taken = "in_step" in by_id[e.target].details and by_id[e.target].status != absent
        edges.append(RunEdge(e.source, e.target, e.label, e.points, taken=taken))
    graph.edges = edges
    for node in nodes:
        if node.type == "decision" and walk.passes.get(node.id):
            node.details["taken"] = sorted(
                {
                    str(e.label)
                    for i, e in enumerate(graph.edges)
                    if e.source == node.id and walk.taken.get(i)
                }
            )
