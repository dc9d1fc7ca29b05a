"""The static flow graph: steps, adapters and control flow of a relay, read from its AST only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from relay_notebook.source import graph as graph_module
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.guarantees import GUARANTEES
from tests.relays import relay_source, steps

SCHEMA = json.loads(
    (Path(graph_module.__file__).parents[1] / "schemas" / "relay-graph-v1.schema.json").read_text()
)
VALIDATOR = Draft202012Validator(SCHEMA)

Edges = set[tuple[str, str, str | None]]

INVOICE = relay_source("invoice")

STEPS = "import asyncio\nimport json\nfrom dbos import DBOS\n\n" + steps("a", "b", "c")


def guarantee(kind: str) -> dict[str, str]:
    """A call node's ``details.guarantee`` without retries or hints."""
    badge, text = GUARANTEES[kind]
    return {"kind": kind, "badge": badge, "text": text}


def build(source: str, relay: str | None = None) -> FlowGraph:
    """The flow graph of ``source``, checked against the schema and for dangling edges."""
    graph = build_flow_graph(source, relay=relay)
    VALIDATOR.validate(graph.to_dict())
    ids = [n.id for n in graph.nodes]
    assert len(ids) == len(set(ids))
    assert all(e.source in ids and e.target in ids for e in graph.edges)
    keys = [(e.source, e.target, e.label) for e in graph.edges]
    assert len(keys) == len(set(keys))
    return graph


def relay(body: str, extra: str = "") -> str:
    """A module with steps ``a``, ``b``, ``c``, the ``extra`` definitions and ``run(INPUT)``."""
    return (
        STEPS
        + textwrap.dedent(extra)
        + (
            "\n@DBOS.workflow()\nasync def run(INPUT):\n"
            + textwrap.indent(textwrap.dedent(body), "    ")
        )
    )


def line_of(source: str, fragment: str) -> int:
    """The 1-based line of the first occurrence of ``fragment`` in ``source``."""
    return source[: source.index(fragment)].count("\n") + 1


def edges(graph: FlowGraph) -> Edges:
    """Every edge as a (from, to, label) triple."""
    return {(e.source, e.target, e.label) for e in graph.edges}


def of_type(graph: FlowGraph, kind: str) -> list[str]:
    """Ids of the nodes of one type, in graph order."""
    return [n.id for n in graph.nodes if n.type == kind]


def test_invoice_example_draws_steps_agents_decision_and_both_paths_to_output() -> None:
    """The SPEC §2 relay: extract (asks agent extract), a decision, review (asks agent review)."""
    graph = build(INVOICE, relay="invoice")
    assert graph.relay == "invoice"
    assert [n.id for n in graph.nodes] == [
        "input",
        "step-extract_invoice",
        "agent-extract",
        "decision-L29",
        "step-review",
        "agent-review",
        "output",
    ]
    condition = 'invoice["amount"] > 1000'
    assert edges(graph) == {
        ("input", "step-extract_invoice", None),
        ("step-extract_invoice", "agent-extract", None),
        ("step-extract_invoice", "decision-L29", None),
        ("decision-L29", "step-review", condition),
        ("step-review", "agent-review", None),
        ("step-review", "output", None),
        ("decision-L29", "output", "else"),
    }
    assert graph.node("decision-L29").label == condition
    assert graph.node("step-extract_invoice").line == 28
    assert graph.node("input").details["max_recovery_attempts"] == 3
    extract = graph.node("agent-extract")
    assert (extract.type, extract.label, extract.line) == ("agent", "extract", 8)
    assert extract.details == {
        "in_step": "step-extract_invoice",
        "name": "extract",
        "system_prompt": "Extract invoice fields as JSON.",
        "output_schema": True,
        "guarantee": guarantee("uncertain"),
    }
    assert graph.notes == []


def test_step_details_come_from_the_decorator_and_docstring() -> None:
    """A step shows its DBOS name, literal decorator options and the first docstring line."""
    source = relay(
        "await charge(1)\nawait asyncio.to_thread(sync_fetch, 2)\nsync_fetch(3)\n",
        '''
        @DBOS.step(name="charge-card", retries_allowed=True, max_attempts=3)
        async def charge(x):
            """Charge the card once.

            Uses the idempotency key."""

        @DBOS.step()
        def sync_fetch(x):
            return x
        ''',
    )
    graph = build(source)
    assert of_type(graph, "step") == ["step-charge-card", "step-sync_fetch", "step-sync_fetch-2"]
    charge = graph.node("step-charge-card")
    assert charge.label == "charge-card"
    assert charge.details["function"] == "charge"
    assert charge.details["retries_allowed"] is True
    assert charge.details["max_attempts"] == 3
    assert charge.details["doc"] == "Charge the card once."
    assert graph.node("step-sync_fetch").details["via"] == "asyncio.to_thread"
    assert "via" not in graph.node("step-sync_fetch-2").details


def test_nested_branches_label_each_edge_with_its_condition() -> None:
    """An if inside an if gives two decisions; each branch edge carries its condition or else."""
    graph = build(
        relay("""\
            if INPUT["x"]:
                if INPUT["y"]:
                    await a(1)
                else:
                    await b(2)
            await c(3)
            """)
    )
    outer, inner = of_type(graph, "decision")
    assert edges(graph) >= {
        ("input", outer, None),
        (outer, inner, 'INPUT["x"]'),
        (inner, "step-a", 'INPUT["y"]'),
        (inner, "step-b", "else"),
        ("step-a", "step-c", None),
        ("step-b", "step-c", None),
        (outer, "step-c", "else"),
        ("step-c", "output", None),
    }


def test_elif_chain_is_a_chain_of_decisions_joined_by_else_edges() -> None:
    """if/elif/else: the second decision hangs off the first one's else edge."""
    graph = build(
        relay("""\
            if INPUT["kind"] == "a":
                await a(1)
            elif INPUT["kind"] == "b":
                await b(1)
            else:
                await c(1)
            """)
    )
    first, second = of_type(graph, "decision")
    assert graph.node(second).label == 'INPUT["kind"] == "b"'
    assert edges(graph) >= {
        (first, "step-a", 'INPUT["kind"] == "a"'),
        (first, second, "else"),
        (second, "step-b", 'INPUT["kind"] == "b"'),
        (second, "step-c", "else"),
    }


def test_long_conditions_are_cut_with_an_ellipsis() -> None:
    """A condition longer than 60 characters is shortened in the label, kept whole in details."""
    condition = " and ".join(f'INPUT["flag_{i}"]' for i in range(6))
    graph = build(relay(f"if {condition}:\n    await a(1)\n"))
    decision = graph.node(of_type(graph, "decision")[0])
    assert len(decision.label) == 60 and decision.label.endswith("…")
    assert decision.details["condition"] == condition


def test_match_draws_one_edge_per_case_with_its_pattern_and_guard() -> None:
    """match: a decision on the subject, case edges labelled by pattern, and a no-match edge."""
    graph = build(
        relay("""\
            match INPUT["kind"]:
                case "one":
                    await a(1)
                case "two" | "three" if INPUT["ok"]:
                    await b(1)
            await c(1)
            """)
    )
    (decision,) = of_type(graph, "decision")
    assert graph.node(decision).label == 'match INPUT["kind"]'
    assert edges(graph) >= {
        (decision, "step-a", '"one"'),
        (decision, "step-b", '"two" | "three" if INPUT["ok"]'),
        (decision, "step-c", "no match"),
    }
    exhaustive = build(
        relay(
            'match INPUT["k"]:\n    case 1:\n        await a(1)\n    case _:\n        await b(1)\n'
        )
    )
    assert "no match" not in {e.label for e in exhaustive.edges}


def test_for_loop_with_break_and_continue() -> None:
    """A loop node: the body returns to it, continue goes back, break and done leave it."""
    graph = build(
        relay("""\
            for item in INPUT["items"]:
                if item is None:
                    continue
                await a(item)
                if item == "stop":
                    break
            await b(1)
            """)
    )
    (loop,) = of_type(graph, "loop")
    skip, stop = of_type(graph, "decision")
    assert graph.node(loop).label == 'for item in INPUT["items"]'
    assert edges(graph) >= {
        (loop, skip, None),
        (skip, loop, "item is None"),
        (skip, "step-a", "else"),
        (stop, loop, "else"),
        (stop, "step-b", 'item == "stop"'),
        (loop, "step-b", "done"),
    }


@pytest.mark.parametrize(
    ("body", "label", "after"),
    [
        pytest.param('while INPUT["more"]:\n    await a(1)\nawait b(1)\n', 'while INPUT["more"]',
                     "step-b", id="while-cond"),
        # [await step(x) for x in xs] runs the step repeatedly, so it is drawn as a loop
        pytest.param("out = [await a(x) for x in INPUT['xs']]\n", "for x in INPUT['xs']",
                     "output", id="comprehension"),
    ],
)  # fmt: skip
def test_a_loop_has_a_back_edge_and_a_done_edge(body: str, label: str, after: str) -> None:
    """while cond: and a comprehension awaiting a step: the step flows back to the loop node,
    which leaves on a ``done`` edge."""
    graph = build(relay(body))
    (loop,) = of_type(graph, "loop")
    assert graph.node(loop).label == label
    assert edges(graph) >= {
        (loop, "step-a", None),
        ("step-a", loop, None),
        (loop, after, "done"),
    }


def test_while_true_has_no_done_edge() -> None:
    """while True leaves only through break."""
    forever = build(
        relay("while True:\n    await a(1)\n    if INPUT['x']:\n        break\nawait b(1)\n")
    )
    assert len(of_type(forever, "loop")) == 1
    assert "done" not in {e.label for e in forever.edges}
    assert (of_type(forever, "decision")[0], "step-b", "INPUT['x']") in edges(forever)


def test_try_except_finally() -> None:
    """try: the body flows from the try node, each handler leaves it labelled, finally joins all."""
    graph = build(
        relay("""\
            try:
                await a(1)
            except ValueError as error:
                await b(1)
            except (KeyError, TypeError):
                pass
            finally:
                await c(1)
            """)
    )
    (node,) = of_type(graph, "try")
    assert graph.node(node).details == {
        "handlers": ["ValueError", "(KeyError, TypeError)"],
        "finally": True,
    }
    assert edges(graph) >= {
        (node, "step-a", None),
        (node, "step-b", "except ValueError"),
        (node, "step-c", "except (KeyError, TypeError)"),
        ("step-a", "step-c", None),
        ("step-b", "step-c", None),
        ("step-c", "output", None),
    }


def test_gather_fans_out_and_joins() -> None:
    """asyncio.gather (any alias) opens a parallel node with one branch per awaitable."""
    source = relay("results = await aio.gather(a(1), b(2), c(3))\nawait a(4)\n").replace(
        "import asyncio", "import asyncio as aio"
    )
    graph = build(source)
    (parallel,) = of_type(graph, "parallel")
    assert edges(graph) >= {
        ("input", parallel, None),
        (parallel, "step-a", None),
        (parallel, "step-b", None),
        (parallel, "step-c", None),
        ("step-a", "step-a-2", None),
        ("step-b", "step-a-2", None),
        ("step-c", "step-a-2", None),
    }


def test_gather_over_a_comprehension_is_one_branch_marked_per_item() -> None:
    """gather(*[step(x) for x in xs]) draws the step once with a note that it runs per item."""
    graph = build(relay('await asyncio.gather(*[a(x) for x in INPUT["xs"]])\n'))
    (parallel,) = of_type(graph, "parallel")
    assert edges(graph) >= {(parallel, "step-a", None), ("step-a", "output", None)}
    assert graph.node("step-a").details["note"] == 'one per item of INPUT["xs"]'


def test_early_return_goes_to_output_and_the_rest_continues() -> None:
    """An early return joins the output from its decision; the fall-through reaches later steps."""
    source = relay("""\
        await a(1)
        if INPUT.get("skip"):
            return {"skipped": True}
        await b(1)
        return {"done": True}
        """)
    graph = build(source)
    (decision,) = of_type(graph, "decision")
    assert edges(graph) == {
        ("input", "step-a", None),
        ("step-a", decision, None),
        (decision, "output", 'INPUT.get("skip")'),
        (decision, "step-b", "else"),
        ("step-b", "output", None),
    }
    assert graph.node("output").details["returns"] == [
        line_of(source, 'return {"skipped'),
        line_of(source, 'return {"done'),
    ]


def test_helpers_are_followed_through_two_levels() -> None:
    """Steps called by a helper called by a helper appear inline, at their own lines."""
    source = relay(
        "await outer(INPUT)\nawait c(1)\n",
        """\
        async def outer(x):
            if x["deep"]:
                return await inner(x)
            return None

        def inner(x):
            return b(x)
        """,
    )
    graph = build(source)
    (decision,) = of_type(graph, "decision")
    assert graph.node(decision).line == line_of(source, 'if x["deep"]')
    assert graph.node("step-b").line == line_of(source, "return b(x)")
    assert edges(graph) >= {
        ("input", decision, None),
        (decision, "step-b", 'x["deep"]'),
        ("step-b", "step-c", None),
        (decision, "step-c", "else"),
    }


def test_plain_data_handling_draws_nothing() -> None:
    """Builtins, stdlib, methods on data and helpers without steps (even recursive) add no nodes."""
    source = relay(
        """\
        items = INPUT.get("items", [])
        items.append(len(items))
        print(json.dumps(items), str(items), fmt(items))
        if not items:
            items = []
        for item in items:
            item.update({"seen": True})
        await asyncio.sleep(0)
        await a(items)
        """,
        """\
        def fmt(x):
            if x is None:
                return ""
            return flatten(x)

        def flatten(x):
            if isinstance(x, list):
                return [y for item in x for y in flatten(item)]
            return [x]
        """,
    )
    graph = build(source)
    assert [n.id for n in graph.nodes] == ["input", "step-a", "output"]


def test_recursive_helpers_become_unresolved_nodes() -> None:
    """A helper calling itself is drawn once; the recursive call is unresolved with its reason."""
    source = relay(
        "await walk(3)\n",
        """\
        async def walk(n):
            if n:
                await walk(n - 1)
            await a(n)
        """,
    )
    graph = build(source)
    (node,) = of_type(graph, "unresolved")
    assert graph.node(node).label == "walk"
    assert graph.node(node).details["reason"].startswith("recursive call")
    assert of_type(graph, "step") == ["step-a"]


def test_imported_helpers_are_unresolved_with_their_module() -> None:
    """A call into another module is shown as unresolved, naming the module it comes from."""
    source = relay("total = price(INPUT)\nawait pricing.refresh()\n").replace(
        "import json",
        "import json\nimport helpers.pricing as pricing\nfrom helpers.pricing import price",
    )
    graph = build(source)
    first, second = (graph.node(i) for i in of_type(graph, "unresolved"))
    assert first.label == "price"
    assert first.details["reason"] == (
        "`price` is imported from helpers.pricing; the graph follows only this module's functions"
    )
    assert second.label == "pricing.refresh"
    assert "imported from helpers.pricing" in second.details["reason"]
    assert graph.notes == ["2 calls could not be followed; they are shown as unresolved nodes."]


def test_dynamic_dispatch_is_unresolved() -> None:
    """Calls via a dict, getattr, a lambda, a parameter or an unknown awaited method: unresolved."""
    source = relay(
        """\
        await HANDLERS[INPUT["kind"]](INPUT)
        await getattr(INPUT, "method")()
        pick = lambda x: x
        pick(1)
        await INPUT["client"].fetch()
        await call_with(b)
        await call_with(INPUT["fn"])
        """,
        """\
        HANDLERS = {"a": a}

        async def call_with(fn):
            return await fn(1)
        """,
    )
    graph = build(source)
    reasons = [graph.node(i).details["reason"] for i in of_type(graph, "unresolved")]
    assert len(reasons) == 5
    assert "picks a function from a container" in reasons[0]
    assert "getattr" in reasons[1]
    assert "lambda" in reasons[2]
    assert "method of an object" in reasons[3]
    assert "`fn` is a variable or parameter" in reasons[4]
    assert of_type(graph, "step") == ["step-b"]


def test_child_workflows_are_workflow_nodes() -> None:
    """Calling or starting another @DBOS.workflow draws a workflow node, then its own steps."""
    source = relay(
        "await child(1)\nhandle = await DBOS.start_workflow_async(child, 2)\n",
        '''\
        @DBOS.workflow(name="child-flow")
        async def child(x):
            """Process one item."""
            return await a(x)
        ''',
    )
    graph = build(source)
    assert of_type(graph, "workflow") == ["workflow-child-flow", "workflow-child-flow-2"]
    started = graph.node("workflow-child-flow-2")
    assert started.details["via"] == "DBOS.start_workflow_async"
    assert started.details["doc"] == "Process one item."
    assert of_type(graph, "step") == ["step-a", "step-a-2"]
    assert graph.node("step-a-2").details["in_workflow"] == "workflow-child-flow-2"


def test_import_dbos_and_agentworks_module_spellings() -> None:
    """``import dbos`` and ``import agentworks as aw`` spellings resolve like the short forms."""
    source = """\
import dbos
import agentworks as aw

@dbos.DBOS.step()
async def ask(x):
    return await aw.agent(name="asker", model="small", tools=[lookup, "search"], max_turns=5,
                          mcp=[{"server": "crm", "tools": ["find"]}], replay_safe=True)

@aw.tool
def lookup(key: str) -> str:
    return key

@dbos.DBOS.workflow()
async def run(INPUT):
    await ask(INPUT)
    secret = aw.vault("API_TOKEN")
    await aw.mcp(server="crm", tool="update", arguments={"id": 1})
    await aw.admit()
    return lookup("x")
"""
    graph = build(source)
    assert [n.id for n in graph.nodes] == [
        "input",
        "step-ask",
        "agent-asker",
        "vault-API_TOKEN",
        "mcp-crm-update",
        "admit",
        "tool-lookup",
        "output",
    ]
    assert graph.node("agent-asker").details == {
        "in_step": "step-ask",
        "name": "asker",
        "model": "small",
        "max_turns": 5,
        "replay_safe": True,
        "tools": ["lookup", "search"],
        "mcp": ["crm"],
        "guarantee": guarantee("replay_safe"),
    }
    assert graph.node("vault-API_TOKEN").details == {"secret": "API_TOKEN"}
    assert graph.node("mcp-crm-update").label == "crm/update"
    assert graph.notes == []


def test_adapter_calls_inside_a_step_hang_off_each_call_of_it() -> None:
    """A step's vault, @tool and agent calls, also through a helper, attach to each call site."""
    source = """\
from dbos import DBOS
from agentworks import agent, tool, vault

@tool
def lookup(key):
    return key

def ask(text):
    return agent(name="summarise", user_message=text)

@DBOS.step()
async def summarise(text):
    token = vault("API_TOKEN")
    lookup("x")
    return await ask(text)

@DBOS.workflow()
async def run(INPUT):
    first = await summarise(INPUT["a"])
    return await summarise(first)
"""
    graph = build(source)
    attached = ["vault-API_TOKEN", "tool-lookup", "agent-summarise"]
    second = [f"{node_id}-2" for node_id in attached]
    assert [n.id for n in graph.nodes] == [
        "input",
        "step-summarise",
        *attached,
        "step-summarise-2",
        *second,
        "output",
    ]
    assert edges(graph) == {
        ("input", "step-summarise", None),
        *(("step-summarise", node_id, None) for node_id in attached),
        ("step-summarise", "step-summarise-2", None),
        *(("step-summarise-2", node_id, None) for node_id in second),
        ("step-summarise-2", "output", None),
    }
    assert graph.node("agent-summarise-2").details["in_step"] == "step-summarise-2"
    assert graph.node("agent-summarise").line == line_of(source, "return agent(")


def test_adapter_aliases_are_recognised() -> None:
    """``from agentworks import agent as ask`` still draws an agent node."""
    source = "from agentworks import agent as ask\nfrom dbos import DBOS\n\n" + (
        "@DBOS.workflow()\nasync def run(INPUT):\n    return await ask(name='triage')\n"
    )
    graph = build(source)
    assert [(n.id, n.type) for n in graph.nodes] == [
        ("input", "input"),
        ("agent-triage", "agent"),
        ("output", "output"),
    ]


def test_legacy_ctx_program() -> None:
    """run(INPUT, ctx): ctx.vault, ctx.call_agent, ctx.step and ctx.call_mcp become typed nodes."""
    source = """\
async def charge(arguments):
    return {"ok": True}

async def notify(ctx, who):
    return await ctx.call_agent(name="notify", user_message=who)

async def run(INPUT, ctx):
    key = ctx.vault("STRIPE_KEY")
    found = await ctx.call_agent(name="extract", system_prompt="Extract.", messages=["a", "b"])
    if found["total"] > 0:
        await ctx.step("charge", charge, arguments={"total": found["total"]}, replay_safe=True)
    await ctx.call_mcp(server="crm", tool="log", arguments={})
    await notify(ctx, "ops")
    ctx.variables.get("region")
    return found
"""
    graph = build(source)
    assert [(n.id, n.type) for n in graph.nodes] == [
        ("input", "input"),
        ("vault-STRIPE_KEY", "vault"),
        ("agent-extract", "agent"),
        ("decision-L10", "decision"),
        ("step-charge", "step"),
        ("mcp-crm-log", "mcp"),
        ("agent-notify", "agent"),
        ("output", "output"),
    ]
    assert graph.node("input").details["legacy"] is True
    assert graph.node("step-charge").details["replay_safe"] is True
    assert graph.node("agent-extract").details["messages"] == ["a", "b"]
    assert graph.node("agent-notify").line == 5
    assert graph.notes == []


def test_syntax_error_gives_an_empty_graph_with_a_note() -> None:
    """Unparsable source never raises: no nodes, and a note naming the line."""
    graph = build("async def run(INPUT):\n    return (\n", relay="broken")
    assert graph.nodes == [] and graph.edges == []
    assert len(graph.notes) == 1
    assert graph.notes[0].startswith("The relay source does not parse (line 2, column")


def test_missing_entrypoint_gives_input_and_output_with_a_note() -> None:
    """A module without run() draws just input and output, and says why."""
    graph = build("from dbos import DBOS\n\nasync def main(INPUT):\n    return 1\n")
    assert [n.id for n in graph.nodes] == ["input", "output"]
    assert graph.edges == []
    assert "no module-level `run` entrypoint" in graph.notes[0]


def test_undecorated_run_is_drawn_with_a_note() -> None:
    """async def run(INPUT) without @DBOS.workflow is still drawn, with a note saying so."""
    graph = build("async def run(INPUT):\n    return INPUT\n")
    assert edges(graph) == {("input", "output", None)}
    assert "not decorated with @DBOS.workflow()" in graph.notes[0]


def test_the_same_source_always_gives_byte_identical_json() -> None:
    """Two builds of one relay serialize to the same bytes."""
    source = relay(
        "for x in INPUT['xs']:\n    await asyncio.gather(a(x), b(x))\nawait price(1)\n",
        "from pricing import price\n",
    )
    first = json.dumps(build(source).to_dict())
    second = json.dumps(build(source).to_dict())
    assert first == second


def test_json_is_identical_across_processes_with_different_hash_seeds() -> None:
    """Set and dict hashing never leaks into the output: other processes write the same bytes."""
    script = (
        "import json, sys\n"
        "from relay_notebook.source.flow import build_flow_graph\n"
        "print(json.dumps(build_flow_graph(sys.stdin.read()).to_dict()))\n"
    )
    source = relay(
        "if INPUT['x']:\n    await asyncio.gather(a(1), b(2))\nawait price(1)\nawait c(3)\n",
        "from pricing import price\n",
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            input=source,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).resolve().parents[2],
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert outputs == {json.dumps(build(source).to_dict()) + "\n"}


def test_a_parsed_module_can_be_given_instead_of_text() -> None:
    """build_flow_graph accepts an ast.Module and draws the same nodes and edges."""
    import ast

    from_text = build(INVOICE)
    from_tree = build_flow_graph(ast.parse(INVOICE))
    assert [n.id for n in from_tree.nodes] == [n.id for n in from_text.nodes]
    assert edges(from_tree) == {
        (s, t, label.replace('"', "'") if label else label) for s, t, label in edges(from_text)
    }


SNIPPETS = [
    "from dbos import DBOS",
    "from agentworks import agent, mcp",
    "import asyncio",
    "@DBOS.step()",
    "@DBOS.workflow()",
    "async def run(INPUT):",
    "async def s(x):",
    "def helper(x):",
    "return await s(x)",
    "return helper(x)",
    "if INPUT['a']:",
    "elif x > 1:",
    "else:",
    "for x in INPUT['xs']:",
    "while x:",
    "break",
    "continue",
    "try:",
    "except ValueError:",
    "finally:",
    "match x:",
    "case 1:",
    "case _:",
    "await asyncio.gather(s(1), helper(2))",
    "x = await agent(name='a', tools=[helper])",
    "await mcp(server='s', tool='t')",
    "handlers[x](1)",
    "pass",
    "raise ValueError(x)",
    "x = [await s(i) for i in x]",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(SNIPPETS)), max_size=25))
def test_any_text_builds_a_valid_document(lines: list[tuple[int, str]]) -> None:
    """Whatever the text, parsable or not, the result is a schema-valid document."""
    source = "\n".join("    " * depth + line for depth, line in lines)
    build(source)


@pytest.mark.parametrize("source", ["", "\x00", "run = 1", "def run(:", "class run: pass"])
def test_odd_inputs_never_raise(source: str) -> None:
    """Empty text, null bytes and non-function ``run`` names give valid documents."""
    build(source)
