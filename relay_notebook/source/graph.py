"""The relay-graph/v1 document model shared by the CLI, the views and the JupyterLab renderer.

A graph is plain data: nodes (id, type, label, source line, details, optional position) and
edges (from, to, optional label). ``to_dict`` produces the JSON document described by the
schema shipped in ``relay_notebook/schemas/relay-graph-v1.schema.json``; ``from_dict`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "GRAPH_SCHEMA",
    "NODE_TYPES",
    "Edge",
    "FlowGraph",
    "GraphKind",
    "Node",
    "call_key",
]

GRAPH_SCHEMA: Final = "relay-graph/v1"

NODE_TYPES: Final = (
    "input",
    "step",
    "workflow",
    "agent",
    "mcp",
    "tool",
    "vault",
    "admit",
    "decision",
    "loop",
    "parallel",
    "try",
    # what the workflow body hands to DBOS itself (DBOS.sleep, recv / get_event, send,
    # set_event, write_stream): recorded once in its history
    "sleep",
    "wait",
    "send",
    "event",
    "stream",
    "output",
    "unresolved",
    # legacy `# @relay node` annotations may also use this one
    "script",
)

GraphKind = Literal["flow", "annotations", "run"]


def plain_number(value: float) -> float | int:
    """A whole number as an int: JSON readers write ``68.0`` back as ``68`` (a saved notebook
    would otherwise differ from its outputs on every save)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass
class Node:
    """One node: ``id`` is unique in its graph and starts with a letter."""

    id: str
    type: str
    label: str
    line: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    x: float | None = None
    y: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type, "label": self.label}
        if self.line is not None:
            out["line"] = self.line
        if self.details:
            out["details"] = self.details
        if self.x is not None and self.y is not None:
            out["x"] = plain_number(self.x)
            out["y"] = plain_number(self.y)
        return out


@dataclass
class Edge:
    """A directed edge ``source -> target``; serialized as ``from``/``to``."""

    source: str
    target: str
    label: str | None = None
    points: list[tuple[float, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": self.source, "to": self.target}
        if self.label is not None:
            out["label"] = self.label
        if self.points:
            out["points"] = [[plain_number(x), plain_number(y)] for x, y in self.points]
        return out


@dataclass
class FlowGraph:
    """A whole graph document. ``kind`` says where it came from (AST, annotations, history)."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    relay: str | None = None
    kind: GraphKind = "flow"
    notes: list[str] = field(default_factory=list)
    width: float | None = None
    height: float | None = None
    #: the run a run graph shows: id, status, attempt, counts, error (see history.run_summary)
    run: dict[str, Any] | None = None

    def node(self, node_id: str) -> Node:
        """The node with ``node_id``; ``KeyError`` if absent."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": GRAPH_SCHEMA, "kind": self.kind}
        if self.relay is not None:
            out["relay"] = self.relay
        out["nodes"] = [n.to_dict() for n in self.nodes]
        out["edges"] = [e.to_dict() for e in self.edges]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.width is not None and self.height is not None:
            out["layout"] = {"width": plain_number(self.width), "height": plain_number(self.height)}
        if self.run is not None:
            out["run"] = dict(self.run)
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> FlowGraph:
        """Read a relay-graph/v1 document (as produced by ``to_dict``)."""
        layout = doc.get("layout") or {}
        return cls(
            nodes=[
                Node(
                    id=n["id"],
                    type=n["type"],
                    label=n["label"],
                    line=n.get("line"),
                    details=dict(n.get("details") or {}),
                    x=n.get("x"),
                    y=n.get("y"),
                )
                for n in doc.get("nodes", [])
            ],
            edges=[
                Edge(
                    source=e["from"],
                    target=e["to"],
                    label=e.get("label"),
                    points=[(p[0], p[1]) for p in e["points"]] if e.get("points") else None,
                )
                for e in doc.get("edges", [])
            ],
            relay=doc.get("relay"),
            kind=doc.get("kind", "flow"),
            notes=list(doc.get("notes") or []),
            width=layout.get("width"),
            height=layout.get("height"),
            run=dict(doc["run"]) if isinstance(doc.get("run"), dict) else None,
        )


#: an ``mcp()`` call's operation keyword, and its step name's prefix after ``SERVER.``
_MCP_OPERATIONS: Final = {
    "tool": "",
    "resource": "resource:",
    "prompt": "prompt:",
    "listing": "list:",
}


def call_key(node: Node) -> str | None:
    """The DBOS step name a flow-graph node's call is recorded under, if it makes one."""
    details = node.details
    if node.type in ("step", "workflow"):
        name = str(details.get("name") or node.label)
        return f"step:{name}" if details.get("legacy") and node.type == "step" else name
    if node.type in ("sleep", "wait", "send", "event", "stream") and "name" in details:
        return str(details["name"])  # DBOS's own record of the call (DBOS.sleep, DBOS.recv…)
    if "in_step" in details:
        return None  # made inside a step's body: part of that step's checkpoint
    if node.type == "agent":
        # a legacy annotation's agent is matched by its ``call`` or else its id (the seeds:
        # "agent ids (or call) match ctx.call_agent(name=...)"); an analysed one by its name
        name = details.get("call") or details.get("name") or node.id
        return f"agent:{name}"
    if node.type == "mcp" and "server" in details:
        for key, prefix in _MCP_OPERATIONS.items():
            if isinstance(details.get(key), str):
                return f"mcp:{details['server']}.{prefix}{details[key]}"
    return None
