"""The attempt spec: what the supervisor tells one child, written once before it starts.

Design note: the spec is the one contract between the supervisor and the child — a frozen
dataclass the supervisor writes as ``spec.json`` in the attempt's folder (which the child may
read but not write: see ``runner.confine``) and the child reads back, typed, as the first
thing it does. Secrets and the database password never travel in it (they go through the
child's stdin). ``AttemptContext`` is the part the run's record decides (its workspace,
variables, model, release, durability, the wait grace); the rest is the attempt's own plumbing:
its files and the descriptors it inherits.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay_notebook.runner.crash import CrashSpec
from relay_notebook.workspace.file_io import write_json_atomic

__all__ = ["AttemptContext", "AttemptSpec"]


@dataclass(frozen=True)
class AttemptContext:
    """What the run's record gives the child's runtime (``agentworks`` sees it)."""

    workspace: Path
    variables: Mapping[str, str] = field(default_factory=dict)
    default_model: str | None = None
    #: ``{"version": N, "hash": H}`` for a run of a release
    release: Mapping[str, Any] | None = None
    durable: bool = True
    #: seconds a run may block in a wait before its attempt ends ``waiting``
    wait_grace_s: float = 3.0


@dataclass(frozen=True)
class AttemptSpec:
    """One attempt of one run, as its child is told (see the module's design note)."""

    run_id: str
    relay: str
    attempt: int
    attempt_id: str
    code_dir: Path
    app_version: str
    input: Any
    database: Path
    events_path: Path
    result_path: Path
    outcome_path: Path
    run_dir: Path
    context: AttemptContext
    entry: str = "relay.py"
    crash: CrashSpec | None = None
    database_kind: str = "sqlite"
    app_name: str = "relay"
    executor_id: str = "relay-local"
    #: the descriptors the child inherits: live events, the lifeline, the confinement report
    pipe_fd: int | None = None
    lifeline_fd: int | None = None
    report_fd: int | None = None
    #: where the sandbox's network helper says the way out is ready (``runner.sandbox``)
    net_ready_fd: int | None = None
    #: what the child checks about its own confinement before the relay is imported
    confinement: Mapping[str, Any] | None = None
    #: tests only: the fault point at which the child stops itself (``runner.fault_points``),
    #: as its supervisor's process was told (the child reads no setting of its own)
    stop_at: str | None = None

    def with_confinement(
        self, check: Mapping[str, Any] | None, net_ready_fd: int | None = None
    ) -> AttemptSpec:
        return dataclasses.replace(self, confinement=check, net_ready_fd=net_ready_fd)

    def to_json(self) -> dict[str, Any]:
        ctx = self.context
        return {
            "run_id": self.run_id,
            "relay": self.relay,
            "attempt": self.attempt,
            "attempt_id": self.attempt_id,
            "code_dir": str(self.code_dir),
            "entry": self.entry,
            "app_version": self.app_version,
            "input": self.input,
            "crash": self.crash.to_dict() if self.crash else None,
            "database": str(self.database),
            "events_path": str(self.events_path),
            "result_path": str(self.result_path),
            "outcome_path": str(self.outcome_path),
            "run_dir": str(self.run_dir),
            "database_kind": self.database_kind,
            "app_name": self.app_name,
            "executor_id": self.executor_id,
            "pipe_fd": self.pipe_fd,
            "lifeline_fd": self.lifeline_fd,
            "report_fd": self.report_fd,
            "net_ready_fd": self.net_ready_fd,
            "confinement": dict(self.confinement) if self.confinement is not None else None,
            "stop_at": self.stop_at,
            "workspace": str(ctx.workspace),
            "variables": dict(ctx.variables),
            "default_model": ctx.default_model,
            "release": dict(ctx.release) if ctx.release is not None else None,
            "durable": ctx.durable,
            "wait_grace_s": ctx.wait_grace_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptSpec:
        def fd(key: str) -> int | None:
            value = data.get(key)
            return int(value) if value is not None else None

        return cls(
            run_id=str(data["run_id"]),
            relay=str(data["relay"]),
            attempt=int(data["attempt"]),
            attempt_id=str(data["attempt_id"]),
            code_dir=Path(data["code_dir"]),
            entry=str(data.get("entry") or "relay.py"),
            app_version=str(data["app_version"]),
            input=data["input"],
            crash=CrashSpec.from_dict(data["crash"]) if data.get("crash") else None,
            database=Path(data["database"]),
            events_path=Path(data["events_path"]),
            result_path=Path(data["result_path"]),
            outcome_path=Path(data["outcome_path"]),
            run_dir=Path(data["run_dir"]),
            database_kind=str(data.get("database_kind") or "sqlite"),
            app_name=str(data.get("app_name") or "relay"),
            executor_id=str(data.get("executor_id") or "relay-local"),
            pipe_fd=fd("pipe_fd"),
            lifeline_fd=fd("lifeline_fd"),
            report_fd=fd("report_fd"),
            net_ready_fd=fd("net_ready_fd"),
            confinement=data.get("confinement"),
            stop_at=data.get("stop_at"),
            context=AttemptContext(
                workspace=Path(data["workspace"]),
                variables={str(k): str(v) for k, v in (data.get("variables") or {}).items()},
                default_model=data.get("default_model"),
                release=data.get("release"),
                durable=data.get("durable", True) is not False,
                wait_grace_s=float(data.get("wait_grace_s", 3.0)),
            ),
        )

    def write(self, path: Path) -> None:
        # not synced: read once, by a child started after it was written; after a machine
        # crash the attempt is gone with it (run.json, synced, says it ended interrupted)
        write_json_atomic(path, self.to_json(), sync=False)

    @classmethod
    def read(cls, path: Path | str) -> AttemptSpec:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
