"""The recovery rules, once: whether a run's next attempt may start, as a pure function.

``decide`` answers from facts gathered elsewhere (the run record, the relay's access, the
uncertain calls waiting for reconciliation, the bindings now, lost checkpoints, what DBOS's own
tools did to the run's database, and the time):
``go``; ``hold`` (the run comes back with ``status``, no attempt used: finished, denied, or
waiting for reconciliation); or ``refuse`` (an error with ``code``). ``runner.runs`` acts on the
answer and ``history.preview`` reports it, so both say the same, in one message per code.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from relay_notebook.errors import codes
from relay_notebook.record.checkpoints import LostCheckpoints
from relay_notebook.record.dbos_tools import (
    DbosTools,
    cancelled_message,
    outside_message,
    resumed_message,
)
from relay_notebook.record.run_record import RunRecord, WaitState

__all__ = [
    "Decision",
    "Facts",
    "Uncertain",
    "access_revoked_message",
    "after_interruption",
    "decide",
    "waiting_message",
]


@dataclass(frozen=True)
class Uncertain:
    """A platform call left without its result and not declared replay-safe."""

    key: str
    call: str


@dataclass(frozen=True)
class Facts:
    """What the rules need to know about a run, read by the caller.

    ``changed`` and ``lost`` are ``None`` when not looked at yet (the runner checks them under
    the run lock, after the checks that need no lock).
    """

    record: RunRecord
    granted: bool
    now_ms: float
    blocking: Sequence[Uncertain] = ()
    live: bool = False
    changed: Sequence[str] | None = None
    lost: LostCheckpoints | None = None
    #: for a waiting run: whether what it waits for is there (its message, or its timer due);
    #: ``None``: not looked at (a ``relay recover`` the user asked for goes ahead anyway)
    wait_ready: bool | None = None
    #: what DBOS's own tools did to the run's database (a cancel, a fork: ``record.dbos_tools``);
    #: ``None``: not looked at
    dbos: DbosTools | None = None


@dataclass(frozen=True)
class Decision:
    """``go``, or ``hold``/``refuse`` with a stable code and the message that says what next."""

    verdict: Literal["go", "hold", "refuse"]
    code: str | None = None
    message: str | None = None
    #: for ``hold``: the status the run comes back with
    status: str | None = None

    @property
    def reason(self) -> dict[str, str] | None:
        if self.code is None or self.message is None:
            return None
        return {"code": self.code, "message": self.message}


GO = Decision("go")


def access_revoked_message(run_id: str, relay: str, stopped: str | None = None) -> str:
    """The one ``access-revoked`` message (``stopped``: what a running attempt was denied)."""
    during = f"; {stopped} was denied" if stopped else ""
    return (
        f"Run {run_id} was denied: relay {relay}'s access is revoked{during}. Restore it with "
        f"'relay grant {relay}', then 'relay recover {run_id}'."
    )


def waiting_message(run_id: str, wait: WaitState) -> str:
    """The one ``waiting`` message: what the run waits for, until when, and how to answer."""
    until = ""
    if wait.until_ms is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(wait.until_ms / 1000))
        until = f" until {stamp}" if wait.kind == "message" else f"; its timer is due at {stamp}"
    if wait.kind == "message":
        topic = wait.topic if wait.topic is not None else "''"
        return (
            f"Run {run_id} waits for {wait.describe()}{until}, with no process. Answer it "
            f"with: relay send {run_id} {topic} JSON"
        )
    return (
        f"Run {run_id} waits in {wait.describe()}{until}, with no process. It resumes then "
        f"(relay wake resumes due runs)."
    )


def decide(facts: Facts) -> Decision:
    """The first rule the run's next attempt fails, in the order the runner applies them."""
    r, run_id, relay = facts.record, facts.record.run_id, facts.record.relay
    first = not r.attempts
    verb = "start" if first else "recover"
    new_run = f"Start a new run with: relay run {relay}"
    if r.finished:
        message = (
            f"Run {run_id} {r.status}; recovering it returns it as it was and runs nothing. "
            f"{new_run}"
        )
        if facts.dbos is not None and facts.dbos.resumed:
            message = resumed_message(r, facts.dbos)
        return Decision("hold", codes.FINISHED.code, message, r.status)
    if facts.live:
        return Decision(
            "refuse",
            codes.RUN_LOCKED.code,
            f"Run {run_id} is running now (attempt {r.attempts_used}); wait for it to end before "
            f"recovering it.",
        )
    if facts.dbos is not None and facts.dbos.cancelled:
        message = cancelled_message(r, facts.dbos)
        return Decision("hold", codes.CANCELLED_IN_DBOS.code, message, "cancelled")
    if facts.dbos is not None and facts.dbos.runnable:
        return Decision("refuse", codes.OUTSIDE_WORKFLOW.code, outside_message(r, facts.dbos))
    if not facts.granted:
        return Decision(
            "hold", codes.ACCESS_REVOKED.code, access_revoked_message(run_id, relay), "denied"
        )
    wait = r.waiting
    if wait is not None and facts.wait_ready is False:
        return Decision("hold", codes.WAITING.code, waiting_message(run_id, wait), "waiting")
    if not first and facts.blocking:
        calls = "; ".join(f"{b.call} (key {b.key})" for b in facts.blocking)
        return Decision(
            "hold",
            codes.NEEDS_RECONCILIATION.code,
            f"Run {run_id} waits for reconciliation of an uncertain call: {calls}. Find out "
            f"whether it took effect, then run 'relay reconcile {run_id} --result JSON' or "
            f"'relay reconcile {run_id} --retry', and recover again.",
            "needs_reconciliation",
        )
    if not first and not r.durable:
        return Decision(
            "refuse",
            codes.NOT_DURABLE.code,
            f"Cannot recover run {run_id}: relay {relay} runs with relay_durability: none, so "
            f"nothing was checkpointed. {new_run}",
        )
    if r.budget_used >= r.max_attempts:
        return Decision(
            "refuse",
            codes.ATTEMPT_BUDGET_EXHAUSTED.code,
            f"Cannot recover run {run_id}: it has used all {r.budget_used} of its process "
            f"attempts. {_fork_hint(run_id)}, or start a new run with: relay run {relay}",
        )
    if facts.now_ms > r.deadline_at(facts.now_ms):
        return Decision(
            "refuse",
            codes.DEADLINE_PASSED.code,
            f"Cannot {verb} run {run_id}: its deadline passed (a run keeps its first attempt's "
            f"deadline). {new_run}",
        )
    if facts.changed:
        origin = f"release v{r.release['version']}" if r.release else "the draft"
        return Decision(
            "refuse",
            codes.BINDING_CHANGED.code,
            f"Cannot {verb} run {run_id}: {'; '.join(facts.changed)} changed since the run "
            f"started from {origin}. Restore it, or start a new run with: relay run {relay}",
        )
    if not first and facts.lost is not None:
        return Decision("refuse", codes.CHECKPOINTS_LOST.code, facts.lost.message(run_id))
    return GO


def _fork_hint(run_id: str) -> str:
    return (
        f"Keep its completed steps by forking it: relay fork {run_id} --from CALL (the first "
        f"call to run again; relay logs {run_id} lists them)"
    )


def after_interruption(record: RunRecord) -> str:
    """What to type after an attempt of ``record``'s run was interrupted: recover it, or, once
    its attempts are all used (recover would refuse), fork it or start a new run."""
    if record.budget_used < record.max_attempts:
        return f"Recover it with: relay recover {record.run_id}"
    return (
        f"It has used all {record.max_attempts} of its attempts, so it cannot be recovered. "
        f"{_fork_hint(record.run_id)}, or start a new run with: relay run {record.relay}"
    )
