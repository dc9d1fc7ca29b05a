"""Relay names: the one rule that keeps a name safe as a folder, a module and a DBOS identity."""

from __future__ import annotations

import re
from typing import Final

from relay_notebook.errors import InvalidNameError

__all__ = ["NAME_PATTERN", "validate_relay_name"]

NAME_PATTERN: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def validate_relay_name(name: str) -> str:
    """Return ``name`` if it can name a relay, else raise ``InvalidNameError`` saying why."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError("A relay name cannot be empty; use e.g. 'invoice'.")
    if NAME_PATTERN.fullmatch(name):
        return name
    if "/" in name or "\\" in name or name in {".", ".."} or ".." in name:
        why = "it looks like a path"
    elif len(name) > 64:
        why = f"it is {len(name)} characters long (at most 64)"
    elif not name[0].isalpha() or not name[0].isascii():
        why = "it must start with a letter"
    else:
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_-"))})
        why = "it contains " + ", ".join(repr(c) for c in bad)
    suggestion = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")[:64]
    if not suggestion or not suggestion[0].isalpha():
        suggestion = ("r-" + suggestion)[:64] if suggestion else "my-relay"
    shown = ascii(name if len(name) <= 64 else name[:63] + "…")
    raise InvalidNameError(
        f"Invalid relay name {shown}: {why}. A relay name starts with a letter and uses only "
        f"letters, digits, '_' or '-' (at most 64); try {suggestion!r}."
    )
