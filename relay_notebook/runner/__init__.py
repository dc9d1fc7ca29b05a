"""The runner: a supervisor in the caller's process and one child process per attempt.

The supervisor side (this package minus ``child`` and ``instrument``) never imports DBOS, the
relay, IPython or widgets; the child side imports DBOS and the relay, in its own process.
"""

from relay_notebook.runner.crash import CrashSpec, parse_crash_spec
from relay_notebook.runner.folders import RunFolder, find_run, list_run_folders
from relay_notebook.runner.outcome import RunOutcome
from relay_notebook.runner.runs import MAX_ATTEMPTS, start_recovery, start_run
from relay_notebook.runner.supervisor import RunHandle

__all__ = [
    "MAX_ATTEMPTS",
    "CrashSpec",
    "RunFolder",
    "RunHandle",
    "RunOutcome",
    "find_run",
    "list_run_folders",
    "parse_crash_spec",
    "start_recovery",
    "start_run",
]
