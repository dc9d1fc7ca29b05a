"""The static flow graph of a relay: what ``run`` calls and how control reaches it, from the AST.

Design note: the graph must come from the text alone (nothing is imported or executed) and be
cheap enough to redraw on every ``%%relay`` cell, so only the module's top level, the
entrypoint and the functions it reaches are visited, once per call site, in source order
(``ast.parse`` dominates the cost). Control flow is drawn by ``ControlFlow``; which calls
become nodes is decided by ``relay_notebook.source.calls`` (its design note states the rule).
Steps and child workflows are drawn as single nodes because each runs as one checkpoint; the
adapter calls inside a step body hang off the step so the reader sees what it asks for.
Helpers are inlined at each call site, returns gathered into the frontier after the call; a
helper that draws nothing is remembered and skipped afterwards; a helper already being drawn
becomes an unresolved "recursive call" node. A call drawn inside an inlined helper records its
``site``: the lines of the helper calls that led there, then its own, which is what the child
records for the call at run time (``agentworks._sites``), so a run maps each call to exactly
one node even when one helper is inlined twice.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from relay_notebook.source.adapter_calls import adapter_spec
from relay_notebook.source.agent_frameworks import FrameworkAgents, find_framework_agents
from relay_notebook.source.calls import DURABLE_CALLS, DURABLE_NAMES, STARTERS, resolve_call
from relay_notebook.source.control import OUTPUT, ControlFlow, Frame
from relay_notebook.source.frontier import merge
from relay_notebook.source.graph import FlowGraph, Node
from relay_notebook.source.guarantees import assign_guarantees
from relay_notebook.source.lint import gc_paused
from relay_notebook.source.module_index import Function, ModuleIndex, Scope, resolve_function
from relay_notebook.source.source_text import MISSING, SourceText, id_base, literal, short

__all__ = ["CODES", "build_flow_graph"]

#: the flow graph reports what it cannot see through ``FlowGraph.notes``, never diagnostics
CODES: Final[dict[str, str]] = {}

# not entered when looking for calls: bodies that do not run here, and leaves
_SKIP: Final = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.Name,
    ast.Constant,
    ast.expr_context,
)
_NO_NAMES: Final = Scope()
_WORD: Final = re.compile(r"\w+")
#: lines of helper bodies the graph draws at their call sites, and more per line of source
INLINE_BUDGET: Final = 20_000
INLINES_PER_LINE: Final = 10
_TASK_MAKERS: Final = frozenset({"asyncio.create_task", "asyncio.ensure_future"})


@dataclass(frozen=True)
class _Attached:
    type: str
    base: str
    label: str
    line: int
    details: dict[str, Any]


def _calls_in(body: list[ast.stmt], lines: set[int] | None) -> Iterator[ast.Call]:
    """Calls in ``body`` in source order, within nodes covering one of ``lines`` (all if None).

    Nested functions, lambdas and classes are not entered: they do not run with the body.
    """
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _SKIP):
            continue
        first: int | None = getattr(node, "lineno", None)
        if lines is not None and first is not None:
            last: int = getattr(node, "end_lineno", None) or first
            if not any(first <= line <= last for line in lines):
                continue
        if type(node) is ast.Call:
            yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


class _FlowBuilder(ControlFlow):
    def __init__(self, index: ModuleIndex, text: SourceText) -> None:
        super().__init__(index, text)
        self._attached_cache: dict[int, list[_Attached]] = {}
        self._inert: set[int] = set()
        #: lines of the helper calls being inlined, outermost first
        self._sites: list[int] = []
        self.recursions = 0
        #: lines of helper bodies drawn at their call sites so far, and the most there may be
        self.inlined_lines = 0
        self.inline_budget = INLINE_BUDGET + INLINES_PER_LINE * len(text.lines or ())
        self.unexpanded = 0
        names = [n for n, q in index.imports.items() if q.split(".")[0] == "agentworks"]
        names += [n for n, f in index.named.items() if index.role(f)[0] in ("tool", "helper")]
        pattern = r"\b(?:" + "|".join(map(re.escape, names)) + r")\b"
        # only the parts of a step body whose text names an adapter, tool or helper are walked
        self._hint = re.compile(pattern) if names else None
        # the same lines found by looking each word up: an alternation of thousands of names
        # would be tried at every character of every step body
        self._words = frozenset(names) if all(_WORD.fullmatch(n) for n in names) else None
        self.agents: FrameworkAgents | None = None

    def draw(self, entry: Function) -> list[str]:
        node = entry.node
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        scope = Scope()
        details = {k: v for k, v in entry.details.items() if k != "name"}
        notes = []
        if len(params) >= 2:
            scope.ctx.add(params[1])
            details["legacy"] = True
        elif entry.role != "workflow":
            notes.append(
                "`run` is not decorated with @DBOS.workflow(); the graph is drawn as if it were."
            )
        self.emit("input", "input", "input", node.lineno, details, content=False)
        self.frames.append(Frame(node, scope, None))
        self.block(node.body)
        self.join(self.frontier, OUTPUT)
        out = {"returns": self.return_lines} if self.return_lines else {}
        self.nodes.append(Node(OUTPUT, "output", "output", None, out))
        return notes

    def call(self, call: ast.Call, *, awaited: bool) -> None:
        scope = self.frames[-1].scope
        target = resolve_call(call, scope, self.index, self.text, awaited)
        if target.kind == "gather":
            self._gather(call, target.name)
            return
        if target.kind == "run_step":
            self._run_step(target.name, call)
            return
        at = STARTERS.get(target.name, 0) if target.kind == "start" else 0
        if target.kind in ("to_thread", "start") and len(call.args) > at:
            for i, arg in enumerate(call.args):
                if i != at:
                    self.expr(arg)
            for keyword in call.keywords:
                self.expr(keyword.value)
            reference = ast.Call(func=call.args[at], args=[], keywords=[])
            inner = resolve_call(reference, scope, self.index, self.text, awaited=True)
            via = "asyncio.to_thread" if target.kind == "to_thread" else _via(call, target.name)
            if inner.kind == "function" and inner.function is not None:
                self._function(inner.function, call, via)
            elif inner.kind == "unresolved":
                self._unresolved(call, call.args[at], inner.reason)
            return
        if type(call.func) is not ast.Name:
            self.expr(call.func)
        for arg in call.args:
            self.expr(arg)
        for keyword in call.keywords:
            self.expr(keyword.value)
        if target.kind == "function" and target.function is not None:
            self._function(target.function, call, None)
        elif target.kind == "adapter":
            self._adapter(target.name, call)
        elif target.kind == "ctx":
            self._ctx(target.name, call)
        elif target.kind == "durable":
            self._durable(target.name, call)
        elif target.kind == "unresolved":
            agent = self.agents.agent_run(call) if self.agents is not None else None
            if agent is not None:  # a framework agent's durable run (source.agent_frameworks)
                label, base, details = agent.node()
                self.emit(base, "agent", label, call.lineno, self._sited(call, details))
            else:
                self._unresolved(call, call.func, target.reason)

    def makes_coroutine(self, call: ast.Call) -> bool:
        func = call.func
        scope = self.frames[-1].scope
        if type(func) is ast.Attribute and call.args and type(call.args[0]) is ast.Call:
            # a task of one: asyncio.create_task(fetch(x)) runs where the fan-out waits on it
            made = self.index.qualify(func, scope) in _TASK_MAKERS
            return made and self.makes_coroutine(call.args[0])
        if type(func) is not ast.Name:
            return False
        if func.id not in scope.functions and func.id not in self.index.named:
            return False
        target = resolve_call(call, scope, self.index, self.text, awaited=False)
        function = target.function
        return function is not None and isinstance(function.node, ast.AsyncFunctionDef)

    def _durable(self, method: str, call: ast.Call) -> None:
        """``DBOS.sleep`` / ``recv`` / ``get_event`` / ``send`` / ``set_event`` /
        ``write_stream`` in the workflow body: a node of its own, recorded once by DBOS."""
        node_type = DURABLE_CALLS[method]
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        params = {
            "sleep": ("seconds",),
            "recv": ("topic", "timeout_seconds"),
            "get_event": ("target_id", "key", "timeout_seconds"),
            "send": ("destination_id", "message", "topic"),
            "set_event": ("key", "value"),
            "write_stream": ("key", "value"),
        }[method]
        given = dict(zip(params, call.args, strict=False)) | {
            k: v for k, v in kw.items() if k in params
        }
        details: dict[str, Any] = {"call": f"DBOS.{method}", "name": DURABLE_NAMES[method]}
        for key in ("seconds", "topic", "timeout_seconds", "key"):
            if key in given and (value := literal(given[key])) is not MISSING:
                details[key] = value
        subject = details.get("topic") or details.get("key")
        label = {
            "sleep": f"sleep {details['seconds']} s" if "seconds" in details else "sleep",
            "wait": f"wait for {subject}" if subject else "wait",
            "send": f"send {subject}" if subject else "send",
            "event": f"event {subject}" if subject else "event",
            "stream": f"stream {subject}" if subject else "stream",
        }[node_type]
        self.emit(
            f"{node_type}-L{call.lineno}", node_type, short(str(label), 40), call.lineno,
            self._sited(call, details),
        )  # fmt: skip

    def _sited(self, call: ast.Call, details: dict[str, Any]) -> dict[str, Any]:
        """``details`` with the call's ``site`` when it is drawn inside an inlined helper."""
        if self._sites:
            details["site"] = [*self._sites, call.lineno]
        return details

    def _unresolved(self, call: ast.Call, func: ast.expr, reason: str) -> None:
        label = short(self.text.of(func), 40)
        self.emit(
            f"unresolved-L{call.lineno}", "unresolved", label, call.lineno, {"reason": reason}
        )

    def _adapter(self, kind: str, call: ast.Call) -> None:
        label, base, details = adapter_spec(kind, call, self.index, self.text)
        self.emit(base, kind, label, call.lineno, self._sited(call, details))

    def _function(self, function: Function, call: ast.Call, via: str | None) -> None:
        if any(frame.function is function.node for frame in self.frames):
            self.recursions += 1
            self._unresolved(
                call,
                call.func,
                f"recursive call to {function.node.name}(); the graph draws its body once",
            )
            return
        if function.role == "helper":
            self._inline(function, call)
            return
        details = dict(function.details)
        if via is not None:
            details["via"] = via
        node_id = self.emit(
            id_base(function.role, function.label),
            function.role,
            function.label,
            call.lineno,
            self._sited(call, details),
        )
        if function.role == "step":
            self._attach(node_id, function)
        elif function.role == "workflow":
            self._child(node_id, function, call, started=via is not None)

    def _child(self, node_id: str, function: Function, call: ast.Call, *, started: bool) -> None:
        """A child workflow's body drawn after its node, each node it draws attributed to it
        (``in_workflow``). A child started or enqueued runs from DBOS's own frames, so the call
        sites recorded in it start in its body; one called directly has its caller's line."""
        body = function.node
        self.inlined_lines += (body.end_lineno or body.lineno) - body.lineno + 1
        if self.inlined_lines > self.inline_budget:
            self.unexpanded += 1  # children of children drawn twice over: as helpers, a limit
            return
        first, sites = len(self.nodes), self._sites
        self._sites = [] if started else [*sites, call.lineno]
        frame = Frame(function.node, Scope(), [])
        self.frames.append(frame)
        try:
            self.block(function.node.body)
        finally:
            self.frames.pop()
            self._sites = sites
        self.frontier = merge(frame.returns or [], self.frontier)
        for node in self.nodes[first:]:
            node.details.setdefault("in_workflow", node_id)

    def _run_step(self, method: str, call: ast.Call) -> None:
        """``DBOS.run_step[_async](options, fn, *args)``: a step node for ``fn``, named as DBOS
        records it (the options' ``name``, else the function's)."""
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        options = call.args[0] if call.args else kw.get("dbos_step_options")
        fn = call.args[1] if len(call.args) > 1 else kw.get("func")
        for arg in call.args[2:]:
            self.expr(arg)
        for key, value in kw.items():
            if key not in ("dbos_step_options", "func"):
                self.expr(value)
        given = literal(options) if options is not None else None
        name = given.get("name") if isinstance(given, dict) else None
        function = resolve_function(fn, self.frames[-1].scope, self.index) if fn else None
        details: dict[str, Any] = {"via": f"DBOS.{method}"}
        if function is not None:
            details.update({k: v for k, v in function.details.items() if k != "name"})
        elif fn is not None:
            details["function"] = self.text.of(fn)
        label = name if isinstance(name, str) and name else None
        if label is None and function is not None:
            label = function.node.name
        elif label is None and fn is not None:
            label = "<lambda>" if isinstance(fn, ast.Lambda) else short(self.text.of(fn), 40)
        label = label or "step"
        details["name"] = label
        node_id = self.emit(
            id_base("step", label), "step", short(label), call.lineno, self._sited(call, details)
        )
        if function is not None:
            self._attach(node_id, function)

    def _inline(self, function: Function, call: ast.Call) -> None:
        if id(function.node) in self._inert:
            return
        node = function.node
        self.inlined_lines += (node.end_lineno or node.lineno) - node.lineno + 1
        if self.inlined_lines > self.inline_budget:
            # helpers calling helpers twice over would draw 2**depth copies: the graph stops
            # growing where a drawing stops being readable, and says so
            self.unexpanded += 1
            reason = f"{node.name}() is not drawn again: the graph inlines helpers up to a limit"
            self._unresolved(call, call.func, reason)
            return
        caller = self.frames[-1].scope
        scope = Scope()
        arguments = function.node.args
        params = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
        pairs = list(zip(params, call.args, strict=False))
        pairs += [(k.arg, k.value) for k in call.keywords if k.arg]
        for param, arg in pairs:
            if isinstance(arg, ast.Starred):
                break
            if not isinstance(arg, ast.Name):
                continue
            if arg.id in caller.ctx:
                scope.ctx.add(param)
            elif arg.id in caller.lambdas:
                scope.lambdas.add(param)
            elif (bound := resolve_function(arg, caller, self.index)) is not None:
                scope.functions[param] = bound
        mark, recursions = self.mark(), self.recursions
        frame = Frame(function.node, scope, [])
        self.frames.append(frame)
        self._sites.append(call.lineno)
        self.block(function.node.body)
        self._sites.pop()
        self.frames.pop()
        self.frontier = merge(frame.returns or [], self.frontier)
        # a helper whose only calls are back into itself (a recursive data walk) draws nothing
        if self.content - self.recursions == mark.content - recursions:
            self.rollback(mark)
            self.recursions = recursions
            if not (scope.ctx or scope.lambdas or scope.functions):
                self._inert.add(id(function.node))

    def _ctx(self, method: str, call: ast.Call) -> None:
        if method in ("call_agent", "call_mcp", "vault"):
            self._adapter({"call_agent": "agent", "call_mcp": "mcp"}.get(method, method), call)
            return
        if method != "step":
            return
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        name_node = kw.get("name") or (call.args[0] if call.args else None)
        fn_node = (
            kw.get("function") or kw.get("fn") or (call.args[1] if len(call.args) > 1 else None)
        )
        function = resolve_function(fn_node, self.frames[-1].scope, self.index) if fn_node else None
        name = literal(name_node) if name_node is not None else MISSING
        label = (
            name if isinstance(name, str) and name else (function.node.name if function else "step")
        )
        details: dict[str, Any] = {"name": label, "legacy": True}
        if function is not None:
            details.update({k: v for k, v in function.details.items() if k != "name"})
        elif fn_node is not None:
            details["function"] = self.text.of(fn_node)
        replay_safe = literal(kw["replay_safe"]) if "replay_safe" in kw else MISSING
        if replay_safe is not MISSING:
            details["replay_safe"] = replay_safe
        node_id = self.emit(
            id_base("step", label), "step", label, call.lineno, self._sited(call, details)
        )
        if function is not None:
            self._attach(node_id, function)

    def _attach(self, step_id: str, function: Function) -> None:
        for spec in self._attached(function):
            details = {"in_step": step_id, **spec.details}
            self.attach(step_id, spec.base, spec.type, spec.label, spec.line, details)

    def _hint_lines(self, node: ast.AST) -> set[int] | None:
        """Lines of ``node`` naming an adapter, tool or helper (None: no source, look at all)."""
        if self._hint is None:
            return set()
        if self.text.lines is None:
            return None
        first: int = getattr(node, "lineno", 1)
        if self._words is not None:
            last: int = getattr(node, "end_lineno", None) or first
            words = self._words
            return {
                first + i
                for i, line in enumerate(self.text.lines[first - 1 : last])
                if not words.isdisjoint(_WORD.findall(line))
            }
        span = self.text.span(node)
        lines, at, line = set(), 0, first
        for match in self._hint.finditer(span):
            line += span.count("\n", at, match.start())
            at = match.start()
            lines.add(line)
        return lines

    def _attached(self, function: Function) -> list[_Attached]:
        """The adapter and tool calls a step body makes, through the helpers it calls."""
        key = id(function.node)
        found = self._attached_cache.get(key)
        if found is not None:
            return found
        found = self._attached_cache[key] = []  # also the guard against recursive helpers
        lines = self._hint_lines(function.node)
        if lines is not None and not lines:
            return found
        for call in _calls_in(function.node.body, lines):
            target = resolve_call(call, _NO_NAMES, self.index, self.text, awaited=False)
            if target.kind == "adapter":
                label, base, details = adapter_spec(target.name, call, self.index, self.text)
                found.append(_Attached(target.name, base, label, call.lineno, details))
            elif target.function is not None and target.function.role == "tool":
                tool = target.function
                found.append(
                    _Attached(
                        "tool",
                        id_base("tool", tool.label),
                        tool.label,
                        call.lineno,
                        dict(tool.details),
                    )
                )
            elif target.function is not None and target.function.role == "helper":
                found.extend(self._attached(target.function))
        return found


def _via(call: ast.Call, method: str) -> str:
    """How a child workflow is started: ``DBOS.start_workflow_async``, ``queue.enqueue``..."""
    func = call.func
    if method in ("enqueue", "enqueue_async") and isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else "queue"
        return f"{owner}.{method}"
    return f"DBOS.{method}"


def _no_parse_note(exc: SyntaxError | ValueError) -> str:
    where = ""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        where = f" (line {exc.lineno}, column {exc.offset or 1})"
    reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return f"The relay source does not parse{where}: {reason}; fix it to see its flow graph."


def build_flow_graph(source: str | ast.Module, *, relay: str | None = None) -> FlowGraph:
    """The static flow graph of a relay's source (no layout); never raises on any text.

    Unparsable source gives a graph without nodes and a note saying where it fails; a module
    without a ``run`` entrypoint gives just an input and an output node and a note.
    """
    with gc_paused():  # the tree and the graph have no cycles to collect
        return _build_flow_graph(source, relay)


def _build_flow_graph(source: str | ast.Module, relay: str | None) -> FlowGraph:
    graph = FlowGraph(relay=relay, kind="flow")
    if isinstance(source, ast.Module):
        module, text = source, SourceText(None)
    else:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. SyntaxWarning: admission reports problems
                module = ast.parse(source)
        except (SyntaxError, ValueError) as exc:
            graph.notes.append(_no_parse_note(exc))
            return graph
        except (RecursionError, MemoryError):
            graph.notes.append(
                "The relay source nests too deeply to parse; flatten it to see its flow graph."
            )
            return graph
        text = SourceText(source)
    index = ModuleIndex(module)
    entry = index.functions.get("run")
    if entry is None or entry.node is not index.nodes.get("run"):
        graph.nodes = [Node("input", "input", "input"), Node(OUTPUT, "output", "output")]
        graph.notes.append(
            "The relay defines no module-level `run` entrypoint, so there is no flow to draw; "
            "define `@DBOS.workflow() async def run(INPUT)`."
        )
        return graph
    builder = _FlowBuilder(index, text)
    builder.agents = find_framework_agents(module, index, text)
    try:
        graph.notes.extend(builder.draw(entry))
    except RecursionError:
        graph.notes.append(
            "The relay nests too deeply to draw its flow; flatten it to see the graph."
        )
        return graph
    graph.nodes, graph.edges = builder.nodes, builder.edges
    if builder.unexpanded:
        graph.notes.append(
            f"Helpers are drawn at each call up to {builder.inline_budget:,} lines in all; "
            f"{builder.unexpanded} later helper calls are shown as unresolved nodes."
        )
    assign_guarantees(graph, module)
    unresolved = sum(1 for node in graph.nodes if node.type == "unresolved")
    if unresolved == 1:
        graph.notes.append("1 call could not be followed; it is shown as an unresolved node.")
    elif unresolved:
        graph.notes.append(
            f"{unresolved} calls could not be followed; they are shown as unresolved nodes."
        )
    return graph
