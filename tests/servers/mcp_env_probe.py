"""A stdio MCP server that says whether it was given ``$TOKEN`` (its SHA-256, never the value)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from mcp.server.mcpserver import MCPServer

server: MCPServer[Any] = MCPServer("probe", log_level="WARNING")


@server.tool()
def token_check() -> dict[str, Any]:
    """Whether TOKEN is set, and the SHA-256 of its value."""
    token = os.environ.get("TOKEN")
    digest = hashlib.sha256(token.encode()).hexdigest() if token else None
    return {"present": token is not None, "sha256": digest}


if __name__ == "__main__":
    server.run("stdio")
