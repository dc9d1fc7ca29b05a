"""Pydantic AI's own MCP toolsets (``MCPToolset`` over stdio) in a DBOS-durable agent run as a
relay: each tool call is a call of kind ``mcp`` with a receipt, on the agent's node, and a
recovery after it reuses it (the real server is not called again)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.record.folders import find_run
from relay_notebook.workspace import Manifest, Workspace
from relay_notebook.workspace.vault import Vault
from tests.integration.framework_runs import crashed_and_recovered, files_holding, go, model_calls

pytest.importorskip("pydantic_ai.durable_exec.dbos")
pytest.importorskip("fastmcp")

SECRET = "probe-tok-5d2a7e91c4"
SERVERS = Path(__file__).parents[1] / "servers"

# The model: check the token with the probe server, order with the orders server, then answer.
# The servers are the workspace's (mcp_servers.yaml declares them, so the sandbox lets the
# relay's interpreter read them); the probe is handed a vault value through its environment.
# Pydantic AI's 5 s default for a server's start is short on a loaded machine: 60 s here.
RELAY = """
import json
import sys

from dbos import DBOS
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from agentworks import run_dir, vault


def reply(messages, info: AgentInfo) -> ModelResponse:
    returned = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("token_check", {})])
    if len(returned) == 1:
        order = {"sku": "A-1", "quantity": 2, "idempotency_key": "shop-1"}
        return ModelResponse(parts=[ToolCallPart("create_order", order)])
    return ModelResponse(parts=[TextPart(json.dumps(returned))])


probe = MCPToolset(
    StdioTransport(sys.executable, ["HOME/servers/mcp_env_probe.py"],
                   env={"TOKEN": vault("PROBE_TOKEN")}),
    id="probe", init_timeout=60,
)
orders = MCPToolset(
    StdioTransport(sys.executable, ["HOME/servers/mcp_orders.py"],
                   env={"ORDERS_DB": str(run_dir / "orders.json")}),
    id="orders", init_timeout=60,
)
agent = Agent(FunctionModel(reply, model_name="offline-clerk"), name="clerk",
              toolsets=[probe, orders], capabilities=[DBOSDurability()])


@DBOS.workflow()
async def run(INPUT):
    result = await agent.run(INPUT["prompt"])
    return json.loads(result.output)
"""

DECLARED = """\
servers:
  probe: {command: python, args: [servers/mcp_env_probe.py]}
  orders: {command: python, args: [servers/mcp_orders.py]}
"""


@pytest.fixture
def shop(workspace: Workspace) -> Workspace:
    """The workspace with both servers, their declaration, the vault value and the relay."""
    (workspace.home / "servers").mkdir(parents=True)
    for name in ("mcp_env_probe.py", "mcp_orders.py"):
        shutil.copy(SERVERS / name, workspace.home / "servers" / name)
    (workspace.home / "mcp_servers.yaml").write_text(DECLARED, encoding="utf-8")
    Vault(workspace.home).set("PROBE_TOKEN", SECRET)
    source = RELAY.replace("HOME", str(workspace.home.resolve()))
    workspace.save_draft("shop", textwrap.dedent(source), Manifest())
    return workspace


def receipt_of(ws: Workspace, run_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """The receipt a ``model_call`` event names."""
    path = find_run(ws, run_id).path / "execution" / event["call_dir"] / "receipt.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def orders_db(ws: Workspace, run_id: str) -> dict[str, Any]:
    """The orders server's file, in the run's folder: how often ``create_order`` ran."""
    path = find_run(ws, run_id).path / "execution" / "orders.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_mcp_tool_calls_are_calls_of_kind_mcp_with_receipts(shop: Workspace) -> None:
    """Each MCP tool call is an ``mcp`` call on the agent's node with a receipt (tool, arguments,
    the server's answer); the probe got the vault value, and no stored byte holds it."""
    out = go(shop)
    assert out.status == "succeeded", out.error
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert out.result[0] == {"present": True, "sha256": digest}
    assert out.result[1]["order_id"] == "ord-1" and out.result[1]["created"] is True
    log = commands.logs(shop, out.run_id)
    calls = [(s.name, s.kind) for s in log.steps if not s.name.endswith(".get_tools")]
    assert calls == [
        ("clerk__model.request", "model"),
        ("clerk__mcp_server__probe.call_tool", "mcp"),
        ("clerk__model.request", "model"),
        ("clerk__mcp_server__orders.call_tool", "mcp"),
        ("clerk__model.request", "model"),
    ]
    events = model_calls(shop, out.run_id)
    mcp = [e for e in events if e["call_kind"] == "mcp"]
    assert [(e["name"], e["tool"]) for e in mcp] == [
        ("clerk/probe", "token_check"),
        ("clerk/orders", "create_order"),
    ]
    checked, ordered = (receipt_of(shop, out.run_id, e) for e in mcp)
    assert checked["kind"] == "mcp" and checked["step"] == "clerk__mcp_server__probe.call_tool"
    assert digest in json.dumps(checked["result"])
    assert ordered["arguments"] == {"sku": "A-1", "quantity": 2, "idempotency_key": "shop-1"}
    assert "ord-1" in json.dumps(ordered["result"])
    # only model requests are paid for
    assert log.usage is not None and log.usage.paid.calls == 3
    # the run graph: the MCP calls are the agent node's, nothing is left unplaced
    graph = commands.run_detail(shop, out.run_id)["graph"]
    [node] = [n for n in graph["nodes"] if n["type"] == "agent"]
    assert node["details"]["status"] == "succeeded" and node["details"]["count"] == 5
    assert [c["name"] for c in node["details"]["calls"]] == [name for name, _ in calls]
    assert not graph.get("notes")
    assert files_holding(shop, out.run_id, SECRET) == []


def test_a_crash_after_an_mcp_call_recovers_reusing_it(shop: Workspace) -> None:
    """Killed right after create_order's checkpoint, the run recovers: the MCP call comes back
    from its checkpoint, so the server created the order once, and ``relay logs`` says so."""
    first, out = crashed_and_recovered(shop, "after:clerk__mcp_server__orders.call_tool#1")
    assert out.result[1]["order_id"] == "ord-1" and out.result[1]["created"] is True
    assert orders_db(shop, first.run_id)["attempts"] == 1  # the server ran it once
    log = commands.logs(shop, first.run_id)
    [ordered] = [s for s in log.steps if s.name == "clerk__mcp_server__orders.call_tool"]
    assert ordered.kind == "mcp"
    assert (ordered.executed_in, ordered.reused_in) == ((1,), (2,))
    events = [e for e in model_calls(shop, first.run_id) if e["call_kind"] == "mcp"]
    assert [(e["tool"], e["attempt"]) for e in events] == [("token_check", 1), ("create_order", 1)]
    shown = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(shop.home), "logs",
         first.run_id],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    line = next(x for x in shown.splitlines() if "orders.call_tool" in x)
    assert "mcp; executed in 1; reused in 2" in line


def test_a_server_the_sandbox_hides_fails_the_run_saying_where_to_declare_it(
    shop: Workspace,
) -> None:
    """A toolset's server that mcp_servers.yaml does not declare cannot read its own script in
    the sandbox and exits; the run fails with the framework's "Connection closed" explained
    (declare it in mcp_servers.yaml) and the server's own last words, not a bare error."""
    (shop.home / "mcp_servers.yaml").write_text(
        "servers:\n  probe: {command: python, args: [servers/mcp_env_probe.py]}\n",
        encoding="utf-8",
    )
    out = go(shop)
    assert out.status == "failed" and out.error is not None, out
    message = out.error["message"]
    assert message.startswith("MCPError: Connection closed: an MCP server the relay started"), (
        message
    )
    assert "what mcp_servers.yaml declares: declare the server there" in message
    assert "can't open file" in out.error["stderr"] and "mcp_orders.py" in out.error["stderr"]
    shown = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(shop.home), "logs",
         out.run_id],
        capture_output=True, text=True,
    )  # fmt: skip
    assert "declare the server there" in shown.stdout and "stderr: " in shown.stdout
    assert "mcp_orders.py" in shown.stdout
