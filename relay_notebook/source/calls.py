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
Only the module's top-level statements are indexed (no walk of the whole tree).
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from relay_notebook.source.source_text import MISSING, SourceText, id_base, literal, short

__all__ = [
    "ADAPTERS",
    "Function",
    "FunctionNode",
    "ModuleIndex",
    "Scope",
    "Target",
    "adapter_spec",
    "register_import",
    "resolve_call",
    "resolve_function",
]

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
Role = Literal["step", "workflow", "tool", "helper"]

#: agentworks functions drawn as typed nodes when called (``tool`` is drawn at ``@tool`` calls)
ADAPTERS: Final = frozenset({"agent", "mcp", "vault", "admit"})
_BUILTINS: Final = frozenset(dir(builtins))
_INERT_ROOTS: Final = frozenset(sys.stdlib_module_names) | {"dbos", "agentworks"}
_DBOS: Final = "dbos.DBOS"
_ROLES: Final[dict[str, Role]] = {
    f"{_DBOS}.step": "step",
    f"{_DBOS}.transaction": "step",
    f"{_DBOS}.workflow": "workflow",
    "agentworks.tool": "tool",
}
_STARTERS: Final = frozenset({f"{_DBOS}.start_workflow", f"{_DBOS}.start_workflow_async"})
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
class Function:
    """A function of the module (or local to a body) and the role its decorators give it."""

    node: FunctionNode
    role: Role
    label: str
    details: dict[str, Any]


@dataclass
class Scope:
    """Names bound inside the body being drawn: local functions, lambdas, ctx, local imports."""

    functions: dict[str, Function] = field(default_factory=dict)
    lambdas: set[str] = field(default_factory=set)
    ctx: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)


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
        "durable",
        "unresolved",
        "inert",
    ]
    function: Function | None = None
    name: str = ""
    reason: str = ""


INERT: Final = Target("inert")


def register_import(stmt: ast.Import | ast.ImportFrom, into: dict[str, str]) -> None:
    """Record the names ``stmt`` binds in ``into``, each mapped to the dotted name it imports."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                into[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                into[root] = root
        return
    prefix = "." * stmt.level + (f"{stmt.module}." if stmt.module else "")
    for alias in stmt.names:
        if alias.name != "*":
            into[alias.asname or alias.name] = prefix + alias.name


class ModuleIndex:
    """The module's top level: imports, functions and their roles, classes, global objects."""

    def __init__(self, module: ast.Module) -> None:
        self.imports: dict[str, str] = {}
        self.nodes: dict[str, FunctionNode] = {}
        self.classes: set[str] = set()
        self.objects: set[str] = set()
        self.lambdas: set[str] = set()
        aliases: list[tuple[str, str]] = []
        pending: deque[ast.stmt] = deque(module.body)
        while pending:
            stmt = pending.popleft()
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                register_import(stmt, self.imports)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                self.nodes[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self._global(target.id, stmt.value, aliases)
            elif isinstance(stmt, ast.If | ast.Try | ast.TryStar):
                # conditional imports and definitions (TYPE_CHECKING, ImportError fallbacks)
                nested = [*stmt.body, *stmt.orelse]
                if not isinstance(stmt, ast.If):
                    nested += [s for h in stmt.handlers for s in h.body] + stmt.finalbody
                pending.extendleft(reversed(nested))
        #: module functions by name, module-level aliases (``handle = extract``) included
        self.named = dict(self.nodes)
        for name, original in aliases:
            if original in self.nodes:
                self.named[name] = self.nodes[original]
        self._described: dict[int, Function] = {}
        self.functions: Mapping[str, Function] = _Functions(self)

    def _global(self, name: str, value: ast.expr, aliases: list[tuple[str, str]]) -> None:
        self.nodes.pop(name, None)
        if isinstance(value, ast.Name):
            aliases.append((name, value.id))
        elif isinstance(value, ast.Lambda):
            self.lambdas.add(name)
        elif isinstance(value, ast.Call) and not (
            isinstance(value.func, ast.Name) and value.func.id in _BUILTINS
        ):
            self.objects.add(name)

    def qualify(self, expr: ast.expr, scope: Scope | None = None) -> str | None:
        """The dotted name ``expr`` spells through the imports, or None if it is not imported."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        root = (scope.imports.get(expr.id) if scope else None) or self.imports.get(expr.id)
        if root is None:
            if expr.id != "DBOS" or expr.id in self.nodes:
                return None
            root = _DBOS
        segments = [*root.split("."), *reversed(parts)]
        # dbos re-exports DBOS from private modules (dbos._dbos.DBOS): one canonical spelling
        if segments[0] == "dbos" and "DBOS" in segments:
            segments = ["dbos", *segments[segments.index("DBOS") :]]
        return ".".join(segments)

    def role(self, node: FunctionNode) -> tuple[Role, ast.Call | None]:
        """The role ``node``'s decorators give it, and the decorator call carrying options."""
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            found = _ROLES.get(self.qualify(call.func if call else deco) or "")
            if found is not None:
                return found, call
        return "helper", None

    def describe(self, node: FunctionNode) -> Function:
        """``node``'s role (from its decorators), display label and details."""
        known = self._described.get(id(node))
        if known is not None:
            return known
        role, call = self.role(node)
        kwargs: dict[str, Any] = {}
        for kw in call.keywords if call else ():
            value = literal(kw.value)
            if kw.arg and value is not MISSING:
                kwargs[kw.arg] = value
        name = kwargs.get("name")
        label = short(name) if isinstance(name, str) and name else node.name
        details: dict[str, Any] = {"function": node.name}
        if role != "helper":
            details["name"] = label
        details.update((k, v) for k, v in kwargs.items() if k != "name")
        doc = ast.get_docstring(node)
        if doc and doc.strip():
            details["doc"] = doc.strip().splitlines()[0]
        details["defined_at"] = node.lineno
        described = self._described[id(node)] = Function(node, role, label, details)
        return described


class _Functions(Mapping[str, Function]):
    """Module functions by name, described on first use: most are never reached from ``run``."""

    def __init__(self, index: ModuleIndex) -> None:
        self._index = index
        self.named = index.named

    def __getitem__(self, name: str) -> Function:
        return self._index.describe(self.named[name])

    def __contains__(self, name: object) -> bool:
        return name in self.named

    def __iter__(self) -> Iterator[str]:
        return iter(self.named)

    def __len__(self) -> int:
        return len(self.named)


def resolve_function(expr: ast.expr, scope: Scope, index: ModuleIndex) -> Function | None:
    """The module (or local) function a plain name refers to, if any."""
    if isinstance(expr, ast.Name):
        return scope.functions.get(expr.id) or index.functions.get(expr.id)
    return None


def _qualified(name: str, text: str, awaited: bool) -> Target:
    if name == "asyncio.gather":
        return Target("gather")
    if name == "asyncio.to_thread":
        return Target("to_thread")
    if name in _STARTERS:
        return Target("start", name=name.rsplit(".", 1)[1])
    if (
        name.startswith(f"{_DBOS}.")
        and name[len(_DBOS) + 1 :].removesuffix("_async") in DURABLE_CALLS
    ):
        return Target("durable", name=name[len(_DBOS) + 1 :].removesuffix("_async"))
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
        if name in index.classes or name in _BUILTINS:
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
            if root.id in index.objects and root.id not in scope.functions:
                return _unresolved(
                    f"`{text.of(func)}` is a method of `{root.id}`, a module-level object the "
                    "graph cannot follow"
                )
            if root.id in index.functions or root.id in index.classes:
                return INERT
        elif isinstance(root, ast.Constant):
            return INERT
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


def _names(node: ast.expr, index: ModuleIndex, text: SourceText) -> list[Any]:
    if not isinstance(node, ast.List | ast.Tuple):
        value = literal(node)
        return value if isinstance(value, list) else [text.of(node)]
    out: list[Any] = []
    for item in node.elts:
        if isinstance(item, ast.Name) and item.id in index.functions:
            out.append(index.functions[item.id].label)
        elif isinstance(item, ast.Constant) and isinstance(item.value, str):
            out.append(item.value)
        elif isinstance(item, ast.Dict):
            value = literal(item)
            out.append(
                value.get("server", text.of(item)) if isinstance(value, dict) else text.of(item)
            )
        else:
            out.append(text.of(item))
    return out


_AGENT_LITERALS: Final = (
    "name",
    "model",
    "system_prompt",
    "user_message",
    "messages",
    "skills",
    "max_turns",
    "recovery",
    "replay_safe",
)


def adapter_spec(
    kind: str, call: ast.Call, index: ModuleIndex, text: SourceText
) -> tuple[str, str, dict[str, Any]]:
    """The (label, id base, details) of an adapter call, from its literal arguments only."""
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    details: dict[str, Any] = {}

    def take(key: str, position: int | None = None) -> None:
        node = kw.get(key)
        if node is None and position is not None and position < len(call.args):
            node = call.args[position]
        value = literal(node) if node is not None else MISSING
        if value is not MISSING:
            details[key] = value

    if kind == "agent":
        for key in _AGENT_LITERALS:
            take(key)
        for key in ("tools", "mcp"):
            if key in kw:
                details[key] = _names(kw[key], index, text)
        if "output_schema" in kw:
            details["output_schema"] = True
        name = details.get("name")
        if isinstance(name, str) and name:
            return short(name), id_base("agent", name), details
        return "agent", "agent", details
    if kind == "mcp":
        take("server", 0)
        take("tool", 1)
        take("replay_safe")
        parts = [str(details[k]) for k in ("server", "tool") if isinstance(details.get(k), str)]
        return short("/".join(parts) or "mcp"), id_base("mcp", *parts), details
    if kind == "vault":
        take("name", 0)
        secret = details.pop("name", None)
        if isinstance(secret, str):
            details["secret"] = secret
            return short(secret), id_base("vault", secret), details
        return "vault", "vault", details
    for key, node in kw.items():
        value = literal(node)
        if value is not MISSING:
            details[key] = value
    return kind, kind, details
