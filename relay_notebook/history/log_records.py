"""The typed parts of a run's log: its header, attempts, step calls, child workflows, receipts.

Design note: these are what every surface reads (views, REST, the magics, the CLI), so each is
a frozen dataclass with one ``to_dict`` that gives the JSON ``relay logs RUN --json`` and
``GET relay/api/runs/{run_id}`` have always given, key for key and in the same order. Lists
are tuples here and lists in the JSON. Values copied from ``run.json`` as recorded (the release,
the fork, the error, the input) keep their recorded shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from relay_notebook.record.dbos_tools import OutsideWorkflow

__all__ = [
    "Attempt",
    "CallFacts",
    "ChildWorkflow",
    "ForkEdits",
    "ForkOrigin",
    "ForkedChild",
    "InjectedCrash",
    "Receipt",
    "ReleaseRef",
    "RunError",
    "RunHeader",
    "StepCall",
    "StepRetry",
    "WaitingFor",
]


class ReleaseRef(TypedDict):
    """The release a run ran (run.json's ``release``)."""

    version: int
    hash: str


class ForkEdits(TypedDict):
    """What a fork changed: the input, and the outputs it set (``STEP#N``)."""

    input: bool
    outputs: list[str]


class ForkedChild(TypedDict):
    """The child workflow a fork forked too, forked from a call inside it: the call that
    started it (function id and ``STEP#N``), the parent's child and the fork's, the child's
    first function id that ran fresh, its copied and edited function ids."""

    starter: int
    starter_call: str
    parent_workflow_id: str
    workflow_id: str
    function_id: int
    copied: list[int]
    edited_ids: list[int]


#: a fork's origin as run.json records it: the parent run, the call it was forked from
#: (``from``), the copied function ids, the edits, whose code it runs (``code``), and the child
#: it forked too when that call ran in one (``child``)
ForkOrigin = TypedDict(
    "ForkOrigin",
    {
        "parent": str,
        "from": str,
        "function_id": int,
        "copied": list[int],
        "edits": ForkEdits,
        "edited_ids": list[int],
        "code": str,
        "child": ForkedChild,
    },
    total=False,
)


class RunError(TypedDict, total=False):
    """Why a run did not succeed, as run.json records it: a stable ``code`` and a message,
    the trimmed traceback of a relay's exception, the platform call it concerns."""

    code: str
    message: str
    traceback: str
    call: Mapping[str, object]
    stderr: str  # the attempt's last words, where they say why (an exit, a server gone)


class WaitingFor(TypedDict):
    """What a waiting run waits for (``WaitState.to_json``)."""

    kind: str
    workflow_id: str
    since_ms: float
    topic: str | None
    until_ms: float | None


class InjectedCrash(TypedDict):
    """A crash injected into an attempt (``--crash WHEN:STEP#N``), as run.json records it."""

    when: str
    step: str
    occurrence: int


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What a run is: its relay, release, status (run.json's and DBOS's), input and error."""

    run_id: str
    relay: str
    workflow_id: str
    status: str
    dbos_status: str | None
    recovery_attempts: int | None
    #: ``None`` for a run of a draft
    release: ReleaseRef | None
    app_version: str
    created_at: float
    deadline_ms: float
    #: the attempt budget as recorded (older runs did not record it)
    max_attempts: int | None
    fork: ForkOrigin | None
    input: Any
    error: RunError | None
    folder: str
    #: an attempt's process may be writing now
    live: bool
    #: while its status is waiting
    waiting: WaitingFor | None
    #: root workflows in the run's database the kit did not make (``dbos workflow fork``)
    outside: tuple[OutsideWorkflow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "relay": self.relay,
            "workflow_id": self.workflow_id,
            "status": self.status,
            "dbos_status": self.dbos_status,
            "recovery_attempts": self.recovery_attempts,
            "release": self.release,
            "app_version": self.app_version,
            "created_at": self.created_at,
            "deadline_ms": self.deadline_ms,
            "max_attempts": self.max_attempts,
            "fork": self.fork,
            "input": self.input,
            "error": self.error,
            "folder": self.folder,
            "live": self.live,
            "waiting": self.waiting,
            "outside_workflows": [w.to_dict() for w in self.outside],
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """One process of the run: how it ended and which checkpoints it wrote and reused."""

    attempt: int
    #: ``running`` while it has not ended
    status: str
    started_at: float | None
    ended_at: float | None
    duration_ms: float | None
    returncode: int | None
    crash: InjectedCrash | None
    executed: tuple[int, ...]
    reused: tuple[int, ...]
    executor_id: str | None
    lost: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_ms": self.duration_ms,
            "returncode": self.returncode,
            "crash": self.crash,
            "executed": list(self.executed),
            "reused": list(self.reused),
            "executor_id": self.executor_id,
            "lost": self.lost,
        }


@dataclass(frozen=True, slots=True)
class StepRetry:
    """A failed try of a step that DBOS retried (the ledger's ``step_error``)."""

    attempt: int | None
    step_attempt: int | None
    error_type: str | None
    error: str | Mapping[str, object] | None
    duration_ms: float | None
    ts: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "step_attempt": self.step_attempt,
            "error_type": self.error_type,
            "error": self.error,
            "duration_ms": self.duration_ms,
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class StepCall:
    """One step call of a workflow: DBOS's checkpoint row joined with the attempts that ran
    or reused it. Fields in the order of its JSON."""

    function_id: int
    name: str
    #: ``checkpointed``, ``error``, ``running``, ``interrupted`` (``waiting``: ``blocked_steps``)
    status: str
    started_at_ms: float | None
    completed_at_ms: float | None
    duration_ms: float | None
    child_workflow_id: str | None
    #: the attempts in which its body ran
    executed_in: tuple[int, ...]
    #: the attempts that took its result from the checkpoint
    reused_in: tuple[int, ...]
    retries: tuple[StepRetry, ...]
    workflow_id: str
    #: ``step``, ``workflow`` (a child started), ``agent``, ``mcp`` or ``dbos``
    kind: str
    #: the how-manieth call of its step in its workflow
    occurrence: int | None
    output_preview: str | None
    error_preview: str | None
    #: the keys of the platform calls it made
    receipts: tuple[str, ...]
    #: a fork's checkpoint: the run it was copied from
    copied_from: str | None
    edited: bool | None
    #: the topic a ``DBOS.recv`` still waiting waits on (``blocked_steps``)
    topic: str | None = None

    @property
    def label(self) -> str:
        """``fetch#2``: how a call is named to crash, fork or compare it."""
        return f"{self.name}#{self.occurrence}"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "function_id": self.function_id,
            "name": self.name,
            "status": self.status,
            "started_at_ms": self.started_at_ms,
            "completed_at_ms": self.completed_at_ms,
            "duration_ms": self.duration_ms,
            "child_workflow_id": self.child_workflow_id,
            "executed_in": list(self.executed_in),
            "reused_in": list(self.reused_in),
            "retries": [r.to_dict() for r in self.retries],
            "workflow_id": self.workflow_id,
            "kind": self.kind,
            "occurrence": self.occurrence,
            "output_preview": self.output_preview,
            "error_preview": self.error_preview,
            "receipts": list(self.receipts),
            "copied_from": self.copied_from,
            "edited": self.edited,
        }
        if self.topic is not None:
            out["topic"] = self.topic
        return out


@dataclass(frozen=True, slots=True)
class ChildWorkflow:
    """A child workflow of the run (DBOS's status, the parent's call that started it)."""

    workflow_id: str
    name: str
    status: str
    parent_workflow_id: str | None
    parent_function_id: int | None
    steps: tuple[StepCall, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "name": self.name,
            "status": self.status,
            "parent_workflow_id": self.parent_workflow_id,
            "parent_function_id": self.parent_function_id,
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True, slots=True)
class Receipt:
    """One platform call of the run (agent, MCP, legacy ``ctx.step``, journaled tool).

    ``receipted`` says the ledger holds the call's ``receipt`` event: its model, turns, tool
    calls, duration, call folder and error come from it (only ``model`` from the journal else).
    """

    key: str | None
    workflow_id: str | None
    step_id: int | None
    call: int | None
    kind: str | None
    name: str | None
    #: the journal's state: ``done``, ``failed``, ``pending``...
    state: str
    blocking: bool
    attempt: int | None
    replay_safe: bool
    reused_in: tuple[int, ...]
    result_preview: str | None
    receipted: bool = False
    model: str | None = None
    turns: int | None = None
    tool_calls: Sequence[Mapping[str, object]] | None = None
    duration_ms: float | None = None
    call_dir: str | None = None
    error: str | Mapping[str, object] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, object] = {
            "key": self.key,
            "workflow_id": self.workflow_id,
            "step_id": self.step_id,
            "call": self.call,
            "kind": self.kind,
            "name": self.name,
            "state": self.state,
            "blocking": self.blocking,
            "attempt": self.attempt,
            "replay_safe": self.replay_safe,
            "reused_in": list(self.reused_in),
            "result_preview": self.result_preview,
        }
        if self.receipted:
            out |= {
                "model": self.model,
                "turns": self.turns,
                "tool_calls": self.tool_calls,
                "duration_ms": self.duration_ms,
                "call_dir": self.call_dir,
                "error": self.error,
            }
        elif self.model is not None:
            out["model"] = self.model
        return out


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the child recorded as a call's body started: its ``site`` in the relay's source
    (the lines from ``run`` through inlined helpers) and its ``input_preview``."""

    site: tuple[int, ...] | None = None
    input_preview: str | None = None
