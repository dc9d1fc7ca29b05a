"""Keeping vault values out of everything that is persisted: find them, or scrub them.

Design note: a secret is looked for as it is and as JSON and ``repr`` escape it, so a value
with quotes, backslashes or non-ASCII letters is found in a ledger line or a printed dict too.
``find`` walks a value with an explicit stack, not recursion, so no nesting depth hides a
secret and a cycle is visited once. It looks wherever a value's contents can be saved:
container items and keys, an exception's message, arguments, attributes, ``__notes__``,
cause, context and sub-exceptions, an object's ``__dict__`` and slots, and its ``repr``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["MIN_SECRET_LENGTH", "Redactor", "secret_forms"]

#: shorter values would match ordinary text everywhere; the vault refuses them
MIN_SECRET_LENGTH = 4
#: an encoded form shorter than this (a short secret's base64 tail) would match ordinary text
MIN_ENCODED_LENGTH = 8
_ATOMS = (bool, int, float, complex)
#: values that carry no text at all, so no secret (exact types: a subclass may add attributes)
_BARE: frozenset[type] = frozenset({type(None), bool, int, float, complex})


class Redactor:
    """Knows the live secret values of a run and where they must not appear."""

    def __init__(self, secrets: Mapping[str, str], *, encoded: bool = False) -> None:
        # each value as it is and as JSON and repr() escape it (a ledger line, a printed dict),
        # and with ``encoded`` as encodings give it (for readers showing old records), longest
        # first, so a secret that contains another is replaced whole
        self._items = sorted(
            (
                (name, form)
                for name, value in secrets.items()
                if len(value) >= MIN_SECRET_LENGTH
                for form in dict.fromkeys(secret_forms(value, encoded=encoded).values())
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

    def scrub_json(self, value: Any) -> Any:
        """A JSON value with every secret in its strings and keys replaced by ``[vault:NAME]``;
        ``value`` itself, after one search of its JSON text, when it holds none."""
        if not self._items or not self.find_text(
            json.dumps(value, ensure_ascii=False, default=str)
        ):
            return value
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list | tuple):
            return [self.scrub_json(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(str(k)): self.scrub_json(v) for k, v in value.items()}
        return value

    def find_text(self, text: str) -> str | None:
        """The name of a secret whose value occurs in ``text``, else None."""
        return next((n for n, v in self._items if v in text), None)

    def find_bytes(self, data: bytes) -> str | None:
        """The name of a secret whose UTF-8 bytes occur in ``data``, else None."""
        return next((n for n, v in self._encoded if v in data), None)

    def find(self, value: Any) -> str | None:
        """The name of a secret whose value occurs anywhere in ``value``, else None."""
        if not self._items or type(value) in _BARE:
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


def secret_forms(value: str, *, encoded: bool = False) -> dict[str, str]:
    """The forms of ``value`` to look for, by label: as it is and as JSON and ``repr`` escape it
    inside a quoted string; with ``encoded`` also its hex, base64 and base64url (starting at each
    of the three alignments a value can have inside a longer encoded text), URL-encoded and
    reversed forms. Encoded forms shorter than ``MIN_ENCODED_LENGTH`` are left out."""
    forms = {
        "as it is": value,
        "JSON-escaped": json.dumps(value)[1:-1],
        "JSON-escaped (unicode)": json.dumps(value, ensure_ascii=False)[1:-1],
        "repr-escaped": repr(value)[1:-1],
    }
    if not encoded:
        return forms
    raw = value.encode()
    more = {"hex": raw.hex(), "HEX": raw.hex().upper(), "reversed": value[::-1]}
    for shift in range(3):
        padded = b"\0" * shift + raw
        whole = len(padded) // 3 * 3  # the last group depends on the bytes that follow
        cut = 4 if shift else 0  # the first group holds bytes before the value
        more[f"base64+{shift}"] = base64.b64encode(padded[:whole])[cut:].decode()
        more[f"base64url+{shift}"] = base64.urlsafe_b64encode(padded[:whole])[cut:].decode()
    more |= {"URL-encoded": quote(value, safe=""), "URL-encoded (path)": quote(value)}
    more["URL-encoded (form)"] = quote_plus(value)
    forms |= {k: v for k, v in more.items() if len(v) >= MIN_ENCODED_LENGTH}
    return forms


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
