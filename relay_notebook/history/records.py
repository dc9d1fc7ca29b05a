"""Run records: summaries across a workspace and one run's attempts and steps.

Everything here only reads: ``run.json``, the ledger and DBOS's SQLite file opened read-only.
It never launches DBOS (which would recover and execute the run) and works while a run goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relay_notebook.runner.checkpoints import read_checkpoints, read_workflow_status
from relay_notebook.runner.folders import RunFolder, find_run, list_run_folders
from relay_notebook.runner.ledger import check_events, read_events
from relay_notebook.workspace import Workspace

__all__ = ["RunLog", "RunSummary", "list_runs", "read_run_log"]


@dataclass(frozen=True)
class RunSummary:
    """One line of ``relay runs``."""

    run_id: str
    relay: str
    status: str
    attempts: int
    release: str
    created_at: float
    duration_ms: float | None
    reused: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "relay": self.relay,
            "status": self.status,
            "attempts": self.attempts,
            "release": self.release,
            "created_at": self.created_at,
            "duration_ms": self.duration_ms,
            "reused": self.reused,
        }


def _summary(folder: RunFolder) -> RunSummary:
    meta = folder.read_meta()
    attempts = meta.get("attempts", [])
    ended = [a["ended_at"] for a in attempts if a.get("ended_at")]
    release = meta.get("release")
    return RunSummary(
        run_id=folder.run_id,
        relay=folder.relay,
        status=meta.get("status", "pending"),
        attempts=len(attempts),
        release=f"v{release['version']}" if release else "draft",
        created_at=meta["created_at"],
        duration_ms=round(max(ended) - meta["created_at"], 1) if ended else None,
        reused=sum(len(a.get("reused", [])) for a in attempts),
    )


def list_runs(workspace: Workspace, relay: str | None = None) -> list[RunSummary]:
    """Runs of one relay, or of every relay in the workspace, oldest first."""
    relays = [relay] if relay else workspace.list_relays()
    if relay:
        workspace.load_draft(relay)
    found = [_summary(f) for name in relays for f in list_run_folders(workspace, name)]
    return sorted(found, key=lambda s: (s.created_at, s.run_id))


@dataclass
class RunLog:
    """One run in full: its metadata, attempts and step calls (``relay logs RUN --json``)."""

    run: dict[str, Any]
    attempts: list[dict[str, Any]]
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.run, "attempts": self.attempts, "steps": self.steps}


def _steps(folder: RunFolder, attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = check_events(read_events(folder.events), folder.run_id, folder.events)
    by_id: dict[int, dict[str, Any]] = {}
    for cp in read_checkpoints(folder.database, folder.run_id):
        by_id[cp.function_id] = {
            "function_id": cp.function_id,
            "name": cp.name,
            "status": "error" if cp.failed else "checkpointed",
            "started_at_ms": cp.started_at_ms,
            "completed_at_ms": cp.completed_at_ms,
            "duration_ms": (
                cp.completed_at_ms - cp.started_at_ms
                if cp.completed_at_ms is not None and cp.started_at_ms is not None
                else None
            ),
            "child_workflow_id": cp.child_workflow_id,
            "executed_in": [],
            "reused_in": [],
            "retries": [],
        }
    for a in attempts:
        for fid in a.get("executed", []):
            if fid in by_id:
                by_id[fid]["executed_in"].append(a["attempt"])
        for fid in a.get("reused", []):
            if fid in by_id:
                by_id[fid]["reused_in"].append(a["attempt"])
    for e in events:
        fid = e.get("step_id")
        if e.get("workflow_id") != folder.run_id or not isinstance(fid, int):
            continue
        if e["kind"] == "step_start" and fid not in by_id:
            # a body that started but never reached its checkpoint: the crash was in it
            by_id[fid] = {
                "function_id": fid,
                "name": e["step"],
                "status": "interrupted",
                "started_at_ms": e["ts"],
                "completed_at_ms": None,
                "duration_ms": None,
                "child_workflow_id": None,
                "executed_in": [],
                "reused_in": [],
                "retries": [],
            }
        step = by_id.get(fid)
        if step is None:
            continue
        if e["kind"] == "step_start":
            # the body ran in this attempt, even if its checkpoint was written in a later one
            if e["attempt"] not in step["executed_in"]:
                step["executed_in"].append(e["attempt"])
                step["executed_in"].sort()
        elif e["kind"] == "step_error":
            step["retries"].append(
                {
                    "attempt": e["attempt"],
                    "step_attempt": e.get("step_attempt"),
                    "error_type": e.get("error_type"),
                    "error": e.get("error"),
                    "duration_ms": e.get("duration_ms"),
                }
            )
    return [by_id[k] for k in sorted(by_id)]


def read_run_log(workspace: Workspace, run_id: str) -> RunLog:
    """The full record of ``run_id``; safe to call while it runs."""
    folder = find_run(workspace, run_id)
    meta = folder.read_meta()
    dbos_status = read_workflow_status(folder.database, folder.run_id)
    attempts = [
        {
            "attempt": a["attempt"],
            "status": a.get("status", "running"),
            "started_at": a.get("started_at"),
            "ended_at": a.get("ended_at"),
            "duration_ms": (
                round(a["ended_at"] - a["started_at"], 1) if a.get("ended_at") else None
            ),
            "returncode": a.get("returncode"),
            "crash": a.get("crash"),
            "executed": a.get("executed", []),
            "reused": a.get("reused", []),
        }
        for a in meta.get("attempts", [])
    ]
    run = {
        "run_id": folder.run_id,
        "relay": folder.relay,
        "workflow_id": meta.get("workflow_id", folder.run_id),
        "status": meta.get("status"),
        "dbos_status": dbos_status["status"] if dbos_status else None,
        "recovery_attempts": dbos_status["recovery_attempts"] if dbos_status else None,
        "release": meta.get("release"),
        "app_version": meta.get("app_version"),
        "created_at": meta.get("created_at"),
        "deadline_ms": meta.get("deadline_ms"),
        "input": meta.get("input"),
        "error": meta.get("error"),
        "folder": str(folder.path),
    }
    return RunLog(run, attempts, _steps(folder, attempts))
