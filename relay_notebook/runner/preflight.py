"""The recovery rules applied by the runner: their facts, the check under the run lock, a hold.

Design note: ``record.rules.decide`` is the one pure function of the rules; this module
gathers its facts for a run (access, uncertain calls, the wait's answer, and under the lock the
bindings and lost checkpoints) and acts on the answer: ``preflight`` raises the refusal's
error or ``Held`` (the attempt does not start), and ``held_handle`` turns a hold into the
finished handle a caller gets back (the run as it was, or held with a status), so
``history.preview`` and ``runs`` say the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentworks.journal import Journal
from relay_notebook.errors import (
    AttemptBudgetError,
    BindingChangedError,
    CheckpointsLostError,
    DeadlinePassedError,
    NotDurableError,
    OutsideWorkflowError,
    RelayError,
    RunLockedError,
    codes,
)
from relay_notebook.record.bindings import bindings_changed
from relay_notebook.record.checkpoints import LostCheckpoints, find_lost_checkpoints
from relay_notebook.record.dbos_tools import inspect_run
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import now_ms
from relay_notebook.record.messages import wait_ready
from relay_notebook.record.rules import Decision, Facts, Uncertain, decide
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.checkpoints import guard_checkpoints
from relay_notebook.runner.outcome import RunOutcome, settle_lost_attempts
from relay_notebook.runner.sandbox_plan import refuse_unreachable_database
from relay_notebook.runner.supervisor import RunHandle, record_event
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.access import AccessPolicy

if TYPE_CHECKING:
    from relay_notebook.runner.attempt_request import AttemptRequest

__all__ = [
    "REFUSALS",
    "Held",
    "NotWaiting",
    "check_under_lock",
    "finished_outcome",
    "held_handle",
    "rule_facts",
]


def finished_outcome(folder: RunFolder, record: RunRecord) -> RunOutcome:
    result = folder.read_result() if record.status == "succeeded" else None
    return RunOutcome(
        folder.run_id, folder.relay, record.status, record.attempts_used, result, record.error
    )


class NotWaiting(Exception):
    """A resume found the run no longer waiting (another process resumed it first)."""


class Held(Exception):
    """Under the run lock the rules held the attempt back (e.g. the vanished supervisor's
    attempt had finished the run after all); ``record`` is the run as read there."""

    def __init__(self, decision: Decision, record: RunRecord) -> None:
        super().__init__(decision.code)
        self.decision = decision
        self.record = record


REFUSALS: dict[str, type[RelayError]] = {
    cls.code: cls
    for cls in (
        RunLockedError,
        NotDurableError,
        AttemptBudgetError,
        DeadlinePassedError,
        BindingChangedError,
        CheckpointsLostError,
        OutsideWorkflowError,
    )
}


def rule_facts(
    workspace: Workspace,
    folder: RunFolder,
    record: RunRecord,
    *,
    changed: list[str] | None = None,
    lost: LostCheckpoints | None = None,
    resume: Backend | None = None,
    database: Backend | None = None,
) -> Facts:
    """The rules' facts; ``resume`` (the run's database) asks whether a waiting run is ready;
    ``database`` (the same) looks for what DBOS's own tools did there (``record.dbos_tools``)."""
    blocking = Journal(folder.journal).blocking() if record.attempts else []
    now = now_ms()
    ready = None
    if resume is not None and record.waiting is not None:
        ready = wait_ready(folder, record, resume, now)
    return Facts(
        record=record,
        granted=AccessPolicy(workspace.home).is_granted(folder.relay),
        now_ms=now,
        blocking=[Uncertain(c.key, c.describe()) for c in blocking],
        changed=changed,
        lost=lost,
        wait_ready=ready,
        dbos=inspect_run(folder, record, database) if database is not None else None,
    )


def check_under_lock(workspace: Workspace, request: AttemptRequest) -> RunRecord:
    """The rules again under the run lock, now with the bindings and the checkpoints; returns
    the run's record as read there (the one the attempt is recorded in).

    ``request.resume``: only a waiting run whose wait is answered goes (a message, a due timer).
    """
    folder, backend = request.folder, request.backend
    record = RunRecord.load(folder)
    if any(not a.ended for a in record.attempts):  # under the run lock: none is running
        # the environment the attempt inherited is this process's (see launch_attempt)
        settle_lost_attempts(folder, record, backend, request.secrets)
    if record.finished:
        raise Held(decide(rule_facts(workspace, folder, record)), record)
    if request.confine:  # a run made before this refusal, or while confinement was off
        refuse_unreachable_database(folder.relay, request.code_dir, backend)
    if request.resume and record.waiting is None:
        raise NotWaiting(record.status)
    changed = bindings_changed(workspace, record)
    lost = None
    if record.attempts and not request.accept_lost:
        lost = find_lost_checkpoints(folder, record, backend)
    ready = backend if request.resume else None
    decision = decide(
        rule_facts(
            workspace, folder, record, changed=changed, lost=lost, resume=ready, database=backend
        )
    )
    if decision.verdict == "hold":
        raise Held(decision, record)
    if decision.verdict == "refuse":
        assert decision.code is not None and decision.message is not None
        if decision.code == codes.BINDING_CHANGED.code:
            record_event(folder, record.attempts_used, "recovery_rejected", changed=changed)
        raise REFUSALS[decision.code](decision.message)
    if record.attempts and request.accept_lost:
        guard_checkpoints(folder, record, backend, accept=True)
    return record


def held_handle(folder: RunFolder, record: RunRecord, decision: Decision) -> RunHandle:
    """A recovery that does not start: a finished run as it was, or held with a status."""
    if decision.code == codes.FINISHED.code:
        finished = finished_outcome(folder, record)
        return RunHandle(folder, finished.attempt, process=None, on_event=None, finished=finished)
    attempts = record.attempts_used
    status, error = str(decision.status), decision.reason
    record_event(folder, attempts, "recovery_held", status=status, error=error)
    outcome = RunOutcome(folder.run_id, folder.relay, status, attempts, None, error)
    return RunHandle(folder, attempts, process=None, on_event=None, finished=outcome)
