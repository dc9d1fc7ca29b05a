"""Short, redacted previews of the step outputs and errors DBOS saved (base64 pickles).

Design note: DBOS pickles every step output and error. Unpickling runs code: a value of a
class defined in the relay would import the relay's module into the reader's process (the
kernel), which the kit never does. Previews therefore decode with an unpickler that resolves
nothing but builtin containers and builtin exception classes; anything else is shown by the
name of the class the pickle refers to, read from its opcodes without executing them. Large
values are not decoded at all. Vault values are replaced before the preview is cut short.
"""

from __future__ import annotations

import binascii
import builtins
import io
import json
import pickle
import pickletools
from dataclasses import dataclass
from typing import Any, Final

from agentworks.redact import Redactor

__all__ = ["PREVIEW_CHARS", "SavedValue", "decode_value", "json_preview", "output_preview"]

#: longest preview, in characters
PREVIEW_CHARS: Final = 160
#: pickles larger than this are described, not decoded
DECODE_LIMIT: Final = 64 * 1024

_BUILTIN_MODULES: Final = frozenset({"builtins", "__builtin__", "exceptions"})  # protocols 0-2
_SAFE_BUILTINS: Final = frozenset({"set", "frozenset", "complex", "range", "slice", "bytearray"})
_STRINGS: Final = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING"}
)
_GETS: Final = frozenset({"BINGET", "LONG_BINGET", "GET"})
_PUTS: Final = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_NO_PUSH: Final = frozenset({"PROTO", "FRAME", "MARK", "STOP"})


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in _BUILTIN_MODULES:
            value = getattr(builtins, name, None)
            if name in _SAFE_BUILTINS:
                return value
            if isinstance(value, type) and issubclass(value, BaseException):
                return value
        raise pickle.UnpicklingError(f"{module}.{name}")


def _referenced_class(raw: bytes) -> str | None:
    """The first class a pickle names, read from its opcodes (nothing is executed).

    Only strings are followed through the stack and memo; that is all a global's name needs.
    """
    pushed: list[str | None] = []
    memo: dict[int, str | None] = {}
    try:
        for op, arg, _ in pickletools.genops(raw):
            name = op.name
            if name in _STRINGS:
                pushed.append(str(arg))
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif name in _PUTS:
                memo[int(str(arg))] = pushed[-1] if pushed else None
            elif name in _GETS:
                pushed.append(memo.get(int(str(arg))))
            elif name == "STACK_GLOBAL":
                module, qualname = (pushed[-2], pushed[-1]) if len(pushed) >= 2 else (None, None)
                return f"{module}.{qualname}" if module and qualname else None
            elif name in ("GLOBAL", "INST"):
                return str(arg).replace(" ", ".")
            elif name not in _NO_PUSH:
                pushed.append(None)
    except Exception:
        return None
    return None


def _clip(text: str, redactor: Redactor | None) -> str:
    if redactor:
        text = redactor.scrub(text)
    text = text.replace("\n", "\\n")
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def output_preview(
    encoded: str | None, serialization: str | None, redactor: Redactor | None = None
) -> str | None:
    """A one-line preview of a saved output or error column (``None`` if nothing was saved)."""
    if encoded is None:
        return None
    if serialization not in (None, "py_pickle"):
        return _clip(encoded, redactor)  # DBOS's portable serializer saves JSON text
    try:
        raw = binascii.a2b_base64(encoded)
    except (binascii.Error, ValueError):
        return f"<{len(encoded)} characters of {serialization or 'unknown'} data>"
    if len(raw) > DECODE_LIMIT:
        named = _referenced_class(raw[:4096])
        return f"<{named}, {len(raw)} bytes pickled>" if named else f"<{len(raw)} bytes pickled>"
    try:
        value = _BuiltinsOnly(io.BytesIO(raw)).load()
    except pickle.UnpicklingError:
        return f"<{_referenced_class(raw) or 'a pickled value'}>"
    except Exception:
        return f"<{len(raw)} bytes pickled, not readable>"
    return _clip(_shown(value), redactor)


@dataclass(frozen=True)
class SavedValue:
    """A value DBOS saved (an event, a stream value, a message), decoded the safe way.

    ``value`` is the value itself when it has a JSON form (redacted), else ``preview``;
    ``jsonable`` says which.
    """

    value: Any
    preview: str
    jsonable: bool


def _scrubbed(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.scrub(value)
    if isinstance(value, list):
        return [_scrubbed(v, redactor) for v in value]
    if isinstance(value, dict):
        return {redactor.scrub(str(k)): _scrubbed(v, redactor) for k, v in value.items()}
    return value


def decode_value(
    encoded: str | None, serialization: str | None, redactor: Redactor | None = None
) -> SavedValue:
    """``encoded`` (a base64 pickle, or DBOS's portable JSON) as a ``SavedValue``: decoded with
    the builtins-only unpickler (nothing of the relay is imported or run), vault values
    replaced, JSON-able values kept whole (up to the decode limit)."""
    if encoded is None:
        return SavedValue(None, "null", True)
    value: Any
    if serialization not in (None, "py_pickle"):
        try:
            value = json.loads(encoded)
        except ValueError:
            return SavedValue(_clip(encoded, redactor), _clip(encoded, redactor), False)
    else:
        try:
            raw = binascii.a2b_base64(encoded)
        except (binascii.Error, ValueError):
            text = f"<{len(encoded)} characters of {serialization or 'unknown'} data>"
            return SavedValue(text, text, False)
        if len(raw) > DECODE_LIMIT:
            text = output_preview(encoded, serialization, redactor) or ""
            return SavedValue(text, text, False)
        try:
            value = _BuiltinsOnly(io.BytesIO(raw)).load()
        except Exception:
            text = output_preview(encoded, serialization, redactor) or ""
            return SavedValue(text, text, False)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = _clip(_shown(value), redactor)
        return SavedValue(text, text, False)
    if redactor:
        value = _scrubbed(value, redactor)
    return SavedValue(value, _clip(_shown(value), None), True)


def _shown(value: Any) -> str:
    """JSON when the value has a JSON form (``true``, ``"x"``, ``[1]``: what a relay's callers
    see), else its repr (a set, bytes, an exception)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def json_preview(value: Any, redactor: Redactor | None = None) -> str | None:
    """A one-line preview of a JSON value (journaled call results)."""
    if value is None:
        return None
    return _clip(json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False), redactor)
