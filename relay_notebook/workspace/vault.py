"""The workspace vault: secrets stored outside run folders, readable only by their owner.

Design note: values live in ``<workspace>/.relay_vault/secrets.json`` (folder 0700, file 0600),
never in a run folder, a release or a notebook. The supervisor reads them live for every
attempt and hands them to the child through a pipe, so nothing in the run folder holds them;
a confined child cannot see the vault folder at all.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from relay_notebook.errors import InvalidSecretError

__all__ = ["VAULT_DIR", "Vault"]

VAULT_DIR = ".relay_vault"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_MIN_LENGTH = 4


class Vault:
    """Named secrets of one workspace. ``repr`` and errors never show a value."""

    def __init__(self, home: Path) -> None:
        self.folder = home / VAULT_DIR
        self.file = self.folder / "secrets.json"

    def __repr__(self) -> str:
        return f"Vault({str(self.folder)!r}, {len(self.names())} secrets)"

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def names(self) -> list[str]:
        """The names of the stored secrets, sorted (never their values)."""
        return sorted(self._load())

    def values(self) -> dict[str, str]:
        """Every secret, for handing to a run's child process."""
        return self._load()

    def set(self, name: str, value: str) -> None:
        """Store ``value`` under ``name`` (owner-only permissions)."""
        if not _NAME.fullmatch(name):
            raise InvalidSecretError(
                f"Invalid secret name {name!r}: use letters, digits and '_', starting with a "
                f"letter or '_' (at most 64), e.g. OPENAI_API_KEY."
            )
        if len(value) < _MIN_LENGTH or value != value.strip():
            raise InvalidSecretError(
                f"The value for {name} must be at least {_MIN_LENGTH} characters without "
                f"leading or trailing spaces (short values cannot be told apart from ordinary "
                f"text when the kit redacts logs)."
            )
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        data = self._load()
        data[name] = value
        tmp = self.folder / ".secrets.json.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
        os.replace(tmp, self.file)

    def delete(self, name: str) -> bool:
        """Remove ``name``; returns whether it existed."""
        data = self._load()
        if name not in data:
            return False
        del data[name]
        tmp = self.folder / ".secrets.json.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
        os.replace(tmp, self.file)
        return True
