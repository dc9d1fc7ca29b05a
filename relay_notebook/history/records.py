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
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, cast

from agentworks.redact import Redactor
from relay_notebook.errors import RelayError
from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.history.log_records import (
    Attempt,
    CallFacts,
    ChildWorkflow,
    ForkOrigin,
    InjectedCrash,
    Receipt,
    ReleaseRef,
    RunError,
    RunHeader,
    StepCall,
    WaitingFor,
)
from relay_notebook.history.model_calls import RunUsage, mark_tool_calls, run_usage
from relay_notebook.history.receipts import read_receipts
from relay_notebook.history.run_list import RUN_STATUSES, RunSummary, list_runs
from relay_notebook.history.steps import (
    SavedOutputs,
    StepRow,
    StepTable,
    WorkflowRow,
    assemble_steps,
)
from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend, workspace_backend
from relay_notebook.record.dbos_tools import DbosTools, read_dbos_tools, shown_status
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.ledger_events import Event
from relay_notebook.record.run_record import AttemptRecord, RunRecord
from relay_notebook.record.store import open_run_database
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.prices import load_prices
from relay_notebook.workspace.vault import Vault

__all__ = [
    "RUN_STATUSES",
    "Attempt",
    "CallFacts",
    "ChildWorkflow",
    "Receipt",
    "RunHeader",
    "RunLog",
    "RunSummary",
    "StepCall",
    "list_runs",
    "read_run_log",
]

# the listing lives in history.run_list; kept importable from here


@dataclass(frozen=True)
class RunLog:
    """One run in full (``relay logs RUN --json``): its header, attempts, step calls of the
    root workflow, child workflows with theirs, platform-call receipts, and the ledger's
    events. The step table is read once and its records made on first ask."""

    run: RunHeader
    attempts: tuple[Attempt, ...]
    table: StepTable = field(repr=False)
    #: child workflows, without their steps (``children`` has them)
    workflows: tuple[ChildWorkflow, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    ledger: LedgerScan | None = field(default=None, repr=False, compare=False)
    #: tokens and cost of its model calls (None: the run made none; ``history.model_calls``)
    usage: RunUsage | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @cached_property
    def steps(self) -> tuple[StepCall, ...]:
        """The root workflow's step calls, in call order."""
        return self.table.of(self.run_id)

    @cached_property
    def children(self) -> tuple[ChildWorkflow, ...]:
        """Child workflows (DBOS status, the parent's call that started them), with their steps."""
        return tuple(replace(w, steps=self.table.of(w.workflow_id)) for w in self.workflows)

    @property
    def events(self) -> list[Event]:
        """Every ledger event (kit events and ``DBOS.logger`` records), read when first asked."""
        return self.ledger.events() if self.ledger is not None else []

    def events_of(self, kind: str, attempt: int | None = None) -> list[Event]:
        """The ledger events of one kind (in one attempt), without reading all the others."""
        return self.ledger.select(kind, attempt) if self.ledger is not None else []

    def all_steps(self) -> list[StepCall]:
        """The root workflow's step calls, then each child workflow's, in call order."""
        return [*self.steps, *(s for child in self.children for s in child.steps)]

    def call_facts(self) -> dict[tuple[str, int], CallFacts]:
        """What the child recorded as each call's body started, by (workflow id, function id):
        its ``site`` in the relay's source and its ``input_preview`` (the latest attempt's)."""
        facts: dict[tuple[str, int], CallFacts] = {}
        for e in self.events_of("step_start"):
            wf, fid = e.get("workflow_id"), e.get("step_id")
            if isinstance(wf, str) and isinstance(fid, int):
                site = e.get("site")
                facts[(wf, fid)] = CallFacts(
                    tuple(site) if site is not None else None, e.get("input_preview")
                )
        return facts

    def receipts_of(self, step: StepCall) -> list[Receipt]:
        """The platform calls a step call made (linked by workflow and step id)."""
        keys = set(step.receipts)
        return [r for r in self.receipts if r.key in keys]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``relay logs RUN --json``."""
        return {
            **self.run.to_dict(),
            "attempts": [a.to_dict() for a in self.attempts],
            "steps": [s.to_dict() for s in self.steps],
            "children": [c.to_dict() for c in self.children],
            "receipts": [r.to_dict() for r in self.receipts],
            "events": self.events,
            **({"usage": self.usage.to_dict()} if self.usage is not None else {}),
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
        workflows = [WorkflowRow(*row) for row in conn.execute(dbos_tables.WORKFLOWS)]
        rows = conn.execute(dbos_tables.STEP_ROWS).fetchall()
    except sqlite3.OperationalError:
        return [], []  # the child has not created DBOS's tables yet
    return workflows, rows


def _read_tools(conn: Any, run_id: str) -> DbosTools:
    if conn is None:
        return DbosTools()
    try:
        return read_dbos_tools(conn, run_id)
    except sqlite3.OperationalError:
        return DbosTools()  # no tables yet


def _outside_ids(tools: DbosTools, workflows: list[WorkflowRow]) -> set[str]:
    """The outside workflows and every workflow they started."""
    theirs = {w.workflow_id for w in tools.outside}
    grew = True
    while grew:
        more = {w.workflow_id for w in workflows if w.parent_workflow_id in theirs}
        grew = not more <= theirs
        theirs |= more
    return theirs


def _saved_outputs(folder: RunFolder, backend: Backend) -> SavedOutputs:
    """Every saved output and error of the run, read the same careful way."""
    record = RunRecord.load(folder)
    live = _live_attempt(record) is not None
    with open_run_database(folder, record, live=live, backend=backend) as conn:
        if conn is None:
            return {}
        try:
            rows = conn.execute(dbos_tables.SAVED_OUTPUTS).fetchall()
        except sqlite3.OperationalError:
            return {}
    return {(wf, fid): (output, error, ser) for wf, fid, output, error, ser in rows}


def _attempt(a: AttemptRecord, copied: frozenset[int] = frozenset()) -> Attempt:
    """``a`` as the log shows it; ``copied``: a fork's copied calls, which it did not reuse."""
    duration = None
    if a.ended_at and isinstance(a.started_at, int | float):
        duration = round(a.ended_at - a.started_at, 1)
    return Attempt(
        attempt=a.attempt,
        status=a.status or "running",
        started_at=a.started_at,
        ended_at=a.raw.get("ended_at"),
        duration_ms=duration,
        returncode=a.returncode,
        crash=cast(InjectedCrash | None, a.crash),  # as the supervisor recorded it
        executed=tuple(a.executed),
        reused=tuple(i for i in a.reused if i not in copied),
        executor_id=a.executor_id,
        lost=a.lost,
    )


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
        try:
            workflows, rows = _read_dbos(conn)
            # no workflow yet (DBOS still making its tables: on PostgreSQL the failed read
            # ended the session's transaction): nothing DBOS's tools made either
            tools = _read_tools(conn, folder.run_id) if workflows else DbosTools()
        except sqlite3.DatabaseError as exc:  # not a database any more: one coded line
            raise folder.damaged(folder.database, f"cannot be read ({exc})") from None
    if tools.outside:  # not the run's: shown apart, never as its children or steps
        theirs = _outside_ids(tools, workflows)
        workflows = [w for w in workflows if w.workflow_id not in theirs]
        rows = [r for r in rows if r[0] not in theirs]
    scan = LedgerScan(folder.events, folder.run_id)
    secrets = Vault(workspace.home).values()
    redactor = Redactor(secrets, encoded=True) if secrets else None  # old runs too
    fork = record.fork
    copied = frozenset(fork.get("copied") or ()) if isinstance(fork, dict) else frozenset()
    attempts = tuple(_attempt(a, copied) for a in record.attempts)
    table = assemble_steps(
        folder.run_id,
        rows,
        workflows,
        record.attempts,
        live,
        scan,
        redactor,
        lambda: _saved_outputs(folder, backend),
    )
    if isinstance(fork, dict):
        table.mark_copied(
            folder.run_id,
            str(fork.get("parent")),
            set(fork.get("copied") or ()),
            set(fork.get("edited_ids") or ()),
        )
        child = fork.get("child")
        if isinstance(child, dict) and child.get("workflow_id"):  # forked from inside a child
            table.mark_copied(
                str(child["workflow_id"]),
                str(fork.get("parent")),
                set(child.get("copied") or ()),
                set(child.get("edited_ids") or ()),
            )
    model_events = scan.select("model_call")
    agent_tokens = [e for e in scan.select("receipt") if e.get("input_tokens") is not None]
    if model_events:
        mark_tool_calls(table, model_events)
    receipts = read_receipts(folder.journal, scan, redactor, durable=record.durable)
    cols = table.columns
    for receipt in receipts:
        if receipt.workflow_id is None or receipt.step_id is None or receipt.key is None:
            continue  # an agent call of a run without a journal: no step
        i = table.index.get((receipt.workflow_id, receipt.step_id))
        if i is not None:
            table.receipts.setdefault(i, []).append(receipt.key)
    started_by = {
        cols["child_workflow_id"][i]: cols["function_id"][i]
        for i, kind in enumerate(cols["kind"] if len(workflows) > 1 else ())
        if kind == "workflow"
    }
    root = next((w for w in workflows if w.workflow_id == folder.run_id), None)
    children = tuple(
        ChildWorkflow(
            w.workflow_id,
            w.name,
            w.status,
            w.parent_workflow_id,
            started_by.get(w.workflow_id),
        )
        for w in workflows
        if w.workflow_id != folder.run_id
    )
    # run.json's values as the runner wrote them, in the shapes history names
    run = RunHeader(
        run_id=folder.run_id,
        relay=folder.relay,
        workflow_id=record.workflow_id,
        status=shown_status(record.status, tools, live=live is not None),
        dbos_status=root.status if root else None,
        recovery_attempts=root.recovery_attempts if root else None,
        release=cast(ReleaseRef | None, record.release),
        app_version=record.app_version,
        created_at=record.created_at,
        deadline_ms=record.deadline_ms,
        # as recorded: older runs did not record their budget
        max_attempts=record.raw.get("max_attempts"),
        fork=cast(ForkOrigin | None, record.fork),
        input=record.input,
        error=cast(RunError | None, record.error),
        folder=str(folder.path),
        live=live is not None,
        # what a waiting run waits for (run.json's "waiting", while its status is waiting)
        waiting=cast(WaitingFor, record.waiting.to_json()) if record.waiting else None,
        outside=tools.outside,
    )
    log = RunLog(run, attempts, table, children, tuple(receipts), scan)
    if model_events or agent_tokens or isinstance(fork, dict):
        usage = _usage(workspace, log, model_events, fork, agent_tokens)
        return replace(log, usage=usage) if usage is not None else log
    return log


def _usage(
    workspace: Workspace, log: RunLog, events: list[Event], fork: Any, agent_tokens: list[Event]
) -> RunUsage | None:
    """The run's model-call usage; a fork's copied calls priced from its parent's ledger."""
    parent: list[Event] = []
    if isinstance(fork, dict) and fork.get("parent"):
        try:
            folder = find_run(workspace, str(fork["parent"]))
        except RelayError:
            folder = None
        if folder is not None:
            parent = LedgerScan(folder.events, folder.run_id).select("model_call")
    if not events and not parent and not agent_tokens:
        return None
    prices = load_prices(workspace.home)
    steps = log.all_steps()
    child = fork.get("child") if isinstance(fork, dict) else None
    copied_children = (
        {str(child["workflow_id"]): str(child["parent_workflow_id"])}
        if isinstance(child, dict) and child.get("workflow_id")
        else {}
    )
    return run_usage(
        log.run_id, events, steps, prices, parent, agent_tokens, log.receipts, copied_children
    )
