"""What DBOS guarantees for each call of a relay, read from the code: the guarantee badges.

Design note: the badge is derived from the node's type and the decorator or call options the
flow graph already records, never by running anything. A native ``@DBOS.step`` runs *at least
once* (a crash after its body ran but before its checkpoint was saved runs it again; DBOS's
retry settings add attempts on errors); what the workflow body hands to DBOS itself (``send``,
``set_event``, ``recv``, ``sleep``) is *recorded once*; an agent or MCP call is *uncertain* on a
crash (the kit cannot know whether the far side acted) unless it is declared ``replay_safe``;
a tool with ``recovery="restart"`` is *journaled*; a datasource transaction
(``@ds.transaction()``) is recorded once, its checkpoint committed with it. A run's record then
confirms or contradicts the badge (``history.run_overlay`` marks a call that really ran more
than once).
"""

from __future__ import annotations

import ast
from typing import Any, Final

from relay_notebook.source.graph import FlowGraph, Node
from relay_notebook.source.lint import Names, walk_all

__all__ = ["GUARANTEES", "assign_guarantees", "guarantee_of"]

#: kind → (the badge's short text, the sentence a node's details show)
GUARANTEES: Final[dict[str, tuple[str, str]]] = {
    "at_least_once": (
        "≥1×",
        "at least once: a crash after the body ran but before its checkpoint was saved runs it "
        "again",
    ),
    "recorded_once": ("1×", "recorded once: DBOS keeps it in the workflow's history"),
    "uncertain": (
        "?",
        "uncertain on crash: if the process dies during the call, nobody knows whether it "
        "acted; the run then needs reconciliation (or declare it replay_safe)",
    ),
    "replay_safe": ("safe", "replay-safe: repeated after a crash, declared harmless"),
    "journaled": ("journal", "journaled: restarted from its journal after a crash"),
}
_TRANSACTION: Final = (
    "exactly once: the transaction commits together with its checkpoint, so a crash keeps "
    "both or neither"
)
#: node types drawn for calls the workflow body makes to DBOS itself
_RECORDED: Final = frozenset({"send", "wait", "sleep", "event", "stream"})
_SERVICE_PREFIXES: Final = ("requests.", "httpx.", "aiohttp.", "urllib.request.", "urllib3.")
#: DBOS's step retry defaults (``@DBOS.step(retries_allowed=True)``)
_DEFAULT_ATTEMPTS: Final = 3
_DEFAULT_INTERVAL_S: Final = 1.0
_DEFAULT_BACKOFF: Final = 2.0


def _retries(details: dict[str, Any]) -> str:
    if details.get("retries_allowed") is not True:
        return "not retried on an error (retries_allowed is off)"
    attempts = details.get("max_attempts", _DEFAULT_ATTEMPTS)
    interval = details.get("interval_seconds", _DEFAULT_INTERVAL_S)
    backoff = details.get("backoff_rate", _DEFAULT_BACKOFF)
    return f"retried on an error: up to {attempts} attempts, {interval:g} s apart (×{backoff:g})"


def _calls_a_service(function: ast.AST, names: Names) -> bool:
    key = ("calls_a_service", id(function))  # once per function, however often it is drawn
    known = names.memo.get(key)
    if known is None:
        known = names.memo[key] = any(
            isinstance(node, ast.Call)
            and (names.qualify(node.func) or "").startswith(_SERVICE_PREFIXES)
            for node in walk_all(function)
        )
    return known


def _has_key_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return any("idempot" in a.arg.lower() or a.arg.lower().endswith("key") for a in every)


def guarantee_of(
    node: Node,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
    names: Names | None = None,
) -> dict[str, Any] | None:
    """The guarantee of one call node (``None`` for nodes that are not calls)."""
    details = node.details
    kind: str | None = None
    out: dict[str, Any] = {}
    if node.type == "step" and details.get("transaction"):
        # a datasource transaction commits in one database transaction with its checkpoint
        kind = "recorded_once"
        out["text"] = _TRANSACTION
    elif node.type == "step":
        kind = "at_least_once"
        out["retries"] = _retries(details)
        function = (functions or {}).get(str(details.get("function", "")))
        if (
            function is not None
            and names is not None
            and _calls_a_service(function, names)
            and not _has_key_parameter(function)
        ):
            out["hint"] = (
                f"{function.name} calls a service over the network and takes no idempotency "
                f"key: a repeat after a crash may act twice; pass one (e.g. idempotency_key) "
                f"and send it with the request"
            )
    elif details.get("framework"):  # a framework agent: its model requests are DBOS steps
        kind = "at_least_once"
    elif node.type in ("agent", "mcp", "tool"):
        if details.get("recovery") == "restart":
            kind = "journaled"
        elif node.type == "tool":
            return None  # a tool shares its agent call's guarantee
        elif details.get("replay_safe") is True:
            kind = "replay_safe"
        else:
            kind = "uncertain"
    elif node.type in _RECORDED:
        kind = "recorded_once"
    if kind is None:
        return None
    badge, text = GUARANTEES[kind]
    return {"kind": kind, "badge": badge, "text": text, **out}


def assign_guarantees(graph: FlowGraph, module: ast.Module) -> None:
    """Put each call node's guarantee in its details (``details.guarantee``)."""
    functions = {
        n.name: n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    names = Names(module)
    for node in graph.nodes:
        found = guarantee_of(node, functions, names)
        if found is not None:
            node.details["guarantee"] = found
