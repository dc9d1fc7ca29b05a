"""The shipped relay-graph/v1 JSON Schema: valid itself, and strict about what it accepts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from relay_notebook.source import graph as graph_module
from relay_notebook.source.graph import GRAPH_SCHEMA, NODE_TYPES, Edge, FlowGraph, Node

SCHEMA_PATH = Path(graph_module.__file__).parents[1] / "schemas" / "relay-graph-v1.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
VALIDATOR = Draft202012Validator(SCHEMA)


def good_document() -> dict[str, Any]:
    """A laid-out graph with details, labels, notes and waypoints, as ``to_dict`` writes it."""
    graph = FlowGraph(
        relay="invoice",
        nodes=[
            Node("input", "input", "input", line=15, x=60, y=20),
            Node("step-extract", "step", "extract_invoice", line=16, x=60, y=100),
            Node(
                "agent-extract",
                "agent",
                "extract",
                line=6,
                details={"in_step": "step-extract", "tools": ["lookup"], "max_turns": 20},
                x=200,
                y=100,
            ),
            Node("output", "output", "output", x=60, y=180),
        ],
        edges=[
            Edge("input", "step-extract"),
            Edge("step-extract", "agent-extract"),
            Edge("step-extract", "output", "else", points=[(60.0, 120.0), (60.0, 160.0)]),
        ],
        notes=["1 call could not be followed; it is shown as an unresolved node."],
        width=320,
        height=200,
    )
    return graph.to_dict()


def errors(doc: dict[str, Any]) -> list[str]:
    """The schema's complaints about ``doc``, as messages."""
    return [e.message for e in VALIDATOR.iter_errors(doc)]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    """The shipped file is itself a valid JSON Schema of the 2020-12 dialect."""
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(SCHEMA)


def test_schema_names_the_document_version_and_every_node_type() -> None:
    """The schema pins ``relay-graph/v1`` and lists exactly the node types graph.py knows."""
    assert SCHEMA["properties"]["schema"] == {"const": GRAPH_SCHEMA}
    assert SCHEMA["$defs"]["node"]["properties"]["type"]["enum"] == list(NODE_TYPES)


def test_accepts_a_laid_out_document_and_a_minimal_one() -> None:
    """A full document and a bare one (no relay, notes or layout) both validate."""
    assert errors(good_document()) == []
    assert errors(FlowGraph().to_dict()) == []


def test_accepts_run_graph_overlays() -> None:
    """Run graphs may add status, reused, count and attempts to nodes and taken to edges."""
    doc = good_document()
    doc["kind"] = "run"
    doc["nodes"][1].update(status="reused", reused=True, count=2, attempts=[1, 2])
    doc["nodes"][2]["status"] = "not_reached"
    doc["edges"][0]["taken"] = True
    assert errors(doc) == []


def test_documents_read_back_unchanged() -> None:
    """``FlowGraph.from_dict`` of a valid document writes the same document back."""
    doc = good_document()
    assert FlowGraph.from_dict(copy.deepcopy(doc)).to_dict() == doc


@pytest.mark.parametrize(
    "bad_id",
    ["1step", "-step", "step one", "step.one", "", "a" * 65, "stép"],
)
def test_rejects_bad_node_ids_and_edge_ends(bad_id: str) -> None:
    """Ids must start with a letter and hold at most 64 letters, digits, ``_`` and ``-``."""
    node_doc = good_document()
    node_doc["nodes"][0]["id"] = bad_id
    assert errors(node_doc)
    edge_doc = good_document()
    edge_doc["edges"][0]["to"] = bad_id
    assert errors(edge_doc)


def test_accepts_the_longest_id() -> None:
    """A 64-character id is the longest one allowed."""
    doc = good_document()
    doc["nodes"][0]["id"] = "a" * 64
    assert errors(doc) == []


def test_rejects_unknown_node_types_and_statuses() -> None:
    """A node type or run status outside the lists is refused."""
    doc = good_document()
    doc["nodes"][1]["type"] = "function"
    assert errors(doc)
    doc = good_document()
    doc["nodes"][1]["status"] = "done"
    assert errors(doc)


@pytest.mark.parametrize("field", ["id", "type", "label"])
def test_rejects_nodes_missing_a_required_field(field: str) -> None:
    """Every node needs an id, a type and a label."""
    doc = good_document()
    del doc["nodes"][1][field]
    assert any(f"'{field}' is a required property" in m for m in errors(doc))


def test_rejects_empty_labels() -> None:
    """A label is readable text, never empty."""
    doc = good_document()
    doc["nodes"][1]["label"] = ""
    assert errors(doc)


@pytest.mark.parametrize("where", ["document", "node", "edge", "layout"])
def test_rejects_extra_properties(where: str) -> None:
    """No property outside the schema is allowed, at any level."""
    doc = good_document()
    target = {
        "document": doc,
        "node": doc["nodes"][0],
        "edge": doc["edges"][0],
        "layout": doc["layout"],
    }[where]
    target["colour"] = "red"
    assert any("Additional properties are not allowed" in m for m in errors(doc))


def test_rejects_half_positions_and_bad_numbers() -> None:
    """x needs y; lines start at 1; counts are not negative; waypoints are pairs."""
    cases: list[tuple[int, str, Any]] = [
        (0, "y", None),
        (0, "line", 0),
        (1, "count", -1),
        (1, "attempts", ["1"]),
    ]
    for index, key, value in cases:
        doc = good_document()
        if value is None:
            del doc["nodes"][index][key]
        else:
            doc["nodes"][index][key] = value
        assert errors(doc), (key, value)
    doc = good_document()
    doc["edges"][2]["points"] = [[1, 2, 3]]
    assert errors(doc)


def test_rejects_a_wrong_version_or_kind() -> None:
    """The document must say relay-graph/v1 and one of the three kinds."""
    doc = good_document()
    doc["schema"] = "relay-graph/v2"
    assert errors(doc)
    doc = good_document()
    doc["kind"] = "plan"
    assert errors(doc)
