"""Recovery preview: what ``relay recover RUN`` would do, read from history before pressing it.

Recovery replays the workflow: every saved checkpoint is reused (its body does not run), the
bodies that were in flight when the attempt died run again, and a platform call left without
its result is uncertain: unless it was declared replay-safe, recovery stops for reconciliation
and names it. The preview also applies the runner's other checks that need no code (a finished
or running run, revoked access, the attempt budget, the deadline); a changed binding (source,
input, versions) is only found by the recovery itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentworks.journal import Journal
from relay_notebook.history.receipts import split_key
from relay_notebook.history.records import RunLog, read_run_log
from relay_notebook.record.backend import workspace_backend
from relay_notebook.record.checkpoints import LostCheckpoints, find_lost_checkpoints
from relay_notebook.record.folders import find_run
from relay_notebook.record.run_record import MAX_ATTEMPTS
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["RecoveryPreview", "preview_recovery"]


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
    reused: list[dict[str, Any]] = field(default_factory=list)
    rerun: list[dict[str, Any]] = field(default_factory=list)
    blocking: list[dict[str, Any]] = field(default_factory=list)
    replayed_calls: list[dict[str, Any]] = field(default_factory=list)

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


def _call(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "workflow_id": step["workflow_id"],
        "function_id": step["function_id"],
        "name": step["name"],
        "occurrence": step["occurrence"],
    }


def _where(log: RunLog, key: str) -> dict[str, Any]:
    workflow_id, step_id, _, _ = split_key(key)
    step = next(
        (
            s
            for s in log.all_steps()
            if s["workflow_id"] == workflow_id and s["function_id"] == step_id
        ),
        None,
    )
    return {"workflow_id": workflow_id, "function_id": step_id, "step": step and step["name"]}


def _refusal(
    log: RunLog,
    meta: dict[str, Any],
    revoked: bool,
    blocking: list[dict[str, Any]],
    lost: Callable[[], LostCheckpoints | None] = lambda: None,
) -> tuple[str, dict[str, str]] | None:
    """The first check recovery would fail, in the runner's order (``None``: it runs)."""
    run_id, relay, status = log.run_id, str(log.run["relay"]), str(log.run["status"])
    if status in ("succeeded", "failed"):
        return "returns", {
            "code": "finished",
            "message": f"Run {run_id} {status}; recovering it returns it as it was and runs "
            f"nothing. Start a new run with: relay run {relay}",
        }
    if log.run.get("live"):
        return "stops", {
            "code": "run-locked",
            "message": f"Run {run_id} is running now (attempt {len(log.attempts)}); wait for "
            f"it to end before recovering it.",
        }
    if revoked:
        return "stops", {
            "code": "access-revoked",
            "message": f"Recovery of run {run_id} would be denied: relay {relay}'s access is "
            f"revoked. Restore it with: relay grant {relay}",
        }
    if blocking:
        calls = "; ".join(f"{b['call']} (key {b['key']})" for b in blocking)
        return "stops", {
            "code": "needs-reconciliation",
            "message": f"Recovery of run {run_id} stops for reconciliation: {calls} may or may "
            f"not have taken effect. Find out, then run 'relay reconcile {run_id} --result "
            f"JSON' or 'relay reconcile {run_id} --retry', and recover.",
        }
    if not meta.get("durable", True):
        return "stops", {
            "code": "not-durable",
            "message": f"Run {run_id} ran with relay_durability: none, so nothing was "
            f"checkpointed. Start a new run with: relay run {relay}",
        }
    if len(log.attempts) >= int(meta.get("max_attempts", MAX_ATTEMPTS)):
        return "stops", {
            "code": "attempt-budget-exhausted",
            "message": f"Run {run_id} has used all {len(log.attempts)} of its process attempts. "
            f"Start a new run with: relay run {relay}",
        }
    deadline = log.run.get("deadline_ms")
    if isinstance(deadline, int | float) and time.time() * 1000 > deadline:
        return "stops", {
            "code": "deadline-passed",
            "message": f"Run {run_id} passed its deadline. Start a new run with: relay run {relay}",
        }
    missing = lost() if log.attempts else None
    if missing is not None:
        return "stops", {"code": "checkpoints-lost", "message": missing.message(run_id)}
    return None


def preview_recovery(workspace: Workspace, run_id: str) -> RecoveryPreview:
    """What ``relay recover RUN`` would do now; reads only, and changes nothing."""
    folder = find_run(workspace, run_id)
    log = read_run_log(workspace, run_id)
    meta = folder.read_meta()
    revoked = not AccessPolicy(workspace.home).is_granted(folder.relay)
    journal = Journal(folder.ipc / "journal.jsonl")
    steps = log.all_steps()
    reused = [_call(s) for s in steps if s["status"] in ("checkpointed", "error")]
    rerun = [
        _call(s) | {"started_in": s["executed_in"]}
        for s in steps
        if s["status"] in ("interrupted", "running")
    ]
    blocking = [
        {"key": c.key, "call": c.describe(), "attempt": c.attempt, **_where(log, c.key)}
        for c in journal.blocking()
    ]
    replayed = [
        {"key": c.key, "call": c.describe(), "attempt": c.attempt, **_where(log, c.key)}
        for c in journal.pending()
        if not c.blocking
    ]

    def lost() -> LostCheckpoints | None:
        backend = workspace_backend(workspace)
        return find_lost_checkpoints(folder, meta, backend)

    refusal = _refusal(log, meta, revoked, blocking, lost)
    outcome, reason = refusal if refusal is not None else ("recover", None)
    pending = outcome == "recover" or (reason or {}).get("code") not in ("finished", "run-locked")
    return RecoveryPreview(
        run_id=folder.run_id,
        relay=folder.relay,
        status=str(log.run["status"]),
        outcome=outcome,
        attempt=len(log.attempts) + 1 if outcome == "recover" else None,
        reason=reason,
        reused=reused if pending else [],
        rerun=rerun if pending else [],
        blocking=blocking,
        replayed_calls=replayed if pending else [],
    )
