"""Determinism lint: warnings for effects the AST shows in a relay's workflow bodies.

Design note: on recovery DBOS replays the workflow body and substitutes checkpointed step
results, so anything the body computes from the clock, randomness, the environment, files,
the network or set order can differ between attempts. This lint walks the bodies of ``run``,
the other ``@DBOS.workflow`` functions and the module-level helpers they call (transitively);
step bodies are exempt because that is where effects belong. It is a lint, not a proof:
names are resolved through the module's imports only, and the walks are iterative so deep
sources cannot exhaust the interpreter stack.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final

from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source import awaits
from relay_notebook.source.source_text import dotted_name

__all__ = ["CODES", "gc_paused", "lint_source"]

#: the determinism warnings: their meanings live in the registry (relay_notebook.errors.codes)
CODES: Final[dict[str, str]] = codes.meanings("lint")

_DBOS: Final = "dbos.DBOS"
# Spellings that resolve without an import, so a missing import does not hide a finding.
_IMPLICIT: Final[dict[str, str]] = {"DBOS": _DBOS, "DBOSConfig": "dbos.DBOSConfig"}

DBOS_FORBIDDEN: Final[dict[str, str]] = {
    f"{_DBOS}.launch": "dbos-launch-forbidden",
    f"{_DBOS}.destroy": "dbos-destroy-forbidden",
    f"{_DBOS}.reset_system_database": "dbos-destroy-forbidden",
    _DBOS: "dbos-config-forbidden",
    "dbos.DBOSConfig": "dbos-config-forbidden",
}
# declared at the top as DBOS documents it (the runner registers a queue after its launch)
_TOPLEVEL_DECLARATIONS: Final = frozenset({*DBOS_FORBIDDEN, f"{_DBOS}.register_queue"})
#: the last part of each name in DBOS_FORBIDDEN: an attribute spelling none of them is not one
_FORBIDDEN_ENDS: Final = frozenset(name.rsplit(".", 1)[-1] for name in DBOS_FORBIDDEN)
WORKFLOW_DECORATORS: Final = frozenset({f"{_DBOS}.workflow"})
STEP_DECORATORS: Final = frozenset({f"{_DBOS}.step", f"{_DBOS}.transaction"})
# Bodies that run inside a step (agent tools) are exempt like steps.
_EXEMPT_DECORATORS: Final = STEP_DECORATORS | {"agentworks.tool", "tool"}
# Calls whose function arguments are step bodies (legacy ctx.step, DBOS.run_step).
_STEP_RUNNERS: Final = frozenset({"step", "run_step", "run_step_async"})

_STEP_FIX: Final = "move it into a @DBOS.step function and call that step from the workflow"
_FIXES: Final[dict[str, str]] = {
    "nondeterministic-time": _STEP_FIX,
    "nondeterministic-random": _STEP_FIX,
    "nondeterministic-uuid": _STEP_FIX,
    "io-in-workflow": _STEP_FIX,
    "env-read-in-workflow": "use agentworks `variables`, or read it inside a @DBOS.step function",
    "set-iteration": "iterate over sorted(...) instead so every attempt sees the same order",
    "sleep-in-workflow": "use `await DBOS.sleep_async(seconds)`, which is checkpointed",
    "introspection-in-workflow": (
        "read history from outside the run (relay logs RUN) or pass what you need in INPUT"
    ),
}

_CLOCK: Final = ("nondeterministic-time", "reads the clock, which differs on recovery")
_RANDOM: Final = ("nondeterministic-random", "draws random values, which differ on recovery")
_UUID: Final = ("nondeterministic-uuid", "makes a random UUID, which differs on recovery")
_ENV: Final = ("env-read-in-workflow", "reads the environment, which can differ on recovery")
_FILE: Final = ("io-in-workflow", "touches files, which is repeated on recovery")
_NET: Final = ("io-in-workflow", "does network I/O, which is repeated on recovery")
_PROC: Final = ("io-in-workflow", "starts processes, which is repeated on recovery")
_SLEEP: Final = ("sleep-in-workflow", "sleeps without a checkpoint")
_INTRO: Final = ("introspection-in-workflow", "reads DBOS history, recorded whole as a checkpoint")

_Rule = tuple[str, str]
_HISTORY: Final = (
    "list_workflows list_queued_workflows list_workflow_steps get_workflow_status retrieve_workflow"
)
_EXACT: Final[dict[str, _Rule]] = {
    **dict.fromkeys([f"time.{n}" for n in ("time", "monotonic", "perf_counter")], _CLOCK),
    **dict.fromkeys([f"time.{n}_ns" for n in ("time", "monotonic", "perf_counter")], _CLOCK),
    **dict.fromkeys([f"datetime.datetime.{n}" for n in ("now", "utcnow", "today")], _CLOCK),
    **dict.fromkeys(["datetime.date.today", "time.process_time"], _CLOCK),
    **dict.fromkeys(["uuid.uuid1", "uuid.uuid4"], _UUID),
    "os.urandom": _RANDOM,
    **dict.fromkeys(["os.environ", "os.environb", "os.getenv", "dotenv.load_dotenv"], _ENV),
    **dict.fromkeys(["open", "input", "io.open", "os.open", "os.fdopen", "codecs.open"], _FILE),
    **dict.fromkeys([f"os.{n}" for n in ("remove", "unlink", "rename", "replace")], _FILE),
    **dict.fromkeys([f"os.{n}" for n in ("mkdir", "makedirs", "rmdir", "listdir")], _FILE),
    **dict.fromkeys([f"os.path.{n}" for n in ("exists", "isfile", "isdir", "getsize")], _FILE),
    **dict.fromkeys(["os.scandir", "os.walk", "glob.glob", "glob.iglob", "sqlite3.connect"], _FILE),
    **dict.fromkeys(["os.system", "os.popen", "asyncio.create_subprocess_exec"], _PROC),
    "asyncio.create_subprocess_shell": _PROC,
    "asyncio.open_connection": _NET,
    **dict.fromkeys(["asyncio.sleep", "time.sleep"], _SLEEP),
    **{f"{_DBOS}.{name}{suffix}": _INTRO for name in _HISTORY.split() for suffix in ("", "_async")},
}
_PREFIXES: Final[dict[str, _Rule]] = {
    **dict.fromkeys(["random.", "secrets.", "numpy.random."], _RANDOM),
    **dict.fromkeys(["shutil.", "tempfile.", "pathlib.Path."], _FILE),
    **dict.fromkeys(["requests.", "httpx.", "aiohttp.", "urllib.request.", "urllib3."], _NET),
    **dict.fromkeys(["socket.", "ftplib.", "smtplib."], _NET),
    "subprocess.": _PROC,
    "os.environ.": _ENV,
}
# A generator built from an explicit seed is deterministic.
_SEEDED: Final = {"random.Random", "numpy.random.default_rng", "numpy.random.RandomState"}
# Clock readers that read the current time only when given fewer than this many arguments.
_CLOCK_UNLESS_ARGS: Final = {
    **dict.fromkeys(["time.localtime", "time.gmtime", "time.ctime", "time.asctime"], 1),
    "time.strftime": 2,
}
_FILE_METHODS: Final = frozenset({"read_text", "write_text", "read_bytes", "write_bytes"})
_SET_OPS: Final = (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor)
_SET_METHODS: Final = frozenset({"union", "intersection", "difference", "symmetric_difference"})
_ORDER_KEEPING: Final = frozenset({"list", "tuple", "enumerate", "iter", "dict.fromkeys"})
# Consumers whose result does not depend on the order of the iterable they are given.
_ORDER_FREE: Final = frozenset({"sorted", "set", "frozenset", "sum", "min", "max", "any", "all"})


class Names:
    """The module's import aliases: resolves ``dt.datetime.now`` to ``datetime.datetime.now``."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self._qualified: dict[str, str] = {}
        #: results computed once per function for this module (``guarantees``' service calls)
        self.memo: dict[tuple[str, int], bool] = {}
        for node in statements(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    @functools.cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the module in ``ast.walk``'s order, listed once for all the checks
        that look at the whole tree (each walking it again would cost a walk apiece)."""
        return walk_all(self.tree)

    def qualify(self, expr: ast.expr) -> str | None:
        """The dotted name ``expr`` refers to, or None when it is not a plain dotted name."""
        if type(expr) is ast.Name:  # most names: once per spelling, not once per use
            known = self._qualified.get(expr.id)
            if known is None:
                known = self._qualified[expr.id] = dotted_name(expr, self._resolve) or ""
            return known or None
        return dotted_name(expr, self._resolve)

    def _resolve(self, name: str) -> str:
        return self.aliases.get(name) or _IMPLICIT.get(name, name)

    def may_be_forbidden(self, expr: ast.expr) -> bool:
        """False when ``expr`` cannot spell a DBOS lifecycle call (``DBOS_FORBIDDEN``), cheaply."""
        if type(expr) is ast.Attribute:
            return expr.attr in _FORBIDDEN_ENDS
        return type(expr) is ast.Name and self.qualify(expr) in DBOS_FORBIDDEN

    def decorator_names(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
        """The qualified names of ``fn``'s decorators, called (``@x()``) or not (``@x``)."""
        out = []
        for deco in fn.decorator_list:
            name = self.qualify(deco.func if isinstance(deco, ast.Call) else deco)
            if name is not None:
                out.append(name)
        return out


# the fields of a statement that hold statements (directly, or in handlers and match cases)
_BODIES: Final = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def statements(tree: ast.Module) -> Iterator[ast.AST]:
    """Every statement of ``tree`` (with the except handlers and match cases holding them),
    in ``ast.walk``'s breadth-first order, without visiting a single expression: imports and
    definitions are statements, and expressions are most of a module's nodes."""
    pending: deque[ast.AST] = deque([tree])
    while pending:
        node = pending.popleft()
        yield node
        for field in node._fields:  # in field order, as ast.iter_child_nodes goes
            if field in _BODIES:
                pending.extend(getattr(node, field))


def walk_all(root: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(root))``, about twice as fast: the fields are read directly."""
    out: list[ast.AST] = [root]
    append, at = out.append, 0
    while at < len(out):
        node = out[at]
        at += 1
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        append(item)
            elif isinstance(value, ast.AST):
                append(value)
    return out


def dotted(expr: ast.expr) -> str:
    """The source spelling of a dotted name (``D.launch``), ``...`` for anything else."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    root = expr.id if isinstance(expr, ast.Name) else "..."
    return ".".join([root, *reversed(parts)])


def module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions by name; a later definition replaces an earlier one, as in Python."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out[stmt.name] = stmt
    return out


def _classify_call(call: ast.Call, names: Names) -> tuple[str, str, str] | None:
    """``(code, spelling, what)`` when ``call`` is an effect the workflow must not perform."""
    func = call.func
    qname = names.qualify(func)
    if qname is not None:
        if qname in _SEEDED and (call.args or call.keywords):
            return None
        hit = _EXACT.get(qname)
        if hit is None and len(call.args) < _CLOCK_UNLESS_ARGS.get(qname, 0):
            hit = _CLOCK
        if hit is None:
            hit = next((r for prefix, r in _PREFIXES.items() if qname.startswith(prefix)), None)
        if hit is not None:
            return hit[0], f"{dotted(func)}()", hit[1]
    if isinstance(func, ast.Attribute):
        receiver = func.value
        is_path = isinstance(receiver, ast.Call) and (names.qualify(receiver.func) or "").endswith(
            "Path"
        )
        if func.attr in _FILE_METHODS or (func.attr == "open" and is_path):
            return _FILE[0], f".{func.attr}()", _FILE[1]
    return None


def _is_set(expr: ast.expr, names: Names, set_names: set[str]) -> bool:
    """True when ``expr`` evaluates to a set (or an order-keeping copy of one)."""
    for _ in range(50):
        if isinstance(expr, ast.Set | ast.SetComp):
            return True
        if isinstance(expr, ast.Name):
            return expr.id in set_names
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _SET_OPS):
            if _is_set(expr.right, names, set_names):
                return True
            expr = expr.left
            continue
        if not isinstance(expr, ast.Call):
            return False
        qname = names.qualify(expr.func)
        if qname in ("set", "frozenset"):
            return True
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _SET_METHODS:
            expr = expr.func.value
        elif qname in _ORDER_KEEPING and expr.args:
            expr = expr.args[0]
        else:
            return False
    return False


def _set_names(fn: ast.AST, names: Names) -> set[str]:
    """Local names only ever bound to sets in ``fn``."""
    sets: set[str] = set()
    set_bound: set[int] = set()
    other: set[str] = set()
    for node in ast.walk(fn):  # breadth first: an assignment comes before its targets
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            if node.value is not None and _is_set(node.value, names, sets):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                set_bound.update(id(t) for t in targets if isinstance(t, ast.Name))
                sets.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            other.update([node.id] if id(node) not in set_bound else [])
    return sets - other


def _scan(
    roots: Iterable[ast.AST], names: Names, set_names: set[str], calls: list[str] | None
) -> Iterator[tuple[ast.AST, str, str, str]]:
    """Yield ``(node, code, spelling, what)`` for each effect under ``roots``.

    With ``calls`` the walk enters nested functions and appends every bare name called, so
    the caller can follow helpers; without it, nested functions are skipped (module level).
    """
    stack: list[ast.AST] = list(reversed(list(roots)))
    runners = [
        node
        for root in stack
        for node in ast.walk(root)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _STEP_RUNNERS
    ]
    skipped = {id(a) for call in runners for a in call.args if isinstance(a, ast.Lambda)}
    exempt_defs = {a.id for call in runners for a in call.args if isinstance(a, ast.Name)}
    order_free: set[int] = set()
    while stack:
        node = stack.pop()
        children: list[ast.AST] = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            if calls is None or id(node) in skipped:
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                node.name in exempt_defs
                or any(d in _EXEMPT_DECORATORS for d in names.decorator_names(node))
            ):
                continue
        elif isinstance(node, ast.Call):
            qname = names.qualify(node.func)
            if qname in _ORDER_FREE:
                order_free.update(id(a) for a in node.args)
            hit = _classify_call(node, names)
            if hit is not None:
                yield node, *hit
                children = [*node.args, *node.keywords]
            elif calls is not None and isinstance(node.func, ast.Name):
                calls.append(node.func.id)
        elif isinstance(node, ast.Name | ast.Attribute):
            if _EXACT.get(names.qualify(node) or "") == _ENV:
                yield node, _ENV[0], dotted(node), _ENV[1]
                continue
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            if id(node) not in order_free and _is_set(node.iter, names, set_names):
                yield node.iter, "set-iteration", "", "has no stable order"
        elif isinstance(node, ast.GeneratorExp | ast.ListComp) and id(node) in order_free:
            order_free.update(id(g) for g in node.generators)
        stack.extend(reversed(children))


def _warning(node: ast.AST, code: str, message: str, file: str) -> Diagnostic:
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0)
    return Diagnostic(line, col, code, message, "warning", file)


def _lint_workflows(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    functions = module_functions(tree)
    roles = {name: set(names.decorator_names(fn)) for name, fn in functions.items()}
    roots = [n for n, r in roles.items() if n == "run" or r & WORKFLOW_DECORATORS]
    not_helpers = _EXEMPT_DECORATORS | WORKFLOW_DECORATORS
    queue = [(name, name) for name in roots]
    seen = set(roots)
    out: list[Diagnostic] = []
    while queue:
        name, root = queue.pop(0)
        where = f"the workflow `{root}`"
        if name != root:
            where = f"`{name}`, which {where} calls,"
        calls: list[str] = []
        fn = functions[name]
        for node, code, spelling, what in _scan(fn.body, names, _set_names(fn, names), calls):
            subject = f"`{spelling}`" if spelling else "Iterating over a set"
            out.append(_warning(node, code, f"{subject} in {where} {what}: {_FIXES[code]}.", file))
        for callee in calls:
            if callee in functions and callee not in seen and not roles[callee] & not_helpers:
                seen.add(callee)
                queue.append((callee, root))
    return out


def _headers(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (its bodies are walked apart)."""
    if isinstance(stmt, ast.Match):
        return [stmt.subject, *(c.guard for c in stmt.cases if c.guard)]
    if isinstance(stmt, ast.Try | ast.TryStar):
        return [h.type for h in stmt.handlers if h.type]
    return [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]


def _lint_toplevel(tree: ast.Module, names: Names, file: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    fix = "move it into a @DBOS.step function or into run"
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        test = stmt.test if isinstance(stmt, ast.If) else None
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Import | ast.ImportFrom):
            continue
        if isinstance(test, ast.Compare) and dotted(test.left) == "__name__":
            continue  # the `if __name__ == "__main__":` block does not run on import
        bodies = [getattr(stmt, f, []) for f in ("body", "orelse", "finalbody")]
        bodies += [h.body for h in getattr(stmt, "handlers", [])]
        bodies += [c.body for c in getattr(stmt, "cases", [])]
        for body in reversed(bodies):
            stack.extend(reversed(body))
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            if names.qualify(stmt.value.func) not in _TOPLEVEL_DECLARATIONS:
                spelling = dotted(stmt.value.func)
                message = f"Module-level call `{spelling}(...)` runs on every import: {fix}."
                out.append(_warning(stmt.value, "toplevel-side-effect", message, file))
        elif not isinstance(stmt, ast.ClassDef):
            for node, code, spelling, what in _scan(_headers(stmt), names, set(), None):
                if code != "set-iteration":
                    message = (
                        f"`{spelling}` at module level runs on every import and {what}: {fix}."
                    )
                    out.append(_warning(node, "toplevel-side-effect", message, file))
    return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a module is parsed: an AST has no cycles, yet
    every collection during the parse traverses all the nodes made so far (for a large source
    the collector took twice the parse's own time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse(source: str) -> ast.Module:
    """Parse ``source`` quietly; every way it can fail is raised as ``SyntaxError``."""
    try:
        with warnings.catch_warnings(), gc_paused():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except SyntaxError:
        raise
    except UnicodeEncodeError as exc:
        line = source.count("\n", 0, exc.start) + 1
        col = exc.start - (source.rfind("\n", 0, exc.start) + 1)
        reason = "a character that cannot be encoded as UTF-8"
        raise SyntaxError(reason, ("relay.py", line, col + 1, None)) from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply to parse"
        raise SyntaxError(reason) from exc


def lint_source(source: str | ast.Module, *, file: str = "relay.py") -> list[Diagnostic]:
    """Determinism warnings for ``source`` (text or a parsed module), sorted by position.

    Source that does not parse yields no warnings: admission reports the syntax error.
    """
    try:
        tree = parse(source) if isinstance(source, str) else source
        names = Names(tree)
        found = _lint_workflows(tree, names, file) + _lint_toplevel(tree, names, file)
        roles = {n: set(names.decorator_names(f)) for n, f in module_functions(tree).items()}
        found += awaits.missing_awaits(
            tree,
            steps={n for n, r in roles.items() if r & STEP_DECORATORS},
            workflows={n for n, r in roles.items() if n == "run" or r & WORKFLOW_DECORATORS},
            exempt={n for n, r in roles.items() if r & _EXEMPT_DECORATORS},
            file=file,
        )
    except (SyntaxError, RecursionError):
        return []
    unique = {(d.line, d.col, d.code): d for d in found}
    return sorted(unique.values())
