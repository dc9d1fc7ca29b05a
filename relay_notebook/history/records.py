"""Run records: one run's attempts, steps, calls and events (summaries: ``history.run_list``).

Everything here only reads: ``run.json``, the ledger, the call journal and DBOS's SQLite file
(opened so that not a byte changes, see ``record.store``). It never launches DBOS (which
would recover and execute the run) and works while a run goes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentworks.redact import Redactor
from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.history.receipts import read_receipts
from relay_notebook.history.run_list import RUN_STATUSES, RunSummary, list_runs
from relay_notebook.history.steps import (
    SQL_COLUMNS,
    SavedOutputs,
    StepRow,
    StepTable,
    WorkflowRow,
    assemble_steps,
)
from relay_notebook.record.backend import Backend, workspace_backend
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.ledger_events import Event
from relay_notebook.record.run_record import AttemptRecord, RunRecord
from relay_notebook.record.store import open_run_database
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

__all__ = ["RUN_STATUSES", "RunLog", "RunSummary", "list_runs", "read_run_log"]

# the listing lives in history.run_list; kept importable from here


@dataclass
class RunLog:
    """One run in full (``relay logs RUN --json``): metadata, attempts, step calls of the root
    workflow, child workflows with theirs, platform-call receipts, and the ledger's events."""

    run: dict[str, Any]
    attempts: list[dict[str, Any]]
    table: StepTable = field(repr=False)
    workflows: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    ledger: LedgerScan | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return str(self.run["run_id"])

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The root workflow's step calls, in call order."""
        return self.table.of(self.run_id)

    @property
    def children(self) -> list[dict[str, Any]]:
        """Child workflows (DBOS status, the parent's call that started them), with their steps."""
        return [{**w, "steps": self.table.of(w["workflow_id"])} for w in self.workflows]

    @property
    def events(self) -> list[Event]:
        """Every ledger event (kit events and ``DBOS.logger`` records), read when first asked."""
        return self.ledger.events() if self.ledger is not None else []

    def events_of(self, kind: str, attempt: int | None = None) -> list[Event]:
        """The ledger events of one kind (in one attempt), without reading all the others."""
        return self.ledger.select(kind, attempt) if self.ledger is not None else []

    def all_steps(self) -> list[dict[str, Any]]:
        """The root workflow's step calls, then each child workflow's, in call order."""
        return [*self.steps, *(s for child in self.children for s in child["steps"])]

    def call_facts(self) -> dict[tuple[str, int], dict[str, Any]]:
        """What the child recorded as each call's body started, by (workflow id, function id):
        its ``site`` in the relay's source and its ``input_preview`` (the latest attempt's)."""
        facts: dict[tuple[str, int], dict[str, Any]] = {}
        for e in self.events_of("step_start"):
            wf, fid = e.get("workflow_id"), e.get("step_id")
            if isinstance(wf, str) and isinstance(fid, int):
                facts[(wf, fid)] = {
                    k: e[k] for k in ("site", "input_preview") if e.get(k) is not None
                }
        return facts

    def receipts_of(self, step: dict[str, Any]) -> list[dict[str, Any]]:
        """The platform calls a step call made (linked by workflow and step id)."""
        keys = set(step.get("receipts", []))
        return [r for r in self.receipts if r["key"] in keys]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.run,
            "attempts": self.attempts,
            "steps": self.steps,
            "children": self.children,
            "receipts": self.receipts,
            "events": self.events,
        }


def _live_attempt(record: RunRecord) -> int | None:
    """The attempt whose process may be writing now, if any."""
    if record.live_attempt is None:
        return None
    last = record.attempts[-1]
    here = socket.gethostname()
    if last.pid is not None and (last.host or here) == here:
        try:
            os.kill(last.pid, 0)
        except ProcessLookupError:
            return None  # the supervisor went away without settling the attempt
        except PermissionError:
            pass
    return last.attempt


def _read_dbos(conn: Any) -> tuple[list[WorkflowRow], list[StepRow]]:
    if conn is None:
        return [], []
    try:
        workflows = [
            WorkflowRow(*row)
            for row in conn.execute(
                "SELECT workflow_uuid, status, name, parent_workflow_id, recovery_attempts "
                "FROM workflow_status ORDER BY created_at, workflow_uuid"
            )
        ]
        rows = conn.execute(
            f"SELECT {SQL_COLUMNS} FROM operation_outputs ORDER BY workflow_uuid, function_id"
        ).fetchall()
    except sqlite3.OperationalError:
        return [], []  # the child has not created DBOS's tables yet
    return workflows, rows


def _saved_outputs(folder: RunFolder, backend: Backend) -> SavedOutputs:
    """Every saved output and error of the run, read the same careful way."""
    record = RunRecord.load(folder)
    live = _live_attempt(record) is not None
    with open_run_database(folder, record, live=live, backend=backend) as conn:
        if conn is None:
            return {}
        try:
            rows = conn.execute(
                "SELECT workflow_uuid, function_id, output, error, serialization "
                "FROM operation_outputs"
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
    return {(wf, fid): (output, error, ser) for wf, fid, output, error, ser in rows}


def _attempt_record(a: AttemptRecord) -> dict[str, Any]:
    duration = None
    if a.ended_at and isinstance(a.started_at, int | float):
        duration = round(a.ended_at - a.started_at, 1)
    return {
        "attempt": a.attempt,
        "status": a.status or "running",
        "started_at": a.started_at,
        "ended_at": a.raw.get("ended_at"),
        "duration_ms": duration,
        "returncode": a.returncode,
        "crash": a.crash,
        "executed": a.executed,
        "reused": a.reused,
        "executor_id": a.executor_id,
        "lost": a.lost,
    }


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Assembling a big run makes tens of thousands of small lists and dicts that live on;
    the cyclic garbage collector would walk them again and again (a third of the time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_run_log(workspace: Workspace, run_id: str) -> RunLog:
    """The full record of ``run_id``; safe to call while it runs, and it changes nothing."""
    with _collector_paused():
        return _read_run_log(workspace, run_id)


def _read_run_log(workspace: Workspace, run_id: str) -> RunLog:
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    live = _live_attempt(record)
    backend = workspace_backend(workspace)
    with open_run_database(folder, record, live=live is not None, backend=backend) as conn:
        workflows, rows = _read_dbos(conn)
    scan = LedgerScan(folder.events, folder.run_id)
    secrets = Vault(workspace.home).values()
    redactor = Redactor(secrets, encoded=True) if secrets else None  # old runs too
    attempts = [_attempt_record(a) for a in record.attempts]
    table = assemble_steps(
        folder.run_id,
        rows,
        workflows,
        [a.raw for a in record.attempts],
        live,
        scan,
        redactor,
        lambda: _saved_outputs(folder, backend),
    )
    fork = record.fork
    if isinstance(fork, dict):
        table.mark_copied(
            folder.run_id,
            str(fork.get("parent")),
            set(fork.get("copied") or ()),
            set(fork.get("edited_ids") or ()),
        )
    receipts = read_receipts(folder.journal, scan, redactor, durable=record.durable)
    cols = table.columns
    for receipt in receipts:
        i = table.index.get((receipt["workflow_id"], receipt["step_id"]))
        if i is not None:
            table.receipts.setdefault(i, []).append(receipt["key"])
    started_by = {
        cols["child_workflow_id"][i]: cols["function_id"][i]
        for i, kind in enumerate(cols["kind"] if len(workflows) > 1 else ())
        if kind == "workflow"
    }
    root = next((w for w in workflows if w.workflow_id == folder.run_id), None)
    children = [
        {
            "workflow_id": w.workflow_id,
            "name": w.name,
            "status": w.status,
            "parent_workflow_id": w.parent_workflow_id,
            "parent_function_id": started_by.get(w.workflow_id),
        }
        for w in workflows
        if w.workflow_id != folder.run_id
    ]
    run = {
        "run_id": folder.run_id,
        "relay": folder.relay,
        "workflow_id": record.workflow_id,
        "status": record.status,
        "dbos_status": root.status if root else None,
        "recovery_attempts": root.recovery_attempts if root else None,
        "release": record.release,
        "app_version": record.app_version,
        "created_at": record.created_at,
        "deadline_ms": record.deadline_ms,
        # as recorded: older runs did not record their budget
        "max_attempts": record.raw.get("max_attempts"),
        "fork": record.fork,
        "input": record.input,
        "error": record.error,
        "folder": str(folder.path),
        "live": live is not None,
        # what a waiting run waits for (run.json's "waiting", while its status is waiting)
        "waiting": record.waiting.to_json() if record.waiting else None,
    }
    return RunLog(run, attempts, table, children, receipts, scan)
