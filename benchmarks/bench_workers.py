"""Benchmark: the worker pool and a long relay on PostgreSQL, beside bare DBOS, in one run.

Run ``python benchmarks/bench_workers.py [--quick] [--repeats N] [--runs M] [--steps N]
[--loop-samples N] [--fsync on|off]``. Everything runs on one private PostgreSQL server
(``relay_notebook.testing``; fsync on by default, as a production server runs). Two groups of
rows:

1. Throughput of many short relays: for 1, 2 and 4 ``relay worker`` processes (concurrency 2
   each) on a fresh database and workspace, once every worker printed its "serving" line, M
   one-step runs are queued at once with ``commands.enqueue`` and the clock runs from the first
   enqueue until ``QueuedRun.wait`` returned for the last. Every queued run is one supervised
   child process, so on a 2-core machine scaling beyond 2 workers is not expected; the rows
   report it. The reference row is bare DBOS: one worker process that registers a DBOS queue
   (``worker_concurrency`` 2, the kit worker's 0.5 s polling) and runs the same one-step
   workflow in-process, fed by one ``DBOSClient`` (made before the clock starts) and awaited
   with a 0.1 s result poll, as the kit's ``wait`` polls.
2. Steps per second of a loop of trivial async steps (1,000; 200 with ``--quick``): the kit's
   ``start_run`` on the PostgreSQL backend against a bare DBOS script that runs the same
   workflow on a fresh PostgreSQL database (pinned version, ``log_level`` WARNING,
   ``SetWorkflowID``, ``os._exit``). Both rates come from the ``tick`` checkpoints' own
   ``completed_at_epoch_ms`` (first to last), so process start-up counts for neither. Both
   loops run ``--loop-samples`` times a round (default 3), the order flipped each time: this
   row's target is within the machine's noise. The kit's loop runs once more a round with the
   sandbox off, printed beside as an info line. Each kit
   loop's attempt is forked from this process's warm parent, as a worker's are (its first
   attempt would otherwise be spawned, and a spawned attempt's sessions all go through pasta,
   the sandbox's network); a loop that was not is an error.

The warm pool (#17): the kit's rows fork every attempt from the worker's warm parent (the
burst starts once each worker said so); one more row runs the same burst on one worker with
warm start off (``RELAY_WARM_START=0``: every attempt spawned under bubblewrap, as before #17),
and rows 3 compare the two: throughput and CPU per queued run. The benchmark is the child
subreaper: bubblewrap's inner processes outlive its outer one, and without this a spawned
attempt's own CPU (its Python start and imports) went to init and was counted nowhere, which
is why the spawned pool's CPU per run once read lower than the warm pool's.

Which contestant goes first alternates between rounds. Beside the rows, per queued run: the
caller's enqueue call, the slot time (a worker's dequeue to the invocation's end) split into
its phases from DBOS's rows, ``run.json`` and the ledger, and the CPU time of every process
involved (caller, workers, runs, PostgreSQL; from ``/proc``) during the timed window. Each row
is judged with ``verdict``: a ratio row on its paired ratios (the kit's sample over the one
measured beside it), row 4 on its samples; ``yes`` or ``NO`` only when the 95% interval of
their median (with 5 rounds, their range: 94%) is all on one side of the target, else
``unsure``. Benchmarks report, they do not assert: the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from proc_stat import process_stats  # noqa: E402
from runner_sources import RELAYS  # noqa: E402
from verdict import Interval, judge, median_interval, too_few  # noqa: E402

from relay_notebook import commands  # noqa: E402
from relay_notebook.record.ledger import read_events  # noqa: E402
from relay_notebook.runner import RunOutcome, find_run, start_run  # noqa: E402
from relay_notebook.runner.backend import Backend, connect, resolve_backend  # noqa: E402
from relay_notebook.runner.warm import restart_warm_parent  # noqa: E402
from relay_notebook.runner.worker import WorkerSettings  # noqa: E402
from relay_notebook.testing import PostgresServer, postgres_server  # noqa: E402
from relay_notebook.workspace import Workspace  # noqa: E402

WORKER_COUNTS = (1, 2, 4)
# The DBOS queue settings the kit chooses (`relay worker`'s defaults), given to bare DBOS too
CONCURRENCY = WorkerSettings(executor_id="bench").concurrency  # runs at once per worker
POLL_S = WorkerSettings(executor_id="bench").poll_s  # the queue's polling interval
LEASE_S = WorkerSettings(executor_id="bench").lease_s  # the kit's default lease
STEPS_TARGET = 0.95  # kit steps/s >= 0.95x bare DBOS on PostgreSQL (issue #30; 0.9 before)
QUEUED_CPU_TARGET_MS = 150.0  # CPU of every process per queued run, one warm worker (#30)
WARM_RATE_TARGET = 2.0  # one warm worker's runs/s >= 2x one spawning worker's
WARM_CPU_TARGET = 0.35  # CPU per queued run, warm pool <= 0.35x the spawning pool's
BARE = "bare DBOS, 1 worker"
SPAWNED = "spawned"  # one kit worker with warm start off, as before #17
WARM_MARKER = "attempts fork from warm parent"  # a kit worker's line once it forks
BARE_QUEUE, BARE_APP, BARE_VERSION = "bench-queue", "bench-bare", "bench-v1"  # as in BARE_SCRIPT

BARE_SCRIPT = '''"""Bare DBOS on PostgreSQL: bare.py worker URL ID CONCURRENCY POLL | loop URL N."""
import asyncio
import os
import signal
import sys
import threading

from dbos import DBOS, SetWorkflowID

MODE, URL, ARG = sys.argv[1], sys.argv[2], sys.argv[3]


@DBOS.step()
async def step_a(x):
    return x + 1


@DBOS.step()
async def tick(i):
    return i


@DBOS.workflow(name="one")
async def one(INPUT):
    return {"value": await step_a(INPUT["x"])}


@DBOS.workflow(name="loop")
async def loop(INPUT):
    total = 0
    for i in range(INPUT["steps"]):
        total += await tick(i)
    return {"total": total}


def configure(name, executor_id):
    DBOS(config={
        "name": name,
        "system_database_url": URL,
        "application_version": "bench-v1",
        "executor_id": executor_id,
        "log_level": "WARNING",
    })


if MODE == "worker":
    configure("bench-bare", ARG)
    DBOS.listen_queues(["bench-queue"])
    DBOS.launch()
    DBOS.register_queue(
        "bench-queue", worker_concurrency=int(sys.argv[4]), polling_interval_sec=float(sys.argv[5])
    )
    print(f"bare worker {ARG} serving", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Event().wait()
else:
    async def main():
        configure("bench-bare-loop", "local")
        DBOS.launch()
        with SetWorkflowID("bench-1"):
            result = await loop({"steps": int(ARG)})
        assert result == {"total": sum(range(int(ARG)))}, result
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    asyncio.run(main())
'''

KIT_PHASES = (
    "dequeue to child spawned",
    "spawn to DBOS.launch",
    "launch to workflow",
    "workflow and result",
    "result to invocation end",
)


def _label(kind: str | int) -> str:
    if kind == "bare":
        return BARE
    if kind == SPAWNED:
        return "kit, 1 worker, spawned"
    return f"kit, {kind} worker{'s' if kind != 1 else ''}"


def become_subreaper() -> None:
    """Orphans of our descendants become our children, not init's (``PR_SET_CHILD_SUBREAPER``)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


# -- measurements --------------------------------------------------------------------------------


@dataclass
class Burst:
    """One throughput measurement: M queued runs drained by a pool."""

    wall: float  # first enqueue to last completion, seconds
    runs: int
    enqueue_ms: list[float]  # caller-side duration of each enqueue call
    pickup_ms: float  # the first run's wait on the queue (idle workers)
    slot_ms: list[float]  # per run: a worker's dequeue to the invocation's end
    cpu: float  # CPU seconds of every process involved during the timed window
    ready_s: float  # spawn of the workers to the last one's "serving" line
    phases: list[dict[str, float]] = field(default_factory=list)  # kit only, per run (ms)
    cpu_by: dict[str, float] = field(default_factory=dict)  # CPU seconds by kind of process
    forked: int = 0  # kit only: attempts forked from a warm parent (the rest were spawned)

    @property
    def rate(self) -> float:
        return self.runs / self.wall

    @classmethod
    def drained(
        cls,
        wall: float,
        enqueue_ms: list[float],
        rows: dict[str, tuple[float, float, float]],
        first: str,
        cpu: dict[str, float],
        ready_s: float,
    ) -> Burst:
        """The burst whose runs (one per enqueue, ``first`` enqueued first) left ``rows`` (see
        ``_invocations``) and took ``wall`` seconds and ``cpu`` seconds by kind of process."""
        return cls(
            wall,
            len(enqueue_ms),
            enqueue_ms,
            rows[first][1] - rows[first][0],
            [r[2] - r[1] for r in rows.values()],
            sum(cpu.values()),
            ready_s,
            cpu_by=cpu,
        )


CPU_KINDS = ("caller", "workers", "attempts", "PostgreSQL")


def _tree_cpu(workers: set[int], server: int) -> dict[str, float]:
    """CPU seconds of this process and all its descendants, living, ended or reaped by one of
    them, by kind: the caller (us), the worker processes, what they start (warm parents and
    attempts, forked or spawned; orphans handed to us count here) and the PostgreSQL server
    with its backends (the server is our child); not whatever else the machine runs."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for pid, fields in process_stats():
        parents[pid] = int(fields[1])
        used[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    me = os.getpid()
    mine = dict.fromkeys(CPU_KINDS, 0.0)
    for pid, ticks in used.items():
        top, ancestor = pid, pid
        while ancestor not in (me, 0, 1) and ancestor in parents:
            top, ancestor = ancestor, parents[ancestor]
        if pid == me:
            kind = "caller"
        elif ancestor != me:
            continue
        elif top == server:
            kind = "PostgreSQL"
        elif top in workers:
            kind = "workers" if pid == top else "attempts"
        else:
            kind = "attempts"  # an orphan handed to us (bubblewrap's inner processes)
        mine[kind] += ticks / os.sysconf("SC_CLK_TCK")
    return mine


def _reap_orphans(known: set[int]) -> None:
    """Reap our ended children that no ``Popen`` of ours waits for (orphans handed to us)."""
    me = os.getpid()
    for pid, fields in process_stats():
        if pid not in known and fields[0] == "Z" and int(fields[1]) == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


class Processes:
    """Long-running processes (workers) started by the benchmark; ``stop_all`` ends them."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(
        self, argv: list[str], name: str, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.logs / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.running.append((proc, log))
        return proc, log

    @property
    def pids(self) -> set[int]:
        return {proc.pid for proc, _ in self.running}

    def wait_ready(self, marker: str, timeout: float = 120, refusal: str | None = None) -> None:
        """Until every running process printed ``marker``; an error if one prints ``refusal``."""
        deadline = time.monotonic() + timeout
        waiting = list(self.running)
        while waiting:
            proc, log = waiting[0]
            text = log.read_text(encoding="utf-8", errors="replace")
            if refusal is not None and refusal in text:
                raise RuntimeError(f"{log.stem} will not fork its attempts:\n{text[-3000:]}")
            if marker in text:
                waiting.pop(0)
                continue
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise RuntimeError(f"{log.stem} never printed {marker!r}:\n{tail}")
            time.sleep(0.01)

    def stop_all(self) -> None:
        """SIGTERM each (a kit worker gives its lease up and exits), SIGKILL after 10 s."""
        for proc, _ in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.running:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.running.clear()


def _expect(outcome: RunOutcome, result: Any, what: str) -> None:
    if outcome.status != "succeeded" or outcome.result != result:
        raise RuntimeError(
            f"{what} ended {outcome.status!r} with {outcome.result!r}, expected {result!r}: "
            f"{outcome.error}"
        )


def _rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with connect(Backend(url)) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def _steps_per_second(url: str, steps: int, run_id: str | None = None) -> float:
    """Steps per second between the first and the last ``tick`` checkpoint."""
    where = "function_name = 'tick'" + (" AND workflow_uuid = %s" if run_id else "")
    ((first, last, count),) = _rows(
        url,
        "SELECT MIN(completed_at_epoch_ms), MAX(completed_at_epoch_ms), COUNT(*) "
        f"FROM dbos.operation_outputs WHERE {where}",
        (run_id,) if run_id else (),
    )
    if count != steps or last <= first:
        raise RuntimeError(f"{count} tick checkpoints (expected {steps}) in {url}")
    return float((count - 1) / ((last - first) / 1000))


def _invocations(url: str, names: list[str]) -> dict[str, tuple[float, float, float]]:
    """Per DBOS workflow id: created, dequeued (started) and last updated, epoch ms."""
    rows = _rows(
        url,
        "SELECT workflow_uuid, created_at, started_at_epoch_ms, updated_at "
        "FROM dbos.workflow_status WHERE workflow_uuid = ANY(%s)",
        (names,),
    )
    return {str(r[0]): (float(r[1]), float(r[2]), float(r[3])) for r in rows}


class Bench:
    """The contestants, their scratch folders and every sample taken."""

    def __init__(
        self, root: Path, server: PostgresServer, runs: int, steps: int, loop_samples: int = 1
    ) -> None:
        self.root = root
        self.server = server
        self.runs = runs
        self.steps = steps
        self.loop_samples = loop_samples
        self.script = root / "bare.py"
        self.script.write_text(BARE_SCRIPT, encoding="utf-8")
        self.bursts: dict[str | int, list[Burst]] = {}
        self.rates: dict[str, list[float]] = {"kit": [], "bare": [], "unconfined": []}
        self._n = 0
        self.workers: set[int] = set()  # the pids of the pool being timed

    def _fresh(self, what: str) -> tuple[Path, str]:
        """A new scratch folder and a new database URL (created on first use)."""
        self._n += 1
        folder = self.root / f"{self._n:02d}-{what}"
        folder.mkdir()
        return folder, self.server.database_url()

    @contextmanager
    def _pool(
        self,
        count: int,
        argv: Callable[[int], list[str]],
        folder: Path,
        *,
        env: dict[str, str] | None = None,
        warm: bool = False,
    ) -> Iterator[float]:
        """``count`` worker processes, all serving (``warm``: and forking their attempts);
        yields the seconds they took to get ready."""
        procs = Processes(folder)
        try:
            t0 = time.perf_counter()
            for i in range(count):
                procs.start(argv(i), f"worker-{i + 1}", env)
            procs.wait_ready("serving")
            ready = time.perf_counter() - t0
            if warm:
                procs.wait_ready(WARM_MARKER, refusal="are spawned")
            self.workers = procs.pids
            yield ready
        finally:
            procs.stop_all()
            self.workers = set()
            _reap_orphans({self.server.process.pid})

    def _cpu(self) -> dict[str, float]:
        return _tree_cpu(self.workers, self.server.process.pid)

    # -- group 1: throughput ----------------------------------------------------------------------

    def kit_burst(self, count: int, *, warm: bool = True) -> None:
        kind: str | int = count if warm else SPAWNED
        folder, url = self._fresh(f"kit-{count}w" if warm else "kit-spawned")
        ws = Workspace(folder / "home")
        ws.save_draft("one", RELAYS["one"])
        backend = resolve_backend(url)

        def argv(i: int) -> list[str]:
            return [
                sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home),
                "--database-url", url, "worker", "--id", f"bench-w{i + 1}",
                "--concurrency", str(CONCURRENCY), "--lease", f"{LEASE_S:g}",
            ]  # fmt: skip

        env = {**os.environ, "RELAY_WARM_START": "1" if warm else "0"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
        with self._pool(count, argv, folder, env=env, warm=warm) as ready:
            cpu0, t0 = self._cpu(), time.perf_counter()
            queued: list[commands.QueuedRun] = []
            enqueue_ms: list[float] = []
            for i in range(self.runs):
                t = time.perf_counter()
                queued.append(commands.enqueue(ws, "one", run_input={"x": i}, backend=backend))
                enqueue_ms.append((time.perf_counter() - t) * 1000)
            for i, q in enumerate(queued):
                _expect(q.wait(timeout=600), {"value": i + 1}, f"queued run {q.run_id}")
            wall, cpu = time.perf_counter() - t0, _since(cpu0, self._cpu())
        rows = _invocations(url, [q.invocation_id for q in queued])
        phases = [_kit_phases(ws, q.run_id, rows[q.invocation_id]) for q in queued]
        mechanisms = [
            find_run(ws, q.run_id).read_meta()["attempts"][0]["confinement"]["mechanism"]
            for q in queued
        ]
        forked = mechanisms.count("landlock")
        burst = Burst.drained(wall, enqueue_ms, rows, queued[0].invocation_id, cpu, ready)
        self.bursts.setdefault(kind, []).append(replace(burst, phases=phases, forked=forked))

    def bare_burst(self) -> None:
        from dbos import DBOSClient

        folder, url = self._fresh("bare-1w")

        def argv(i: int) -> list[str]:
            return [sys.executable, str(self.script), "worker", url, f"bare-w{i + 1}",
                    str(CONCURRENCY), str(POLL_S)]  # fmt: skip

        with self._pool(1, argv, folder) as ready:
            client = DBOSClient(system_database_url=url, application_name=BARE_APP)
            try:
                cpu0, t0 = self._cpu(), time.perf_counter()
                handles: list[Any] = []
                enqueue_ms: list[float] = []
                for i in range(self.runs):
                    t = time.perf_counter()
                    options: Any = {
                        "queue_name": BARE_QUEUE,
                        "workflow_name": "one",
                        "workflow_id": f"bare-{i + 1}",
                        "app_version": BARE_VERSION,
                        "application_name": BARE_APP,
                    }
                    handles.append(client.enqueue(options, {"x": i}))
                    enqueue_ms.append((time.perf_counter() - t) * 1000)
                for i, handle in enumerate(handles):
                    result = handle.get_result(polling_interval_sec=0.1)
                    if result != {"value": i + 1}:
                        raise RuntimeError(f"bare workflow {i + 1} returned {result!r}")
                wall, cpu = time.perf_counter() - t0, _since(cpu0, self._cpu())
            finally:
                client.destroy()
        rows = _invocations(url, [f"bare-{i + 1}" for i in range(self.runs)])
        self.bursts.setdefault("bare", []).append(
            Burst.drained(wall, enqueue_ms, rows, "bare-1", cpu, ready)
        )

    # -- group 2: steps per second ----------------------------------------------------------------

    def kit_loop(self, *, confine: bool = True) -> None:
        folder, url = self._fresh("kit-loop")
        ws = Workspace(folder / "home", confine=confine)
        draft = ws.save_draft("loop", RELAYS["loop"])
        backend = resolve_backend(url)
        if not restart_warm_parent().wait_ready(120):
            raise RuntimeError("this process's warm parent did not start")
        handle = start_run(ws, draft, run_input={"steps": self.steps}, backend=backend)
        _expect(handle.wait(), {"total": sum(range(self.steps))}, "kit loop")
        (attempt,) = handle.folder.read_meta()["attempts"]
        if attempt["start"]["how"] != "forked":
            raise RuntimeError(f"the kit loop's attempt was not forked: {attempt['start']}")
        rate = _steps_per_second(url, self.steps, handle.run_id)
        self.rates["kit" if confine else "unconfined"].append(rate)

    def bare_loop(self) -> None:
        _, url = self._fresh("bare-loop")
        argv = [sys.executable, str(self.script), "loop", url, str(self.steps)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"bare DBOS loop exited {proc.returncode}:\n{proc.stderr}")
        self.rates["bare"].append(_steps_per_second(url, self.steps))

    def round(self, number: int) -> None:
        """One sample of every contestant; bare DBOS goes first every other round."""
        kit = [functools.partial(self.kit_burst, count) for count in WORKER_COUNTS]
        kit.append(functools.partial(self.kit_burst, 1, warm=False))
        burst: list[Callable[[], None]] = (
            [self.bare_burst, *kit] if number % 2 else [*kit, self.bare_burst]
        )
        loops: list[Callable[[], None]] = []
        for sample in range(self.loop_samples):
            pair = [self.kit_loop, self.bare_loop]
            loops += pair if (number * self.loop_samples + sample) % 2 == 0 else pair[::-1]
        loops.append(functools.partial(self.kit_loop, confine=False))  # where row 2's gap is
        for measure in [*burst, *loops]:
            measure()


def _since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {kind: after[kind] - before[kind] for kind in CPU_KINDS}


def _kit_phases(ws: Workspace, run_id: str, row: tuple[float, float, float]) -> dict[str, float]:
    """Milliseconds of each phase of one queued run's slot time."""
    _, dequeued, ended = row
    folder = find_run(ws, run_id)
    events = {e["kind"]: e for e in read_events(folder.events)}
    spawned = float(folder.read_meta()["attempts"][0]["started_at"])
    t0 = float(events["attempt_start"]["t0"])
    workflow = float(events["workflow_start"]["ts"])
    outcome = float(events["attempt_outcome"]["ts"])
    return dict(
        zip(
            KIT_PHASES,
            (spawned - dequeued, t0 - spawned, workflow - t0, outcome - workflow, ended - outcome),
            strict=True,
        )
    )


# -- the report ----------------------------------------------------------------------------------


def _server_settings(server: PostgresServer) -> str:
    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers")
    url = server.database_url("postgres")
    shown = [f"{n} {_rows(url, f'SHOW {n}')[0][0]}" for n in names]
    return ", ".join(shown) + f", data on {_filesystem(server.folder)}"


def _filesystem(path: Path) -> str:
    """The type of the file system holding ``path`` (the longest mount point above it)."""
    best, kind = "", "?"
    with open("/proc/mounts", encoding="utf-8") as fh:
        for line in fh:
            _, mount, fstype, *_ = line.split()
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, kind = mount, fstype
    return kind


def report(bench: Bench, rounds: int, settings: str, elapsed: float) -> None:
    """Print every contestant, where a queued run's time goes, then the numbered rows."""
    med = statistics.median
    cores = os.cpu_count() or 1
    print(
        f"bench_workers: {rounds} rounds, {bench.runs} queued one-step runs per burst, loop "
        f"relay of {bench.steps} steps, Python {sys.version.split()[0]}, {cores} CPUs, load "
        f"average {os.getloadavg()[0]:.1f}, {elapsed:.0f} s"
    )
    print(f"PostgreSQL: {settings}")
    print(
        f"DBOS queue settings, the kit's (relay worker's defaults) and given to bare DBOS too: "
        f"worker_concurrency {CONCURRENCY}, polling_interval_sec {POLL_S:g}; kit lease "
        f"{LEASE_S:g} s; bare DBOS: one worker process"
    )
    print()
    kinds: list[str | int] = [*WORKER_COUNTS, SPAWNED, "bare"]
    rates = {_label(k): [b.rate for b in bench.bursts[k]] for k in kinds}
    steps = {"kit loop": bench.rates["kit"], "bare DBOS loop": bench.rates["bare"]}
    print(f"{'contestant':<22} {'median':>14} {'best':>14}   samples in round order")
    print("-" * 90)
    for key, xs in rates.items():
        listed = " ".join(f"{x:.2f}" for x in xs)
        print(f"{key:<22} {med(xs):>7.2f} runs/s {max(xs):>7.2f} runs/s   {listed}")
    for key, xs in steps.items():
        listed = " ".join(f"{x:.0f}" for x in xs)
        print(f"{key:<22} {med(xs):>6.0f} steps/s {max(xs):>6.0f} steps/s   {listed}")
    print(
        f"(runs/s: {bench.runs} runs, first enqueue to last completion; steps/s: the tick "
        "checkpoints' completed_at_epoch_ms, first to last; best = highest)"
    )
    print()
    print(
        f"per queued run, medians{'':<9} {'enqueue ms':>10} {'pickup ms':>9} {'slot ms':>8} "
        f"{'CPU ms':>7} {'CPU busy':>8} {'ready s':>7}"
    )
    for kind in kinds:
        bursts = bench.bursts[kind]
        print(
            f"  {_label(kind):<30} {med(x for b in bursts for x in b.enqueue_ms):>10.1f} "
            f"{med(b.pickup_ms for b in bursts):>9.0f} "
            f"{med(x for b in bursts for x in b.slot_ms):>8.0f} "
            f"{med(b.cpu / b.runs * 1000 for b in bursts):>7.0f} "
            f"{med(b.cpu / (b.wall * cores) for b in bursts):>8.0%} "
            f"{med(b.ready_s for b in bursts):>7.2f}"
        )
    print(
        f"CPU ms per queued run by process, medians{'':<6}"
        + "".join(f"{k:>11}" for k in CPU_KINDS)
        + f"{'forked':>9}"
    )
    for kind in kinds:
        bursts = bench.bursts[kind]
        by = [med(b.cpu_by[k] / b.runs * 1000 for b in bursts) for k in CPU_KINDS]
        forked = f"{sum(b.forked for b in bursts)}/{sum(b.runs for b in bursts)}"
        shown = forked if kind != "bare" else "-"
        print(f"  {_label(kind):<46}" + "".join(f"{x:>11.0f}" for x in by) + f"{shown:>9}")
    print(
        "(attempts = what the workers start: the warm parent and the attempts it forks, or "
        "the spawned ones; forked = attempts forked from a warm parent, the rest spawned)"
    )
    print(
        "(enqueue = the caller's enqueue call; pickup = the first run's wait on the queue; "
        "slot = a worker's dequeue to the invocation's end; CPU ms = CPU per run of every "
        "process involved (caller, workers, runs, PostgreSQL) while timed, CPU busy = that as "
        "a share of all cores; ready = spawning the workers to the last 'serving' line)"
    )
    kit_kinds: list[str | int] = [*WORKER_COUNTS, SPAWNED]
    print(
        f"kit slot time by phase, median ms{'':<3}"
        + "".join(f"{k:>7}w" for k in WORKER_COUNTS)
        + f"{'spawned':>9}"
    )
    for name in KIT_PHASES:
        values = [med(p[name] for b in bench.bursts[k] for p in b.phases) for k in kit_kinds]
        print(f"  {name:<34}" + "".join(f"{v:>8.0f}" for v in values[:-1]) + f"{values[-1]:>9.0f}")
    print(
        f"info: a DBOS queue worker takes at most worker_concurrency runs per poll, so bare "
        f"DBOS drains at most {CONCURRENCY / POLL_S:g} runs/s however short the runs are; a "
        f"kit worker also polls at once when a run is queued or one of its runs ended "
        f"(runner.queue_wake), so its attempts, not the poll, bound its rate"
    )
    print()
    one, spawned = _label(1), _label(SPAWNED)
    cpu = {k: [b.cpu / b.runs * 1000 for b in bench.bursts[k]] for k in kinds}
    pool: list[str | int] = [*WORKER_COUNTS, "bare"]
    rows: list[tuple[str, list[float], str, list[float], str, float | None, str]] = [
        (f"1 {_label(k)}", rates[_label(k)], one, rates[one], "runs/s", None, ">=") for k in pool
    ]
    rows += [
        (f"2 {bench.steps}-step relay", steps["kit loop"], "bare DBOS", steps["bare DBOS loop"],
         "steps/s", STEPS_TARGET, ">="),
        ("3 warm pool, runs/s", rates[one], "spawned", rates[spawned], "runs/s",
         WARM_RATE_TARGET, ">="),
        ("3 warm pool, CPU per run", cpu[1], "spawned", cpu[SPAWNED], "CPU ms",
         WARM_CPU_TARGET, "<="),
        ("4 CPU per queued run", cpu[1], "", [], "CPU ms", QUEUED_CPU_TARGET_MS, "<="),
    ]  # fmt: skip
    print(
        f"{'row':<24} {'median':>14}  {'against, median':<28} {'ratio':>6} {'paired':>7}  "
        f"{'target':<8} met?"
    )
    print("-" * 100)
    intervals: list[tuple[str, Interval, str]] = []  # each judged row's, with its unit
    for label, xs, base, bs, unit, target, op in rows:
        if (
            unit == "CPU ms" and base == "" and target is not None
        ):  # an absolute target (ms), not a ratio
            figure = f"{med(xs):.0f} {unit}"
            spread = median_interval(xs)
            intervals.append((label, spread, " ms"))
            print(
                f"{label:<24} {figure:>14}  {'(absolute)':<28} {'-':>6} {'-':>7}  "
                f"<= {target:g} ms {judge(spread, target, op)}"
            )
            continue
        ratio = med(xs) / med(bs)
        paired = median_interval(x / b for x, b in zip(xs, bs, strict=True))
        figure = f"{med(xs):.2f} {unit}" if unit == "runs/s" else f"{med(xs):.0f} {unit}"
        against = f"{med(bs):.2f} {unit}" if unit == "runs/s" else f"{med(bs):.0f} {unit}"
        judged = f"{op} {target:g}x" if target else "-"
        met = judge(paired, target, op) if target else "-"
        if target:
            intervals.append((f"{label} against {base}", paired, "x"))
        print(
            f"{label:<24} {figure:>14}  {base + ' ' + against:<28} {ratio:>5.2f}x "
            f"{paired.median:>6.2f}x  {judged:<8} {met}"
        )
    print(
        "(rows 1: runs/s of the pool, against the kit with 1 worker; row 2: the kit's steps/s "
        "against bare DBOS's; rows 3: one warm worker against one spawning worker (warm start "
        "off), throughput and CPU of every process per queued run; row 4: that CPU, one warm "
        "worker, against an absolute target; paired = median of the kit's sample over the one "
        "measured beside it; met? = yes or NO when the interval below is all on one side of "
        "the target, unsure when the target is inside it; ratio = ratio of medians)"
    )
    print("intervals of the judged medians (low-high, their coverage, samples):")
    for name, interval, unit in intervals:
        print(f"  {name:<44} {interval.shown(unit)}")
    if (few := too_few(i for _, i, _ in intervals)) is not None:
        print(few)
    unconfined = bench.rates["unconfined"]
    print(
        f"info: row 2 without the sandbox (confine off): {med(unconfined):.0f} steps/s, "
        f"{med(unconfined) / med(steps['bare DBOS loop']):.2f}x bare DBOS; a confined "
        "attempt's leader opens its DBOS sessions before the sandbox's network, and only "
        "sessions DBOS opens later reach the server through pasta (runner.dbos_engines)"
    )
    print(
        f"info: bare DBOS runs its workflows in-process, without isolation: "
        f"{med(cpu['bare']):.0f} CPU ms per queued run, {med(rates[BARE]):.2f} runs/s (the "
        "engine's ceiling, reported beside, not a row the kit must beat)"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure, print the tables; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, 8 runs, 200 steps (CI)")
    parser.add_argument("--repeats", type=int, help="timed rounds (default 5, quick 2)")
    parser.add_argument("--runs", type=int, help="queued runs per burst (default 24, quick 8)")
    parser.add_argument("--steps", type=int, help="steps in the loop relay (default 1000)")
    parser.add_argument(
        "--loop-samples", type=int, help="loop runs of each contestant a round (default 3, quick 1)"
    )
    parser.add_argument(
        "--fsync", choices=("on", "off"), default="on", help="PostgreSQL fsync (default on)"
    )
    args = parser.parse_args(argv)
    rounds = args.repeats or (2 if args.quick else 5)
    runs = args.runs or (8 if args.quick else 24)
    steps = args.steps or (200 if args.quick else 1000)
    loop_samples = args.loop_samples or (1 if args.quick else 3)
    started = time.perf_counter()
    # SIGTERM unwinds like Ctrl-C, so the workers, the server and the scratch folders go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    become_subreaper()
    with (
        tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp,
        postgres_server(fsync=args.fsync == "on") as server,
    ):
        bench = Bench(Path(tmp), server, runs, steps, loop_samples)
        for number in range(rounds):
            bench.round(number)
        report(bench, rounds, _server_settings(server), time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
