"""The missing-await lint: an async step, workflow or helper called in a workflow body without
``await``.

Design note: ``value = fetch(x)`` where ``fetch`` is an ``async`` step passes every other
check, and the run then fails far from the mistake (DBOS cannot pickle the coroutine it was
handed, or the relay compares one with a number). The call is fine wherever the coroutine is
handed on to be awaited: awaited at once, passed to a call (``asyncio.gather``,
``create_task``, ``DBOS.start_workflow_async``), inside a list, tuple or comprehension that is
passed to a call, returned by a helper (its caller awaits it), or assigned to a name the body
later awaits or passes to a call (``fast = fetch(x)`` then ``DBOS.asyncio_wait([fast, slow])``).
Anywhere else — assigned to a name never handed on, used in an expression, a statement of its
own, returned by a workflow — it is a warning with the line and the fix. Step and tool bodies
are not checked: what they do with coroutines is their own business.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from typing import Final

from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic

__all__ = ["CODE", "DESCRIPTION", "missing_awaits"]

CODE: Final = codes.MISSING_AWAIT.code
DESCRIPTION: Final = codes.MISSING_AWAIT.meaning

_BUILTINS: Final = frozenset(dir(builtins))
# containers a coroutine can sit in on its way to the call that takes it
_CONTAINERS: Final = (
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Starred,
    ast.ListComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.IfExp,
)


def _parents(fn: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    stack = [fn]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


def _taker(node: ast.AST, parents: dict[int, ast.AST]) -> tuple[ast.AST, ast.AST | None]:
    """Where the value of ``node`` goes, past the containers it sits in: (the outermost
    container or ``node``, the node that takes it)."""
    parent = parents.get(id(node))
    while isinstance(parent, _CONTAINERS) and not (
        isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp) and parent.elt is not node
    ):
        node, parent = parent, parents.get(id(parent))
    return node, parent


def _takes(node: ast.AST, parent: ast.AST | None) -> bool:
    """Whether ``parent`` awaits ``node`` or hands it to a call that will."""
    if isinstance(parent, ast.Await | ast.keyword | ast.Lambda):
        return True
    return isinstance(parent, ast.Call) and node is not parent.func  # gather, asyncio_wait...


def _handed_on(
    call: ast.Call, parents: dict[int, ast.AST], workflow: bool, later: set[str]
) -> bool:
    """Whether the coroutine ``call`` makes reaches something that will await it; ``later``:
    the names the body awaits or hands to a call (``fast = fetch(x)`` ...
    ``await DBOS.asyncio_wait([fast, slow])``)."""
    if isinstance(parents.get(id(call)), ast.Await):
        return True
    node, parent = _taker(call, parents)
    if _takes(node, parent):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        return isinstance(target, ast.Name) and target.id in later
    return isinstance(parent, ast.Return) and not workflow


def _handed_names(fn: ast.AST, parents: dict[int, ast.AST]) -> set[str]:
    """The names ``fn``'s body awaits or passes to a call (alone or in a collection)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            outer, parent = _taker(node, parents)
            builtin = isinstance(parent, ast.Call) and _builtin(parent.func)
            if _takes(outer, parent) and not builtin:
                names.add(node.id)
    return names


def _builtin(func: ast.expr) -> bool:
    """``str``, ``print``, ``len``...: a builtin never awaits what it is given."""
    return isinstance(func, ast.Name) and func.id in _BUILTINS


def _bodies(
    tree: ast.Module, exempt: set[str], workflows: set[str]
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name not in exempt:
            yield stmt, stmt.name in workflows


def missing_awaits(
    tree: ast.Module,
    *,
    steps: set[str],
    workflows: set[str],
    exempt: set[str],
    file: str = "relay.py",
) -> list[Diagnostic]:
    """Warnings for calls of the module's async functions that nothing awaits.

    ``steps`` and ``workflows`` name the module's step and workflow functions, ``exempt`` the
    functions whose bodies are not workflow code (steps, tools).
    """
    coroutines = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.AsyncFunctionDef)}
    out: list[Diagnostic] = []
    for fn, is_workflow in _bodies(tree, exempt, workflows):
        parents = _parents(fn)
        later: set[str] | None = None
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            name = node.func.id
            if name not in coroutines:
                continue
            if later is None:
                later = _handed_names(fn, parents)
            if _handed_on(node, parents, is_workflow, later):
                continue
            kind = "step" if name in steps else "workflow" if name in workflows else "helper"
            out.append(
                Diagnostic(
                    node.lineno,
                    node.col_offset,
                    CODE,
                    f"`{name}(...)` calls the async {kind} `{name}` without `await`, so "
                    f"`{fn.name}` gets a coroutine instead of its result (DBOS then fails "
                    f"with \"cannot pickle 'coroutine' object\"): write `await {name}(...)`, "
                    f"or hand it to asyncio.gather(...).",
                    "warning",
                    file,
                )
            )
    return out
