"""Plain-text renderings: stable, deterministic summaries for terminals and ``text/plain``."""

from __future__ import annotations

from relay_notebook.source.graph import FlowGraph

__all__ = ["graph_text"]

_KIND_TITLE = {"flow": "flow graph", "annotations": "flow graph (annotations)", "run": "run graph"}


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def graph_text(graph: FlowGraph) -> str:
    """Nodes in order (type, label, line), then edges, then notes; no positions or timings."""
    title = _KIND_TITLE.get(graph.kind, "graph")
    head = f"{title} of {graph.relay}" if graph.relay else title
    lines = [f"{head}: {len(graph.nodes)} nodes, {len(graph.edges)} edges"]
    id_width = max((len(n.id) for n in graph.nodes), default=0)
    for n in graph.nodes:
        where = f"  (line {n.line})" if n.line is not None else ""
        lines.append(f"  {n.id:<{id_width}}  {n.type:<10} {_clip(n.label, 60)}{where}")
    if graph.edges:
        lines.append("edges:")
        for e in graph.edges:
            label = f"  [{_clip(e.label, 50)}]" if e.label else ""
            lines.append(f"  {e.source} -> {e.target}{label}")
    for note in graph.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)
