"""The notebook's default authorization policy: a relay may run unless revoked."""

from __future__ import annotations

import json
import os
from pathlib import Path

from relay_notebook.workspace.names import validate_relay_name

__all__ = ["ACCESS_DIR", "ACCESS_FILE", "AccessPolicy"]

#: a folder of its own, so that a sandboxed run, which sees it bound read-only, sees each new
#: version of the file (a file bound alone would stay the version it was when bound)
ACCESS_DIR = ".relay_access"
ACCESS_FILE = "access.json"
_OLD_FILE = ".relay_access.json"  # where workspaces kept it before


class AccessPolicy:
    """Revocable access per relay, read live (before every attempt and platform call)."""

    def __init__(self, home: Path) -> None:
        self.folder = home / ACCESS_DIR
        self.file = self.folder / ACCESS_FILE
        self._old = home / _OLD_FILE

    def revoked(self) -> list[str]:
        for path in (self.file, self._old):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            return sorted(str(n) for n in data.get("revoked", []))
        return []

    def is_granted(self, relay: str) -> bool:
        return relay not in self.revoked()

    def _write(self, revoked: list[str]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_name(f".{self.file.name}.tmp")
        tmp.write_text(json.dumps({"revoked": sorted(set(revoked))}) + "\n", encoding="utf-8")
        os.replace(tmp, self.file)
        self._old.unlink(missing_ok=True)

    def revoke(self, relay: str) -> None:
        self._write([*self.revoked(), validate_relay_name(relay)])

    def grant(self, relay: str) -> None:
        self._write([n for n in self.revoked() if n != validate_relay_name(relay)])
