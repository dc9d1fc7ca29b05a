"""The MCP server of one workspace: the SDK's ``MCPServer`` with the kit's error translation,
and the attempts it supervises.

Design note: a ``RelayError`` becomes an MCP (JSON-RPC) error whose message is the CLI's line
(``... [code]``) and whose ``data`` carries the stable ``code``, so an agent reads the same
words a terminal shows and a program branches on the code. Arguments that fail a tool's input
schema are the kit's ``invalid-request`` the same way. Runs started here are supervised by
this process (as the REST server's are): their handles are kept until the attempt ends, and
stopped, recoverable, when the server stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from relay_notebook import commands
from relay_notebook.commands.api_requests import scrub_secrets
from relay_notebook.commands.live_runs import LiveRuns
from relay_notebook.commands.runs import RunHandle
from relay_notebook.errors import AdmissionError, RelayError, codes
from relay_notebook.errors.storage import storage_error
from relay_notebook.workspace import Workspace

__all__ = ["REFUSED", "RelayMCPServer", "Supervision", "mcp_error"]

#: the JSON-RPC code of a command that refused or failed (bad input is INVALID_PARAMS)
REFUSED = -32000
F = TypeVar("F", bound=Callable[..., Any])


def mcp_error(exc: RelayError, clean: Callable[[Any], Any] = lambda data: data) -> MCPError:
    """The MCP error of ``exc``: the CLI's message and, in ``data``, its code (and an
    admission's diagnostics), both passed through ``clean`` (``Supervision.clean``)."""
    data: dict[str, Any] = {"code": exc.code, "exit_code": exc.exit_code}
    if isinstance(exc, AdmissionError):
        data["diagnostics"] = [d.to_dict() for d in exc.diagnostics]
    number = INVALID_PARAMS if exc.exit_code == 2 else REFUSED
    return MCPError(code=number, message=str(clean(str(exc))), data=clean(data))


def _arguments_error(tool: str, exc: ValidationError) -> MCPError:
    """Arguments that do not match ``tool``'s input schema: one ``[invalid-request]`` line,
    naming each field and what it must be (never the value given)."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()[:5]
    )
    code = codes.INVALID_REQUEST
    return MCPError(
        code=INVALID_PARAMS,
        message=f"Invalid arguments for tool {tool}: {problems}. Its input schema (tools/list) "
        f"says what each takes. [{code.code}]",
        data={"code": code.code, "exit_code": code.exit},
    )


class RelayMCPServer(MCPServer[Any]):
    """``MCPServer`` whose tool failures are the kit's coded errors (see the module's note)."""

    def __init__(self, served: Supervision, **settings: Any) -> None:
        super().__init__(**settings)
        self.served = served

    def command_tool(self, annotations: ToolAnnotations) -> Callable[[F], F]:
        """Register a tool: its docstring, on one line, is its description."""

        def register(fn: F) -> F:
            about = " ".join((fn.__doc__ or "").split())
            self.add_tool(fn, description=about, annotations=annotations)
            return fn

        return register

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, RelayError):
                raise mcp_error(cause, self.served.clean) from None
            stored = storage_error(cause, self.served.workspace.home) if cause else None
            if stored is not None:  # a full disk or a read-only workspace: no bug
                raise mcp_error(stored, self.served.clean) from None
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise _arguments_error(name, cause) from None
            raise


class Supervision:
    """The workspace this server opens and the attempts it started (kept until they end)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._live = LiveRuns()

    def clean(self, data: Any) -> Any:
        """``data`` as a result may hold it: vault values scrubbed (``api_requests``)."""
        return scrub_secrets(self.workspace, data)

    @contextlib.contextmanager
    def relay_errors(self) -> Iterator[None]:
        """Raise a ``RelayError`` from the block as its MCP error (for resource reads, which
        the SDK would otherwise report as a bare crash)."""
        try:
            yield
        except RelayError as exc:
            raise mcp_error(exc, self.clean) from None
        except OSError as exc:
            stored = storage_error(exc, self.workspace.home)
            if stored is None:
                raise
            raise mcp_error(stored, self.clean) from None

    def keep(self, handle: RunHandle) -> None:
        self._live.keep(handle)

    def settle(self, handle: RunHandle, wait_s: float) -> dict[str, Any]:
        """The attempt's outcome if it ends within ``wait_s``, else the run as it is now."""
        self.keep(handle)
        try:
            outcome = handle.wait(wait_s)
        except TimeoutError:
            brief = commands.run_brief(self.workspace, handle.run_id)
            brief["note"] = (
                f"attempt {handle.attempt} is still going; call wait with run_id "
                f"{handle.run_id!r} (or logs) to follow it"
            )
            return dict(self.clean(brief))
        return dict(self.clean(outcome.to_dict()))

    def interrupt_all(self, grace: float = 2.0) -> list[str]:
        """Stop every live attempt (the server stops): each ends ``interrupted``, recoverable."""
        return self._live.interrupt_all(grace)
