"""Legacy ``# @relay`` annotations: node and edge comments read into an annotations flow graph.

Design note: annotations are author descriptions, never execution, so they are found with
``tokenize`` (a ``# @relay`` inside a string or docstring defines nothing) and nothing is
imported or run. Every problem is reported at once as a warning, because annotations never block
checking, running or publishing; and any problem withholds the whole graph, because a partial
diagram would silently misdescribe the relay.
"""

from __future__ import annotations

import difflib
import io
import json
import re
import tokenize
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from relay_notebook import codes
from relay_notebook.source.diagnostics import Diagnostic
from relay_notebook.source.graph import Edge, FlowGraph, Node

__all__ = [
    "ANNOTATION_NODE_TYPES",
    "CODES",
    "MAX_EDGES",
    "MAX_NODES",
    "AnnotationResult",
    "parse_annotations",
]

MAX_NODES: Final = 200
MAX_EDGES: Final = 400
MAX_ID_LENGTH: Final = 64
MAX_LABEL_LENGTH: Final = 200
ANNOTATION_NODE_TYPES: Final = ("input", "agent", "script", "decision", "output")

#: the annotation warnings: their meanings live in the registry (relay_notebook.codes)
CODES: Final[dict[str, str]] = codes.meanings("annotations")

_TEXT_FIELDS: Final = ("description", "input", "output", "system_prompt", "user_message", "model")
_OPTIONAL_FIELDS: Final = (*_TEXT_FIELDS[:5], "messages", "model", "tools", "skills", "mcp", "call")
_NODE_FIELDS: Final = ("id", "type", "label", *_OPTIONAL_FIELDS)
_EDGE_FIELDS: Final = ("from", "to", "label")
_KEYWORDS: Final = ("node", "edge")
_EXAMPLES: Final = {
    "node": '{"id": "extract", "type": "agent", "label": "Extract invoice"}',
    "edge": '{"from": "extract", "to": "review"}',
}

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_ANNOTATION = re.compile(r"#\s*@relay(?![\w-])\s*(?P<keyword>[^\s{\[\"]*)\s*(?P<payload>.*)")
_LOOSE_LINE = re.compile(r"^[ \t\f]*#\s*@relay(?![\w-])", re.MULTILINE)

Problem = tuple[str, str]  # (code, message)
Record = tuple["_Comment", dict[str, Any]]


@dataclass(frozen=True)
class AnnotationResult:
    """What the annotations of one source say: a whole graph, or why there is none.

    ``graph`` is None when there are no annotations or when any is invalid (never partial);
    ``diagnostics`` are warnings; ``found`` is True if any ``# @relay`` comment exists.
    """

    graph: FlowGraph | None
    diagnostics: list[Diagnostic]
    found: bool


@dataclass(frozen=True)
class _Comment:
    line: int
    col: int
    keyword: str
    payload: str
    payload_col: int
    standalone: bool

    def warn(self, problem: Problem, col: int | None = None) -> Diagnostic:
        code, message = problem
        col = self.col if col is None else col
        return Diagnostic(self.line, col, code, message, severity="warning")


class _JSONValueError(ValueError):
    """Valid JSON syntax this format still refuses (a repeated key, NaN)."""


def parse_annotations(source: str, *, relay: str | None = None) -> AnnotationResult:
    """Read every ``# @relay node|edge {json}`` comment in ``source`` into a graph or warnings."""
    try:
        comments = _scan(source)
    except (tokenize.TokenError, SyntaxError, ValueError) as exc:
        return _untokenizable(source, exc)
    out: list[Diagnostic] = []
    nodes: list[Record] = []
    edges: list[Record] = []
    for comment in comments:
        decoded = _decode(comment)
        if isinstance(decoded, Diagnostic):
            out.append(decoded)
        else:
            (nodes if comment.keyword == "node" else edges).append((comment, decoded))
    for records, limit in ((nodes, MAX_NODES), (edges, MAX_EDGES)):
        if len(records) > limit:
            out.append(records[limit][0].warn(_too_many(records[0][0].keyword, len(records))))
    graph_nodes, declared = _read_nodes(nodes, out)
    graph_edges = _read_edges(edges, declared, out)
    out.sort(key=lambda d: (d.line, d.col))
    graph = None
    if not out and graph_nodes:
        graph = FlowGraph(nodes=graph_nodes, edges=graph_edges, relay=relay, kind="annotations")
    return AnnotationResult(graph=graph, diagnostics=out, found=bool(comments))


def _scan(source: str) -> list[_Comment]:
    lines = io.StringIO(source).readlines()
    comments: list[_Comment] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        match = _ANNOTATION.fullmatch(tok.string) if tok.type == tokenize.COMMENT else None
        if match is None:
            continue
        (row, col), payload = tok.start, match["payload"].rstrip()
        before = lines[row - 1][:col] if row <= len(lines) else ""
        payload_col = col + match.start("payload")
        comments.append(
            _Comment(row, col, match["keyword"], payload, payload_col, not before.strip())
        )
    return comments


def _untokenizable(source: str, exc: Exception) -> AnnotationResult:
    first = _LOOSE_LINE.search(source)
    if first is None:
        return AnnotationResult(graph=None, diagnostics=[], found=False)
    line, reason = source.count("\n", 0, first.start()) + 1, str(exc)
    if isinstance(exc, SyntaxError) and exc.lineno:
        line, reason = exc.lineno, exc.msg
    elif isinstance(exc, tokenize.TokenError) and len(exc.args) == 2:
        reason, line = str(exc.args[0]), int(exc.args[1][0])
    # tokenize reports an unclosed bracket at the line after the last one
    line = max(1, min(line, source.count("\n") + 1))
    message = (
        f"The # @relay annotations were not read because the source is not valid Python "
        f"({reason.rstrip('.')}); fix the syntax error and they will be read again."
    )
    diagnostic = Diagnostic(line, 0, "annotation-tokenize", message, severity="warning")
    return AnnotationResult(graph=None, diagnostics=[diagnostic], found=True)


def _decode(comment: _Comment) -> dict[str, Any] | Diagnostic:
    """The comment's JSON object, or the one problem that keeps it from being read."""
    keyword, at_payload = comment.keyword, comment.payload_col
    if not comment.standalone:
        message = (
            "This # @relay comment follows code on the same line, so it defines nothing; "
            "move it to a line of its own."
        )
        return comment.warn(("annotation-placement", message))
    if keyword not in _KEYWORDS:
        got = f"got '{_short(keyword)}'" if keyword else "got nothing"
        message = (
            f"Expected 'node' or 'edge' after '# @relay', {got};"
            f"{_did_you_mean(keyword.lower(), _KEYWORDS)} write "
            f"'# @relay node {{...}}' or '# @relay edge {{...}}'."
        )
        return comment.warn(("annotation-keyword", message))
    example = f"# @relay {keyword} {_EXAMPLES[keyword]}"
    if not comment.payload:
        message = (
            f"Expected a JSON object after '# @relay {keyword}', got nothing; "
            f"add it on the same line, e.g. {example}."
        )
        return comment.warn(("annotation-json", message))
    try:
        value = json.loads(comment.payload, object_pairs_hook=_unique, parse_constant=_refuse)
    except json.JSONDecodeError as exc:
        message = (
            f"The JSON after '# @relay {keyword}' is not valid ({exc.msg} at character "
            f"{exc.pos + 1}); write one JSON object on this line with double-quoted keys and "
            f"strings, e.g. {example}."
        )
        return comment.warn(("annotation-json", message), col=at_payload + exc.pos)
    except (ValueError, RecursionError) as exc:
        message = (
            f"The JSON after '# @relay {keyword}' cannot be used ({exc}); write each key once, "
            f"using only strings, lists and objects, e.g. {example}."
        )
        return comment.warn(("annotation-json", message), col=at_payload)
    if not isinstance(value, dict):
        message = (
            f"Expected a JSON object {{...}} after '# @relay {keyword}', got "
            f"{_describe(value)}; write e.g. {example}."
        )
        return comment.warn(("annotation-json", message), col=at_payload)
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _JSONValueError(f"key '{_short(key)}' appears twice")
        obj[key] = value
    return obj


def _refuse(constant: str) -> Any:
    raise _JSONValueError(f"{constant} is not a JSON value")


def _too_many(keyword: str, count: int) -> Problem:
    if keyword == "node":
        return "annotation-too-many-nodes", (
            f"The annotations declare {count} nodes, expected at most {MAX_NODES}; merge related "
            f"steps into one node and describe them in its 'description'."
        )
    return "annotation-too-many-edges", (
        f"The annotations declare {count} edges, expected at most {MAX_EDGES}; merge nodes or "
        f"drop edges that repeat what the flow already shows."
    )


def _read_nodes(records: list[Record], out: list[Diagnostic]) -> tuple[list[Node], set[str]]:
    """Valid nodes in declaration order, and every id string declared (valid or not)."""
    nodes: list[Node] = []
    first_label: dict[str, str] = {}
    for comment, obj in records:
        problems = list(_node_problems(obj, first_label))
        out.extend(comment.warn(problem) for problem in problems)
        node_id, label = obj.get("id"), obj.get("label")
        if isinstance(node_id, str) and node_id not in first_label:
            first_label[node_id] = _short(label.strip() if isinstance(label, str) else node_id)
        if not problems:
            details: dict[str, Any] = {key: obj[key] for key in _OPTIONAL_FIELDS if key in obj}
            node = Node(obj["id"], obj["type"], obj["label"].strip(), comment.line, details)
            nodes.append(node)
    return nodes, set(first_label)


def _node_problems(obj: dict[str, Any], first_label: dict[str, str]) -> Iterator[Problem]:
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
            f"Node id {_describe(node_id)} must be a string that starts with a letter and uses "
            f"only letters, digits, '_' or '-' (at most {MAX_ID_LENGTH}); rename it, "
            f"e.g. '{_suggest_id(node_id)}'."
        )
        yield "annotation-node-id", message
    if isinstance(node_id, str) and node_id in first_label:
        message = (
            f"Node id '{_short(node_id)}' is already declared by the node labelled "
            f"'{first_label[node_id]}'; give each node its own id, e.g. "
            f"'{_suggest_id(node_id + '-2')}'."
        )
        yield "annotation-duplicate-id", message
    node_type = obj.get("type")
    if not isinstance(node_type, str) or node_type not in ANNOTATION_NODE_TYPES:
        got = "no 'type'" if "type" not in obj else f"type {_describe(node_type)}"
        hint = _did_you_mean(str(node_type).lower(), ANNOTATION_NODE_TYPES)
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
    for key in _OPTIONAL_FIELDS:
        expected = _expected_type(key, obj[key]) if key in obj else None
        if expected is not None:
            value = obj[key]
            fix = f"change it to {expected} or remove it"
            if isinstance(value, str) and expected.startswith("a list"):
                fix = f'write it as "{key}": [{json.dumps(value, ensure_ascii=False)}]'
            message = f"The '{key}' of {name} must be {expected}, got {_describe(value)}; {fix}."
            yield "annotation-field-type", message


def _label_problems(obj: dict[str, Any], name: str) -> Iterator[Problem]:
    if "label" not in obj:
        return
    raw, problem = obj["label"], None
    if not isinstance(raw, str):
        problem = f"must be text, got {_describe(raw)}; write it in double quotes"
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
                f"{_cap(name)} has unknown field '{_short(key)}', expected only "
                f"{', '.join(allowed)};{_did_you_mean(key, allowed)} rename or remove it."
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


def _read_edges(records: list[Record], declared: set[str], out: list[Diagnostic]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple[str, str, str | None]] = set()
    for comment, obj in records:
        problems = list(_unknown_fields(obj, "this edge", _EDGE_FIELDS))
        problems += [p for key in ("from", "to") for p in _end_problems(obj, key, declared)]
        problems += _label_problems(obj, "this edge")
        label = obj["label"].strip() if not problems and "label" in obj else None
        key = (str(obj.get("from")), str(obj.get("to")), label)
        if not problems and key in seen:
            shown = f" labelled '{_short(label)}'" if label is not None else ""
            message = (
                f"The edge {key[0]} -> {key[1]}{shown} repeats an identical earlier edge; "
                f"remove this line or give the edge a different label."
            )
            problems.append(("annotation-duplicate-edge", message))
        out.extend(comment.warn(problem) for problem in problems)
        if not problems:
            seen.add(key)
            edges.append(Edge(key[0], key[1], label))
    return edges


def _end_problems(obj: dict[str, Any], key: str, declared: set[str]) -> Iterator[Problem]:
    value = obj.get(key)
    if isinstance(value, str) and value in declared:
        return
    where = "starts at" if key == "from" else "goes to"
    if key not in obj:
        problem = f"This edge has no '{key}'; add the id of the node it {where}"
    elif not isinstance(value, str):
        problem = f"The '{key}' of this edge must be a node id string, got {_describe(value)}"
    else:
        problem = (
            f"This edge {where} '{_short(value)}', which no # @relay node declares;"
            f"{_did_you_mean(value, sorted(declared))} declare that node or use an existing id"
        )
    known = sorted(declared)
    choices = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "") or "none"
    yield "annotation-edge-end", f"{problem} (declared ids: {choices})."


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" did you mean '{close[0]}'?" if close else ""


def _describe(value: Any) -> str:
    """A JSON value as a reader recognises it: ``'9a'``, ``number 5``, ``a list``."""
    if isinstance(value, str):
        return f"'{_short(value)}'"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"number {_short(json.dumps(value))}"
    return "a list" if isinstance(value, list) else "an object"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _short(text: str, limit: int = 40) -> str:
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
    return _short(words[:1].upper() + words[1:]) if words else "Extract invoice"
