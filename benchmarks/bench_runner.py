"""Benchmark: the runner against a bare DBOS script of the same relays, side by side in one run.

Run ``python benchmarks/bench_runner.py [--quick] [--repeats N] [--steps N]``. Three rows: a cold
run of a one-step relay (``start_run(...).wait()`` against ``python bare.py`` that configures
DBOS on a fresh SQLite file, runs the workflow with an id and exits with ``os._exit``), a
recovery attempt after a crash in step 2 (against the kit's own fresh run, and bare DBOS's
relaunch that waits for the recovered result), and the steps per second of a loop of trivial
async steps (against bare DBOS on WAL and on DBOS's default journal). Bare DBOS gets every
public advantage the kit has: WAL, ``log_level`` WARNING, a pinned version, ``os._exit`` after
flushing, a 10 ms result poll. Contestants alternate within each round, and which goes first
alternates between rounds, so machine noise hits them alike. Wall times are taken on the
caller's side; steps per second come from the step checkpoints' own timestamps in
``operation_outputs`` (first to last), so process start-up counts for neither. Benchmarks
report, they do not assert: the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from relay_notebook.runner import (  # noqa: E402
    RunHandle,
    RunOutcome,
    parse_crash_spec,
    start_recovery,
    start_run,
)
from relay_notebook.runner.ledger import read_events  # noqa: E402
from relay_notebook.workspace import Draft, Workspace  # noqa: E402

COLD_TARGET = 1.2  # kit cold run <= 1.2x bare DBOS
RECOVERY_TARGET = 1.5  # kit recovery <= 1.5x a kit fresh run
WAL_TARGET = 0.9  # kit steps/s >= 0.9x bare DBOS on WAL
DEFAULT_TARGET = 1.5  # kit steps/s >= 1.5x bare DBOS with DBOS defaults

STEPS = '''from dbos import DBOS


@DBOS.step()
async def step_a(x):
    return x + 1


@DBOS.step()
async def step_b(x):
    return x * 2


@DBOS.step()
async def tick(i):
    return i
'''

RELAYS = {
    "one": STEPS
    + '''

@DBOS.workflow()
async def run(INPUT):
    return {"value": await step_a(INPUT["x"])}
''',
    "two": STEPS
    + '''

@DBOS.workflow()
async def run(INPUT):
    a = await step_a(INPUT["x"])
    return {"value": await step_b(a)}
''',
    "loop": STEPS
    + '''

@DBOS.workflow()
async def run(INPUT):
    total = 0
    for i in range(INPUT["steps"]):
        total += await tick(i)
    return {"total": total}
''',
}

BARE_SCRIPT = '''"""Bare DBOS: the benchmark's relays without the kit. Usage: bare.py MODE FOLDER [INPUT]."""
import time

PHASES = {"start": time.time()}
import asyncio
import json
import os
import sqlite3
import sys

from dbos import DBOS, SetWorkflowID

PHASES["imported"] = time.time()
MODE, FOLDER = sys.argv[1], sys.argv[2]
DB = os.path.join(FOLDER, "dbos.sqlite")
WORKFLOW_ID = "bench-1"


@DBOS.step()
async def step_a(x):
    return x + 1


@DBOS.step()
async def step_b(x):
    if MODE == "crash":
        sys.stdout.flush()
        os._exit(86)
    return x * 2


@DBOS.step()
async def tick(i):
    return i


@DBOS.workflow()
async def one(INPUT):
    return {"value": await step_a(INPUT["x"])}


@DBOS.workflow()
async def two(INPUT):
    a = await step_a(INPUT["x"])
    return {"value": await step_b(a)}


@DBOS.workflow()
async def loop(INPUT):
    total = 0
    for i in range(INPUT["steps"]):
        total += await tick(i)
    return {"total": total}


async def main():
    if MODE != "loop-default" and not os.path.exists(DB):
        conn = sqlite3.connect(DB)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()
    DBOS(config={
        "name": "bench",
        "system_database_url": "sqlite:///" + os.path.abspath(DB),
        "application_version": "bench-v1",
        "executor_id": "local",
        "log_level": "WARNING",
    })
    PHASES["configured"] = time.time()
    DBOS.launch()
    PHASES["launched"] = time.time()
    if MODE == "recover":
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
        result = await handle.get_result(polling_interval_sec=0.01)
    else:
        workflow = {"one": one, "two": two, "crash": two}.get(MODE, loop)
        with SetWorkflowID(WORKFLOW_ID):
            result = await workflow(json.loads(sys.argv[3]))
    PHASES["done"] = time.time()
    with open(os.path.join(FOLDER, "result.json"), "w") as out:
        json.dump({"result": result, "phases": PHASES}, out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


asyncio.run(main())
'''

Samples = dict[str, list[float]]


class Bench:
    """The contestants, their scratch folders and every sample taken."""

    def __init__(self, root: Path, steps: int) -> None:
        self.root = root
        self.steps = steps
        self.workspace = Workspace(root / "kit")
        self.drafts: dict[str, Draft] = {
            name: self.workspace.save_draft(name, text) for name, text in RELAYS.items()
        }
        self.script = root / "bare.py"
        self.script.write_text(BARE_SCRIPT, encoding="utf-8")
        self.samples: Samples = {}
        self.phases: dict[str, list[dict[str, float]]] = {"kit": [], "bare": []}
        self._bare_runs = 0

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    # -- contestants --------------------------------------------------------------------------

    def kit(self, relay: str, run_input: Any, crash: str | None = None) -> tuple[float, RunHandle]:
        start = time.perf_counter()
        handle = start_run(
            self.workspace,
            self.drafts[relay],
            run_input=run_input,
            crash=parse_crash_spec(crash) if crash else None,
        )
        outcome = handle.wait()
        wall = time.perf_counter() - start
        _expect(outcome, "interrupted" if crash else "succeeded", f"kit {relay}")
        return wall, handle

    def kit_recover(self, run_id: str) -> float:
        start = time.perf_counter()
        outcome = start_recovery(self.workspace, run_id).wait()
        wall = time.perf_counter() - start
        _expect(outcome, "succeeded", "kit recovery")
        return wall

    def bare(self, mode: str, run_input: Any = None, folder: Path | None = None) -> tuple[float, Path]:
        if folder is None:
            self._bare_runs += 1
            folder = self.root / f"bare-{self._bare_runs}"
            folder.mkdir()
        argv = [sys.executable, str(self.script), mode, str(folder)]
        if run_input is not None:
            argv.append(json.dumps(run_input))
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        wall = time.perf_counter() - start
        expected = 86 if mode == "crash" else 0
        if proc.returncode != expected:
            raise RuntimeError(
                f"bare DBOS {mode} exited {proc.returncode}, expected {expected}:\n{proc.stderr}"
            )
        return wall, folder

    # -- one round ----------------------------------------------------------------------------

    def _cold(self) -> None:
        start = time.time()
        wall, handle = self.kit("one", {"x": 1})
        self.add("kit cold", wall)
        self.phases["kit"].append(_kit_phases(handle, start, wall))

    def _bare_cold(self) -> None:
        start = time.time()
        wall, folder = self.bare("one", {"x": 1})
        phases = json.loads((folder / "result.json").read_text(encoding="utf-8"))["phases"]
        self.add("bare cold", wall)
        self.phases["bare"].append(_bare_phases(phases, start, wall))

    def _kit_fresh(self) -> None:
        self.add("kit fresh", self.kit("two", {"x": 1})[0])

    def _kit_recovery(self) -> None:
        _, handle = self.kit("two", {"x": 1}, crash="during:step_b")
        self.add("kit recovery", self.kit_recover(handle.run_id))

    def _bare_fresh(self) -> None:
        self.add("bare fresh", self.bare("two", {"x": 1})[0])

    def _bare_recovery(self) -> None:
        _, folder = self.bare("crash", {"x": 1})
        wall, _ = self.bare("recover", folder=folder)
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))["result"]
        if result != {"value": 4}:
            raise RuntimeError(f"bare DBOS recovered {result!r}, expected {{'value': 4}}")
        self.add("bare recovery", wall)

    def _kit_loop(self) -> None:
        _, handle = self.kit("loop", {"steps": self.steps})
        self.add("kit steps/s", _steps_per_second(handle.folder.database, self.steps))

    def _bare_loop(self, mode: str) -> Callable[[], None]:
        def measure() -> None:
            _, folder = self.bare(mode, {"steps": self.steps})
            self.add(f"bare {mode[5:]} steps/s", _steps_per_second(folder / "dbos.sqlite", self.steps))

        return measure

    def round(self, number: int) -> None:
        """One sample of every contestant; pairs swap their order every other round."""
        groups: list[list[Callable[[], None]]] = [
            [self._cold, self._bare_cold],
            [self._kit_fresh, self._bare_fresh],
            [self._kit_recovery, self._bare_recovery],
            [self._kit_loop, self._bare_loop("loop-wal"), self._bare_loop("loop-default")],
        ]
        for group in groups:
            for measure in group if number % 2 == 0 else reversed(group):
                measure()


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
    """Milliseconds of each phase of a kit cold run, from its ledger and run.json."""
    events = {e["kind"]: e for e in read_events(handle.folder.events)}
    meta = handle.folder.read_meta()
    spawned = float(meta["attempts"][0]["started_at"])
    t0 = float(events["attempt_start"]["t0"])
    workflow = float(events["workflow_start"]["ts"])
    outcome = float(events["attempt_outcome"]["ts"])
    return {
        "before child start": spawned - start * 1000,
        "to launch": t0 - spawned,
        "launch": workflow - t0,
        "workflow + result": outcome - workflow,
        "after result": wall * 1000 - (outcome - start * 1000),
    }


def _bare_phases(phases: dict[str, float], start: float, wall: float) -> dict[str, float]:
    """Milliseconds of each phase of a bare DBOS cold run, from its own timestamps."""
    ms = {k: v * 1000 for k, v in phases.items()}
    return {
        "before child start": 0.0,
        "to launch": ms["configured"] - start * 1000,
        "launch": ms["launched"] - ms["configured"],
        "workflow + result": ms["done"] - ms["launched"],
        "after result": wall * 1000 - (ms["done"] - start * 1000),
    }


def _row(label: str, kit: str, base: str, ratio: float, op: str, target: float) -> str:
    met = ratio <= target if op == "<=" else ratio >= target
    verdict = "yes" if met else "NO"
    return f"{label:<28} {kit:<22} {base:<32} {ratio:>6.2f}x  {op} {target:g}x {verdict:>6}"


def report(bench: Bench, rounds: int, elapsed: float) -> None:
    """Print the contestants, the targets and the cold-run phases."""
    s = bench.samples
    med = {k: statistics.median(v) for k, v in s.items()}
    best = {k: (max(v) if k.endswith("steps/s") else min(v)) for k, v in s.items()}
    print(
        f"bench_runner: {rounds} rounds, loop relay of {bench.steps} steps, Python "
        f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, {elapsed:.0f} s"
    )
    print()
    print(f"{'contestant':<22} {'unit':<8} {'median':>9} {'best':>9}   samples")
    print("-" * 78)
    for key in s:
        unit = "steps/s" if key.endswith("steps/s") else "s"
        digits = 0 if unit == "steps/s" else 3
        values = " ".join(f"{v:.{digits}f}" for v in s[key])
        print(f"{key:<22} {unit:<8} {med[key]:>9.{digits}f} {best[key]:>9.{digits}f}   {values}")
    print("(best = min for times, max for rates)")
    print()

    def t(key: str) -> str:
        return f"{med[key]:.3f} s"

    def r(key: str) -> str:
        return f"{med[key]:.0f} steps/s"

    print(f"{'row':<28} {'kit (median)':<22} {'against (median)':<32} {'ratio':>7}  target  met?")
    print("-" * 108)
    rows = [
        _row("1 cold run, one-step", t("kit cold"), "bare DBOS " + t("bare cold"),
             med["kit cold"] / med["bare cold"], "<=", COLD_TARGET),
        _row("2 recovery after crash", t("kit recovery"), "kit fresh run " + t("kit fresh"),
             med["kit recovery"] / med["kit fresh"], "<=", RECOVERY_TARGET),
        _row(f"3 {bench.steps}-step relay", r("kit steps/s"), "bare DBOS WAL " + r("bare wal steps/s"),
             med["kit steps/s"] / med["bare wal steps/s"], ">=", WAL_TARGET),
        _row(f"3 {bench.steps}-step relay", r("kit steps/s"),
             "bare DBOS default " + r("bare default steps/s"),
             med["kit steps/s"] / med["bare default steps/s"], ">=", DEFAULT_TARGET),
    ]
    print("\n".join(rows))
    print(
        f"(info) bare DBOS recovery {t('bare recovery')} = "
        f"{med['bare recovery'] / med['bare fresh']:.2f}x its fresh run {t('bare fresh')} "
        f"(its internal queue is polled about once a second); kit recovery = "
        f"{med['kit recovery'] / med['bare recovery']:.2f}x bare DBOS recovery"
    )
    print()
    print("cold run phases, median ms:")
    names = list(bench.phases["kit"][0])
    print(f"  {'phase':<20} {'kit':>8} {'bare':>8}")
    for name in names:
        k = statistics.median(p[name] for p in bench.phases["kit"])
        b = statistics.median(p[name] for p in bench.phases["bare"])
        print(f"  {name:<20} {k:>8.1f} {b:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, 200-step loop (CI)")
    parser.add_argument("--repeats", type=int, help="timed rounds (default 7, quick 2)")
    parser.add_argument("--steps", type=int, help="steps in the loop relay (default 1000)")
    args = parser.parse_args(argv)
    rounds = args.repeats or (2 if args.quick else 7)
    steps = args.steps or (200 if args.quick else 1000)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        bench = Bench(Path(tmp), steps)
        bench.kit("one", {"x": 1})  # warm the page cache and bytecode for both
        bench.bare("one", {"x": 1})
        for number in range(rounds):
            bench.round(number)
        report(bench, rounds, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
