"""agentworks: what authored relays import (agent, mcp, tool, vault, variables, run_dir, admit).

Every call works inside a relay run (started by ``relay run`` or ``%relay run``); made
anywhere else, platform calls raise ``NotInRunError`` with what to do instead.
"""

from agentworks.agent import agent
from agentworks.context import admit, run_dir, variables
from agentworks.errors import (
    AccessDeniedError,
    AgentError,
    AgentOutputError,
    AgentworksError,
    MCPError,
    NestedCallError,
    NotInRunError,
    ProviderError,
    SecretLeakError,
    ToolDefinitionError,
    ToolError,
    ToolResultError,
    VaultError,
)
from agentworks.mcp import mcp
from agentworks.tools import tool
from agentworks.vault import vault

__all__ = [
    "AccessDeniedError",
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
    "admit",
    "agent",
    "mcp",
    "run_dir",
    "tool",
    "variables",
    "vault",
]
