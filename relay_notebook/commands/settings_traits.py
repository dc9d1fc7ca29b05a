"""The run settings both Jupyter boundaries configure: the magics and the server extension.

Design note: ``%config RelayMagics.confine`` and ``--RelayExtension.confine`` are the same
setting with the same default (the environment as it is when the boundary starts), so their
traits are declared once here and mixed into both classes; each class keeps only its own
``home`` (the kernel's working directory and the server's ``root_dir`` resolve it
differently). The mixin is a plain ``HasTraits``: traitlets configures the traits under the
name of the class they are mixed into.
"""

from __future__ import annotations

from traitlets import Bool, Float, HasTraits, Unicode, default

from relay_notebook.commands.settings import Settings

__all__ = ["RunSettingsTraits"]


class RunSettingsTraits(HasTraits):
    """Where runs keep their DBOS state, and how their children start and are confined."""

    database_url = Unicode(
        None,
        allow_none=True,
        help="The PostgreSQL system database of new runs and of the worker pool, "
        "postgresql://USER@HOST:PORT/DBNAME. Default: $RELAY_DATABASE_URL; unset or empty: one "
        "SQLite file per run.",
    ).tag(config=True)

    confine = Bool(
        help="Confine each attempt's child: Landlock in a child forked from the warm parent, "
        "else bubblewrap (where either is available). Default: on, unless RELAY_CONFINE=0.",
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

    def run_settings(self, home: str | None) -> Settings:
        """The settings as the traits are now, for the workspace at ``home``."""
        return Settings(
            home=home,
            database_url=self.database_url,
            confine=self.confine,
            warm_start=self.warm_start,
            wait_grace_s=self.wait_grace,
        )
