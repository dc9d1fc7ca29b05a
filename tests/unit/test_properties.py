"""Properties of the static analysers: no text crashes them; generated relays come out sound."""

from __future__ import annotations

import ast
import builtins
import json
import keyword
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source import admission, lint
from relay_notebook.source.admission import admit_source, check_source, entrypoint_kind
from relay_notebook.source.annotations import parse_annotations
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import NODE_TYPES, FlowGraph
from relay_notebook.source.lint import lint_source

CI = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOKENS = [*"abcdefrunINPUTctxDBOS_0123456789 ()[]{}:.,=+-*@#'\"\\\n\t\x00"]
TOKENS += ["def ", "async ", "await ", "return ", "if ", "for ", "in ", "match ", "case "]
TOKENS += ["@DBOS.workflow()", "@DBOS.step()", "# @relay node ", "# @relay edge ", "    "]
PYTHONISH = st.lists(st.sampled_from(TOKENS), max_size=120).map("".join)

RESERVED = set(dir(builtins)) | {"run", "x", "INPUT", "ctx", "DBOS", "asyncio", "time"}
RESERVED |= {"random", "agent", "mcp", "tool", "vault", "admit", "item", "exc", "secret"}
IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name) and not keyword.issoftkeyword(name) and name not in RESERVED
    )
)

HEADER = """\
import asyncio
import random
import time
from dbos import DBOS
from agentworks import admit, agent, mcp, tool, vault
"""


@dataclass(frozen=True)
class Line:
    text: str
    effect: bool = False  # a nondeterministic effect the lint must flag when in a workflow


@dataclass(frozen=True)
class Relay:
    source: str
    legacy: bool
    effect_lines: tuple[int, ...]  # lines of effects in run's own body
    step_spans: tuple[tuple[int, int], ...]  # first and last line of each step


def indent(lines: list[Line], by: int = 1) -> list[Line]:
    return [Line("    " * by + line.text, line.effect) for line in lines]


@st.composite
def relays(draw: st.DrawFn) -> Relay:
    """A syntactically valid relay built from steps, helpers and random control flow."""
    names = draw(st.lists(IDENTIFIERS, min_size=1, max_size=7, unique=True))
    split = draw(st.integers(0, len(names)))
    steps, helpers = names[:split], names[split:]
    legacy = draw(st.booleans())
    unknown = draw(IDENTIFIERS.filter(lambda name: name not in names))

    def simple() -> list[Line]:
        options = [
            Line("pass"),
            Line(f"x = {unknown}(x)"),
            Line('x = await agent(name="a", system_prompt="s", user_message=str(x))'),
            Line('x = await mcp(server="files", tool="read", arguments={"path": "a"})'),
            Line('secret = vault("TOKEN")'),
            Line("await admit()"),
            Line('return {"x": x}'),
            Line("t = time.time()", effect=True),
            Line("n = random.random()", effect=True),
            Line("await asyncio.sleep(1)", effect=True),
            Line("for item in {1, 2}: pass", effect=True),
        ]
        options += [Line(f"x = await {name}(x)") for name in steps + helpers]
        if steps:
            first, second = draw(st.sampled_from(steps)), draw(st.sampled_from(steps))
            options.append(Line(f"xs = await asyncio.gather({first}(x), {second}(x))"))
            options.append(Line(f"xs = await asyncio.gather(*[{first}(i) for i in range(3)])"))
        if legacy:
            options.append(Line('x = await ctx.call_agent("a", str(x))'))
            options.append(Line('x = await ctx.step("s", lambda: time.time(), arguments={})'))
        return [draw(st.sampled_from(options))]

    def compound(depth: int) -> list[Line]:
        kind = draw(st.sampled_from(["if", "for", "while", "try", "match"]))
        if kind == "if":
            lines = [Line("if x:"), *indent(block(depth + 1))]
            if draw(st.booleans()):
                lines += [Line("elif INPUT.get('k'):"), *indent(block(depth + 1))]
            if draw(st.booleans()):
                lines += [Line("else:"), *indent(block(depth + 1))]
            return lines
        if kind == "for":
            header = draw(st.sampled_from(["for i in range(3):", "for item in INPUT['items']:"]))
            return [Line(header), *indent(block(depth + 1))]
        if kind == "while":
            return [Line("while INPUT.get('again'):"), *indent(block(depth + 1))]
        if kind == "try":
            lines = [Line("try:"), *indent(block(depth + 1))]
            lines += [Line("except Exception as exc:"), *indent(block(depth + 1))]
            if draw(st.booleans()):
                lines += [Line("finally:"), *indent(block(depth + 1))]
            return lines
        return [
            Line("match INPUT.get('kind'):"),
            Line("    case 'a':"),
            *indent(block(depth + 1), 2),
            Line("    case _:"),
            *indent(block(depth + 1), 2),
        ]

    def block(depth: int) -> list[Line]:
        lines: list[Line] = []
        for _ in range(draw(st.integers(1, 3))):
            nested = depth < 3 and draw(st.integers(0, 3)) == 0
            lines += compound(depth) if nested else simple()
        return lines

    out = [Line(text) for text in HEADER.splitlines()]
    if draw(st.booleans()):
        node_id = draw(IDENTIFIERS)
        out.append(Line(f'# @relay node {{"id": "{node_id}", "type": "agent", "label": "A"}}'))
    spans = []
    for name in steps:
        decorator = draw(st.sampled_from(["@DBOS.step()", f'@DBOS.step(name="{name}")']))
        start = len(out) + 2
        out += [Line(""), Line(decorator), Line(f"async def {name}(x):")]
        out += [
            Line("    t = time.time()"),
            Line("    await asyncio.sleep(1)"),
            Line("    return x"),
        ]
        spans.append((start, len(out)))
    for name in helpers:
        out += [Line(""), Line(f"async def {name}(x):"), *indent(block(1)), Line("    return x")]
    if legacy:
        out += [Line(""), Line("async def run(INPUT, ctx):")]
    else:
        decorator = draw(st.sampled_from(["()", "(max_recovery_attempts=3)"]))
        out += [Line(""), Line(f"@DBOS.workflow{decorator}"), Line("async def run(INPUT):")]
    body = [Line("x = INPUT"), *block(0), Line('return {"x": x}')]
    first = len(out) + 1
    out += indent(body)
    effects = tuple(first + i for i, line in enumerate(body) if line.effect)
    source = "\n".join(line.text for line in out) + "\n"
    return Relay(source, legacy, effects, tuple(spans))


def assert_within(diagnostics: list[Diagnostic], source: str) -> None:
    count = len(source.splitlines())
    for diagnostic in diagnostics:
        assert 1 <= diagnostic.line <= max(count, 1), diagnostic
        assert diagnostic.col >= 0, diagnostic


def assert_graph_sound(graph: FlowGraph, source: str) -> None:
    count = len(source.splitlines())
    ids = [node.id for node in graph.nodes]
    assert len(ids) == len(set(ids))
    for node in graph.nodes:
        assert node.type in NODE_TYPES
        assert node.line is None or 1 <= node.line <= count, node
    for edge in graph.edges:
        assert edge.source in ids and edge.target in ids, edge
    json.dumps(graph.to_dict())


@CI
@given(st.one_of(st.text(), PYTHONISH))
def test_no_text_makes_any_analyser_raise(text: str) -> None:
    """Any text at all is analysed without an exception, by every static analyser."""
    diagnostics = check_source(text)
    assert_within([d for d in diagnostics if d.code != "syntax-error"], text)
    admit_source(text)
    lint_source(text)
    entrypoint_kind(text)
    build_flow_graph(text)
    parse_annotations(text)


@CI
@given(relays())
def test_generated_relays_are_admitted_with_sound_diagnostics(relay: Relay) -> None:
    """A generated relay is admitted, and every warning is on a real line under a listed code."""
    ast.parse(relay.source)  # the generator itself must produce valid Python
    diagnostics = check_source(relay.source)
    assert [d for d in diagnostics if d.severity == "error"] == []
    assert entrypoint_kind(relay.source) == ("legacy" if relay.legacy else "workflow")
    assert_within(diagnostics, relay.source)
    assert {d.code for d in diagnostics} <= set(lint.CODES) | set(admission.CODES)
    assert diagnostics == sorted(diagnostics) == check_source(relay.source)


@CI
@given(relays())
def test_generated_relays_flag_every_effect_in_run_and_none_in_steps(relay: Relay) -> None:
    """Each effect written in run's body is warned about at its line; step bodies never are."""
    warned = {d.line for d in lint_source(relay.source)}
    assert set(relay.effect_lines) <= warned
    for start, end in relay.step_spans:
        assert not any(start <= line <= end for line in warned)


@CI
@given(relays())
def test_generated_relays_give_sound_graphs_and_annotations(relay: Relay) -> None:
    """Flow graphs and annotation graphs of generated relays only point at real lines and nodes."""
    graph = build_flow_graph(relay.source, relay="generated")
    assert_graph_sound(graph, relay.source)
    again = build_flow_graph(relay.source, relay="generated")
    assert json.dumps(graph.to_dict()) == json.dumps(again.to_dict())
    result = parse_annotations(relay.source)
    assert_within(result.diagnostics, relay.source)
    if result.graph is not None:
        assert_graph_sound(result.graph, relay.source)
