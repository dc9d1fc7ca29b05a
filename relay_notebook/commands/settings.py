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
from relay_notebook.runner.doctor import start_report
from relay_notebook.runner.warm import ENV_WARM_START
from relay_notebook.workspace import Workspace

__all__ = [
    "ENV_CONFINE",
    "ENV_DATABASE_URL",
    "ENV_HOME",
    "ENV_WAIT_GRACE",
    "ENV_WARM_START",
    "Settings",
    "arm_fault_point",
    "start_report",
]

ENV_HOME = "RELAY_HOME"
ENV_DATABASE_URL = ENV_VAR  # the supervisor keeps it out of every child's environment
ENV_CONFINE = "RELAY_CONFINE"
ENV_WAIT_GRACE = "RELAY_WAIT_GRACE"
DEFAULT_WAIT_GRACE_S = 3.0


def _seconds(text: str | None, default: float) -> float:
    """A number of seconds from the environment (an unusable value: ``default``)."""
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value >= 0 and value == value else default


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
    #: seconds a run may block in DBOS.recv / DBOS.sleep before its attempt ends ``waiting``
    wait_grace_s: float = DEFAULT_WAIT_GRACE_S

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        home: str | None = None,
        database_url: str | None = None,
        confine: bool | None = None,
        warm_start: bool | None = None,
        wait_grace_s: float | None = None,
    ) -> Settings:
        """The explicit values given, else ``RELAY_HOME``, ``RELAY_DATABASE_URL``,
        ``RELAY_CONFINE`` (``0`` turns confinement off), ``RELAY_WARM_START`` (``0``
        spawns every child) and ``RELAY_WAIT_GRACE`` (seconds) from ``environ`` (default:
        ours)."""
        env = os.environ if environ is None else environ
        if wait_grace_s is None:
            wait_grace_s = _seconds(env.get(ENV_WAIT_GRACE), DEFAULT_WAIT_GRACE_S)
        return cls(
            home=home if home is not None else (env.get(ENV_HOME) or None),
            database_url=database_url if database_url is not None else env.get(ENV_DATABASE_URL),
            confine=confine if confine is not None else env.get(ENV_CONFINE, "1") != "0",
            warm_start=(
                warm_start if warm_start is not None else env.get(ENV_WARM_START, "1") != "0"
            ),
            wait_grace_s=wait_grace_s,
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
            wait_grace_s=self.wait_grace_s,
        )


def arm_fault_point() -> None:
    """Tests and the crash fuzz only: ``RELAY_TEST_KILL_AT=fork:copied`` makes this process
    SIGKILL itself at that point of the kit's own writes (``runner.fault_points``);
    ``RELAY_TEST_STOP_AT`` stops it there."""
    from relay_notebook.runner.fault_points import ENV_KILL_AT, ENV_STOP_AT, arm

    arm(os.environ.get(ENV_KILL_AT), os.environ.get(ENV_STOP_AT))
