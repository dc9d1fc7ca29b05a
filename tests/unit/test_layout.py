"""The layered layout: boxes never overlap, edges flow down, same graph gives same layout."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from relay_notebook.source.graph import Edge, FlowGraph, Node
from relay_notebook.source.layout import (
    NODE_HEIGHT,
    NODE_MAX_WIDTH,
    NODE_MIN_WIDTH,
    compute_layout,
    fit_label,
    layout_graph,
    node_size,
)


def graph(nodes: list[str | tuple[str, str, str]], edges: list[tuple[str, ...]]) -> FlowGraph:
    """A graph from ids (type ``step``, label = id) or ``(id, type, label)`` triples."""
    made = [
        Node(spec, "step", spec) if isinstance(spec, str) else Node(spec[0], spec[1], spec[2])
        for spec in nodes
    ]
    return FlowGraph(
        nodes=made, edges=[Edge(e[0], e[1], e[2] if len(e) > 2 else None) for e in edges]
    )


def loop_graph() -> FlowGraph:
    """input -> loop -> a -> b -> c -> (back to loop), loop -> after -> output."""
    return graph(
        [
            ("input", "input", "INPUT"),
            ("loop", "loop", "for item in INPUT['items']"),
            "a",
            "b",
            "c",
            "after",
            ("out", "output", "return"),
        ],
        [
            ("input", "loop"),
            ("loop", "a", "each item"),
            ("a", "b"),
            ("b", "c"),
            ("c", "loop"),
            ("loop", "after", "done"),
            ("after", "out"),
        ],
    )


def fan_graph() -> FlowGraph:
    """A decision with three branches, a gather with four, and a join."""
    return graph(
        [
            "start",
            ("d", "decision", "x > 1"),
            "b1",
            "b2",
            "b3",
            "join",
            ("p", "parallel", "asyncio.gather"),
            "f1",
            "f2",
            "f3",
            "f4",
            "end",
        ],
        [("start", "d"), ("d", "b1", "if"), ("d", "b2", "elif"), ("d", "b3", "else")]
        + [("b1", "join"), ("b2", "join"), ("b3", "join"), ("join", "p")]
        + [("p", f) for f in ("f1", "f2", "f3", "f4")]
        + [(f, "end") for f in ("f1", "f2", "f3", "f4")],
    )


def assert_no_overlap(g: FlowGraph) -> None:
    """No two boxes on the same row overlap horizontally."""
    rows: dict[float | None, list[tuple[float, float]]] = {}
    for n in g.nodes:
        w, _ = node_size(n.type, n.label)
        assert n.x is not None
        rows.setdefault(n.y, []).append((n.x - w / 2, n.x + w / 2))
    for spans in rows.values():
        spans.sort()
        for (_, right), (left, _) in itertools.pairwise(spans):
            assert right < left


def test_empty_graph_gets_a_size_and_nothing_else() -> None:
    """An empty graph lays out to a small empty canvas instead of failing."""
    g = layout_graph(FlowGraph())
    assert g.nodes == []
    assert g.width is not None and g.width > 0
    assert g.height is not None and g.height > 0


def test_single_node_sits_inside_the_canvas() -> None:
    """One node gets an integer centre with its whole box inside the canvas."""
    g = layout_graph(graph(["only"], []))
    n = g.nodes[0]
    w, h = node_size(n.type, n.label)
    assert n.x is not None and n.y is not None
    assert n.x == int(n.x) and n.y == int(n.y)
    assert n.x - w / 2 > 0 and n.x + w / 2 < (g.width or 0)
    assert n.y - h / 2 > 0 and n.y + h / 2 < (g.height or 0)


def test_boxes_on_one_row_never_overlap() -> None:
    """Siblings of a decision and of a gather are spread out without overlapping."""
    g = layout_graph(fan_graph())
    assert_no_overlap(g)
    assert len({g.node(b).y for b in ("b1", "b2", "b3")}) == 1


def test_a_chain_is_drawn_as_one_straight_column() -> None:
    """A sequence of steps keeps the same x from top to bottom, each below the previous one."""
    g = layout_graph(graph(list("abcdef"), [(a, b) for a, b in zip("abcde", "bcdef", strict=True)]))
    assert len({n.x for n in g.nodes}) == 1
    ys = [n.y or 0.0 for n in g.nodes]
    assert ys == sorted(ys) and len(set(ys)) == len(ys)


def test_forward_edges_go_down_and_the_loop_edge_goes_back_up() -> None:
    """Every edge runs downward point by point except the loop's back edge, which rises."""
    g = layout_graph(loop_graph())
    for e in g.edges:
        assert e.points is not None
        ys = [y for _, y in e.points]
        if (e.source, e.target) == ("c", "loop"):
            assert ys[-1] < ys[0]
        else:
            assert all(y1 < y2 for y1, y2 in itertools.pairwise(ys)), e
    assert (g.node("loop").y or 0) < (g.node("a").y or 0) < (g.node("c").y or 0)


def test_long_edges_get_waypoints_between_the_rows_they_cross() -> None:
    """An edge that skips two rows bends through waypoints on those rows, clear of the boxes."""
    g = layout_graph(graph(list("abcd"), [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]))
    long = g.edges[3]
    assert long.points is not None and len(long.points) == 4
    waypoint_rows = [y for _, y in long.points[1:-1]]
    assert waypoint_rows == [g.node("b").y, g.node("c").y]
    for (x, _), mid in zip(long.points[1:-1], ("b", "c"), strict=True):
        w, _ = node_size("step", mid)
        assert abs(x - (g.node(mid).x or 0)) > w / 2


def test_edge_points_start_and_end_on_the_boxes() -> None:
    """A forward edge leaves its source's bottom border and enters its target's top border."""
    g = layout_graph(graph(["a", "b"], [("a", "b")]))
    assert g.edges[0].points == [
        (g.node("a").x, (g.node("a").y or 0) + NODE_HEIGHT / 2),
        (g.node("b").x, (g.node("b").y or 0) - NODE_HEIGHT / 2),
    ]


def test_cycles_self_loops_and_multi_edges_are_all_drawn() -> None:
    """A cycle with no entry, a self loop and doubled edges all get positions and paths."""
    g = layout_graph(
        graph(
            ["a", "b", "c", "s"],
            [("a", "b"), ("b", "c"), ("c", "a"), ("s", "s"), ("a", "b", "again"), ("s", "a")],
        )
    )
    assert all(n.x is not None and n.y is not None for n in g.nodes)
    assert all(e.points for e in g.edges)
    s = g.node("s")
    w, _ = node_size("step", "s")
    self_loop = g.edges[3].points or []
    assert min(x for x, _ in self_loop) >= (s.x or 0) + w / 2
    first, second = g.edges[0].points or [], g.edges[4].points or []
    assert first != second
    assert_no_overlap(g)


def test_disconnected_components_do_not_overlap() -> None:
    """Two separate chains and a lone node share the canvas without covering each other."""
    g = layout_graph(graph(["a", "b", "x", "y", "lone"], [("a", "b"), ("x", "y")]))
    assert_no_overlap(g)
    assert g.node("a").y == g.node("x").y == g.node("lone").y


def test_edges_to_unknown_nodes_get_no_path() -> None:
    """An edge naming a node that is not in the graph is left without points, not an error."""
    g = layout_graph(graph(["a"], [("a", "ghost")]))
    assert g.edges[0].points is None and g.nodes[0].x is not None


def test_crossing_reduction_untangles_a_crafted_graph() -> None:
    """Three parents wired to their children in reverse order cross in input order, not after."""
    g = graph(
        ["p1", "p2", "p3", "c1", "c2", "c3", "root"],
        [
            ("root", "p1"),
            ("root", "p2"),
            ("root", "p3"),
            ("p1", "c3"),
            ("p2", "c2"),
            ("p3", "c1"),
            ("p1", "c2"),
        ],
    )
    assert compute_layout(g, reduce_crossings=False).crossings >= 3
    assert compute_layout(g).crossings == 0
    laid = layout_graph(g)
    xs = {c: laid.node(c).x or 0 for c in ("c1", "c2", "c3")}
    assert xs["c3"] < xs["c2"] < xs["c1"]


def test_same_graph_same_coordinates() -> None:
    """Laying out two copies of a graph gives byte-identical JSON documents."""
    first = json.dumps(layout_graph(loop_graph()).to_dict(), sort_keys=True)
    second = json.dumps(layout_graph(loop_graph()).to_dict(), sort_keys=True)
    assert first == second


def test_box_width_follows_the_label_within_bounds() -> None:
    """Longer labels get wider boxes, clamped to the min and max widths, cut with an ellipsis."""
    short, _ = node_size("step", "a")
    medium, _ = node_size("step", "extract_invoice_fields_now")
    huge, height = node_size("step", "x" * 500)
    assert short == NODE_MIN_WIDTH < medium < huge <= NODE_MAX_WIDTH
    assert node_size("step", "x" * 1000)[0] == huge
    assert height == NODE_HEIGHT
    assert fit_label("x" * 500).endswith("…") and len(fit_label("x" * 500)) < 40
    assert node_size("decision", "abc")[0] >= node_size("step", "abc")[0]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=14).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
        )
    )
)
def test_any_graph_lays_out_without_overlaps(case: tuple[int, list[tuple[int, int]]]) -> None:
    """Random graphs with cycles, self loops and duplicates always lay out cleanly."""
    n, pairs = case
    g = layout_graph(graph([f"n{i}" for i in range(n)], [(f"n{a}", f"n{b}") for a, b in pairs]))
    assert_no_overlap(g)
    assert all(e.points for e in g.edges)
    for e in g.edges:
        for x, y in e.points or []:
            assert 0 <= x <= (g.width or 0) and 0 <= y <= (g.height or 0)
