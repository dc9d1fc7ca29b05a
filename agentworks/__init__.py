"""agentworks: what authored relays import (agent, mcp, tool, vault, variables, run_dir, admit).

Every call works inside a relay run (started by ``relay run`` or ``%relay run``); made
anywhere else, platform calls raise ``NotInRunError`` with what to do instead.
"""

import importlib
from typing import TYPE_CHECKING, Any

from agentworks import errors
from agentworks.errors import *  # noqa: F403 (the error classes, listed in errors.__all__)

if TYPE_CHECKING:
    from agentworks.agent import agent
    from agentworks.context import admit, run_dir, variables
    from agentworks.mcp import mcp
    from agentworks.tools import tool
    from agentworks.vault import vault

# the calls load on first use, so a relay that never defines a tool never imports pydantic
_LAZY = {
    "admit": "agentworks.context",
    "agent": "agentworks.agent",
    "mcp": "agentworks.mcp",
    "run_dir": "agentworks.context",
    "tool": "agentworks.tools",
    "variables": "agentworks.context",
    "vault": "agentworks.vault",
}

__all__ = [
    *errors.__all__,
    "admit",
    "agent",
    "mcp",
    "run_dir",
    "tool",
    "variables",
    "vault",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentworks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
