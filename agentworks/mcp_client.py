"""MCP over stdio and streamable HTTP: live client sessions with the workspace's servers.

Design note: each ``MCPSession`` lives in a task of its own that enters and leaves the SDK's
transport (stdio, or streamable HTTP for a ``url:`` server) and client session. The SDK is built
on anyio cancel scopes, which must be left by the task that entered them, while authored code
calls MCP from whatever task it runs in (``asyncio.gather`` included) and the pool is closed by
the run's task; so no caller owns those scopes, callers only send requests. Start and every call
are bounded by timeouts: a silent server is an error, never a hang. A server's vault references
(``env:`` of a stdio server, ``headers:`` of a ``url:`` one) are resolved by the ``secret``
callback as the session opens and kept only in the transport's arguments: never in the config,
a repr or a message. A stdio server's stderr goes to a file (a pipe nobody reads could block
the server) whose tail explains a failed start or call. Closing stops the server as the SDK does
(stdin closed, then SIGTERM, then SIGKILL of its process group) and waits until it is reaped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO, TypeVar

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from agentworks.errors import MCPError
from agentworks.mcp_http import Streams, http_transport
from agentworks.mcp_servers import (
    MCP_SERVERS_FILE,
    MCPServerConfig,
    resolve_secrets,
    server_for,
)

__all__ = ["MCPPool", "MCPSession"]

T = TypeVar("T")
#: a vault secret's value by name (raises when it cannot be had)
Secret = Callable[[str], str]

_BASE_ENV = ("PATH", "HOME", "LANG")
_STDERR_TAIL_BYTES = 2000
_CALL_FAILURES = (
    SDKError,
    RuntimeError,
    ValidationError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    httpx2.HTTPError,
)


class _ClosedOnExit:
    """Closed (``aclose``) when its ``async with`` block is left, however it is left."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _no_secrets(name: str) -> str:
    raise MCPError(
        f"This MCP session has no vault to read secret {name!r} from; servers naming vault "
        f"secrets start inside a relay run."
    )


class MCPSession(_ClosedOnExit):
    """One live session with a server (stdio or streamable HTTP), reused for several calls
    within a run attempt."""

    def __init__(
        self,
        config: MCPServerConfig,
        *,
        stderr_path: Path | None = None,
        secret: Secret = _no_secrets,
    ) -> None:
        self.config = config
        self._secret = secret
        self._stderr_path = stderr_path
        self._stderr: TextIO | None = None
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._lost: str | None = None
        self._tools: list[dict[str, Any]] | None = None
        self._command_line = shlex.join([config.command, *config.args])
        self._http_status: int | None = None

    async def __aenter__(self) -> MCPSession:
        transport = self._http() if self.config.url else self._stdio()
        self._ready = ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(
            self._serve(transport, ready), name=f"mcp-{self.config.name}"
        )
        try:
            await ready
        except BaseException:
            await self.aclose()
            raise
        return self

    def _stdio(self) -> AbstractAsyncContextManager[Streams]:
        command = self._resolve_command()
        env = resolve_secrets(self.config.env, self._secret)  # before any file is opened
        if self._stderr_path is not None:
            self._stderr_path.parent.mkdir(parents=True, exist_ok=True)
            self._stderr = self._stderr_path.open("a+", encoding="utf-8")
        else:
            fd, name = tempfile.mkstemp(prefix=f"mcp-{self.config.name}-", suffix=".stderr")
            os.unlink(name)  # anonymous: gone with the last descriptor, like TemporaryFile
            self._stderr = os.fdopen(fd, "w+", encoding="utf-8")
        params = StdioServerParameters(
            command=command,
            args=list(self.config.args),
            env={k: os.environ[k] for k in _BASE_ENV if k in os.environ} | env,
            cwd=self.config.cwd,
        )
        return stdio_client(params, errlog=self._stderr)

    def _http(self) -> AbstractAsyncContextManager[Streams]:
        def refused(status: int) -> None:
            self._http_status = status

        return http_transport(
            str(self.config.url),
            resolve_secrets(self.config.headers, self._secret),
            connect_timeout=self.config.start_timeout,
            call_timeout=self.config.call_timeout,
            on_refusal=refused,
        )

    async def aclose(self) -> None:
        """Stop the server and wait until its process is gone; safe to call twice."""
        self._session = None
        self._stop.set()
        if self._task is not None:
            if self._ready is not None and not self._ready.done():
                self._task.cancel()  # still starting: the SDK's shutdown is shielded, so it runs
            # asyncio.wait never cancels the task: the server is stopped even if we are cancelled.
            await asyncio.wait({self._task})
            self._task = None
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # already raised to the opener; keeps asyncio from warning
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    @property
    def is_open(self) -> bool:
        """Whether calls can be made: started, not closed, and the server still connected."""
        return self._session is not None

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools as provider specs ``{"name", "description", "parameters"}``, by name."""
        if self._tools is None:
            tools: list[mcp_types.Tool] = await self._listed("tools")
            self._tools = [
                {"name": t.name, "description": t.description or "", "parameters": t.input_schema}
                for t in sorted(tools, key=lambda t: t.name)
            ]
        return [dict(spec) for spec in self._tools]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool``; its JSON result (structured, parsed JSON text, or text)."""
        session = self._live()
        result = await self._request(f"calling tool {tool!r}", session.call_tool(tool, arguments))
        texts = [c.text for c in result.content if isinstance(c, mcp_types.TextContent)]
        if result.is_error:
            message = "\n".join(texts) or "no message"
            names = [spec["name"] for spec in self._tools or []]
            offers = (
                f" The server offers: {', '.join(names)}." if names and tool not in names else ""
            )
            raise MCPError(
                f"MCP tool {self.config.name}.{tool} failed: {message}. Check the arguments "
                f"(keys: {', '.join(sorted(arguments)) or 'none'}) against the tool's schema."
                + offers
            )
        if result.structured_content is not None:
            return result.structured_content
        if len(texts) == len(result.content):
            values = [_json_or_text(text) for text in texts]
            return None if not values else values[0] if len(values) == 1 else values
        return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]

    async def list_resources(self) -> list[dict[str, Any]]:
        """The server's resources as MCP describes them (``uri``, ``name``, ``mimeType``...),
        by URI."""
        found: list[mcp_types.Resource] = await self._listed("resources")
        return [_dump(r) for r in sorted(found, key=lambda r: str(r.uri))]

    async def read_resource(self, uri: str) -> Any:
        """The contents of resource ``uri``: its text when it is one text, else a list of
        contents (``{"uri", "mimeType", "text"}`` or ``{..., "blob"}``, base64)."""
        session = self._live()
        result = await self._request(f"reading resource {uri!r}", session.read_resource(uri))
        contents = result.contents
        if len(contents) == 1 and isinstance(contents[0], mcp_types.TextResourceContents):
            return contents[0].text
        return [_dump(c) for c in contents]

    async def list_prompts(self) -> list[dict[str, Any]]:
        """The server's prompts (``name``, ``description``, ``arguments``), by name."""
        found: list[mcp_types.Prompt] = await self._listed("prompts")
        return [_dump(p) for p in sorted(found, key=lambda p: p.name)]

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        """Prompt ``name`` filled with ``arguments``: ``{"description", "messages": [{"role",
        "content"}]}``, a text content as its text (ready for ``agent(messages=...)``)."""
        session = self._live()
        result = await self._request(
            f"getting prompt {name!r}", session.get_prompt(name, arguments or None)
        )
        messages = [
            {
                "role": m.role,
                "content": m.content.text
                if isinstance(m.content, mcp_types.TextContent)
                else _dump(m.content),
            }
            for m in result.messages
        ]
        return {"description": result.description or "", "messages": messages}

    async def _listed(self, kind: str) -> list[Any]:
        """Every item of the paginated ``list_KIND`` request (tools, resources, prompts)."""
        session = self._live()
        found: list[Any] = []
        cursor: str | None = None
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            request = getattr(session, f"list_{kind}")(params=params)
            page = await self._request(f"listing {kind}", request)
            found.extend(getattr(page, kind))
            cursor = page.next_cursor
            if not cursor:
                return found

    async def _serve(
        self, transport: AbstractAsyncContextManager[Streams], ready: asyncio.Future[None]
    ) -> None:
        try:
            async with transport as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(self.config.start_timeout):
                    await session.initialize()
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(self._start_error(_leaf(exc)))
                return
            # After a good start only a dying transport lands here; the next call reports it.
            self._lost = f"{type(_leaf(exc)).__name__}: {_leaf(exc)}"
        finally:
            self._session = None
            if not ready.done():
                ready.set_exception(MCPError(f"MCP server {self.config.name!r}: start cancelled."))

    def _resolve_command(self) -> str:
        command = self.config.command
        if command == "python":
            return sys.executable
        if os.sep in command:
            if os.path.isfile(command) and os.access(command, os.X_OK):
                return command
        else:
            found = shutil.which(command, path=os.environ.get("PATH"))
            if found:
                return found
        raise MCPError(
            f"MCP server {self.config.name!r} cannot start: command {command!r} was not found "
            "(or is not executable). Install it, or fix servers."
            f"{self.config.name}.command in {MCP_SERVERS_FILE}."
        )

    def _start_error(self, cause: BaseException) -> MCPError:
        if isinstance(cause, TimeoutError):
            why = f"it did not answer initialize within {self.config.start_timeout:g} s"
        elif isinstance(cause, SDKError) and "closed" in str(cause).lower():
            why = "it exited (or closed stdout) before answering initialize"
        elif self._http_status in (401, 403):
            why = (
                f"it answered HTTP {self._http_status}, refusing the credentials sent; check the "
                f"vault secret servers.{self.config.name}.headers names (relay vault set NAME)"
            )
        elif self._http_status is not None:
            why = f"it answered HTTP {self._http_status}"
        else:
            why = f"{type(cause).__name__}: {cause}"
        if self.config.url:
            error = MCPError(
                f"MCP server {self.config.name!r} at {self.config.url} did not open a session: "
                f"{why}. Check that the server is running there and that servers."
                f"{self.config.name}.url and .headers in {MCP_SERVERS_FILE} are right."
            )
            # never chained: the HTTP client's errors hold the request, its headers included
            error.__suppress_context__ = True
            return error
        error = MCPError(
            f"MCP server {self.config.name!r} failed to start: {why}. Command: "
            f"{self._command_line} (in {self.config.cwd.resolve()}). Run it by hand to see why, "
            f"or fix servers.{self.config.name} in {MCP_SERVERS_FILE}.{self._stderr_tail()}"
        )
        error.__cause__ = cause
        return error

    def _live(self) -> ClientSession:
        if self._session is None:
            why = f"its connection was lost ({self._lost})" if self._lost else "it is closed"
            raise MCPError(
                f"MCP session with server {self.config.name!r} cannot take calls: {why}. "
                f"Ask the pool for the server again to start it anew.{self._stderr_tail()}"
            )
        return self._session

    async def _request(self, what: str, request: Awaitable[T]) -> T:
        timeout = self.config.call_timeout
        try:
            with anyio.fail_after(timeout):
                return await request
        except TimeoutError as exc:
            raise MCPError(
                f"MCP server {self.config.name!r} gave no answer within {timeout:g} s while "
                f"{what}; the call may still take effect on the server. Raise "
                f"servers.{self.config.name}.call_timeout in {MCP_SERVERS_FILE} if it needs longer."
            ) from exc
        except _CALL_FAILURES as exc:
            if isinstance(exc, SDKError) and exc.code == mcp_types.CONNECTION_CLOSED:
                # The server is gone: stop the transport now (reaping it); the pool starts anew.
                self._lost, self._session = str(exc), None
                self._stop.set()
            error = MCPError(
                f"MCP server {self.config.name!r} failed while {what}: {exc}. If the server "
                f"stopped, the next call through the pool starts it anew.{self._stderr_tail()}"
            )
            if self.config.url:  # the HTTP client's errors hold the request and its headers
                raise error from None
            raise error from exc

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        raw = os.pread(fd, _STDERR_TAIL_BYTES, max(0, size - _STDERR_TAIL_BYTES))
        lines = raw.decode("utf-8", errors="replace").strip().splitlines()[-10:]
        if not lines:
            return " It wrote nothing to stderr."
        return "\nIts stderr ends with:\n  " + "\n  ".join(lines) + "\n"


class MCPPool(_ClosedOnExit):
    """Sessions opened lazily per server name for one relay, all closed together; ``secret``
    gives the vault values the servers' ``env`` and ``headers`` name."""

    def __init__(
        self,
        servers: Mapping[str, MCPServerConfig],
        relay: str,
        *,
        stderr_dir: Path | None = None,
        secret: Secret = _no_secrets,
    ) -> None:
        self.servers = dict(servers)
        self._secret = secret
        self.relay = relay
        self._stderr_dir = stderr_dir
        self._sessions: dict[str, MCPSession] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    async def session(self, name: str) -> MCPSession:
        """The open session with server ``name``, started on first use."""
        config = server_for(self.servers, name, self.relay)
        async with self._lock:
            if self._closed:
                raise MCPError(f"The MCP pool of relay {self.relay!r} is closed; open a new one.")
            session = self._sessions.get(name)
            if session is None or not session.is_open:
                if session is not None:
                    await session.aclose()
                log = self._stderr_dir / f"mcp-{name}.stderr.log" if self._stderr_dir else None
                session = await MCPSession(
                    config, stderr_path=log, secret=self._secret
                ).__aenter__()
                self._sessions[name] = session
            return session

    async def aclose(self) -> None:
        """Close every session, newest first; the pool cannot be used afterwards."""
        async with self._lock:
            self._closed = True
            while self._sessions:
                _, session = self._sessions.popitem()
                await session.aclose()


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside nested exception groups (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
