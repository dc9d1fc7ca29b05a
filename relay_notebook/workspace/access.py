"""The notebook's default authorization policy: a relay may run unless revoked."""

from __future__ import annotations

import json
import os
from pathlib import Path

from relay_notebook.workspace.names import validate_relay_name

__all__ = ["ACCESS_FILE", "AccessPolicy"]

ACCESS_FILE = ".relay_access.json"


class AccessPolicy:
    """Revocable access per relay, read live (before every attempt and platform call)."""

    def __init__(self, home: Path) -> None:
        self.file = home / ACCESS_FILE

    def revoked(self) -> list[str]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        return sorted(str(n) for n in data.get("revoked", []))

    def is_granted(self, relay: str) -> bool:
        return relay not in self.revoked()

    def _write(self, revoked: list[str]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_name(f".{self.file.name}.tmp")
        tmp.write_text(json.dumps({"revoked": sorted(set(revoked))}) + "\n", encoding="utf-8")
        os.replace(tmp, self.file)

    def revoke(self, relay: str) -> None:
        self._write([*self.revoked(), validate_relay_name(relay)])

    def grant(self, relay: str) -> None:
        self._write([n for n in self.revoked() if n != validate_relay_name(relay)])
