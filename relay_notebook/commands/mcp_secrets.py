"""``relay check``'s warning for each vault secret a workspace MCP server names that is not set.

A server's ``env:`` or ``headers:`` value may name a vault secret (``vault:NAME``,
``Bearer ${vault:NAME}``); a run that starts or connects to the server stops with
``vault-missing`` when the run cannot read it. The check says so before the run, one line per
secret, naming the server, the setting and the secret, never a value. A secret counts as set
when the run would read it: the workspace vault holds it, or the environment does in a way the
run's ``vault()`` accepts (``runner.leak_check.environment_secrets``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import yaml

from agentworks.errors import MCPServersError
from agentworks.mcp_servers import MCP_SERVERS_FILE, load_mcp_servers, secret_names
from relay_notebook.errors import codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.workspace import ENTRY_FILE, Draft
from relay_notebook.workspace.vault import Vault

__all__ = ["UnsetSecret", "unset_secret_diagnostics", "unset_secrets"]


@dataclass(frozen=True, order=True)
class UnsetSecret:
    """One vault reference in ``mcp_servers.yaml`` the run could not resolve."""

    server: str
    #: ``env`` (a stdio server's environment) or ``headers`` (a url: server's headers)
    setting: str
    key: str
    name: str
    #: its 1-based line in ``mcp_servers.yaml`` (0: not found)
    line: int = 0


def _uses_mcp(draft: Draft) -> bool:
    """Whether the relay's code mentions MCP (as ``check``'s invalid-file line decides)."""
    texts = [draft.source] + [
        (draft.folder / rel).read_text(encoding="utf-8", errors="replace")
        for rel in draft.files()
        if rel.endswith(".py") and rel != ENTRY_FILE
    ]
    return any("mcp" in text.lower() for text in texts)


def _line(root: yaml.Node | None, keys: tuple[str, ...]) -> int:
    node, line = root, 0
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return line
        match = next(((k, v) for k, v in node.value if k.value == key), None)
        if match is None:
            return line
        line, node = match[0].start_mark.line + 1, match[1]
    return line


def unset_secrets(draft: Draft) -> list[UnsetSecret]:
    """The vault references of the servers ``draft``'s relay may use that a run of it could not
    read; none when the relay never mentions MCP or the file is invalid (its own line)."""
    home = draft.folder.parent
    try:
        servers = load_mcp_servers(home)
    except MCPServersError:
        return []
    wanted = [
        (server.name, setting, key, name)
        for server in servers.values()
        if server.allows(draft.name)
        for setting, values in (("env", server.env), ("headers", server.headers))
        for key, value in values.items()
        for name in secret_names(value)
    ]
    if not wanted or not _uses_mcp(draft):
        return []
    from relay_notebook.runner.leak_check import environment_secrets

    stored = Vault(home).names()
    readable = {*stored, *environment_secrets(draft.folder, os.environ, stored)}
    missing = [w for w in wanted if w[3] not in readable]
    if not missing:
        return []
    try:
        root = yaml.compose((home / MCP_SERVERS_FILE).read_text(encoding="utf-8"), yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        root = None  # changed since it was loaded: the lines are left out
    return sorted(UnsetSecret(*w, line=_line(root, ("servers", w[0], w[1], w[2]))) for w in missing)


def unset_secret_diagnostics(draft: Draft) -> list[Diagnostic]:
    """One warning per unset secret: the server, the setting, the secret, what to type."""
    found: list[Diagnostic] = []
    for u in unset_secrets(draft):
        when = "connects to" if u.setting == "headers" else "starts"
        found.append(
            Diagnostic(
                line=max(u.line, 1),
                col=0,
                code=codes.MCP_SECRET_UNSET.code,
                message=f"MCP server {u.server!r} takes {u.setting}.{u.key} from vault secret "
                f"{u.name!r}, which is not set in the workspace vault: a run of {draft.name} "
                f"that {when} {u.server!r} would stop there. Set it with: relay vault set "
                f"{u.name}  (or %relay vault set {u.name}).",
                severity="warning",
                file=f"../{MCP_SERVERS_FILE}",
            )
        )
    return found
