"""The kit's settings, resolved once at a boundary (the CLI, the magics, the server extension).

Design note: the workspace folder, the PostgreSQL system database and confinement used to be
read from ``RELAY_HOME``, ``RELAY_DATABASE_URL`` and ``RELAY_CONFINE`` wherever they were
needed, and ``--database-url`` was written into ``os.environ`` so that code far below could
find it. Now each boundary builds one frozen ``Settings`` (its flags or traitlets first, the
environment only for what they leave unset) and opens the ``Workspace`` with it; everything
below takes its database and confinement from that workspace or from explicit arguments, and
never reads or writes the environment for them (a test scans the layers for it). A child
still gets what it needs through its spec file and its stdin pipe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from relay_notebook.runner.backend import ENV_VAR, Backend, resolve_backend
from relay_notebook.runner.warm import ENV_WARM_START
from relay_notebook.workspace import Workspace

__all__ = ["ENV_CONFINE", "ENV_DATABASE_URL", "ENV_HOME", "ENV_WARM_START", "Settings"]

ENV_HOME = "RELAY_HOME"
ENV_DATABASE_URL = ENV_VAR  # the supervisor keeps it out of every child's environment
ENV_CONFINE = "RELAY_CONFINE"


@dataclass(frozen=True)
class Settings:
    """Where the workspace is, where runs keep their DBOS state, whether children are
    confined and whether they are forked from a warm parent (see ``runner.warm``).
    ``home=None`` is ``./relays``; ``database_url=None`` (or empty) is one SQLite file per
    run."""

    home: str | None = None
    database_url: str | None = None
    confine: bool = True
    warm_start: bool = True

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        home: str | None = None,
        database_url: str | None = None,
        confine: bool | None = None,
        warm_start: bool | None = None,
    ) -> Settings:
        """The explicit values given, else ``RELAY_HOME``, ``RELAY_DATABASE_URL``,
        ``RELAY_CONFINE`` (``0`` turns confinement off) and ``RELAY_WARM_START`` (``0``
        spawns every child) from ``environ`` (default: ours)."""
        env = os.environ if environ is None else environ
        return cls(
            home=home if home is not None else (env.get(ENV_HOME) or None),
            database_url=database_url if database_url is not None else env.get(ENV_DATABASE_URL),
            confine=confine if confine is not None else env.get(ENV_CONFINE, "1") != "0",
            warm_start=(
                warm_start if warm_start is not None else env.get(ENV_WARM_START, "1") != "0"
            ),
        )

    def backend(self) -> Backend:
        """The system database of new runs; ``InvalidDatabaseUrlError`` for a bad URL."""
        return resolve_backend(self.database_url)

    def workspace(self) -> Workspace:
        """The workspace these settings open (its database URL checked first)."""
        self.backend()
        return Workspace(
            self.home,
            database_url=self.database_url,
            confine=self.confine,
            warm_start=self.warm_start,
        )
