"""MCP over stdio against a real server subprocess (tests/servers/mcp_orders.py), no mocks."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import textwrap
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentworks.errors import MCPError
from agentworks.mcp_client import MCPPool, MCPSession
from agentworks.mcp_servers import MCPServerConfig, load_mcp_servers, server_for
from tests.procs import children_of

SERVER = Path(__file__).parents[1] / "servers" / "mcp_orders.py"
T = TypeVar("T")

ORDERS_YAML = """\
servers:
  orders:
    command: python
    args: ["servers/mcp_orders.py"]
    env: {ORDERS_DB: "orders.json"}
    relays: ["invoice", "lab"]
"""


def run(awaitable: Awaitable[T]) -> T:
    """Run one coroutine on a fresh event loop, as the runner's child does."""

    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A workspace folder holding the orders server and its declaration."""
    ws = tmp_path / "relays"
    (ws / "servers").mkdir(parents=True)
    shutil.copy(SERVER, ws / "servers" / "mcp_orders.py")
    (ws / "mcp_servers.yaml").write_text(ORDERS_YAML, encoding="utf-8")
    return ws


def declare(home: Path, text: str) -> None:
    """Replace the workspace's server declarations."""
    (home / "mcp_servers.yaml").write_text(textwrap.dedent(text), encoding="utf-8")


def test_no_declaration_file_means_no_servers(tmp_path: Path) -> None:
    """A workspace without mcp_servers.yaml simply has no MCP servers."""
    assert load_mcp_servers(tmp_path) == {}


def test_declaration_resolves_python_paths_and_access(home: Path) -> None:
    """Relative script paths resolve against the workspace and the access list is kept."""
    orders = load_mcp_servers(home)["orders"]
    assert orders.command == "python"
    assert orders.args == (str((home / "servers" / "mcp_orders.py").resolve()),)
    assert orders.cwd == home.resolve()
    assert dict(orders.env) == {"ORDERS_DB": "orders.json"}
    assert orders.relays == ("invoice", "lab")
    assert (orders.start_timeout, orders.call_timeout) == (20.0, 60.0)


def test_omitted_relays_allow_every_relay(home: Path) -> None:
    """Without a relays list a server is available to all relays."""
    declare(home, "servers:\n  orders: {command: python, args: [--version]}\n")
    orders = load_mcp_servers(home)["orders"]
    assert orders.relays == ("*",) and orders.args == ("--version",)
    assert server_for({"orders": orders}, "orders", "anything") is orders


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # a YAML syntax error names the file and the line to fix
        pytest.param("servers:\n  orders:\n    command: python\n    args: [oops\n",
                     r"mcp_servers\.yaml, line \d+: not valid YAML", id="invalid-yaml"),
        # a setting of the wrong type names its key path, its line and an example
        pytest.param("servers:\n  orders:\n    command: python\n    args: servers/mcp_orders.py\n",
                     r"line 4: servers\.orders\.args must be a list of strings", id="wrong-type"),
        # a misspelled setting is named with the settings that exist
        pytest.param("servers:\n  orders:\n    command: python\n    argz: []\n",
                     r"line 4: servers\.orders\.argz is not a setting", id="misspelled"),
        # two declarations of one server name are an error, not a silent override
        pytest.param("servers:\n  orders: {command: python}\n  orders: {command: node}\n",
                     r"servers\.orders is declared twice", id="declared-twice"),
    ],
)  # fmt: skip
def test_a_wrong_declaration_is_refused_saying_where(home: Path, text: str, said: str) -> None:
    """A declarations file that is not valid YAML, or declares a setting wrongly, is refused
    with the line and what to fix, under the one code of a wrong declaration."""
    declare(home, text)
    with pytest.raises(MCPError, match=said) as caught:
        load_mcp_servers(home)
    assert str(caught.value).endswith("[mcp-servers-invalid]")


def test_unknown_server_lists_declared_ones(home: Path) -> None:
    """Asking for an undeclared server lists the servers that are declared."""
    servers = load_mcp_servers(home)
    with pytest.raises(MCPError, match=r"'billing' is not declared .*\(declared: orders\)"):
        server_for(servers, "billing", "invoice")


def test_relay_outside_access_list_is_told_how_to_allow_it(home: Path) -> None:
    """A relay not in the server's relays list is refused with the setting to change."""
    pool = MCPPool(load_mcp_servers(home), "payroll")
    with pytest.raises(MCPError) as caught:
        run(pool.session("orders"))
    assert "not available to relay 'payroll' (allowed: invoice, lab)" in str(caught.value)
    assert "Add 'payroll' to servers.orders.relays" in str(caught.value)


def test_tools_and_results_over_one_session(home: Path) -> None:
    """Tools list deterministically; results come back structured, as parsed JSON or as text."""

    async def scenario() -> dict[str, Any]:
        async with MCPPool(load_mcp_servers(home), "invoice") as pool:
            session = await pool.session("orders")
            assert await pool.session("orders") is session
            first, again = await session.list_tools(), await session.list_tools()
            created = await session.call_tool(
                "create_order", {"sku": "SKU-7", "quantity": 2, "idempotency_key": "k-1"}
            )
            with pytest.raises(MCPError, match=r"orders\.fail failed: .*card declined"):
                await session.call_tool("fail", {"message": "card declined"})
            with pytest.raises(MCPError, match="No order 'ord-9'; known orders: ord-1"):
                await session.call_tool("get_order", {"order_id": "ord-9"})
            return {
                "tools": first,
                "again": again,
                "created": created,
                "listed": await session.call_tool("list_orders", {}),
                "summary": await session.call_tool("order_summary", {"order_id": "ord-1"}),
            }

    out = run(scenario())
    names = [t["name"] for t in out["tools"]]
    assert names == sorted(names) == [
        "create_order", "fail", "get_order", "list_orders", "order_summary", "sleep"
    ]  # fmt: skip
    assert json.dumps(out["tools"], sort_keys=True) == json.dumps(out["again"], sort_keys=True)
    create = out["tools"][0]
    assert set(create) == {"name", "description", "parameters"}
    assert create["parameters"]["required"] == ["sku", "quantity", "idempotency_key"]
    assert out["created"] == {
        "order_id": "ord-1", "sku": "SKU-7", "quantity": 2, "idempotency_key": "k-1",
        "attempts": 1, "created": True,
    }  # fmt: skip
    assert out["listed"]["orders"][0]["order_id"] == "ord-1"
    assert out["summary"] == "ord-1: 2 x SKU-7"


def test_idempotency_key_deduplicates_across_sessions(home: Path) -> None:
    """The same idempotency key in a later session returns the first order, counted twice."""
    order = {"sku": "SKU-1", "quantity": 1, "idempotency_key": "invoice-42"}

    async def one_session(*orders: dict[str, Any]) -> list[Any]:
        async with MCPPool(load_mcp_servers(home), "lab") as pool:
            session = await pool.session("orders")
            return [await session.call_tool("create_order", arguments) for arguments in orders]

    (first,) = run(one_session(order))
    second, other = run(one_session(order, {**order, "idempotency_key": "invoice-43"}))
    assert (first["order_id"], first["created"]) == ("ord-1", True)
    assert (second["order_id"], second["created"], second["attempts"]) == ("ord-1", False, 2)
    assert other["order_id"] == "ord-2"
    saved = json.loads((home / "orders.json").read_text(encoding="utf-8"))
    assert sorted(saved["orders"]) == ["ord-1", "ord-2"] and saved["attempts"] == 3


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sessions_survive_tasks_and_crashes_and_leave_no_process(home: Path) -> None:
    """Gathered tasks share one server, a killed server is restarted, and closing leaves none."""
    before = children_of(os.getpid())

    async def scenario() -> tuple[set[int], set[int], list[Any]]:
        pool = MCPPool(load_mcp_servers(home), "invoice", stderr_dir=home / "logs")

        async def ask(tool: str) -> Any:
            return await (await pool.session("orders")).call_tool(tool, {})

        answers = list(await asyncio.gather(ask("list_orders"), ask("list_orders")))
        first = children_of(os.getpid()) - before
        os.kill(next(iter(first)), signal.SIGKILL)
        with pytest.raises(MCPError, match=r"failed while calling tool .*starts it anew"):
            await ask("list_orders")
        answers.append(await ask("list_orders"))
        second = children_of(os.getpid()) - before
        await pool.aclose()
        with pytest.raises(MCPError, match="pool of relay 'invoice' is closed"):
            await pool.session("orders")
        return first, second, answers

    first, second, answers = run(scenario())
    assert answers == [{"attempts": 0, "orders": []}] * 3
    assert len(first) == len(second) == 1 and first != second
    assert not any(Path(f"/proc/{pid}").exists() for pid in first | second)
    assert (home / "logs" / "mcp-orders.stderr.log").is_file()


def test_missing_command_is_named(home: Path) -> None:
    """A server whose command does not exist fails with the server and command named."""
    declare(home, "servers:\n  ghost: {command: no-such-mcp-server-cmd}\n")
    pool = MCPPool(load_mcp_servers(home), "invoice")
    with pytest.raises(MCPError, match="'ghost' cannot start: command 'no-such-mcp-server-cmd'"):
        run(pool.session("ghost"))


def test_server_exiting_at_once_shows_its_stderr(home: Path) -> None:
    """A server that exits before initialize reports the command and the end of its stderr."""
    script = "import sys; print('bad config: ORDERS_DB unset', file=sys.stderr); sys.exit(3)"
    config = MCPServerConfig(name="broken", command="python", args=("-c", script), cwd=home)

    async def scenario() -> None:
        async with MCPSession(config):
            pass

    with pytest.raises(MCPError) as caught:
        run(scenario())
    message = str(caught.value)
    assert "'broken' failed to start: it exited" in message
    assert sys.executable not in message and "python -c" in message
    assert "stderr ends with:\n  bad config: ORDERS_DB unset" in message


def test_silent_server_times_out_at_start(home: Path) -> None:
    """A server that never answers initialize fails after start_timeout instead of hanging."""
    config = MCPServerConfig(
        name="mute", command="python", args=("-c", "import sys; sys.stdin.read()"),
        cwd=home, start_timeout=0.5,
    )  # fmt: skip
    with pytest.raises(MCPError, match=r"'mute' failed to start: .*within 0\.5 s"):
        run(MCPSession(config).__aenter__())


def test_slow_call_times_out_and_says_it_may_have_happened(home: Path) -> None:
    """A call slower than call_timeout raises, warning that it may still take effect."""
    config = load_mcp_servers(home)["orders"]
    quick = MCPServerConfig(**{**config.__dict__, "call_timeout": 0.5})

    async def scenario() -> None:
        async with MCPSession(quick) as session:
            await session.call_tool("sleep", {"seconds": 30})

    with pytest.raises(MCPError, match=r"no answer within 0\.5 s .*may still take effect"):
        run(scenario())
