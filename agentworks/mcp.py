"""``mcp()`` calls and MCP tools attached to agents, through the workspace's MCP servers.

``mcp()`` calls a tool, reads a resource, gets a prompt or lists what a server offers; each is a
platform call (a DBOS step of its own in the workflow body, journaled, with a receipt), so a
recovery reuses a completed one. A server's vault references are resolved from the run's vault
values only (``_secret``): the values the kit's redactor and leak check already guard.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworks._runtime import Runtime, current
from agentworks.errors import AgentError, MCPError, VaultError
from agentworks.mcp_servers import MCP_SERVERS_FILE
from agentworks.platform import platform_call, platform_entry

if TYPE_CHECKING:
    from agentworks.mcp_servers import MCPServerConfig

__all__ = ["attached_tools", "mcp"]

_pools: dict[str, Any] = {}
#: what ``mcp(server=, listing=...)`` lists
LISTINGS = ("tools", "resources", "prompts")
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
            servers,
            rt.relay,
            stderr_dir=rt.folder / ".relay_ipc" / "mcp",
            secret=lambda name: _secret(rt, name),
        )
    return pool


def _secret(rt: Runtime, name: str) -> str:
    """A vault value an MCP server's declaration names: only values the run's redactor knows
    (the vault's, and the guarded environment's), so every one is scrubbed and leak-checked."""
    value = rt.secrets.get(name)
    if value is None:
        raise VaultError(
            f"{MCP_SERVERS_FILE} names vault secret {name!r}, which is not in the vault of "
            f"workspace {rt.workspace}. Set it with: relay vault set {name}  (or %relay vault "
            f"set {name}), then run the relay again."
        )
    return value


def _in_run(cfg: MCPServerConfig, execution: Path, workspace: Path) -> MCPServerConfig:
    """``cfg`` set up to run inside the run's sandbox: a server without its own cwd works in
    ``execution/`` (the only place a relay's processes may write, shared by every attempt of
    the run), and each server has a state folder of its own, ``execution/.mcp/NAME``, as its
    ``HOME`` and ``RELAY_MCP_STATE`` (``$RELAY_MCP_STATE`` in its env values and args names
    it: ``env: {MEMORY_FILE_PATH: $RELAY_MCP_STATE/memory.json}``). A ``url:`` server runs
    elsewhere: it is left as it is."""
    if cfg.url:
        return cfg
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


@platform_entry
async def mcp(
    *,
    server: str,
    tool: str | None = None,
    arguments: dict[str, Any] | None = None,
    resource: str | None = None,
    prompt: str | None = None,
    listing: str | None = None,
    replay_safe: bool | None = None,
) -> Any:
    """One MCP operation on ``server``, exactly one of:

    - ``tool=NAME, arguments={...}``: call a tool; its JSON result;
    - ``resource=URI``: read a resource; its text (or a list of its contents);
    - ``prompt=NAME, arguments={...}``: get a prompt; ``{"description", "messages"}``;
    - ``listing="tools" | "resources" | "prompts"``: what the server offers, sorted.

    Each is a call of the run (a step named ``mcp:SERVER.TOOL``, ``mcp:SERVER.resource:URI``,
    ``mcp:SERVER.prompt:NAME`` or ``mcp:SERVER.list:WHAT``) whose result a recovery reuses.
    ``replay_safe`` (default: False for a tool, True for the reads) says whether an interrupted
    call may simply be made again instead of stopping for reconciliation.
    """
    rt = current("mcp()")
    chosen = {
        k: v
        for k, v in (
            ("tool", tool),
            ("resource", resource),
            ("prompt", prompt),
            ("listing", listing),
        )
        if v is not None
    }
    if len(chosen) != 1:
        raise MCPError(
            "mcp() takes exactly one of tool=, resource=, prompt= or listing=, e.g. "
            f"mcp(server={server!r}, tool='search', arguments={{...}}); got "
            f"{', '.join(f'{k}=' for k in chosen) or 'none'}."
        )
    ((what, target),) = chosen.items()
    if not isinstance(target, str) or not target:
        raise MCPError(f"mcp({what}=...) takes a non-empty string, got {target!r}.")
    if arguments is not None and what not in ("tool", "prompt"):
        raise MCPError(f"mcp({what}=...) takes no arguments=; only tool= and prompt= do.")
    if what == "listing" and target not in LISTINGS:
        raise MCPError(f"mcp(listing=...) takes one of {', '.join(LISTINGS)}, got {target!r}.")
    if what == "prompt" and not all(isinstance(v, str) for v in (arguments or {}).values()):
        raise MCPError(f"mcp(prompt={target!r}) takes arguments whose values are strings.")
    args = dict(arguments or {})

    async def perform() -> Any:
        session = await _pool(rt).session(server)
        if what == "tool":
            return await session.call_tool(target, args)
        if what == "resource":
            return await session.read_resource(target)
        if what == "prompt":
            return await session.get_prompt(target, args)
        return await getattr(session, f"list_{target}")()

    call: dict[str, Any] = {"server": server, what: target}
    if what in ("tool", "prompt"):
        call["arguments"] = args
    label = {"tool": target, "resource": f"resource:{target}", "prompt": f"prompt:{target}"}
    name = f"{server}.{label.get(what, f'list:{target}')}"
    safe = what != "tool" if replay_safe is None else replay_safe
    return await platform_call("mcp", name, call, perform, replay_safe=safe)


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
