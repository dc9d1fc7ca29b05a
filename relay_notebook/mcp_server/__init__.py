"""The MCP server: coding agents (Claude Code, Jupyter AI's agents, IDE assistants) operate a
workspace's relays through the Model Context Protocol, started as ``relay mcp``.

It owns the tools (one per command, each with JSON schemas for its input and output and
annotations saying whether it only reads, overwrites or may be repeated), the ``relay://``
resources (a run, a relay's flow graph and source), the two transports (stdio, and streamable
HTTP on loopback behind a token) and the translation of a ``RelayError`` into an MCP error
carrying its code. A thin surface: it parses and checks arguments, calls
``relay_notebook.commands`` and returns JSON. It may import ``commands``, ``views``, the
``workspace`` and ``errors``; never the runner, history, the record or the source layer
(``pyproject.toml``'s contracts), nor another surface.
"""

from __future__ import annotations

from relay_notebook.mcp_server.app import RelayMCPServer, Supervision, mcp_error
from relay_notebook.mcp_server.relay_tools import register_relay_tools
from relay_notebook.mcp_server.resources import register_resources
from relay_notebook.mcp_server.run_tools import register_run_tools
from relay_notebook.mcp_server.transports import MCP_PATH, bind_loopback, serve_http, serve_stdio
from relay_notebook.workspace import Workspace

__all__ = [
    "MCP_PATH",
    "RelayMCPServer",
    "Supervision",
    "bind_loopback",
    "build_server",
    "mcp_error",
    "serve_http",
    "serve_stdio",
]

_INSTRUCTIONS = (
    "Relays are durable DBOS workflows in a workspace. Write one with save_draft (a module "
    "with @DBOS.step() functions and an @DBOS.workflow() async def run(INPUT)), check it, "
    "run it (crash='after:STEP' interrupts it on purpose), read logs, recover, fork from a "
    "call with edited outputs, and send a message to a run that waits. Errors carry the "
    "kit's stable code in data.code, as the relay CLI prints it in brackets."
)


def build_server(workspace: Workspace) -> tuple[RelayMCPServer, Supervision]:
    """The server of ``workspace``, every tool and resource registered, and its supervision."""
    served = Supervision(workspace)
    server = RelayMCPServer(served, name="relay", instructions=_INSTRUCTIONS, log_level="WARNING")
    register_relay_tools(server, served)
    register_run_tools(server, served)
    register_resources(server, served)
    return server, served
