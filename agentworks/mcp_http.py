"""The streamable-HTTP transport of a ``url:`` MCP server, with the HTTP status it refused with.

The SDK turns an HTTP error answer into a JSON-RPC error that says only "an error response";
the transport notes the status (401: the credentials sent were refused) for the session's
message. The headers it sends (a vault secret among them) live only in its HTTP client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

__all__ = ["Streams", "http_transport"]

#: the (read, write) streams a transport gives the client session
Streams = tuple[Any, Any]


def http_transport(
    url: str,
    headers: Mapping[str, str],
    *,
    connect_timeout: float,
    call_timeout: float,
    on_refusal: Callable[[int], None],
) -> AbstractAsyncContextManager[Streams]:
    """The streams of a streamable-HTTP session with ``url``; ``on_refusal(status)`` hears of
    each answer with an HTTP error status."""
    timeout = httpx2.Timeout(call_timeout, connect=connect_timeout)

    async def note_refusal(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            on_refusal(response.status_code)

    @asynccontextmanager
    async def connect() -> AsyncIterator[Streams]:
        client = create_mcp_http_client(headers=dict(headers), timeout=timeout)
        client.event_hooks["response"].append(note_refusal)
        async with client, streamable_http_client(url, http_client=client) as (read, write):
            yield read, write

    return connect()
