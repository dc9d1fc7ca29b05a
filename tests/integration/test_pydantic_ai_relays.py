"""Pydantic AI agents on DBOS, written as Pydantic AI documents them, run as relays with its
offline FunctionModel: calls with kinds, a crash during a tool call recovered, a fork with an
edited model answer, receipts redacted, tokens as the framework reports them."""

from __future__ import annotations

import json
import textwrap

import pytest

from relay_notebook import commands
from relay_notebook.record.folders import find_run
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.runner.runs import start_fork
from relay_notebook.workspace import Manifest, Workspace
from relay_notebook.workspace.vault import Vault
from tests.integration.framework_runs import (
    agent_node,
    crashed_and_recovered,
    files_holding,
    go,
    model_calls,
)

pytest.importorskip("pydantic_ai.durable_exec.dbos")

SECRET = "shop-tok-8f3e91c2d7"

# The model: first a call of the lookup tool, then a final text quoting the tool's answer.
MODEL = """
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def reply(messages, info: AgentInfo) -> ModelResponse:
    returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("lookup", {"sku": "A-1"})])
    return ModelResponse(parts=[TextPart(f"found: {returned[-1].content}")])
"""

# the agent as Pydantic AI's DBOS page writes it: DBOSAgent wrapping a named Agent
WRAPPED = (
    MODEL
    + '''
from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from agentworks import vault

agent = Agent(FunctionModel(reply, model_name="offline-clerk"), name="clerk",
              instructions="Look products up.")


@agent.tool_plain
@DBOS.step()
async def lookup(sku: str) -> str:
    """Look a product up in the shop."""
    token = vault("SHOP_TOKEN")  # used inside the step, never passed or returned
    print("calling the shop with", token)
    return f"product {sku} (authorized {len(token)} chars)"


dbos_agent = DBOSAgent(agent)


@DBOS.workflow()
async def run(INPUT):
    result = await dbos_agent.run(INPUT["prompt"])
    usage = result.usage()
    return {"output": result.output, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "requests": usage.requests}
'''
)

# the capability form (Pydantic AI's current DBOS API): the agent runs in the relay's workflow
CAPABILITY = (
    WRAPPED.replace(
        "from pydantic_ai.durable_exec.dbos import DBOSAgent",
        "from pydantic_ai.durable_exec.dbos import DBOSDurability",
    )
    .replace('name="clerk",', 'name="clerk", capabilities=[DBOSDurability()],')
    .replace("dbos_agent = DBOSAgent(agent)\n", "")
    .replace("dbos_agent.run", "agent.run")
)


def save(ws: Workspace, source: str, name: str = "shop") -> None:
    ws.save_draft(name, textwrap.dedent(source), Manifest())
    Vault(ws.home).set("SHOP_TOKEN", SECRET)


def test_the_flow_graph_draws_the_agent_with_its_tools() -> None:
    """The DBOSAgent run is an agent node naming its framework, model, tools and step names."""
    node = agent_node(WRAPPED)
    assert node.label == "clerk"
    assert node.details["framework"] == "pydantic_ai"
    assert node.details["tools"] == ["lookup"]
    assert node.details["steps"] == ["clerk__model.request", "lookup"]
    node = agent_node(CAPABILITY)
    assert node.details["steps"] == ["clerk__model.request", "lookup"]


def test_a_dbos_agent_runs_with_each_call_in_the_ledger(workspace: Workspace) -> None:
    """Model requests and the tool call are calls of the run with their kinds, the model's name,
    a receipt each, and tokens equal to what Pydantic AI reports."""
    save(workspace, WRAPPED)
    out = go(workspace)
    assert out.status == "succeeded", out.error
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    log = commands.logs(workspace, out.run_id)
    kinds = [(s.name, s.kind) for s in log.all_steps() if s.kind != "dbos"]
    assert kinds == [
        ("clerk.run", "workflow"),
        ("clerk__model.request", "model"),
        ("lookup", "tool"),
        ("clerk__model.request", "model"),
    ]
    calls = model_calls(workspace, out.run_id)
    assert [c["model"] for c in calls] == ["offline-clerk", "offline-clerk"]
    assert [c["tools"] for c in calls] == [["lookup"], ["lookup"]]
    assert sum(c["input_tokens"] for c in calls) == out.result["input_tokens"]
    assert sum(c["output_tokens"] for c in calls) == out.result["output_tokens"]
    assert log.usage is not None and log.usage.paid.calls == 2
    assert log.usage.paid.input_tokens == out.result["input_tokens"]
    receipt = json.loads(
        (find_run(workspace, out.run_id).path / "execution" / calls[1]["call_dir"] / "receipt.json")
        .read_text()
    )  # fmt: skip
    assert receipt["kind"] == "model" and receipt["model"] == "offline-clerk"
    returned = [
        p for m in receipt["messages"] for p in m["parts"] if p["part_kind"] == "tool-return"
    ]
    assert returned[0]["tool_name"] == "lookup"
    assert "found: product A-1" in json.dumps(receipt["response"])
    assert log.to_dict()["usage"]["paid"]["calls"] == 2


def test_a_crash_during_the_tool_call_recovers_reusing_the_model_request(
    workspace: Workspace,
) -> None:
    """Killed inside lookup, the run recovers: the first model request comes back from its
    checkpoint (not paid again), lookup runs again, and the tokens saved are that request's."""
    save(workspace, WRAPPED)
    first, out = crashed_and_recovered(workspace, "during:lookup")
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    log = commands.logs(workspace, first.run_id)
    models = [s for s in log.all_steps() if s.kind == "model"]
    assert [(s.executed_in, s.reused_in) for s in models] == [((1,), (2,)), ((2,), ())]
    [tool] = [s for s in log.all_steps() if s.kind == "tool"]
    assert tool.executed_in == (1, 2)
    calls = model_calls(workspace, first.run_id)
    assert [c["attempt"] for c in calls] == [1, 2]
    usage = log.usage
    assert usage is not None
    assert usage.saved.calls == 1 and usage.saved.input_tokens == calls[0]["input_tokens"]
    assert usage.by_attempt[2][1].output_tokens == calls[0]["output_tokens"]
    # what the framework reports over the replayed and the new requests is what was checkpointed
    assert usage.paid.input_tokens == out.result["input_tokens"]


def test_a_fork_with_an_edited_model_answer_changes_the_result(workspace: Workspace) -> None:
    """Forked from the tool call with the first model answer replaced (a tool call with other
    arguments), the tool and the next request run fresh on it; the copied request is not paid.
    The capability form's calls have their kinds and receipts as DBOSAgent's do."""
    save(workspace, CAPABILITY)
    parent = go(workspace)
    assert parent.status == "succeeded", parent.error
    kinds = [(s.name, s.kind) for s in commands.logs(workspace, parent.run_id).steps]
    assert kinds == [
        ("clerk__model.request", "model"),
        ("lookup", "tool"),
        ("clerk__model.request", "model"),
    ]
    # the capability's model step takes (model_id, messages, ...): its receipt has them right
    calls = model_calls(workspace, parent.run_id)
    assert [c["tools"] for c in calls] == [["lookup"], ["lookup"]]
    folder = find_run(workspace, parent.run_id).path
    receipt = json.loads((folder / "execution" / calls[1]["call_dir"] / "receipt.json").read_text())
    parts = [p["part_kind"] for m in receipt["messages"] for p in m["parts"]]
    assert "tool-return" in parts
    answer = {"tool_calls": [{"tool": "lookup", "args": {"sku": "B-7"}}]}
    request = ForkRequest("lookup#1", sets={"clerk__model.request#1": answer})
    fork = start_fork(workspace, parent.run_id, request).wait(180)
    assert fork.status == "succeeded", fork.error
    assert fork.result["output"] == "found: product B-7 (authorized 19 chars)"
    log = commands.logs(workspace, fork.run_id)
    first = log.steps[0]
    assert first.copied_from == parent.run_id and first.edited
    assert log.usage is not None
    assert log.usage.saved.calls == 1 and log.usage.paid.calls == 1
    # a text answer for the last request: the agent's output is that text
    last = ForkRequest(
        "clerk__model.request#3", sets={"clerk__model.request#2": "What if it said this?"}
    )
    fork2 = start_fork(workspace, parent.run_id, last).wait(180)
    assert fork2.status == "succeeded", fork2.error
    assert fork2.result["output"] == "What if it said this?"


def test_no_stored_byte_holds_the_vault_value_given_to_the_tool(workspace: Workspace) -> None:
    """The tool reads and prints a vault value; no file of the run (ledger, receipts, captured
    output, DBOS's database) holds it."""
    save(workspace, WRAPPED)
    out = go(workspace)
    assert out.status == "succeeded", out.error
    assert files_holding(workspace, out.run_id, SECRET) == []
