"""Child side of waiting runs: a run blocked in ``DBOS.recv`` or ``DBOS.sleep`` leaves its process.

Design note: DBOS records a wait durably before it blocks — a sleep's wake time, a recv's
timeout as a sleep row one function id after the recv's own — so a process that stops while
it waits loses nothing: the next attempt replays to the wait and waits only for what is left
(a message that arrived meanwhile is consumed at once). The child therefore wraps
``DBOS.recv[_async]`` and ``DBOS.sleep[_async]``: each wait registers itself, and a watch
thread ends the attempt with the outcome ``waiting`` (what it waits for, until when) once a
wait has blocked longer than the grace (the spec's ``wait_grace_s``: the workspace's setting,
``RELAY_WAIT_GRACE``, 3 seconds by default) while no
step runs. The watch and the wrappers share one lock, so a wait that returns, or a step that
starts, while the watch decides cannot slip past it: the process leaves before either goes
on. A message already waiting for the recv keeps the attempt going (the recv is about to
return). The supervisor checks again after the attempt ends, for a message that arrived while
the process left.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relay_notebook.record.ledger import now_ms
from relay_notebook.record.run_record import WaitState
from relay_notebook.runner.dbos_private import message_pending

__all__ = ["WaitWatch"]

_TICK_S = 0.05


@dataclass
class _Wait:
    kind: str  # "message" | "sleep"
    workflow_id: str
    topic: str | None
    started: float


class WaitWatch:
    """Registers the waits of one attempt and leaves the process when one has blocked too long.

    ``leave(outcome)`` records the outcome and exits (``runner.leave``); ``timer(workflow_id)``
    reads the newest durable timer DBOS recorded for the workflow, as ``(function_id,
    end_ms)``; ``pending(workflow_id, topic)`` says whether a message waits to be consumed.
    """

    def __init__(
        self,
        leave: Callable[[dict[str, Any]], None],
        *,
        grace_s: float,
        timer: Callable[[str], tuple[int, float] | None] | None = None,
        pending: Callable[[str, str | None], bool] | None = None,
    ) -> None:
        self._leave = leave
        self.grace_s = grace_s
        self._timer = timer or _dbos_timer
        self._pending = pending or message_pending
        self._lock = threading.Lock()
        self._waits: dict[int, _Wait] = {}
        self._tokens = iter(range(1, 1 << 62))
        self._steps = 0
        self._thread: threading.Thread | None = None

    # -- what the wrappers call ---------------------------------------------------------------

    def enter(self, kind: str, workflow_id: str, topic: str | None) -> int:
        with self._lock:
            token = next(self._tokens)
            self._waits[token] = _Wait(kind, workflow_id, topic, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="relay-waits", daemon=True)
                self._thread.start()
        return token

    def exit(self, token: int) -> None:
        with self._lock:  # blocks while the watch is leaving: the wait's caller never goes on
            self._waits.pop(token, None)

    @contextlib.contextmanager
    def step(self) -> Any:
        """Around every step call: no attempt leaves while a step body may be running."""
        self.step_started()
        try:
            yield
        finally:
            self.step_ended()

    def step_started(self) -> None:
        """A step call starts (``step`` in two calls, for the path of every step): from here
        until ``step_ended`` no attempt leaves."""
        with self._lock:
            self._steps += 1

    def step_ended(self) -> None:
        with self._lock:
            self._steps -= 1

    # -- the watch ----------------------------------------------------------------------------

    def _watch(self) -> None:
        while True:
            time.sleep(_TICK_S)
            with self._lock:
                outcome = self._decide()
                if outcome is not None:
                    self._leave(outcome)  # exits the process; the lock is never released

    def _decide(self) -> dict[str, Any] | None:
        """Under the lock: the ``waiting`` outcome if every wait has blocked past the grace."""
        if not self._waits or self._steps:
            return None
        now = time.monotonic()
        if any(now - w.started < self.grace_s for w in self._waits.values()):
            return None
        wait = max(self._waits.values(), key=lambda w: w.started)
        try:
            if wait.kind == "message" and self._pending(wait.workflow_id, wait.topic):
                return None  # the recv is about to consume it
            timer = self._timer(wait.workflow_id)
        except Exception:
            return None  # the store is busy: look again on the next tick
        function_id, until = timer if timer is not None else (None, None)
        if wait.kind == "message" and function_id is not None:
            function_id -= 1  # the recv's own id: its timeout sleep takes the next one
        state = WaitState(
            kind=wait.kind,
            workflow_id=wait.workflow_id,
            since_ms=now_ms(),
            topic=wait.topic,
            until_ms=until,
        )
        return {"status": "waiting", "waiting": {**state.to_json(), "function_id": function_id}}

    # -- the wrappers -------------------------------------------------------------------------

    def install(self) -> None:
        """Replace DBOS's waits and step runners with versions that register here."""
        from dbos import DBOS

        watch = self

        def workflow_id() -> str:
            return str(DBOS.workflow_id or "")

        recv, recv_async = DBOS.recv, DBOS.recv_async
        sleep, sleep_async = DBOS.sleep, DBOS.sleep_async
        run_step, run_step_async = DBOS.run_step, DBOS.run_step_async

        @functools.wraps(recv)
        def recv_wrapped(topic: str | None = None, timeout_seconds: float = 60) -> Any:
            token = watch.enter("message", workflow_id(), topic)
            try:
                return recv(topic, timeout_seconds)
            finally:
                watch.exit(token)

        @functools.wraps(recv_async)
        async def recv_async_wrapped(topic: str | None = None, timeout_seconds: float = 60) -> Any:
            token = watch.enter("message", workflow_id(), topic)
            try:
                return await recv_async(topic, timeout_seconds)
            finally:
                watch.exit(token)

        @functools.wraps(sleep)
        def sleep_wrapped(seconds: float) -> None:
            if seconds <= watch.grace_s:
                return sleep(seconds)
            token = watch.enter("sleep", workflow_id(), None)
            try:
                return sleep(seconds)
            finally:
                watch.exit(token)

        @functools.wraps(sleep_async)
        async def sleep_async_wrapped(seconds: float) -> None:
            if seconds <= watch.grace_s:
                return await sleep_async(seconds)
            token = watch.enter("sleep", workflow_id(), None)
            try:
                return await sleep_async(seconds)
            finally:
                watch.exit(token)

        @functools.wraps(run_step)  # type: ignore[arg-type]
        def run_step_wrapped(*args: Any, **kwargs: Any) -> Any:
            with watch.step():
                return run_step(*args, **kwargs)

        @functools.wraps(run_step_async)  # type: ignore[arg-type]
        async def run_step_async_wrapped(*args: Any, **kwargs: Any) -> Any:
            with watch.step():
                return await run_step_async(*args, **kwargs)

        for name, fn in (
            ("recv", recv_wrapped),
            ("recv_async", recv_async_wrapped),
            ("sleep", sleep_wrapped),
            ("sleep_async", sleep_async_wrapped),
            ("run_step", run_step_wrapped),
            ("run_step_async", run_step_async_wrapped),
        ):
            setattr(DBOS, name, staticmethod(fn))


def _dbos_timer(workflow_id: str) -> tuple[int, float] | None:
    """The newest ``DBOS.sleep`` row of the workflow: its function id and wake time (ms)."""
    from dbos import DBOS

    timers = [
        s
        for s in DBOS.list_workflow_steps(workflow_id)
        if s["function_name"] == "DBOS.sleep" and isinstance(s["output"], int | float)
    ]
    if not timers:
        return None
    last = max(timers, key=lambda s: int(s["function_id"]))
    return int(last["function_id"]), float(last["output"] or 0) * 1000
