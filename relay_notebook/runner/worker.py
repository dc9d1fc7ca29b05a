"""A worker: a long-running process that executes queued runs, one supervised child each.

Design note: DBOS is the engine; the kit adds a lease and a wake. A worker is a DBOS
application (``relay-worker``, with its own executor id) whose one workflow, the *invocation*,
is taken from the DBOS queue ``relay-runs`` under the queue's per-worker concurrency, by
DBOS's own queue loop, which the worker runs on an event it wakes when a run is queued or one
of its runs ended (``runner.queue_wake``). An invocation
runs the run's attempts as DBOS steps; each step is what ``relay recover`` does on one
machine (lock, checks, one child process), so bindings, the attempt budget, the deadline and
the single-executor lock hold exactly as there. A crashed attempt is recovered by the next
step, up to the budget.

DBOS leaves a dead executor's workflows ``PENDING`` (without Conductor, nothing notices).
So each worker heartbeats a lease row in PostgreSQL and, on the same beat, looks for
``PENDING`` invocations whose executor holds no live lease; it hands them back to the queue
with DBOS's own recovery (``runner.dbos_private``: idempotent, it re-enqueues only rows still
``PENDING`` for the dead executor). Any worker then takes them; the invocation's
finished steps are reused, and its interrupted attempt is settled as lost and recovered.
A worker's children watch a lifeline pipe and exit with it, so a killed worker leaves no
attempt running; were one still running, the run lock keeps a second executor out until it
ends.

DBOS 3.4 keeps a queue's settings in the database, ``worker_concurrency`` among them: one value
for every worker of the queue, and the worker that registers last sets it. So ``--concurrency``
is the pool's, not one worker's: a worker that changes it says which live workers it changed,
and each worker reads it on its beat, says when another changed it, and keeps its lease's
``concurrency`` (what ``relay workers`` shows) the value its queue thread obeys.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbos import DBOS
from dbos import error as dbos_error

from relay_notebook.errors import (
    DiskFullError,
    InvalidRunIdError,
    RelayError,
    RunLockedError,
    RunNotFoundError,
    RunRejectedError,
)
from relay_notebook.record import dbos_tables
from relay_notebook.record.folders import find_run
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import KIT_SCHEMA, Backend, connect, prepare_database
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.dbos_private import (
    queue_running,
    recover_pending_workflows,
    serve_queue,
)
from relay_notebook.runner.pool import (
    INVOCATION,
    QUEUE,
    WORKER_APP,
    WORKER_VERSION,
    enqueue_run,
    resume_invocation_id,
)
from relay_notebook.runner.queue_wake import PollWhen, listen
from relay_notebook.runner.runs import MAX_ATTEMPTS, advance_run, record_refusal
from relay_notebook.runner.wake import WaitingScan, due_runs
from relay_notebook.runner.warm import WarmParent, restart_warm_parent
from relay_notebook.runner.warm_launch import rehearse_on
from relay_notebook.workspace import Workspace

__all__ = ["Worker", "WorkerSettings", "default_executor_id"]

FORGET_AFTER_S = 3600
_worker: Worker | None = None  # the one worker of this process (DBOS is process-global)


def default_executor_id() -> str:
    """``HOST-PID``: distinct for every worker process, readable in ``relay workers``."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker runs: its executor id, concurrency, lease and queue poll interval."""

    executor_id: str
    concurrency: int = 2
    lease_s: float = 15.0
    poll_s: float = 0.5


# -- the invocation workflow (the same in every worker) ------------------------------------------


@DBOS.step(name="attempt")
def _attempt_step(request: dict[str, Any]) -> dict[str, Any]:
    assert _worker is not None
    return _worker.attend(request)


@DBOS.workflow(name=INVOCATION, max_recovery_attempts=1000)
def _invocation(request: dict[str, Any]) -> dict[str, Any]:
    outcome: dict[str, Any] = {}
    for _ in range(MAX_ATTEMPTS + 1):  # the run's budget ends the loop first
        outcome = _attempt_step(request)
        if outcome.get("status") != "interrupted":
            break
    assert _worker is not None
    _worker.run_ended()  # not durable, and harmless when replayed: a poll once the slot frees
    return outcome


class Worker:
    """``start`` launches DBOS and the lease; ``serve`` blocks until ``stop`` or a signal."""

    def __init__(
        self,
        workspace: Workspace,
        backend: Backend,
        settings: WorkerSettings,
        log: Callable[[str], None] = print,
    ) -> None:
        if not backend.is_postgres:
            raise ValueError("a worker needs a PostgreSQL database")
        self.workspace = workspace
        self.backend = backend
        self.settings = settings
        self.log = log
        self._stop = threading.Event()
        self._lease_conn: Any = None
        self._scan = WaitingScan(workspace)
        self._queue: Any = None  # DBOS's handle on the queue, registered at start
        self._queue_loop: threading.Thread | None = None  # DBOS's loop for it, run here
        self._at_once = settings.concurrency  # the queue's worker_concurrency, as last read
        self._wake = PollWhen(lambda: queue_running(QUEUE) < self._at_once)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        global _worker
        if _worker is not None:
            raise RuntimeError("one worker per process")
        _worker = self
        prepare_database(self.backend, self.workspace.home)
        if self.workspace.warm_start:
            # a worker lives for many attempts: its warm parent imports while it starts up, and
            # rehearses DBOS on the database they all run on (runner.dbos_engines)
            rehearse_on(self.backend.url)
            parent = restart_warm_parent()
            threading.Thread(
                target=self._say_when_warm, args=(parent,), name="relay-warm-log", daemon=True
            ).start()
        self._lease_conn = connect(self.backend)
        self._renew_lease()
        DBOS(
            config={
                "name": WORKER_APP,
                "system_database_url": self.backend.dbos_url,
                "application_version": WORKER_VERSION,
                "executor_id": self.settings.executor_id,
                "log_level": "WARNING",
            }
        )
        # DBOS's own queue thread leaves relay-runs alone: this worker runs DBOS's loop for it
        # on an event it can wake (runner.queue_wake)
        DBOS.listen_queues([])
        DBOS.launch()
        before = DBOS.retrieve_queue(QUEUE)  # a database-backed queue: reads the row again
        was = before.worker_concurrency if before is not None else None
        self._register_queue()
        others = self._live_peers()
        if was is not None and was != self.settings.concurrency and others:
            self.log(
                f"worker {self.settings.executor_id}: concurrency {self.settings.concurrency} "
                f"now applies to {', '.join(others)} too (it was {was}): DBOS's queue keeps one "
                "setting for all its workers"
            )
        self._serve_queue()
        listening = threading.Event()
        threading.Thread(
            target=listen, args=(self.backend, self._wake, self.log, listening),
            name="relay-queued", daemon=True,
        ).start()  # fmt: skip
        listening.wait(10)  # from the "serving" line on, a queued run wakes this worker
        self._wake.soon()  # and the runs queued while no worker was up are taken now
        threading.Thread(target=self._beat, name="relay-lease", daemon=True).start()
        self.log(
            f"worker {self.settings.executor_id} serving {self.workspace.home} from "
            f"{self.backend.display} (concurrency {self.settings.concurrency}, lease "
            f"{self.settings.lease_s:g} s, poll {self.settings.poll_s:g} s)"
        )

    def _serve_queue(self) -> None:
        self._queue_loop = threading.Thread(
            target=serve_queue, args=(self._queue, self._wake), name="relay-queue", daemon=True
        )
        self._queue_loop.start()

    def _keep_serving_queue(self) -> None:
        """DBOS's queue loop ends when the queue's row is gone (``DBOS.delete_queue``): this
        worker registers the queue again and serves it, rather than take no more runs."""
        if self._queue_loop is None or self._queue_loop.is_alive() or self._stop.is_set():
            return
        self.log(f"worker {self.settings.executor_id}: queue {QUEUE} was deleted; registered again")
        self._register_queue()
        self._serve_queue()

    def _register_queue(self) -> None:
        """The queue's row with the concurrency this worker runs and its poll, the latest
        registration's for every worker (DBOS keeps one row per queue)."""
        self._queue = DBOS.register_queue(
            QUEUE,
            worker_concurrency=self._at_once,
            polling_interval_sec=self.settings.poll_s,
            on_conflict="always_update",
        )

    def _say_when_warm(self, parent: WarmParent) -> None:
        """One line once attempts fork (until then they are spawned), or why they will not."""
        me = self.settings.executor_id
        if not parent.wait_ready(600):
            self.log(f"worker {me}: its warm parent did not start; attempts are spawned")
        elif self.workspace.confine and not parent.can_confine():
            self.log(f"worker {me}: forked attempts cannot be confined here; they are spawned")
        else:
            self.log(
                f"worker {me}: attempts fork from warm parent {parent.pid} "
                f"(ready in {parent.ready_s or 0:.2f} s)"
            )

    def serve(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self._stop.set())
        self._stop.wait()
        self.stop()

    def stop(self) -> None:
        """Give the lease up at once, so other workers take over this worker's runs now.

        The process then ends without waiting: its attempts end with it (their lifelines
        close) and are recovered elsewhere from their checkpoints.
        """
        self._stop.set()
        self._wake.set()
        try:
            with connect(self.backend) as conn:
                conn.execute(
                    f"UPDATE {KIT_SCHEMA}.worker_leases SET expires_at = now() "
                    "WHERE executor_id = %s",
                    (self.settings.executor_id,),
                )
        finally:
            self.log(f"worker {self.settings.executor_id} stopped; its runs go to other workers")
            os._exit(0)

    # -- the lease -------------------------------------------------------------------------------

    def _renew_lease(self) -> None:
        self._lease_conn.execute(
            f"INSERT INTO {KIT_SCHEMA}.worker_leases "
            "(executor_id, host, pid, concurrency, expires_at) "
            "VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (executor_id) DO UPDATE SET heartbeat_at = now(), "
            "expires_at = EXCLUDED.expires_at, pid = EXCLUDED.pid, host = EXCLUDED.host, "
            "concurrency = EXCLUDED.concurrency",
            (
                self.settings.executor_id,
                socket.gethostname(),
                os.getpid(),
                self._at_once,
                self.settings.lease_s,
            ),
        )

    def _live_peers(self) -> list[str]:
        """The other workers whose lease is live (they share the queue's settings)."""
        rows = self._lease_conn.execute(
            f"SELECT executor_id FROM {KIT_SCHEMA}.worker_leases "
            "WHERE expires_at > now() AND executor_id <> %s ORDER BY executor_id",
            (self.settings.executor_id,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _follow_concurrency(self) -> None:
        """Read the queue's ``worker_concurrency`` (a worker started since may have changed
        it); say so when it did, so this worker's log and lease tell what it runs."""
        try:
            at_once = self._queue.worker_concurrency
        except dbos_error.DBOSException:  # its row is gone: _keep_serving_queue registers it
            return
        if at_once is not None and at_once != self._at_once:
            self.log(
                f"worker {self.settings.executor_id}: now runs {at_once} at once, the "
                f"concurrency a worker started since set for the pool (it ran {self._at_once})"
            )
            self._at_once = at_once

    def _dead_executors(self) -> list[str]:
        rows = self._lease_conn.execute(
            dbos_tables.PG_DEAD_EXECUTORS.format(leases=f"{KIT_SCHEMA}.worker_leases"),
            (WORKER_APP, self.settings.executor_id),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _forget_old_leases(self) -> None:
        """Drop leases that expired an hour ago: ``relay workers`` shows recent deaths only.

        Recovery does not need the row: it looks for executors *without* a live lease.
        """
        self._lease_conn.execute(
            f"DELETE FROM {KIT_SCHEMA}.worker_leases WHERE expires_at < now() - interval "
            f"'{FORGET_AFTER_S} seconds'"
        )

    def _beat(self) -> None:
        interval = max(self.settings.lease_s / 4, 0.1)
        while not self._stop.wait(interval):
            try:
                self._renew_lease()  # first: nothing else on the beat may hold it back
                self._keep_serving_queue()
                self._follow_concurrency()
                self._forget_old_leases()
                self._wake_due()
                dead = self._dead_executors()
                if dead:
                    handles = recover_pending_workflows(dead)
                    if handles:
                        self._wake.soon()
                        self.log(
                            f"worker {self.settings.executor_id}: lease of {', '.join(dead)} "
                            f"expired; {len(handles)} run(s) back on the queue"
                        )
            except Exception as exc:  # a database hiccup must not end the worker
                self.log(f"worker {self.settings.executor_id}: lease check failed: {exc}")
                try:
                    self._lease_conn.close()
                    self._lease_conn = connect(self.backend)
                except RelayError:
                    pass

    def _wake_due(self) -> None:
        """Put the workspace's due waiting runs on PostgreSQL back on the queue (once each)."""
        for run_id in due_runs(self.workspace, self.backend, self._scan):
            record = RunRecord.load(find_run(self.workspace, run_id))
            if record.database is None:
                continue  # a run in its own SQLite file: the kernel, the CLI or relay wake
            attempt = len(record.attempts) + 1
            enqueue_run(self.backend, run_id, workflow_id=resume_invocation_id(run_id, attempt))
            self.log(f"worker {self.settings.executor_id}: {run_id} is due; queued to resume")

    # -- one attempt ---------------------------------------------------------------------------

    def run_ended(self) -> None:
        """One of this worker's runs ended: take the next queued run as soon as DBOS has
        recorded this one's outcome, not at the next poll."""
        self._wake.soon()

    def attend(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run the next attempt of the request's run; its outcome as ``relay run --json``.

        DBOS saves what a step raises and replays it on recovery, so nothing transient may
        escape: a locked run, an unreachable database or a bug are retried (the run's
        deadline ends that), and only a refusal of the run itself is an outcome.
        """
        run_id = str(request["run_id"])
        crash = CrashSpec.from_dict(request["crash"]) if request.get("crash") else None
        me = self.settings.executor_id
        while True:
            if self._stop.is_set():
                threading.Event().wait()  # the process is leaving; never record a step
            try:
                handle = advance_run(
                    self.workspace,
                    run_id,
                    crash=crash,
                    backend=self.backend,
                    executor_id=me,
                    lifeline=True,
                )
                if not handle.done():
                    self.log(f"{me}: {run_id} attempt {handle.attempt} started")
                t0 = time.monotonic()
                outcome = handle.wait()
            except RunRejectedError as exc:
                self.log(f"{me}: {run_id} not started: {exc}")
                record_refusal(self.workspace, run_id, exc)
                return {
                    "run_id": run_id,
                    "status": "rejected",
                    "error": {"code": exc.code, "message": exc.message},
                }
            except DiskFullError as exc:  # the run is left interrupted, recoverable
                self.log(f"{me}: {run_id} stopped: {exc}")
                return {
                    "run_id": run_id,
                    "status": "interrupted",
                    "error": {"code": exc.code, "message": exc.message},
                }
            except (RunNotFoundError, InvalidRunIdError) as exc:
                self.log(f"{me}: {run_id} cannot be run here: {exc}")
                return {
                    "run_id": run_id,
                    "status": "failed",
                    "error": {"code": exc.code, "message": exc.message},
                }
            except RunLockedError:
                # an attempt from a worker thought dead still runs: wait for it to end
                self._stop.wait(1.0)
                continue
            except Exception as exc:  # transient (database, file system) or a bug: try again
                self.log(f"{me}: {run_id} will be retried: {type(exc).__name__}: {exc}")
                self._stop.wait(2.0)
                continue
            self.log(
                f"{me}: {run_id} attempt {outcome.attempt} {outcome.status} "
                f"({time.monotonic() - t0:.2f} s)"
            )
            return outcome.to_dict()
