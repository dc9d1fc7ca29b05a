"""A flow or run graph as a standalone, deterministic SVG document."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from relay_notebook.source.graph import Edge, FlowGraph, Node
from relay_notebook.source.layout import NODE_HEIGHT, fit_label, layout_graph, node_size

__all__ = ["STATUS_COLOURS", "STOP_BADGES", "TYPE_COLOURS", "render_svg"]

FONT: Final = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

#: per node type: (fill, stroke, text)
TYPE_COLOURS: Final[Mapping[str, tuple[str, str, str]]] = {
    "input": ("#ecfdf5", "#34d399", "#064e3b"),
    "output": ("#f1f5f9", "#64748b", "#0f172a"),
    "step": ("#eff6ff", "#60a5fa", "#1e3a8a"),
    "workflow": ("#eef2ff", "#818cf8", "#312e81"),
    "agent": ("#f5f3ff", "#a78bfa", "#4c1d95"),
    "mcp": ("#f0fdfa", "#2dd4bf", "#134e4a"),
    "tool": ("#ecfeff", "#22d3ee", "#164e63"),
    "vault": ("#fffbeb", "#fbbf24", "#78350f"),
    "admit": ("#fff7ed", "#fb923c", "#7c2d12"),
    "decision": ("#fefce8", "#eab308", "#713f12"),
    "loop": ("#f0f9ff", "#38bdf8", "#0c4a6e"),
    "parallel": ("#fdf4ff", "#e879f9", "#701a75"),
    "try": ("#f8fafc", "#64748b", "#334155"),
    "unresolved": ("#f8fafc", "#94a3b8", "#475569"),
    "script": ("#f9fafb", "#9ca3af", "#111827"),
    "sleep": ("#f8fafc", "#94a3b8", "#1e293b"),
    "wait": ("#fff1f2", "#fb7185", "#881337"),
    "send": ("#eef2ff", "#6366f1", "#312e81"),
    "event": ("#f0fdf4", "#4ade80", "#14532d"),
    "stream": ("#ecfeff", "#06b6d4", "#164e63"),
}

#: per run status (from ``details["status"]``): (fill, stroke, text)
STATUS_COLOURS: Final[Mapping[str, tuple[str, str, str]]] = {
    "pending": ("#f8fafc", "#94a3b8", "#334155"),
    "running": ("#eff6ff", "#2563eb", "#1e3a8a"),
    "succeeded": ("#f0fdf4", "#16a34a", "#14532d"),
    "failed": ("#fef2f2", "#dc2626", "#7f1d1d"),
    "reused": ("#f5f3ff", "#7c3aed", "#4c1d95"),
    "copied": ("#ecfeff", "#0e7490", "#164e63"),
    "skipped": ("#f9fafb", "#d1d5db", "#6b7280"),
    "not_reached": ("#ffffff", "#e5e7eb", "#9ca3af"),
    # blocked in DBOS.recv / DBOS.sleep: not failed, not running, waiting for a message or a timer
    "waiting": ("#fefce8", "#ca8a04", "#713f12"),
    # the call running when its process died (its body runs again on recovery)
    "interrupted": ("#fff7ed", "#ea580c", "#7c2d12"),
    # a platform call left without its result: a person settles it (relay reconcile)
    "uncertain": ("#fffbeb", "#d97706", "#78350f"),
}
#: the badge of a node the run waits in
WAITING_COLOUR: Final = "#a16207"
#: the badge of a node where the run waits or stopped (``details["stopped"]``, else its
#: status): its text and colour
STOP_BADGES: Final[Mapping[str, tuple[str, str]]] = {
    "waiting": ("waiting", WAITING_COLOUR),
    "interrupted": ("stopped here", "#c2410c"),
    "uncertain": ("uncertain", "#b45309"),
    "raised": ("raised here", "#b91c1c"),
}
#: statuses drawn with a heavier outline: where the run is, or where it stopped
_HEAVY: Final = frozenset({"running", "failed", "waiting", "interrupted", "uncertain"})

Point = tuple[float, float]

_EDGE_COLOUR = "#94a3b8"
_LABEL_COLOUR = "#475569"
_CAPTIONLESS = frozenset({"input", "output", "decision"})
_MAX_EDGE_LABEL = 32
_TITLE_HEIGHT = 32
_STRIP_LINE = 18
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _esc(text: object) -> str:
    value = _INVALID_XML.sub("", str(text))
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace('"', "&quot;")


def _num(value: float) -> str:
    return str(round(value)) if float(value).is_integer() else f"{value:.1f}"


def render_svg(graph: FlowGraph, *, title: str | None = None, strip: Sequence[str] = ()) -> str:
    """A standalone SVG document of ``graph``; lays out a copy first when nodes lack positions.

    ``strip``: short lines shown under the title (a run's latest events and stream values)."""
    if any(n.x is None or n.y is None for n in graph.nodes) or graph.width is None:
        graph = layout_graph(copy.deepcopy(graph))
    width, body = round(graph.width or 0), round(graph.height or 0)
    if not graph.nodes:
        width, body = max(width, 240), max(body, 64)
    top = (_TITLE_HEIGHT if title else 0) + _STRIP_LINE * len(strip)
    height = body + top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="relay-graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_esc(title or _describe(graph))}">',
        f"<title>{_esc(title or _describe(graph))}</title>",
        "<defs>"
        '<marker id="relay-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse">'
        f'<path d="M0,1 L10,5 L0,9 z" fill="{_EDGE_COLOUR}"/></marker>'
        "</defs>",
        f'<rect class="relay-background" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<g font-family="{_esc(FONT)}">',
    ]
    if title:
        out.append(
            f'<text class="relay-title" x="24" y="22" font-size="14" font-weight="600" '
            f'fill="#0f172a">{_esc(title)}</text>'
        )
    base = _TITLE_HEIGHT if title else 0
    for i, line in enumerate(strip):
        out.append(
            f'<text class="relay-strip" x="24" y="{base + i * _STRIP_LINE + 12}" font-size="12" '
            f'fill="#334155">{_esc(line if len(line) <= 120 else line[:119] + "…")}</text>'
        )
    if not graph.nodes:
        out.append(
            f'<text x="{width // 2}" y="{top + 36}" text-anchor="middle" font-size="13" '
            'fill="#64748b">empty graph</text>'
        )
    out.append(f'<g class="relay-body" transform="translate(0,{top})">')
    positions = {n.id: n for n in reversed(graph.nodes)}
    out.append('<g class="relay-edges">')
    for edge in graph.edges:
        out.extend(_edge(edge, positions))
    out.append("</g>")
    out.append('<g class="relay-nodes">')
    for node in graph.nodes:
        out.extend(_node(node))
    out.append("</g></g></g></svg>")
    return "\n".join(out) + "\n"


def _describe(graph: FlowGraph) -> str:
    name = f" of {graph.relay}" if graph.relay else ""
    kind = "run graph" if graph.kind == "run" else "flow graph"
    return f"{kind}{name}: {len(graph.nodes)} nodes, {len(graph.edges)} edges"


def caption(node: Node) -> str:
    """The small caption over a node's label: its type, and its line (``STEP · L35``), so two
    calls of one step are told apart. A datasource transaction is a step that commits with its
    checkpoint: its caption says ``TRANSACTION``."""
    kind = "TRANSACTION" if node.details.get("transaction") else node.type.upper()
    return f"{kind} · L{node.line}" if node.line is not None else kind


def stop_mark(node: Node) -> str | None:
    """Where the run waits or stopped, if at ``node``: a key of ``STOP_BADGES``."""
    stopped = node.details.get("stopped")
    if isinstance(stopped, str) and stopped in STOP_BADGES:
        return stopped
    return "waiting" if node.details.get("status") == "waiting" else None


def reused_badge(node: Node) -> str:
    """The badge's text: ``reused``, ``2 of 3 reused`` for a node of several calls, or
    ``copied from RUN`` (``edited · …``) for a fork's copied checkpoints; where the run waits
    or stopped, that (``waiting``, ``stopped here``, ``uncertain``, ``raised here``)."""
    stop = stop_mark(node)
    if stop is not None:
        return STOP_BADGES[stop][0]
    summary = node.details.get("summary")
    if isinstance(summary, str) and (summary.endswith("reused") or "copied from" in summary):
        return summary
    return "reused"


def badge_colour(node: Node) -> str:
    """Purple for reused checkpoints, teal for a fork's copied ones, gold while waiting, orange
    or red where the run stopped."""
    stop = stop_mark(node)
    if stop is not None:
        return STOP_BADGES[stop][1]
    return "#0e7490" if node.details.get("copied_from") else "#7c3aed"


def badge_width(text: str) -> float:
    """The badge's width for its text (9.5 px semibold: about 5.6 px a character)."""
    return 42.0 if text == "reused" else round(len(text) * 5.6 + 10, 1)


#: the guarantee tag's colour by kind (``source.guarantees``); red once a body ran again
GUARANTEE_COLOURS: Final = {
    "at_least_once": "#475569",
    "recorded_once": "#1d4ed8",
    "uncertain": "#b45309",
    "replay_safe": "#15803d",
    "journaled": "#0f766e",
}
RAN_AGAIN_COLOUR: Final = "#b91c1c"


def guarantee_tag(node: Node) -> tuple[str, str, str] | None:
    """The guarantee tag's text, colour and kind (``≥1×``, ``?``, ``safe`` …; ``≥1× · ran 2×`` when
    the run's record shows a body that ran more than once), or None for non-calls."""
    found = node.details.get("guarantee")
    if not isinstance(found, dict) or found.get("kind") not in GUARANTEE_COLOURS:
        return None
    kind = str(found["kind"])
    text = str(found.get("badge", ""))
    again = found.get("ran_again")
    if isinstance(again, list) and again:
        return f"{text} · ran again ×{len(again)}", RAN_AGAIN_COLOUR, kind
    return text, GUARANTEE_COLOURS[kind], kind


def tag_width(text: str) -> float:
    """The tag's width for its text (8.5 px semibold: about 5 px a character)."""
    return round(len(text) * 5 + 8, 1)


def _node(node: Node) -> list[str]:
    w, h = node_size(node.type, node.label)
    cx, cy = node.x or 0.0, node.y or 0.0
    x0, y0 = cx - w / 2, cy - h / 2
    fill, stroke, ink = TYPE_COLOURS.get(node.type, TYPE_COLOURS["script"])
    status = node.details.get("status")
    classes = f"relay-node relay-node--{_esc(node.type)}"
    stroke_width, dash, opacity = "1.5", "", ""
    if isinstance(status, str) and status in STATUS_COLOURS:
        fill, stroke, ink = STATUS_COLOURS[status]
        classes += f" relay-node--status-{status}"
        stroke_width = "2.5" if status in _HEAVY else "2"
        if status == "not_reached":
            opacity = ' opacity="0.6"'
            dash = ' stroke-dasharray="4 3"'
    if node.type == "unresolved":
        dash = ' stroke-dasharray="5 4"'
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}"{dash}'
    out = [
        f'<g class="{classes}" data-node-id="{_esc(node.id)}"'
        + (f' data-line="{node.line}"' if node.line is not None else "")
        + f"{opacity}>",
        f"<title>{_esc(_tooltip(node))}</title>",
        _shape(node.type, x0, y0, w, h, paint, stroke),
    ]
    label = _esc(fit_label(node.label, node.type))
    style = ' font-style="italic"' if node.type == "unresolved" else ""
    if node.type in _CAPTIONLESS:
        out.append(
            f'<text x="{_num(cx)}" y="{_num(cy + 4.5)}" text-anchor="middle" font-size="13" '
            f'font-weight="500" fill="{ink}"{style}>{label}</text>'
        )
    else:
        out.append(
            f'<text x="{_num(cx)}" y="{_num(y0 + 13)}" text-anchor="middle" font-size="8.5" '
            f'letter-spacing="0.6" fill="{stroke}" font-weight="600">'
            f"{_esc(caption(node))}</text>"
        )
        out.append(
            f'<text x="{_num(cx)}" y="{_num(y0 + 29)}" text-anchor="middle" font-size="13" '
            f'fill="{ink}"{style}>{label}</text>'
        )
    stop = stop_mark(node)
    if node.details.get("reused") or node.details.get("copied_from") or stop:
        badge = reused_badge(node)
        bw = badge_width(badge)
        bx, by = x0 + w - bw + 12, y0 - 12
        which = stop or "reused"
        out.append(
            f'<g class="relay-badge relay-badge--{which}"><rect x="{_num(bx)}" y="{_num(by)}" '
            f'width="{_num(bw)}" height="16" rx="8" fill="{badge_colour(node)}"/>'
            f'<text x="{_num(bx + bw / 2)}" y="{_num(by + 11.5)}" text-anchor="middle" '
            f'font-size="9.5" font-weight="600" fill="#ffffff">{_esc(badge)}</text></g>'
        )
    tag = guarantee_tag(node)
    if tag is not None:
        tw = tag_width(tag[0])
        tx, ty = x0 - 6, y0 + h - 7
        out.append(
            f'<g class="relay-guarantee relay-guarantee--{_esc(tag[2])}">'
            f'<rect x="{_num(tx)}" y="{_num(ty)}" width="{_num(tw)}" height="13" rx="6.5" '
            f'fill="{tag[1]}"/><text x="{_num(tx + tw / 2)}" y="{_num(ty + 9.5)}" '
            f'text-anchor="middle" font-size="8.5" font-weight="600" fill="#ffffff">'
            f"{_esc(tag[0])}</text></g>"
        )
    out.append("</g>")
    return out


def _shape(node_type: str, x0: float, y0: float, w: float, h: float, paint: str, ink: str) -> str:
    x1, y1, cy = x0 + w, y0 + h, y0 + h / 2
    if node_type == "decision":
        pts = [(x0, cy), (x0 + 12, y0), (x1 - 12, y0), (x1, cy), (x1 - 12, y1), (x0 + 12, y1)]
        return f'<polygon points="{_pts(pts)}" {paint} stroke-linejoin="round"/>'
    if node_type == "loop":
        c = 9
        pts = [(x0 + c, y0), (x1 - c, y0), (x1, y0 + c), (x1, y1 - c), (x1 - c, y1)]
        pts += [(x0 + c, y1), (x0, y1 - c), (x0, y0 + c)]
        return f'<polygon points="{_pts(pts)}" {paint} stroke-linejoin="round"/>'
    rx = h / 2 if node_type in ("input", "output") else 7
    box = (
        f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{_num(w)}" height="{_num(h)}" '
        f'rx="{_num(rx)}" {paint}/>'
    )
    if node_type == "workflow":
        box += (
            f'<rect x="{_num(x0 + 3.5)}" y="{_num(y0 + 3.5)}" width="{_num(w - 7)}" '
            f'height="{_num(h - 7)}" rx="4" fill="none" stroke="{ink}" stroke-width="1"/>'
        )
    elif node_type == "parallel":
        for yy in (y0 + 4, y1 - 4):
            box += (
                f'<line x1="{_num(x0 + 10)}" y1="{_num(yy)}" x2="{_num(x1 - 10)}" '
                f'y2="{_num(yy)}" stroke="{ink}" stroke-width="2" stroke-linecap="round"/>'
            )
    elif node_type == "try":
        box += (
            f'<path d="M{_num(x0 + 7)},{_num(y0 + 6)} v{_num(h - 12)}" stroke="{ink}" '
            'stroke-width="3" stroke-linecap="round" fill="none"/>'
        )
    return box


def _pts(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{_num(x)},{_num(y)}" for x, y in points)


def _tooltip(node: Node) -> str:
    head = node.type + (f" · line {node.line}" if node.line is not None else "")
    lines = [head, node.label]
    details: dict[str, Any] = dict(node.details)
    details.pop("calls", None)  # per-call facts (with timings) are in the node's details panel
    reason = details.pop("reason", None)
    if reason is not None:
        lines.append(f"reason: {reason}")
    for key in sorted(details):
        value = details[key]
        text = value if isinstance(value, str) else _brief(value)
        text = " ".join(str(text).split())
        lines.append(f"{key}: {text if len(text) <= 80 else text[:79] + '…'}")
    return "\n".join(lines)


def _brief(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_brief(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_brief(v)}" for k, v in sorted(value.items()))
    return str(value)


def _edge(edge: Edge, nodes: Mapping[str, Node]) -> list[str]:
    source, target = nodes.get(edge.source), nodes.get(edge.target)
    if source is None or target is None:
        return []
    points = list(edge.points or [])
    if len(points) < 2:
        half = NODE_HEIGHT / 2
        points = [(source.x or 0.0, (source.y or 0.0) + half)]
        points.append((target.x or 0.0, (target.y or 0.0) - half))
    segments = _curve(points, source, target)
    d = f"M{_num(points[0][0])},{_num(points[0][1])}" + "".join(
        f" C{_num(a[0])},{_num(a[1])} {_num(b[0])},{_num(b[1])} {_num(c[0])},{_num(c[1])}"
        for a, b, c in segments
    )
    classes, dash = "relay-edge", ""
    if (target.y or 0.0) <= (source.y or 0.0):
        classes, dash = "relay-edge relay-edge--back", ' stroke-dasharray="5 4"'
    elif target.details.get("in_step") == source.id:
        classes, dash = "relay-edge relay-edge--attached", ' stroke-dasharray="2 3"'
    out = [
        f'<g class="{classes}" data-from="{_esc(edge.source)}" data-to="{_esc(edge.target)}">',
        f'<path d="{d}" fill="none" stroke="{_EDGE_COLOUR}" stroke-width="1.5"{dash} '
        'marker-end="url(#relay-arrow)"/>',
    ]
    if edge.label:
        text = " ".join(edge.label.split())
        short = text if len(text) <= _MAX_EDGE_LABEL else text[: _MAX_EDGE_LABEL - 1] + "…"
        lx, ly = _label_anchor(points[0], segments[0])
        run = segments[0][2][0] - points[0][0]
        anchor = "end" if run < -4 else "start"
        lx += -5 if anchor == "end" else 5
        out.append(
            f'<text class="relay-edge-label" x="{_num(lx)}" y="{_num(ly)}" text-anchor="{anchor}" '
            f'font-size="11" fill="{_LABEL_COLOUR}" stroke="#ffffff" stroke-width="4" '
            f'stroke-linejoin="round" paint-order="stroke"><title>{_esc(text)}</title>'
            f"{_esc(short)}</text>"
        )
    out.append("</g>")
    return out


def _curve(points: list[Point], source: Node, target: Node) -> list[tuple[Point, Point, Point]]:
    """Cubic segments through ``points``: vertical tangents, horizontal at side ports."""
    tangents: list[Point] = []
    last = len(points) - 1
    for i, (px, py) in enumerate(points):
        node = source if i == 0 else target if i == last else None
        if node is not None and _on_side(node, px, py):
            sign = 1.0 if px >= (node.x or 0.0) else -1.0
            tangents.append((sign if i == 0 else -sign, 0.0))
            continue
        before = points[max(i - 1, 0)][1]
        after = points[min(i + 1, last)][1]
        tangents.append((0.0, 1.0 if after >= before else -1.0))
    segments = []
    for i in range(last):
        (ax, ay), (bx, by) = points[i], points[i + 1]
        (tax, tay), (tbx, tby) = tangents[i], tangents[i + 1]
        reach_a = max(abs(bx - ax) if tax else abs(by - ay), 16.0) * 0.5
        reach_b = max(abs(bx - ax) if tbx else abs(by - ay), 16.0) * 0.5
        c1 = (ax + tax * reach_a, ay + tay * reach_a)
        c2 = (bx - tbx * reach_b, by - tby * reach_b)
        segments.append((c1, c2, (bx, by)))
    return segments


def _on_side(node: Node, px: float, py: float) -> bool:
    w, h = node_size(node.type, node.label)
    return abs(abs(px - (node.x or 0.0)) - w / 2) <= 1 and abs(py - (node.y or 0.0)) < h / 2


def _label_anchor(start: Point, segment: tuple[Point, Point, Point]) -> Point:
    (c1x, c1y), (c2x, c2y), (ex, ey) = segment
    t = 0.5
    u = 1 - t
    x = u**3 * start[0] + 3 * u * u * t * c1x + 3 * u * t * t * c2x + t**3 * ex
    y = u**3 * start[1] + 3 * u * u * t * c1y + 3 * u * t * t * c2y + t**3 * ey
    return x, y + 4
