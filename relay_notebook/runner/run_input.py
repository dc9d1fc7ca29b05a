"""Run input: the one rule for what ``INPUT`` may be, however it arrives (CLI, magics, REST).

Design note: the input is copied into ``run.json``, the attempt's spec and DBOS, so an
unbounded input multiplies on disk; it is also parsed and walked by code that recurses. The
rule is checked once, in ``create_run``, and the text readers here apply the same bounds
before parsing, so no caller can allocate more than the limit or recurse past it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final, NoReturn

from relay_notebook.errors import InvalidInputError

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_INPUT_DEPTH",
    "check_json_value",
    "check_run_input",
    "parse_json_text",
    "read_input_file",
]

#: the largest run input, as compact UTF-8 JSON (results have their own 128 KiB bound)
MAX_INPUT_BYTES: Final = 1024 * 1024
#: the deepest nesting of lists and objects in a run input
MAX_INPUT_DEPTH: Final = 100
_EXCERPT: Final = 40


def excerpt(text: str, limit: int = _EXCERPT, *, keep_end: bool = False) -> str:
    """At most ``limit`` characters of ``text``, quoted safely for a one-line message;
    ``keep_end`` cuts the start instead, marked ``...`` (a path's file name is at its end)."""
    if len(text) <= limit:
        cut = text
    else:
        cut = "..." + text[-(limit - 3) :] if keep_end else text[: limit - 1] + "…"
    return ascii(cut)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON (use null or a string)")


def parse_json_text(
    text: str | bytes,
    where: str,
    *,
    error: type[Exception] = InvalidInputError,
    limit: int = MAX_INPUT_BYTES,
) -> Any:
    """Strict JSON from ``text``: bounded in size and depth, no NaN or Infinity, UTF-8 only.

    ``where`` names the source in messages (``--input``, ``the request body``); ``error`` is
    the error class raised (the REST API reports its own ``invalid-request``).
    """
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > limit:
        raise error(
            f"{where} is {size:,} bytes; the limit is {limit:,} ({limit // 1024 // 1024} MiB). "
            f"Put large data in a file the relay reads, and pass its path."
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise error(
                f"{where} is not UTF-8 text (byte {exc.start} is {text[exc.start]:#04x}); save "
                f"it as UTF-8."
            ) from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise error(
            f"{where} nests lists and objects more than {MAX_INPUT_DEPTH} deep; flatten it."
        ) from None
    except ValueError as exc:
        raise error(
            f'{where} is not valid JSON ({str(exc)[:120]}); pass e.g. {{"text": "hello"}}.'
        ) from None
    return value


def read_input_file(path: str) -> Any:
    """The JSON value in the file ``path`` (``--input-file``), read no further than the limit."""
    where = f"--input-file {excerpt(path, 80, keep_end=True)}"
    try:
        with Path(path).open("rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInputError(f"Cannot read {where}: {why}.") from None
    return parse_json_text(data, where)


def _problem(value: Any) -> str | None:
    """Why ``value`` cannot be a run input, or ``None``; walks without recursing."""
    stack: list[tuple[Any, str, int]] = [(value, "INPUT", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth >= MAX_INPUT_DEPTH and isinstance(item, list | tuple | dict):
            where = path if len(path) <= 40 else path[:39] + "…"
            return f"it nests lists and objects more than {MAX_INPUT_DEPTH} deep (at {where})"
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{path} is {item!r}, which JSON cannot hold (use null or a string)"
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = item[exc.start]
                return f"{path} holds a lone surrogate {bad!a}, which is not Unicode text"
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str | int | float | bool) and k is not None:
                    return f"{path} has a key {excerpt(repr(k))} that JSON cannot hold"
                stack.append((k, f"{path} key", depth + 1))
                stack.append((v, f"{path}[{excerpt(str(k), 20)}]", depth + 1))
        else:
            return f"{path} is a {type(item).__name__}, which JSON cannot hold"
    return None


def check_json_value(value: Any, *, what: str, name: str, limit: int, large: str) -> int:
    """Raise ``InvalidInputError`` unless ``value`` is JSON the kit keeps within ``limit``
    bytes (``what``: "The run input", ``name``: how problems call it, ``large``: what to do
    instead of a large value); return its JSON size."""
    problem = _problem(value)
    if problem is not None:
        raise InvalidInputError(
            f"{what} must be JSON (objects, lists, strings, finite numbers, booleans, "
            f"null): {problem.replace('INPUT', name)}."
        )
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > limit:
        shown = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"
        raise InvalidInputError(
            f"{what} is {size:,} bytes of JSON; the limit is {limit:,} ({shown}). {large}"
        )
    return size


def check_run_input(value: Any) -> int:
    """Raise ``InvalidInputError`` unless ``value`` can be a run input; return its JSON size."""
    return check_json_value(
        value, what="The run input", name="INPUT", limit=MAX_INPUT_BYTES,
        large="Put large data in a file the relay reads, and pass its path.",
    )  # fmt: skip
