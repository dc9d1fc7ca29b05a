"""The Jupyter server extension: the relay REST API mounted at ``{base_url}relay/api``.

Design note: an ``ExtensionApp`` (rather than a bare load function) gives the extension a
configurable ``home`` trait, a shutdown hook and an activity report. On shutdown the server
interrupts the attempts it supervises, so each run ends ``interrupted`` and can be recovered
(from the API, ``%relay recover`` or ``relay recover``) instead of being left ``running`` with
no supervisor. While an attempt is live the server reports activity, so an idle-culling
server does not stop under a running relay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Unicode, default

from relay_notebook.server.handlers import API_PREFIX, ROUTES
from relay_notebook.server.workspaces import WorkspaceServices
from relay_notebook.settings import Settings

__all__ = ["RelayExtension"]


class RelayExtension(ExtensionApp):
    """Serve the workspace's relays over REST under the Jupyter server's authentication."""

    name = "relay_notebook"
    description = "The relay REST API: relays, releases and runs of a relay_notebook workspace."
    load_other_extensions = True

    home = Unicode(
        None,
        allow_none=True,
        help="The relay workspace the API serves. Default: $RELAY_HOME if set, else the "
        "'relays' folder of the server's root_dir. A relative path is taken from root_dir.",
    ).tag(config=True)

    database_url = Unicode(
        None,
        allow_none=True,
        help="The PostgreSQL system database of the runs the API starts, "
        "postgresql://USER@HOST:PORT/DBNAME. Default: $RELAY_DATABASE_URL; unset or empty: one "
        "SQLite file per run.",
    ).tag(config=True)

    confine = Bool(
        help="Run each attempt's child under bubblewrap (where it is installed). Default: on, "
        "unless RELAY_CONFINE=0.",
    ).tag(config=True)

    warm_start = Bool(
        help="Fork each attempt's child from a warm parent that has DBOS imported (confined with "
        "Landlock), instead of starting a new Python. Default: on, unless RELAY_WARM_START=0.",
    ).tag(config=True)

    wait_grace = Float(
        help="Seconds a run may block in DBOS.recv or DBOS.sleep before its attempt ends "
        "'waiting' with no process. Default: 3, or RELAY_WAIT_GRACE.",
    ).tag(config=True)

    # what is not configured comes from the environment, read here (the boundary) once
    @default("database_url")
    def _database_url_from_environment(self) -> str | None:
        return Settings.from_environment().database_url

    @default("confine")
    def _confine_from_environment(self) -> bool:
        return Settings.from_environment().confine

    @default("warm_start")
    def _warm_start_from_environment(self) -> bool:
        return Settings.from_environment().warm_start

    @default("wait_grace")
    def _wait_grace_from_environment(self) -> float:
        return Settings.from_environment().wait_grace_s

    def relay_settings(self) -> Settings:
        """The extension's settings: its traits, defaulting from the environment at start."""
        return Settings(
            home=str(self.workspace_home()),
            database_url=self.database_url,
            confine=self.confine,
            warm_start=self.warm_start,
            wait_grace_s=self.wait_grace,
        )

    def workspace_home(self) -> Path:
        """``home`` if configured, else ``$RELAY_HOME``, else ``<root_dir>/relays``."""
        assert self.serverapp is not None
        root = Path(self.serverapp.root_dir).expanduser()
        if self.home:
            chosen = Path(self.home).expanduser()
            return chosen if chosen.is_absolute() else root / chosen
        env = Settings.from_environment().home
        if env:
            return Path(env).expanduser().absolute()
        return root / "relays"

    def initialize_settings(self) -> None:
        assert self.serverapp is not None
        self.services = WorkspaceServices(
            self.relay_settings(), Path(self.serverapp.root_dir).expanduser()
        )
        self.service = self.services.default
        self.settings["relay_services"] = self.services
        self.log.info(
            "relay_notebook: REST API at %s%s on workspace %s",
            self.serverapp.base_url,
            API_PREFIX,
            self.service.workspace.home,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(ROUTES)

    def current_activity(self) -> list[str] | None:
        """The runs whose attempts this server supervises now (``None``: idle)."""
        return self.services.live_runs() or None

    async def stop_extension(self) -> None:
        stopped = await asyncio.to_thread(self.services.interrupt_all)
        if stopped:
            self.log.info(
                "relay_notebook: interrupted runs %s at shutdown; recover them with "
                "'relay recover RUN' or POST %s/runs/RUN/recover",
                ", ".join(stopped),
                API_PREFIX,
            )
