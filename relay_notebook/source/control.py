"""Control flow of the flow graph: how branches, loops, try, match and gather shape the frontier.

Design note: each statement is visited once, in source order. ``if``/``match`` and conditional
expressions open a decision whose branches start from it with the condition (or pattern) text
as the edge label; loops open a loop node that the end of the body and ``continue`` go back
to and that ``break`` and the "done" edge leave; ``try`` opens a node whose ``except`` handlers
leave it with a labelled edge; ``asyncio.gather`` opens a parallel node with one branch per
awaitable. Each of them is settled against a ``Mark`` so that nothing is drawn for control
flow around plain data handling. Expression trees are walked with an explicit stack so long
operator chains cannot exhaust the interpreter stack.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from relay_notebook.source.frontier import GraphBuilder, Pending, merge
from relay_notebook.source.module_index import (
    FunctionNode,
    ModuleIndex,
    Scope,
    register_import,
    resolve_function,
)
from relay_notebook.source.source_text import SourceText, short

__all__ = ["ControlFlow", "Frame"]

OUTPUT: Final = "output"
_COMPREHENSIONS: Final = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp


@dataclass
class _Loop:
    node: str
    breaks: list[Pending] = field(default_factory=list)


@dataclass
class Frame:
    """One function body being drawn: ``run`` or an inlined helper."""

    function: FunctionNode
    scope: Scope
    returns: list[Pending] | None  # None: a return ends the run (joins the output node)
    loops: list[_Loop] = field(default_factory=list)
    #: names bound to coroutines not yet run (``fast = fetch(x)``): drawn where they are used
    deferred: dict[str, ast.expr] = field(default_factory=dict)


def _irrefutable(pattern: ast.pattern) -> bool:
    if isinstance(pattern, ast.MatchAs):
        return pattern.pattern is None or _irrefutable(pattern.pattern)
    return isinstance(pattern, ast.MatchOr) and any(_irrefutable(p) for p in pattern.patterns)


class ControlFlow(GraphBuilder):
    """Draws statements and expressions; subclasses decide what a call draws (``call``)."""

    def __init__(self, index: ModuleIndex, text: SourceText) -> None:
        super().__init__()
        self.index = index
        self.text = text
        self.frames: list[Frame] = []
        self.return_lines: list[int] = []
        self._statements: dict[type[ast.stmt], Callable[[Any], None]] = {
            ast.Expr: lambda s: self.expr(s.value),
            ast.Assign: self._assign,
            ast.AnnAssign: self._assign,
            ast.AugAssign: lambda s: self.expr(s.value),
            ast.Return: self._return,
            ast.If: self._if,
            ast.For: self._for,
            ast.AsyncFor: self._for,
            ast.While: self._while,
            ast.Try: self._try,
            ast.TryStar: self._try,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.Match: self._match,
            ast.Break: self._break,
            ast.Continue: self._continue,
            ast.Raise: self._raise,
            ast.Assert: lambda s: self.expr(s.test),
            ast.FunctionDef: self._define,
            ast.AsyncFunctionDef: self._define,
            ast.Import: lambda s: register_import(s, self.frames[-1].scope.imports),
            ast.ImportFrom: lambda s: register_import(s, self.frames[-1].scope.imports),
        }

    def call(self, call: ast.Call, *, awaited: bool) -> None:
        """Draw what ``call`` does; the base class draws nothing."""

    def makes_coroutine(self, call: ast.Call) -> bool:
        """Whether ``call``, not awaited, only makes a coroutine of the module's (an async step,
        workflow or helper): nothing runs until it is awaited or handed to a fan-out."""
        return False

    def _coroutines(self, value: ast.expr) -> bool:
        """``value`` makes coroutines and runs nothing: ``fetch(x)``, ``[fetch(u) for u in us]``."""
        if isinstance(value, ast.ListComp | ast.GeneratorExp):
            value = value.elt
        return type(value) is ast.Call and self.makes_coroutine(value)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if not self.frontier:
                return  # unreachable after return, raise, break or continue
            handler = self._statements.get(type(stmt))
            if handler is not None:
                handler(stmt)

    def _assign(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        if stmt.value is None:
            return
        frame = self.frames[-1]
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and self._coroutines(stmt.value):
            frame.deferred[targets[0].id] = stmt.value  # runs where it is awaited or gathered
            return
        self.expr(stmt.value)
        scope = frame.scope
        for target in targets:
            if isinstance(target, ast.Name):
                name = target.id
                frame.deferred.pop(name, None)
                scope.functions.pop(name, None)
                scope.lambdas.discard(name)
                if isinstance(stmt.value, ast.Lambda):
                    scope.lambdas.add(name)
                elif isinstance(stmt.value, ast.Name):
                    found = resolve_function(stmt.value, scope, self.index)
                    if found is not None:
                        scope.functions[name] = found

    def _define(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        scope = self.frames[-1].scope
        scope.lambdas.discard(stmt.name)
        scope.functions[stmt.name] = self.index.describe(stmt)

    def _return(self, stmt: ast.Return) -> None:
        if stmt.value is not None:
            self.expr(stmt.value)
        frame = self.frames[-1]
        if frame.returns is None:
            self.join(self.frontier, OUTPUT)
            self.return_lines.append(stmt.lineno)
        else:
            frame.returns.extend(self.frontier)
        self.returns += 1
        self.frontier = []

    def _raise(self, stmt: ast.Raise) -> None:
        exc = stmt.exc
        # building the exception itself is not a call worth drawing; its arguments may be
        for part in (
            [*exc.args, *(k.value for k in exc.keywords)] if isinstance(exc, ast.Call) else [exc]
        ):
            if part is not None:
                self.expr(part)
        self.frontier = []

    def _break(self, stmt: ast.Break) -> None:
        loops = self.frames[-1].loops
        if loops:
            loops[-1].breaks.extend(self.frontier)
            self.jumps += 1
            self.frontier = []

    def _continue(self, stmt: ast.Continue) -> None:
        loops = self.frames[-1].loops
        if loops:
            self.join(self.frontier, loops[-1].node)
            self.jumps += 1
            self.frontier = []

    def _decision(self, test: ast.expr, line: int) -> tuple[str, str]:
        condition = self.text.of(test)
        label = short(condition)
        node_id = self.emit(
            f"decision-L{line}", "decision", label, line, {"condition": condition}, content=False
        )
        return node_id, label

    def _if(self, stmt: ast.If) -> None:
        body, orelse = stmt.body, stmt.orelse
        self._branch(stmt, lambda: self.block(body), lambda: self.block(orelse), jumps=True)

    def _branch(
        self,
        node: ast.If | ast.IfExp,
        then: Callable[[], None],
        otherwise: Callable[[], None],
        *,
        jumps: bool,
    ) -> None:
        """A decision on ``node.test``: ``then`` walked from its condition, ``otherwise`` from its
        else, the two joined after it (``jumps``: a branch may return, break or continue)."""
        self.expr(node.test)
        mark = self.mark()
        decision, label = self._decision(node.test, node.lineno)
        self.frontier = [(decision, label)]
        then()
        taken = self.frontier
        self.frontier = [(decision, "else")]
        otherwise()
        self.frontier = merge(taken, self.frontier)
        self.settle(mark, jumps=jumps)

    def _match(self, stmt: ast.Match) -> None:
        self.expr(stmt.subject)
        mark = self.mark()
        subject = self.text.of(stmt.subject)
        decision = self.emit(
            f"decision-L{stmt.lineno}",
            "decision",
            short(f"match {subject}"),
            stmt.lineno,
            {"subject": subject},
            content=False,
        )
        after: list[Pending] = []
        exhaustive = False
        for case in stmt.cases:
            label = self.text.of(case.pattern)
            if case.guard is not None:
                label = f"{label} if {self.text.of(case.guard)}"
            self.frontier = [(decision, short(label))]
            if case.guard is not None:
                self.expr(case.guard)
            self.block(case.body)
            after = merge(after, self.frontier)
            exhaustive = exhaustive or (case.guard is None and _irrefutable(case.pattern))
        if not exhaustive:
            after = merge(after, [(decision, "no match")])
        self.frontier = after
        self.settle(mark, jumps=True)

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, header: str, exits: bool) -> None:
        mark = self.mark()
        loop = _Loop(
            self.emit(
                f"loop-L{stmt.lineno}",
                "loop",
                short(header),
                stmt.lineno,
                {"header": header},
                content=False,
            )
        )
        frame = self.frames[-1]
        frame.loops.append(loop)
        self.block(stmt.body)
        self.join(self.frontier, loop.node)
        frame.loops.pop()
        self.frontier = [(loop.node, "done")] if exits else []
        self.block(stmt.orelse)
        self.frontier = merge(self.frontier, loop.breaks)
        self.settle(mark, jumps=False)

    def _for(self, stmt: ast.For | ast.AsyncFor) -> None:
        self.expr(stmt.iter)
        keyword = "async for" if isinstance(stmt, ast.AsyncFor) else "for"
        header = f"{keyword} {self.text.of(stmt.target)} in {self.text.of(stmt.iter)}"
        self._loop(stmt, header, exits=True)

    def _while(self, stmt: ast.While) -> None:
        self.expr(stmt.test)
        forever = isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        self._loop(stmt, f"while {self.text.of(stmt.test)}", exits=not forever)

    def _try(self, stmt: ast.Try | ast.TryStar) -> None:
        mark = self.mark()
        handlers = [self.text.of(h.type) if h.type else "" for h in stmt.handlers]
        details: dict[str, Any] = {"handlers": handlers}
        if stmt.finalbody:
            details["finally"] = True
        node = self.emit(f"try-L{stmt.lineno}", "try", "try", stmt.lineno, details, content=False)
        self.block(stmt.body)
        self.block(stmt.orelse)
        after = self.frontier
        keyword = "except*" if isinstance(stmt, ast.TryStar) else "except"
        for handler, caught in zip(stmt.handlers, handlers, strict=True):
            self.frontier = [(node, short(f"{keyword} {caught}" if caught else keyword))]
            self.block(handler.body)
            after = merge(after, self.frontier)
        if stmt.finalbody:
            self.frontier = after or [(node, "finally")]
            self.block(stmt.finalbody)
            if not after:
                self.frontier = []
        else:
            self.frontier = after
        self.settle(mark, jumps=True)

    def _with(self, stmt: ast.With | ast.AsyncWith) -> None:
        for item in stmt.items:
            self.expr(item.context_expr)
        self.block(stmt.body)

    def expr(self, root: ast.expr) -> None:
        stack: list[ast.AST] = [root]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Name:
                deferred = self.frames[-1].deferred if self.frames else None
                if deferred:
                    made = deferred.pop(cast(ast.Name, node).id, None)
                    if made is not None:
                        self._run_deferred(made)  # the coroutines made earlier run here
                continue
            if kind is ast.Constant or kind is ast.Lambda:
                continue
            if isinstance(node, ast.Call):
                self.call(node, awaited=False)
            elif isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
                self.call(node.value, awaited=True)
            elif isinstance(node, ast.IfExp):
                self._ifexp(node)
            elif isinstance(node, _COMPREHENSIONS):
                self._comprehension(node)
            else:
                children = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
                stack.extend(reversed(children))

    def _run_deferred(self, value: ast.expr) -> None:
        """Draw coroutines made earlier where they are run: one call, or a comprehension's."""
        if isinstance(value, ast.ListComp | ast.GeneratorExp):
            self._comprehension(value)
        else:
            self.expr(value)

    def _ifexp(self, node: ast.IfExp) -> None:
        body, orelse = node.body, node.orelse
        self._branch(node, lambda: self.expr(body), lambda: self.expr(orelse), jumps=False)

    def _comprehension_body(self, node: Comprehension, skip_first: bool) -> None:
        for i, generator in enumerate(node.generators):
            if i or not skip_first:
                self.expr(generator.iter)
            for condition in generator.ifs:
                self.expr(condition)
        if isinstance(node, ast.DictComp):
            self.expr(node.key)
            self.expr(node.value)
        else:
            self.expr(node.elt)

    def _comprehension(self, node: Comprehension) -> None:
        first = node.generators[0]
        self.expr(first.iter)
        mark = self.mark()
        header = f"for {self.text.of(first.target)} in {self.text.of(first.iter)}"
        loop = self.emit(
            f"loop-L{node.lineno}",
            "loop",
            short(header),
            node.lineno,
            {"header": header},
            content=False,
        )
        self._comprehension_body(node, skip_first=True)
        self.join(self.frontier, loop)
        self.frontier = [(loop, "done")]
        self.settle(mark, jumps=False)

    def _branches(self, call: ast.Call, label: str) -> list[ast.expr]:
        """The awaitables a fan-out runs side by side: ``gather``'s arguments, the items of the
        collection ``asyncio.wait`` / ``DBOS.asyncio_wait`` takes (a comprehension starred)."""
        if label == "gather":
            return list(call.args)
        if not call.args:
            return []
        first = call.args[0]
        deferred = self.frames[-1].deferred
        if isinstance(first, ast.Name) and first.id in deferred:
            first = deferred.pop(first.id)
        if isinstance(first, ast.List | ast.Tuple | ast.Set):
            return list(first.elts)
        if isinstance(first, _COMPREHENSIONS):
            return [ast.Starred(value=first, ctx=ast.Load())]
        return [first, *call.args[1:]]

    def _gather(self, call: ast.Call, label: str = "gather") -> None:
        mark = self.mark()
        parallel = self.emit(
            f"parallel-L{call.lineno}", "parallel", label, call.lineno, {}, content=False
        )
        start: list[Pending] = [(parallel, None)]
        after: list[Pending] = []
        deferred = self.frames[-1].deferred
        for arg in self._branches(call, label):
            self.frontier = start
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
                arg = ast.Starred(value=deferred.pop(arg.value.id, arg.value), ctx=ast.Load())
            if isinstance(arg, ast.Starred) and isinstance(arg.value, _COMPREHENSIONS):
                first = len(self.nodes)
                self._comprehension_body(arg.value, skip_first=False)
                note = f"one per item of {short(self.text.of(arg.value.generators[0].iter))}"
                for node in self.nodes[first:]:
                    node.details["note"] = note
            else:
                self.expr(arg)
            after = merge(after, self.frontier)
        for keyword in call.keywords:
            self.expr(keyword.value)
        self.frontier = after or start
        self.settle(mark, jumps=False)
