"""``mcp()`` calls and MCP tools attached to agents, through the workspace's stdio servers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworks._runtime import Runtime, current
from agentworks.errors import AgentError, MCPError
from agentworks.platform import platform_call

if TYPE_CHECKING:
    from agentworks.mcp_servers import MCPServerConfig

__all__ = ["attached_tools", "mcp"]

_pools: dict[str, Any] = {}
#: the environment variable naming an MCP server's own state folder in the run
STATE_ENV = "RELAY_MCP_STATE"


def _pool(rt: Runtime) -> Any:
    """One pool of live MCP sessions per run attempt (closed when the child exits)."""
    from agentworks.mcp_client import MCPPool
    from agentworks.mcp_servers import load_mcp_servers

    pool = _pools.get(rt.run_id)
    if pool is None:
        servers = {
            name: _in_run(cfg, rt.folder / "execution", rt.workspace.resolve())
            for name, cfg in load_mcp_servers(rt.workspace).items()
        }
        pool = _pools[rt.run_id] = MCPPool(
            servers, rt.relay, stderr_dir=rt.folder / ".relay_ipc" / "mcp"
        )
    return pool


def _in_run(cfg: MCPServerConfig, execution: Path, workspace: Path) -> MCPServerConfig:
    """``cfg`` set up to run inside the run's sandbox: a server without its own cwd works in
    ``execution/`` (the only place a relay's processes may write, shared by every attempt of
    the run), and each server has a state folder of its own, ``execution/.mcp/NAME``, as its
    ``HOME`` and ``RELAY_MCP_STATE`` (``$RELAY_MCP_STATE`` in its env values and args names
    it: ``env: {MEMORY_FILE_PATH: $RELAY_MCP_STATE/memory.json}``)."""
    state = execution / ".mcp" / cfg.name
    state.mkdir(parents=True, exist_ok=True)

    def expand(text: str) -> str:
        return text.replace("${RELAY_MCP_STATE}", str(state)).replace(
            "$RELAY_MCP_STATE", str(state)
        )

    env = {"HOME": str(state), STATE_ENV: str(state)}
    env |= {key: expand(value) for key, value in cfg.env.items()}
    return replace(
        cfg,
        cwd=execution if cfg.cwd == workspace else cfg.cwd,
        env=env,
        args=tuple(expand(a) for a in cfg.args),
    )


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
