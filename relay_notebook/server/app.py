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
from traitlets import Unicode

from relay_notebook.commands.settings import Settings
from relay_notebook.commands.settings_traits import RunSettingsTraits
from relay_notebook.server.handlers import API_PREFIX, ROUTES
from relay_notebook.server.workspaces import WorkspaceServices

__all__ = ["RelayExtension"]


class RelayExtension(RunSettingsTraits, ExtensionApp):
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

    def relay_settings(self) -> Settings:
        """The extension's settings: its traits, defaulting from the environment at start."""
        return self.run_settings(str(self.workspace_home()))

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
