"""Framework step names, the price table, a fork's rebuilt model answer, agents in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentworks.frameworks import step_role
from relay_notebook.errors import InvalidInputError
from relay_notebook.history.log_records import StepCall
from relay_notebook.history.run_path import walk_calls
from relay_notebook.runner.framework_answers import edited_answer
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.workspace.prices import load_prices


def test_step_names_say_which_calls_are_model_requests_and_mcp_calls() -> None:
    """Pydantic AI's and the Agents SDK's step names; anything else is a plain step."""
    role = step_role("clerk__model.request")
    assert role is not None and (role.kind, role.framework, role.owner) == (
        "model",
        "pydantic_ai",
        "clerk",
    )
    mcp = step_role("clerk__mcp_server__orders.call_tool")
    assert mcp is not None and (mcp.kind, mcp.owner) == ("mcp", "clerk/orders")
    assert step_role("clerk__mcp_server__orders.get_tools") is None
    assert step_role("_model_call_step") is not None
    assert step_role("_model_call_step", "relay") is None  # a relay's own step of that name
    assert step_role("charge") is None and step_role("a__b") is None


def test_prices_match_by_name_and_prefix_with_the_workspace_over_the_shipped(
    tmp_path: Path,
) -> None:
    """Shipped prices are dated; a workspace entry replaces one model's; prefixes match."""
    shipped = load_prices(None)
    assert shipped.as_of and shipped.price_of("openai:gpt-4o-2024-08-06") == (2.5, 10.0)
    assert shipped.price_of("gpt-4o-mini") == (0.15, 0.6)
    assert shipped.price_of("no-such-model") is None
    (tmp_path / "prices.yaml").write_text("as_of: 2027-01-01\nmodels:\n  gpt-4o: {input: 1}\n")
    mine = load_prices(tmp_path)
    assert mine.as_of == "2027-01-01" and mine.price_of("gpt-4o") == (1.0, 0.0)
    assert mine.cost("gpt-4o", 1_000_000, 5) == pytest.approx(1.0)
    assert mine.cost("unknown", 10, 10) is None


def test_a_fork_answer_rebuilds_a_pydantic_ai_response() -> None:
    """Text becomes the response's one text part; tool calls become tool-call parts."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.usage import RequestUsage

    saved = ModelResponse(
        parts=[TextPart("old")], model_name="m", usage=RequestUsage(input_tokens=3)
    )
    new = edited_answer("clerk__model.request", saved, "new answer")
    assert [p.content for p in new.parts] == ["new answer"]
    assert new.model_name == "m" and new.usage.input_tokens == 3
    calls = edited_answer(
        "clerk__model.request", saved, {"tool_calls": [{"tool": "lookup", "args": {"sku": "B"}}]}
    )
    [part] = calls.parts
    assert isinstance(part, ToolCallPart) and part.args == {"sku": "B"}
    with pytest.raises(InvalidInputError, match="not a model answer"):
        edited_answer("clerk__model.request", saved, {"answer": 1})
    assert edited_answer("charge", 5, 7) == 7


def test_a_fork_answer_rebuilds_an_agents_sdk_response() -> None:
    """The Agents SDK's response gets a message with the text, its usage kept."""
    from agents import ModelResponse, Usage

    saved = ModelResponse(output=[], usage=Usage(requests=1, input_tokens=9), response_id=None)
    new = edited_answer("_model_call_step", saved, "hello")
    assert new.output[0].content[0].text == "hello" and new.usage.input_tokens == 9


MCP_RELAY = """
from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.mcp import MCPServerStdio

orders = MCPServerStdio("python", args=["orders.py"], id="orders")
agent = Agent("openai:gpt-4o", name="clerk", toolsets=[MCPServerStdio("x", id="orders")])
dbos_agent = DBOSAgent(agent, name="shop_clerk")


@DBOS.workflow()
async def run(INPUT):
    return (await dbos_agent.run(INPUT)).output
"""


def test_the_graph_names_an_agents_mcp_servers_and_their_steps() -> None:
    """DBOSAgent's own name prefixes the steps; an MCP toolset is listed by its id."""
    [node] = [n for n in build_flow_graph(MCP_RELAY).nodes if n.type == "agent"]
    assert node.details["mcp"] == ["orders"]
    assert node.details["model"] == "openai:gpt-4o"
    assert node.details["steps"] == [
        "shop_clerk__model.request",
        "shop_clerk__mcp_server__orders.call_tool",
    ]
    assert node.details["guarantee"]["kind"] == "at_least_once"


AGENT_THEN_STEP = """
from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability

agent = Agent("test", name="clerk", capabilities=[DBOSDurability()])


@agent.tool_plain
@DBOS.step()
async def stock(sku: str) -> str:
    return sku


@DBOS.step()
async def notify(text):
    return text


@DBOS.workflow()
async def run(INPUT):
    result = await agent.run(INPUT)
    return await notify(result.output)
"""


def _call(fid: int, name: str, kind: str) -> StepCall:
    return StepCall(
        fid, name, "checkpointed", None, None, None, None, (1,), (), (), "r-1", kind, 1,
        None, None, (), None, None,
    )  # fmt: skip


def test_a_run_paints_an_agents_model_requests_and_tool_calls_on_its_node() -> None:
    """The model requests and tool calls a framework agent made are its node's calls in the
    run's overlay, and the walk goes on from it to the next step: no call left unplaced."""
    graph = build_flow_graph(AGENT_THEN_STEP, relay="shop")
    [agent] = [n for n in graph.nodes if n.type == "agent"]
    steps = [
        _call(1, "clerk__model.request", "model"),
        _call(2, "stock", "tool"),
        _call(3, "clerk__model.request", "model"),
        _call(4, "notify", "step"),
    ]
    _, calls, unseen = walk_calls(graph, steps, finished=True)
    assert unseen == 0
    assert [s.function_id for s in calls[agent.id]] == [1, 2, 3]
    [notify] = [n for n in graph.nodes if n.label == "notify"]
    assert [s.function_id for s in calls[notify.id]] == [4]
