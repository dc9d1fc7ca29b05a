"""A small documentation service spoken over MCP streamable HTTP, started by tests on loopback.

It listens on 127.0.0.1 at a port the system picks and prints ``{"port": N}`` as its first line
of stdout. Every request must carry ``Authorization: Bearer $DOCS_TOKEN`` (else HTTP 401). It
offers a tool (``lookup``, which counts its calls in ``$DOCS_CALLS``), a resource
(``docs://guide``) and a prompt (``review``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

server: MCPServer[Any] = MCPServer("docs", log_level="WARNING")
GUIDE = "# Guide\nRelays are durable programs."


def _count() -> int:
    path = Path(os.environ["DOCS_CALLS"])
    calls = int(path.read_text() or 0) + 1 if path.exists() else 1
    path.write_text(str(calls))
    return calls


@server.tool()
def lookup(term: str) -> dict[str, Any]:
    """Look a term up in the guide; counts every call."""
    return {"term": term, "found": term.lower() in GUIDE.lower(), "calls": _count()}


@server.resource("docs://guide", mime_type="text/markdown", description="The user guide")
def guide() -> str:
    """The guide, as markdown."""
    return GUIDE


@server.prompt(description="Ask for a review of one text")
def review(text: str, tone: str = "kind") -> str:
    """A review request."""
    return f"Review this in a {tone} tone: {text}"


class BearerCheck:
    """Refuses every request without the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != (
            self.expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"bad token"})
            return
        await self.app(scope, receive, send)


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = BearerCheck(server.streamable_http_app(), os.environ["DOCS_TOKEN"])
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
