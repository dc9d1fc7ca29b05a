"""How a child leaves: one place writes its outcome and exits, one place takes a crash point.

Design note: a child never returns from its attempt. It ends in one of three ways, each here:
``leave`` (its outcome recorded in the ledger and the outcome file, then ``os._exit(0)``,
skipping DBOS's slow ``destroy``), ``crash_point`` (a ``--crash`` asked for this step call:
the ledger says so, then ``os._exit(CRASH_EXIT_CODE)``), and ``lost`` (the supervisor is gone:
nothing is written, since the main thread may be mid-write). Everything else is the supervisor
reading the exit status of a process that died.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from relay_notebook.record.ledger import EventWriter
from relay_notebook.runner.crash import CRASH_EXIT_CODE, CrashSpec
from relay_notebook.workspace.file_io import write_json_atomic

__all__ = ["CRASH_EXIT_CODE_LOST", "DISK_FULL_EXIT_CODE", "crash_point", "leave", "lost"]

CRASH_EXIT_CODE_LOST = 75  # the supervisor went away (lifeline closed, child lock lost)
#: the disk filled before the outcome was written (the run's database, the ledger, the outcome
#: file): settling records the run ``interrupted`` with ``disk-full`` (``runner.outcome``)
DISK_FULL_EXIT_CODE = 74


def leave(
    events: EventWriter,
    outcome_path: Path,
    outcome: dict[str, Any],
    scrub: Callable[[str], str] | None = None,
) -> NoReturn:
    """Record the attempt's ``outcome`` (scrubbed of vault values) and leave the process."""
    if scrub is not None:
        outcome = json.loads(scrub(json.dumps(outcome)))
    events.emit("attempt_outcome", status=outcome["status"], error=outcome.get("error"))
    events.sync()
    write_json_atomic(outcome_path, outcome)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def crash_point(
    events: EventWriter, crash: CrashSpec | None, names: tuple[str, ...], occurrence: int, when: str
) -> None:
    """Exit on purpose if ``crash`` names this call (any of ``names``, its ``occurrence``-th,
    ``when`` ``after`` its checkpoint or ``during`` its body); else return."""
    if crash is None or crash.when != when or crash.occurrence != occurrence:
        return
    if crash.step not in names:
        return
    events.emit("crash_injected", step=names[0], occurrence=occurrence, when=when)
    events.sync()
    os._exit(CRASH_EXIT_CODE)


def lost() -> NoReturn:
    """Leave at once, writing nothing: the supervisor is gone."""
    os._exit(CRASH_EXIT_CODE_LOST)
