"""Named kill points inside the kit's own multi-step writes, for the fault tests and the fuzz.

Design note: ``--crash`` kills a run's child at a step; the supervisor-side processes (``relay
fork`` making a fork, ``relay recover`` completing one) have writes of their own that must hold
at every kill, and a kill timed from outside rarely lands between two of them. So each such
write names its points (``fault_point("fork:copied")``), and a process started with
``RELAY_TEST_KILL_AT=fork:copied`` SIGKILLs itself there, as DBOS's ``_debug_trigger`` does for
its commits. The variable is read at the CLI's boundary (``commands.settings.arm_fault_point``,
which calls ``arm``); only tests and ``benchmarks/bench_crash_fuzz.py`` set it. Unarmed, a point
costs one comparison. ``RELAY_TEST_STOP_AT=run:recorded`` SIGSTOPs the process there instead, so
a test can change the world (fill the disk) between two writes, then SIGCONT it; the attempts'
children stop at their own points (``attempt:database``) as their supervisor's process was told
(``AttemptSpec.stop_at``: a child reads no setting from its environment).
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = [
    "CHILD_FORK_POINTS",
    "ENV_KILL_AT",
    "ENV_STOP_AT",
    "FORK_POINTS",
    "PREPARED_POINT",
    "START_POINTS",
    "arm",
    "fault_point",
    "stop_point",
]

#: the test-only variable naming the point at which this process kills itself
ENV_KILL_AT: Final = "RELAY_TEST_KILL_AT"
#: the test-only variable naming the point at which this process stops itself (SIGSTOP)
ENV_STOP_AT: Final = "RELAY_TEST_STOP_AT"
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
#: the points of making a fork from a call inside a child workflow, besides ``FORK_POINTS``
CHILD_FORK_POINTS: Final = (
    "fork:child-forked",  # DBOS made the fork's child, held; not yet the fork's own workflow
)
#: the points of starting a new run, in order (``runner.runs``, ``runner.supervisor``, the child)
START_POINTS: Final = (
    "run:recorded",  # run.json written (pending); no attempt yet
    "attempt:checked",  # the free space checked; the attempt's folder and spec not written
    "attempt:recorded",  # run.json says attempt 1 is running; its child not started
    "attempt:database",  # the child runs; the run's database not yet made
)
#: the point where a new run's database is made and held, DBOS not yet launched (tests only)
PREPARED_POINT: Final = "attempt:prepared"


_armed: str | None = None
_stop: str | None = None


def arm(name: str | None, stop: str | None = None) -> None:
    """Kill this process at the point ``name`` when it is reached (``None``: at none); stop it
    at the point ``stop`` (until a SIGCONT)."""
    global _armed, _stop
    _armed, _stop = name or None, stop or None


def stop_point() -> str | None:
    """The point this process stops at, if armed: its attempts' children stop there too."""
    return _stop


def fault_point(name: str) -> None:
    """SIGKILL (or SIGSTOP) this process if it was armed at ``name``; else return."""
    if _armed is not None and _armed == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if _stop is not None and _stop == name:
        os.kill(os.getpid(), signal.SIGSTOP)
