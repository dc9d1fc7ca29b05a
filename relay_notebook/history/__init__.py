"""History: a read-only record of runs, from DBOS checkpoints joined with the runner's ledger."""

from relay_notebook.history.records import RunLog, RunSummary, list_runs, read_run_log

__all__ = ["RunLog", "RunSummary", "list_runs", "read_run_log"]
