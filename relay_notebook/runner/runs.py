"""Starting and recovering runs: the supervisor's entry points used by the CLI and magics."""

from __future__ import annotations

from typing import Any, Unpack

from relay_notebook.errors import (
    NotDurableError,
    RunLockedError,
    RunRejectedError,
    codes,
)
from relay_notebook.record.bindings import (
    draft_code,
)
from relay_notebook.record.dbos_tools import inspect_run
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.ledger import now_ms
from relay_notebook.record.messages import wait_ready
from relay_notebook.record.rules import decide
from relay_notebook.record.run_record import MAX_ATTEMPTS, RunRecord
from relay_notebook.runner.attempt_request import AttemptCaller, AttemptChoices, AttemptRequest
from relay_notebook.runner.backend import (
    Backend,
    backend_for_run,
    workspace_backend,
)
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.fault_points import fault_point
from relay_notebook.runner.fork import CREATING, ForkRequest
from relay_notebook.runner.fork_make import complete_fork, make_fork
from relay_notebook.runner.new_run import DEFAULT_DEADLINE_S, record_new_run
from relay_notebook.runner.preflight import (
    Held,
    NotWaiting,
    check_under_lock,
    held_handle,
    rule_facts,
)
from relay_notebook.runner.supervisor import EventCallback, RunHandle, launch_attempt
from relay_notebook.workspace import (
    Draft,
    Workspace,
)

__all__ = [
    "DEFAULT_DEADLINE_S",
    "MAX_ATTEMPTS",
    "advance_run",
    "create_fork",
    "create_run",
    "record_new_run",
    "record_refusal",
    "resume_waiting",
    "start_fork",
    "start_recovery",
    "start_run",
]


def create_run(
    workspace: Workspace,
    draft: Draft,
    *,
    run_input: Any = None,
    release: str | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
    queued: bool = False,
) -> RunFolder:
    """Allocate a new run of ``draft`` (or of its ``release``) and record it; start nothing.

    ``run_input`` is the JSON value passed as ``INPUT``; ``None`` means an empty object. The run
    keeps its database (``backend``, default: the workspace's ``database_url``) for all its
    attempts.
    """
    backend = workspace_backend(workspace, backend)
    folder, _ = record_new_run(
        workspace, draft, run_input=run_input, release=release, deadline_s=deadline_s,
        backend=backend, queued=queued,
    )  # fmt: skip
    return folder


def start_run(
    workspace: Workspace,
    draft: Draft,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: CrashSpec | None = None,
    on_event: EventCallback | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> RunHandle:
    """Start attempt 1 of a new run of ``draft`` (or of its ``release``); returns at once.

    ``run_input`` is the JSON value passed as ``INPUT``; ``None`` means an empty object.
    """
    backend = workspace_backend(workspace, backend)
    folder, record = record_new_run(
        workspace, draft, run_input=run_input, release=release, deadline_s=deadline_s,
        backend=backend,
    )  # fmt: skip
    fault_point("run:recorded")
    request = AttemptRequest.of_run(
        workspace, folder, record, backend, crash=crash, on_event=on_event
    )
    return _launch(workspace, request, checked=False)


def draft_hash(draft: Draft) -> str:
    """The content hash a run of ``draft`` is bound to (its DBOS application version)."""
    return draft_code(draft).source_hash


def _launch(workspace: Workspace, request: AttemptRequest, *, checked: bool) -> RunHandle:
    """The attempt ``request`` asks for: ``checked``, the rules are applied again under the run
    lock (every attempt but a new run's first)."""

    def preflight() -> RunRecord:
        return check_under_lock(workspace, request)

    try:
        handle = launch_attempt(request, preflight if checked else None)
    except Held as held:
        return held_handle(request.folder, held.record, held.decision)

    def answered() -> RunHandle | None:
        # the attempt ended waiting: a message that came while it left resumes it at once
        return resume_waiting(
            workspace, request.run_id, on_event=request.on_event, backend=request.backend,
            executor_id=request.executor_id, lifeline=request.lifeline,
        )  # fmt: skip

    handle.continue_with = answered
    return handle


def start_recovery(
    workspace: Workspace,
    run_id: str,
    *,
    backend: Backend | None = None,
    accept_lost_checkpoints: bool = False,
    **caller: Unpack[AttemptCaller],
) -> RunHandle:
    """Start the next attempt of ``run_id``; a finished run comes back as it was, unrun.

    A revoked relay comes back ``denied`` and a run with an unreconciled uncertain call comes
    back ``needs_reconciliation``, both without using an attempt. The run continues in the
    database it started with (``backend`` only supplies that database's password). Checkpoints
    the run's records name but its database lacks refuse the attempt (``checkpoints-lost``)
    unless ``accept_lost_checkpoints``: then their steps run again.
    """
    return _next_attempt(workspace, run_id, backend, accept_lost=accept_lost_checkpoints, **caller)


def resume_waiting(
    workspace: Workspace,
    run_id: str,
    *,
    backend: Backend | None = None,
    **caller: Unpack[AttemptCaller],
) -> RunHandle | None:
    """The next attempt of a waiting run whose wait is answered (a message, a due timer).

    ``None`` when the run is not waiting, its wait is not answered yet, or another process is
    resuming it now: the single-executor rule holds, so a run is never resumed twice at once.
    The attempt replays to the wait from checkpoints and goes on (or waits again).
    """
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    if record.waiting is None:
        return None
    run_backend = backend_for_run(record, workspace_backend(workspace, backend))
    if not wait_ready(folder, record, run_backend, now_ms()):
        return None  # checked again under the run lock
    if inspect_run(folder, record, run_backend).cancelled:
        return None  # cancelled with DBOS's tool: `relay recover` says so, a wake stays quiet
    request = AttemptRequest.of_run(
        workspace, folder, record, run_backend, resume=True, crash=_carried_crash(record), **caller
    )
    try:
        handle = _launch(workspace, request, checked=True)
    except (RunLockedError, NotWaiting):
        return None
    return handle if handle.process is not None else None


def _carried_crash(record: RunRecord) -> CrashSpec | None:
    """The ``--crash`` point a run went waiting before reaching: it fires in the attempt that
    resumes the run (the call counts run from the start of the run, replayed calls included)."""
    waiting = record.raw.get("waiting")
    carried = waiting.get("crash") if isinstance(waiting, dict) else None
    try:
        return CrashSpec.from_dict(carried) if isinstance(carried, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def _next_attempt(
    workspace: Workspace,
    run_id: str,
    backend: Backend | None,
    **choices: Unpack[AttemptChoices],
) -> RunHandle:
    """The checks before any attempt after ``create_run``, then the attempt (see the callers).

    The rules that need no lock decide here, on the record as the command read it; the attempt
    re-applies them all under the lock, on the record read again there (another process may
    have changed it in between).
    """
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    if record.status == CREATING:  # a fork whose making was cut short: completed, or refused
        record = complete_fork(workspace, folder, record, backend)
    if record.attempts:  # a crash applies to a run's first attempt only
        choices.pop("crash", None)
    run_backend = backend_for_run(record, workspace_backend(workspace, backend))
    # DBOS's own tools are looked for here on a SQLite file; on PostgreSQL only under the lock,
    # on its session (an attempt opens no session but its two locks')
    tools_in = None if run_backend.is_postgres else run_backend
    decision = decide(rule_facts(workspace, folder, record, resume=run_backend, database=tools_in))
    if decision.verdict == "hold":
        return held_handle(folder, record, decision)
    if decision.code == codes.NOT_DURABLE.code:
        raise NotDurableError(str(decision.message))
    request = AttemptRequest.of_run(workspace, folder, record, run_backend, **choices)
    return _launch(workspace, request, checked=True)


def record_refusal(workspace: Workspace, run_id: str, exc: RunRejectedError) -> None:
    """A queued run the pool refused before its first attempt ends ``rejected`` in run.json
    (a refused recovery leaves the run as it was: it can be recovered once the cause is gone)."""
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    if record.status == "queued" and not record.attempts:
        record.status, record.error = "rejected", {"code": exc.code, "message": exc.message}
        record.save(folder)


def advance_run(
    workspace: Workspace,
    run_id: str,
    *,
    crash: CrashSpec | None = None,
    backend: Backend | None = None,
    **caller: Unpack[AttemptCaller],
) -> RunHandle:
    """The next attempt of a run created by ``create_run``: its first, or a recovery.

    Workers call this for queued runs. A first attempt waits in a queue, so it is checked
    like a recovery (bindings, budget, deadline, access); ``crash`` applies to it only.
    """
    return _next_attempt(workspace, run_id, backend, crash=crash, **caller)


def start_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    crash: CrashSpec | None = None,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
) -> RunHandle:
    """``relay fork RUN --from STEP#N``: the fork ``request`` asks for; its first attempt
    starts at once (returns its ``RunHandle``), as the fork's record (its run.json, as
    ``make_fork`` wrote it) describes it: its workflow waits in its database."""
    fork, record = make_fork(workspace, run_id, request, backend=backend, queued=False)
    run_backend = backend_for_run(record, workspace_backend(workspace, backend))
    attempt = AttemptRequest.of_run(
        workspace, fork, record, run_backend, crash=crash, on_event=on_event
    )
    return _launch(workspace, attempt, checked=False)


def create_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    backend: Backend | None = None,
    queued: bool = False,
) -> RunFolder:
    """The fork of ``start_fork``, made and held in its database, with no attempt started:
    ``queued`` marks it for the workers' queue (``relay fork --queue``)."""
    fork, _ = make_fork(workspace, run_id, request, backend=backend, queued=queued)
    return fork
