"""The path a run took through its static flow graph, found from the calls it made, in order.

Design note: the run says which steps it called and in what order, not which branch or loop
edge led there. The walk places each call on the cheapest node of that step's name reachable
through nodes that make no call of their own (decisions, loops, ``try``, fan-outs, vault and
admit calls). A fan-out passed with branches still untaken comes first: ``asyncio.gather``
branches are siblings, not a sequence. After a call that raised, the run went on in an
``except`` handler of a ``try`` it passed. Otherwise the cost is the number of edges, plus one
per call the walk goes back to start from an earlier one, plus a penalty for an ``except``
edge when nothing raised. Calls the graph cannot see (dynamic dispatch) are counted, not
guessed. Paths are cached, so a loop of thousands of iterations walks quickly.

A call whose call site the child recorded (``site``: the lines from ``run`` through inlined
helpers to the call) goes to the node drawn for that site, never to another node of the same
step: the walk then only finds the edges that led there. Calls of one step made on one line
(``asyncio.gather(fetch(1), fetch(2))``) share a site, and go to that line's nodes in source
order, as gather starts them. Calls recorded before sites existed
(or made where the graph draws no node) are placed by name as above.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Final

from agentworks.frameworks import framework_plumbing
from relay_notebook.history.log_records import StepCall
from relay_notebook.source.graph import Edge, FlowGraph, Node, call_key

__all__ = [
    "PathWalk",
    "agent_workflows",
    "call_key",
    "node_site",
    "place_children",
    "walk_calls",
]

#: node types that make no DBOS step call of their own: a walk may pass through them
PASSABLE: Final = frozenset(
    {"input", "decision", "loop", "parallel", "try", "vault", "admit", "unresolved", "script"}
)
#: DBOS calls that record a sleep of their own for their timeout (the next function id)
_TIMED_WAITS: Final = frozenset({"DBOS.recv", "DBOS.getEvent"})
_EXCEPT_COST: Final = 5  # an except edge when nothing raised
_MISSED_EXCEPT: Final = 3  # a path that handles no exception after a call raised
_MAX_BACK: Final = 32


def node_site(node: Node) -> tuple[int, ...] | None:
    """The call site a flow-graph node stands for (its line, or the chain through helpers)."""
    site = node.details.get("site")
    if isinstance(site, list) and site:
        return tuple(int(n) for n in site)
    return (node.line,) if node.line is not None else None


@dataclass
class PathWalk:
    """Edges taken (with how often) and nodes passed while walking a flow graph."""

    graph: FlowGraph
    taken: dict[int, int] = field(default_factory=dict)  # edge position → times
    passes: dict[str, int] = field(default_factory=dict)
    _out: dict[str, list[tuple[int, Edge]]] = field(default_factory=dict)
    _types: dict[str, str] = field(default_factory=dict)
    _through: set[str] = field(default_factory=set)
    #: fan-outs passed whose branches have not all been taken, with the branches taken
    _forks: dict[str, set[int]] = field(default_factory=dict)
    #: ``try`` nodes passed, the latest last
    _tries: list[str] = field(default_factory=list)
    _best: dict[tuple[str, frozenset[str], bool], tuple[int, list[int]] | None] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self._types = {n.id: n.type for n in self.graph.nodes}
        # a child workflow's body, drawn after its node: the parent's calls go past it
        self._through = {n.id for n in self.graph.nodes if "in_workflow" in n.details}
        for i, e in enumerate(self.graph.edges):
            self._out.setdefault(e.source, []).append((i, e))

    def _handles(self, edge: Edge) -> bool:
        return self._types.get(edge.source) == "try" and (edge.label or "").startswith("except")

    def best(self, start: str, goal: frozenset[str], raised: bool) -> tuple[int, list[int]] | None:
        """The cost and edge positions of the cheapest path from ``start`` into ``goal``."""
        key = (start, goal, raised)
        if key in self._best:
            return self._best[key]
        order = itertools.count()
        heap: list[tuple[int, int, str, bool, list[int]]] = [(0, 0, start, False, [])]
        settled: set[tuple[str, bool]] = set()
        found: tuple[int, list[int]] | None = None
        while heap:
            cost, _, node, handled, path = heapq.heappop(heap)
            if found is not None and cost >= found[0]:
                break
            if (node, handled) in settled:
                continue
            settled.add((node, handled))
            for i, e in self._out.get(node, []):
                excepts = self._handles(e)
                # going past a child workflow's body costs nothing: it is one call of the parent
                hop = 0 if e.target in self._through else 1
                step = cost + hop + (_EXCEPT_COST if excepts and not raised else 0)
                now_handled = handled or excepts
                if e.target in goal:
                    total = step + (_MISSED_EXCEPT if raised and not now_handled else 0)
                    if found is None or total < found[0]:
                        found = (total, [*path, i])
                elif self._types.get(e.target) in PASSABLE or e.target in self._through:
                    heapq.heappush(heap, (step, next(order), e.target, now_handled, [*path, i]))
        self._best[key] = found
        return found

    def follow(self, path: list[int], *, join: bool = False) -> None:
        """Take ``path``; a ``join`` (a fan-out branch's way to where the others went on)
        counts its edges but passes no node again."""
        for i in path:
            self.taken[i] = self.taken.get(i, 0) + 1
            edge = self.graph.edges[i]
            if edge.source in self._forks:
                self._forks[edge.source].add(i)
                if len(self._forks[edge.source]) == len(self._out[edge.source]):
                    del self._forks[edge.source]  # every branch went
            if join:
                continue
            self.passes[edge.target] = self.passes.get(edge.target, 0) + 1
            if self._types.get(edge.target) == "parallel":
                self._forks[edge.target] = set()
            elif self._types.get(edge.target) == "try":
                self._tries = [*(t for t in self._tries if t != edge.target), edge.target]

    def place(self, trail: list[str], goal: frozenset[str], raised: bool) -> tuple[int, list[int]]:
        """How many calls back the path starts (0: from the last call, or from the handler of
        the exception it raised) and its edges; (-1, []) if no path leads to ``goal``."""
        if raised:
            # the call before raised and the run went on: an except handler of a try passed
            for node in reversed(self._tries):
                found = self.best(node, goal, raised)
                if found is not None and self._handles(self.graph.edges[found[1][0]]):
                    return 0, found[1]
        for fork in reversed(list(self._forks)):
            # a fan-out with a branch not taken yet: gathered calls are siblings
            found = self.best(fork, goal, raised)
            if found is not None and found[1][0] not in self._forks[fork]:
                return 1, found[1]
        choice: tuple[int, int, list[int]] | None = None
        for back, origin in enumerate(reversed(trail[-_MAX_BACK:])):
            if choice is not None and back >= choice[0]:
                break
            found = self.best(origin, goal, raised)
            if found is not None and (choice is None or found[0] + back < choice[0]):
                choice = (found[0] + back, back, found[1])
        return (choice[1], choice[2]) if choice is not None else (-1, [])


def agent_workflows(node: Node) -> set[str]:
    """The child workflows a framework agent's node runs its agent in: Pydantic AI's
    ``DBOSAgent`` names them ``AGENT.run`` and ``AGENT.run_sync`` (persisted names, like its
    steps'); its model requests, step tools and MCP calls are that child's steps."""
    if node.type != "agent" or node.details.get("framework") != "pydantic_ai":
        return set()
    name = node.details.get("name")
    return {f"{name}.run", f"{name}.run_sync"} if isinstance(name, str) else set()


def _agent_calls(node: Node, made: list[StepCall], by_id: dict[str, Any]) -> list[StepCall]:
    """``made`` (the calls placed on a framework agent's node) with each start of the agent's
    child workflow replaced by the child's calls the agent makes (model requests, step tools,
    MCP calls), as ``DBOSDurability`` makes them in the relay's own workflow. A start whose
    child recorded none of them yet stays: it is where the run is."""
    names = {str(s) for s in node.details.get("steps") or ()}
    out: list[StepCall] = []
    for step in made:
        child = by_id.get(step.child_workflow_id or "") if step.kind == "workflow" else None
        inner = [s for s in child.steps if s.name in names] if child is not None else []
        out += inner or [step]
    return out


def place_children(graph: FlowGraph, calls: dict[str, list[StepCall]], children: list[Any]) -> None:
    """Each child workflow's calls on the nodes drawn for its body (``in_workflow``) under the
    node its start was placed on, in call order (``children``: the run's child workflows, with
    their steps); a ``DBOSAgent``'s child's calls on its agent node (``agent_workflows``)."""
    by_id = {c.workflow_id: c for c in children}
    agents = {n.id: n for n in graph.nodes if agent_workflows(n)}
    for node_id, made in list(calls.items()):
        if node_id in agents:
            calls[node_id] = _agent_calls(agents[node_id], made, by_id)
    # a child's own child workflows (grandchildren, and deeper) are placed in their turn
    pending = [(node_id, made) for node_id, made in calls.items() if node_id not in agents]
    while pending:
        node_id, made = pending.pop(0)
        body = [n for n in graph.nodes if n.details.get("in_workflow") == node_id]
        placed: dict[str, list[StepCall]] = {}
        for start in made if body else []:
            child = by_id.get(start.child_workflow_id or "")
            seen: dict[str, int] = {}
            for step in child.steps if child is not None else ():
                targets = [n.id for n in body if call_key(n) == step.name]
                if targets:
                    k = seen[step.name] = seen.get(step.name, -1) + 1
                    target = targets[k % len(targets)]
                    calls.setdefault(target, []).append(step)
                    placed.setdefault(target, []).append(step)
        pending += [(target, steps) for target, steps in placed.items() if target not in agents]


def walk_calls(
    graph: FlowGraph,
    steps: list[StepCall],
    *,
    finished: bool,
    sites: dict[tuple[str, int], tuple[int, ...]] | None = None,
) -> tuple[PathWalk, dict[str, list[StepCall]], int]:
    """Walk ``graph`` along the root workflow's calls ``steps``: the walk, the calls placed on
    each node, and how many calls could not be placed. ``finished`` runs go on to the output;
    ``sites`` are the recorded call sites by (workflow id, function id)."""
    by_key: dict[str, list[str]] = {}
    by_site: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    #: a framework agent's node by the step names its calls get (model requests, step tools)
    agent_steps: dict[str, set[str]] = {}
    for node in graph.nodes:
        key = call_key(node) if "in_workflow" not in node.details else None  # a child's call
        if key is not None:
            by_key.setdefault(key, []).append(node.id)
            where = node_site(node)
            if where is not None:
                by_site.setdefault((key, where), []).append(node.id)
        if node.type == "agent" and node.details.get("framework") and key is not None:
            # ... and a DBOSAgent's child workflow, whose calls ``place_children`` puts there
            named = {str(s) for s in node.details.get("steps") or ()}
            agent_steps[node.id] = named | agent_workflows(node)
    walk = PathWalk(graph)
    calls: dict[str, list[StepCall]] = {}
    # the run enters at the input node (an annotated graph's may have any id)
    entry = next((n.id for n in graph.nodes if n.id == "input"), None) or next(
        (n.id for n in graph.nodes if n.type == "input"), None
    )
    trail = [entry] if entry is not None else []
    exits = frozenset(n.id for n in graph.nodes if n.id == "output" or n.type == "output")
    dangling: list[tuple[int, str]] = []
    unseen = 0
    raised = False
    last_site: tuple[int, ...] | None = None
    on_line: dict[str, int] = {}
    previous: StepCall | None = None
    for step in steps:
        follows, previous = previous, step
        if step.kind == "dbos" or framework_plumbing(step.name):
            if step.name not in by_key:
                continue  # DBOS's or an agent framework's own bookkeeping, drawn nowhere
            if (
                step.name == "DBOS.sleep"
                and follows is not None
                and follows.name in _TIMED_WAITS
                and follows.function_id + 1 == step.function_id
            ):
                continue  # the timeout sleep DBOS records right after a recv / get_event
        if trail and step.name in agent_steps.get(trail[-1], ()):
            # the agent's next model request or tool call: on its node, the walk stays there
            calls.setdefault(trail[-1], []).append(step)
            raised = step.status == "error"
            continue
        targets = by_key.get(step.name) or [
            a for a, names in agent_steps.items() if step.name in names
        ]
        site = sites.get((step.workflow_id, step.function_id)) if sites else None
        if site and targets:
            exact = by_site.get((step.name, site))
            if exact and len(exact) > 1:
                # calls of one step on one line (asyncio.gather(f(1), f(2))) run in source order
                if site != last_site:
                    on_line.clear()
                n = on_line[step.name] = on_line.get(step.name, -1) + 1
                exact = [exact[n % len(exact)]]
            targets = exact or targets
            last_site = site
        if not targets:
            unseen += 1
            continue
        back, path = walk.place(trail, frozenset(targets), raised)
        if back < 0:
            chosen = targets[0]
            unseen += 1
        else:
            if back and trail:
                dangling.append((len(trail) - 1, trail[-1]))
            walk.follow(path)
            chosen = graph.edges[path[-1]].target
        calls.setdefault(chosen, []).append(step)
        trail.append(chosen)
        raised = step.status == "error"
    if finished and trail and exits:
        back, path = walk.place(trail, exits, raised)
        walk.follow(path)
    for position, node_id in dangling:
        reached = frozenset([*walk.passes, *trail[position + 1 :], *exits]) - {node_id}
        found = walk.best(node_id, reached, False)
        if found is not None:
            walk.follow(found[1], join=True)
    return walk, calls, unseen
