"""Profile: where one step's time goes in the child, the kit's against bare DBOS's.

Run ``python benchmarks/profile_step.py [--steps N] [--top N] [--no-bare]``. It runs the loop
relay of ``bench_runner.py`` (``runner_sources.RELAYS["loop"]``: N trivial async steps, 200 by
default) as a real run of the kit, spawned and confined as ``bench_runner.py`` runs it, with
one change to the relay: its workflow body turns ``cProfile`` on around the loop and saves the
profile in ``run_dir``. Every step call therefore goes through the whole path of the kit in
the child (its wrappers, call-site recording, secret checks, the wait watch, ledger events);
only the workflow's start and end are outside the profile. The same loop is then profiled in
a bare DBOS script on SQLite (WAL), as ``bench_runner.py``'s bare contestant runs it.

The profiler's clock is the CPU time of the thread it runs in (``time.thread_time``): the
event loop's thread, where the workflow, its steps' bodies and the kit's wrappers run. DBOS
writes its checkpoints in worker threads (``asyncio.to_thread``), which this profile does not
see; their CPU is in ``bench_runner.py``'s CPU-per-step row. Each contestant runs the loop
twice: first unprofiled (its steps per second, and its CPU per step in the loop thread and in
the whole process), then profiled. Printed per step (the profile's totals divided by N): the
loop thread's CPU, then the functions with the highest cumulative CPU,
and the kit's own functions (``relay_notebook``, ``agentworks``) by cumulative CPU, each with
its own time and its calls per step. A profiler slows every Python call alike, so the
figures are larger than without it; compare them with each other, not with the benchmark's.
A profile reports, it does not assert: the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from runner_sources import BARE_DBOS_CONFIG, STEPS  # noqa: E402

from relay_notebook.runner import start_run  # noqa: E402
from relay_notebook.workspace import Workspace  # noqa: E402


def _profiled_loop(name: str, profile_path: str, save_times: str) -> str:
    """Workflow ``name``: the loop relay's loop, run once unprofiled (its times, written by
    the statement ``save_times``) and once with ``cProfile`` on (saved at ``profile_path``, an
    expression): one body for both contestants, so they profile the same work."""
    return f"""

@DBOS.workflow()
async def {name}(INPUT):
    def threads():
        clocks = {{}}
        for each in threading.enumerate():
            try:
                clock = time.pthread_getcpuclockid(each.ident)
                clocks[f"{{each.name}}#{{each.ident}}"] = time.clock_gettime(clock)
            except (OSError, TypeError):
                pass
        return clocks
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    before = threads()
    total = 0
    for i in range(INPUT["steps"]):
        total += await tick(i)
    wall = time.perf_counter() - wall
    thread, process = time.thread_time() - thread, time.process_time() - process
    after = threads()
    per_thread = {{}}
    for key, end in after.items():
        name = key.split("#")[0].rstrip("0123456789_-")
        per_thread[name] = per_thread.get(name, 0.0) + end - before.get(key, 0.0)
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    for i in range(INPUT["steps"]):
        total += await tick(i)
    profile.disable()
    profile.dump_stats({profile_path})
    times = {{"wall": wall, "thread": thread, "process": process, "threads": per_thread}}
    {save_times}
    return {{"total": total}}
"""


#: the loop relay of ``runner_sources``, its loop between ``enable`` and ``disable``
PROFILED_LOOP = """
import cProfile
import json
import threading
import time

from agentworks import run_dir
""" + _profiled_loop(
    "run", 'str(run_dir / "steps.prof")', '(run_dir / "steps.json").write_text(json.dumps(times))'
)

BARE_LOOP = (
    '''"""Bare DBOS: the loop relay, its loop profiled. Usage: bare.py FOLDER STEPS."""
import asyncio
import cProfile
import json
import os
import sqlite3
import threading
import sys
import time

from dbos import DBOS, SetWorkflowID

FOLDER, STEPS_N = sys.argv[1], int(sys.argv[2])
DB = os.path.join(FOLDER, "dbos.sqlite")


@DBOS.step()
async def tick(i):
    return i
'''
    + _profiled_loop(
        "loop",
        'os.path.join(FOLDER, "steps.prof")',
        'open(os.path.join(FOLDER, "steps.json"), "w").write(json.dumps(times))',
    )
    + """

async def main():
    conn = sqlite3.connect(DB)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
"""
    + BARE_DBOS_CONFIG
    + """    DBOS.launch()
    with SetWorkflowID("bench-1"):
        await loop({"steps": STEPS_N})
    sys.stdout.flush()
    os._exit(0)


asyncio.run(main())
"""
)

KIT_PACKAGES = (f"{os.sep}relay_notebook{os.sep}", f"{os.sep}agentworks{os.sep}")


@dataclass
class Profile:
    """One contestant's loop: its CPU per step without the profiler, and the profile."""

    rate: float  # steps per second, unprofiled
    thread_us: float  # CPU of the loop thread per step, unprofiled
    process_us: float  # CPU of every thread of the process per step, unprofiled
    stats: pstats.Stats
    #: CPU per step of each kind of Python thread (named as ``threading`` names it), unprofiled
    threads_us: dict[str, float]


def _profile(folder: Path, steps: int) -> Profile:
    cpu = json.loads((folder / "steps.json").read_text(encoding="utf-8"))
    return Profile(
        steps / cpu["wall"],
        cpu["thread"] / steps * 1e6,
        cpu["process"] / steps * 1e6,
        pstats.Stats(str(folder / "steps.prof")),
        {name: cpu / steps * 1e6 for name, cpu in cpu.get("threads", {}).items()},
    )


def profile_kit(root: Path, steps: int) -> Profile:
    """The profile of the loop in a real run of the kit (spawned, confined, as benchmarked)."""
    workspace = Workspace(root / "kit", warm_start=False)
    draft = workspace.save_draft("loop", STEPS + PROFILED_LOOP)
    handle = start_run(workspace, draft, run_input={"steps": steps})
    outcome = handle.wait()
    if outcome.status != "succeeded":
        raise RuntimeError(f"the profiled run ended {outcome.status!r}: {outcome.error}")
    return _profile(handle.folder.execution, steps)


def profile_bare(root: Path, steps: int) -> Profile:
    """The profile of the same loop in a bare DBOS script on SQLite (WAL)."""
    folder = root / "bare"
    folder.mkdir()
    script = root / "bare.py"
    script.write_text(BARE_LOOP, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(folder), str(steps)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bare DBOS exited {proc.returncode}:\n{proc.stderr}")
    return _profile(folder, steps)


def _name(func: tuple[str, int, str]) -> str:
    file, line, name = func
    if file == "~":
        return name  # a builtin: "<built-in method ...>"
    parts = Path(file).parts
    for anchor in ("relay_notebook", "agentworks", "dbos", "asyncio", "json", "sqlalchemy"):
        if anchor in parts:
            parts = parts[parts.index(anchor) :]
            break
    else:
        parts = parts[-1:]
    return f"{'/'.join(parts)}:{line}({name})"


def print_profile(title: str, profile: Profile, steps: int, top: int) -> None:
    """The CPU per step, and the top functions by cumulative CPU per step."""
    table = profile.stats.stats  # type: ignore[attr-defined]
    total = profile.stats.total_tt  # type: ignore[attr-defined]
    print(
        f"\n{title}: unprofiled {profile.rate:.0f} steps/s, CPU per step: loop thread "
        f"{profile.thread_us:.0f} us, process {profile.process_us:.0f} us; profiled: loop "
        f"thread {total / steps * 1e6:.0f} us"
    )
    named = sorted(profile.threads_us.items(), key=lambda item: -item[1])
    print("  threads: " + ", ".join(f"{name} {us:.0f} us" for name, us in named if us >= 1))
    rows = sorted(table.items(), key=lambda item: -item[1][3])
    kit = [r for r in rows if any(p in r[0][0] for p in KIT_PACKAGES)]
    for heading, chosen in (("top by cumulative", rows[:top]), ("the kit's own", kit[:top])):
        if not chosen:
            continue
        print(f"  {heading:<62} {'cum us':>8} {'own us':>8} {'calls':>6}")
        for func, (_, calls, own, cumulative, _) in chosen:
            print(
                f"  {_name(func)[:62]:<62} {cumulative / steps * 1e6:>8.1f} "
                f"{own / steps * 1e6:>8.1f} {calls / steps:>6.2f}"
            )


def main(argv: list[str] | None = None) -> int:
    """Profile the kit's loop (and bare DBOS's), print per-step tables; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps in the loop (200)")
    parser.add_argument("--top", type=int, default=30, help="rows per table (30)")
    parser.add_argument("--no-bare", action="store_true", help="profile the kit only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="profile-step-") as tmp:
        root = Path(tmp)
        kit = profile_kit(root, args.steps)
        print(f"profile_step: loop of {args.steps} steps; us per step (cum, own), calls per step")
        print_profile("kit", kit, args.steps, args.top)
        if not args.no_bare:
            print_profile("bare DBOS (WAL)", profile_bare(root, args.steps), args.steps, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
