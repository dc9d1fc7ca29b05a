"""Bindings: what a run is bound to at its first attempt, and what changed since."""

from __future__ import annotations

import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["BINDING_NAMES", "changed_bindings", "compute_bindings", "runtime_fingerprint"]

BINDING_NAMES = {
    "input": "the run input",
    "variables": "the relay's variables",
    "source": "the relay source",
    "runner": "the runner and SDK code",
    "python": "the Python version",
    "dbos": "the DBOS version",
    "sqlalchemy": "the SQLAlchemy version",
}

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_SDK_DIRS = (_PACKAGE_ROOT / "runner", _PACKAGE_ROOT.parent / "agentworks")


def _json_digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _sdk_digest() -> str:
    h = hashlib.sha256()
    for folder in _SDK_DIRS:
        for path in sorted(folder.rglob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def runtime_fingerprint() -> dict[str, str]:
    """The versions and code of this environment that a recovery must match."""
    return {
        "runner": _sdk_digest(),
        "python": platform.python_version(),
        "dbos": metadata.version("dbos"),
        "sqlalchemy": metadata.version("sqlalchemy"),
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
