"""The agentworks exception tree: every error authored code can catch, each with a stable code."""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AgentError",
    "AgentOutputError",
    "AgentworksError",
    "MCPError",
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

    code: ClassVar[str] = "agentworks-error"

    def __str__(self) -> str:
        return f"{super().__str__()} [{self.code}]"


class NotInRunError(AgentworksError):
    """A platform call (agent, mcp, vault, admit...) made outside a relay run."""

    code = "not-in-run"


class AgentError(AgentworksError):
    """An agent call that cannot go on: bad arguments, too many turns, an unknown tool."""

    code = "agent-error"


class AgentOutputError(AgentError):
    """The agent's final message is not JSON, or does not match ``output_schema``."""

    code = "agent-output-invalid"


class ProviderError(AgentworksError):
    """The model provider failed or is misconfigured."""

    code = "provider-error"


class ToolDefinitionError(AgentworksError):
    """A ``@tool`` that cannot be exposed: missing annotations, unsupported types."""

    code = "tool-definition"


class ToolError(AgentworksError):
    """A tool call failed: invalid arguments, or the tool raised."""

    code = "tool-error"


class ToolResultError(ToolError):
    """A tool returned something that is not JSON or does not match its output model."""

    code = "tool-result-invalid"


class MCPError(AgentworksError):
    """An MCP server is unknown, not allowed for this relay, or failed."""

    code = "mcp-error"


class VaultError(AgentworksError):
    """A secret is missing from the vault (and from the environment)."""

    code = "vault-missing"


class SecretLeakError(AgentworksError):
    """A vault value was about to be persisted (a step argument or result, a receipt)."""

    code = "secret-leak"


class NestedCallError(AgentworksError):
    """An agent or MCP call made from inside a tool callback."""

    code = "nested-call"
