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
from relay_notebook.source.calls import DURABLE_CALLS, DURABLE_NAMES, resolve_call
from relay_notebook.source.control import OUTPUT, ControlFlow, Frame
from relay_notebook.source.frontier import merge
from relay_notebook.source.graph import FlowGraph, Node
from relay_notebook.source.guarantees import assign_guarantees
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
        names = [n for n, q in index.imports.items() if q.split(".")[0] == "agentworks"]
        names += [n for n, f in index.named.items() if index.role(f)[0] in ("tool", "helper")]
        pattern = r"\b(?:" + "|".join(map(re.escape, names)) + r")\b"
        # only the parts of a step body whose text names an adapter, tool or helper are walked
        self._hint = re.compile(pattern) if names else None

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
            self._gather(call)
            return
        if target.kind in ("to_thread", "start") and call.args:
            for arg in call.args[1:]:
                self.expr(arg)
            for keyword in call.keywords:
                self.expr(keyword.value)
            reference = ast.Call(func=call.args[0], args=[], keywords=[])
            inner = resolve_call(reference, scope, self.index, self.text, awaited=True)
            via = "asyncio.to_thread" if target.kind == "to_thread" else f"DBOS.{target.name}"
            if inner.kind == "function" and inner.function is not None:
                self._function(inner.function, call, via)
            elif inner.kind == "unresolved":
                self._unresolved(call, call.args[0], inner.reason)
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
            self._unresolved(call, call.func, target.reason)

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

    def _inline(self, function: Function, call: ast.Call) -> None:
        if id(function.node) in self._inert:
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
        span = self.text.span(node)
        return {first + span.count("\n", 0, m.start()) for m in self._hint.finditer(span)}

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
    try:
        graph.notes.extend(builder.draw(entry))
    except RecursionError:
        graph.notes.append(
            "The relay nests too deeply to draw its flow; flatten it to see the graph."
        )
        return graph
    graph.nodes, graph.edges = builder.nodes, builder.edges
    assign_guarantees(graph, module)
    unresolved = sum(1 for node in graph.nodes if node.type == "unresolved")
    if unresolved == 1:
        graph.notes.append("1 call could not be followed; it is shown as an unresolved node.")
    elif unresolved:
        graph.notes.append(
            f"{unresolved} calls could not be followed; they are shown as unresolved nodes."
        )
    return graph
