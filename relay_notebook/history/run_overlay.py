"""The path a run took on its static flow graph, painted from history (``overlay_run``).

Design note: the overlay is the flow graph with the run fields of ``history.run_nodes``: calls
per node, the attempts that ran them, edges taken, nodes not reached. How the path is found is
``history.run_path``'s business; what the run is blocked in is read here (``blocked_steps``).
"""

from __future__ import annotations

import calendar
import copy
import time
from dataclasses import replace
from typing import Any, Final

from relay_notebook.history.log_records import CallFacts, StepCall
from relay_notebook.history.model_calls import call_usage_text
from relay_notebook.history.records import RunLog
from relay_notebook.history.run_nodes import RunEdge, RunNode, call_status, end_status, mark
from relay_notebook.history.run_path import PathWalk, place_children, walk_calls
from relay_notebook.history.run_summary import run_header
from relay_notebook.record.run_record import TERMINAL
from relay_notebook.source.graph import Edge, FlowGraph, Node

__all__ = ["MAX_NODE_CALLS", "blocked_steps", "overlay_run"]

#: calls listed in a node's details (a loop's node keeps its first and last ones)
MAX_NODE_CALLS: Final = 12
#: a node of several calls shows the first of these its calls have (else reused, copied or
#: succeeded): where the run is, or where it stopped, wins
_FIRST: Final = ("running", "waiting", "failed", "interrupted", "pending")
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
    "output_preview",
    "error_preview",
)


def overlay_run(flow: FlowGraph, log: RunLog) -> FlowGraph:
    """``flow`` (a copy) with the path ``log``'s run took: calls per node (``count``), the
    attempts that ran them, reused badges, edges ``taken``, branches and loops counted, and
    nodes the run never reached (``not_reached`` once it ended, ``pending`` while it can go on)."""
    graph = copy.deepcopy(flow)
    graph.kind = "run"
    graph.relay = graph.relay or log.run.relay
    facts = log.call_facts()
    sites = {key: f.site for key, f in facts.items() if f.site is not None}
    walk, calls, unseen = walk_calls(
        graph, blocked_steps(log), finished=log.run.status == "succeeded", sites=sites
    )
    place_children(graph, calls, list(log.children))
    annotated = flow.kind == "annotations"
    _paint(graph, walk, calls, log, ended=log.run.status in TERMINAL, annotated=annotated)
    _describe_calls(graph, calls, facts, log)
    graph.run = run_header(log)
    error = graph.run.get("error")
    if log.run.status == "failed" and error:
        for node in graph.nodes:
            if node.id == "output" or node.details.get("status") == "failed":
                node.details["error"] = error
    if unseen:
        why = (
            "no # @relay node stands for it"
            if annotated and unseen == 1
            else "no # @relay node stands for them"
            if annotated
            else "made through code the graph cannot follow"
        )
        graph.notes.append(
            f"{unseen} step call{'s' if unseen != 1 else ''} of the run could not be placed on "
            f"the flow graph ({why}); see the run graph."
        )
    return graph


def _call_name(node: Node) -> tuple[str, object]:
    """The (kind, name) a platform call of ``node`` has in the run's receipts."""
    if node.type == "agent":
        return node.type, node.details.get("name")
    return node.type, f"{node.details.get('server')}.{node.details.get('tool')}"


def _stopped_at(made: list[StepCall], log: RunLog) -> str | None:
    """Where the run stopped, if among ``made`` (one node's calls): ``interrupted`` (the call
    running when the process died, its run not going again yet) or ``raised`` (the call whose
    exception failed the run)."""
    status = log.run.status
    stopped = status in ("interrupted", "needs_reconciliation") and not log.run.live
    if stopped and any(s.status == "interrupted" for s in made):
        return "interrupted"
    if status == "failed" and any(s.status == "error" for s in made):
        return "raised"
    return None


def _sleep_end_s(step: StepCall) -> float | None:
    """When a ``DBOS.sleep`` ends: DBOS saves its end time (epoch seconds) as its output,
    previewed as ``wakes YYYY-MM-DD HH:MM:SS UTC`` (to the second)."""
    text = str(step.output_preview)
    try:
        if text.startswith("wakes "):
            return float(calendar.timegm(time.strptime(text[6:], "%Y-%m-%d %H:%M:%S UTC")))
        return float(text)
    except ValueError:
        return None


def blocked_steps(log: RunLog, now_s: float | None = None) -> list[StepCall]:
    """The root workflow's calls, with the wait the run is blocked in marked ``waiting``.

    DBOS records a ``recv`` only once a message came (or its timeout ran out), but records the
    timeout's sleep (the next function id) as the wait begins: a last call that is a sleep with
    no call recorded just before it is a ``recv`` still waiting, added here as that call. A
    ``DBOS.sleep`` of the relay is recorded as it starts, with its end time: the last call, a
    sleep not over yet, is the run sleeping. Only a run that is waiting (run.json) or has a
    live attempt can be blocked.
    """
    steps = list(log.steps)
    status = log.run.status
    if not steps or not (status == "waiting" or log.run.live):
        return steps
    waiting = log.run.waiting if status == "waiting" else None
    kind = waiting.get("kind") if isinstance(waiting, dict) else None
    last = steps[-1]
    if last.name != "DBOS.sleep":
        return steps
    recorded = {s.function_id for s in steps}
    fid = last.function_id
    if fid - 1 >= 1 and fid - 1 not in recorded and kind in (None, "message"):
        recv = replace(
            last,
            name="DBOS.recv",
            function_id=fid - 1,
            status="waiting",
            output_preview=None,
            completed_at_ms=None,
            duration_ms=None,
            topic=waiting.get("topic") if isinstance(waiting, dict) else None,
        )
        return [*steps[:-1], recv, last]
    end = _sleep_end_s(last)
    if kind == "sleep" or (
        kind is None and end is not None and end > (time.time() if now_s is None else now_s)
    ):
        return [*steps[:-1], replace(last, status="waiting")]
    return steps


def _describe_calls(
    graph: FlowGraph,
    calls: dict[str, list[StepCall]],
    facts: dict[tuple[str, int], CallFacts],
    log: RunLog,
) -> None:
    """Per-call facts on each node that made calls: attempts that ran and reused them, counts,
    each call's input, output and error previews (already redacted) and duration, and the
    ``execution/call-N`` folders of an agent call (``folders``, from its receipts)."""
    for node in graph.nodes:
        made = calls.get(node.id)
        if not made:
            continue
        rows = [_call_row(step, facts, log) for step in made]
        if len(rows) > MAX_NODE_CALLS:
            half = MAX_NODE_CALLS // 2
            rows = [*rows[:half], {"hidden": len(rows) - 2 * half}, *rows[-half:]]
        reused = sum(1 for s in made if s.reused_in and not s.copied_from)
        copied = [s for s in made if s.copied_from]
        node.details["calls"] = rows
        again = [s.label for s in made if len(s.executed_in) > 1]
        guarantee = node.details.get("guarantee")
        if again and isinstance(guarantee, dict):
            guarantee["ran_again"] = again  # the record confirms: these bodies ran twice
        node.details["executed_in"] = sorted({a for s in made for a in s.executed_in})
        node.details["reused_in"] = sorted({a for s in made for a in s.reused_in})
        node.details["reused_calls"] = reused
        if copied:
            node.details["copied_from"] = copied[0].copied_from
            edited = "edited · " if any(s.edited for s in copied) else ""
            many = f"{len(copied)} of {len(made)} " if len(made) > 1 else ""
            node.details["summary"] = f"{edited}{many}copied from {copied[0].copied_from}"
        elif len(made) > 1 and reused:
            node.details["summary"] = f"{reused} of {len(made)} reused"
        elif reused:
            node.details["summary"] = "reused"


def _call_row(
    step: StepCall, facts: dict[tuple[str, int], CallFacts], log: RunLog
) -> dict[str, Any]:
    """One call in a node's details: what ``_CALL_FACTS`` names that it has, its input
    preview, the ``execution/call-N`` folders of its platform calls, and a model call's tokens
    and cost (``tokens``)."""
    row = {k: v for k in _CALL_FACTS if (v := getattr(step, k)) is not None}
    row = {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()}
    extra = facts.get((step.workflow_id, step.function_id))
    if extra is not None and extra.input_preview is not None:
        row["input_preview"] = extra.input_preview
    folders = sorted({r.call_dir for r in log.receipts_of(step) if r.call_dir})
    if folders:
        row["folders"] = folders
    if log.usage is not None:
        tokens = call_usage_text(log.usage, step.workflow_id, step.function_id)
        if tokens is not None:
            row["tokens"] = tokens  # what this model call paid, and did not
    return row


def _paint(
    graph: FlowGraph,
    walk: PathWalk,
    calls: dict[str, list[StepCall]],
    log: RunLog,
    *,
    ended: bool,
    annotated: bool = False,
) -> None:
    """Each node's run fields. On a legacy program's annotated graph, input and output nodes
    have any id, and script and decision nodes, which stand for code no call records, are left
    without a status (the seeds: they "have no inferred execution status")."""
    started = bool(log.attempts)
    absent = "not_reached" if ended else "pending"
    receipts = {(r.kind, r.name) for r in log.receipts}
    # a platform call left without its result that only a person can settle
    uncertain = (
        {(r.kind, r.name) for r in log.receipts if r.state == "pending" and r.blocking}
        if log.run.status not in TERMINAL
        else set()
    )
    nodes: list[Node] = []
    by_id: dict[str, RunNode] = {}
    for node in graph.nodes:
        run_node = RunNode(node.id, node.type, node.label, node.line, node.details, node.x, node.y)
        by_id[node.id] = run_node
        nodes.append(run_node)
        made = calls.get(node.id, [])
        if made:
            statuses = [call_status(s) for s in made]
            status = next(
                (s for s in _FIRST if s in statuses),
                next(
                    (k for k in ("reused", "copied") if all(s == k for s in statuses)),
                    "succeeded",
                ),
            )
            executed = sorted({a for s in made for a in s.executed_in})
            mark(
                run_node,
                status,
                reused=any(s.reused_in for s in made),
                count=len(made),
                attempts=executed,
            )
            if len(made) > 1:
                run_node.label = f"{node.label} ×{len(made)}"
            stop = _stopped_at(made, log)
            if stop is not None:
                run_node.details["stopped"] = stop
        elif node.id == "input" or (annotated and node.type == "input"):
            mark(
                run_node, "succeeded" if started else "pending", reused=False, count=1, attempts=[]
            )
        elif node.id == "output" or (annotated and node.type == "output"):
            status = end_status(log)
            mark(run_node, status, reused=False, count=int(status != "pending"), attempts=[])
        elif annotated and node.type in ("script", "decision"):
            continue  # no call of the run says whether (or how often) this code ran
        elif walk.passes.get(node.id):
            count = walk.passes[node.id]
            if node.type == "loop":
                count = sum(
                    walk.taken.get(i, 0)
                    for i, e in enumerate(graph.edges)
                    if e.source == node.id and e.label != "done"
                )
            mark(run_node, "succeeded", reused=False, count=count, attempts=[])
            if node.type == "loop":
                run_node.label = f"{node.label} ×{count}"
        else:
            mark(run_node, absent, reused=False, count=0, attempts=[])
    for node in nodes:
        parent = node.details.get("in_step")
        if not isinstance(parent, str) or parent not in by_id or not calls.get(parent):
            continue
        owner = by_id[parent]
        made_call = node.type not in ("agent", "mcp") or _call_name(node) in receipts
        node_obj = by_id[node.id]
        if made_call:
            mark(
                node_obj,
                str(owner.status),
                reused=bool(owner.reused),
                count=int(owner.count or 0),
                attempts=list(owner.attempts or []),
            )
            if node.type in ("agent", "mcp") and _call_name(node) in uncertain:
                node_obj.status = node_obj.details["status"] = "uncertain"
                node_obj.details["stopped"] = "uncertain"
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
