"""``relay mcp`` played by an agent: the MCP SDK's own client drives a real server process over
stdio and over streamable HTTP on loopback, on real relays (runs, crashes, forks, waits)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData

from relay_notebook import commands
from relay_notebook.commands.mcp_config import client_config
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source

# Each body notes itself in effects.log (the run's execution folder, or the replay's sandbox).
SHOP = relay_source("noting_shop")
ONE_STEP = """from dbos import DBOS


@DBOS.step()
def shout(text):
    return text.upper()


@DBOS.workflow()
async def run(INPUT):
    return {"loud": shout(INPUT["text"])}
"""
ITEMS = {"items": ["a", "b"]}
SECRET_NAME, SECRET = "MCP_TOKEN", "mcp7Qz9-vault-VALUE-27182818"
READ_ONLY_TOOLS = {
    "list_relays", "list_runs", "check", "graph", "diff", "lineage", "logs", "events",
    "list_files", "read_file",
}  # fmt: skip


def secret_forms(value: str) -> list[bytes]:
    """The value as it is, JSON-escaped, and its base64 at the three alignments."""
    raw = value.encode()
    forms = [raw, json.dumps(value)[1:-1].encode()]
    for shift in range(3):
        padded = b"\0" * shift + raw
        whole = len(padded) // 3 * 3
        forms.append(base64.b64encode(padded[:whole])[4 if shift else 0 :])
    return forms


class Agent:
    """The SDK's client session on an event loop of its own thread, called from the test's:
    one server serves every test of the module. Every answer's text is kept (``seen``)."""

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]) -> None:
        self.seen: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stop = asyncio.Event()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._serve(connect),), daemon=True
        )
        self._thread.start()
        assert self._ready.wait(120), "the MCP session did not start"
        if self._failure is not None:
            raise self._failure

    async def _serve(
        self, connect: Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]
    ) -> None:
        try:
            async with connect() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # reported to the test's thread
            self._failure = exc
            self._ready.set()

    def _do(self, coroutine: Any, timeout: float = 300) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; a failed call fails the test."""
        result = self._do(self.session.call_tool(tool, arguments))
        self.seen.append(result.model_dump_json())
        assert not result.is_error, result.content
        structured: dict[str, Any] = result.structured_content
        return structured

    def refused(self, tool: str, **arguments: Any) -> ErrorData:
        """The MCP error the call is answered with."""
        with pytest.raises(MCPError) as caught:
            self._do(self.session.call_tool(tool, arguments))
        self.seen.append(caught.value.error.model_dump_json())
        return caught.value.error

    def read(self, uri: str) -> str:
        contents = self._do(self.session.read_resource(uri)).contents
        self.seen.append(contents[0].text)
        text: str = contents[0].text
        return text

    def tools(self) -> dict[str, Any]:
        return {t.name: t for t in self._do(self.session.list_tools()).tools}

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


def server_environment() -> dict[str, str]:
    """This process's environment, on per-run SQLite whatever the developer's shell says."""
    env = dict(os.environ)
    env.pop("RELAY_DATABASE_URL", None)
    return env


@pytest.fixture(scope="module")
def stdio_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose vault holds a secret."""
    ws = Workspace(tmp_path_factory.mktemp("mcp") / "relays")
    commands.vault_set(ws, SECRET_NAME, SECRET)
    return ws.home


@pytest.fixture(scope="module")
def agent(stdio_home: Path) -> Iterator[Agent]:
    """An agent connected to ``relay --home H mcp``, started by the SDK's stdio client from
    the ``mcpServers`` entry ``relay mcp --config`` and ``%relay mcp`` print."""
    entry = client_config(stdio_home)["mcpServers"]["relay"]
    assert entry["args"] == ["-m", "relay_notebook.cli", "--home", str(stdio_home), "mcp"]
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=server_environment()
    )
    client = Agent(lambda: stdio_client(params))
    yield client
    client.close()


def test_every_tool_says_what_it_takes_returns_and_may_change(agent: Agent) -> None:
    """Each command is a tool with input and output schemas; read-only tools say so, and the
    others say whether they overwrite and whether a repeat is harmless."""
    tools = agent.tools()
    assert set(tools) == READ_ONLY_TOOLS | {
        "save_draft", "run", "recover", "wait", "reconcile", "fork", "send", "test_crash_each",
    }  # fmt: skip
    for name, tool in tools.items():
        assert tool.output_schema is not None and tool.input_schema["type"] == "object", name
        assert tool.description and "\n" not in tool.description, name
        hints = tool.annotations
        assert hints.read_only_hint is (name in READ_ONLY_TOOLS), name
        assert hints.open_world_hint is False, name
    assert tools["save_draft"].annotations.destructive_hint is True
    assert tools["save_draft"].annotations.idempotent_hint is True
    assert tools["reconcile"].annotations.destructive_hint is True
    for name in ("run", "recover", "fork", "send"):
        assert tools[name].annotations.destructive_hint is False, name
        assert tools[name].annotations.idempotent_hint is False, name
    assert tools["fork"].input_schema["required"] == ["run_id", "from_call"]
    assert "crash" in tools["run"].input_schema["properties"]


def test_bad_input_is_an_mcp_error_carrying_the_kits_code(agent: Agent) -> None:
    """A missing relay or run, a wrong argument type, an input over the bounds and a bad
    crash point each come back as an MCP error with the CLI's message and code."""
    missing = agent.refused("logs", run_id="nope-1")
    assert missing.data["code"] == "run-not-found" and missing.code == -32602
    assert missing.message.endswith("[run-not-found]")
    assert agent.refused("graph", relay="nothing").data["code"] == "relay-not-found"
    assert agent.refused("graph", relay="../etc").data["code"] == "invalid-relay-name"
    typed = agent.refused("run", relay="shop", wait_s="soon")
    assert typed.data["code"] == "invalid-request" and "wait_s" in typed.message
    assert agent.refused("wait", run_id="shop-1", wait_s=601).data["code"] == "invalid-request"
    agent.call("save_draft", relay="shop", source=SHOP)
    deep: Any = 1
    for _ in range(101):
        deep = [deep]
    too_deep = agent.refused("run", relay="shop", input=deep)
    assert too_deep.data["code"] == "invalid-input" and "Field 'input'" in too_deep.message
    crash = agent.refused("run", relay="shop", input=ITEMS, crash="after:nowhere")
    assert crash.data["code"] == "invalid-crash-spec" and "price" in crash.message
    huge = agent.refused("save_draft", relay="shop", source="x" * (1024 * 1024 + 1))
    assert huge.data["code"] == "invalid-request" and "1 MiB" in huge.message
    both = agent.refused("reconcile", run_id="shop-1", result=1, retry=True)
    assert both.data["code"] == "invalid-request"


def test_an_agent_writes_crashes_recovers_forks_and_replay_checks_a_relay(agent: Agent) -> None:
    """The builder's story: save a relay, run it with a crash, read the typed log, recover
    (checkpoints reused), fork with an edited step output, then change the draft and
    replay-check it against the recorded run."""
    saved = agent.call("save_draft", relay="shop", source=SHOP)
    assert saved["check"]["ok"] is True
    labels = {n["label"] for n in agent.call("graph", relay="shop")["nodes"]}
    assert {"price", "pack", "ship"} <= labels
    assert "def price" in agent.read("relay://relays/shop/source")

    crashed = agent.call("run", relay="shop", input=ITEMS, crash="after:pack#1")
    run_id = crashed["run_id"]
    assert crashed["status"] == "interrupted", crashed
    log = agent.call("logs", run_id=run_id)
    calls = [(f"{s['name']}#{s['occurrence']}", s["status"]) for s in log["steps"]]
    assert calls == [("price#1", "checkpointed"), ("pack#1", "checkpointed")], calls
    assert log["status"] == "interrupted" and len(log["preview"]["reused"]) == 2

    recovered = agent.call("recover", run_id=run_id)
    assert recovered["status"] == "succeeded" and recovered["attempt"] == 2
    assert recovered["result"] == {"shipped": 20} and len(recovered["reused"]) >= 2
    record = json.loads(agent.read(f"relay://runs/{run_id}"))
    assert record["run"]["status"] == "succeeded" and len(record["log"]["attempts"]) == 2

    forked = agent.call("fork", run_id=run_id, from_call="ship", set={"price#2": 1})
    assert forked["status"] == "succeeded" and forked["result"] == {"shipped": 0}, forked
    tree = agent.call("lineage", run_id=forked["run_id"])
    assert tree["run_id"] == run_id and tree["forks"][0]["run_id"] == forked["run_id"]
    rows = {
        r["call"]: r["differs"]
        for r in agent.call("diff", run_a=run_id, run_b=forked["run_id"])["calls"]
    }
    assert rows["price#1"] == [] and rows["price#2"] and rows["ship#1"]
    runs = {r["run_id"] for r in agent.call("list_runs", relay="shop")["runs"]}
    assert {run_id, forked["run_id"]} <= runs

    renamed = SHOP.replace("def pack(", "def wrap(").replace(
        "        pack(sku)", "        wrap(sku)"
    )
    assert agent.call("save_draft", relay="shop", source=renamed)["check"]["ok"] is True
    replayed = agent.call("check", relay="shop", replay=True, runs=[run_id])
    [verdict] = replayed["runs"]
    assert verdict["run_id"] == run_id and verdict["verdict"] != "compatible", verdict
    # the run finished: it differs, but no recovery would replay it, so the check passes
    assert verdict["blocks_recovery"] is False and replayed["ok"] is True
    assert agent.call("check", relay="shop")["ok"] is True  # the draft itself is admitted


def test_an_agent_answers_a_waiting_run(agent: Agent) -> None:
    """A run waiting for an approval ends its attempt ``waiting``; its events show the draft;
    ``send`` delivers the approval and the run resumes to its result."""
    agent.call("save_draft", relay="approval", source=relay_source("approval"))
    waiting = agent.call("run", relay="approval", input={"order": "B-7"})
    assert waiting["status"] == "waiting", waiting
    events = agent.call("events", run_id=waiting["run_id"])
    [draft] = [e for e in events["events"] if e["key"] == "draft"]
    assert draft["value"]["amount"] == 42
    answered = agent.call(
        "send", run_id=waiting["run_id"], topic="approval",
        message={"approved": True, "note": "ok by Ann"}, idempotency_key="approve-B-7",
    )  # fmt: skip
    assert answered["delivery"]["resumed"] is True
    assert answered["outcome"]["status"] == "succeeded"
    assert answered["outcome"]["result"] == {"paid": 42, "note": "ok by Ann"}
    again = agent.refused("send", run_id=waiting["run_id"], topic="approval", message=1)
    assert again.data["code"] == "run-not-waiting", again


def test_an_agent_crashes_a_relay_at_every_point(agent: Agent) -> None:
    """``test_crash_each`` crashes a one-step relay after and during its call, recovers each
    run and finds every result equal to the clean run's."""
    agent.call("save_draft", relay="loud", source=ONE_STEP)
    report = agent.call("test_crash_each", relay="loud", input={"text": "hey"})
    assert report["ok"] is True and report["clean_result"] == {"loud": "HEY"}, report
    points = [p["point"] for p in report["points"]]
    assert len(points) == 2 and all("shout" in p for p in points), points


def test_no_vault_value_reaches_an_agent(agent: Agent) -> None:
    """An input carrying a vault value is refused by name; a draft whose text holds one, and
    an error message echoing one, are shown scrubbed; no answer of the whole session holds
    any form of the value."""
    agent.call("save_draft", relay="shop", source=SHOP)
    refused = agent.refused("run", relay="shop", input={"x": [SECRET]})
    assert (
        refused.data["code"] == "invalid-input" and f"vault secret {SECRET_NAME}" in refused.message
    )
    leaky = SHOP.replace("return 10", f"return 10  # {SECRET}")
    agent.call("save_draft", relay="leaky", source=leaky)
    assert f"[vault:{SECRET_NAME}]" in agent.read("relay://relays/leaky/source")
    echoed = agent.refused("logs", run_id=f"{SECRET}-1")  # an error echoing what it was sent
    assert echoed.data["code"] and f"[vault:{SECRET_NAME}]" in echoed.message, echoed
    agent.call("list_relays")
    seen = "\n".join(agent.seen).encode()
    assert [form for form in secret_forms(SECRET) if form in seen] == []


# -- streamable HTTP ------------------------------------------------------------------------

TOKEN = "test-token-0123456789abcdef"


def start_http_server(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    """``relay mcp --http 0`` on ``home`` started, and the list its stderr is read into."""
    process = subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "mcp", "--http", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
    reader.start()
    return process, lines


def stderr_line(lines: list[str], marker: str, what: str) -> str:
    """The first line of ``lines`` holding ``marker``, once the server has printed it."""
    return wait_until(
        lambda: next((x for x in lines if marker in x), None), timeout=120,
        what=lambda: f"{what} (stderr so far: {lines})",
    )  # fmt: skip


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``relay mcp --http 0`` on a fresh workspace; yields its URL (read from its stderr)."""
    home = tmp_path_factory.mktemp("mcp-http") / "relays"
    process, lines = start_http_server(home, server_environment() | {"RELAY_MCP_TOKEN": TOKEN})
    line = stderr_line(lines, " at http://", "the server's URL")
    assert "Bearer the value of RELAY_MCP_TOKEN" in "".join(lines)  # a given token is not echoed
    yield line.rsplit(" at ", 1)[1].strip()
    process.terminate()
    process.wait(30)


@asynccontextmanager
async def http_transport(url: str, token: str) -> AsyncIterator[tuple[Any, Any]]:
    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    )
    async with client, streamable_http_client(url, http_client=client) as (read, write):
        yield read, write


def test_the_http_server_refuses_a_request_without_its_token(http_server: str) -> None:
    """No token, or a wrong one: 401 with the kit's error body, before any MCP handling."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = httpx.post(http_server, json=hello, headers=headers, timeout=30)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "forbidden"
        assert "Authorization: Bearer" in answer.json()["error"]["message"]


def test_an_agent_runs_and_reads_a_relay_over_http(http_server: str) -> None:
    """With the token, the same tools: save, run, the run's record as a resource, and a
    coded error for a missing run."""
    agent = Agent(lambda: http_transport(http_server, TOKEN))
    try:
        assert agent.call("save_draft", relay="shop", source=SHOP)["check"]["ok"] is True
        done = agent.call("run", relay="shop", input={"items": ["a"]})
        assert done["status"] == "succeeded" and done["result"] == {"shipped": 0}
        record = json.loads(agent.read(f"relay://runs/{done['run_id']}"))
        assert record["run"]["result"] == {"shipped": 0}
        graph = json.loads(agent.read("relay://relays/shop/graph"))
        assert {n["label"] for n in graph["nodes"]} >= {"price", "pack", "ship"}
        assert agent.refused("recover", run_id="shop-9").data["code"] == "run-not-found"
    finally:
        agent.close()


def test_an_agent_reconciles_an_uncertain_call_and_recovers(tmp_path: Path) -> None:
    """A run crashed during an agent call with an effect stops for reconciliation: over MCP the
    agent recovers it (needs_reconciliation, no attempt used), lists the uncertain call,
    reconciles it with the order the service made, recovers it to success, and ``wait`` and
    ``list_files`` agree; the service took the order once."""
    from relay_notebook.commands.lab import Lab, OrderService

    workspace = Workspace(tmp_path / "relays")
    service = OrderService(token="tok-s3cret-9f8e7d")
    try:
        lab = Lab(workspace, service)
        first = lab.start("uncertain-action")
        assert first.status == "interrupted" and len(service.book.attempts) == 1
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "relay_notebook.cli", "--home", str(workspace.home), "mcp"],
            env=server_environment(),
        )
        agent = Agent(lambda: stdio_client(params))
        try:
            held = agent.call("recover", run_id=first.run_id)
            assert held["status"] == "needs_reconciliation", held
            assert "reconcile" in held["error"]["message"], held
            listed = agent.call("reconcile", run_id=first.run_id)
            [pending] = listed["pending"]
            assert pending["call"]["kind"] == "agent" and pending["call"]["name"] == "clerk", (
                pending
            )
            order = next(iter(service.book.orders.values()))
            done = agent.call("reconcile", run_id=first.run_id, result=order)
            assert done["key"] == pending["key"] and done["result"] == order, done
            recovered = agent.call("recover", run_id=first.run_id)
            assert recovered["status"] == "succeeded", recovered
            assert recovered["result"]["order"]["order_id"] == order["order_id"], recovered
            assert agent.call("wait", run_id=first.run_id)["status"] == "succeeded"
            files = agent.call("list_files", run_id=first.run_id)
            [call] = files["calls"]
            assert call["agent"] == "clerk" and call["key"] == pending["key"], call
            paths = [f["path"] for f in call["files"]]
            assert "call-1/receipt.json" in paths, paths
            unknown = agent.refused("list_files", run_id=first.run_id, call="call-99")
            assert unknown.data["code"] == "run-file-not-found", unknown
            receipt = agent.call("read_file", run_id=first.run_id, path="call-1/receipt.json")
            assert receipt["path"] == "call-1/receipt.json" and "clerk" in receipt["text"], receipt
            outside = agent.refused("read_file", run_id=first.run_id, path="../../../relay.py")
            assert outside.message.endswith("[run-file-refused]"), outside
        finally:
            agent.close()
        assert (len(service.book.attempts), len(service.book.orders)) == (1, 1)
        assert lab.report(first.run_id)["orders"] == 1
    finally:
        service.stop()


def test_without_a_given_token_the_http_server_makes_one_and_prints_it(tmp_path: Path) -> None:
    """``relay mcp --http 0`` with no RELAY_MCP_TOKEN makes a token, prints it with the URL on
    stderr, and takes exactly that token: the printed one lists the tools, another gets 401."""
    env = server_environment()
    env.pop("RELAY_MCP_TOKEN", None)
    home = tmp_path / "relays"
    process, lines = start_http_server(home, env)
    try:
        bearer = stderr_line(lines, "Authorization: Bearer ", "the token line")
        url = next(x for x in lines if " at http://" in x).rsplit(" at ", 1)[1].strip()
        token = bearer.split("Authorization: Bearer ", 1)[1].strip().rstrip("'")
        assert len(token) >= 32 and "RELAY_MCP_TOKEN" not in token, bearer
        hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert (
            httpx.post(url, json=hello, headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        agent = Agent(lambda: http_transport(url, token))
        try:
            assert "run" in agent.tools() and "logs" in agent.tools()
        finally:
            agent.close()
    finally:
        process.terminate()
        process.wait(30)
