"""The agentworks exception tree: every error authored code can catch, each with a stable code.

Each class names its entry in ``agentworks.codes`` (part of the registry docs/errors.md is
generated from).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from agentworks import codes

__all__ = [
    "AgentError",
    "AgentOutputError",
    "AgentworksError",
    "MCPError",
    "MCPServersError",
    "NestedCallError",
    "NotInRunError",
    "ProviderError",
    "SecretLeakError",
    "ToolDefinitionError",
    "ToolError",
    "ToolResultError",
    "VaultError",
]


class AgentworksError(Exception):
    """Base of the adapter's errors; ``code`` is stable and listed in docs/errors.md."""

    entry: ClassVar[codes.Code] = codes.AGENTWORKS_ERROR
    code: ClassVar[str] = entry.code

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.entry.code

    def __str__(self) -> str:
        return f"{super().__str__()} [{self.code}]"


class NotInRunError(AgentworksError):
    """A platform call (agent, mcp, vault, admit...) made outside a relay run."""

    entry = codes.NOT_IN_RUN


class AgentError(AgentworksError):
    """An agent call that cannot go on: bad arguments, too many turns, an unknown tool."""

    entry = codes.AGENT_ERROR


class AgentOutputError(AgentError):
    """The agent's final message is not JSON, or does not match ``output_schema``."""

    entry = codes.AGENT_OUTPUT_INVALID


class ProviderError(AgentworksError):
    """The model provider failed or is misconfigured."""

    entry = codes.PROVIDER_ERROR


class ToolDefinitionError(AgentworksError):
    """A ``@tool`` that cannot be exposed: missing annotations, unsupported types."""

    entry = codes.TOOL_DEFINITION


class ToolError(AgentworksError):
    """A tool call failed: invalid arguments, or the tool raised."""

    entry = codes.TOOL_ERROR


class ToolResultError(ToolError):
    """A tool returned something that is not JSON or does not match its output model."""

    entry = codes.TOOL_RESULT_INVALID


class MCPError(AgentworksError):
    """An MCP server is unknown, not allowed for this relay, or failed."""

    entry = codes.MCP_ERROR


class MCPServersError(MCPError):
    """The workspace's ``mcp_servers.yaml`` is not a valid declaration; ``line`` (1-based, 0
    when unknown) and ``problem`` say where and what, for ``relay check`` to report."""

    entry = codes.MCP_SERVERS_INVALID

    def __init__(self, path: Path | str, line: int, problem: str) -> None:
        self.path, self.line, self.problem = Path(path), line, problem
        super().__init__(f"{path}{f', line {line}' if line else ''}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.problem))


class VaultError(AgentworksError):
    """A secret is missing from the vault (and from the environment)."""

    entry = codes.VAULT_MISSING


class SecretLeakError(AgentworksError):
    """A vault value was about to be persisted (a step argument or result, a receipt)."""

    entry = codes.SECRET_LEAK


class NestedCallError(AgentworksError):
    """An agent or MCP call made from inside a tool callback."""

    entry = codes.NESTED_CALL
