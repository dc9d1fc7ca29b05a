"""``relay mcp``'s two transports: stdio (a coding agent starts the server as its child) and
streamable HTTP on 127.0.0.1, where every request must carry the server's bearer token.

Design note: the HTTP server listens on loopback only and refuses a request without
``Authorization: Bearer TOKEN`` before the MCP app sees it (the token is compared in constant
time); the SDK's own DNS-rebinding check (Host and Origin on loopback) stays on. Either way,
when the transport ends, the attempts this server supervises are stopped, recoverable.
"""

from __future__ import annotations

import hmac
import json
import socket
from collections.abc import Callable
from typing import Any

import anyio

from relay_notebook.errors import codes
from relay_notebook.mcp_server.app import RelayMCPServer, Supervision

__all__ = ["MCP_PATH", "TokenGate", "serve_http", "serve_stdio"]

#: the streamable HTTP endpoint's path
MCP_PATH = "/mcp"

_Scope = dict[str, Any]
_ASGI = Callable[..., Any]


class TokenGate:
    """ASGI middleware: an HTTP request without the bearer token is answered 401."""

    def __init__(self, app: _ASGI, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: _Scope, receive: _ASGI, send: _ASGI) -> None:
        if scope["type"] not in ("http", "lifespan"):
            return  # only HTTP is served: any other scope (a websocket) never reaches the app
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await self._refuse(send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: _ASGI) -> None:
        message = (
            "relay mcp requires its token: send the header 'Authorization: Bearer TOKEN' "
            "(relay mcp --http printed it on start, or set RELAY_MCP_TOKEN before starting it)."
        )
        body = json.dumps({"error": {"code": codes.FORBIDDEN.code, "message": message}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def serve_stdio(server: RelayMCPServer, served: Supervision) -> None:
    """Serve over this process's stdin and stdout until the client closes stdin."""
    try:
        anyio.run(server.run_stdio_async)
    finally:
        served.interrupt_all()


def bind_loopback(port: int) -> socket.socket:
    """A listening socket on ``127.0.0.1:port`` (0: a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


def serve_http(
    server: RelayMCPServer,
    served: Supervision,
    sock: socket.socket,
    token: str,
) -> None:
    """Serve streamable HTTP at ``MCP_PATH`` on ``sock`` until SIGINT or SIGTERM."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host="127.0.0.1")
    config = uvicorn.Config(TokenGate(app, token), log_level="warning", lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        served.interrupt_all()
