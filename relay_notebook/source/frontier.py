"""A flow graph under construction: nodes, edges, the frontier the next node joins, rollback.

Design note: the *frontier* is the list of (node id, edge label) pairs the next drawn node is
joined from; control flow splits it and merges it back. A control node (decision, loop, try,
parallel) is opened speculatively at a ``Mark`` and rolled back when nothing worth drawing
happened inside it, so plain data handling draws nothing and no second pass is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay_notebook.source.graph import Edge, Node

__all__ = ["GraphBuilder", "Mark", "Pending", "merge"]

Pending = tuple[str, str | None]


def merge(*groups: list[Pending]) -> list[Pending]:
    """The pending joins of all ``groups``, in order, without repeats."""
    return list(dict.fromkeys(p for group in groups for p in group))


@dataclass(frozen=True)
class Mark:
    """Where the graph stood when a control node was opened."""

    nodes: int
    edges: int
    frontier: list[Pending]
    content: int
    returns: int
    jumps: int


class GraphBuilder:
    """Nodes and edges in source order, unique ids, no duplicate edges, and rollback to a mark.

    ``content`` counts nodes worth drawing on their own (calls); ``returns`` and ``jumps`` count
    ``return`` and ``break``/``continue`` statements, which also make a branch worth drawing.
    The frontier list is replaced, never mutated, so a ``Mark`` can hold on to it.
    """

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.frontier: list[Pending] = []
        self.content = 0
        self.returns = 0
        self.jumps = 0
        self._ids: set[str] = set()
        self._edge_keys: set[tuple[str, str, str | None]] = set()
        # per base, a number below which every ``base-n`` is taken: the search for a free id
        # starts there, so a call drawn k times costs O(k) in all, not O(k**2)
        self._free_from: dict[str, int] = {}

    def new_id(self, base: str) -> str:
        """``base``, or ``base-2``, ``base-3``… for its later occurrences (the first free one)."""
        n = self._free_from.get(base, 1)
        node_id = base if n == 1 else f"{base}-{n}"
        while node_id in self._ids:
            n += 1
            node_id = f"{base}-{n}"
        self._ids.add(node_id)
        self._free_from[base] = n + 1
        return node_id

    def _release_id(self, node_id: str) -> None:
        """Free ``node_id``: it is ``base-n`` of its own base (n=1) and maybe of one shorter."""
        self._ids.discard(node_id)
        if node_id in self._free_from:
            self._free_from[node_id] = 1
        base, _, digits = node_id.rpartition("-")
        if not (base and digits.isascii() and digits.isdigit()) or digits[0] == "0":
            return
        known = self._free_from.get(base)
        if known is not None and 2 <= int(digits) < known:
            self._free_from[base] = int(digits)

    def edge(self, source: str, target: str, label: str | None) -> None:
        """Add ``source -> target`` unless it is a self loop or already present."""
        key = (source, target, label)
        if source != target and key not in self._edge_keys:
            self._edge_keys.add(key)
            self.edges.append(Edge(source, target, label))

    def join(self, pending: list[Pending], target: str) -> None:
        """Draw every pending join into ``target``."""
        for source, label in pending:
            self.edge(source, target, label)

    def emit(
        self,
        base: str,
        kind: str,
        label: str,
        line: int | None,
        details: dict[str, Any],
        *,
        content: bool = True,
    ) -> str:
        """Add a node joined from the frontier; it becomes the frontier. Returns its id."""
        node_id = self.new_id(base)
        self.nodes.append(Node(node_id, kind, label, line, details))
        self.join(self.frontier, node_id)
        self.frontier = [(node_id, None)]
        self.content += content
        return node_id

    def attach(
        self, parent: str, base: str, kind: str, label: str, line: int, details: dict[str, Any]
    ) -> None:
        """Add a node hanging off ``parent``, outside the flow (the frontier is unchanged)."""
        node_id = self.new_id(base)
        self.nodes.append(Node(node_id, kind, label, line, details))
        self.edge(parent, node_id, None)

    def mark(self) -> Mark:
        """The current state, to settle a control node against later."""
        return Mark(
            len(self.nodes), len(self.edges), self.frontier, self.content, self.returns, self.jumps
        )

    def rollback(self, mark: Mark) -> None:
        """Forget every node and edge added since ``mark``."""
        for node in self.nodes[mark.nodes :]:
            self._release_id(node.id)
        for edge in self.edges[mark.edges :]:
            self._edge_keys.discard((edge.source, edge.target, edge.label))
        del self.nodes[mark.nodes :], self.edges[mark.edges :]
        self.frontier = mark.frontier
        self.content, self.returns, self.jumps = mark.content, mark.returns, mark.jumps

    def settle(self, mark: Mark, *, jumps: bool) -> None:
        """Roll back to ``mark`` when nothing since is worth drawing (jumps count if asked)."""
        quiet = self.content == mark.content and self.returns == mark.returns
        if quiet and (not jumps or self.jumps == mark.jumps):
            self.rollback(mark)
