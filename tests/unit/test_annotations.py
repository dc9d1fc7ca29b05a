"""Legacy `# @relay` annotations: what draws a graph, and the guidance an invalid set gets."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source.annotations import (
    CODES,
    MAX_EDGES,
    MAX_NODES,
    AnnotationResult,
    parse_annotations,
)

INVOICE = textwrap.dedent(
    """\
    # @relay node {"id":"extract","type":"agent","label":"Extract invoice","tools":["lookup"]}
    # @relay node {"id":"review","type":"agent","label":"Review large invoice"}
    # @relay node {"id":"result","type":"output","label":"Return invoice"}
    # @relay edge {"from":"extract","to":"review","label":"Amount > 1000"}
    # @relay edge {"from":"extract","to":"result","label":"Amount <= 1000"}
    # @relay edge {"from":"review","to":"result"}

    async def run(INPUT, ctx):
        invoice = await ctx.call_agent(name="extract", user_message=INPUT["text"])
        return invoice
    """
)


def node(node_id: object = "a", **fields: object) -> str:
    """One node annotation line with sensible defaults for type and label."""
    payload = {"id": node_id, "type": "script", "label": f"Step {node_id}", **fields}
    return "# @relay node " + json.dumps(payload)


def edge(source: str, target: str, **fields: object) -> str:
    """One edge annotation line."""
    return "# @relay edge " + json.dumps({"from": source, "to": target, **fields})


def parse(*lines: str) -> AnnotationResult:
    """Parse a source made of ``lines``."""
    return parse_annotations("\n".join(lines) + "\n")


def codes(result: AnnotationResult) -> list[str]:
    """The codes of ``result``'s diagnostics, in order."""
    return [d.code for d in result.diagnostics]


def only(result: AnnotationResult, code: str) -> Diagnostic:
    """The single diagnostic of ``result``, which must have ``code`` and withhold the graph."""
    assert codes(result) == [code], result.diagnostics
    assert result.graph is None
    assert result.found
    return result.diagnostics[0]


# --- a valid set draws the whole graph -------------------------------------------------------


def test_valid_annotations_draw_every_node_and_edge_in_declaration_order() -> None:
    """The documented invoice example becomes a graph with its nodes, edges and conditions."""
    result = parse_annotations(INVOICE, relay="invoice")
    assert result.found and result.diagnostics == []
    assert result.graph is not None
    doc = result.graph.to_dict()
    assert doc["kind"] == "annotations" and doc["relay"] == "invoice"
    assert [(n["id"], n["type"], n["label"], n["line"]) for n in doc["nodes"]] == [
        ("extract", "agent", "Extract invoice", 1),
        ("review", "agent", "Review large invoice", 2),
        ("result", "output", "Return invoice", 3),
    ]
    assert doc["nodes"][0]["details"] == {"tools": ["lookup"]}
    assert doc["edges"] == [
        {"from": "extract", "to": "review", "label": "Amount > 1000"},
        {"from": "extract", "to": "result", "label": "Amount <= 1000"},
        {"from": "review", "to": "result"},
    ]


def test_same_source_gives_byte_identical_json() -> None:
    """Parsing the same text twice yields the same JSON document, byte for byte."""
    first = parse_annotations(INVOICE).graph
    second = parse_annotations(INVOICE).graph
    assert first is not None and second is not None
    assert json.dumps(first.to_dict()) == json.dumps(second.to_dict())


def test_optional_fields_become_details_in_a_fixed_order() -> None:
    """Optional fields are kept as details in one fixed order, whatever order they were written."""
    fields = {
        "call": "extract_v2",
        "mcp": ["billing", {"server": "crm", "tools": ["find_customer"]}],
        "skills": ["invoices"],
        "tools": ["lookup_customer"],
        "model": "gpt-5",
        "messages": ["First read it.", "Then extract it."],
        "user_message": "The invoice text.",
        "system_prompt": "Extract invoice fields as JSON.",
        "output": "Invoice JSON",
        "input": "Invoice text",
        "description": "Reads the invoice.",
    }
    result = parse(node("extract", **fields))
    assert result.graph is not None
    details = result.graph.node("extract").details
    assert details == fields
    assert list(details) == [
        "description",
        "input",
        "output",
        "system_prompt",
        "user_message",
        "messages",
        "model",
        "tools",
        "skills",
        "mcp",
        "call",
    ]


def test_labels_are_stripped_of_surrounding_spaces() -> None:
    """A label written with padding is shown without it, on nodes and edges."""
    result = parse(node("a", label="  Extract  "), node("b"), edge("a", "b", label=" yes "))
    assert result.graph is not None
    assert result.graph.node("a").label == "Extract"
    assert result.graph.edges[0].label == "yes"


def test_edges_may_name_nodes_declared_further_down() -> None:
    """An edge written before its nodes still resolves, because ends are checked after reading."""
    result = parse(edge("start", "finish"), node("start"), node("finish"))
    assert result.diagnostics == []
    assert result.graph is not None
    assert [(e.source, e.target) for e in result.graph.edges] == [("start", "finish")]


def test_indented_standalone_comments_count() -> None:
    """An annotation indented inside a function body is still a standalone comment."""
    source = "async def run(INPUT, ctx):\n    " + node("a") + "\n    return {}\n"
    result = parse_annotations(source)
    assert result.graph is not None and result.graph.node("a").line == 2


# --- where annotations live -----------------------------------------------------------------


def test_source_without_annotations_has_no_graph_and_no_warnings() -> None:
    """A native relay with no annotations is not a problem: no graph, no diagnostics."""
    result = parse_annotations("from dbos import DBOS\n\n# an ordinary comment\nx = 1\n")
    assert result == AnnotationResult(graph=None, diagnostics=[], found=False)


def test_annotations_inside_strings_and_docstrings_define_nothing() -> None:
    """Quoted examples in a docstring or a string literal are documentation, not annotations."""
    source = textwrap.dedent(
        f'''\
        """Example:

        {node("quoted")}
        """
        EXAMPLE = '{edge("x", "y")}'
        '''
    )
    assert parse_annotations(source) == AnnotationResult(graph=None, diagnostics=[], found=False)


def test_quoted_examples_do_not_join_a_real_graph() -> None:
    """Real annotations next to a quoted example draw only the real nodes."""
    source = f'def helper():\n    """{node("quoted")}"""\n\n{node("real")}\n'
    result = parse_annotations(source)
    assert result.graph is not None
    assert [n.id for n in result.graph.nodes] == ["real"]


def test_annotation_after_code_on_the_same_line_is_flagged() -> None:
    """A trailing `# @relay node` is not standalone, so the user is told to move it."""
    result = parse("x = 1  " + node("a"))
    diagnostic = only(result, "annotation-placement")
    assert diagnostic.line == 1 and diagnostic.col == 7
    assert "line of its own" in diagnostic.message


def test_untokenizable_source_reports_instead_of_raising() -> None:
    """A file cut off inside a string gets one warning at the string, and no graph."""
    source = node("a") + '\nx = """never closed\n'
    diagnostic = only(parse_annotations(source), "annotation-tokenize")
    assert diagnostic.line == 2
    assert "multi-line string" in diagnostic.message


def test_untokenizable_source_without_annotations_stays_quiet() -> None:
    """Broken Python with no `# @relay` comment is another module's concern: no warning here."""
    result = parse_annotations("def run(:\n    x = (\n")
    assert result == AnnotationResult(graph=None, diagnostics=[], found=False)


@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text: str) -> None:
    """Whatever the user typed, parsing returns a result whose diagnostics are all warnings."""
    result = parse_annotations("# @relay node {}\n" + text)
    assert all(d.severity == "warning" and d.code in CODES for d in result.diagnostics)
    assert (result.graph is None) or not result.diagnostics


def test_source_is_never_executed(tmp_path: Path) -> None:
    """Top-level code that would write a file is only read, never run."""
    marker = tmp_path / "executed"
    source = f"open({str(marker)!r}, 'w').write('ran')\n{node('a')}\n"
    assert parse_annotations(source).graph is not None
    assert not marker.exists()


# --- malformed comments ---------------------------------------------------------------------


def test_unknown_keyword_suggests_the_right_one() -> None:
    """`# @relay nod` is reported on its line with a nudge towards `node`."""
    diagnostic = only(parse("x = 1", '# @relay nod {"id": "a"}'), "annotation-keyword")
    assert diagnostic.line == 2
    assert "got 'nod'" in diagnostic.message and "did you mean 'node'?" in diagnostic.message


def test_bare_relay_comment_asks_for_a_keyword() -> None:
    """A lone `# @relay` says that `node` or `edge` is expected."""
    diagnostic = only(parse("# @relay"), "annotation-keyword")
    assert "Expected 'node' or 'edge'" in diagnostic.message and "got nothing" in diagnostic.message


def test_malformed_json_points_at_the_broken_character() -> None:
    """Single-quoted JSON is reported on its line, at the column where decoding failed."""
    diagnostic = only(parse("", "# @relay node {'id': 'a'}"), "annotation-json")
    assert (diagnostic.line, diagnostic.col) == (2, 15)
    assert "double-quoted" in diagnostic.message


def test_missing_payload_is_reported() -> None:
    """`# @relay edge` with nothing after it asks for the JSON object."""
    diagnostic = only(parse("# @relay edge"), "annotation-json")
    assert "got nothing" in diagnostic.message and '"from": "extract"' in diagnostic.message


def test_payload_must_be_an_object() -> None:
    """A JSON list where an object belongs is named in the message."""
    diagnostic = only(parse('# @relay node ["a", "agent"]'), "annotation-json")
    assert "Expected a JSON object" in diagnostic.message and "got a list" in diagnostic.message


def test_repeated_json_keys_are_rejected() -> None:
    """A key written twice would silently lose one value, so it is refused."""
    line = '# @relay node {"id": "a", "id": "b", "type": "script", "label": "A"}'
    assert "key 'id' appears twice" in only(parse(line), "annotation-json").message


def test_non_standard_json_constants_are_rejected() -> None:
    """NaN is not JSON, even though Python's decoder would accept it."""
    line = '# @relay node {"id": "a", "type": "script", "label": "A", "model": NaN}'
    assert "NaN" in only(parse(line), "annotation-json").message


# --- node rules -----------------------------------------------------------------------------


def test_node_id_must_start_with_a_letter_and_gets_a_rename_suggestion() -> None:
    """An id like '9a' is rejected with the rule and a usable replacement."""
    message = only(parse(node("9a")), "annotation-node-id").message
    assert "'9a' must be a string that starts with a letter" in message
    assert "e.g. 'n9a'" in message


def test_node_id_rejects_spaces_and_overlong_ids_but_accepts_64_characters() -> None:
    """Ids with spaces or over 64 characters are refused; 64 letters, '_' and '-' are fine."""
    assert codes(parse(node("my node"))) == ["annotation-node-id"]
    assert codes(parse(node("a" * 65))) == ["annotation-node-id"]
    ok = parse(node("a" * 62 + "_-"))
    assert ok.graph is not None and ok.graph.nodes[0].id == "a" * 62 + "_-"


def test_node_id_must_be_present_and_a_string() -> None:
    """A missing id and a numeric id are each reported, the latter with its JSON type."""
    missing = '# @relay node {"type": "script", "label": "Load rows"}'
    assert '"id": "load_rows"' in only(parse(missing), "annotation-node-id").message
    assert "number 7" in only(parse(node(7)), "annotation-node-id").message


def test_duplicate_node_ids_are_rejected() -> None:
    """A second node with the same id is reported on its own line, naming the first one."""
    result = parse(node("a", label="Fetch"), node("a", label="Again"))
    diagnostic = only(result, "annotation-duplicate-id")
    assert diagnostic.line == 2
    assert "labelled 'Fetch'" in diagnostic.message and "'a-2'" in diagnostic.message


def test_node_type_must_be_one_of_the_legacy_types() -> None:
    """Flow-graph types such as 'step' are not annotation types; the allowed ones are listed."""
    message = only(parse(node("a", type="step")), "annotation-node-type").message
    assert "type 'step', expected one of input, agent, script, decision, output" in message


def test_misspelled_node_type_gets_a_suggestion() -> None:
    """'agnet' is close enough to 'agent' to suggest it."""
    message = only(parse(node("a", type="agnet")), "annotation-node-type").message
    assert "did you mean 'agent'?" in message


def test_node_type_is_required() -> None:
    """A node without a type says so."""
    line = '# @relay node {"id": "a", "label": "A"}'
    assert "has no 'type'" in only(parse(line), "annotation-node-type").message


def test_node_label_is_required_and_a_label_is_suggested() -> None:
    """A node without a label gets one suggested from its id."""
    line = '# @relay node {"id": "load_rows", "type": "script"}'
    message = only(parse(line), "annotation-label").message
    assert "Node 'load_rows' has no 'label'" in message and '"label": "Load rows"' in message


def test_blank_long_multiline_or_non_text_labels_are_rejected() -> None:
    """Whitespace, more than 200 characters, line breaks and numbers are not readable labels."""
    for bad in ("   ", "x" * 201, "two\nlines", 5):
        assert codes(parse(node("a", label=bad))) == ["annotation-label"], bad
    assert (
        "201 characters long, expected at most 200"
        in parse(node("a", label="x" * 201)).diagnostics[0].message
    )
    assert parse(node("a", label="x" * 200)).graph is not None


def test_unknown_node_fields_are_rejected_with_a_suggestion() -> None:
    """A field outside the format, such as 'prompt', is named and the close match offered."""
    message = only(parse(node("a", prompt="Hi")), "annotation-field").message
    assert "unknown field 'prompt'" in message and "did you mean 'system_prompt'?" in message


def test_optional_fields_must_have_their_json_types() -> None:
    """Text fields need strings, name lists need lists of names, mcp needs servers."""
    bad = {
        "description": ["not", "text"],
        "model": 4,
        "call": "  ",
        "messages": ["ok", 3],
        "skills": [""],
        "mcp": [{"server": "crm", "tool": "x"}],
    }
    for key, value in bad.items():
        result = parse(node("a", **{key: value}))
        assert codes(result) == ["annotation-field-type"], key
        assert f"The '{key}' of node 'a' must be" in result.diagnostics[0].message


def test_a_tool_name_given_as_a_string_is_shown_as_a_list() -> None:
    """'tools' written as one string gets the exact list spelling to paste."""
    message = only(parse(node("a", tools="lookup")), "annotation-field-type").message
    assert "got 'lookup'" in message and 'write it as "tools": ["lookup"]' in message


# --- edge rules -----------------------------------------------------------------------------


def test_edge_to_an_undeclared_node_is_rejected_with_a_suggestion() -> None:
    """A dangling edge names the missing id, the declared ids and the likely typo."""
    diagnostic = only(
        parse(node("review"), node("done"), edge("reveiw", "done")), "annotation-edge-end"
    )
    assert diagnostic.line == 3
    assert "starts at 'reveiw'" in diagnostic.message
    assert "did you mean 'review'?" in diagnostic.message
    assert "declared ids: done, review" in diagnostic.message


def test_edge_needs_both_ends() -> None:
    """An edge without 'to' says which end is missing."""
    line = '# @relay edge {"from": "a"}'
    assert "has no 'to'" in only(parse(node("a"), line), "annotation-edge-end").message


def test_unknown_edge_fields_are_rejected() -> None:
    """A misspelled 'label' on an edge is refused with the right spelling offered."""
    message = only(parse(node("a"), node("b"), edge("a", "b", lable="yes")), "annotation-field")
    assert "did you mean 'label'?" in message.message


def test_edge_label_must_be_text() -> None:
    """A numeric edge label is refused."""
    assert codes(parse(node("a"), node("b"), edge("a", "b", label=1000))) == ["annotation-label"]


def test_identical_edges_are_rejected_but_different_labels_are_fine() -> None:
    """The same from, to and label twice is an error; the same ends with other labels are not."""
    ok = parse(node("a"), node("b"), edge("a", "b", label="yes"), edge("a", "b", label="no"))
    assert ok.graph is not None and len(ok.graph.edges) == 2
    diagnostic = only(
        parse(node("a"), node("b"), edge("a", "b"), edge("a", "b")), "annotation-duplicate-edge"
    )
    assert diagnostic.line == 4 and "a -> b" in diagnostic.message


# --- limits ---------------------------------------------------------------------------------


def test_up_to_200_nodes_are_drawn_and_201_are_refused() -> None:
    """The node limit is inclusive, and the first node past it carries the warning."""
    nodes = [node(f"n{i}") for i in range(MAX_NODES)]
    drawn = parse(*nodes).graph
    assert drawn is not None and len(drawn.nodes) == MAX_NODES
    diagnostic = only(parse(*nodes, node("extra")), "annotation-too-many-nodes")
    assert (
        diagnostic.line == MAX_NODES + 1 and "201 nodes, expected at most 200" in diagnostic.message
    )


def test_up_to_400_edges_are_drawn_and_401_are_refused() -> None:
    """The edge limit is inclusive, and the first edge past it carries the warning."""
    nodes = [node(f"n{i}") for i in range(21)]
    edges = [edge(f"n{i}", f"n{j}") for i in range(21) for j in range(21) if i != j]
    drawn = parse(*nodes, *edges[:MAX_EDGES]).graph
    assert drawn is not None and len(drawn.edges) == MAX_EDGES
    diagnostic = only(parse(*nodes, *edges[: MAX_EDGES + 1]), "annotation-too-many-edges")
    assert diagnostic.line == len(nodes) + MAX_EDGES + 1


# --- guidance for an invalid set ------------------------------------------------------------


BROKEN = [
    node("9a"),
    node("b", type="step"),
    node("c", label=" "),
    node("b"),
    "# @relay nod {}",
    "# @relay node {oops}",
    edge("b", "zzz"),
    edge("b", "c", colour="red"),
    node("d", tools="x"),
]


def test_an_invalid_set_gets_every_problem_at_once_and_no_partial_graph() -> None:
    """All problems are reported together in line order, and no graph is drawn."""
    result = parse(*BROKEN)
    assert result.graph is None and result.found
    assert [(d.line, d.code) for d in result.diagnostics] == [
        (1, "annotation-node-id"),
        (2, "annotation-node-type"),
        (3, "annotation-label"),
        (4, "annotation-duplicate-id"),
        (5, "annotation-keyword"),
        (6, "annotation-json"),
        (7, "annotation-edge-end"),
        (8, "annotation-field"),
        (9, "annotation-field-type"),
    ]


def test_every_diagnostic_is_a_warning_sentence_with_a_documented_code() -> None:
    """Annotations never block: each diagnostic is a warning, one sentence, code in CODES."""
    result = parse(*BROKEN, "x = 1  " + node("z"), "# @relay node")
    assert result.diagnostics
    for diagnostic in result.diagnostics:
        assert diagnostic.severity == "warning"
        assert diagnostic.code in CODES
        assert diagnostic.message[0].isupper() and diagnostic.message.endswith(".")
        assert diagnostic.format().startswith(f"relay.py:{diagnostic.line}:")


def test_codes_are_kebab_case_and_described() -> None:
    """Every code is `annotation-...` kebab-case with a one-line description."""
    for code, description in CODES.items():
        assert re.fullmatch(r"annotation(-[a-z]+)+", code)
        assert description.endswith(".") and "\n" not in description
