"""The workspace folder and the drafts in it: ``relays/NAME/relay.yaml``, ``relay.py``, helpers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from relay_notebook.errors import InvalidTargetError, RelayNotFoundError, WorkspaceError
from relay_notebook.errors.storage import storage_error
from relay_notebook.workspace.file_io import decode_source, read_source, write_bytes_atomic
from relay_notebook.workspace.manifest import MANIFEST_FILE, Manifest, dump_manifest, load_manifest
from relay_notebook.workspace.names import validate_relay_name

__all__ = ["DEFAULT_HOME", "ENTRY_FILE", "Draft", "Workspace", "resolve_home"]

DEFAULT_HOME = "relays"
ENTRY_FILE = "relay.py"
_MAX_NAME_BYTES, _MAX_PATH_BYTES = 255, 3800  # NAME_MAX, and PATH_MAX less room for run files
# Folders inside a relay that belong to the kit, never to the draft.
RESERVED_DIRS = frozenset({"releases", "runs"})


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder: ``home`` if given, else ``./relays`` (``RELAY_HOME`` is read by
    the boundaries: see ``relay_notebook.commands.settings``)."""
    chosen = home if home is not None else DEFAULT_HOME
    try:
        path = Path(chosen).expanduser().absolute()
    except (RuntimeError, ValueError, OSError) as exc:  # ~nobody, a NUL byte, cwd gone
        raise WorkspaceError(
            f"Cannot use the workspace {str(chosen)[:80]!r}: {exc}. Point --home or RELAY_HOME at "
            f"a folder."
        ) from None
    too_long = [p for p in path.parts if len(os.fsencode(p)) > _MAX_NAME_BYTES]
    if too_long or len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise WorkspaceError(
            f"Cannot use the workspace {str(path)[:80]!r}…: its path is longer than the file "
            f"system allows (names of at most {_MAX_NAME_BYTES} bytes, {_MAX_PATH_BYTES} in "
            f"all). Point --home or RELAY_HOME at a shorter path."
        )
    return path


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
        return sorted(code_files(self.folder))


def code_files(folder: Path) -> Iterator[str]:
    """Relative POSIX paths of a relay's code in ``folder`` (a draft's or a release's): every
    file but hidden ones, bytecode, and a draft's ``runs/`` and ``releases/``."""
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
    """A folder of relays. Creating one does not touch the disk; saving a draft does.

    ``database_url`` (PostgreSQL; ``None``: one SQLite file per run), ``confine``,
    ``warm_start`` and ``wait_grace_s`` are the settings its runs are started, recovered and
    read with (see ``relay_notebook.commands.settings``).
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        database_url: str | None = None,
        confine: bool = True,
        warm_start: bool = True,
        wait_grace_s: float = 3.0,
    ) -> None:
        self.home = resolve_home(home)
        self.database_url = database_url
        self.confine = confine
        self.warm_start = warm_start
        #: seconds a run may block in a wait before its attempt ends ``waiting`` (no process)
        self.wait_grace_s = wait_grace_s

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
        self._mkdir(self.home, parents=True)

    def _mkdir(self, path: Path, *, parents: bool = False) -> None:
        try:
            path.mkdir(parents=parents, exist_ok=True)
        except OSError as exc:
            stored = storage_error(exc, path.parent)  # full, or read-only: said as such
            if stored is not None:
                raise stored from None
            raise WorkspaceError(
                f"Cannot use the workspace {self.home}: creating {path} failed "
                f"({exc.strerror or exc}). Point --home or RELAY_HOME at a folder you can write."
            ) from None

    def save_draft(self, name: str, source: str | bytes, manifest: Manifest | None = None) -> Draft:
        """Write ``relay.py`` (and ``relay.yaml`` if new or given) and return the draft.

        ``source`` as bytes is kept byte for byte (a file with a coding declaration stays in
        its encoding); an existing manifest is kept unless ``manifest`` is passed, so saving a
        cell again does not reset the relay's variables.
        """
        folder = self.relay_dir(name)
        data = source if isinstance(source, bytes) else source.encode("utf-8")
        if isinstance(source, bytes):
            decode_source(source, f"the source of relay {name!r}")
        self._ensure_home()
        self._mkdir(folder)
        manifest_path = folder / MANIFEST_FILE
        if manifest is not None or not manifest_path.exists():
            _write_if_changed(manifest_path, dump_manifest(manifest or Manifest()).encode())
        _write_if_changed(folder / ENTRY_FILE, data)
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
        return Draft(name, folder, manifest, read_source(entry))

    def resolve_target(self, target: str) -> Draft:
        """A CLI TARGET: a relay name, or a ``.py`` file saved as the draft named after its stem."""
        looks_like_path = target.endswith(".py") or os.sep in target or "/" in target
        if not looks_like_path:
            return self.load_draft(target)
        path = Path(target).expanduser()
        shown = repr(target) if len(target) <= 80 else repr(target[:79] + "…")
        if path.suffix != ".py":
            raise InvalidTargetError(
                f"Cannot use {shown} as a relay: expected a .py file, got {path.suffix or 'no'} "
                f"suffix."
            )
        validate_relay_name(path.stem)  # before any file system call: it names the draft
        try:
            data = path.read_bytes()
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            why = "no such file" if isinstance(exc, FileNotFoundError) else why
            raise InvalidTargetError(
                f"Cannot read {shown}: {why}. TARGET is a relay name in {self.home} or a path "
                f"to a .py file."
            ) from None
        decode_source(data, shown)
        return self.save_draft(path.stem, data)


def _write_if_changed(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, unless it already holds exactly that."""
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    write_bytes_atomic(path, data, sync=False)
