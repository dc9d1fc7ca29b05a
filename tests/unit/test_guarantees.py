"""Guarantee badges read from the code: what DBOS promises for each call, on the flow graph."""

from __future__ import annotations

import textwrap

from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.svg import guarantee_tag, render_svg

SOURCE = textwrap.dedent(
    """
    import requests
    from dbos import DBOS
    from agentworks import agent


    @DBOS.step(retries_allowed=True, max_attempts=4, interval_seconds=2)
    def charge(order):
        return requests.post("https://pay.example", json=order).json()


    @DBOS.step()
    def refund(order, idempotency_key):
        return requests.post("https://pay.example/refund", json=order,
                             headers={"Idempotency-Key": idempotency_key}).json()


    @DBOS.step()
    def price(x):
        return x * 2


    @DBOS.workflow()
    async def run(INPUT):
        p = price(INPUT["x"])
        charge({"p": p})
        refund({"p": p}, "order-1")
        await agent(name="clerk", user_message="summarise", replay_safe=True)
        await agent(name="writer", user_message="draft")
        await agent(name="fetcher", user_message="fetch", recovery="restart")
        return p
    """
)


def _graph() -> FlowGraph:
    return build_flow_graph(SOURCE, relay="pay")


def test_each_call_node_says_what_dbos_guarantees() -> None:
    """Steps run at least once (with their retry settings), agent calls are uncertain unless
    replay_safe, recovery="restart" agents are journaled; input and output carry nothing."""
    graph = _graph()
    kinds = {n.id: n.details.get("guarantee", {}).get("kind") for n in graph.nodes}
    assert kinds == {
        "input": None,
        "step-price": "at_least_once",
        "step-charge": "at_least_once",
        "step-refund": "at_least_once",
        "agent-clerk": "replay_safe",
        "agent-writer": "uncertain",
        "agent-fetcher": "journaled",
        "output": None,
    }
    charge = graph.node("step-charge").details["guarantee"]
    assert charge["retries"] == "retried on an error: up to 4 attempts, 2 s apart (×2)"
    price = graph.node("step-price").details["guarantee"]
    assert price["retries"] == "not retried on an error (retries_allowed is off)"
    assert "uncertain on crash" in graph.node("agent-writer").details["guarantee"]["text"]


def test_a_service_call_without_an_idempotency_key_gets_a_hint() -> None:
    """charge posts to a service and takes no key: hinted; refund takes idempotency_key and
    price calls nothing: no hint."""
    graph = _graph()
    hint = graph.node("step-charge").details["guarantee"]["hint"]
    assert hint.startswith("charge calls a service over the network and takes no idempotency key")
    assert "hint" not in graph.node("step-refund").details["guarantee"]
    assert "hint" not in graph.node("step-price").details["guarantee"]


def test_the_drawing_carries_one_tag_per_call_node() -> None:
    """The SVG has a tag on each call node with its badge text; a body the record shows ran
    twice turns the tag into "ran again"."""
    graph = layout_graph(_graph())
    svg = render_svg(graph)
    assert svg.count('class="relay-guarantee ') == 6
    assert "relay-guarantee--uncertain" in svg and ">?</text>" in svg
    step = graph.node("step-price")
    assert guarantee_tag(step) == ("≥1×", "#475569", "at_least_once")
    step.details["guarantee"]["ran_again"] = ["price#1"]
    assert guarantee_tag(step) == ("≥1× · ran again ×1", "#b91c1c", "at_least_once")
