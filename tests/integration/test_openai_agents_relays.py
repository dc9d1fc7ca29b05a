"""The OpenAI Agents SDK on DBOS (``dbos-openai-agents``'s ``DBOSRunner``), written as that
package documents it, run as relays with an offline model implementing the SDK's ``Model``
interface: calls with kinds, a crash during the tool call recovered, a fork with an edited model
answer, receipts redacted, tokens as the SDK reports them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from relay_notebook import commands
from relay_notebook.history.run_summary import run_header
from relay_notebook.record.folders import find_run
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.runner.runs import start_fork
from relay_notebook.views.records import run_log_text
from relay_notebook.workspace import Manifest, Workspace
from relay_notebook.workspace.vault import Vault
from tests.integration.framework_runs import (
    agent_node,
    crashed_and_recovered,
    files_holding,
    go,
    model_calls,
)

pytest.importorskip("dbos_openai_agents")

SECRET = "shop-tok-8f3e91c2d7"
MODEL_STEP = "_model_call_step"  # the one step name DBOSRunner gives every model request

RELAY = '''
from agents import Agent, Model, ModelResponse, Usage, function_tool, set_tracing_disabled
from dbos import DBOS
from dbos_openai_agents import DBOSRunner
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agentworks import vault

set_tracing_disabled(True)


class OfflineModel(Model):
    """The Agents SDK's model interface, answered offline: a lookup call, then a text."""

    model = "offline-gpt"

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **kwargs):
        items = input if isinstance(input, list) else []
        outputs = [i for i in items
                   if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outputs:
            output = [ResponseFunctionToolCall(type="function_call", call_id="call-1",
                                               name="lookup", arguments='{"sku": "A-1"}')]
            usage = Usage(requests=1, input_tokens=40, output_tokens=8, total_tokens=48)
        else:
            text = ResponseOutputText(type="output_text", annotations=[],
                                      text=f"found: {outputs[-1]['output']}")
            output = [ResponseOutputMessage(id="msg-1", type="message", role="assistant",
                                            status="completed", content=[text])]
            usage = Usage(requests=1, input_tokens=61, output_tokens=12, total_tokens=73)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("offline model: no streaming")


@function_tool
@DBOS.step()
async def lookup(sku: str) -> str:
    """Look a product up in the shop."""
    token = vault("SHOP_TOKEN")  # used inside the step, never passed or returned
    print("calling the shop with", token)
    return f"product {sku} (authorized {len(token)} chars)"


agent = Agent(name="clerk", instructions="Look products up.", model=OfflineModel(),
              tools=[lookup])


@DBOS.workflow()
async def run(INPUT):
    result = await DBOSRunner.run(agent, INPUT["prompt"])
    usage = result.context_wrapper.usage
    return {"output": result.final_output, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "requests": usage.requests}
'''


def save(ws: Workspace, name: str = "shop") -> None:
    ws.save_draft(name, textwrap.dedent(RELAY), Manifest())
    Vault(ws.home).set("SHOP_TOKEN", SECRET)
    (ws.home / "prices.yaml").write_text(
        "as_of: 2026-11-30\nmodels:\n  offline-gpt: {input: 2.0, output: 8.0}\n"
    )


def cli(ws: Workspace, *args: str) -> str:
    """``relay --home HOME ARGS...`` in a fresh interpreter: its standard output."""
    proc = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home), *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return proc.stdout


def test_the_flow_graph_draws_the_agent_with_its_tools() -> None:
    """DBOSRunner.run(agent, ...) is an agent node naming the framework, model and tools."""
    node = agent_node(RELAY)
    assert node.label == "clerk"
    assert node.details["framework"] == "openai_agents"
    assert node.details["tools"] == ["lookup"]
    assert node.details["steps"] == [MODEL_STEP, "lookup"]


def test_an_agent_runs_with_each_call_in_the_ledger(workspace: Workspace) -> None:
    """Both model requests and the tool call are calls of the run with their kinds, the
    model's name, a receipt each, and tokens equal to what the SDK reports."""
    save(workspace)
    out = go(workspace)
    assert out.status == "succeeded", out.error
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    log = commands.logs(workspace, out.run_id)
    assert [(s.name, s.kind) for s in log.steps] == [
        (MODEL_STEP, "model"),
        ("lookup", "tool"),
        (MODEL_STEP, "model"),
    ]
    calls = model_calls(workspace, out.run_id)
    assert [c["model"] for c in calls] == ["offline-gpt", "offline-gpt"]
    assert [(c["input_tokens"], c["output_tokens"]) for c in calls] == [(40, 8), (61, 12)]
    assert out.result["input_tokens"] == 101 and out.result["output_tokens"] == 20
    assert log.usage is not None
    assert (log.usage.paid.input_tokens, log.usage.paid.output_tokens) == (101, 20)
    folder = find_run(workspace, out.run_id).path
    receipt = json.loads((folder / "execution" / calls[1]["call_dir"] / "receipt.json").read_text())
    assert receipt["framework"] == "openai_agents" and receipt["tools"] == ["lookup"]
    assert any(i.get("type") == "function_call_output" for i in receipt["input"])
    assert "found: product A-1" in json.dumps(receipt["response"])


def test_a_crash_during_the_tool_call_recovers_reusing_the_model_request(
    workspace: Workspace,
) -> None:
    """Killed inside lookup, the run recovers: the first model request is reused (its 40 + 8
    tokens not paid again), lookup runs again, the second request runs once."""
    save(workspace)
    first, out = crashed_and_recovered(workspace, "during:lookup")
    assert out.result["output"] == "found: product A-1 (authorized 19 chars)"
    log = commands.logs(workspace, first.run_id)
    assert [(s.name, s.executed_in, s.reused_in) for s in log.steps] == [
        (MODEL_STEP, (1,), (2,)),
        ("lookup", (1, 2), ()),
        (MODEL_STEP, (2,), ()),
    ]
    usage = log.usage
    assert usage is not None
    assert (usage.saved.input_tokens, usage.saved.output_tokens) == (40, 8)
    assert (usage.paid.input_tokens, usage.paid.output_tokens) == (101, 20)
    assert usage.by_attempt[1][0].calls == 1 and usage.by_attempt[2][0].calls == 1
    # priced from the workspace's table, over the shipped one (dated)
    assert usage.prices.as_of == "2026-11-30"
    assert usage.paid.cost == pytest.approx((101 * 2.0 + 20 * 8.0) / 1e6)
    assert usage.saved.cost == pytest.approx((40 * 2.0 + 8 * 8.0) / 1e6)
    text = run_log_text(log)
    assert "model calls (prices as of 2026-11-30): paid 2 calls, 101 in + 20 out tokens" in text
    # the run view's header says the same in one line
    header = run_header(log)
    assert header["usage"] == (
        "model calls: paid 2 calls, 101 in + 20 out tokens, 0.000362 USD; not paid (reused or "
        "copied) 1 call, 40 in + 8 out tokens, 0.000144 USD"
    )
    assert "not paid (reused or copied) 1 call, 40 in + 8 out tokens, 0.000144 USD" in text
    [listed] = commands.runs(workspace, "shop")
    assert listed.usage is not None
    assert listed.usage["paid"]["input_tokens"] == 101
    assert listed.usage["saved"]["input_tokens"] == 40
    assert listed.to_dict()["usage"]["saved"]["cost"] == pytest.approx(0.000144)
    logs, runs = cli(workspace, "logs", first.run_id), cli(workspace, "runs", "shop")
    assert "not paid (reused or copied) 1 call, 40 in + 8 out tokens" in logs
    assert f"{MODEL_STEP} {first.run_id}/1: offline-gpt, 40 in / 8 out" in logs
    assert "tokens 101+20 cost 0.000362 USD (not paid: 48 tokens, 0.000144 USD)" in runs


def test_a_crash_during_a_model_request_pays_it_twice(workspace: Workspace) -> None:
    """Killed inside the second model request (after the model answered, before the
    checkpoint), recovery asks again: both payments are counted, the first as lost."""
    save(workspace)
    first, _ = crashed_and_recovered(workspace, f"during:{MODEL_STEP}#2")
    usage = commands.logs(workspace, first.run_id).usage
    assert usage is not None
    assert [(c.attempt, c.checkpointed) for c in usage.calls] == [
        (1, True),
        (1, False),
        (2, True),
    ]
    assert usage.paid.input_tokens == 40 + 61 + 61


def test_a_fork_with_an_edited_model_answer_changes_the_result(workspace: Workspace) -> None:
    """Forked after the last call with the final answer replaced by text, the run returns
    that text; forked from the tool call with other tool arguments, the tool runs on them."""
    save(workspace)
    parent = go(workspace)
    assert parent.status == "succeeded", parent.error
    request = ForkRequest(f"{MODEL_STEP}#3", sets={f"{MODEL_STEP}#2": "What if it said this?"})
    fork = start_fork(workspace, parent.run_id, request).wait(180)
    assert fork.status == "succeeded", fork.error
    assert fork.result["output"] == "What if it said this?"
    usage = commands.logs(workspace, fork.run_id).usage
    assert usage is not None and usage.paid.calls == 0 and usage.saved.calls == 2
    # `relay runs` counts the copied calls as not paid, as the fork's logs price them
    [listed] = [r for r in commands.runs(workspace) if r.run_id == fork.run_id]
    assert listed.usage is not None
    assert listed.usage["paid"]["calls"] == 0
    saved = listed.usage["saved"]
    assert (saved["calls"], saved["input_tokens"], saved["output_tokens"]) == (
        usage.saved.calls, usage.saved.input_tokens, usage.saved.output_tokens,
    )  # fmt: skip
    assert saved["cost"] == pytest.approx(usage.saved.cost)
    answer = {"tool_calls": [{"tool": "lookup", "args": {"sku": "B-7"}}]}
    request = ForkRequest("lookup#1", sets={f"{MODEL_STEP}#1": answer})
    fork2 = start_fork(workspace, parent.run_id, request).wait(180)
    assert fork2.status == "succeeded", fork2.error
    assert fork2.result["output"] == "found: product B-7 (authorized 19 chars)"


def test_no_stored_byte_holds_the_vault_value_given_to_the_tool(workspace: Workspace) -> None:
    """The tool reads and prints a vault value; no file of the run holds it."""
    save(workspace)
    out = go(workspace)
    assert out.status == "succeeded", out.error
    assert files_holding(workspace, out.run_id, SECRET) == []


def test_an_agentworks_call_reports_its_tokens_and_cost(workspace: Workspace) -> None:
    """agentworks.agent over an OpenAI-compatible server on loopback: the tokens the server
    reported over both turns are the call's, priced from the workspace's table."""
    from tests.servers.chat_server import chat_server

    source = """
        from dbos import DBOS
        from agentworks import agent, tool

        @tool
        def weather(city: str) -> dict:
            '''The weather in a city.'''
            return {"city": city, "sky": "clear"}

        @DBOS.workflow()
        async def run(INPUT):
            return await agent(name="w", model="openai:test-model",
                               user_message="weather in Oslo?", tools=[weather])
        """
    with chat_server() as (base_url, server):
        commands.vault_set(workspace, "OPENAI_BASE_URL", base_url)
        workspace.save_draft("w", textwrap.dedent(source), Manifest())
        (workspace.home / "prices.yaml").write_text(
            f"models:\n  {server.model}: {{input: 1.0, output: 4.0}}\n"
        )
        out = commands.run(workspace, "w").wait(180)
        assert out.status == "succeeded", out.error
    usage = commands.logs(workspace, out.run_id).usage
    assert usage is not None
    [call] = usage.calls
    assert (call.kind, call.model) == ("agent", server.model)
    # the server reports len(messages) prompt tokens and 1 completion token per turn: 1 + 3, 1 + 1
    assert (call.input_tokens, call.output_tokens) == (4, 2)
    assert call.cost == pytest.approx((4 * 1.0 + 2 * 4.0) / 1e6)
