"""``%relay mcp`` and ``relay mcp --config``: the ``mcpServers`` entry with which a coding
agent's MCP client (Claude Code, Jupyter AI, an IDE assistant) starts ``relay mcp`` on a
workspace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["SERVER_NAME", "client_config", "http_client_config"]

#: the server's name in a client's ``mcpServers`` (its tools show as ``mcp__relay__run``)
SERVER_NAME = "relay"


def client_config(home: Path, python: str | None = None) -> dict[str, Any]:
    """The stdio entry: this Python (``python``: another) runs ``relay --home HOME mcp``."""
    command = python or sys.executable
    args = ["-m", "relay_notebook.cli", "--home", str(home), "mcp"]
    return {"mcpServers": {SERVER_NAME: {"command": command, "args": args}}}


def http_client_config(port: int, token: str = "TOKEN") -> dict[str, Any]:
    """The entry of a server started with ``relay mcp --http PORT`` (its token as printed)."""
    server = {
        "type": "http",
        "url": f"http://127.0.0.1:{port}/mcp",
        "headers": {"Authorization": f"Bearer {token}"},
    }
    return {"mcpServers": {SERVER_NAME: server}}
