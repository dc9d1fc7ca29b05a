"""agentworks inside real runs: MCP over stdio, agents with tools, providers, vault, variables."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

import agentworks
from relay_notebook import commands
from relay_notebook.history import read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.runner import RunOutcome
from relay_notebook.workspace import Manifest, Workspace
from tests.relays import relay_script, relay_source
from tests.servers.chat_server import chat_server


def setup_relay(
    ws: Workspace, source: str, script: dict[str, Any] | None = None, **manifest: Any
) -> None:
    model = "scripted:fixtures.json" if script is not None else None
    ws.save_draft("r", textwrap.dedent(source), Manifest(model=model, **manifest))
    if script is not None:
        (ws.relay_dir("r") / "fixtures.json").write_text(json.dumps(script))


def go(ws: Workspace, run_input: Any = None, crash: str | None = None) -> RunOutcome:
    out: RunOutcome = commands.run(ws, "r", run_input=run_input, crash=crash).wait(120)
    return out


def test_platform_calls_outside_a_run_fail_clearly() -> None:
    """agent(), mcp(), vault() and variables in a plain process say they need a run."""
    import asyncio

    with pytest.raises(agentworks.NotInRunError, match="needs a relay run"):
        asyncio.run(agentworks.agent(name="x", user_message="hi"))
    with pytest.raises(agentworks.NotInRunError):
        agentworks.vault("KEY")
    with pytest.raises(agentworks.NotInRunError):
        dict(agentworks.variables)
    assert "not in a run" in repr(agentworks.run_dir)


def test_mcp_call_from_a_step_and_from_the_workflow(with_orders_server: Workspace) -> None:
    """mcp() works in a step and as a step of its own; recovery reuses the saved result."""
    ws = with_orders_server
    setup_relay(ws, relay_source("ordering"))
    first = go(ws, run_input={"sku": "A"}, crash="after:order")
    assert first.status == "interrupted"
    out = commands.recover(ws, first.run_id).wait(120)
    assert out.status == "succeeded", out.error
    # the checkpointed create_order was not repeated: one order, one attempt
    assert out.result == {"order": "ord-1", "count": 1, "attempts": 1}
    names = [s.name for s in read_run_log(ws, first.run_id).steps]
    assert names == ["order", "mcp:orders.list_orders"]


def test_a_failed_platform_call_in_the_workflow_records_step_error(workspace: Workspace) -> None:
    """An agent call made in the workflow body that fails records ``step_error`` as a native
    step does: the same fields, the error's type and message, and the step table's retries."""
    setup_relay(workspace, relay_source("failing_call"), relay_script("failing_call"))
    out = go(workspace, run_input="A-1")
    assert out.status == "succeeded" and "used all 1 turns" in out.result["answer"]
    events = read_events(find_run(workspace, out.run_id).events)
    steps = {
        (e["step"], e["kind"]): e for e in events if e["kind"].startswith("step_") and "step" in e
    }
    assert sorted(steps) == [
        ("agent:looper", "step_error"),
        ("agent:looper", "step_start"),
        ("finish", "step_end"),
        ("finish", "step_start"),
        ("prepare", "step_end"),
        ("prepare", "step_start"),
    ]
    failed = steps["agent:looper", "step_error"]
    assert failed["error_type"] == "AgentError" and "used all 1 turns" in failed["error"]
    assert failed["occurrence"] == 1 and failed["site"] is not None and failed["step_id"] == 2
    native, platform = steps["prepare", "step_start"], steps["agent:looper", "step_start"]
    assert set(platform) == set(native) - {"input_preview"}
    assert set(failed) - set(platform) == {"duration_ms", "error_type", "error"}
    [row] = [s for s in read_run_log(workspace, out.run_id).steps if s.name == "agent:looper"]
    assert [(r.error_type, r.step_attempt) for r in row.retries] == [("AgentError", 1)]


def test_a_failed_platform_call_replayed_by_recovery_is_reused(workspace: Workspace) -> None:
    """Recovery replays a failed platform call's checkpointed error without calling again, and
    the ledger says so as it does for a native step (``step_reused`` with what it raised)."""
    setup_relay(workspace, relay_source("failing_call"), relay_script("failing_call"))
    first = go(workspace, run_input="A-1", crash="after:finish")
    assert first.status == "interrupted"
    out = commands.recover(workspace, first.run_id).wait(120)
    assert out.status == "succeeded" and "used all 1 turns" in out.result["answer"]
    events = read_events(find_run(workspace, out.run_id).events)
    replayed = [
        (e["step"], e.get("raised"))
        for e in events
        if e["kind"] == "step_reused" and e["attempt"] == 2
    ]
    assert replayed == [("prepare", None), ("agent:looper", "AgentError"), ("finish", None)]
    assert not [e for e in events if e["attempt"] == 2 and e["kind"] == "receipt"]


def test_agent_with_python_and_mcp_tools(with_orders_server: Workspace) -> None:
    """An agent calls a @tool and an attached MCP tool, then answers with schema-checked JSON."""
    ws = with_orders_server
    script = {
        "buyer": [
            {"tool_calls": [{"name": "stock", "arguments": {"sku": "B-2"}}]},
            {
                "tool_calls": [
                    {
                        "name": "orders__create_order",
                        "arguments": {"sku": "B-2", "quantity": 3, "idempotency_key": "x"},
                    }
                ]
            },
            {"content": {"ordered": "B-2", "quantity": 3}},
        ]
    }
    setup_relay(
        ws,
        """
        from dbos import DBOS
        from agentworks import agent, tool

        @tool
        def stock(sku: str) -> dict:
            \"\"\"How many of a SKU are in stock.\"\"\"
            return {"sku": sku, "in_stock": 7}

        @DBOS.workflow()
        async def run(INPUT):
            return await agent(name="buyer", user_message="buy B-2", tools=[stock],
                               mcp=[{"server": "orders", "tools": ["create_order"]}],
                               output_schema={"type": "object", "required": ["ordered"]})
        """,
        script,
    )
    out = go(ws)
    assert out.status == "succeeded", out.error
    assert out.result == {"ordered": "B-2", "quantity": 3}
    receipt = json.loads(
        (ws.relay_dir("r") / "runs/iteration-1-hook/execution/call-1/receipt.json").read_text()
    )
    assert [c["tool"] for c in receipt["tool_calls"]] == ["stock", "orders__create_order"]
    assert receipt["tool_calls"][1]["result"]["order_id"] == "ord-1"
    assert receipt["turns"] == 3


def test_invalid_agent_output_can_be_caught_by_the_author(workspace: Workspace) -> None:
    """AgentOutputError is raised for non-JSON output, and the relay may catch it."""
    setup_relay(
        workspace,
        """
        from dbos import DBOS
        from agentworks import agent, AgentOutputError

        @DBOS.step()
        async def ask():
            try:
                return await agent(name="chatty", user_message="json please",
                                   output_schema={"type": "object"})
            except AgentOutputError as exc:
                return {"fallback": True, "why": str(exc)}

        @DBOS.workflow()
        async def run(INPUT):
            return await ask()
        """,
        {"chatty": [{"content": "Sure! Here you go."}]},
    )
    out = go(workspace)
    assert out.status == "succeeded"
    assert out.result["fallback"] is True and "not JSON" in out.result["why"]


def test_a_tool_cannot_call_an_agent(workspace: Workspace) -> None:
    """An agent call made from inside a tool fails the run with nested-call."""
    setup_relay(
        workspace,
        """
        from dbos import DBOS
        from agentworks import agent, tool

        @tool
        async def sneaky(q: str) -> str:
            \"\"\"Tries to ask another agent.\"\"\"
            return await agent(name="inner", user_message=q)

        @DBOS.workflow()
        async def run(INPUT):
            return await agent(name="outer", user_message="go", tools=[sneaky])
        """,
        {
            "outer": [
                {"tool_calls": [{"name": "sneaky", "arguments": {"q": "hi"}}]},
                {"content": "done"},
            ],
            "inner": [{"content": "never"}],
        },
    )
    out = go(workspace)
    assert out.status == "failed"
    assert "NestedCallError" in out.error["message"] and "sneaky" in out.error["message"]


#: an agent that keeps calling tools past max_turns (its model always answers PING)
PING = {"tool_calls": [{"name": "ping", "arguments": {}}]}
TOO_MANY_TURNS = """
    from dbos import DBOS
    from agentworks import agent, tool

    @tool
    def ping() -> str:
        \"\"\"Ping.\"\"\"
        return "pong"

    @DBOS.workflow()
    async def run(INPUT):
        return await agent(name="loop", user_message="go", tools=[ping], max_turns=3)
    """

#: vault() of a name the vault does not hold
MISSING_SECRET = """
    from dbos import DBOS
    from agentworks import vault

    @DBOS.workflow()
    async def run(INPUT):
        return vault("NOPE_NOT_SET")
    """

#: recovery="restart" together with replay_safe=True
RESTART_AND_REPLAY_SAFE = """
    from dbos import DBOS
    from agentworks import agent

    @DBOS.workflow()
    async def run(INPUT):
        return await agent(name="x", user_message="hi", recovery="restart", replay_safe=True)
    """


@pytest.mark.parametrize(
    ("source", "script", "said"),
    [
        pytest.param(TOO_MANY_TURNS, {"loop": [PING] * 5}, "used all 3 turns",
                     id="too-many-turns-is-an-agent-error"),
        pytest.param(MISSING_SECRET, None, "relay vault set NOPE_NOT_SET",
                     id="missing-secret-says-how-to-set-it"),
        pytest.param(RESTART_AND_REPLAY_SAFE, {"x": [{"content": "hi"}]},
                     "cannot be combined with replay_safe",
                     id="restart-cannot-be-combined-with-replay-safe"),
    ],
)  # fmt: skip
def test_a_call_that_cannot_be_made_fails_the_run_saying_why(
    workspace: Workspace, source: str, script: dict[str, Any] | None, said: str
) -> None:
    """An agent past its max_turns, vault() of an unknown name (the message has the command
    that stores it), recovery='restart' with replay_safe=True (refused before any call): the
    run fails with a message that says so."""
    setup_relay(workspace, source, script)
    out = go(workspace)
    assert out.status == "failed" and said in out.error["message"]


def test_gathered_agent_calls_are_serialized(workspace: Workspace) -> None:
    """Two agents under asyncio.gather both answer, and their receipts are in call order;
    each call's step keeps the line that made it, though it ran as a task."""
    setup_relay(
        workspace,
        """
        import asyncio
        from dbos import DBOS
        from agentworks import agent

        @DBOS.workflow()
        async def run(INPUT):
            a, b = await asyncio.gather(agent(name="a", user_message="1"),
                                        agent(name="b", user_message="2"))
            return [a, b]
        """,
        {"a": [{"content": "A"}], "b": [{"content": "B"}]},
    )
    out = go(workspace)
    assert out.status == "succeeded" and out.result == ["A", "B"]
    folder = workspace.relay_dir("r") / "runs/iteration-1-hook"
    events = [json.loads(x) for x in (folder / "dbos_events.jsonl").read_text().splitlines()]
    receipts = [e for e in events if e["kind"] == "receipt"]
    assert sorted(e["name"] for e in receipts) == ["a", "b"]
    # one after the other: the second started after the first ended
    first, second = sorted(receipts, key=lambda e: e["ts"])
    assert second["ts"] - second["duration_ms"] >= first["ts"] - 1
    lines = workspace.load_draft("r").source.splitlines()
    made = {n: 1 + next(i for i, x in enumerate(lines) if f'agent(name="{n}"' in x) for n in "ab"}
    sites = {e["step"]: e["site"] for e in events if e["kind"] == "step_start"}
    assert sites == {"agent:a": [made["a"]], "agent:b": [made["b"]]}, (sites, made)


def test_openai_compatible_provider_over_loopback(workspace: Workspace) -> None:
    """A relay talks to a real chat-completions server on loopback, tool call included."""
    with chat_server() as (base_url, server):
        commands.vault_set(workspace, "OPENAI_BASE_URL", base_url)
        setup_relay(
            workspace,
            """
            from dbos import DBOS
            from agentworks import agent, tool

            @tool
            def weather(city: str) -> dict:
                \"\"\"The weather in a city.\"\"\"
                return {"city": city, "sky": "clear"}

            @DBOS.workflow()
            async def run(INPUT):
                return await agent(name="w", model="openai:test-model",
                                   user_message="weather in Oslo?", tools=[weather])
            """,
        )
        out = go(workspace)
        assert out.status == "succeeded", out.error
        assert len(server.requests) == 2
        second = server.requests[1].body["messages"]
        assert any(m["role"] == "tool" for m in second)
    receipt = json.loads(
        (
            workspace.relay_dir("r") / "runs/iteration-1-hook/execution/call-1/receipt.json"
        ).read_text()
    )
    assert receipt["model"] == server.model


def test_variables_and_run_dir(workspace: Workspace) -> None:
    """variables come from relay.yaml; files written to run_dir land in execution/."""
    setup_relay(
        workspace,
        """
        from dbos import DBOS
        from agentworks import run_dir, variables

        @DBOS.step()
        async def write(text):
            (run_dir / "note.txt").write_text(text)
            return str(run_dir)

        @DBOS.workflow()
        async def run(INPUT):
            where = await write(variables["greeting"])
            return {"where": where.endswith("execution"), "vars": dict(variables)}
        """,
        variables={"greeting": "hello"},
    )
    out = go(workspace)
    assert out.result == {"where": True, "vars": {"greeting": "hello"}}
    note = workspace.relay_dir("r") / "runs/iteration-1-hook/execution/note.txt"
    assert note.read_text() == "hello"


RESTART = """
import os
from pathlib import Path
from dbos import DBOS
from agentworks import agent, run_dir, tool


def effect(line):
    with open(Path(run_dir) / "effects.log", "a") as fh:
        fh.write(line + "\\n")


def receipt_of(sku):
    # a durable service receipt: here, the effects log the tool wrote before the crash
    lines = (Path(run_dir) / "effects.log").read_text().splitlines()
    if f"charge {sku}" not in lines:
        raise LookupError(f"no receipt for {sku}")
    return {"charged": sku}


@tool
def reserve(sku: str) -> dict:
    \"\"\"Reserve stock.\"\"\"
    effect(f"reserve {sku}")
    return {"reserved": sku}


@tool
def invoice(sku: str) -> dict:
    \"\"\"Write an invoice.\"\"\"
    effect(f"invoice {sku}")
    return {"invoiced": sku}


@tool(recover=lambda sku: receipt_of(sku))
def charge(sku: str) -> dict:
    \"\"\"Charge the customer (dies once, after the charge, before the result is saved).\"\"\"
    effect(f"charge {sku}")
    marker = Path(run_dir) / "crashed-once"
    if not marker.exists():
        marker.write_text("x")
        os._exit(9)
    return {"charged": sku}


@DBOS.workflow()
async def run(INPUT):
    return await agent(name="clerk", user_message="sell A", tools=[reserve, invoice, charge],
                       recovery="restart")
"""
RESTART_SCRIPT = {
    "clerk": [
        {"tool_calls": [{"name": "reserve", "arguments": {"sku": "A"}}]},
        {"tool_calls": [{"name": "invoice", "arguments": {"sku": "A"}}]},
        {"tool_calls": [{"name": "charge", "arguments": {"sku": "A"}}]},
        {"content": "sold A"},
    ]
}


def test_restart_reuses_tool_results_and_recovers_the_pending_one(workspace: Workspace) -> None:
    """After a crash inside the third tool, the agent restarts; every tool body ran once."""
    setup_relay(workspace, RESTART, RESTART_SCRIPT)
    first = go(workspace)
    assert first.status == "interrupted"
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "succeeded", second.error
    assert second.result == "sold A"
    folder = workspace.relay_dir("r") / "runs/iteration-1-hook"
    effects = (folder / "execution/effects.log").read_text().splitlines()
    assert effects == ["reserve A", "invoice A", "charge A"]
    events = [json.loads(x) for x in (folder / "dbos_events.jsonl").read_text().splitlines()]
    assert [e["tool"] for e in events if e["kind"] == "tool_recovered"] == ["charge"]
    receipt = json.loads((folder / "execution/call-2/receipt.json").read_text())
    assert [(c["tool"], c["reused"]) for c in receipt["tool_calls"]] == [
        ("reserve", True),
        ("invoice", True),
        ("charge", True),
    ]


def test_restart_without_a_receipt_stops_for_reconciliation(workspace: Workspace) -> None:
    """A pending tool call whose lookup cannot establish the outcome stops the run."""
    source = RESTART.replace('effect(f"charge {sku}")\n    marker', "marker")
    setup_relay(workspace, source, RESTART_SCRIPT)
    first = go(workspace)
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "needs_reconciliation", second.error
    assert "charge" in second.error["message"] and "no receipt for A" in second.error["message"]
