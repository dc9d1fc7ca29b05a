"""Whether waiting runs are due, for every ``relay`` command: if so, ``relay wake`` is
started in the background.

Design note: a waiting run on the SQLite default has no scheduler; any ``relay`` command on
its workspace resumes it once it is due. The command only looks (``runner.waiting_scan``,
which reads run records and imports no supervisor) and starts ``relay wake`` detached, which
supervises the attempts, so the command neither waits nor pays for the runner's imports.
"""

from __future__ import annotations

import os
import subprocess
import sys

from relay_notebook.runner.backend import Backend
from relay_notebook.runner.waiting_scan import due_runs
from relay_notebook.workspace import Workspace

__all__ = ["wake_in_background"]


def wake_in_background(workspace: Workspace, backend: Backend | None = None) -> bool:
    """If runs are due, start ``relay wake`` detached to resume them; returns whether it did.

    Every ``relay`` command calls this, so a due run on the SQLite default resumes without a
    scheduler; the detached process supervises the attempts, so the command does not wait.
    """
    try:
        if not due_runs(workspace, backend):
            return False
    except Exception:
        return False  # a damaged run folder is reported by the commands that read it
    argv = [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home), "wake"]
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=os.environ.copy(),
    )
    return True
