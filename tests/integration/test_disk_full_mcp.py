"""A full disk through ``relay mcp``: each tool call answers one coded ``disk-full`` error.

The MCP SDK's own client drives a real ``relay mcp`` process over stdio (as in
``test_mcp_server``), its workspace on a real 16 MiB tmpfs (``tests.mounts``) filled to the
last byte. ``run``, ``save_draft``, ``recover``, ``fork`` and ``send`` each answer an MCP error
whose data carries the ``disk-full`` code and whose message names the folder, never a trace;
the server goes on serving, and with the space back the same calls work. A disk that fills
just after a new run's record leaves the run ``interrupted``, recovered through the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData

from relay_notebook.commands.mcp_config import client_config
from relay_notebook.runner.fault_points import ENV_STOP_AT
from relay_notebook.workspace import Workspace
from tests.integration.test_disk_full_start import stopped_at
from tests.integration.test_mcp_server import Agent, server_environment
from tests.mounts import fill, tmpfs
from tests.polling import wait_until
from tests.relays import relay_source

FIVE = {"n": 2}


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A workspace on a 16 MiB tmpfs, mounted for this test alone, with ``five`` and ``gate``."""
    with tmpfs(tmp_path / "disk", "16m") as where:
        ws = Workspace(where / "relays")
        for name in ("five", "gate"):
            ws.save_draft(name, relay_source(name))
        yield ws.home


def connect(home: Path, **env: str) -> Agent:
    """An agent connected to ``relay --home HOME mcp`` over stdio (``env`` added to its own)."""
    entry = client_config(home)["mcpServers"]["relay"]
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**server_environment(), **env}
    )
    return Agent(lambda: stdio_client(params))


def assert_disk_full(error: ErrorData, folder: Path) -> None:
    """One coded ``disk-full`` error naming ``folder``: no traceback, no internal error."""
    assert error.data["code"] == "disk-full", error
    assert error.message.endswith("[disk-full]") and str(folder) in error.message, error.message
    assert "Traceback" not in error.message and "\n" not in error.message, error.message


def statuses(agent: Agent) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in agent.call("list_runs")["runs"]}


def unrecorded(home: Path) -> list[Path]:
    return [p for p in home.glob("*/runs/iteration-*-hook") if not (p / "run.json").is_file()]


def test_every_tool_on_a_full_disk_answers_disk_full(home: Path) -> None:
    """run, save_draft, recover, fork and send on a full disk: a ``disk-full`` MCP error each,
    nothing changed; freed, the interrupted run recovers and the waiting run takes the
    message, through the same server."""
    agent = connect(home)
    try:
        assert agent.call("run", relay="five", input=FIVE)["status"] == "succeeded"
        crashed = agent.call("run", relay="five", input=FIVE, crash="after:fetch")
        assert crashed["status"] == "interrupted", crashed
        assert agent.call("run", relay="gate")["status"] == "waiting"
        before = statuses(agent)
        assert before == {"five-1": "succeeded", "five-2": "interrupted", "gate-1": "waiting"}
        filler = fill(home.parent)
        for tool, arguments in (
            ("run", {"relay": "five", "input": FIVE}),
            ("save_draft", {"relay": "other", "source": relay_source("five")}),
            ("recover", {"run_id": "five-2"}),
            ("fork", {"run_id": "five-1", "from_call": "add#2", "set": {"fetch#2": 5}}),
            ("send", {"run_id": "gate-1", "topic": "go", "message": 5}),
        ):
            assert_disk_full(agent.refused(tool, **arguments), home)
        assert statuses(agent) == before and unrecorded(home) == []
        filler.unlink()
        recovered = agent.call("recover", run_id="five-2")
        assert recovered["status"] == "succeeded" and recovered["result"] == {"total": 10}
        sent = agent.call("send", run_id="gate-1", topic="go", message=5)
        assert sent["outcome"]["status"] == "succeeded", sent
    finally:
        agent.close()


def test_a_disk_filled_after_a_runs_record_leaves_it_interrupted(home: Path) -> None:
    """The server stopped just after a new run's run.json (``run:recorded``), the disk filled:
    the ``run`` call answers ``disk-full`` naming the run's folder and ``relay recover``; the
    run is ``interrupted``; freed, the ``recover`` tool finishes it."""
    agent = connect(home, **{ENV_STOP_AT: "run:recorded"})
    filler: Path | None = None
    try:
        call = asyncio.run_coroutine_threadsafe(
            agent.session.call_tool("run", {"relay": "five", "input": FIVE}), agent._loop
        )
        pid = wait_until(lambda: stopped_at("run:recorded"), 120, what="relay mcp stopped")
        filler = fill(home.parent)
        os.kill(pid, signal.SIGCONT)
        with pytest.raises(MCPError) as caught:
            call.result(120)
        folder = home / "five" / "runs" / "iteration-1-hook"
        assert_disk_full(caught.value.error, folder)
        assert "relay recover five-1" in caught.value.error.message
        assert statuses(agent) == {"five-1": "interrupted"} and unrecorded(home) == []
        filler.unlink()
        recovered: dict[str, Any] = agent.call("recover", run_id="five-1")
        assert recovered["status"] == "succeeded" and recovered["result"] == {"total": 10}
    finally:
        agent.close()
