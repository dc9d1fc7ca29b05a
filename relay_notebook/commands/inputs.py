"""The input layer of every surface: ``--input``, ``--input-file``, notebook variables,
``reconcile --result`` and the REST fields ``input`` and ``result``, to one checked value.

Design note: the rule itself (strict JSON, at most 1 MiB, nested at most 100 deep) lives in
``runner.run_input``; this module decides where a value comes from and names that source in
the one-line ``[invalid-input]`` message, the same way for the CLI, the magics and the API.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any, Final

from relay_notebook.errors import InvalidInputError
from relay_notebook.runner.run_input import (
    MAX_INPUT_BYTES,
    check_run_input,
    excerpt,
    parse_json_text,
    read_input_file,
)

__all__ = ["checked_value", "parse_json_text", "reconcile_result", "run_input", "value_from_text"]

_VARIABLE: Final = re.compile(r"\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def value_from_text(text: str, where: str, variables: Mapping[str, Any] | None = None) -> Any:
    """The value of an option's text: JSON; in a notebook (``variables`` given) also the name
    of a variable (``order`` or ``{order}``) or a Python literal. Checked against the rule."""
    if variables is None:
        return checked_value(parse_json_text(text, where), where)
    m = _VARIABLE.fullmatch(text.strip())
    if m and m.group(1) in variables:
        return checked_value(variables[m.group(1)], f"{where} {m.group(1)}")
    try:
        return checked_value(parse_json_text(text, where), where)
    except InvalidInputError:
        if len(text) > MAX_INPUT_BYTES:
            raise
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InvalidInputError(
            f"{where} {excerpt(text)} is neither JSON nor the name of a notebook variable; pass "
            f'e.g. {where} \'{{"text": "hi"}}\' or {where} order.'
        ) from None
    return checked_value(value, where)


def checked_value(value: Any, where: str) -> Any:
    """``value`` if it can be a run input (or a reconciled result); else one coded line."""
    try:
        check_run_input(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc.message}") from None
    return value


def run_input(
    *,
    text: str | None = None,
    file: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> Any:
    """The run input from ``--input`` (``text``) or ``--input-file`` (``file``); ``{}`` if none."""
    if file is not None:
        return checked_value(read_input_file(file), f"--input-file {excerpt(file, 80)}")
    if text is not None:
        return value_from_text(text, "--input", variables)
    return {}


def reconcile_result(
    text: str, variables: Mapping[str, Any] | None = None, where: str = "--result"
) -> Any:
    """``reconcile --result``: the call's established outcome, held to the input rule."""
    return value_from_text(text, where, variables)
