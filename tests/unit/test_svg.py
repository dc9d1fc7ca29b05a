"""The SVG rendering: a well-formed document with one group per node, escaped text and overlays."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from relay_notebook.source.graph import Edge, FlowGraph, Node
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.svg import STATUS_COLOURS, TYPE_COLOURS, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def invoice() -> FlowGraph:
    """The SPEC §2 invoice relay as a flow graph."""
    return FlowGraph(
        relay="invoice",
        nodes=[
            Node("input", "input", "input", line=15),
            Node("step-extract", "step", "extract_invoice", line=16),
            Node("agent-extract", "agent", "extract", line=6, details={"in_step": "step-extract"}),
            Node("decision-L17", "decision", 'invoice["amount"] > 1000', line=17),
            Node("step-review", "step", "review", line=18),
            Node("output", "output", "output"),
        ],
        edges=[
            Edge("input", "step-extract"),
            Edge("step-extract", "agent-extract"),
            Edge("step-extract", "decision-L17"),
            Edge("decision-L17", "step-review", 'invoice["amount"] > 1000'),
            Edge("step-review", "output"),
            Edge("decision-L17", "output", "else"),
        ],
    )


def node_groups(root: ET.Element) -> list[ET.Element]:
    """Every ``<g>`` whose class list holds ``relay-node``."""
    return [g for g in root.iter(f"{SVG}g") if "relay-node" in g.get("class", "").split()]


def test_renders_a_well_formed_svg_document() -> None:
    """The output parses as XML with an ``<svg>`` root sized to the laid-out graph."""
    root = ET.fromstring(render_svg(invoice()))
    assert root.tag == f"{SVG}svg"
    assert int(root.get("width", "0")) > 0 and int(root.get("height", "0")) > 0
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"


def test_one_group_per_node_with_its_type_class() -> None:
    """Each node is one ``<g class="relay-node relay-node--TYPE">`` carrying its id and line."""
    graph = invoice()
    groups = node_groups(ET.fromstring(render_svg(graph)))
    assert [g.get("data-node-id") for g in groups] == [n.id for n in graph.nodes]
    for group, node in zip(groups, graph.nodes, strict=True):
        assert group.get("class", "").split()[:2] == ["relay-node", f"relay-node--{node.type}"]
        if node.line is not None:
            assert group.get("data-line") == str(node.line)


def test_one_path_per_edge_with_an_arrowhead() -> None:
    """Every edge is drawn once as a path ending in the shared arrow marker."""
    root = ET.fromstring(render_svg(invoice()))
    edges = [g for g in root.iter(f"{SVG}g") if "relay-edge" in g.get("class", "").split()]
    assert len(edges) == len(invoice().edges)
    for group in edges:
        path = group.find(f"{SVG}path")
        assert path is not None and path.get("marker-end") == "url(#relay-arrow)"
    assert root.find(f".//{SVG}marker[@id='relay-arrow']") is not None


def test_labels_with_markup_characters_are_escaped() -> None:
    """Labels and edge conditions containing <, &, > and quotes come back verbatim as text."""
    label = 'a < b & "c" > d'
    graph = FlowGraph(
        nodes=[Node("a", "decision", label), Node("b", "step", "x & y")],
        edges=[Edge("a", "b", 'k < 3 & name == "z"')],
    )
    text = render_svg(graph, title="<relay> & co")
    root = ET.fromstring(text)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert label in texts and "x & y" in texts
    assert any(t.startswith('k < 3 & name == "z"') for t in texts)
    assert root.findtext(f"{SVG}title") == "<relay> & co"
    assert "<relay>" not in text


def test_status_overlay_colours_the_node_and_badges_reuse() -> None:
    """A run status recolours its node, and a reused step shows a "reused" badge."""
    graph = FlowGraph(
        kind="run",
        nodes=[
            Node("a", "step", "fetch", details={"status": "reused", "reused": True}),
            Node("b", "step", "charge", details={"status": "failed"}),
            Node("c", "step", "notify", details={"status": "not_reached"}),
            Node("d", "step", "plain"),
        ],
        edges=[Edge("a", "b"), Edge("b", "c"), Edge("c", "d")],
    )
    groups = {g.get("data-node-id"): g for g in node_groups(ET.fromstring(render_svg(graph)))}
    failed_shape = groups["b"].find(f"{SVG}rect")
    assert failed_shape is not None
    assert failed_shape.get("fill") == STATUS_COLOURS["failed"][0]
    assert failed_shape.get("stroke") == STATUS_COLOURS["failed"][1]
    assert "relay-node--status-failed" in groups["b"].get("class", "")
    badge = [g for g in groups["a"].iter(f"{SVG}g") if "relay-badge--reused" in g.get("class", "")]
    assert len(badge) == 1 and "".join(badge[0].itertext()) == "reused"
    for plain in ("b", "c", "d"):
        assert "reused" not in "".join(groups[plain].itertext()).split()
    plain_shape = groups["d"].find(f"{SVG}rect")
    assert plain_shape is not None and plain_shape.get("fill") == TYPE_COLOURS["step"][0]


def test_unresolved_nodes_are_dashed_and_explain_why() -> None:
    """An unresolved call is drawn dashed, and its tooltip gives the reason and source line."""
    graph = FlowGraph(
        nodes=[
            Node(
                "u",
                "unresolved",
                "helpers.lookup(x)",
                line=9,
                details={"reason": "imported helper 'helpers' is not analysed"},
            )
        ]
    )
    (group,) = node_groups(ET.fromstring(render_svg(graph)))
    shape = group.find(f"{SVG}rect")
    assert shape is not None and shape.get("stroke-dasharray")
    tooltip = group.findtext(f"{SVG}title") or ""
    assert tooltip.startswith("unresolved · line 9")
    assert "reason: imported helper 'helpers' is not analysed" in tooltip


def test_same_graph_same_bytes_and_the_input_is_left_alone() -> None:
    """Rendering twice gives identical bytes and leaves the caller's graph without positions."""
    graph = invoice()
    first, second = render_svg(graph), render_svg(graph)
    assert first == second
    assert all(n.x is None for n in graph.nodes) and graph.width is None


def test_a_laid_out_graph_is_drawn_where_it_was_placed() -> None:
    """Positions already computed are used as they are, without laying the graph out again."""
    graph = layout_graph(invoice())
    node = graph.node("step-review")
    node.x = (node.x or 0) + 1000
    group = {g.get("data-node-id"): g for g in node_groups(ET.fromstring(render_svg(graph)))}
    shape = group["step-review"].find(f"{SVG}rect")
    assert shape is not None and float(shape.get("x", "0")) > 1000


def test_an_empty_graph_still_renders_a_document() -> None:
    """An empty graph renders a small valid SVG that says it is empty."""
    root = ET.fromstring(render_svg(FlowGraph()))
    assert node_groups(root) == []
    assert "empty graph" in "".join(root.itertext())


def test_every_node_type_is_drawn() -> None:
    """Each node type renders with its own class, including types the palette does not know."""
    types = [*TYPE_COLOURS, "custom-kind"]
    graph = FlowGraph(nodes=[Node(f"n{i}", t, t) for i, t in enumerate(types)])
    groups = node_groups(ET.fromstring(render_svg(graph)))
    assert [g.get("class", "").split()[1] for g in groups] == [f"relay-node--{t}" for t in types]
