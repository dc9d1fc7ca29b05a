"""Who wakes a waiting run: a scan of the workspace for runs whose wait is answered.

Design note: a waiting run has no process, so something else must start its next attempt
when its timer is due (or a message reached it without a resume, e.g. sent from another
program with DBOS's client). ``wake_due`` is that something: ``relay wake`` (for cron), every
``relay`` command on the workspace (in the background, see ``cli``), the kernel extension's
``Waker`` thread while it is loaded, and the worker pool on PostgreSQL call it. It finds
waiting runs by their run.json (re-read only when it changed: ``runner.waiting_scan``, which
every command can ask cheaply) and resumes each through
``runs.resume_waiting``, under the run lock: a run is never resumed twice at once, and a run
another process resumed first is skipped.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from relay_notebook.errors import RelayError
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.runs import resume_waiting
from relay_notebook.runner.supervisor import EventCallback, RunHandle
from relay_notebook.runner.waiting_scan import WaitingScan, due_runs
from relay_notebook.workspace import Workspace

__all__ = ["WaitingScan", "Waker", "due_runs", "wake_due"]


def wake_due(
    workspace: Workspace,
    *,
    backend: Backend | None = None,
    on_event: EventCallback | None = None,
    executor_id: str = "relay-local",
    lifeline: bool = False,
    scan: WaitingScan | None = None,
    only: set[str] | None = None,
) -> list[RunHandle]:
    """Resume every waiting run whose wait is answered; returns the attempts started.

    ``only``: resume just these runs (e.g. the PostgreSQL runs a worker serves).
    """
    handles: list[RunHandle] = []
    for run_id in due_runs(workspace, backend, scan):
        if only is not None and run_id not in only:
            continue
        with contextlib.suppress(RelayError):
            handle = resume_waiting(
                workspace, run_id, on_event=on_event, backend=backend,
                executor_id=executor_id, lifeline=lifeline,
            )  # fmt: skip
            if handle is not None:
                handles.append(handle)
    return handles


class Waker:
    """A daemon thread that wakes the workspace's due runs every ``interval`` seconds.

    The kernel extension starts one while it is loaded; ``stop`` ends it. The attempts it
    starts are supervised by this process like any other (``started`` keeps the latest).
    """

    def __init__(self, workspace: Callable[[], Workspace], *, interval: float = 2.0) -> None:
        #: the workspace as it is now (the magics' settings may change it)
        self.workspace = workspace
        self.interval = interval
        self._stop = threading.Event()
        self._scans: dict[Path, WaitingScan] = {}
        self.started: list[RunHandle] = []
        self._thread = threading.Thread(target=self._loop, name="relay-waker", daemon=True)

    def start(self) -> Waker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # a damaged run must not stop the waker
                ws = self.workspace()
                scan = self._scans.setdefault(ws.home, WaitingScan(ws))
                woken = wake_due(ws, scan=scan)
                self.started = [*self.started, *woken][-20:]
