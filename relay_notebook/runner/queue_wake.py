"""When a worker polls the queue: at DBOS's interval, and at once when a run is queued or a
slot frees.

Design note: a DBOS 3.4 queue is polled; between polls its worker loop waits on an event
(``stop_event.wait(interval)``). With the kit's 0.5 s interval a queued run waited up to
0.5 s for its first poll, and a worker whose run had ended kept the slot empty until the next
poll: one worker's throughput was the poll's (about 2.5 short runs a second, as bare DBOS's),
however cheap an attempt was. Polling faster costs every idle worker: each poll is three
statements, about 4.5 ms of the worker's and the server's CPU (measured: 42 ms of CPU a
second idle at 0.5 s, 78 ms at 0.1 s).

So the worker runs DBOS's own loop for its queue (``dbos_private.serve_queue``: DBOS's polls,
claims and dispatch, unchanged) in a thread of its own, waiting between polls on a
``PollWhen`` instead of a plain event. It ends a wait early, unset, when the worker has room
(``dbos_private.queue_running`` below the queue's per-worker concurrency) and either

- a run was queued: whoever queues one (``pool.enqueue_run``) sends a PostgreSQL
  notification on ``CHANNEL`` after DBOS's enqueue committed, on the client's pooled
  session, and each worker ``listen``\\s on a session of its own; or
- one of its runs ended (the invocation workflow's last act, ``Worker.run_ended``): its slot
  is free once DBOS has recorded the invocation's outcome, which the room check waits for.

Otherwise it waits the interval, as DBOS would: a run put back on the queue by recovery, or
queued when a worker's listening session is down, is taken at the next regular poll.
Nothing here decides *what* is dequeued; a missed wake costs only latency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from relay_notebook.runner.backend import Backend, connect

__all__ = ["CHANNEL", "ROOM_CHECK_S", "PollWhen", "listen"]

#: the PostgreSQL notification channel on which a queued run wakes the workers
CHANNEL = "relay_runs_queued"
#: how often a wait woken for a run looks again for a free slot
ROOM_CHECK_S = 0.003


class PollWhen:
    """The event DBOS's queue loop waits on between polls, and is stopped by (``set``).

    ``soon()`` ends the current wait early, without setting the event, once ``room()`` says
    the worker can take a run; a wait that reaches its timeout forgets the wish (the regular
    poll follows anyway)."""

    def __init__(self, room: Callable[[], bool]) -> None:
        self._room = room
        self._cond = threading.Condition()
        self._stopped = False
        self._wanted = False

    def is_set(self) -> bool:
        return self._stopped

    def set(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def soon(self) -> None:
        """Poll as soon as there is room: a run was queued, or one of this worker's ended."""
        with self._cond:
            self._wanted = True
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """``True`` when stopped; ``False`` when the interval ran out or a wish came true."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._stopped:
                if self._wanted and self._room():
                    self._wanted = False
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._wanted = False
                    return False
                if self._wanted:  # no room yet: DBOS is recording a run's outcome
                    left = ROOM_CHECK_S if left is None else min(left, ROOM_CHECK_S)
                self._cond.wait(left)
            return True


def listen(
    backend: Backend, wake: PollWhen, log: Callable[[str], None], listening: threading.Event
) -> None:
    """Wake ``wake`` for each notification on ``CHANNEL``, on a session of its own, until the
    process ends (``listening`` is set once it listens); a lost session is opened again
    (meanwhile the regular polls take runs)."""
    said = False
    while not wake.is_set():
        try:
            with connect(backend, keepalive=True) as conn:
                conn.execute(f"LISTEN {CHANNEL}")
                listening.set()
                if said:
                    log("worker: woken by queued runs again")
                said = False
                for _ in conn.notifies():
                    wake.soon()
        except Exception as exc:  # psycopg's, or RelayError: the server went away
            if not said:
                log(f"worker: not woken by queued runs until PostgreSQL answers again ({exc})")
                said = True
        time.sleep(1.0)
