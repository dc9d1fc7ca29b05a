"""History: a read-only record of runs, from DBOS checkpoints joined with the runner's ledger."""

from relay_notebook.history.preview import RecoveryPreview, preview_recovery
from relay_notebook.history.records import RUN_STATUSES, RunLog, RunSummary, list_runs, read_run_log
from relay_notebook.history.run_graph import build_run_graph
from relay_notebook.history.run_overlay import overlay_run

__all__ = [
    "RUN_STATUSES",
    "RecoveryPreview",
    "RunLog",
    "RunSummary",
    "build_run_graph",
    "list_runs",
    "overlay_run",
    "preview_recovery",
    "read_run_log",
]
