"""Adapter calls drawn as nodes: an ``agentworks`` call's label, id base and details.

Only literal arguments are read (nothing is evaluated); tools and MCP servers are listed by name:
a module function by its label, a ``{"server": ...}`` object by its server.
"""

from __future__ import annotations

import ast
from typing import Any, Final

from relay_notebook.source.module_index import ModuleIndex
from relay_notebook.source.source_text import MISSING, SourceText, id_base, literal, short

__all__ = ["adapter_spec"]


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
        for key in ("resource", "prompt", "listing", "replay_safe"):
            take(key)
        operation = ("tool", "resource", "prompt", "listing")
        parts = [str(details[k]) for k in ("server", *operation) if isinstance(details.get(k), str)]
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
