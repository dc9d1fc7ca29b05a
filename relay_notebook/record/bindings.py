"""Bindings: what a run is bound to at its first attempt, and what changed since."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from relay_notebook.errors import ReleaseTamperedError
from relay_notebook.workspace import (
    ENTRY_FILE,
    content_hash,
    load_manifest,
    resolve_release,
    verify_release,
)

if TYPE_CHECKING:
    from relay_notebook.record.run_record import RunRecord
    from relay_notebook.workspace import Draft, Workspace

__all__ = [
    "BINDING_NAMES",
    "RunCode",
    "bindings_changed",
    "changed_bindings",
    "compute_bindings",
    "current_code",
    "draft_code",
    "release_code",
    "runtime_fingerprint",
]

BINDING_NAMES = {
    "input": "the run input",
    "variables": "the relay's variables",
    "source": "the relay source",
    "runner": "the runner and SDK code",
    "python": "the Python version",
    "dbos": "the DBOS version",
    "sqlalchemy": "the SQLAlchemy version",
}

T = TypeVar("T")
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_SDK_DIRS = (
    _PACKAGE_ROOT / "runner",
    _PACKAGE_ROOT / "record",
    _PACKAGE_ROOT.parent / "agentworks",
)


def _json_digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


#: what was computed from files, with the files' stamps then: computed again once one changed
_by_stamps: dict[str, tuple[object, Any]] = {}


def _code_stamps() -> tuple[tuple[str, int, int], ...]:
    """Each ``.py`` file of the kit's code a run is bound to: its path, mtime and size."""
    out: list[tuple[str, int, int]] = []
    pending = [str(folder) for folder in _SDK_DIRS]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    out.append((entry.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


def _sdk_digest() -> str:
    h = hashlib.sha256()
    for folder in _SDK_DIRS:
        for path in sorted(folder.rglob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _path_stamps() -> tuple[tuple[str, int], ...]:
    """The folders packages are found in, with their mtimes: installing, upgrading or removing
    a package adds or renames its metadata folder in one of them."""
    out = []
    for entry in sys.path:
        with contextlib.suppress(OSError):
            out.append((entry, os.stat(entry or ".").st_mtime_ns))
    return tuple(out)


def _cached(key: str, stamps: object, compute: Callable[[], T]) -> T:
    """``compute()``, or what it gave while the files stood as ``stamps`` says they stand now:
    every run start and recovery asks, and reading the kit's code and the packages' metadata
    each time cost about 40 ms of a run's start."""
    kept = _by_stamps.get(key)
    if kept is not None and kept[0] == stamps:
        return kept[1]  # type: ignore[no-any-return]
    value = compute()
    _by_stamps[key] = (stamps, value)
    return value


def runtime_fingerprint() -> dict[str, str]:
    """The versions and code of this environment that a recovery must match."""
    paths = _path_stamps()
    return {
        "runner": _cached("runner", _code_stamps(), _sdk_digest),
        "python": platform.python_version(),
        "dbos": _cached("dbos", paths, lambda: metadata.version("dbos")),
        "sqlalchemy": _cached("sqlalchemy", paths, lambda: metadata.version("sqlalchemy")),
    }


def compute_bindings(*, input: Any, variables: dict[str, str], source_hash: str) -> dict[str, str]:
    """Every binding of a run, as strings (digests for data, versions as they are)."""
    return {
        "input": _json_digest(input),
        "variables": _json_digest(variables),
        "source": source_hash,
        **runtime_fingerprint(),
    }


def changed_bindings(bound: dict[str, str], now: dict[str, str]) -> list[str]:
    """One line per changed binding, e.g. ``the relay source (bound a1b2c3, now d4e5f6)``."""

    def short(v: str | None) -> str:
        if v is None:
            return "nothing"
        return v[:12] if len(v) == 64 else v

    return [
        f"{BINDING_NAMES.get(k, k)} (bound {short(bound.get(k))}, now {short(now.get(k))})"
        for k in BINDING_NAMES
        if bound.get(k) != now.get(k)
    ]


@dataclass(frozen=True)
class RunCode:
    """The code a run of a relay runs: its folder, content hash, variables and settings."""

    folder: Path
    source_hash: str
    variables: dict[str, str]
    release: dict[str, Any] | None
    default_model: str | None = None
    durable: bool = True
    #: a draft's entry file, the bytes hashed (a run keeps them: its graph is drawn on them)
    entry: bytes = b""


def draft_code(draft: Draft) -> RunCode:
    """The code of ``draft`` as it is now."""
    payload = [(rel, (draft.folder / rel).read_bytes()) for rel in draft.files()]
    manifest = draft.manifest
    return RunCode(
        draft.folder,
        content_hash(payload),
        dict(manifest.variables),
        None,
        manifest.model,
        manifest.relay_durability == "dbos",
        dict(payload).get(ENTRY_FILE, b""),
    )


def release_code(workspace: Workspace, relay: str, ref: str) -> RunCode:
    """The code of release ``ref``; ``ReleaseTamperedError`` if it no longer matches its hash."""
    release = resolve_release(workspace, relay, ref)
    report = verify_release(release)
    if not report.ok:
        raise ReleaseTamperedError(
            f"Release {release.ref} of {relay} no longer matches its checksum "
            f"({'; '.join(report.problems)}); it will not run. Publish again with: "
            f"relay publish {relay}"
        )
    manifest = load_manifest(release.folder / "relay.yaml")
    return RunCode(
        release.folder,
        release.hash,
        dict(manifest.variables),
        {"version": release.version, "hash": release.hash},
        manifest.model,
        manifest.relay_durability == "dbos",
    )


def current_code(workspace: Workspace, record: RunRecord) -> RunCode:
    """The code the run's next attempt would run: its release, or its relay's draft now."""
    if record.release is not None:
        return release_code(workspace, record.relay, str(record.release["version"]))
    return draft_code(workspace.load_draft(record.relay))


def bindings_changed(workspace: Workspace, record: RunRecord) -> list[str]:
    """What changed since the run started (one line per binding; empty: nothing)."""
    code = current_code(workspace, record)
    now = compute_bindings(
        input=record.input, variables=code.variables, source_hash=code.source_hash
    )
    return changed_bindings(record.bindings, now)
