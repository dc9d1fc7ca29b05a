"""The tools' results as pydantic models: each tool's output schema names the fields an agent
reads, and allows the rest (the documents are the CLI's ``--json`` ones, which grow)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CheckResult",
    "CrashEachResult",
    "DiffResult",
    "Document",
    "DraftResult",
    "FilePreview",
    "GraphResult",
    "LineageResult",
    "LogResult",
    "ReconcileResult",
    "RelaysResult",
    "RunResult",
    "RunsResult",
]


class Document(BaseModel):
    """A JSON object: the named fields, and any others the command returns."""

    model_config = ConfigDict(extra="allow")


class RelaysResult(Document):
    relays: list[dict[str, Any]] = Field(
        description="each relay: name, releases, latest, runs, access, broken, problem"
    )


class RunsResult(Document):
    runs: list[dict[str, Any]] = Field(
        description="each run, oldest first: run_id, relay, status, attempts, reused, release"
    )


class CheckResult(Document):
    relay: str
    ok: bool = Field(description="admitted (and, with replay, every run replays)")
    diagnostics: list[dict[str, Any]] = Field(
        default_factory=list, description="admission errors and lint warnings, one per line"
    )
    runs: list[dict[str, Any]] | None = Field(
        default=None, description="with replay: each recorded run's verdict on the code"
    )


class DraftResult(Document):
    relay: str
    saved: bool
    check: dict[str, Any] = Field(description="the check of the saved draft (ok, diagnostics)")


class GraphResult(Document):
    nodes: list[dict[str, Any]] = Field(description="steps, agent calls, branches (relay-graph/v1)")
    edges: list[dict[str, Any]]


class RunResult(Document):
    run_id: str
    relay: str
    status: str = Field(
        description="succeeded, failed, interrupted, waiting, needs_reconciliation, denied, "
        "running, ..."
    )
    attempt: int
    result: Any = Field(default=None, description="the run's result when it succeeded")
    error: dict[str, Any] | None = Field(
        default=None, description="code and message when it did not"
    )


class LogResult(Document):
    run_id: str
    relay: str
    status: str | None
    attempts: list[dict[str, Any]]
    steps: list[dict[str, Any]] = Field(description="each call: executed or reused, retries")


class DiffResult(Document):
    calls: list[dict[str, Any]] = Field(description="call by call: status, output, what differs")


class LineageResult(Document):
    run_id: str
    status: str
    forks: list[dict[str, Any]]


class FilePreview(Document):
    path: str
    size: int
    kind: str = Field(description="text, json, image or binary")
    text: str | None = Field(default=None, description="at most 64 KiB, vault values scrubbed")
    truncated: bool


class ReconcileResult(Document):
    run_id: str
    pending: list[dict[str, Any]] | None = Field(
        default=None, description="without result or retry: the uncertain calls that wait"
    )


class CrashEachResult(Document):
    relay: str
    ok: bool
    points: list[dict[str, Any]]
