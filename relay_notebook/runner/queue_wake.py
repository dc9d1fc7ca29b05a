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

Woken polls are at least ``WOKEN_GAP_S`` apart: anyone who can reach the database may send
the notification (a relay's own code among them), and a flood of it must not turn into a poll
per notification. A burst of queued runs needs no more: one poll claims as many as there is
room for.

Otherwise it waits the interval, as DBOS would: a run put back on the queue by recovery, or
queued when a worker's listening session is down, is taken at the next regular poll.
Nothing here decides *what* is dequeued; a missed wake costs only latency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from relay_notebook.runner.backend import Backend, connect

__all__ = ["CHANNEL", "ROOM_CHECK_S", "WOKEN_GAP_S", "PollWhen", "listen"]

#: the PostgreSQL notification channel on which a queued run wakes the workers
CHANNEL = "relay_runs_queued"
#: how often a wait woken for a run looks again for a free slot
ROOM_CHECK_S = 0.003
#: the least time between the end of one wait and a wish ending the next (at most 50 woken
#: polls a second, whatever is sent on the channel)
WOKEN_GAP_S = 0.02


class PollWhen:
    """The event DBOS's queue loop waits on between polls, and is stopped by (``set``).

    ``soon()`` ends the current wait early, without setting the event, once ``room()`` says
    the worker can take a run; a wait that reaches its timeout forgets the wish (the regular
    poll follows anyway)."""

    def __init__(self, room: Callable[[], bool], gap_s: float = WOKEN_GAP_S) -> None:
        self._room = room
        self._gap_s = gap_s
        self._cond = threading.Condition()
        self._stopped = False
        self._wanted = False
        self._polled_at = float("-inf")  # when the last wait ended (a poll followed)

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
        earliest = self._polled_at + self._gap_s  # for a wish to end this wait
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                if self._wanted and now >= earliest and self._room():
                    return self._polls(now)
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    return self._polls(now)
                if self._wanted:  # too soon, or no room yet (DBOS records a run's outcome)
                    step = max(earliest - now, ROOM_CHECK_S)
                    left = step if left is None else min(left, step)
                self._cond.wait(left)
            return True

    def _polls(self, now: float) -> bool:
        """End the wait (DBOS polls next): the wish, if any, is answered by that poll."""
        self._wanted = False
        self._polled_at = now
        return False


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
            if not said:  # one line, password-free, as every driver error the kit shows
                why = backend.sentence(str(exc)).strip()
                log(f"worker: not woken by queued runs until PostgreSQL answers again: {why}")
                said = True
        time.sleep(1.0)
