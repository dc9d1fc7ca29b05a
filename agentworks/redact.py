"""Keeping vault values out of everything that is persisted: find them, or scrub them.

Design note: a secret is looked for as it is and as JSON and ``repr`` escape it, so a value
with quotes, backslashes or non-ASCII letters is found in a ledger line or a printed dict too.
``find`` walks a value with an explicit stack, not recursion, so no nesting depth hides a
secret and a cycle is visited once. It looks wherever a value's contents can be saved:
container items and keys, an exception's message, arguments, attributes, ``__notes__``,
cause, context and sub-exceptions, an object's ``__dict__`` and slots, and its ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MIN_SECRET_LENGTH", "Redactor"]

#: shorter values would match ordinary text everywhere; the vault refuses them
MIN_SECRET_LENGTH = 4
_ATOMS = (bool, int, float, complex)


class Redactor:
    """Knows the live secret values of a run and where they must not appear."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        # each value as it is and as JSON and repr() escape it (a ledger line, a printed dict),
        # longest first, so a secret that contains another is replaced whole
        self._items = sorted(
            (
                (name, form)
                for name, value in secrets.items()
                if len(value) >= MIN_SECRET_LENGTH
                for form in _forms(value)
            ),
            key=lambda item: -len(item[1]),
        )
        self._encoded = [(name, value.encode()) for name, value in self._items]
        self._count = len({name for name, _ in self._items})

    def __repr__(self) -> str:
        return f"Redactor({self._count} secrets)"

    def __bool__(self) -> bool:
        return bool(self._items)

    @property
    def encoded_values(self) -> list[bytes]:
        """The secrets' UTF-8 bytes in every form, longest first (for scrubbing streams)."""
        return [v for _, v in self._encoded]

    def scrub(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[vault:NAME]``."""
        for name, value in self._items:
            if value in text:
                text = text.replace(value, f"[vault:{name}]")
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """``data`` with every secret's UTF-8 bytes replaced by ``[vault:NAME]``."""
        for name, value in self._encoded:
            if value in data:
                data = data.replace(value, f"[vault:{name}]".encode())
        return data

    def find_text(self, text: str) -> str | None:
        """The name of a secret whose value occurs in ``text``, else None."""
        return next((n for n, v in self._items if v in text), None)

    def find_bytes(self, data: bytes) -> str | None:
        """The name of a secret whose UTF-8 bytes occur in ``data``, else None."""
        return next((n for n, v in self._encoded if v in data), None)

    def find(self, value: Any) -> str | None:
        """The name of a secret whose value occurs anywhere in ``value``, else None."""
        if not self._items:
            return None
        stack: list[Any] = [value]
        seen: set[int] = set()
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                found = self.find_text(item)
            elif isinstance(item, bytes | bytearray | memoryview):
                found = self.find_bytes(bytes(item))
            elif item is None or isinstance(item, _ATOMS):
                continue
            else:
                if id(item) not in seen:
                    seen.add(id(item))
                    stack.extend(_parts(item))
                continue
            if found:
                return found
        return None


def _forms(value: str) -> list[str]:
    """``value`` and the forms JSON and ``repr`` give it inside a quoted string."""
    escaped = [json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
    return list(dict.fromkeys([value, *escaped, repr(value)[1:-1]]))


def _parts(value: Any) -> Iterable[Any]:
    """What ``find`` looks into next: everything a serializer could save of ``value``."""
    if isinstance(value, Mapping):
        return [part for pair in list(value.items()) for part in pair]
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    parts: list[Any] = [_text(value, repr)]
    if isinstance(value, BaseException):
        parts.append(_text(value, str))
        parts.extend(value.args)
        parts.append(value.__cause__)
        if not value.__suppress_context__:  # ``raise ... from None`` hides it from every view
            parts.append(value.__context__)
        parts.extend(getattr(value, "exceptions", None) or ())
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, Mapping):
        parts.append(attributes)  # __notes__ lives here too
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            parts.append(getattr(value, slot, None))
    return parts


def _text(value: Any, show: Any) -> str:
    try:
        return str(show(value))
    except Exception:
        return ""  # a broken __str__ or __repr__ shows nothing, so it saves nothing either
