"""Recovery preview: what ``relay recover RUN`` would do, read from history before pressing it.

Recovery replays the workflow: every saved checkpoint is reused (its body does not run), the
bodies that were in flight when the attempt died run again, and a platform call left without
its result is uncertain: unless it was declared replay-safe, recovery stops for reconciliation
and names it. Whether recovery starts at all is decided by the recovery rules
(``record.rules``), the same function ``relay recover`` acts on, with the same facts: a finished
or running run, revoked access, the attempt budget, the deadline, a changed binding (source,
input, versions) and lost checkpoints; so the preview says what recovery would say.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from agentworks.journal import CallState, Journal
from relay_notebook.errors import RelayError, codes
from relay_notebook.history.log_records import StepCall
from relay_notebook.history.receipts import split_key
from relay_notebook.history.records import RunLog, read_run_log
from relay_notebook.record.backend import workspace_backend
from relay_notebook.record.bindings import bindings_changed
from relay_notebook.record.checkpoints import find_lost_checkpoints
from relay_notebook.record.dbos_tools import inspect_run
from relay_notebook.record.folders import find_run
from relay_notebook.record.messages import wait_ready
from relay_notebook.record.rules import Decision, Facts, Uncertain, decide
from relay_notebook.record.run_record import RunRecord
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["PreviewCall", "RecoveryPreview", "RerunCall", "UncertainCall", "preview_recovery"]


class PreviewCall(TypedDict):
    """A step call recovery reuses: its checkpoint comes back, its body does not run."""

    workflow_id: str
    function_id: int
    name: str
    occurrence: int | None


class RerunCall(PreviewCall):
    """A step call whose body runs again: it started (``started_in``) and saved nothing."""

    started_in: list[int]


class UncertainCall(TypedDict):
    """A platform call left without its result, and the step call that made it."""

    key: str
    call: str
    attempt: int | None
    workflow_id: str | None
    function_id: int | None
    step: str | None


@dataclass
class RecoveryPreview:
    """What recovering a run would do: reuse, run again, or stop (and why)."""

    run_id: str
    relay: str
    status: str
    #: ``recover`` (a new attempt runs), ``returns`` (finished: comes back as it was), or
    #: ``stops`` (refused or held: ``reason`` says why and what to type)
    outcome: str
    attempt: int | None
    reason: dict[str, str] | None = None
    reused: list[PreviewCall] = field(default_factory=list)
    rerun: list[RerunCall] = field(default_factory=list)
    #: uncertain calls that stop recovery for reconciliation
    blocking: list[UncertainCall] = field(default_factory=list)
    #: uncertain calls declared replay-safe: called again
    replayed_calls: list[UncertainCall] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "relay": self.relay,
            "status": self.status,
            "outcome": self.outcome,
            "attempt": self.attempt,
            "reason": self.reason,
            "reused": self.reused,
            "rerun": self.rerun,
            "blocking": self.blocking,
            "replayed_calls": self.replayed_calls,
        }


def _call(step: StepCall) -> PreviewCall:
    return PreviewCall(
        workflow_id=step.workflow_id,
        function_id=step.function_id,
        name=step.name,
        occurrence=step.occurrence,
    )


def _rerun(step: StepCall) -> RerunCall:
    return {**_call(step), "started_in": list(step.executed_in)}


def _uncertain(log: RunLog, call: CallState) -> UncertainCall:
    workflow_id, step_id, _, _ = split_key(call.key)
    step = next(
        (s for s in log.all_steps() if s.workflow_id == workflow_id and s.function_id == step_id),
        None,
    )
    return UncertainCall(
        key=call.key,
        call=call.describe(),
        attempt=call.attempt,
        workflow_id=workflow_id,
        function_id=step_id,
        step=step.name if step is not None else None,
    )


def _reason(decision: Decision) -> tuple[str, dict[str, str] | None]:
    """The preview's outcome for the rules' ``decision``."""
    if decision.verdict == "go":
        return "recover", None
    return ("returns" if decision.code == "finished" else "stops"), decision.reason


def _changed(workspace: Workspace, record: RunRecord) -> tuple[list[str], Decision | None]:
    """What changed since the run started, or the refusal reading the code now raises."""
    try:
        return bindings_changed(workspace, record), None
    except RelayError as exc:  # e.g. a tampered release: recovery raises the same
        return [], Decision("refuse", exc.code, exc.message)


def preview_recovery(workspace: Workspace, run_id: str) -> RecoveryPreview:
    """What ``relay recover RUN`` would do now; reads only, and changes nothing."""
    folder = find_run(workspace, run_id)
    log = read_run_log(workspace, run_id)
    record = RunRecord.load(folder)
    journal = Journal(folder.journal)
    steps = log.all_steps()
    reused = [_call(s) for s in steps if s.status in ("checkpointed", "error")]
    rerun = [_rerun(s) for s in steps if s.status in ("interrupted", "running")]
    blocking = [_uncertain(log, c) for c in journal.blocking()]
    replayed = [_uncertain(log, c) for c in journal.pending() if not c.blocking]

    now = time.time() * 1000
    ready = None
    if record.waiting is not None:
        ready = wait_ready(folder, record, workspace_backend(workspace), now)
    facts = Facts(
        record=record,
        granted=AccessPolicy(workspace.home).is_granted(folder.relay),
        now_ms=now,
        blocking=[Uncertain(c.key, c.describe()) for c in journal.blocking()],
        live=log.run.live,
        wait_ready=ready,
        dbos=inspect_run(folder, record, workspace_backend(workspace), live=log.run.live),
    )
    decision = decide(facts)
    if decision.verdict == "go":  # the checks recovery makes under the run lock
        changed, failed = _changed(workspace, record)
        lost = None
        if record.attempts and not failed:
            lost = find_lost_checkpoints(folder, record, workspace_backend(workspace))
        decision = failed or decide(replace(facts, changed=changed, lost=lost))
    outcome, reason = _reason(decision)
    pending = outcome == "recover" or (reason or {}).get("code") not in (
        codes.FINISHED.code,
        codes.RUN_LOCKED.code,
    )
    return RecoveryPreview(
        run_id=folder.run_id,
        relay=folder.relay,
        status=log.run.status,
        outcome=outcome,
        attempt=len(log.attempts) + 1 if outcome == "recover" else None,
        reason=reason,
        reused=reused if pending else [],
        rerun=rerun if pending else [],
        blocking=blocking,
        replayed_calls=replayed if pending else [],
    )
