"""The runner: a supervisor in the caller's process and one child process per attempt.

The supervisor side (this package minus ``child`` and ``instrument``) never imports DBOS, the
relay, IPython or widgets; the child side imports DBOS and the relay, in its own process.
"""

from __future__ import annotations

from relay_notebook._lazy import TYPE_CHECKING, lazy_attributes

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder, find_run, list_run_folders
    from relay_notebook.runner.crash import CrashSpec, parse_crash_spec
    from relay_notebook.runner.outcome import RunOutcome
    from relay_notebook.runner.runs import MAX_ATTEMPTS, start_recovery, start_run
    from relay_notebook.runner.supervisor import RunHandle

# Names load on first use: a child process importing one submodule does not pay for the rest.
_LAZY = {
    "CrashSpec": "relay_notebook.runner.crash",
    "MAX_ATTEMPTS": "relay_notebook.runner.runs",
    "RunFolder": "relay_notebook.record.folders",
    "RunHandle": "relay_notebook.runner.supervisor",
    "RunOutcome": "relay_notebook.runner.outcome",
    "find_run": "relay_notebook.record.folders",
    "list_run_folders": "relay_notebook.record.folders",
    "parse_crash_spec": "relay_notebook.runner.crash",
    "start_recovery": "relay_notebook.runner.runs",
    "start_run": "relay_notebook.runner.runs",
}

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


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
