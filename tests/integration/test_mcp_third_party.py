"""A third-party MCP server from the package index (``mcp-server-time``, the MCP project's own
reference server) over stdio, declared in ``mcp_servers.yaml`` as a user would, called from a
relay run for real: its tool, crash after the call and recovery from the checkpoint, and its
tools listed through the kit's listing call."""

from __future__ import annotations

import textwrap

import pytest

from relay_notebook import commands
from relay_notebook.history import read_run_log
from relay_notebook.workspace import Workspace

pytest.importorskip("mcp_server_time", reason="pip install -e '.[test]' installs mcp-server-time")

TIME_RELAY = textwrap.dedent(
    """
    from dbos import DBOS
    from agentworks import mcp

    @DBOS.step()
    async def tokyo(hhmm):
        converted = await mcp(server="time", tool="convert_time", arguments={
            "source_timezone": "UTC", "time": hhmm, "target_timezone": "Asia/Tokyo"})
        return converted["target"]["datetime"][11:16]

    @DBOS.step()
    async def noted(when):
        return f"Tokyo: {when}"

    @DBOS.workflow()
    async def run(INPUT):
        when = await tokyo(INPUT["utc"])
        tools = await mcp(server="time", listing="tools")
        return {"line": await noted(when), "tools": sorted(t["name"] for t in tools)}
    """
)


@pytest.fixture
def time_server(workspace: Workspace) -> Workspace:
    """A workspace declaring mcp-server-time, started with the kit's Python."""
    workspace.home.mkdir(parents=True, exist_ok=True)
    (workspace.home / "mcp_servers.yaml").write_text(
        "servers:\n  time:\n    command: python\n"
        '    args: ["-m", "mcp_server_time", "--local-timezone", "UTC"]\n'
    )
    workspace.save_draft("clock", TIME_RELAY)
    return workspace


def test_a_package_index_mcp_server_is_called_crashed_after_and_recovered(
    time_server: Workspace,
) -> None:
    """convert_time turns 12:00 UTC into 21:00 in Tokyo; a crash after the step that made the
    call is recovered without calling the server again (the step comes back from its
    checkpoint), and the server's own tool list is read through the kit."""
    check = commands.check(time_server, "clock")
    assert check.ok, [d.format() for d in check.diagnostics]
    first = commands.run(
        time_server, "clock", run_input={"utc": "12:00"}, crash="after:tokyo"
    ).wait(120)
    assert first.status == "interrupted", first.error
    done = commands.recover(time_server, first.run_id).wait(120)
    assert done.status == "succeeded", done.error
    assert done.result["line"] == "Tokyo: 21:00"
    assert {"convert_time", "get_current_time"} <= set(done.result["tools"])
    log = read_run_log(time_server, first.run_id)
    tokyo = [s for s in log.steps if s.name == "tokyo"]
    assert len(tokyo) == 1 and tokyo[0].executed_in == (1,) and tokyo[0].reused_in == (2,)
    assert len(tokyo[0].receipts) == 1  # the server was called once, in attempt 1
    assert [s.name for s in log.steps if s.name.startswith("mcp:")] == ["mcp:time.list:tools"]
