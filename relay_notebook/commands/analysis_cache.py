"""The analysis cache: a draft's (or release's) check report, kept by content hash in the workspace.

Design note: listings (``relay relays``, ``GET relay/api/relays``, the side panel) mark a draft
broken by its first admission error, and analysing a 100,000-line source takes seconds, so a
listing must never analyse unchanged code again. A report is stored under
``.relay_cache/analysis/<sha>.json``, ``sha`` hashing everything the check reads (the relay's
name, its files: ``.py`` files and the manifest by content, any other file by size and time)
and the analyser itself (the code of ``relay_notebook.source`` and of the check), so a changed
draft, or a new version of the kit, is analysed again. An entry is written atomically; one that
cannot be read back (damaged, foreign, or written for other content) is ignored and rewritten,
and a cache that cannot be written is skipped: the cache never makes a listing fail.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Final

from agentworks.mcp_servers import MCP_SERVERS_FILE
from relay_notebook.commands.authoring import CheckReport, check_draft
from relay_notebook.commands.mcp_secrets import unset_secrets
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.workspace import ENTRY_FILE, Draft, Workspace
from relay_notebook.workspace.file_io import write_json_atomic

__all__ = ["CACHE_DIR", "analyser_version", "cache_key", "cached_check"]

#: where the workspace keeps analysis results, one JSON file per content hash
CACHE_DIR: Final = ".relay_cache/analysis"
_FORMAT: Final = 1
#: the code whose output a cached report is: static analysis, the check, the diagnostics' codes
_ANALYSER_FILES: Final = (
    "source/*.py",
    "commands/authoring.py",
    "commands/mcp_secrets.py",
    "commands/analysis_cache.py",
    "errors/*.py",
)


@functools.cache
def analyser_version() -> str:
    """A hash of the analyser's code: a kit whose analysis differs never reads older reports."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"format {_FORMAT}".encode())
    for pattern in _ANALYSER_FILES:
        for path in sorted(package.glob(pattern)):
            digest.update(f"\0{path.relative_to(package).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(draft: Draft) -> str:
    """The content hash of everything ``check_draft(draft)`` reads, and of the analyser."""
    digest = hashlib.sha256(analyser_version().encode())
    digest.update(f"\0relay\0{draft.name}\0source\0".encode())
    digest.update(draft.source.encode("utf-8", "surrogatepass"))
    for rel in draft.files():
        path = draft.folder / rel
        digest.update(f"\0file\0{rel}\0".encode())
        if rel == ENTRY_FILE:
            continue  # hashed as the text the check reads
        try:
            if rel.endswith((".py", ".yaml", ".yml", ".json", ".toml")):
                digest.update(path.read_bytes())
            else:  # data the check never reads: its size and time are enough
                stat = path.stat()
                digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        except OSError as exc:
            digest.update(f"unreadable {exc.errno}".encode())
    # the workspace's MCP server declarations, which the check validates too
    servers = draft.folder.parent / MCP_SERVERS_FILE
    digest.update(b"\0mcp_servers\0")
    with contextlib.suppress(OSError):
        digest.update(servers.read_bytes())
    # which secrets those declarations name are unset (the vault and environment change apart)
    digest.update(b"\0mcp_secrets_unset\0")
    for unset in unset_secrets(draft):
        digest.update(f"{unset}\0".encode())
    return digest.hexdigest()


def _entry(workspace: Workspace, key: str) -> Path:
    return workspace.home / CACHE_DIR / f"{key}.json"


def _report(doc: Any, key: str, relay: str) -> CheckReport | None:
    """The report an entry holds, or None if it is not a well-formed entry for ``key``."""
    if not isinstance(doc, dict) or doc.get("key") != key or doc.get("relay") != relay:
        return None
    entrypoint = doc.get("entrypoint")
    found = doc.get("diagnostics")
    if not (entrypoint is None or isinstance(entrypoint, str)) or not isinstance(found, list):
        return None
    try:
        diagnostics = [Diagnostic(**d) for d in found]
    except TypeError:
        return None
    fields = (("line", int), ("col", int), ("code", str), ("message", str), ("file", str))
    for d in diagnostics:
        if d.severity not in ("error", "warning"):
            return None
        if not all(type(getattr(d, name)) is kind for name, kind in fields):
            return None
    return CheckReport(relay, entrypoint, diagnostics)


def _read(path: Path, key: str, relay: str) -> CheckReport | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None  # absent, unreadable or damaged: analysed again and rewritten
    return _report(doc, key, relay)


def cached_check(workspace: Workspace, draft: Draft) -> CheckReport:
    """``check_draft(draft)``, read from the workspace's cache when this content was checked
    before (by any listing, for the draft or a release of the same files)."""
    key = cache_key(draft)
    path = _entry(workspace, key)
    known = _read(path, key, draft.name)
    if known is not None:
        return known
    report = check_draft(draft)
    doc = {
        "key": key,
        "relay": draft.name,
        "entrypoint": report.entrypoint,
        "diagnostics": [d.to_dict() for d in report.diagnostics],
    }
    with contextlib.suppress(OSError):  # a read-only or full workspace lists without a cache
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, doc)
    return report
