"""Benchmark: the runner against a bare DBOS script of the same relays, side by side in one run.

Run ``python benchmarks/bench_runner.py [--quick] [--repeats N] [--steps N] [--loop-samples N]``.
Three rows: a cold run of a one-step relay (``start_run(...).wait()`` against ``python bare.py``
that configures DBOS on a fresh SQLite file, runs the workflow with an id and exits with
``os._exit``), a recovery attempt after a crash in step 2 (against the kit's own fresh run, and
bare DBOS's relaunch that waits for the recovered result), and the steps per second of a loop of
trivial async steps (against bare DBOS on WAL and on DBOS's default journal). Bare DBOS gets
every public advantage the kit has: WAL, ``log_level`` WARNING, a pinned version, ``os._exit``
after flushing, a 10 ms result poll. One kit advantage it does not get: the kit starts a new
run's SQLite file as a copy of a migrated, empty DBOS database (``runner.dbos_template``), where
the bare script, as a user writes it, lets ``DBOS.launch`` migrate its fresh file (about 50 ms;
the report says so). Contestants alternate within each round, and which goes first alternates
between rounds, so machine noise hits them alike. Wall times are taken on the caller's side;
steps per second come from the step checkpoints' own timestamps in ``operation_outputs`` (first
to last), so process start-up counts for neither. The loop is measured ``--loop-samples`` times
a round (default 3), its order flipped each time, as its rows' targets are within this machine's
noise. Each row is judged on its paired ratios (the kit's sample over the one it was measured
beside) with ``verdict``: their median and the interval that holds the true median at 95% (with
5 rounds, rows other than the loop's take the range of their 5 pairs: 94%), ``yes`` or ``NO``
only when the whole interval is on one side of the target, else ``unsure``. CPU seconds of every
process a run involves (``RUSAGE_SELF`` for the supervisor threads, ``RUSAGE_CHILDREN``) are
shown beside, as they suffer less from a busy machine; the benchmark is the child subreaper, so
a spawned child's inner processes, which bubblewrap leaves as orphans, are reaped and counted
here too (before, they went to init and their CPU was counted nowhere). Three more rows measure
warm start (issue #17): a cold run and a recovery forked from a ready warm parent (confined by
Landlock), and a process's first run, whose warm parent is not started yet (spawned, as before).
Today's rows keep warm start off, so they go on measuring the spawned child. One more row is a
whole ``relay run`` from a terminal (``python -m relay_notebook.cli run one``: the CLI's
start-up, its own warm parent and the attempt forked from it) against the whole bare DBOS script
process; it runs under a small wrapper that is the child subreaper, so the CPU of the warm
parent the CLI leaves behind and of the attempt it forked is counted too. Benchmarks report,
they do not assert: the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from proc_stat import process_stats  # noqa: E402
from runner_sources import BARE_SCRIPT, RELAYS  # noqa: E402
from verdict import judge, median_interval, too_few  # noqa: E402

from relay_notebook.record.folders import find_run  # noqa: E402
from relay_notebook.record.ledger import read_events  # noqa: E402
from relay_notebook.runner import (  # noqa: E402
    RunHandle,
    RunOutcome,
    parse_crash_spec,
    start_recovery,
    start_run,
)
from relay_notebook.runner.warm import (  # noqa: E402
    ForkedProcess,
    WarmParent,
    restart_warm_parent,
    warm_parent,
)
from relay_notebook.workspace import Draft, Workspace  # noqa: E402

COLD_TARGET = 1.2  # kit cold run <= 1.2x bare DBOS
WARM_TARGET = 0.3  # warm recovery <= 0.3x bare's fresh run
WARM_COLD_TARGET = 0.2  # warm cold run <= 0.2x bare DBOS, sandbox included (issue #26)
FIRST_TARGET = 1.2  # first run of a process (its warm parent not started yet) <= 1.2x bare
TERMINAL_TARGET = 1.1  # `relay run` from a terminal, a whole process <= 1.1x a bare DBOS script
RECOVERY_TARGET = 1.5  # kit recovery <= 1.5x a kit fresh run
WAL_TARGET = 0.95  # kit steps/s >= 0.95x bare DBOS on WAL (issue #30; 0.9 before)
STEP_CPU_TARGET = 1.15  # the kit's CPU per loop step <= 1.15x bare DBOS's on WAL (issue #30)
DEFAULT_TARGET = 1.5  # kit steps/s >= 1.5x bare DBOS with DBOS defaults

RATES = ("kit loop", "bare loop WAL", "bare loop default")
TERMINAL = "relay run from a terminal"

# Runs a command as the child subreaper: its orphans (the CLI's warm parent, which outlives it by
# a moment) are reaped here, so RUSAGE_CHILDREN holds every process the command involved.
SUBREAPER = """import ctypes, json, os, resource, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": use.ru_utime + use.ru_stime, "returncode":
                  done.returncode, "stdout": done.stdout, "stderr": done.stderr}))
"""


@dataclass(frozen=True)
class Sample:
    """One contestant run: caller-side wall seconds, and CPU seconds of every process involved."""

    wall: float
    cpu: float


class _Clock:
    """Wall time and CPU time (ours and our reaped children's), from one moment on."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = _cpu()

    def stop(self, group: int | None = None) -> Sample:
        """The sample; ``group``: first reap what of that process group we inherited."""
        wall = time.perf_counter() - self.wall
        if group is not None:
            reap_orphans(group)
        return Sample(wall, _cpu() - self.cpu)


def become_subreaper() -> None:
    """Orphans of our descendants become our children, not init's (``PR_SET_CHILD_SUBREAPER``).

    A spawned child runs under bubblewrap, whose outer process exits before the inner ones:
    without this, the child's own CPU (its Python start and imports) would be reaped by init
    and counted nowhere.
    """
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def reap_orphans(group: int) -> None:
    """Reap the ended processes of process group ``group`` that were handed to us."""
    me = os.getpid()
    for pid, fields in process_stats():
        if fields[0] == "Z" and int(fields[1]) == me and int(fields[2]) == group:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _cpu() -> float:
    """CPU seconds of this process (the kit's supervisor threads) and its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Bench:
    """The contestants, their scratch folders and every sample taken."""

    def __init__(self, root: Path, steps: int, loop_samples: int = 1) -> None:
        self.root = root
        self.steps = steps
        self.loop_samples = loop_samples
        self.workspace = Workspace(root / "kit", warm_start=False)  # spawned, as before #17
        self.warm = Workspace(root / "kit", warm_start=True)
        self.drafts: dict[str, Draft] = {
            name: self.workspace.save_draft(name, text) for name, text in RELAYS.items()
        }
        self.script = root / "bare.py"
        self.script.write_text(BARE_SCRIPT, encoding="utf-8")
        self.subreaper = root / "subreaper.py"
        self.subreaper.write_text(SUBREAPER, encoding="utf-8")
        self.values: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.phases: dict[str, list[dict[str, float]]] = {"kit": [], "bare": []}
        self._bare_runs = 0

    def add(self, key: str, value: float, sample: Sample) -> None:
        self.values.setdefault(key, []).append(value)
        self.cpu.setdefault(key, []).append(sample.cpu)

    # -- contestants --------------------------------------------------------------------------

    def kit(
        self, relay: str, run_input: Any, crash: str | None = None, *, warm: bool = False
    ) -> tuple[Sample, RunHandle]:
        clock = _Clock()
        handle = start_run(
            self.warm if warm else self.workspace,
            self.drafts[relay],
            run_input=run_input,
            crash=parse_crash_spec(crash) if crash else None,
        )
        outcome = handle.wait()
        sample = _with_forked_cpu(clock.stop(_group(handle)), handle)
        _expect(outcome, "interrupted" if crash else "succeeded", f"kit {relay}")
        return sample, handle

    def kit_recover(self, run_id: str, *, warm: bool = False) -> Sample:
        clock = _Clock()
        handle = start_recovery(self.warm if warm else self.workspace, run_id)
        outcome = handle.wait()
        sample = _with_forked_cpu(clock.stop(_group(handle)), handle)
        _expect(outcome, "succeeded", "kit recovery")
        if outcome.result != {"value": 4}:
            raise RuntimeError(f"kit recovered {outcome.result!r}, expected {{'value': 4}}")
        return sample

    def bare(
        self, mode: str, run_input: Any = None, folder: Path | None = None
    ) -> tuple[Sample, Path, str]:
        if folder is None:
            self._bare_runs += 1
            folder = self.root / f"bare-{self._bare_runs}"
            folder.mkdir()
        argv = [sys.executable, str(self.script), mode, str(folder)]
        if run_input is not None:
            argv.append(json.dumps(run_input))
        clock = _Clock()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        sample = clock.stop()
        expected = 86 if mode == "crash" else 0
        if proc.returncode != expected:
            raise RuntimeError(
                f"bare DBOS {mode} exited {proc.returncode}, expected {expected}:\n{proc.stderr}"
            )
        return sample, folder, proc.stderr

    def terminal(self, relay: str, run_input: Any) -> tuple[Sample, dict[str, Any]]:
        """A whole `relay run RELAY` process, as a terminal starts it (warm start on)."""
        env = {k: v for k, v in os.environ.items() if k not in ("RELAY_DATABASE_URL", "RELAY_HOME")}
        env |= {"PYTHONPATH": str(HERE.parent), "RELAY_WARM_START": "1"}
        cli = [sys.executable, "-m", "relay_notebook.cli", "--home", str(self.warm.home), "run",
               relay, "--input", json.dumps(run_input), "--json"]  # fmt: skip
        proc = subprocess.run(
            [sys.executable, str(self.subreaper), *cli],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"the subreaper wrapper failed:\n{proc.stderr}")
        got = json.loads(proc.stdout)
        if got["returncode"] != 0:
            raise RuntimeError(f"relay run exited {got['returncode']}:\n{got['stderr']}")
        return Sample(float(got["wall"]), float(got["cpu"])), json.loads(got["stdout"])

    # -- one round ----------------------------------------------------------------------------

    def _kit_cold(self) -> None:
        start = time.time()
        sample, handle = self.kit("one", {"x": 1})
        self.add("kit cold run", sample.wall, sample)
        self.phases["kit"].append(_kit_phases(handle, start, sample.wall))

    def _bare_cold(self) -> None:
        start = time.time()
        sample, folder, _ = self.bare("one", {"x": 1})
        phases = json.loads((folder / "result.json").read_text(encoding="utf-8"))["phases"]
        self.add("bare cold run", sample.wall, sample)
        self.phases["bare"].append(_bare_phases(phases, start, sample.wall))

    def _kit_fresh(self) -> None:
        sample, _ = self.kit("two", {"x": 1})
        self.add("kit fresh run", sample.wall, sample)

    def _kit_recovery(self) -> None:
        _, handle = self.kit("two", {"x": 1}, crash="during:step_b")
        sample = self.kit_recover(handle.run_id)
        self.add("kit recovery", sample.wall, sample)

    def _warm_cold(self) -> None:
        _ready_parent()
        sample, handle = self.kit("one", {"x": 1}, warm=True)
        _expect_forked(handle)
        self.add("warm cold run", sample.wall, sample)

    def _warm_recovery(self) -> None:
        _ready_parent()
        _, handle = self.kit("two", {"x": 1}, crash="during:step_b", warm=True)
        _ready_parent()
        sample = self.kit_recover(handle.run_id, warm=True)
        self.add("warm recovery", sample.wall, sample)

    def _first_run(self) -> None:
        """A process's first run: no warm parent yet, so it is spawned and starts one after."""
        parent = _ready_parent()
        os.kill(parent.pid, 9)
        parent.process.wait()
        sample, handle = self.kit("one", {"x": 1}, warm=True)
        if isinstance(handle.process, ForkedProcess):
            raise RuntimeError("the first run of a process was forked, expected spawned")
        self.add("first run, cold parent", sample.wall, sample)
        _ready_parent()  # its imports must not overlap the next contestant

    def _terminal_run(self) -> None:
        """`relay run one` from a terminal: the CLI forks its attempt from its own warm parent."""
        sample, outcome = self.terminal("one", {"x": 1})
        if outcome["status"] != "succeeded":
            raise RuntimeError(f"relay run ended {outcome['status']!r}: {outcome.get('error')}")
        attempt = find_run(self.warm, outcome["run_id"]).read_meta()["attempts"][0]
        if attempt["confinement"]["mechanism"] != "landlock":
            raise RuntimeError(
                "relay run spawned its attempt, expected it forked (Landlock): "
                f"{attempt.get('start')}, {attempt['confinement']}"
            )
        self.add(TERMINAL, sample.wall, sample)

    def _bare_fresh(self) -> None:
        sample, _, _ = self.bare("two", {"x": 1})
        self.add("bare fresh run", sample.wall, sample)

    def _bare_recovery(self) -> None:
        _, folder, _ = self.bare("crash", {"x": 1})
        sample, _, _ = self.bare("recover", folder=folder)
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))["result"]
        if result != {"value": 4}:
            raise RuntimeError(f"bare DBOS recovered {result!r}, expected {{'value': 4}}")
        self.add("bare recovery", sample.wall, sample)

    def _kit_loop(self) -> None:
        sample, handle = self.kit("loop", {"steps": self.steps})
        self.add("kit loop", _steps_per_second(handle.folder.database, self.steps), sample)

    def _bare_loop(self, journal: str) -> Callable[[], None]:
        def measure() -> None:
            sample, folder, _ = self.bare(f"loop-{journal.lower()}", {"steps": self.steps})
            rate = _steps_per_second(folder / "dbos.sqlite", self.steps)
            self.add(f"bare loop {journal}", rate, sample)

        return measure

    def round(self, number: int) -> None:
        """One sample of every contestant; each group's order flips every other round."""
        groups: list[list[Callable[[], None]]] = [
            [
                self._kit_cold,
                self._bare_cold,
                self._warm_cold,
                self._first_run,
                self._terminal_run,
            ],
            [self._kit_fresh, self._bare_fresh],
            [self._kit_recovery, self._bare_recovery, self._warm_recovery],
        ]
        for group in groups:
            for measure in group if number % 2 == 0 else reversed(group):
                measure()
        loop = [self._kit_loop, self._bare_loop("WAL"), self._bare_loop("default")]
        for sample in range(self.loop_samples):
            for measure in loop if (number * self.loop_samples + sample) % 2 == 0 else loop[::-1]:
                measure()

    # -- where the cold run's start-up goes ---------------------------------------------------

    def import_profile(self) -> dict[str, float]:
        """Self import time (ms) per top-level package that the kit child adds to bare DBOS."""
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # inherited by the kit child, not by us
        try:
            _, handle = self.kit("one", {"x": 1})
            _, _, bare_err = self.bare("one", {"x": 1})
        finally:
            del os.environ["PYTHONPROFILEIMPORTTIME"]
        kit_err = "".join(
            p.read_text(encoding="utf-8", errors="replace")
            for p in handle.folder.ipc.glob("*/stderr.log")
        )
        kit, bare = _import_times(kit_err), _import_times(bare_err)
        extra: dict[str, float] = {}
        for module, us in kit.items():
            if module not in bare:
                top = module.split(".")[0]
                extra[top] = extra.get(top, 0.0) + us / 1000
        return dict(sorted(extra.items(), key=lambda kv: -kv[1]))


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")


def _import_times(stderr: str) -> dict[str, float]:
    return {m[2]: float(m[1]) for m in _IMPORT_LINE.finditer(stderr)}


def _ready_parent() -> WarmParent:
    """This process's warm parent, started if need be, once it can fork."""
    parent = restart_warm_parent()
    if not parent.wait_ready(120):
        raise RuntimeError("the warm parent did not start")
    deadline = time.monotonic() + 10
    while warm_parent() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return parent


def _expect_forked(handle: RunHandle) -> None:
    if not isinstance(handle.process, ForkedProcess):
        raise RuntimeError("a warm run was spawned, expected forked from the warm parent")


def _group(handle: RunHandle) -> int | None:
    """The spawned attempt's process group (its leader's pid); a forked one's is not ours."""
    if handle.process is None or isinstance(handle.process, ForkedProcess):
        return None
    return handle.process.pid


def _with_forked_cpu(sample: Sample, handle: RunHandle) -> Sample:
    """Add a forked attempt's CPU: it is the warm parent's child, so not in RUSAGE_CHILDREN."""
    if isinstance(handle.process, ForkedProcess) and handle.process.cpu is not None:
        return Sample(sample.wall, sample.cpu + handle.process.cpu)
    return sample


def _expect(outcome: RunOutcome, status: str, what: str) -> None:
    if outcome.status != status:
        raise RuntimeError(f"{what} ended {outcome.status!r}, expected {status!r}: {outcome.error}")


def _steps_per_second(database: Path, steps: int) -> float:
    """Steps per second between the first and the last ``tick`` checkpoint."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        first, last, count = conn.execute(
            "SELECT MIN(completed_at_epoch_ms), MAX(completed_at_epoch_ms), COUNT(*) "
            "FROM operation_outputs WHERE function_name = 'tick'"
        ).fetchone()
    finally:
        conn.close()
    if count != steps or last <= first:
        raise RuntimeError(f"{database}: {count} tick checkpoints, expected {steps}")
    return float((count - 1) / ((last - first) / 1000))


def _kit_phases(handle: RunHandle, start: float, wall: float) -> dict[str, float]:
    """Milliseconds of each phase of a kit cold run, from run.json and the ledger."""
    events = {e["kind"]: e for e in read_events(handle.folder.events)}
    spawned = float(handle.folder.read_meta()["attempts"][0]["started_at"])
    t0 = float(events["attempt_start"]["t0"])
    workflow = float(events["workflow_start"]["ts"])
    outcome = float(events["attempt_outcome"]["ts"])
    return {
        "supervisor, before spawn": spawned - start * 1000,
        "spawn to DBOS.launch": t0 - spawned,
        "launch to workflow": workflow - t0,
        "workflow and result": outcome - workflow,
        "result to caller": wall * 1000 - (outcome - start * 1000),
    }


def _bare_phases(phases: dict[str, float], start: float, wall: float) -> dict[str, float]:
    """Milliseconds of each phase of a bare DBOS cold run, from its own clock."""
    ms = {k: v * 1000 for k, v in phases.items()}
    return {
        "supervisor, before spawn": 0.0,
        "spawn to DBOS.launch": ms["configured"] - start * 1000,
        "launch to workflow": ms["launched"] - ms["configured"],
        "workflow and result": ms["done"] - ms["launched"],
        "result to caller": wall * 1000 - (ms["done"] - start * 1000),
    }


def _fmt(key: str, value: float) -> str:
    return f"{value:.0f} steps/s" if key in RATES else f"{value:.3f} s"


def report(bench: Bench, rounds: int, imports: dict[str, float], elapsed: float) -> None:
    """Print the contestants, the target rows and where the cold run's time goes."""
    v, cpu = bench.values, bench.cpu
    med = {k: statistics.median(x) for k, x in v.items()}
    mcpu = {k: statistics.median(x) for k, x in cpu.items()}
    print(
        f"bench_runner: {rounds} rounds, loop relay of {bench.steps} steps, Python "
        f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, {elapsed:.0f} s"
    )
    print()
    print(f"{'contestant':<25} {'median':>14} {'best':>14} {'CPU s':>7}   samples in round order")
    print("-" * 103)
    for key, xs in v.items():
        best = max(xs) if key in RATES else min(xs)
        listed = " ".join(f"{x:.0f}" if key in RATES else f"{x:.3f}" for x in xs)
        figures = f"{_fmt(key, med[key]):>14} {_fmt(key, best):>14} {mcpu[key]:>7.3f}"
        print(f"{key:<25} {figures}   {listed}")
    print("(best = lowest time or highest rate; CPU s = median CPU of the run's processes)")
    print()
    loop = f"3 {bench.steps}-step relay"
    rows = [
        ("1 cold run, one-step", "kit cold run", "bare cold run", "<=", COLD_TARGET),
        ("2 recovery after crash", "kit recovery", "kit fresh run", "<=", RECOVERY_TARGET),
        (loop, "kit loop", "bare loop WAL", ">=", WAL_TARGET),
        (loop, "kit loop", "bare loop default", ">=", DEFAULT_TARGET),
        ("4 warm cold run", "warm cold run", "bare cold run", "<=", WARM_COLD_TARGET),
        ("5 warm recovery", "warm recovery", "bare fresh run", "<=", WARM_TARGET),
        ("6 first run, cold parent", "first run, cold parent", "bare cold run", "<=", FIRST_TARGET),
        ("7 relay run, terminal", TERMINAL, "bare cold run", "<=", TERMINAL_TARGET),
    ]
    print(
        f"{'row':<25} {'kit, median':<15} {'against, median':<32} "
        f"{'ratio':>6} {'paired':>7} {'CPU':>6}  {'target':<8} met?"
    )
    print("-" * 110)
    intervals = []
    for label, kit, base, op, target in rows:
        ratio = med[kit] / med[base]
        paired = median_interval(a / b for a, b in zip(v[kit], v[base], strict=True))
        cpu_ratio = f"{mcpu[kit] / mcpu[base]:.2f}x" if kit not in RATES else "-"
        intervals.append((f"{label} against {base}", paired))
        print(
            f"{label:<25} {_fmt(kit, med[kit]):<15} {base + ' ' + _fmt(base, med[base]):<32} "
            f"{ratio:>5.2f}x {paired.median:>6.2f}x {cpu_ratio:>6}  {op} {target:g}x{'':<3} "
            f"{judge(paired, target, op)}"
        )

    def per_step(loop_cpu: float, cold: str) -> float:  # microseconds
        return (loop_cpu - mcpu[cold]) / bench.steps * 1e6

    kit_us, bare_us = (
        per_step(mcpu["kit loop"], "kit cold run"),
        per_step(mcpu["bare loop WAL"], "bare cold run"),
    )
    step_cpu = median_interval(
        per_step(k, "kit cold run") / per_step(b, "bare cold run")
        for k, b in zip(cpu["kit loop"], cpu["bare loop WAL"], strict=True)
    )
    intervals.append(("8 CPU per loop step against bare loop WAL", step_cpu))
    print(
        f"{'8 CPU per loop step':<25} {format(kit_us, '.0f') + ' us':<15} "
        f"{'bare loop WAL ' + format(bare_us, '.0f') + ' us':<32} "
        f"{kit_us / bare_us:>5.2f}x {step_cpu.median:>6.2f}x {'-':>6}  "
        f"<= {STEP_CPU_TARGET:g}x{'':<2} {judge(step_cpu, STEP_CPU_TARGET, '<=')}"
    )
    print(
        "(paired = median of the kit's sample over the one measured beside it; met? = yes or NO "
        "when the paired median's 95% interval below is all on one side of the target, unsure "
        "when the target is inside it; ratio = ratio of medians; CPU = ratio of CPU; row 8: the "
        "loop run's CPU minus the cold run's median, per step, of every process)"
    )
    print("paired medians' intervals (low-high, their coverage, pairs):")
    for name, interval in intervals:
        print(f"  {name:<52} {interval}")
    if (few := too_few(i for _, i in intervals)) is not None:
        print(few)
    print(
        f"info: bare DBOS recovery {_fmt('', med['bare recovery'])} = "
        f"{med['bare recovery'] / med['bare fresh run']:.2f}x its fresh run "
        f"{_fmt('', med['bare fresh run'])} (DBOS polls its internal queue about once a "
        f"second); kit recovery = {med['kit recovery'] / med['bare recovery']:.2f}x bare DBOS's"
    )
    print(
        "info: CPU per attempt, median: "
        + ", ".join(
            f"{key} {mcpu[key] * 1000:.0f} ms"
            for key in ("kit cold run", "warm cold run", "first run, cold parent", "bare cold run")
        )
        + " (a forked attempt's own CPU comes from the warm parent's wait4; the parent's one-off "
        "start is not counted)"
    )
    print(
        f"info: CPU of a whole terminal `relay run`, median: {mcpu[TERMINAL] * 1000:.0f} ms (the "
        f"CLI, its warm parent and the attempt) against bare DBOS's "
        f"{mcpu['bare cold run'] * 1000:.0f} ms; the CLI uses a second core while its warm "
        "parent imports"
    )
    print(
        "info: the kit's runs start their SQLite file from a migrated DBOS template "
        "(runner.dbos_template); bare DBOS's migrate a fresh file in DBOS.launch"
    )
    print()
    print(f"cold run phases, median ms{'':<10} {'kit':>8} {'bare':>8}")
    for name in bench.phases["kit"][0]:
        k = statistics.median(p[name] for p in bench.phases["kit"])
        b = statistics.median(p[name] for p in bench.phases["bare"])
        print(f"  {name:<34} {k:>8.1f} {b:>8.1f}")
    total = sum(imports.values())
    top = ", ".join(f"{name} {ms:.0f}" for name, ms in list(imports.items())[:8])
    print(f"imports the kit child adds to bare DBOS's: {total:.0f} ms ({top} ms; one sample)")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the tables; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, 200-step loop (CI)")
    parser.add_argument("--repeats", type=int, help="timed rounds (default 5, quick 2)")
    parser.add_argument("--steps", type=int, help="steps in the loop relay (default 1000)")
    parser.add_argument(
        "--loop-samples", type=int, help="loop runs of each contestant a round (default 3, quick 1)"
    )
    args = parser.parse_args(argv)
    rounds = args.repeats or (2 if args.quick else 5)
    steps = args.steps or (200 if args.quick else 1000)
    loop_samples = args.loop_samples or (1 if args.quick else 3)
    started = time.perf_counter()
    become_subreaper()
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        bench = Bench(Path(tmp), steps, loop_samples)
        imports = bench.import_profile()  # also warms the page cache for both contestants
        for number in range(rounds):
            bench.round(number)
        report(bench, rounds, imports, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
