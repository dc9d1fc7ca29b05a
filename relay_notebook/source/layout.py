"""Layered top-to-bottom layout of a flow graph: box sizes, node centres and edge waypoints.

Design: a Sugiyama pipeline in pure Python, so a graph lays out wherever the kernel runs (no
Graphviz binary, no numpy). ``layering`` breaks cycles, assigns layers, adds dummy vertices on
long edges and orders the rows; this module turns rows into geometry. Each row is placed by
weighted isotonic regression (pool-adjacent-violators: the least-squares positions that keep
the row's order and gaps), swept down and up, so chains stay straight and parents centre over
their children; dummy positions become the edge's waypoints. Box sizes come from label length,
not font metrics, so every renderer draws the same boxes. Coordinates are integers and every
tie is broken by input order: the same graph always gets byte-identical coordinates, which
saved notebook outputs rely on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from relay_notebook.source import layering
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layering import (
    CHAIN_WEIGHT,
    LayeredGraph,
    assign_layers,
    break_cycles,
)
from relay_notebook.source.lint import gc_paused

__all__ = [
    "CHAR_WIDTH",
    "LABEL_PADDING",
    "NODE_HEIGHT",
    "NODE_MAX_WIDTH",
    "NODE_MIN_WIDTH",
    "Layout",
    "compute_layout",
    "fit_label",
    "layout_graph",
    "node_size",
]

#: box height of every node, in px
NODE_HEIGHT: Final = 40
NODE_MIN_WIDTH: Final = 88
NODE_MAX_WIDTH: Final = 248
#: average advance of a 13px system-ui glyph; labels are sized, not measured, so every
#: renderer (SVG, JupyterLab) draws the same boxes
CHAR_WIDTH: Final = 7.5
#: horizontal padding on each side of the label
LABEL_PADDING: Final = 14
#: decision hexagons need room for their pointed ends
DECISION_EXTRA: Final = 24
LAYER_GAP: Final = 60
NODE_GAP: Final = 36
DUMMY_GAP: Final = 20
MARGIN: Final = 24
#: room right of a node for self loops and short back-edge arcs
LOOP_ROOM: Final = 36

_PLACEMENT_PASSES = ("down", "up") * 4


def _extra_width(node_type: str) -> int:
    return DECISION_EXTRA if node_type == "decision" else 0


def fit_label(label: str, node_type: str = "step") -> str:
    """The label as drawn in the box: cut with an ellipsis when it would exceed the max width."""
    room = NODE_MAX_WIDTH - 2 * LABEL_PADDING - _extra_width(node_type)
    capacity = int(room / CHAR_WIDTH)
    text = " ".join(label.split())
    return text if len(text) <= capacity else text[: capacity - 1].rstrip() + "…"


def node_size(node_type: str, label: str) -> tuple[int, int]:
    """The ``(width, height)`` of a node's box, derived from its type and label length."""
    text = fit_label(label, node_type)
    width = round(len(text) * CHAR_WIDTH) + 2 * LABEL_PADDING + _extra_width(node_type)
    return max(NODE_MIN_WIDTH, min(NODE_MAX_WIDTH, width)), NODE_HEIGHT


@dataclass(frozen=True)
class Layout:
    """Where everything goes: per node ``centres`` and ``sizes``, per edge ``points``.

    ``points[i]`` is the polyline of edge ``i`` from the border of its source to the border of
    its target (``None`` when an endpoint is not a node of the graph). ``crossings`` counts the
    edge crossings between adjacent layers in the chosen ordering.
    """

    centres: list[tuple[int, int]]
    sizes: list[tuple[int, int]]
    points: list[list[tuple[int, int]] | None]
    width: int
    height: int
    layers: int
    crossings: int


def layout_graph(graph: FlowGraph) -> FlowGraph:
    """Fill in node centres, edge waypoints and the graph size; return the same graph."""
    result = compute_layout(graph)
    for node, (x, y) in zip(graph.nodes, result.centres, strict=True):
        node.x, node.y = x, y
    for edge, pts in zip(graph.edges, result.points, strict=True):
        edge.points = [(float(px), float(py)) for px, py in pts] if pts else None
    graph.width, graph.height = result.width, result.height
    return graph


def compute_layout(graph: FlowGraph, *, reduce_crossings: bool = True) -> Layout:
    """Lay ``graph`` out without changing it; ``reduce_crossings=False`` keeps input order."""
    with gc_paused():  # lists of numbers: nothing cyclic, yet a huge graph made many collections
        return _compute_layout(graph, reduce_crossings)


def _compute_layout(graph: FlowGraph, reduce_crossings: bool) -> Layout:
    n = len(graph.nodes)
    sizes = [node_size(nd.type, nd.label) for nd in graph.nodes]
    if n == 0:
        return Layout([], [], [None] * len(graph.edges), 2 * MARGIN, 2 * MARGIN, 0, 0)
    index: dict[str, int] = {}
    for i, nd in enumerate(graph.nodes):
        index.setdefault(nd.id, i)
    ends = [(index.get(e.source), index.get(e.target)) for e in graph.edges]
    links = [(k, s, t) for k, (s, t) in enumerate(ends) if s is not None and t is not None]
    flipped = break_cycles(n, [(k, s, t) for k, s, t in links if s != t])
    dag = [(k, t, s) if k in flipped else (k, s, t) for k, s, t in links if s != t]
    layer = assign_layers(n, dag)
    g = LayeredGraph(n, layer, dag, flipped)
    order = g.initial_order()
    crossings = (
        layering.reduce_crossings(g, order) if reduce_crossings else g.count_crossings(order)
    )
    if reduce_crossings:
        order = g.best_order
    g.weigh()
    room = [0] * n
    for k, s, t in links:
        if s == t or (k in flipped and layer[s] - layer[t] == 1):
            room[s] = room[t] = LOOP_ROOM
    xs = _place(g, order, sizes, room)
    tops = [MARGIN + lv * (NODE_HEIGHT + LAYER_GAP) for lv in range(len(order))]
    ys = [top + NODE_HEIGHT // 2 for top in tops]
    left = min(xs[v] - (sizes[v][0] // 2 + room[v] if v < n else 0) for v in range(len(xs)))
    shift = MARGIN - left
    cx = [round(x + shift) for x in xs]
    centres = [(cx[v], ys[layer[v]]) for v in range(n)]
    points = _route(graph, ends, flipped, g, cx, ys, centres, sizes)
    right = max(
        cx[v] + (sizes[v][0] + 1) // 2 + room[v] if v < n else cx[v] for v in range(len(cx))
    )
    for pts in points:
        for px, _ in pts or ():
            right = max(right, px)
    height = tops[-1] + NODE_HEIGHT + MARGIN
    return Layout(centres, sizes, points, right + MARGIN, height, len(order), crossings)


def _place(
    g: LayeredGraph, order: list[list[int]], sizes: list[tuple[int, int]], room: list[int]
) -> list[float]:
    """Horizontal centres: each layer is a weighted isotonic regression, swept up and down."""
    n = g.n
    half = [sizes[v][0] / 2 if v < n else 0.0 for v in range(len(g.layer))]
    extra = [room[v] if v < n else 0 for v in range(len(g.layer))]
    offsets: list[list[float]] = []
    for row in order:
        off, acc = [], 0.0
        for i, v in enumerate(row):
            if i:
                u = row[i - 1]
                gap = NODE_GAP if u < n and v < n else DUMMY_GAP
                acc += half[u] + extra[u] + gap + half[v] + extra[v]
            off.append(acc)
        offsets.append(off)
    x = [0.0] * len(g.layer)
    for row, off in zip(order, offsets, strict=True):
        for v, o in zip(row, off, strict=True):
            x[v] = o

    # A vertex with no neighbours on the side being swept follows its other side instead, so
    # a loop body's last node (whose only link below is the back edge) stays by its loop.
    sides = {
        "down": _fallback(g.up, g.up_w, g.down, g.down_w),
        "up": _fallback(g.down, g.down_w, g.up, g.up_w),
    }
    totals = {key: [sum(ws) for ws in side[1]] for key, side in sides.items()}
    for direction in _PLACEMENT_PASSES:
        adjacent, adjacent_w = sides[direction]
        total_w = totals[direction]
        rows = list(zip(order, offsets, strict=True))
        if direction == "up":
            rows.reverse()
        for row, off in rows:
            targets, weights = [], []
            for v in row:
                total = total_w[v]
                if total:
                    pull = 0.0
                    for u, w in zip(adjacent[v], adjacent_w[v], strict=True):
                        pull += w * x[u]
                    targets.append(pull / total)
                    weights.append(total)
                else:
                    targets.append(x[v])
                    weights.append(0.01)
            for v, value in zip(row, _isotonic(targets, weights, off), strict=True):
                x[v] = value
    _straighten(g, order, offsets, x)
    return x


def _fallback(
    near: list[list[int]], near_w: list[list[float]], far: list[list[int]], far_w: list[list[float]]
) -> tuple[list[list[int]], list[list[float]]]:
    pairs = [
        (a, aw) if a else (b, bw) for a, aw, b, bw in zip(near, near_w, far, far_w, strict=True)
    ]
    return [a for a, _ in pairs], [w for _, w in pairs]


def _straighten(
    g: LayeredGraph, order: list[list[int]], offsets: list[list[float]], x: list[float]
) -> None:
    """Snap each chain of one-to-one links onto one vertical where its layers leave room."""
    nxt: dict[int, int] = {}
    for a, (nbrs, ws) in enumerate(zip(g.down, g.down_w, strict=True)):
        for b, w in zip(nbrs, ws, strict=True):
            if w == CHAIN_WEIGHT:
                nxt[a] = b
    heads = sorted(set(nxt) - set(nxt.values()))
    for head in heads:
        chain = [head]
        while chain[-1] in nxt:
            chain.append(nxt[chain[-1]])
        lo, hi = -math.inf, math.inf
        for v in chain:
            row, off, i = order[g.layer[v]], offsets[g.layer[v]], g.pos[v]
            if i > 0:
                lo = max(lo, x[row[i - 1]] + off[i] - off[i - 1])
            if i + 1 < len(row):
                hi = min(hi, x[row[i + 1]] - off[i + 1] + off[i])
        if lo <= hi:
            target = min(max(sum(x[v] for v in chain) / len(chain), lo), hi)
            for v in chain:
                x[v] = target


def _isotonic(targets: list[float], weights: list[float], off: list[float]) -> list[float]:
    """Positions closest to ``targets`` (weighted least squares) keeping order and ``off`` gaps."""
    sums_w: list[float] = []
    sums_wy: list[float] = []
    starts: list[int] = []
    for i, (t, w) in enumerate(zip(targets, weights, strict=True)):
        cw, cwy, start = w, w * (t - off[i]), i
        while sums_w and sums_wy[-1] / sums_w[-1] > cwy / cw:
            cw += sums_w.pop()
            cwy += sums_wy.pop()
            start = starts.pop()
        sums_w.append(cw)
        sums_wy.append(cwy)
        starts.append(start)
    out = [0.0] * len(targets)
    bounds = [*starts, len(targets)]
    for b, (sw, swy) in enumerate(zip(sums_w, sums_wy, strict=True)):
        for i in range(bounds[b], bounds[b + 1]):
            out[i] = swy / sw + off[i]
    return out


def _route(
    graph: FlowGraph,
    ends: list[tuple[int | None, int | None]],
    flipped: set[int],
    g: LayeredGraph,
    cx: list[int],
    ys: list[int],
    centres: list[tuple[int, int]],
    sizes: list[tuple[int, int]],
) -> list[list[tuple[int, int]] | None]:
    """Each edge's polyline: border ports, dummy waypoints, side arcs for loops."""
    points: list[list[tuple[int, int]] | None] = []
    parallel: dict[tuple[int, int], list[int]] = {}
    for k, (s, t) in enumerate(ends):
        if (
            s is not None
            and t is not None
            and s != t
            and k not in flipped
            and len(g.chains[k]) == 2
        ):
            parallel.setdefault((s, t), []).append(k)
    spread: dict[int, int] = {}
    for group in parallel.values():
        for i, k in enumerate(group):
            spread[k] = round((i - (len(group) - 1) / 2) * 12)
    arcs: dict[int, int] = {}
    for k, (s, t) in enumerate(ends):
        if s is None or t is None:
            points.append(None)
            continue
        (xs, ys_), (xt, yt) = centres[s], centres[t]
        hs, ht = sizes[s][0] // 2, sizes[t][0] // 2
        half_h = NODE_HEIGHT // 2
        if s == t or (k in flipped and len(g.chains[k]) == 2):
            bulge = arcs.get(s, 0) + LOOP_ROOM - 10
            arcs[s] = arcs.get(s, 0) + 6
            if s == t:
                points.append([(xs + hs, ys_ - 8), (xs + hs + bulge, ys_), (xs + hs, ys_ + 8)])
            elif xs < xt:
                side = min(xs - hs, xt - ht) - bulge
                points.append([(xs - hs, ys_), (side, (ys_ + yt) // 2), (xt - ht, yt)])
            else:
                side = max(xs + hs, xt + ht) + bulge
                points.append([(xs + hs, ys_), (side, (ys_ + yt) // 2), (xt + ht, yt)])
            continue
        chain = g.chains[k]
        middle = [(cx[d], ys[g.layer[d]]) for d in chain[1:-1]]
        if k in flipped:
            middle.reverse()
            start = _back_port(xs, ys_, hs, middle[0][0], -half_h)
            end = _back_port(xt, yt, ht, middle[-1][0], half_h)
            points.append([start, *middle, end])
        else:
            dx = spread.get(k, 0)
            points.append([(xs + dx, ys_ + half_h), *middle, (xt + dx, yt - half_h)])
    return points


def _back_port(x: int, y: int, half_w: int, toward: int, dy: int) -> tuple[int, int]:
    """Where a back edge leaves or enters a node: the side facing its waypoints if they are
    clear of the box, else off-centre on the top/bottom so it never meets the forward edges."""
    sign = 1 if toward >= x else -1
    if abs(toward - x) > half_w:
        return x + sign * half_w, y
    return x + sign * (half_w // 2), y + dy
