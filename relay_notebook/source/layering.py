"""The proper layered graph behind the layout: cycles broken, layers assigned, rows ordered.

Design: the layout's combinatorial half, kept apart from geometry. Depth-first back edges are
reversed (every loop has one), layers are longest paths, long edges get one dummy vertex per
row they cross, and barycenter/median sweeps reorder rows, keeping the ordering with the
fewest crossings. Crossings between two rows are inversions of the lower endpoints, counted
with a Fenwick tree in O(E log V) so every sweep can afford an exact count. Ties always fall
back to input order, so the same graph always gives the same rows.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise
from typing import Final

__all__ = ["CHAIN_WEIGHT", "LayeredGraph", "assign_layers", "break_cycles", "reduce_crossings"]

#: placement weight of a one-to-one link: chains of these are drawn as one straight column
CHAIN_WEIGHT: Final = 8.0
#: dummy vertices every graph may have (long edges routed one by one), and per node beyond that
DUMMY_BUDGET: Final = 20_000
DUMMIES_PER_NODE: Final = 4
_MAX_SWEEPS = 24
_STALL_LIMIT = 4


def break_cycles(n: int, edges: list[tuple[int, int, int]]) -> set[int]:
    """Edge numbers of the depth-first back edges; reversing them leaves a DAG."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    has_pred = [False] * n
    for k, s, t in edges:
        out[s].append((k, t))
        has_pred[t] = True
    roots = [v for v in range(n) if not has_pred[v]] + [v for v in range(n) if has_pred[v]]
    state = [0] * n  # 0 unseen, 1 on the DFS stack, 2 finished
    back: set[int] = set()
    for root in roots:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            v, i = stack[-1]
            if i == len(out[v]):
                state[v] = 2
                stack.pop()
                continue
            stack[-1] = (v, i + 1)
            k, w = out[v][i]
            if state[w] == 1:
                back.add(k)
            elif state[w] == 0:
                state[w] = 1
                stack.append((w, 0))
    return back


def assign_layers(n: int, dag: list[tuple[int, int, int]]) -> list[int]:
    """Longest-path layers, with sources pulled down next to their first successor."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for _, s, t in dag:
        succ[s].append(t)
        indeg[t] += 1
    layer = [0] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    while queue:
        v = queue.popleft()
        for w in succ[v]:
            layer[w] = max(layer[w], layer[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    has_pred = [False] * n
    for _, _, t in dag:
        has_pred[t] = True
    for v in range(n):
        if not has_pred[v] and succ[v]:
            layer[v] = min(layer[w] for w in succ[v]) - 1
    return layer


class LayeredGraph:
    """The proper layered graph: real vertices ``0..n-1`` then dummy vertices on long edges."""

    def __init__(
        self, n: int, layer: list[int], dag: list[tuple[int, int, int]], flipped: set[int]
    ) -> None:
        self.n = n
        self.layer = list(layer)
        self.key: list[tuple[int, int, int]] = [(v, 0, 0) for v in range(n)]
        self.down: list[list[int]] = [[] for _ in range(n)]
        self.up: list[list[int]] = [[] for _ in range(n)]
        self.chains: dict[int, list[int]] = {}
        links: list[tuple[int, int, bool]] = []
        lanes, unrouted = _plan_long_edges(n, layer, dag, flipped)
        lane_of: dict[int, dict[int, int]] = {}  # target -> layer -> the lane's dummy there
        for k, s, t in dag:
            if k in unrouted:
                self.chains[k] = [s, t]  # drawn straight, outside the rows
                continue
            lane = lanes.get(k)
            if lane is not None:
                self.chains[k] = self._join_lane(lane_of.setdefault(t, {}), lane, s, t, links)
                continue
            chain = [s]
            for lv in range(layer[s] + 1, layer[t]):
                chain.append(self._dummy(lv, (max(s, t), 1, k)))
            chain.append(t)
            for a, b in pairwise(chain):
                self._link(a, b, k in flipped, links)
            self.chains[k] = chain
        self.pos = [0] * len(self.layer)
        self.best_order: list[list[int]] = []
        self.links = links
        self.up_w: list[list[float]] = []
        self.down_w: list[list[float]] = []

    def _link(self, a: int, b: int, back: bool, links: list[tuple[int, int, bool]]) -> None:
        self.down[a].append(b)
        self.up[b].append(a)
        links.append((a, b, back))

    def _join_lane(
        self,
        lane: dict[int, int],
        key: tuple[int, int, int],
        s: int,
        t: int,
        links: list[tuple[int, int, bool]],
    ) -> list[int]:
        """Route ``s -> t`` down ``t``'s lane (one dummy per row above ``t``, extended upwards
        as needed); its chain names only where it joins and leaves the lane, so an edge costs
        O(1) beyond the lane's rows, and its polyline stays short."""
        first, last = self.layer[s] + 1, self.layer[t] - 1
        if not lane:
            lane[last] = self._dummy(last, key)
            self._link(lane[last], t, False, links)
        top = min(lane)
        for lv in range(top - 1, first - 1, -1):  # rows above the lane's top, upwards
            lane[lv] = self._dummy(lv, key)
            self._link(lane[lv], lane[lv + 1], False, links)
        entry = lane[first]
        if entry not in self.down[s]:
            self._link(s, entry, False, links)
        return [s, entry, lane[last], t] if entry != lane[last] else [s, entry, t]

    def _dummy(self, lv: int, key: tuple[int, int, int]) -> int:
        d = len(self.layer)
        self.layer.append(lv)
        self.key.append(key)
        self.down.append([])
        self.up.append([])
        return d

    def weigh(self) -> None:
        """Link weights for placement, read from the final ordering.

        Back edges barely pull their endpoints; one-to-one links (a chain of real nodes, a long
        edge's dummies) pull hard so the main flow and long edges stay straight. Of several
        children the main line is the one heading the longest way down (a loop's exit, not its
        body, so successive loops do not staircase across the page), else the middle one of an
        odd fan; an odd join likewise continues its middle parent.
        """
        n, size = self.n, len(self.layer)
        forward = dict.fromkeys((a, b) for a, b, back in self.links if not back or min(a, b) >= n)
        children: list[list[int]] = [[] for _ in range(size)]
        parents: list[list[int]] = [[] for _ in range(size)]
        for a, b in forward:
            children[a].append(b)
            parents[b].append(a)
        height = [0] * size
        for v in sorted(range(size), key=self.layer.__getitem__, reverse=True):
            height[v] = max((height[w] + 1 for w in self.down[v]), default=0)
        main_down: dict[int, int] = {}
        main_up: dict[int, int] = {}
        for v in range(size):
            below = sorted(children[v], key=self.pos.__getitem__)
            tallest = sorted((height[b] for b in below), reverse=True)
            if len(tallest) > 1 and tallest[0] > tallest[1]:
                main_down[v] = next(b for b in below if height[b] == tallest[0])
            elif len(below) % 2 == 1:
                main_down[v] = below[len(below) // 2]
            above = sorted(parents[v], key=self.pos.__getitem__)
            if len(above) % 2 == 1:
                main_up[v] = above[len(above) // 2]
        self.up_w = [[] for _ in range(size)]
        self.down_w = [[] for _ in range(size)]
        for a, b, back in self.links:
            if back and (a < n or b < n):
                w = 0.25
            elif main_down.get(a) == b and main_up.get(b) == a:
                w = CHAIN_WEIGHT
            else:
                w = 1.0
            self.down_w[a].append(w)
            self.up_w[b].append(w)

    def initial_order(self) -> list[list[int]]:
        """Rows in input order; a long edge's dummies follow the later of its two endpoints."""
        order: list[list[int]] = [[] for _ in range(max(self.layer) + 1)]
        for v in sorted(range(len(self.layer)), key=self.key.__getitem__):
            order[self.layer[v]].append(v)
        self.index_rows(order)
        return order

    def index_rows(self, order: list[list[int]]) -> None:
        """Record each vertex's position in its row."""
        for row in order:
            for i, v in enumerate(row):
                self.pos[v] = i

    def count_crossings(self, order: list[list[int]]) -> int:
        """Edge crossings between adjacent rows of ``order``."""
        pos, down, total = self.pos, self.down, 0
        for upper, lower in pairwise(order):
            # lower endpoints in (upper, lower) order; a crossing is an inversion, counted
            # with a Fenwick tree over the lower row
            ends: list[int] = []
            for u in upper:
                below = down[u]
                if len(below) == 1:
                    ends.append(pos[below[0]])
                elif below:
                    ends.extend(sorted([pos[w] for w in below]))
            size = len(lower)
            tree = [0] * (size + 1)
            for seen, p in enumerate(ends):
                i, at_most = p + 1, 0
                while i > 0:
                    at_most += tree[i]
                    i &= i - 1
                total += seen - at_most
                i = p + 1
                while i <= size:
                    tree[i] += 1
                    i += i & -i
        return total

    def sort_layer(self, row: list[int], adjacent: list[list[int]], median: bool) -> None:
        """Reorder ``row`` by the mean (or median) position of its neighbours in ``adjacent``."""
        pos = self.pos
        keys: dict[int, float] = {}
        for v in row:
            nbrs = adjacent[v]
            if not nbrs:
                keys[v] = pos[v]
            elif median:
                ps = sorted(pos[u] for u in nbrs)
                m = len(ps) // 2
                keys[v] = ps[m] if len(ps) % 2 else (ps[m - 1] + ps[m]) / 2
            else:
                keys[v] = sum(pos[u] for u in nbrs) / len(nbrs)
        row.sort(key=lambda v: (keys[v], pos[v]))
        for i, v in enumerate(row):
            pos[v] = i


def dummy_budget(n: int) -> int:
    """How many dummy vertices a graph of ``n`` nodes gets before its long edges share lanes."""
    return max(DUMMY_BUDGET, DUMMIES_PER_NODE * n)


def _plan_long_edges(
    n: int, layer: list[int], dag: list[tuple[int, int, int]], flipped: set[int]
) -> tuple[dict[int, tuple[int, int, int]], set[int]]:
    """Which long edges share a lane (edge -> the lane's sort key) and which are left unrouted.

    Within the budget every long edge has dummies of its own (nothing changes). Over it, which
    only a huge graph reaches (a return deep in a 10,000-step body spans every row below it,
    and each one more would add as many dummies), the forward edges into one node share one
    lane of dummies; if the lanes and back edges still exceed the budget, the longest of them
    are drawn straight, outside the rows, so the layout stays linear in the graph's size.
    """
    budget = dummy_budget(n)
    span = {k: layer[t] - layer[s] - 1 for k, s, t in dag if layer[t] - layer[s] > 1}
    if sum(span.values()) <= budget:
        return {}, set()
    groups: dict[int, list[int]] = {}
    top: dict[int, int] = {}
    last: dict[int, int] = {}  # a lane follows the latest of its endpoints, like a dummy
    for k, s, t in dag:
        if k in span and k not in flipped:
            groups.setdefault(t, []).append(k)
            top[t] = min(top.get(t, layer[t]), layer[s])
            last[t] = max(last.get(t, t), s)
    lanes = {k: (last[t], 1, members[0]) for t, members in groups.items() for k in members}
    # the units that cost dummies: a lane (all its edges) or one back edge
    units: list[tuple[int, int, list[int]]] = [
        (layer[t] - top[t] - 1, members[0], members) for t, members in groups.items()
    ]
    units += [(cost, k, [k]) for k, cost in span.items() if k in flipped]
    total = sum(cost for cost, _, _ in units)
    unrouted: set[int] = set()
    for cost, _, members in sorted(units, key=lambda u: (-u[0], u[1])):
        if total <= budget:
            break
        total -= cost
        unrouted.update(members)
    return lanes, unrouted


def reduce_crossings(g: LayeredGraph, order: list[list[int]]) -> int:
    """Alternate downward and upward sweeps; keep the ordering with the fewest crossings."""
    best = g.count_crossings(order)
    g.best_order = [list(row) for row in order]
    stall = 0
    for sweep in range(_MAX_SWEEPS):
        if best == 0 or stall >= _STALL_LIMIT:
            break
        median = (sweep // 2) % 2 == 1
        if sweep % 2 == 0:
            for row in order[1:]:
                g.sort_layer(row, g.up, median)
        else:
            for row in reversed(order[:-1]):
                g.sort_layer(row, g.down, median)
        found = g.count_crossings(order)
        if found < best:
            best, stall = found, 0
            g.best_order = [list(row) for row in order]
        else:
            stall += 1
    g.index_rows(g.best_order)
    return best
