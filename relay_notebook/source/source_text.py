"""How the flow graph reads expressions: their source spelling, labels, id fragments, literals."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MISSING", "SourceText", "dotted_name", "id_base", "literal", "short", "slug"]

_LIMIT: Final = 60
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")
_NOT_ID: Final = re.compile(r"[^A-Za-z0-9_-]+")
#: what ``literal`` returns for an expression that is not a JSON-ready literal
MISSING: Final = object()
_SAFE_INT: Final = 2**53 - 1
_LITERAL_SHAPES: Final = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp, ast.BinOp)


def dotted_name(expr: ast.expr, resolve: Callable[[str], str | None]) -> str | None:
    """The dotted name ``expr`` spells, its first name resolved by ``resolve`` (the imports);
    None if ``expr`` is not a plain dotted name or ``resolve`` does not know its first name."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    root = resolve(expr.id) if isinstance(expr, ast.Name) else None
    if root is None:
        return None
    segments = [*root.split("."), *reversed(parts)]
    # dbos re-exports DBOS from private modules (dbos._dbos.DBOS): one canonical spelling
    if segments[0] == "dbos":
        for marker in ("DBOS", "DBOSConfig"):
            if marker in segments:
                segments = ["dbos", *segments[segments.index(marker) :]]
                break
    return ".".join(segments)


def short(text: str, limit: int = _LIMIT) -> str:
    """``text`` cut to ``limit`` characters, ending with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slug(text: str) -> str:
    """A node-id fragment of ``text``: letters, digits, ``_`` and ``-`` only, at most 48."""
    return _NOT_ID.sub("-", text).strip("-")[:48].strip("-")


def id_base(kind: str, *parts: str) -> str:
    """A readable node id: ``kind`` then the slugs of ``parts`` (``mcp-crm-update``)."""
    return "-".join([kind, *filter(None, map(slug, parts))])


class SourceText:
    """Source spellings of expressions: the author's own text on one line, else ``ast.unparse``."""

    def __init__(self, source: str | None) -> None:
        self.lines: list[str] | None = _LINE_BREAK.split(source) if source is not None else None

    def of(self, node: ast.AST) -> str:
        """How ``node`` reads in the source, on one line."""
        lineno: int | None = getattr(node, "lineno", None)
        end: int | None = getattr(node, "end_lineno", None)
        if self.lines is not None and lineno is not None and end == lineno <= len(self.lines):
            line: str = self.lines[lineno - 1]
            start: int = getattr(node, "col_offset", 0)
            stop: int = getattr(node, "end_col_offset", len(line))
            if line.isascii():
                return line[start:stop]
            return line.encode()[start:stop].decode("utf-8", "replace")
        return " ".join(ast.unparse(node).split())

    def span(self, node: ast.AST) -> str:
        """The full source lines ``node`` covers (empty without source text)."""
        if self.lines is None:
            return ""
        first: int = node.lineno  # type: ignore[attr-defined]
        last: int = node.end_lineno or first  # type: ignore[attr-defined]
        return "\n".join(self.lines[first - 1 : last])


def _json_ready(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        # beyond 2**53 a JSON reader loses digits (and huge ints cannot even be printed)
        return value if abs(value) <= _SAFE_INT else MISSING
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else MISSING
    if isinstance(value, list | tuple):
        items = [_json_ready(v) for v in value]
        return MISSING if any(v is MISSING for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        out = {k: _json_ready(v) for k, v in value.items()}
        return MISSING if any(v is MISSING for v in out.values()) else out
    return MISSING


def literal(node: ast.expr) -> Any:
    """The JSON-ready value of a literal expression, or ``MISSING`` when it is not one."""
    if type(node) is ast.Constant:
        return _json_ready(node.value)
    if not isinstance(node, _LITERAL_SHAPES):
        return MISSING
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return MISSING
    return _json_ready(value)
