"""What the fields of a ``# @relay`` node or edge must hold, and the guidance when they do not.

Each check gives every problem it finds as ``(code, message)``, the message saying what to
write instead; ``source.annotations`` places them on the comment's line.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Any, Final

__all__ = [
    "ANNOTATION_NODE_TYPES",
    "OPTIONAL_FIELDS",
    "Problem",
    "describe",
    "did_you_mean",
    "edge_problems",
    "node_problems",
    "short",
]

MAX_ID_LENGTH: Final = 64
MAX_LABEL_LENGTH: Final = 200
ANNOTATION_NODE_TYPES: Final = ("input", "agent", "script", "decision", "output")

_TEXT_FIELDS: Final = ("description", "input", "output", "system_prompt", "user_message", "model")
#: the node fields kept in the node's details
OPTIONAL_FIELDS: Final = (*_TEXT_FIELDS[:5], "messages", "model", "tools", "skills", "mcp", "call")
_NODE_FIELDS: Final = ("id", "type", "label", *OPTIONAL_FIELDS)
_EDGE_FIELDS: Final = ("from", "to", "label")

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

Problem = tuple[str, str]  # (code, message)


def node_problems(obj: dict[str, Any], first_label: dict[str, str]) -> Iterator[Problem]:
    """What is wrong with one node object; ``first_label`` holds the ids declared before it."""
    node_id = obj.get("id")
    valid_id = isinstance(node_id, str) and _ID.fullmatch(node_id) is not None
    name = f"node '{node_id}'" if valid_id else "this node"
    if "id" not in obj:
        suggestion = _suggest_id(obj.get("label"))
        message = (
            f"This node has no 'id'; add one that starts with a letter, e.g. "
            f'"id": "{suggestion}".'
        )
        yield "annotation-node-id", message
    elif not valid_id:
        message = (
            f"Node id {describe(node_id)} must be a string that starts with a letter and uses "
            f"only letters, digits, '_' or '-' (at most {MAX_ID_LENGTH}); rename it, "
            f"e.g. '{_suggest_id(node_id)}'."
        )
        yield "annotation-node-id", message
    if isinstance(node_id, str) and node_id in first_label:
        message = (
            f"Node id '{short(node_id)}' is already declared by the node labelled "
            f"'{first_label[node_id]}'; give each node its own id, e.g. "
            f"'{_suggest_id(node_id + '-2')}'."
        )
        yield "annotation-duplicate-id", message
    node_type = obj.get("type")
    if not isinstance(node_type, str) or node_type not in ANNOTATION_NODE_TYPES:
        got = "no 'type'" if "type" not in obj else f"type {describe(node_type)}"
        hint = did_you_mean(str(node_type).lower(), ANNOTATION_NODE_TYPES)
        message = (
            f"{_cap(name)} has {got}, expected one of {', '.join(ANNOTATION_NODE_TYPES)};"
            f'{hint or " use script for plain Python work;"} set e.g. "type": "agent".'
        )
        yield "annotation-node-type", message
    if "label" not in obj:
        message = (
            f"{_cap(name)} has no 'label'; add a short readable name, "
            f'e.g. "label": "{_suggest_label(node_id)}".'
        )
        yield "annotation-label", message
    yield from _label_problems(obj, name)
    yield from _unknown_fields(obj, name, _NODE_FIELDS)
    for key in OPTIONAL_FIELDS:
        expected = _expected_type(key, obj[key]) if key in obj else None
        if expected is not None:
            value = obj[key]
            fix = f"change it to {expected} or remove it"
            if isinstance(value, str) and expected.startswith("a list"):
                fix = f'write it as "{key}": [{json.dumps(value, ensure_ascii=False)}]'
            message = f"The '{key}' of {name} must be {expected}, got {describe(value)}; {fix}."
            yield "annotation-field-type", message


def _label_problems(obj: dict[str, Any], name: str) -> Iterator[Problem]:
    if "label" not in obj:
        return
    raw, problem = obj["label"], None
    if not isinstance(raw, str):
        problem = f"must be text, got {describe(raw)}; write it in double quotes"
    elif not raw.strip():
        problem = "is empty; write a few words a reader will recognise"
        if name == "this edge":
            problem += ", or remove 'label' from the edge"
    elif len(raw.strip()) > MAX_LABEL_LENGTH:
        problem = (
            f"is {len(raw.strip())} characters long, expected at most {MAX_LABEL_LENGTH}; "
            f"shorten it and move the detail to 'description'"
        )
    elif any(unicodedata.category(ch) == "Cc" for ch in raw):
        problem = "contains a line break or other control character; write it on one line"
    if problem is not None:
        yield "annotation-label", f"The label of {name} {problem}."


def _unknown_fields(obj: dict[str, Any], name: str, allowed: Sequence[str]) -> Iterator[Problem]:
    for key in obj:
        if key not in allowed:
            message = (
                f"{_cap(name)} has unknown field '{short(key)}', expected only "
                f"{', '.join(allowed)};{did_you_mean(key, allowed)} rename or remove it."
            )
            yield "annotation-field", message


def _expected_type(key: str, value: Any) -> str | None:
    """What ``key`` must hold when ``value`` does not hold it; None when it does."""
    if key in _TEXT_FIELDS:
        return None if isinstance(value, str) else "a string"
    if key == "call":
        return None if isinstance(value, str) and value.strip() else "a non-empty string"
    if key == "messages":
        return None if _is_text_list(value, allow_blank=True) else "a list of strings"
    if key in ("tools", "skills"):
        return None if _is_text_list(value) else "a list of non-empty names"
    ok = isinstance(value, list) and all(_is_mcp_entry(item) for item in value)
    return None if ok else 'a list of server names or {"server": ..., "tools": [...]} objects'


def _is_text_list(value: Any, *, allow_blank: bool = False) -> bool:
    if not isinstance(value, list):
        return False
    return all(isinstance(item, str) and (allow_blank or item.strip()) for item in value)


def _is_mcp_entry(item: Any) -> bool:
    if isinstance(item, str):
        return bool(item.strip())
    if not isinstance(item, dict) or not set(item) <= {"server", "tools"}:
        return False
    server, tools = item.get("server"), item.get("tools", [])
    return isinstance(server, str) and bool(server.strip()) and _is_text_list(tools)


def edge_problems(obj: dict[str, Any], declared: set[str]) -> list[Problem]:
    """What is wrong with one edge object, given every node id declared."""
    problems = list(_unknown_fields(obj, "this edge", _EDGE_FIELDS))
    problems += [p for key in ("from", "to") for p in _end_problems(obj, key, declared)]
    problems += _label_problems(obj, "this edge")
    return problems


def _end_problems(obj: dict[str, Any], key: str, declared: set[str]) -> Iterator[Problem]:
    value = obj.get(key)
    if isinstance(value, str) and value in declared:
        return
    where = "starts at" if key == "from" else "goes to"
    if key not in obj:
        problem = f"This edge has no '{key}'; add the id of the node it {where}"
    elif not isinstance(value, str):
        problem = f"The '{key}' of this edge must be a node id string, got {describe(value)}"
    else:
        problem = (
            f"This edge {where} '{short(value)}', which no # @relay node declares;"
            f"{did_you_mean(value, sorted(declared))} declare that node or use an existing id"
        )
    known = sorted(declared)
    choices = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "") or "none"
    yield "annotation-edge-end", f"{problem} (declared ids: {choices})."


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` did you mean 'x'?`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" did you mean '{close[0]}'?" if close else ""


def describe(value: Any) -> str:
    """A JSON value as a reader recognises it: ``'9a'``, ``number 5``, ``a list``."""
    if isinstance(value, str):
        return f"'{short(value)}'"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"number {short(json.dumps(value))}"
    return "a list" if isinstance(value, list) else "an object"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def short(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _suggest_id(value: Any) -> str:
    text = value if isinstance(value, str) else ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = json.dumps(value)
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", text.strip()).strip("_").lower()
    if not cleaned:
        return "extract"
    return ("n" + cleaned if not cleaned[0].isalpha() else cleaned)[:MAX_ID_LENGTH]


def _suggest_label(node_id: Any) -> str:
    words = re.sub(r"[_-]+", " ", node_id).strip() if isinstance(node_id, str) else ""
    return short(words[:1].upper() + words[1:]) if words else "Extract invoice"
