"""MCP server declarations: the workspace's ``mcp_servers.yaml`` read into checked configs.

A problem in the file is reported with its line and what to write instead; a command given as
a relative path, and an argument naming a workspace file, become absolute paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentworks.errors import MCPError

__all__ = ["MCP_SERVERS_FILE", "MCPServerConfig", "load_mcp_servers", "server_for"]

MCP_SERVERS_FILE = "mcp_servers.yaml"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def _is_text(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


_SETTINGS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "command": (lambda v: isinstance(v, str) and bool(v.strip()), "must be a non-empty string"),
    "args": (
        lambda v: isinstance(v, list) and all(_is_text(a) for a in v),
        'must be a list of strings, e.g. ["servers/orders.py"]',
    ),
    "env": (
        lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and _is_text(x) for k, x in v.items())
        ),
        'must map names to strings, e.g. {ORDERS_DB: "orders.json"}',
    ),
    "relays": (
        lambda v: v == "*" or (isinstance(v, list) and all(isinstance(r, str) for r in v)),
        'must be "*" or a list of relay names, e.g. ["invoice", "lab"]',
    ),
    "cwd": (lambda v: isinstance(v, str), "must be a folder path relative to the workspace"),
    "start_timeout": (_is_seconds, "must be a positive number of seconds"),
    "call_timeout": (_is_seconds, "must be a positive number of seconds"),
}


@dataclass(frozen=True)
class MCPServerConfig:
    """One stdio server declared in ``mcp_servers.yaml``; ``relays == ("*",)`` allows all."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    relays: tuple[str, ...] = ("*",)
    cwd: Path = Path(".")
    start_timeout: float = 20.0
    call_timeout: float = 60.0

    def allows(self, relay: str) -> bool:
        """Whether ``relay`` may use this server."""
        return "*" in self.relays or relay in self.relays


def load_mcp_servers(workspace_home: Path) -> dict[str, MCPServerConfig]:
    """The servers declared in ``<workspace>/mcp_servers.yaml``; ``{}`` when there is none."""
    home = Path(workspace_home).resolve()
    path = home / MCP_SERVERS_FILE
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise MCPError(
            f"{path}{where}: not valid YAML ({problem}). Fix the file and retry."
        ) from exc

    def fail(keys: tuple[str, ...], message: str) -> MCPError:
        line = _line_of(root, keys)
        return MCPError(f"{path}{f', line {line}' if line else ''}: {'.'.join(keys)} {message}")

    if data is None:
        return {}
    if not isinstance(data, dict) or set(data) != {"servers"}:
        raise fail(
            ("the file",), "must hold one key, servers: {NAME: {command: ..., args: [...]}}."
        )
    servers = data["servers"] or {}
    if not isinstance(servers, dict):
        raise fail(("servers",), f"must map server names to settings, got {_kind(servers)}.")
    if duplicate := _duplicate_key(root, "servers"):
        raise fail(("servers", duplicate), "is declared twice; keep one declaration.")
    configs: dict[str, MCPServerConfig] = {}
    for name, entry in servers.items():
        keys = ("servers", str(name))
        if not isinstance(name, str) or not _NAME.match(name):
            raise fail(keys, "is not a valid server name: use letters, digits, '_' or '-'.")
        if not isinstance(entry, dict) or "command" not in entry:
            raise fail(keys, f"must be a mapping with at least command:, got {_kind(entry)}.")
        for key, value in entry.items():
            if key not in _SETTINGS:
                raise fail(
                    (*keys, str(key)), f"is not a setting; use one of {', '.join(_SETTINGS)}."
                )
            check, rule = _SETTINGS[key]
            if not check(value):
                raise fail((*keys, key), f"{rule}, got {_kind(value)}.")
        command = entry["command"].strip()
        if os.sep in command and not Path(command).is_absolute():
            command = str((home / command).resolve())
        relays = entry.get("relays", "*")
        configs[name] = MCPServerConfig(
            name=name,
            command=command,
            args=tuple(_resolve_arg(home, str(a)) for a in entry.get("args", [])),
            env={k: str(v) for k, v in entry.get("env", {}).items()},
            relays=("*",) if relays == "*" else tuple(relays),
            cwd=(home / entry.get("cwd", ".")).resolve(),
            start_timeout=float(entry.get("start_timeout", 20.0)),
            call_timeout=float(entry.get("call_timeout", 60.0)),
        )
    return configs


def server_for(servers: Mapping[str, MCPServerConfig], name: str, relay: str) -> MCPServerConfig:
    """The server ``name`` if it is declared and ``relay`` may use it; else ``MCPError``."""
    config = servers.get(name)
    if config is None:
        known = ", ".join(sorted(servers)) or "none"
        raise MCPError(
            f"MCP server {name!r} is not declared in the workspace (declared: {known}). "
            f"Declare it under servers: in {MCP_SERVERS_FILE} in the workspace folder."
        )
    if not config.allows(relay):
        raise MCPError(
            f"MCP server {name!r} is not available to relay {relay!r} (allowed: "
            f"{', '.join(config.relays) or 'no relay'}). Add {relay!r} to servers.{name}.relays "
            f'in {MCP_SERVERS_FILE}, or set relays: "*" to allow every relay.'
        )
    return config


def _line_of(root: yaml.Node | None, keys: tuple[str, ...]) -> int:
    """The 1-based line of the deepest node found along ``keys`` (0 when none)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else 0)
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(((k, v) for k, v in node.value if k.value == key), None)
        if match is None:
            break
        line, node = match[0].start_mark.line + 1, match[1]
    return line


def _duplicate_key(root: yaml.Node | None, section: str) -> str | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if key.value == section and isinstance(value, yaml.MappingNode):
            seen: set[str] = set()
            for k, _ in value.value:
                if k.value in seen:
                    return str(k.value)
                seen.add(k.value)
    return None


def _resolve_arg(home: Path, arg: str) -> str:
    """A relative path to an existing workspace file becomes absolute; other args stay."""
    if arg.startswith("-") or Path(arg).is_absolute() or not (home / arg).exists():
        return arg
    return str((home / arg).resolve())


def _kind(value: object) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"
