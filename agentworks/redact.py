"""Keeping vault values out of everything that is persisted: find them, or scrub them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MIN_SECRET_LENGTH", "Redactor"]

#: shorter values would match ordinary text everywhere; the vault refuses them
MIN_SECRET_LENGTH = 4


class Redactor:
    """Knows the live secret values of a run and where they must not appear."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        # longest first, so a secret that contains another is replaced whole
        self._items = sorted(
            ((name, value) for name, value in secrets.items() if len(value) >= MIN_SECRET_LENGTH),
            key=lambda item: -len(item[1]),
        )

    def __repr__(self) -> str:
        return f"Redactor({len(self._items)} secrets)"

    def __bool__(self) -> bool:
        return bool(self._items)

    def scrub(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[vault:NAME]``."""
        for name, value in self._items:
            if value in text:
                text = text.replace(value, f"[vault:{name}]")
        return text

    def find(self, value: Any, _depth: int = 0) -> str | None:
        """The name of a secret whose value occurs anywhere in ``value``, else None."""
        if not self._items or _depth > 50:
            return None
        if isinstance(value, str):
            return next((n for n, v in self._items if v in value), None)
        if isinstance(value, bytes):
            return next((n for n, v in self._items if v.encode() in value), None)
        if isinstance(value, Mapping):
            for k, v in value.items():
                found = self.find(k, _depth + 1) or self.find(v, _depth + 1)
                if found:
                    return found
            return None
        if isinstance(value, list | tuple | set | frozenset):
            for item in value:
                found = self.find(item, _depth + 1)
                if found:
                    return found
            return None
        if value is None or isinstance(value, bool | int | float):
            return None
        return self.find(repr(value), _depth + 1)
