"""Run records as pandas DataFrames: runs, step calls, attempts, platform-call receipts, events.

Columns are built one list at a time (not row dicts), which keeps a 10,000-step run within a
small factor of a raw SQL query of its rows. Times are UTC timestamps; durations milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pandas as pd

from relay_notebook.history.records import RunLog, RunSummary

__all__ = [
    "ATTEMPT_COLUMNS",
    "EVENT_COLUMNS",
    "RUN_COLUMNS",
    "STEP_COLUMNS",
    "attempts_dataframe",
    "events_dataframe",
    "receipts_dataframe",
    "runs_dataframe",
    "steps_dataframe",
]

RUN_COLUMNS: Final = (
    "run_id",
    "relay",
    "release",
    "status",
    "attempts",
    "reused",
    "created_at",
    "ended_at",
    "duration_ms",
    "active_ms",
)
STEP_COLUMNS: Final = (
    "workflow_id",
    "function_id",
    "name",
    "kind",
    "occurrence",
    "status",
    "started_at",
    "completed_at",
    "duration_ms",
    "attempt",
    "executed_in",
    "reused_in",
    "reused",
    "retries",
    "child_workflow_id",
    "receipts",
)
ATTEMPT_COLUMNS: Final = (
    "attempt",
    "status",
    "started_at",
    "ended_at",
    "duration_ms",
    "returncode",
    "crash",
    "executed",
    "reused",
)
EVENT_COLUMNS: Final = ("seq", "ts", "attempt", "kind", "workflow_id", "step_id", "step", "detail")
RECEIPT_COLUMNS: Final = (
    "key",
    "workflow_id",
    "step_id",
    "kind",
    "name",
    "state",
    "attempt",
    "model",
    "turns",
    "tool_calls",
    "duration_ms",
    "replay_safe",
    "reused_in",
    "result_preview",
    "error",
)
_EVENT_HEAD: Final = frozenset(
    {"seq", "ts", "run_id", "attempt", "kind", "workflow_id", "step_id", "step"}
)


def _times(values: Sequence[float | None]) -> pd.Series:
    return pd.to_datetime(pd.Series(values, dtype="Float64"), unit="ms", utc=True)


def _frame(columns: dict[str, Any], order: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({name: columns[name] for name in order})


def runs_dataframe(runs: Sequence[RunSummary]) -> pd.DataFrame:
    """One row per run (``list_runs``), oldest first."""
    cols: dict[str, Any] = {name: [getattr(r, name) for r in runs] for name in RUN_COLUMNS}
    cols["created_at"] = _times(cols["created_at"])
    cols["ended_at"] = _times(cols["ended_at"])
    cols["duration_ms"] = pd.Series(cols["duration_ms"], dtype="Float64")
    cols["active_ms"] = pd.Series(cols["active_ms"], dtype="Float64")
    return _frame(cols, RUN_COLUMNS)


def steps_dataframe(log: RunLog, *, children: bool = True, outputs: bool = False) -> pd.DataFrame:
    """One row per step call, the root workflow's and (unless ``children=False``) each child
    workflow's. ``attempt`` is the attempt that ran the body to its checkpoint; ``reused``
    says a later attempt took its result from the checkpoint; ``retries`` counts failed
    tries. ``outputs=True`` adds redacted previews of each saved output and error (decoding
    them is most of the cost on a big run, like ``load_output`` in DBOS's own listing)."""
    table = log.table
    if outputs:
        table.previews()
    cols = table.columns
    picked: Sequence[int] = range(len(table))
    if not children:
        picked = [i for i, wf in enumerate(cols["workflow_id"]) if wf == log.run_id]

    def take(values: list[Any]) -> list[Any]:
        return values if children else [values[i] for i in picked]

    frame: dict[str, Any] = {
        name: take(cols[name])
        for name in ("workflow_id", "function_id", "name", "kind", "status", "child_workflow_id")
    }
    attempt = take(cols["attempt"])
    n = len(attempt)
    earlier, reused, retries, receipts = table.earlier, table.reused, table.retries, table.receipts
    once = {a: (a,) if a is not None else () for a in set(attempt)}  # shared: tuples are frozen
    frame["executed_in"] = list(map(once.__getitem__, attempt))
    if earlier:
        for j, i in enumerate(picked):
            if i in earlier:
                frame["executed_in"][j] = tuple(table.executed_in(i))
    frame["reused_in"] = (
        [tuple(reused[i]) if i in reused else () for i in picked] if reused else [()] * n
    )
    frame["reused"] = [i in reused for i in picked] if reused else [False] * n
    frame["attempt"] = pd.Series(attempt, dtype="Int64")
    frame["retries"] = (
        [len(retries[i]) if i in retries else 0 for i in picked] if retries else [0] * n
    )
    frame["receipts"] = (
        [len(receipts[i]) if i in receipts else 0 for i in picked] if receipts else [0] * n
    )
    frame["occurrence"] = pd.Series(take(cols["occurrence"]), dtype="Int64")
    frame["started_at"] = _times(take(cols["started_at_ms"]))
    frame["completed_at"] = _times(take(cols["completed_at_ms"]))
    frame["duration_ms"] = pd.Series(take(cols["duration_ms"]), dtype="Float64")
    if not outputs:
        return _frame(frame, STEP_COLUMNS)
    frame["output_preview"] = take(cols["output_preview"])
    frame["error_preview"] = take(cols["error_preview"])
    return _frame(frame, (*STEP_COLUMNS, "output_preview", "error_preview"))


def attempts_dataframe(log: RunLog) -> pd.DataFrame:
    """One row per process attempt, with the function ids it executed and reused."""
    rows = log.attempts
    cols: dict[str, Any] = {name: [getattr(a, name) for a in rows] for name in ATTEMPT_COLUMNS}
    cols["started_at"] = _times(cols["started_at"])
    cols["ended_at"] = _times(cols["ended_at"])
    cols["duration_ms"] = pd.Series(cols["duration_ms"], dtype="Float64")
    cols["returncode"] = pd.Series(cols["returncode"], dtype="Int64")
    cols["crash"] = [
        f"{c['when']}:{c['step']}#{c['occurrence']}" if c else None for c in cols["crash"]
    ]
    cols["executed"] = [tuple(x or ()) for x in cols["executed"]]
    cols["reused"] = [tuple(x or ()) for x in cols["reused"]]
    return _frame(cols, ATTEMPT_COLUMNS)


def events_dataframe(log: RunLog) -> pd.DataFrame:
    """One row per ledger event; fields beyond the common ones are in ``detail`` (a dict)."""
    events = log.events
    cols: dict[str, Any] = {
        name: [e.get(name) for e in events]
        for name in ("seq", "ts", "attempt", "kind", "workflow_id", "step_id", "step")
    }
    cols["ts"] = _times(cols["ts"])
    cols["step_id"] = pd.Series(cols["step_id"], dtype="Int64")
    cols["detail"] = [{k: v for k, v in e.items() if k not in _EVENT_HEAD} for e in events]
    return _frame(cols, EVENT_COLUMNS)


def receipts_dataframe(log: RunLog) -> pd.DataFrame:
    """One row per platform call (agent, MCP, legacy step, journaled tool) of the run."""
    receipts = log.receipts
    cols: dict[str, Any] = {name: [getattr(r, name) for r in receipts] for name in RECEIPT_COLUMNS}
    cols["step_id"] = pd.Series(cols["step_id"], dtype="Int64")
    cols["turns"] = pd.Series(cols["turns"], dtype="Int64")
    cols["tool_calls"] = [len(t or ()) for t in cols["tool_calls"]]
    cols["reused_in"] = [tuple(x or ()) for x in cols["reused_in"]]
    return _frame(cols, RECEIPT_COLUMNS)
