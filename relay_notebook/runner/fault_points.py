"""Named kill points inside the kit's own multi-step writes, for the fault tests and the fuzz.

Design note: ``--crash`` kills a run's child at a step; the supervisor-side processes (``relay
fork`` making a fork, ``relay recover`` completing one) have writes of their own that must hold
at every kill, and a kill timed from outside rarely lands between two of them. So each such
write names its points (``fault_point("fork:copied")``), and a process started with
``RELAY_TEST_KILL_AT=fork:copied`` SIGKILLs itself there, as DBOS's ``_debug_trigger`` does for
its commits. The variable is read at the CLI's boundary (``commands.settings.arm_fault_point``,
which calls ``arm``); only tests and ``benchmarks/bench_crash_fuzz.py`` set it. Unarmed, a point
costs one comparison.
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = ["ENV_KILL_AT", "FORK_POINTS", "arm", "fault_point"]

#: the test-only variable naming the point at which this process kills itself
ENV_KILL_AT: Final = "RELAY_TEST_KILL_AT"
#: the points of making a fork, in order (``runner.fork``)
FORK_POINTS: Final = (
    "fork:planned",  # the fork is planned and checked; nothing is written yet
    "fork:recorded",  # its run.json says creating; no database yet
    "fork:copied",  # the parent's database copied to the staging file
    "fork:forked",  # DBOS made the fork's workflow, held on the hold queue
    "fork:edited",  # the edits are written
    "fork:resumed",  # the fork is off the hold queue, its database not yet in place
    "fork:placed",  # the database in place; run.json still says creating
    "fork:published",  # run.json says pending; the first attempt not started
)


_armed: str | None = None


def arm(name: str | None) -> None:
    """Kill this process at the point ``name`` when it is reached (``None``: at none)."""
    global _armed
    _armed = name or None


def fault_point(name: str) -> None:
    """SIGKILL this process if it was armed at ``name``; else return."""
    if _armed is not None and _armed == name:
        os.kill(os.getpid(), signal.SIGKILL)
