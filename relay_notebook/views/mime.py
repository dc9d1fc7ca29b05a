"""MIME bundles: the flow graph and run history as JSON for the JupyterLab renderer, with an
SVG/HTML fallback everywhere else and a deterministic ``text/plain`` (compared by nbval)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.history.run_list import RunSummary
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.svg import render_svg
from relay_notebook.views.text import graph_text
from relay_notebook.views.usage_text import listed_usage_text
from relay_notebook.views.wording import duration_text

__all__ = ["GRAPH_MIME", "RUNS_MIME", "CheckView", "GraphView", "RunsView"]

GRAPH_MIME = "application/vnd.relay.graph+json"
RUNS_MIME = "application/vnd.relay.runs+json"


@dataclass
class GraphView:
    """A flow graph or run graph, shown by the labextension (SVG elsewhere)."""

    graph: FlowGraph

    def __post_init__(self) -> None:
        if any(n.x is None for n in self.graph.nodes):
            layout_graph(self.graph)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {
            GRAPH_MIME: self.graph.to_dict(),
            "image/svg+xml": render_svg(self.graph),
            "text/plain": graph_text(self.graph),
        }


#: a relay.py line number inside a diagnostic's message (``line 5``, never ``cell line``)
_FILE_LINE = re.compile(r"(?<!cell )\bline (\d+)\b")


@dataclass
class CheckView:
    """Admission errors and lint warnings of a cell, one line each, with cell line numbers."""

    relay: str
    diagnostics: Sequence[Diagnostic]
    line_offset: int = 1

    def lines(self) -> list[str]:
        return [
            f"cell line {d.line + self.line_offset}: {d.severity}: "
            f"{self._cell_lines(d.message)} [{d.code}]"
            if d.file == "relay.py"
            else d.format()
            for d in self.diagnostics
        ]

    def _cell_lines(self, message: str) -> str:
        """``message`` (about relay.py) with its line numbers as cell lines, so one sentence
        never mixes the cell's numbering with the file's."""
        return _FILE_LINE.sub(lambda m: f"cell line {int(m[1]) + self.line_offset}", message)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines())
        return {
            "text/html": f'<ul class="relay-diagnostics">{items}</ul>',
            "text/plain": "\n".join(self.lines()),
        }


_BADGE = {
    "succeeded": "#15803d",
    "failed": "#b91c1c",
    "interrupted": "#b45309",
    "needs_reconciliation": "#7c3aed",
    "denied": "#991b1b",
    "cancelled": "#475569",
    "running": "#2563eb",
    "pending": "#64748b",
    "queued": "#64748b",
}


@dataclass
class RunsView:
    """A table of runs: status, attempts, reused checkpoints, duration (active time, with
    the wall time beside when the run also waited), and, when a run made model calls, their
    tokens and cost as ``relay runs`` lists them."""

    runs: list[RunSummary] = field(default_factory=list)

    def _costs(self) -> list[str] | None:
        """Each run's ``listed_usage_text`` ('' without model calls); None when no run has."""
        if all(r.usage is None for r in self.runs):
            return None
        return ["" if r.usage is None else listed_usage_text(r.usage) for r in self.runs]

    def text(self) -> str:
        if not self.runs:
            return "no runs yet"
        costs = self._costs() or [""] * len(self.runs)
        return "\n".join(
            f"{r.run_id:<20} {r.status:<21} attempts {r.attempts}  reused {r.reused}"
            + (f"  {cost}" if cost else "")
            for r, cost in zip(self.runs, costs, strict=True)
        )

    def html(self) -> str:
        costs = self._costs()
        rows = []
        for i, r in enumerate(self.runs):
            colour = _BADGE.get(r.status, "#64748b")
            took = duration_text(r.active_ms, r.duration_ms, int(r.attempts or 1))
            reused = (
                f'<span class="relay-badge relay-badge--reused">{r.reused} reused</span>'
                if r.reused
                else ""
            )
            rows.append(
                f'<tr><td style="white-space:nowrap"><code>{html.escape(r.run_id)}</code></td>'
                f'<td><span class="relay-badge" style="background:{colour};color:white;'
                f'padding:1px 6px;border-radius:8px">{html.escape(r.status)}</span></td>'
                f"<td>{r.attempts}</td><td>{reused}</td>"
                f'<td style="white-space:nowrap">{html.escape(took)}</td>'
                + ("" if costs is None else f"<td>{html.escape(costs[i])}</td>")
                + "</tr>"
            )
        return (
            '<table class="relay-history"><thead><tr><th>run</th><th>status</th>'
            "<th>attempts</th><th>checkpoints</th><th>duration</th>"
            + ("" if costs is None else "<th>model calls</th>")
            + "</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {
            RUNS_MIME: {"runs": [r.to_dict() for r in self.runs]},
            "text/html": self.html(),
            "text/plain": self.text(),
        }
