"""The ledger's vocabulary: every kind of event the kit writes and the fields each carries.

Design note: one event is one line of ``dbos_events.jsonl`` (see ``record.ledger`` for the line
format). Each kind has a TypedDict here naming its fields and what they mean; ``Event`` is what a
reader holds, the header (``EventHeader``, always there) and any field of any kind (present or
not, depending on the kind). ``FIELDS``, derived from the per-kind TypedDicts, is the table the
one writer checks at run time, so an event with a field nobody documented is refused where it
is written, not found later by a reader. ``agentworks`` emits through a callback (it never
imports the kit); a test reads its emit calls and the runner's and checks them against this
vocabulary. A field keeps one meaning, and one type, in every kind that carries it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal, NotRequired, TypedDict, get_args

__all__ = [
    "EVENT_KINDS",
    "FIELDS",
    "AttemptEnd",
    "AttemptOutcome",
    "AttemptStart",
    "CallReused",
    "CheckpointsLostAccepted",
    "CrashInjected",
    "Event",
    "EventFields",
    "EventHeader",
    "EventKind",
    "Log",
    "ModelCall",
    "Receipt",
    "RecoveryHeld",
    "RecoveryRejected",
    "StepEnd",
    "StepError",
    "StepInfo",
    "StepReused",
    "StepStart",
    "ToolRecovered",
    "WorkflowError",
    "WorkflowStart",
    "unknown_fields",
]

EventKind = Literal[
    "attempt_end",
    "attempt_outcome",
    "attempt_start",
    "call_reused",
    "checkpoints_lost_accepted",
    "crash_injected",
    "log",
    "model_call",
    "receipt",
    "recovery_held",
    "recovery_rejected",
    "step_end",
    "step_error",
    "step_reused",
    "step_start",
    "tool_recovered",
    "workflow_error",
    "workflow_start",
]


class EventHeader(TypedDict):
    """The fields every ledger event starts with, in this order."""

    seq: int  # 1, 2, 3... across all attempts of the run
    ts: float  # wall-clock ms since the epoch when it was written
    run_id: str
    attempt: int  # the attempt it belongs to (a supervisor's events: the attempt it settles)
    #: one of ``EventKind`` for what this kit writes (a reader skips kinds it does not know)
    kind: str


# -- the attempt: written by the child (start, outcome, crash) and its supervisor (end) ---------


class AttemptStart(TypedDict):
    """The child started its attempt (just before ``DBOS.launch``)."""

    pid: int  # the child's process id
    prior_status: str | None  # the run's DBOS status before this attempt (None: a fresh run)
    t0: float  # ms since the epoch; a checkpoint completed after it was written by this attempt
    #: the run's new SQLite database was copied from the migrated DBOS template
    #: (``runner.dbos_template``); absent in ledgers written before it existed
    from_template: bool


class AttemptOutcome(TypedDict):
    """The child's own account of how its attempt ended, written just before it leaves."""

    status: str  # succeeded, failed, waiting, denied, needs_reconciliation...
    error: Mapping[str, object] | None  # the coded error record (code, message, ...)


class AttemptEnd(TypedDict):
    """The supervisor settled the attempt (its process exited or was lost)."""

    status: str  # the attempt's final status, as run.json records it
    returncode: int | None  # the process's exit status (None: its supervisor was lost)
    exit: str  # the exit described in words ("exit 0", "killed by SIGKILL", ...)
    executed: list[int]  # function ids of the root workflow's steps this attempt ran
    reused: list[int]  # function ids of steps whose checkpoints this attempt returned
    error_code: str | None  # the code of the attempt's error, if any


class CrashInjected(TypedDict):
    """A ``--crash`` point was reached: the child exits on purpose right after this line."""

    step: str  # the step (or platform call, ``agent:NAME``) named by ``--crash``
    occurrence: int  # which call of it (1 = the first)
    when: str  # ``during`` its body (no checkpoint) or ``after`` its checkpoint


# -- recovery decisions (written by ``recover`` next to a run, under its lock) ----------------


class CheckpointsLostAccepted(TypedDict):
    """Recovery went on although checkpoints the ledger records are missing (``--accept-lost``)."""

    where: str  # the database that lost them
    problem: str  # what is wrong with it, in words
    function_ids: list[int]  # the steps that will run again
    set_aside: str | None  # where an unreadable SQLite file was moved (None: nothing moved)


class RecoveryHeld(TypedDict):
    """A recovery did not start an attempt: the run is held with a status."""

    status: str  # the status it is held with (e.g. waiting, needs_reconciliation)
    error: Mapping[str, object] | None  # the coded reason


class RecoveryRejected(TypedDict):
    """A recovery was refused because the relay's bindings changed since the run started."""

    changed: list[str] | None  # the bindings that changed


# -- workflows and steps (written by the child's instrumentation) -----------------------------


class WorkflowStart(TypedDict):
    """A workflow's body started (the root workflow or a child workflow)."""

    workflow: str  # its name
    workflow_id: str | None  # its DBOS workflow_id


class WorkflowError(TypedDict):
    """A workflow's body raised."""

    workflow: str
    workflow_id: str | None
    error_type: str  # the exception's class name
    error: str  # its message (at most 2000 characters)
    traceback: str  # trimmed to the relay's own frames


class StepInfo(TypedDict):
    """What every event of one run of a step's body names: the step and where it is."""

    step: str  # the step's name (a platform call's own step: ``agent:NAME``, ``mcp:S.T``)
    occurrence: int | None  # which call of that step in the attempt (1 = the first)
    site: list[int] | None  # the call's line (and column) in the relay's source
    step_id: int | None  # its DBOS function id in the workflow
    workflow_id: str | None  # the workflow it belongs to
    step_attempt: int  # DBOS's retry attempt of the step (1 = the first)
    max_attempts: int | None  # the step's retry budget (None: no retries)


class StepStart(StepInfo):
    """A step's body started (once per DBOS retry)."""

    input_preview: NotRequired[str]  # its arguments, shortened (a native step's only)


class StepEnd(StepInfo):
    """A step's body returned; DBOS saves its checkpoint next."""

    duration_ms: float  # how long the body ran


class StepError(StepInfo):
    """A step's body raised (DBOS may retry it, or save the error as its checkpoint)."""

    duration_ms: float
    error_type: str  # the exception's class name
    error: str  # its message (at most 2000 characters)


class StepReused(TypedDict):
    """A step call returned its checkpoint from an earlier attempt without running its body."""

    step: str
    occurrence: int
    site: list[int] | None
    workflow_id: str | None
    raised: NotRequired[str]  # the checkpoint was an error: the class of the exception replayed


class Log(TypedDict):
    """A ``DBOS.logger`` record from workflow or step code (or any warning)."""

    level: str  # INFO, WARNING, ERROR...
    logger: str  # the logger's name
    message: str  # the formatted message (at most 4000 characters)
    workflow_id: str | None  # the workflow it was logged in, if any
    step_id: int | None  # the step it was logged in, if any
    step_attempt: int | None  # that step's retry attempt


# -- platform calls (written by agentworks through its runtime's ``emit``) --------------------


class CallReused(TypedDict):
    """A platform call returned the result the call journal saved instead of calling again."""

    key: str  # its journal key (``WORKFLOW/STEP/N``)
    call_kind: str  # agent or mcp
    name: str  # the agent's name, or ``SERVER.TOOL``
    step_id: int | None  # the step the call was made in


class Receipt(TypedDict):
    """An agent call ended (its full receipt is ``execution/call-N/receipt.json``)."""

    key: str | None  # its journal key (None: a run without a journal)
    call_kind: str
    name: str
    model: str | None  # the model the call resolved to
    turns: int  # the model's replies
    input_tokens: NotRequired[int | None]  # over its turns, as the provider reported them
    output_tokens: NotRequired[int | None]
    duration_ms: float
    tool_calls: Sequence[Mapping[str, object]]  # each tool call's tool, duration_ms and error
    call_dir: str  # the ``call-N`` folder of its artifacts
    error: str | None  # ``Type: message`` if the call failed


class ModelCall(TypedDict):
    """A model request or MCP call of an agent framework's DBOS integration ran (its step's
    body; its receipt is ``execution/call-N/receipt.json``, see ``agentworks.frameworks``)."""

    step: str  # the DBOS step name the framework gave it
    workflow_id: str | None
    step_id: int | None
    call_kind: str  # model or mcp
    framework: str  # pydantic_ai or openai_agents
    name: str  # the agent (Pydantic AI's step prefix), AGENT/MCP server, or the framework
    model: str | None  # the model that answered, as the framework reported it
    input_tokens: int | None  # tokens as the framework reported them (None: not reported)
    output_tokens: int | None
    tools: list[str]  # the tools offered to the model
    tool: str | None  # an MCP call's tool
    call_dir: str
    duration_ms: float
    error: str | None


class ToolRecovered(TypedDict):
    """An interrupted tool call of a restartable agent was settled by its ``recover=`` lookup."""

    agent: str
    tool: str
    key: str  # the tool call's journal key


class EventFields(TypedDict, total=False):
    """Every field any kind may carry, each with the one type it has in every kind."""

    pid: int
    prior_status: str | None
    t0: float
    from_template: bool
    status: str
    error: str | Mapping[str, object] | None
    returncode: int | None
    exit: str
    executed: list[int]
    reused: list[int]
    error_code: str | None
    step: str
    occurrence: int | None
    when: str
    where: str
    problem: str
    function_ids: list[int]
    set_aside: str | None
    changed: list[str] | None
    workflow: str
    workflow_id: str | None
    error_type: str
    traceback: str
    site: list[int] | None
    step_id: int | None
    step_attempt: int | None
    max_attempts: int | None
    input_preview: str
    duration_ms: float
    raised: str
    level: str
    logger: str
    message: str
    key: str | None
    call_kind: str
    name: str
    model: str | None
    turns: int
    tool_calls: Sequence[Mapping[str, object]]
    call_dir: str
    agent: str
    tool: str | None
    framework: str
    input_tokens: int | None
    output_tokens: int | None
    tools: list[str]


class Event(EventHeader, EventFields):
    """One decoded event: the header's keys, then the fields of its kind."""


_KINDS: Final[Mapping[EventKind, type]] = {
    "attempt_end": AttemptEnd,
    "attempt_outcome": AttemptOutcome,
    "attempt_start": AttemptStart,
    "call_reused": CallReused,
    "checkpoints_lost_accepted": CheckpointsLostAccepted,
    "crash_injected": CrashInjected,
    "log": Log,
    "model_call": ModelCall,
    "receipt": Receipt,
    "recovery_held": RecoveryHeld,
    "recovery_rejected": RecoveryRejected,
    "step_end": StepEnd,
    "step_error": StepError,
    "step_reused": StepReused,
    "step_start": StepStart,
    "tool_recovered": ToolRecovered,
    "workflow_error": WorkflowError,
    "workflow_start": WorkflowStart,
}

#: every kind the kit writes, in ``EventKind``'s order
EVENT_KINDS: Final[tuple[EventKind, ...]] = get_args(EventKind)
#: kind → the names of the fields an event of that kind may carry
FIELDS: Final[Mapping[str, frozenset[str]]] = {
    kind: frozenset(fields.__annotations__) for kind, fields in _KINDS.items()
}


def unknown_fields(kind: str, fields: Mapping[str, object]) -> str | None:
    """Why ``fields`` do not fit an event of ``kind`` (``None`` if they do)."""
    allowed = FIELDS.get(kind)
    if allowed is None:
        return f"{kind!r} is not a kind of ledger event; the kinds are {', '.join(EVENT_KINDS)}"
    if allowed.issuperset(fields):  # every event is checked: the quick test first
        return None
    unknown = fields.keys() - allowed
    if unknown:
        return (
            f"an event {kind!r} has no field {sorted(unknown)[0]!r}; its fields are "
            f"{', '.join(sorted(allowed))} (add a field to record.events first)"
        )
    return None
