"""Analysis of huge sources stays linear: ids, long edges and helper inlining are bounded."""

from __future__ import annotations

import pytest

from relay_notebook.source import flow
from relay_notebook.source.frontier import GraphBuilder
from relay_notebook.source.graph import Edge, FlowGraph, Node
from relay_notebook.source.layering import LayeredGraph, assign_layers, dummy_budget
from relay_notebook.source.layout import compute_layout

STEP = """from dbos import DBOS


@DBOS.step()
async def st(s):
    return s

"""


def test_ids_count_up_per_base_and_reuse_what_a_rollback_freed() -> None:
    """Repeated bases number on; a rolled-back id is handed out again, first free first."""
    builder = GraphBuilder()
    assert [builder.new_id("step-a") for _ in range(3)] == ["step-a", "step-a-2", "step-a-3"]
    mark = builder.mark()
    builder.emit("step-a", "step", "a", 1, {})
    builder.emit("step-a-5", "step", "a", 1, {})
    builder.rollback(mark)
    assert builder.new_id("step-a-4") == "step-a-4"  # a literal base taking base-n's place
    assert builder.new_id("step-a") == "step-a-5"
    assert builder.new_id("step-a-5") == "step-a-5-2"


def test_a_step_called_thousands_of_times_gets_every_id_in_order() -> None:
    """The 3,000th call of one step is step-st-3000, as it always was."""
    body = "".join("    s = await st(s)\n" for _ in range(3000))
    graph = flow.build_flow_graph(f"{STEP}@DBOS.workflow()\nasync def run(INPUT):\n{body}")
    steps = [n.id for n in graph.nodes if n.type == "step"]
    assert steps == ["step-st", *(f"step-st-{i}" for i in range(2, 3001))]


def test_long_edges_into_one_node_share_a_lane_over_the_budget() -> None:
    """Hundreds of long edges into the last node of a long chain add one lane, not one each."""
    n = 2000
    edges = [(i, i + 1) for i in range(n - 1)] + [(i, n - 1) for i in range(0, n - 100, 5)]
    dag = [(k, s, t) for k, (s, t) in enumerate(edges)]
    layer = assign_layers(n, dag)
    graph = LayeredGraph(n, layer, dag, set())
    assert len(graph.layer) - n <= dummy_budget(n)
    laid = compute_layout(
        FlowGraph(
            nodes=[Node(f"n{i}", "step", f"n{i}") for i in range(n)],
            edges=[Edge(f"n{s}", f"n{t}") for s, t in edges],
        )
    )
    assert all(points and len(points) >= 2 for points in laid.points)
    assert len(laid.centres) == n and laid.layers == n


def test_helpers_calling_helpers_twice_stop_growing_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Helpers that double at each depth would draw 2**30 steps; the graph stops and says so."""
    monkeypatch.setattr(flow, "INLINE_BUDGET", 300)
    monkeypatch.setattr(flow, "INLINES_PER_LINE", 0)
    lines = [STEP, "async def h0(s):\n    return await st(s)\n\n"]
    for i in range(1, 31):
        lines.append(
            f"async def h{i}(s):\n    s = await h{i - 1}(s)\n    return await h{i - 1}(s)\n\n"
        )
    lines.append("@DBOS.workflow()\nasync def run(INPUT):\n    return await h30(INPUT)\n")
    graph = flow.build_flow_graph("".join(lines))
    assert len(graph.nodes) < 1000
    assert any("inlines helpers up to a limit" in n.details.get("reason", "") for n in graph.nodes)
    assert any(
        note.startswith("Helpers are drawn at each call up to 300 lines") for note in graph.notes
    )
