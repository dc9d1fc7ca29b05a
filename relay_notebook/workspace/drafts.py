"""The workspace folder and the drafts in it: ``relays/NAME/relay.yaml``, ``relay.py``, helpers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from relay_notebook.errors import InvalidTargetError, RelayNotFoundError, WorkspaceError
from relay_notebook.workspace.manifest import MANIFEST_FILE, Manifest, dump_manifest, load_manifest
from relay_notebook.workspace.names import validate_relay_name

__all__ = ["DEFAULT_HOME", "ENTRY_FILE", "Draft", "Workspace", "resolve_home"]

DEFAULT_HOME = "relays"
ENTRY_FILE = "relay.py"
# Folders inside a relay that belong to the kit, never to the draft.
RESERVED_DIRS = frozenset({"releases", "runs"})


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder: ``home`` if given, else ``$RELAY_HOME``, else ``./relays``."""
    chosen = home if home is not None else os.environ.get("RELAY_HOME") or DEFAULT_HOME
    return Path(chosen).expanduser().absolute()


@dataclass(frozen=True)
class Draft:
    """A relay's editable files as they are on disk now."""

    name: str
    folder: Path
    manifest: Manifest
    source: str

    @property
    def entry(self) -> Path:
        return self.folder / ENTRY_FILE

    def files(self) -> list[str]:
        """Relative POSIX paths of every file a release of this draft freezes, sorted."""
        return sorted(_draft_files(self.folder))


def _draft_files(folder: Path) -> Iterator[str]:
    for root, dirs, names in os.walk(folder):
        rel_root = Path(root).relative_to(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d != "__pycache__"
            and not (rel_root == Path(".") and d in RESERVED_DIRS)
        )
        for n in names:
            if n.startswith(".") or n.endswith((".pyc", ".pyo")):
                continue
            yield (rel_root / n).as_posix()


class Workspace:
    """A folder of relays. Creating one does not touch the disk; saving a draft does."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = resolve_home(home)

    def __repr__(self) -> str:
        return f"Workspace({str(self.home)!r})"

    def relay_dir(self, name: str) -> Path:
        return self.home / validate_relay_name(name)

    def exists(self, name: str) -> bool:
        return (self.relay_dir(name) / ENTRY_FILE).is_file()

    def list_relays(self) -> list[str]:
        """Names of the relays that have a draft, sorted."""
        if not self.home.is_dir():
            return []
        return sorted(
            p.name for p in self.home.iterdir() if p.is_dir() and (p / ENTRY_FILE).is_file()
        )

    def _ensure_home(self) -> None:
        if self.home.exists() and not self.home.is_dir():
            raise WorkspaceError(
                f"The workspace {self.home} is a file, not a folder. Point --home or RELAY_HOME "
                f"at a folder."
            )
        self.home.mkdir(parents=True, exist_ok=True)

    def save_draft(self, name: str, source: str, manifest: Manifest | None = None) -> Draft:
        """Write ``relay.py`` (and ``relay.yaml`` if new or given) and return the draft.

        An existing manifest is kept unless ``manifest`` is passed, so saving a cell again does
        not reset the relay's variables.
        """
        folder = self.relay_dir(name)
        self._ensure_home()
        folder.mkdir(exist_ok=True)
        manifest_path = folder / MANIFEST_FILE
        if manifest is not None or not manifest_path.exists():
            _write_text(manifest_path, dump_manifest(manifest or Manifest()))
        _write_text(folder / ENTRY_FILE, source)
        return self.load_draft(name)

    def load_draft(self, name: str) -> Draft:
        """Read the draft of ``name``; ``RelayNotFoundError`` names the relays that do exist."""
        folder = self.relay_dir(name)
        entry = folder / ENTRY_FILE
        if not entry.is_file():
            known = self.list_relays()
            hint = f"Relays here: {', '.join(known)}." if known else "The workspace has no relays."
            raise RelayNotFoundError(
                f"No relay {name!r} in workspace {self.home}. {hint} Create it with a "
                f"'%%relay {name}' cell or 'relay check path/to/{name}.py'."
            )
        manifest_path = folder / MANIFEST_FILE
        manifest = load_manifest(manifest_path) if manifest_path.exists() else Manifest()
        return Draft(name, folder, manifest, entry.read_text(encoding="utf-8"))

    def resolve_target(self, target: str) -> Draft:
        """A CLI TARGET: a relay name, or a ``.py`` file saved as the draft named after its stem."""
        looks_like_path = target.endswith(".py") or os.sep in target or "/" in target
        if not looks_like_path:
            return self.load_draft(target)
        path = Path(target).expanduser()
        if not path.is_file():
            raise InvalidTargetError(
                f"Cannot read {target!r}: no such file. TARGET is a relay name in {self.home} "
                f"or a path to a .py file."
            )
        if path.suffix != ".py":
            raise InvalidTargetError(
                f"Cannot use {target!r} as a relay: expected a .py file, got {path.suffix or 'no'} "
                f"suffix."
            )
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidTargetError(f"Cannot read {target!r}: it is not UTF-8 text.") from exc
        return self.save_draft(path.stem, source)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
