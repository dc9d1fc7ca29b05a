"""The missing-await lint: an async step, workflow or helper called in a workflow body without
``await``.

Design note: ``value = fetch(x)`` where ``fetch`` is an ``async`` step passes every other
check, and the run then fails far from the mistake (DBOS cannot pickle the coroutine it was
handed, or the relay compares one with a number). The call is fine wherever the coroutine is
handed on to be awaited: awaited at once, passed to a call (``asyncio.gather``,
``create_task``, ``DBOS.start_workflow_async``), inside a list, tuple or comprehension that is
passed to a call, or returned by a helper (its caller awaits it). Anywhere else — assigned,
used in an expression, a statement of its own, returned by a workflow — it is a warning with
the line and the fix. Step and tool bodies are not checked: what they do with coroutines is
their own business.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Final

from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic

__all__ = ["CODE", "DESCRIPTION", "missing_awaits"]

CODE: Final = codes.MISSING_AWAIT.code
DESCRIPTION: Final = codes.MISSING_AWAIT.meaning

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


def _handed_on(call: ast.Call, parents: dict[int, ast.AST], workflow: bool) -> bool:
    """Whether the coroutine ``call`` makes reaches something that will await it."""
    node: ast.AST = call
    parent = parents.get(id(node))
    if isinstance(parent, ast.Await):
        return True
    while isinstance(parent, _CONTAINERS) and not (
        isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp) and parent.elt is not node
    ):
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.Call) and node is not parent.func:
        return True  # an argument: gather, create_task, start_workflow...
    if isinstance(parent, ast.keyword | ast.Lambda):
        return True
    return isinstance(parent, ast.Return) and not workflow


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
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            name = node.func.id
            if name not in coroutines or _handed_on(node, parents, is_workflow):
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
