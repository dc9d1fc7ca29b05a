"""The relay module's top level, indexed: imports, functions and their roles, classes, objects.

Only the module's top-level statements are indexed (no walk of the whole tree), conditional
blocks included (``TYPE_CHECKING``, ``ImportError`` fallbacks); a function is described (role,
label, details) on first use, since most are never reached from ``run``.
"""

from __future__ import annotations

import ast
import builtins
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from relay_notebook.source.source_text import MISSING, dotted_name, literal, short

__all__ = [
    "BUILTINS",
    "DBOS_CLASS",
    "Function",
    "FunctionNode",
    "ModuleIndex",
    "Scope",
    "register_import",
    "resolve_function",
]

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
Role = Literal["step", "workflow", "tool", "helper"]

BUILTINS: Final = frozenset(dir(builtins))
#: the one spelling of the DBOS class, however the module imports it
DBOS_CLASS: Final = "dbos.DBOS"
_QUEUE_MAKERS: Final = frozenset({f"{DBOS_CLASS}.register_queue", "dbos.Queue"})
_DATASOURCE_MAKERS: Final = frozenset(
    {"dbos.SQLAlchemyDatasource.create", "dbos.AsyncSQLAlchemyDatasource.create"}
)
_ROLES: Final[dict[str, Role]] = {
    f"{DBOS_CLASS}.step": "step",
    f"{DBOS_CLASS}.transaction": "step",
    f"{DBOS_CLASS}.workflow": "workflow",
    "agentworks.tool": "tool",
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
        #: module-level queues (``queue = DBOS.register_queue("q")``): their enqueues are drawn
        self.queues: set[str] = set()
        #: module-level datasources (``ds = SQLAlchemyDatasource.create(url)``)
        self.datasources: set[str] = set()
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
            isinstance(value.func, ast.Name) and value.func.id in BUILTINS
        ):
            self.objects.add(name)
            made = self.qualify(value.func)
            if made in _QUEUE_MAKERS:
                self.queues.add(name)
            elif made in _DATASOURCE_MAKERS:
                self.datasources.add(name)

    def qualify(self, expr: ast.expr, scope: Scope | None = None) -> str | None:
        """The dotted name ``expr`` spells through the imports, or None if it is not imported."""

        def resolve(name: str) -> str | None:
            root = (scope.imports.get(name) if scope else None) or self.imports.get(name)
            if root is None and name == "DBOS" and name not in self.nodes:
                return DBOS_CLASS
            return root

        return dotted_name(expr, resolve)

    def role(self, node: FunctionNode) -> tuple[Role, ast.Call | None]:
        """The role ``node``'s decorators give it, and the decorator call carrying options."""
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            found = _ROLES.get(self.qualify(call.func if call else deco) or "")
            if found is None and self.datasource_of(call.func if call else deco) is not None:
                found = "step"  # a datasource transaction: a step that commits with its checkpoint
            if found is not None:
                return found, call
        return "helper", None

    def datasource_of(self, decorator: ast.expr) -> str | None:
        """The module-level datasource ``decorator`` spells ``ds.transaction`` of, if any."""
        if (
            isinstance(decorator, ast.Attribute)
            and decorator.attr == "transaction"
            and isinstance(decorator.value, ast.Name)
            and decorator.value.id in self.datasources
        ):
            return decorator.value.id
        return None

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
        if role == "step" and self.datasources:
            for deco in node.decorator_list:
                source = self.datasource_of(deco.func if isinstance(deco, ast.Call) else deco)
                if source is not None:
                    details["transaction"] = source
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
