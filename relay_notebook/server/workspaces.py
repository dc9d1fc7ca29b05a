"""Which workspace a REST request is about: the server's own, or one a notebook uses.

Design note: a notebook's kernel may keep its relays in another workspace than the one the
server was started on (``%config RelayMagics.home``, ``RELAY_HOME`` in the kernel, or a
notebook in a subfolder). The side panel asks the kernel for its home and passes it as the
``workspace`` query parameter; the server serves it only when it lies under the server's root
folder (where the user can already open files) or is the server's own workspace, and keeps one
``RelayService`` per workspace so runs it starts are supervised like any other.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from relay_notebook.commands.settings import Settings
from relay_notebook.errors import WorkspaceNotFoundError, WorkspaceRefusedError
from relay_notebook.server.service import RelayService

__all__ = ["WorkspaceServices"]


class WorkspaceServices:
    """The server's default service and the services of the other workspaces asked for."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings = settings
        self.default = RelayService(settings)
        self.root = root.expanduser().resolve()
        self._others: dict[Path, RelayService] = {}
        self._lock = threading.Lock()

    def all(self) -> list[RelayService]:
        with self._lock:
            return [self.default, *self._others.values()]

    def resolve(self, requested: str | None) -> Path:
        """The workspace folder ``requested`` names (absolute, or relative to the root)."""
        if not requested:
            return self.default.workspace.home
        try:
            path = Path(requested).expanduser()
            return (path if path.is_absolute() else self.root / path).resolve()
        except (ValueError, OSError, RuntimeError) as exc:  # a NUL byte, a symlink loop…
            raise WorkspaceRefusedError(
                f"The workspace parameter {requested[:80]!r} is not a usable folder path "
                f"({type(exc).__name__}); give a folder under {self.root}."
            ) from None

    def get(self, requested: str | None) -> RelayService:
        """The service of ``requested`` (``None``: the server's own workspace)."""
        home = self.resolve(requested)
        if home == self.default.workspace.home.resolve():
            return self.default
        if not home.is_relative_to(self.root):
            raise WorkspaceRefusedError(
                f"This server serves workspaces under its root folder {self.root}; {home} is "
                f"outside it. Start JupyterLab on it with: jupyter lab "
                f"--RelayExtension.home={home}"
            )
        if not home.is_dir():
            raise WorkspaceNotFoundError(
                f"There is no workspace at {home} yet: save a relay there first (%%relay NAME "
                f"in a notebook that uses it)."
            )
        with self._lock:
            service = self._others.get(home)
            if service is None:
                service = RelayService(replace(self.settings, home=str(home)))
                self._others[home] = service
            return service

    def describe(self, requested: str | None) -> dict[str, object]:
        """``GET /workspace``: where it is, whether it is the server's own, how many relays."""
        service = self.get(requested)
        home = service.workspace.home
        shown = home.relative_to(self.root) if home.resolve().is_relative_to(self.root) else home
        return {
            "home": str(home),
            "label": str(shown),
            "default": service is self.default,
            "relays": len(service.list_relays()),
        }

    def live_runs(self) -> list[str]:
        return sorted(r for s in self.all() for r in s.live_runs())

    def interrupt_all(self) -> list[str]:
        return sorted(r for s in self.all() for r in s.interrupt_all())
