"""The runs family: start a run (here or on the workers' queue), recover it, list runs, read a
run's log, and settle its uncertain calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from agentworks.journal import CallState, Journal
from agentworks.redact import Redactor
from relay_notebook.commands import authoring
from relay_notebook.commands.authoring import check_draft
from relay_notebook.errors import (
    AdmissionError,
    InvalidCrashSpecError,
    NothingToReconcileError,
    QueueUnavailableError,
    RelayError,
)
from relay_notebook.history import RunLog, RunSummary, list_runs, overlay_run, read_run_log
from relay_notebook.history.log_records import StepCall
from relay_notebook.history.preview import RecoveryPreview, preview_recovery
from relay_notebook.history.run_events import read_run_events
from relay_notebook.history.run_graph import overlay_events
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger_events import Event
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner import (
    CrashSpec,
    RunHandle,
    parse_crash_spec,
    start_recovery,
    start_run,
)
from relay_notebook.runner.backend import Backend, workspace_backend
from relay_notebook.runner.outcome import RunOutcome
from relay_notebook.runner.runs import DEFAULT_DEADLINE_S, create_run
from relay_notebook.runner.supervisor import EventCallback
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from relay_notebook.views.header import code_text
from relay_notebook.workspace import (
    ENTRY_FILE,
    Draft,
    Workspace,
    resolve_release,
)
from relay_notebook.workspace.file_io import read_source
from relay_notebook.workspace.vault import Vault

__all__ = [
    "Event",
    "EventCallback",
    "QueuedRun",
    "RecoveryPreview",
    "RunBrief",
    "RunHandle",
    "RunLog",
    "RunOutcome",
    "RunSummary",
    "StepCall",
    "enqueue",
    "logs",
    "pending_calls",
    "preview",
    "reconcile",
    "recover",
    "require_pool_backend",
    "run",
    "runs",
    "serve_worker",
    "workers",
]


def run(
    workspace: Workspace,
    target: str,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: str | None = None,
    on_event: EventCallback | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> RunHandle:
    """``relay run TARGET``: admission, then attempt 1 in a child process; returns at once."""
    draft, crash_spec = _admit(workspace, target, crash, release)
    return start_run(
        workspace,
        draft,
        run_input=run_input,
        release=release,
        crash=crash_spec,
        on_event=on_event,
        deadline_s=deadline_s,
        backend=backend,
    )


def _admit(
    workspace: Workspace, target: str, crash: str | None, release: str | None
) -> tuple[Draft, CrashSpec | None]:
    draft = workspace.resolve_target(target)
    crash_spec = parse_crash_spec(crash) if crash is not None else None
    report = check_draft(draft)
    if not report.ok:
        raise AdmissionError(draft.name, report.diagnostics)
    if crash_spec is not None:
        source = draft.source
        if release is not None:  # the crash point must exist in the code that will run
            frozen = resolve_release(workspace, draft.name, release)
            source = read_source(frozen.folder / ENTRY_FILE)
        _check_crash_step(source, draft.name, crash_spec)
    return draft, crash_spec


@dataclass(frozen=True)
class QueuedRun:
    """A run waiting for (or taken by) a worker; ``wait`` returns its outcome."""

    run_id: str
    relay: str
    invocation_id: str
    backend: Backend

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until a worker has finished with the run; ``TimeoutError`` after ``timeout``."""
        from relay_notebook.runner.pool import wait_for_invocation

        done = wait_for_invocation(self.backend, self.invocation_id, timeout, run_id=self.run_id)
        if done is None:
            raise TimeoutError(f"run {self.run_id} is still queued or running")
        return RunOutcome(
            self.run_id,
            self.relay,
            str(done.get("status")),
            int(done.get("attempt") or 0),
            done.get("result"),
            done.get("error"),
            list(done.get("executed") or []),
            list(done.get("reused") or []),
        )


def require_pool_backend(backend: Backend | None, what: str) -> Backend:
    """``backend`` (the caller's resolved setting), which must be PostgreSQL for the pool."""
    backend = backend if backend is not None else Backend(None)
    if not backend.is_postgres:
        raise QueueUnavailableError(
            f"{what} needs a PostgreSQL database shared with the workers: set "
            f"RELAY_DATABASE_URL=postgresql://USER@HOST:PORT/DBNAME (or pass --database-url)."
        )
    return backend


def enqueue(
    workspace: Workspace,
    target: str,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: str | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> QueuedRun:
    """``relay run TARGET --queue``: admission, then the run waits on the workers' queue."""
    from relay_notebook.runner.pool import enqueue_run

    backend = require_pool_backend(workspace_backend(workspace, backend), "relay run --queue")
    draft, crash_spec = _admit(workspace, target, crash, release)
    folder = create_run(
        workspace,
        draft,
        run_input=run_input,
        release=release,
        deadline_s=deadline_s,
        backend=backend,
        queued=True,
    )
    invocation = enqueue_run(backend, folder.run_id, crash=crash_spec)
    return QueuedRun(folder.run_id, folder.relay, invocation, backend)


def workers(backend: Backend | None) -> list[Any]:
    """``relay workers``: every worker's lease and how many runs it executes (``backend``:
    the pool's database, e.g. ``Settings.backend()``)."""
    from relay_notebook.runner.pool import list_workers

    return list_workers(require_pool_backend(backend, "relay workers"))


def _crash_points(flow: FlowGraph) -> dict[str, set[str]]:
    """What ``--crash`` can name in a relay, by prefix ("" for a step's name or function)."""
    points: dict[str, set[str]] = {"": set(), "step": set(), "agent": set(), "mcp": set()}
    for n in flow.nodes:
        if n.type == "step":
            points[""].add(n.label)
            if "function" in n.details:
                points[""].add(str(n.details["function"]))
            if n.details.get("legacy"):
                points["step"].add(str(n.details.get("name", n.label)))
        elif n.type == "agent" and n.details.get("framework"):
            points[""].update(map(str, n.details.get("steps", ())))  # its calls' step names
        elif n.type == "agent":
            points["agent"].add(str(n.details.get("name", n.label)))
        elif n.type == "mcp":
            points["mcp"].add(str(n.details.get("server", n.label)))
    return points


def _check_crash_step(source: str, relay: str, spec: CrashSpec) -> None:
    """Refuse a crash point the relay cannot reach: a call the flow graph does not know.

    A platform call (``agent:``, ``mcp:``, ``step:``) is refused only when the graph followed
    every call, since a call it could not follow may be the one named.
    """
    flow = build_flow_graph(source, relay=relay)
    points = _crash_points(flow)
    prefix, _, rest = spec.step.partition(":") if ":" in spec.step else ("", "", spec.step)
    wanted = rest.split(".", 1)[0] if prefix == "mcp" else rest
    if wanted in points.get(prefix, set()):
        return
    if prefix and any(n.type == "unresolved" for n in flow.nodes):
        return
    known = sorted(points[""]) + [
        f"{kind}:{name}" + (".TOOL" if kind == "mcp" else "")
        for kind in ("agent", "mcp", "step")
        for name in sorted(points[kind])
    ]
    what = {"": "step", "agent": "agent call", "mcp": "MCP server", "step": "ctx.step call"}
    raise InvalidCrashSpecError(
        f"Cannot crash {spec}: relay {relay!r} has no {what.get(prefix, 'call')} named "
        f"{wanted!r} (it can crash at: {', '.join(known) if known else 'none found'})."
    )


def recover(
    workspace: Workspace,
    run_id: str,
    *,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
    accept_lost_checkpoints: bool = False,
) -> RunHandle:
    """``relay recover RUN [--accept-lost-checkpoints]``: the next attempt on the same folder
    and workflow id."""
    return start_recovery(
        workspace, run_id, on_event=on_event, backend=backend,
        accept_lost_checkpoints=accept_lost_checkpoints,
    )  # fmt: skip


def runs(workspace: Workspace, relay: str | None = None) -> list[RunSummary]:
    """``relay runs [NAME]``."""
    return list_runs(workspace, relay)


def logs(workspace: Workspace, run_id: str) -> RunLog:
    """``relay logs RUN``."""
    return read_run_log(workspace, run_id)


def pending_calls(workspace: Workspace, run_id: str) -> list[CallState]:
    """The uncertain calls that stop ``run_id`` (``relay reconcile RUN`` without an action)."""
    folder = find_run(workspace, run_id)
    return Journal(folder.ipc / "journal.jsonl").blocking()


def reconcile(
    workspace: Workspace,
    run_id: str,
    *,
    result: Any = None,
    retry: bool = False,
    key: str | None = None,
) -> CallState:
    """``relay reconcile RUN --result JSON | --retry [--key KEY]``: resolve one uncertain call."""
    folder = find_run(workspace, run_id)
    journal = Journal(folder.ipc / "journal.jsonl")
    pending = journal.blocking()
    if not pending:
        raise NothingToReconcileError(
            f"Run {run_id} has no uncertain call to reconcile. Recover it with: relay recover "
            f"{run_id}"
        )
    if key is None:
        if len(pending) > 1:
            keys = ", ".join(p.key for p in pending)
            raise NothingToReconcileError(
                f"Run {run_id} has {len(pending)} uncertain calls ({keys}); pick one with --key."
            )
        chosen = pending[0]
    else:
        matches = [p for p in pending if p.key == key]
        if not matches:
            keys = ", ".join(p.key for p in pending)
            raise NothingToReconcileError(
                f"Run {run_id} has no uncertain call with key {key!r}; pending: {keys}."
            )
        chosen = matches[0]
    journal.resolve(chosen.key, result=result, retry=retry)
    return journal.state(chosen.key)


def run_exists(workspace: Workspace, run_id: str) -> bool:
    """Whether ``run_id`` names a run of the workspace."""
    try:
        find_run(workspace, run_id)
    except RelayError:
        return False
    return True


def run_stamp(workspace: Workspace, run_id: str) -> tuple[int, ...]:
    """What changes whenever the run does, read cheaply (its record's and its ledger's times
    and sizes): a view with no attempt of its own to follow compares it to know when the run
    changed elsewhere (another cell, the terminal, REST, a worker)."""
    folder = find_run(workspace, run_id)
    stamp: list[int] = []
    for path in (folder.meta, folder.events):
        try:
            st = path.stat()
        except OSError:
            stamp += [0, 0]
        else:
            stamp += [st.st_mtime_ns, st.st_size]
    return tuple(stamp)


class RunBrief(TypedDict):
    """A run in four fields (``run_brief``): what a start returns over REST and MCP."""

    run_id: str
    relay: str
    status: str
    #: attempts used
    attempt: int
    #: MCP's word on a run still going when its answer is due
    note: NotRequired[str]


def run_brief(workspace: Workspace, run_id: str) -> RunBrief:
    """A run in four fields: id, relay, status and attempts used (what a start returns)."""
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    return RunBrief(
        run_id=run_id, relay=folder.relay, status=record.status, attempt=record.attempts_used
    )


def run_detail(workspace: Workspace, run_id: str) -> dict[str, Any]:
    """``GET relay/api/runs/{run_id}``: status, result or error, attempts, steps, the flow graph
    painted with the run, its trace and pending uncertain calls; vault values scrubbed."""
    log = read_run_log(workspace, run_id)
    folder = find_run(workspace, run_id)
    run = log.run
    status = run.status or "pending"
    out: dict[str, Any] = {
        "run_id": run.run_id,
        "relay": run.relay,
        "status": status,
        "attempt": len(log.attempts),
        "release": run.release,
        "created_at": run.created_at,
        "input": run.input,
    }
    if status == "succeeded":
        out["result"] = folder.read_result()
    else:
        out["error"] = run.error
    out["attempts"] = [a.to_dict() for a in log.attempts]
    out["steps"] = [s.to_dict() for s in log.steps]
    # the relay's flow graph painted with this run, by the same overlay as the notebook's
    flow = authoring.run_flow(workspace, run_id)  # the code the run ran, not the draft now
    graph = overlay_run(flow.graph, log)
    drawn = code_text({**(graph.run or {}), "code": flow.code}, "notebook")
    if drawn is not None:  # the draft changed since the run started: the panel says so
        graph.run = {**(graph.run or {}), "code": flow.code, "drawn": drawn}
    out["graph"] = overlay_events(graph, read_run_events(workspace, run_id).latest()).to_dict()
    out["trace"] = _read_trace(folder.trace)
    out["pending_calls"] = [
        {"key": c.key, "call": c.call, "attempt": c.attempt}
        for c in pending_calls(workspace, run_id)
    ]
    # a run made before the supervisor's secret check may hold an encoded vault value
    secrets = Vault(workspace.home).values()
    return Redactor(secrets, encoded=True).scrub_json(out) if secrets else out


def _read_trace(path: Path) -> Any:
    """The run's trace, or ``None`` while there is none (or it is unreadable: it is derived
    from the ledger, which ``steps`` and ``attempts`` already report)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def preview(workspace: Workspace, run_id: str) -> RecoveryPreview:
    """``relay logs RUN`` before a recover: what the next attempt would reuse and run again."""
    return preview_recovery(workspace, run_id)


def serve_worker(
    workspace: Workspace,
    backend: Backend | None,
    *,
    executor_id: str | None,
    concurrency: int,
    lease_s: float,
    poll_s: float,
    log: Callable[[str], None],
) -> None:
    """``relay worker``: take queued runs until stopped (DBOS loads only here, on purpose)."""
    from relay_notebook.runner.worker import Worker, WorkerSettings, default_executor_id

    pool = require_pool_backend(backend, "relay worker")
    settings = WorkerSettings(
        executor_id=executor_id or default_executor_id(),
        concurrency=concurrency,
        lease_s=lease_s,
        poll_s=poll_s,
    )
    worker = Worker(workspace, pool, settings, log=log)
    worker.start()
    worker.serve()
