"""Run fields on flow graph nodes and edges, and the status a run graph shows for a call.

Design note: run graphs and overlays are ``relay-graph/v1`` documents with the schema's run
fields (``status``, ``reused``, ``count``, ``attempts`` on nodes, ``taken`` on edges), mirrored
into ``details`` where the SVG renderer and the live view read them (``FlowGraph.from_dict``
keeps only the mirror).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay_notebook.history.log_records import StepCall
from relay_notebook.history.records import RunLog
from relay_notebook.source.graph import Edge, Node

__all__ = ["RunEdge", "RunNode", "call_status", "end_status", "mark"]


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


def mark(node: RunNode, status: str, *, reused: bool, count: int, attempts: list[int]) -> None:
    """Set ``node``'s run fields and their mirror in ``details``."""
    node.status, node.reused, node.count, node.attempts = status, reused, count, attempts
    node.details["status"] = status
    node.details["count"] = count
    if reused:
        node.details["reused"] = True


def call_status(step: StepCall) -> str:
    """The status a run graph shows for one step call."""
    if step.status in ("running", "waiting"):
        return step.status
    if step.status == "error":
        return "failed"
    if step.status == "interrupted":
        return "interrupted"  # running when its process died: its body runs again on recovery
    if step.copied_from and not step.executed_in:
        return "copied"  # a fork's checkpoint, copied from its parent run
    return "reused" if step.reused_in else "succeeded"


def end_status(log: RunLog) -> str:
    """The status of the ``output`` node: the run's, once it ended; else ``pending``."""
    return {"succeeded": "succeeded", "failed": "failed"}.get(log.run.status, "pending")
