"""Legacy ``# @relay`` annotations: node and edge comments read into an annotations flow graph.

Design note: annotations are author descriptions, never execution, so they are found with
``tokenize`` (a ``# @relay`` inside a string or docstring defines nothing) and nothing is
imported or run. Every problem is reported at once as a warning, because annotations never block
checking, running or publishing; and any problem withholds the whole graph, because a partial
diagram would silently misdescribe the relay.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from dataclasses import dataclass
from typing import Any, Final

from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source.annotation_checks import (
    ANNOTATION_NODE_TYPES,
    OPTIONAL_FIELDS,
    Problem,
    describe,
    did_you_mean,
    edge_problems,
    node_problems,
    short,
)
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

#: the annotation warnings: their meanings live in the registry (relay_notebook.errors.codes)
CODES: Final[dict[str, str]] = codes.meanings("annotations")

_KEYWORDS: Final = ("node", "edge")
_EXAMPLES: Final = {
    "node": '{"id": "extract", "type": "agent", "label": "Extract invoice"}',
    "edge": '{"from": "extract", "to": "review"}',
}

_ANNOTATION = re.compile(r"#\s*@relay(?![\w-])\s*(?P<keyword>[^\s{\[\"]*)\s*(?P<payload>.*)")
_LOOSE_LINE = re.compile(r"^[ \t\f]*#\s*@relay(?![\w-])", re.MULTILINE)

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
        got = f"got '{short(keyword)}'" if keyword else "got nothing"
        message = (
            f"Expected 'node' or 'edge' after '# @relay', {got};"
            f"{did_you_mean(keyword.lower(), _KEYWORDS)} write "
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
            f"{describe(value)}; write e.g. {example}."
        )
        return comment.warn(("annotation-json", message), col=at_payload)
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _JSONValueError(f"key '{short(key)}' appears twice")
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
        problems = list(node_problems(obj, first_label))
        out.extend(comment.warn(problem) for problem in problems)
        node_id, label = obj.get("id"), obj.get("label")
        if isinstance(node_id, str) and node_id not in first_label:
            first_label[node_id] = short(label.strip() if isinstance(label, str) else node_id)
        if not problems:
            details: dict[str, Any] = {key: obj[key] for key in OPTIONAL_FIELDS if key in obj}
            node = Node(obj["id"], obj["type"], obj["label"].strip(), comment.line, details)
            nodes.append(node)
    return nodes, set(first_label)


def _read_edges(records: list[Record], declared: set[str], out: list[Diagnostic]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple[str, str, str | None]] = set()
    for comment, obj in records:
        problems = edge_problems(obj, declared)
        label = obj["label"].strip() if not problems and "label" in obj else None
        key = (str(obj.get("from")), str(obj.get("to")), label)
        if not problems and key in seen:
            shown = f" labelled '{short(label)}'" if label is not None else ""
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
