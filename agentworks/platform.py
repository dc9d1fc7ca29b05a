"""Platform calls (agent, MCP): authorized, serialized, journaled, and run inside a step.

Design note: a platform call made in a step's body runs there; one made in the workflow body
becomes a step of its own (``DBOS.run_step_async``) named ``agent:NAME`` or
``mcp:SERVER.TOOL``, so its result is checkpointed like any step; its body runs inside the
runtime's ``step_body``, the wrapper of native step bodies, so it records the same step events
(``step_start``, then ``step_end`` or ``step_error``). Either way the call goes
through the journal (see ``agentworks.journal``): a saved result is returned without calling
again, an uncertain one stops the attempt for reconciliation unless ``replay_safe``. Calls are
serialized with one lock per run, even under ``asyncio.gather``, so receipts have one order.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from agentworks import _runtime, codes
from agentworks._runtime import Runtime, StepCall, current
from agentworks._sites import call_site, made_at
from agentworks.errors import AgentworksError, NestedCallError, SecretLeakError
from agentworks.journal import Journal

__all__ = ["begin_step_body", "in_tool", "platform_call", "platform_entry"]

F = TypeVar("F", bound=Callable[..., Any])

_step_calls: contextvars.ContextVar[itertools.count[int] | None] = contextvars.ContextVar(
    "agentworks_step_calls", default=None
)
in_tool: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentworks_in_tool", default=None
)
_call_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentworks_call_key", default=None
)
_locks: dict[int, asyncio.Lock] = {}
_occurrences: dict[str, int] = {}


def _relay_file() -> str | None:
    rt = _runtime._current
    return None if rt is None else rt.relay_file


def platform_entry(func: F) -> F:
    """A public async function making a platform call (``agent``, ``mcp``): its calls know
    their call site when run as tasks too (``agentworks._sites``). Typed as ``func`` is."""
    return cast(F, made_at(func, _relay_file))


def begin_step_body() -> None:
    """Called when a step body starts: its platform calls are numbered from 1 again."""
    _step_calls.set(itertools.count(1))


def current_call_key() -> str:
    """The journal key of the platform call being performed (for its tool journal)."""
    key = _call_key.get()
    if key is None:
        raise AgentworksError("no platform call is in progress")
    return key


def _lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _locks.get(id(loop))
    if lock is None:
        lock = _locks[id(loop)] = asyncio.Lock()
    return lock


def journal_of(rt: Runtime) -> Journal:
    return Journal(rt.folder / ".relay_ipc" / "journal.jsonl")


async def platform_call(
    kind: str,
    name: str,
    call: dict[str, Any],
    perform: Callable[[], Awaitable[Any]],
    *,
    replay_safe: bool,
    restartable: bool = False,
) -> Any:
    """Run ``perform`` as a journaled platform call; see the module's design note.

    ``restartable`` calls (agents with ``recovery="restart"``) run again after an interruption
    instead of stopping for reconciliation: their own tool journal keeps them honest.
    """
    replay_safe = replay_safe or restartable
    from dbos import DBOS
    from dbos import error as dbos_error

    rt = current(f"{kind}()")
    inside = in_tool.get()
    if inside is not None:
        raise NestedCallError(
            f"{kind}({name!r}) was called from inside the tool {inside!r}; tools cannot make "
            f"agent or MCP calls. Call it from run() or a step, or attach the MCP tool to the "
            f"agent with mcp=[...]."
        )
    label = f"{kind}:{name}"
    occurrence = _occurrences[label] = _occurrences.get(label, 0) + 1
    if not rt.durable:
        async with _lock():
            rt.authorize(f"{kind} {name}")
            result = await perform()
            rt.crash_point(label, occurrence, "during")
        rt.crash_point(label, occurrence, "after")
        return result
    if DBOS.step_id is not None:
        result = await _guarded(rt, kind, name, call, perform, replay_safe, occurrence)
        rt.crash_point(label, occurrence, "after")  # result journaled (inside a user step)
        return result
    if DBOS.workflow_id is None:
        raise AgentworksError(
            f"{kind}({name!r}) must be called from the workflow or one of its steps, not at "
            f"import time."
        )

    site = call_site(rt.relay_file)
    ran = False

    async def own_step() -> Any:
        nonlocal ran
        ran = True
        begin_step_body()
        with rt.step_body(StepCall(label, occurrence, site)):
            return await _guarded(rt, kind, name, call, perform, replay_safe, occurrence)

    def reused(**raised: str) -> None:
        # the fields of a native step's step_reused (runner.instrument), ``raised`` included
        rt.emit(
            "step_reused",
            step=label,
            occurrence=occurrence,
            site=site,
            workflow_id=DBOS.workflow_id,
            **raised,
        )

    try:
        result = await DBOS.run_step_async({"name": label}, own_step)
    except Exception as exc:
        if not ran and not isinstance(exc, dbos_error.DBOSException):
            reused(raised=type(exc).__name__)  # its checkpoint is this error, raised again
        raise
    if not ran:
        reused()
    rt.crash_point(label, occurrence, "after")  # the call's own step is checkpointed
    return result


async def _guarded(
    rt: Runtime,
    kind: str,
    name: str,
    call: dict[str, Any],
    perform: Callable[[], Awaitable[Any]],
    replay_safe: bool,
    occurrence: int,
) -> Any:
    from dbos import DBOS

    counter = _step_calls.get()
    if counter is None:
        counter = itertools.count(1)
        _step_calls.set(counter)
    key = f"{DBOS.workflow_id}/{DBOS.step_id}/{next(counter)}"
    journal = journal_of(rt)
    async with _lock():
        rt.authorize(f"{kind} {name}")
        state = journal.state(key)
        if state.state == "done":
            rt.emit("call_reused", key=key, call_kind=kind, name=name, step_id=DBOS.step_id)
            return state.result
        if state.state == "pending" and not replay_safe:
            rt.stop(
                "needs_reconciliation",
                codes.NEEDS_RECONCILIATION.record(
                    f"Run {rt.run_id} stopped: {kind} {name!r} (key {key}) "
                    f"was interrupted in attempt {state.attempt} before its result was saved, "
                    f"so it may or may not have had its effect. Establish what happened, then "
                    f"run 'relay reconcile {rt.run_id} --result JSON' (the call's result) or "
                    f"'relay reconcile {rt.run_id} --retry' (safe to call again), and recover.",
                    call={"key": key, "kind": kind, "name": name, **call},
                ),
            )
        safe_call = _safe(rt, call)
        intent = {"kind": kind, "name": name, **safe_call, "replay_safe": replay_safe}
        journal.intent(key, intent, rt.attempt)
        token = _call_key.set(key)
        try:
            result = await perform()
        except Exception as exc:
            journal.error(key, rt.redactor.scrub(f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            _call_key.reset(token)
        rt.crash_point(f"{kind}:{name}", occurrence, "during")  # effect done, result unsaved
        leaked = rt.redactor.find(result)
        if leaked:
            journal.error(key, "result withheld: it contained a vault value")
            raise SecretLeakError(
                f"The {kind} call {name!r} returned the value of vault secret {leaked}; it "
                f"will not be saved. Keep secrets out of what agents and tools return."
            )
        journal.result(key, result)
        return result


def _safe(rt: Runtime, call: dict[str, Any]) -> dict[str, Any]:
    """The call's description with any secret value replaced (journals are persisted)."""
    import json

    text = json.dumps(call, default=repr, sort_keys=True)
    out: dict[str, Any] = json.loads(rt.redactor.scrub(text))
    return out
