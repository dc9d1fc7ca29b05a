"""Call resolution for the flow graph: what a call in a relay's source refers to, from the AST.

Design note: the flow graph must say what it cannot see rather than guess, yet stay quiet
about ordinary data handling. The rule: a call becomes a node when its target is one of this
module's functions (a step, a workflow, a ``@tool``, or a helper that is inlined), an
``agentworks`` adapter, or a legacy ``ctx`` operation. It becomes an *unresolved* node when the
target is imported from a module other than the standard library, ``dbos`` and ``agentworks``;
when it is a name the module cannot resolve (a variable, a parameter, a lambda); when it is
picked at run time (``handlers[kind](x)``, ``getattr(o, n)(x)``, ``make()(x)``); when it is a
method of a module-level object built by a call (``client.post(...)``); or when it is awaited
and nothing above explains it (``await conn.fetch()``). Everything else is inert and drawn as
nothing: builtins, standard-library functions, ``dbos``/``agentworks`` helpers other than the
adapters, module classes and imported CapWords names called without ``await`` (building data),
and plain method calls on local data (``items.append``, ``INPUT.get``).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Final, Literal

from relay_notebook.source.module_index import BUILTINS, DBOS_CLASS, Function, ModuleIndex, Scope
from relay_notebook.source.source_text import SourceText, short

__all__ = [
    "ADAPTERS",
    "DURABLE_CALLS",
    "DURABLE_NAMES",
    "FAN_OUTS",
    "INERT",
    "STARTERS",
    "STEP_RUNNERS",
    "Target",
    "resolve_call",
]

#: agentworks functions drawn as typed nodes when called (``tool`` is drawn at ``@tool`` calls)
ADAPTERS: Final = frozenset({"agent", "mcp", "vault", "admit"})
_INERT_ROOTS: Final = frozenset(sys.stdlib_module_names) | {"dbos", "agentworks"}
#: what starts a child workflow without awaiting it: the position of the workflow argument
STARTERS: Final[dict[str, int]] = {
    "start_workflow": 0,
    "start_workflow_async": 0,
    "enqueue_workflow": 1,
    "enqueue_workflow_async": 1,
    # methods of a queue (``queue = DBOS.register_queue(...)``)
    "enqueue": 0,
    "enqueue_async": 0,
}
#: DBOS's calls that run a function as a step: ``DBOS.run_step[_async](options, fn, ...)``
STEP_RUNNERS: Final = frozenset({"run_step", "run_step_async"})
#: what waits on several awaitables at once, drawn as parallel branches (by its label)
FAN_OUTS: Final[dict[str, str]] = {
    "asyncio.gather": "gather",
    "asyncio.wait": "wait",
    f"{DBOS_CLASS}.asyncio_wait": "wait",
}
#: methods of a workflow handle: waiting on a child already drawn where it was started
_HANDLE_METHODS: Final = frozenset({"get_result", "get_status", "get_workflow_id"})
#: what a workflow body hands to DBOS itself, recorded once in its history: node type by method
DURABLE_CALLS: Final[dict[str, str]] = {
    "sleep": "sleep",
    "recv": "wait",
    "get_event": "wait",
    "send": "send",
    "set_event": "event",
    "write_stream": "stream",
}
#: the name DBOS records each durable call under (``operation_outputs.function_name``)
DURABLE_NAMES: Final[dict[str, str]] = {
    "sleep": "DBOS.sleep",
    "recv": "DBOS.recv",
    "get_event": "DBOS.getEvent",
    "send": "DBOS.send",
    "set_event": "DBOS.setEvent",
    "write_stream": "DBOS.writeStream",
}


@dataclass(frozen=True)
class Target:
    """What a call refers to. ``kind`` picks the drawing; the other fields carry its subject."""

    kind: Literal[
        "function",
        "adapter",
        "ctx",
        "gather",
        "to_thread",
        "start",
        "run_step",
        "durable",
        "unresolved",
        "inert",
    ]
    function: Function | None = None
    name: str = ""
    reason: str = ""


INERT: Final = Target("inert")


def _qualified(name: str, text: str, awaited: bool) -> Target:
    if name in FAN_OUTS:
        return Target("gather", name=FAN_OUTS[name])
    if name == "asyncio.to_thread":
        return Target("to_thread")
    method = name[len(DBOS_CLASS) + 1 :] if name.startswith(f"{DBOS_CLASS}.") else ""
    if method.removesuffix("_async") in ("start_workflow", "enqueue_workflow"):
        return Target("start", name=method)
    if method in STEP_RUNNERS:
        return Target("run_step", name=method)
    if (
        name.startswith(f"{DBOS_CLASS}.")
        and name[len(DBOS_CLASS) + 1 :].removesuffix("_async") in DURABLE_CALLS
    ):
        return Target("durable", name=name[len(DBOS_CLASS) + 1 :].removesuffix("_async"))
    if name.startswith("agentworks.") and name[11:] in ADAPTERS:
        return Target("adapter", name=name[11:])
    if name.split(".")[0] in _INERT_ROOTS:
        return INERT
    if name.rsplit(".", 1)[-1][:1].isupper() and not awaited:
        return INERT  # a CapWords name is a class by convention: building data, not a call out
    module = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return Target(
        "unresolved",
        reason=f"`{text}` is imported from {module}; the graph follows only this module's "
        "functions",
    )


def _unresolved(reason: str) -> Target:
    return Target("unresolved", reason=reason)


def resolve_call(
    call: ast.Call, scope: Scope, index: ModuleIndex, text: SourceText, awaited: bool
) -> Target:
    """What ``call`` refers to, under the rule in this module's design note."""
    func = call.func
    if isinstance(func, ast.Name):
        name = func.id
        if name in scope.functions:
            return Target("function", scope.functions[name])
        if name in scope.lambdas or (name in index.lambdas and name not in scope.imports):
            return _unresolved(f"`{name}` holds a lambda; the graph does not follow lambdas")
        qualified = index.qualify(func, scope) if name not in index.functions else None
        if qualified is not None:
            return _qualified(qualified, name, awaited)
        if name in index.functions:
            return Target("function", index.functions[name])
        if name in index.classes or name in BUILTINS:
            return INERT
        return _unresolved(
            f"`{name}` is a variable or parameter; the graph cannot tell which function it holds"
        )
    if isinstance(func, ast.Attribute):
        root: ast.expr = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            if root.id in scope.ctx:
                return Target("ctx", name=func.attr) if func.value is root else INERT
            qualified = index.qualify(func, scope)
            if qualified is not None:
                return _qualified(qualified, text.of(func), awaited)
            if (
                root.id in index.queues
                and func.value is root
                and func.attr in STARTERS
                and root.id not in scope.functions
            ):
                return Target("start", name=func.attr)
            if root.id in index.objects and root.id not in scope.functions:
                return _unresolved(
                    f"`{text.of(func)}` is a method of `{root.id}`, a module-level object the "
                    "graph cannot follow"
                )
            if root.id in index.functions or root.id in index.classes:
                return INERT
        elif isinstance(root, ast.Constant):
            return INERT
        if func.attr in _HANDLE_METHODS:
            return INERT  # a workflow handle's result: the child is drawn where it started
        if awaited:
            return _unresolved(
                f"`{short(text.of(func))}` is a method of an object the graph cannot follow"
            )
        return INERT
    if isinstance(func, ast.Subscript):
        return _unresolved(
            f"`{short(text.of(func))}` picks a function from a container at run time; "
            "the graph cannot tell which one"
        )
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "getattr":
        return _unresolved(
            "the function is looked up by name with getattr at run time; "
            "the graph cannot tell which one"
        )
    if isinstance(func, ast.Lambda):
        return _unresolved("the call runs a lambda; the graph does not follow lambdas")
    return _unresolved("the function to call is computed at run time; the graph cannot follow it")
