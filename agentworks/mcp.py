"""``mcp()`` calls and MCP tools attached to agents, through the workspace's stdio servers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentworks._runtime import Runtime, current
from agentworks.errors import AgentError, MCPError
from agentworks.platform import platform_call

__all__ = ["attached_tools", "mcp"]

_pools: dict[str, Any] = {}


def _pool(rt: Runtime) -> Any:
    """One pool of live MCP sessions per run attempt (closed when the child exits)."""
    from agentworks.mcp_client import MCPPool
    from agentworks.mcp_servers import load_mcp_servers

    pool = _pools.get(rt.run_id)
    if pool is None:
        servers = {
            # a server without its own cwd works in execution/: under confinement the
            # only place it may write, and shared by every attempt of the run
            name: replace(cfg, cwd=rt.folder / "execution")
            if cfg.cwd == rt.workspace.resolve()
            else cfg
            for name, cfg in load_mcp_servers(rt.workspace).items()
        }
        pool = _pools[rt.run_id] = MCPPool(
            servers, rt.relay, stderr_dir=rt.folder / ".relay_ipc" / "mcp"
        )
    return pool


async def close_pools() -> None:
    """Close every MCP session this process opened."""
    while _pools:
        _, pool = _pools.popitem()
        await pool.aclose()


async def mcp(
    *, server: str, tool: str, arguments: dict[str, Any] | None = None, replay_safe: bool = False
) -> Any:
    """Call ``tool`` on MCP ``server`` with ``arguments``; returns its JSON result."""
    rt = current("mcp()")
    args = dict(arguments or {})

    async def perform() -> Any:
        session = await _pool(rt).session(server)
        return await session.call_tool(tool, args)

    call = {"server": server, "tool": tool, "arguments": args}
    return await platform_call("mcp", f"{server}.{tool}", call, perform, replay_safe=replay_safe)


async def attached_tools(rt: Runtime, entry: dict[str, Any]) -> dict[str, Any]:
    """Tool table entries for ``mcp=[{"server": ..., "tools": [...]}]`` of one agent."""
    if not isinstance(entry, dict) or "server" not in entry:
        raise AgentError(
            f"mcp=[...] takes entries like {{'server': 'orders', 'tools': ['create_order']}}, "
            f"got {entry!r}."
        )
    server = str(entry["server"])
    session = await _pool(rt).session(server)
    inventory = {t["name"]: t for t in await session.list_tools()}
    wanted = entry.get("tools")
    names = sorted(inventory) if wanted is None else list(wanted)
    table: dict[str, Any] = {}
    for name in names:
        if name not in inventory:
            raise MCPError(
                f"MCP server {server!r} has no tool {name!r}; it offers: "
                f"{', '.join(sorted(inventory))}."
            )
        exposed = f"{server}__{name}"
        spec = {**inventory[name], "name": exposed}

        async def invoke(arguments: dict[str, Any], _name: str = name) -> Any:
            return await session.call_tool(_name, arguments)

        table[exposed] = {"spec": spec, "invoke": invoke}
    return table
