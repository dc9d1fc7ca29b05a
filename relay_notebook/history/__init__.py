"""History: a read-only record of runs, from DBOS checkpoints joined with the runner's ledger."""

from relay_notebook._lazy import TYPE_CHECKING, lazy_attributes

if TYPE_CHECKING:
    from relay_notebook.history.preview import RecoveryPreview, preview_recovery
    from relay_notebook.history.records import (
        RUN_STATUSES,
        RunLog,
        RunSummary,
        list_runs,
        read_run_log,
    )
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

# Names load on first use (PEP 562): reading one record does not load every reader
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "RUN_STATUSES": "relay_notebook.history.records",
        "RecoveryPreview": "relay_notebook.history.preview",
        "RunLog": "relay_notebook.history.records",
        "RunSummary": "relay_notebook.history.records",
        "build_run_graph": "relay_notebook.history.run_graph",
        "list_runs": "relay_notebook.history.records",
        "overlay_run": "relay_notebook.history.run_overlay",
        "preview_recovery": "relay_notebook.history.preview",
        "read_run_log": "relay_notebook.history.records",
    },
)
