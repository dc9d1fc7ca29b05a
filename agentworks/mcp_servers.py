"""MCP server declarations: the workspace's ``mcp_servers.yaml`` read into checked configs.

A server is started over stdio (``command:``) or reached over streamable HTTP (``url:``). A
problem in the file is reported with its line and what to write instead (``MCPServersError``,
the code ``relay check`` reports too); a command given as a relative path, and an argument
naming a workspace file, become absolute paths. A value of ``env:`` or ``headers:`` may name a
vault secret, as the whole value (``vault:NAME``) or inside it (``Bearer ${vault:NAME}``): the
config keeps the reference, and the value is resolved only when the server is started or
connected (``resolve_secrets``), so no config, repr or error ever holds it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from agentworks.errors import MCPError, MCPServersError

__all__ = [
    "MCP_SERVERS_FILE",
    "MCPServerConfig",
    "load_mcp_servers",
    "resolve_secrets",
    "secret_names",
    "server_for",
]

MCP_SERVERS_FILE = "mcp_servers.yaml"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_SECRET = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_WHOLE = re.compile(rf"vault:({_SECRET})")
_EMBEDDED = re.compile(rf"\$\{{vault:({_SECRET})\}}")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _is_text(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _is_url(value: object) -> bool:
    if not isinstance(value, str) or "vault:" in value:
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


_STDIO_ONLY = ("command", "args", "env", "cwd")
_SETTINGS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "command": (lambda v: isinstance(v, str) and bool(v.strip()), "must be a non-empty string"),
    "url": (
        _is_url,
        "must be the server's http:// or https:// address, e.g. http://127.0.0.1:8000/mcp "
        "(a secret goes in headers:, never in the URL)",
    ),
    "args": (
        lambda v: isinstance(v, list) and all(_is_text(a) for a in v),
        'must be a list of strings, e.g. ["servers/orders.py"]',
    ),
    "env": (
        lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and _is_text(x) for k, x in v.items())
        ),
        'must map names to strings, e.g. {ORDERS_DB: "orders.json", TOKEN: "vault:NAME"}',
    ),
    "headers": (
        lambda v: (
            isinstance(v, dict)
            and all(isinstance(k, str) and _HEADER.match(k) and _is_text(x) for k, x in v.items())
        ),
        'must map header names to strings, e.g. {Authorization: "Bearer ${vault:NAME}"}',
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
    """One server declared in ``mcp_servers.yaml``: stdio (``command``) or streamable HTTP
    (``url``); ``relays == ("*",)`` allows all. ``env`` and ``headers`` hold vault references
    as written (``vault:NAME``), never a secret's value."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    relays: tuple[str, ...] = ("*",)
    cwd: Path = Path(".")
    start_timeout: float = 20.0
    call_timeout: float = 60.0
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        """``"http"`` (streamable HTTP at ``url``) or ``"stdio"`` (``command`` started)."""
        return "http" if self.url else "stdio"

    def allows(self, relay: str) -> bool:
        """Whether ``relay`` may use this server."""
        return "*" in self.relays or relay in self.relays

    def secrets(self) -> list[str]:
        """The vault secrets its ``env`` and ``headers`` name, sorted."""
        values = [*self.env.values(), *self.headers.values()]
        return sorted({n for v in values for n in secret_names(v)})


def secret_names(value: str) -> list[str]:
    """The vault secrets ``value`` names: ``vault:NAME`` as a whole, or ``${vault:NAME}``."""
    whole = _WHOLE.fullmatch(value)
    return [whole[1]] if whole else _EMBEDDED.findall(value)


def resolve_secrets(values: Mapping[str, str], secret: Callable[[str], str]) -> dict[str, str]:
    """``values`` with each vault reference replaced by ``secret(NAME)`` (the caller keeps the
    result in memory only: it is handed to the server and dropped)."""
    out: dict[str, str] = {}
    for key, value in values.items():
        whole = _WHOLE.fullmatch(value)
        out[key] = secret(whole[1]) if whole else _EMBEDDED.sub(lambda m: secret(m[1]), value)
    return out


def _reference_problem(value: str) -> str | None:
    """What is wrong with a value that looks like a vault reference, else None."""
    if _WHOLE.fullmatch(value) or "vault:" not in value:
        return None
    if value.startswith("vault:"):
        return f"names no valid secret ({value!r}); write vault:NAME, NAME as in relay vault set"
    if _EMBEDDED.sub("", value).count("vault:"):
        return (
            f"holds a vault reference that is not ${{vault:NAME}} ({value!r}); write the whole "
            f'value as vault:NAME or embed it as "Bearer ${{vault:NAME}}"'
        )
    return None


def load_mcp_servers(workspace_home: Path) -> dict[str, MCPServerConfig]:
    """The servers declared in ``<workspace>/mcp_servers.yaml``; ``{}`` when there is none.
    ``MCPServersError`` (with its line) when the file is not a valid declaration."""
    home = Path(workspace_home).resolve()
    path = home / MCP_SERVERS_FILE
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPServersError(path, 0, f"cannot be read ({exc}); fix the file.") from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else 0
        raise MCPServersError(path, line, f"not valid YAML ({problem}). Fix the file.") from exc

    def fail(keys: tuple[str, ...], message: str) -> MCPServersError:
        return MCPServersError(path, _line_of(root, keys), f"{'.'.join(keys)} {message}")

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
        if not isinstance(entry, dict) or ("command" in entry) == ("url" in entry):
            raise fail(
                keys,
                "must be a mapping with either command: (a stdio server) or url: (a streamable "
                f"HTTP server), got {_kind(entry)}.",
            )
        for key, value in entry.items():
            if key not in _SETTINGS:
                raise fail(
                    (*keys, str(key)), f"is not a setting; use one of {', '.join(_SETTINGS)}."
                )
            check, rule = _SETTINGS[key]
            if not check(value):
                raise fail((*keys, key), f"{rule}, got {_kind(value)}.")
        _check_transport(entry, keys, fail)
        configs[name] = _config(home, name, entry)
    return configs


def _check_transport(
    entry: dict[str, Any],
    keys: tuple[str, ...],
    fail: Callable[[tuple[str, ...], str], MCPServersError],
) -> None:
    """Settings of the other transport, and malformed vault references, are refused."""
    if "url" in entry:
        for key in _STDIO_ONLY:
            if key in entry:
                raise fail(
                    (*keys, key),
                    "is a setting of stdio servers (command:); a url: server takes headers:, "
                    "relays:, start_timeout: and call_timeout:.",
                )
    elif "headers" in entry:
        raise fail(
            (*keys, "headers"), "is a setting of url: servers; a stdio server takes env: instead."
        )
    for section in ("env", "headers"):
        for key, value in entry.get(section, {}).items():
            problem = _reference_problem(str(value))
            if problem:
                raise fail((*keys, section, key), problem + ".")


def _config(home: Path, name: str, entry: dict[str, Any]) -> MCPServerConfig:
    relays = entry.get("relays", "*")
    common: dict[str, Any] = {
        "name": name,
        "relays": ("*",) if relays == "*" else tuple(relays),
        "start_timeout": float(entry.get("start_timeout", 20.0)),
        "call_timeout": float(entry.get("call_timeout", 60.0)),
        "cwd": (home / entry.get("cwd", ".")).resolve(),
    }
    if "url" in entry:
        headers = {k: str(v) for k, v in entry.get("headers", {}).items()}
        return MCPServerConfig(url=entry["url"], headers=headers, **common)
    command = entry["command"].strip()
    if os.sep in command and not Path(command).is_absolute():
        command = str((home / command).resolve())
    return MCPServerConfig(
        command=command,
        args=tuple(_resolve_arg(home, str(a)) for a in entry.get("args", [])),
        env={k: str(v) for k, v in entry.get("env", {}).items()},
        **common,
    )


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
