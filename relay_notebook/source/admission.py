"""Admission: the errors that keep a relay from running or being published, from the AST alone."""

from __future__ import annotations

import ast
from typing import Final, Literal

from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source.lint import (
    DBOS_FORBIDDEN,
    STEP_DECORATORS,
    WORKFLOW_DECORATORS,
    Names,
    dotted,
    lint_source,
    module_functions,
    parse,
    statements,
)

__all__ = [
    "CODES",
    "EntrypointKind",
    "admit_source",
    "check_durability",
    "check_source",
    "entrypoint_kind",
]

EntrypointKind = Literal["workflow", "legacy"]

#: the admission errors: their meanings live in the registry (relay_notebook.errors.codes)
CODES: Final[dict[str, str]] = codes.meanings("admission")

_ENTRYPOINT: Final = "`@DBOS.workflow() async def run(INPUT)`"
_LEGACY: Final = "`run(INPUT, ctx)`"
_FORBIDDEN_WHY: Final[dict[str, str]] = {
    "dbos-launch-forbidden": "launches DBOS, but the runner launches DBOS for every attempt",
    "dbos-destroy-forbidden": "tears DBOS down, but the runner owns the DBOS lifecycle",
    "dbos-config-forbidden": (
        "configures DBOS, but the runner configures it for every run (database, version)"
    ),
}


def _error(node: ast.AST | None, code: str, message: str, file: str) -> Diagnostic:
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0)
    return Diagnostic(line, col, code, message, "error", file)


def _syntax_error(exc: SyntaxError, file: str) -> Diagnostic:
    line = max(exc.lineno or 1, 1)
    col = max((exc.offset or 1) - 1, 0)
    reason = exc.msg or "invalid syntax"
    message = f"Python cannot parse line {line} ({reason}): fix the syntax there and check again."
    return Diagnostic(line, col, "syntax-error", message, "error", file)


def _signature_text(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    try:
        text = ast.unparse(fn.args)
    except (RecursionError, ValueError):
        text = "..."
    return f"run({text if len(text) <= 60 else text[:57] + '...'})"


def _signature_extras(args: ast.arguments) -> list[str]:
    """What ``run``'s parameters have beyond plain positional names, in the user's words."""
    extras = []
    if args.vararg:
        extras.append(f"`*{args.vararg.arg}`")
    if args.kwonlyargs:
        extras.append("keyword-only parameters")
    if args.kwarg:
        extras.append(f"`**{args.kwarg.arg}`")
    if args.defaults or any(d is not None for d in args.kw_defaults):
        extras.append("default values")
    return extras


def _missing_entrypoint(tree: ast.Module, file: str) -> Diagnostic:
    fix = f"define {_ENTRYPOINT} at the top level of the relay (or a legacy {_LEGACY})"
    for stmt in tree.body:
        bound = isinstance(stmt, ast.ClassDef) and stmt.name == "run"
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.Import | ast.ImportFrom):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            targets += [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
            aliases = stmt.names if isinstance(stmt, ast.Import | ast.ImportFrom) else []
            bound = any(isinstance(t, ast.Name) and t.id == "run" for t in targets) or any(
                (a.asname or a.name) == "run" for a in aliases
            )
        if bound:
            message = f"`run` at line {stmt.lineno} is not a function defined here: {fix}."
            return _error(stmt, "missing-entrypoint", message, file)
    for node in statements(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "run":
            message = f"`run` at line {node.lineno} is nested inside another block: {fix}."
            return _error(node, "missing-entrypoint", message, file)
    return _error(None, "missing-entrypoint", f"The relay has no entrypoint: {fix}.", file)


def _check_entrypoint(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    defs = [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "run"
    ]
    if not defs:
        return [_missing_entrypoint(tree, file)]
    out = [
        _error(
            again,
            "duplicate-entrypoint",
            f"`run` is defined again at line {again.lineno} (first at line {defs[0].lineno}), "
            "and only the last definition counts: keep one `run` and rename or delete the others.",
            file,
        )
        for again in defs[1:]
    ]
    fn = defs[-1]
    decorators = names.decorator_names(fn)
    is_workflow = any(d in WORKFLOW_DECORATORS for d in decorators)
    is_async = isinstance(fn, ast.AsyncFunctionDef)
    count = len(fn.args.posonlyargs) + len(fn.args.args)
    got = _signature_text(fn)
    extras = _signature_extras(fn.args)
    if extras or count not in (1, 2):
        todo = f"remove the {' and '.join(extras)}" if extras and count in (1, 2) else ""
        message = (
            f"`run` must take plain positional parameters, expected {_ENTRYPOINT} (or the legacy "
            f"{_LEGACY}) but got `{got}`: {todo or 'change the parameters to `(INPUT)`'}."
        )
        out.append(_error(fn, "entrypoint-signature", message, file))
    elif count == 2 and is_workflow:
        message = (
            f"`{got}` is the legacy form, which the runner wraps in its own workflow, so it must "
            f"not be decorated @DBOS.workflow(): remove the decorator, or write {_ENTRYPOINT}."
        )
        out.append(_error(fn, "entrypoint-signature", message, file))
    if count == 2:
        return out
    # a sync `def run(INPUT)` workflow is admitted as DBOS runs it (the child calls it in a
    # thread); `async def` stays the form the messages recommend
    if not is_workflow:
        as_step = any(d in STEP_DECORATORS for d in decorators)
        got_what = "a step" if as_step else "a plain function"
        todo = "replace the step decorator with" if as_step else "add the decorator"
        todo += " @DBOS.workflow()"
        shown = _ENTRYPOINT if is_async else f"{_ENTRYPOINT} (or the sync `def run(INPUT)`)"
        message = f"`run` must be {shown} but is {got_what}: {todo}."
        out.append(_error(fn, "entrypoint-not-workflow", message, file))
    return out


def _check_decorators(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    out = []
    for node in statements(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                continue
            if names.qualify(deco) in WORKFLOW_DECORATORS | STEP_DECORATORS:
                spelling = dotted(deco)
                message = (
                    f"`@{spelling}` needs parentheses, or importing the relay fails with a "
                    f"TypeError: write `@{spelling}()`."
                )
                out.append(_error(deco, "dbos-decorator-not-called", message, file))
    return out


def _check_lifecycle(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    """Constructors are reported at the call; launch/destroy where named, called or not."""
    out = []
    called: set[int] = set()
    for node in names.nodes:  # breadth first: a call comes before its function
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            target: ast.expr = node.func
        elif isinstance(node, ast.Name | ast.Attribute):
            target = node
        else:
            continue
        if not names.may_be_forbidden(target):
            continue
        code = DBOS_FORBIDDEN.get(names.qualify(target) or "")
        is_constructor = code == "dbos-config-forbidden"
        if code is None or is_constructor != isinstance(node, ast.Call):
            continue
        args = "(...)" if is_constructor else "()" if id(node) in called else ""
        message = f"`{dotted(target)}{args}` {_FORBIDDEN_WHY[code]}: remove it from the relay."
        out.append(_error(node, code, message, file))
    return out


_TRANSACTION: Final = "dbos.DBOS.transaction"
_QUEUE: Final = "dbos.Queue"


def _check_removed_apis(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    """DBOS 2 spellings that fail at import under DBOS 3.4: ``@DBOS.transaction`` and a
    ``Queue(...)`` built directly."""
    out = []
    for node in names.nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                if names.qualify(deco.func if isinstance(deco, ast.Call) else deco) != _TRANSACTION:
                    continue
                message = (
                    f"`@{dotted(deco.func if isinstance(deco, ast.Call) else deco)}` on "
                    f"`{node.name}` was removed in DBOS 3, so importing the relay fails: make it "
                    f"a datasource transaction (`ds = SQLAlchemyDatasource.create(url)` at the "
                    f"top of the relay, then `@ds.transaction()`), or a `@DBOS.step()`."
                )
                out.append(_error(deco, "dbos-transaction-removed", message, file))
        elif isinstance(node, ast.Call) and names.qualify(node.func) == _QUEUE:
            message = (
                f"`{dotted(node.func)}(...)` cannot be constructed in DBOS 3.4, so importing the "
                f'relay fails: declare the queue with `queue = DBOS.register_queue("name", ...)` '
                f"at the top of the relay (the runner registers it when it launches DBOS)."
            )
            out.append(_error(node, "dbos-queue-constructed", message, file))
    return out


def _check_dbos_imported(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    uses: list[ast.Name] = []
    for node in names.nodes:
        if isinstance(node, ast.Name) and node.id == "DBOS":
            if not isinstance(node.ctx, ast.Load):
                return []
            uses.append(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "DBOS":
                return []
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return []  # a star import may provide DBOS
    if not uses or "DBOS" in names.aliases:
        return []
    first = min(uses, key=lambda n: (n.lineno, n.col_offset))
    message = (
        f"`DBOS` is used at line {first.lineno} but never imported: "
        "add `from dbos import DBOS` at the top of the relay."
    )
    return [_error(first, "dbos-not-imported", message, file)]


def _admit_tree(tree: ast.Module, file: str) -> list[Diagnostic]:
    names = Names(tree)
    checks = (
        _check_entrypoint,
        _check_decorators,
        _check_lifecycle,
        _check_dbos_imported,
        _check_removed_apis,
    )
    return sorted(d for check in checks for d in check(tree, names, file))


def admit_source(source: str, *, file: str = "relay.py") -> list[Diagnostic]:
    """Every admission error in ``source``, sorted by position; empty when it is admitted.

    Nothing is imported or executed. A syntax error is reported alone: the other checks need
    a parsed module.
    """
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return [_syntax_error(exc, file)]
    return _admit_tree(tree, file)


def check_source(source: str | ast.Module, *, file: str = "relay.py") -> list[Diagnostic]:
    """Admission errors and determinism warnings together, sorted by (line, col, code)."""
    try:
        tree = parse(source) if isinstance(source, str) else source
    except SyntaxError as exc:
        return [_syntax_error(exc, file)]
    return sorted(_admit_tree(tree, file) + lint_source(tree, file=file))


def entrypoint_kind(source: str | ast.Module) -> EntrypointKind | None:
    """``"workflow"`` for an admitted ``[async] def run(INPUT)`` with @DBOS.workflow(),
    ``"legacy"`` for ``run(INPUT, ctx)``, None for anything else (including bad syntax)."""
    try:
        tree = parse(source) if isinstance(source, str) else source
    except SyntaxError:
        return None
    fn = module_functions(tree).get("run")
    if fn is None or _signature_extras(fn.args):
        return None
    count = len(fn.args.posonlyargs) + len(fn.args.args)
    is_workflow = any(d in WORKFLOW_DECORATORS for d in Names(tree).decorator_names(fn))
    if count == 1 and is_workflow:
        return "workflow"
    if count == 2 and not is_workflow:
        return "legacy"
    return None


def check_durability(
    source: str | ast.Module, durability: str, *, file: str = "relay.py"
) -> list[Diagnostic]:
    """The manifest's ``relay_durability`` against the source: ``none`` runs a legacy
    ``run(INPUT, ctx)`` once without DBOS, but a @DBOS.workflow relay cannot run without it
    (its decorated functions need a launched DBOS), so that pair is refused here."""
    if durability != "none":
        return []
    try:
        tree = parse(source) if isinstance(source, str) else source
    except SyntaxError:
        return []  # reported by check_source
    if entrypoint_kind(tree) != "workflow":
        return []
    return [
        _error(
            module_functions(tree).get("run"),
            "durability-needs-dbos",
            "run(INPUT) is a @DBOS.workflow, but relay.yaml sets relay_durability: none, and "
            "DBOS workflows and steps cannot run without DBOS. Remove relay_durability: none "
            "(or set it to dbos) to run with checkpoints, or write run(INPUT, ctx) to run once "
            "without them.",
            file,
        )
    ]
