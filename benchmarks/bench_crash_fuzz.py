"""Long crash fuzz: hundreds of SIGKILLs of children, supervisors and ``relay recover``.

Run ``python benchmarks/bench_crash_fuzz.py [--child-cases N] [--cli-cases N] [--fork-cases N]
[--seed S]``. Three parts, reported together:

1. **Children**: ``tests/integration/test_crash_fuzz.py`` with ``RELAY_FUZZ_CASES=N`` (and a
   quarter as many on PostgreSQL): each case SIGKILLs the attempt's process group at a random
   moment (a quarter of them twice), recovers, and checks the result, every checkpoint, and
   that no step body ran again once its checkpoint was saved (a side-effect file counts them).
2. **Supervisors and recover**: a real ``relay run`` process (the supervisor, with its child)
   is SIGKILLed as a whole process group at a random moment, then ``relay recover`` is run,
   and itself SIGKILLed at a random moment in a third of the tries, until the run ends; the
   result must be the uncrashed one, every step's body must have run at most once after its
   checkpoint, and no command may end in ``[internal-error]``.
3. **Forks being made**: ``relay fork RUN --from add#2 --set fetch#2=V`` SIGKILLs itself at a
   point of the fork's making drawn from the seed (``RELAY_TEST_KILL_AT``, see
   ``runner.fault_points``), then ``relay recover FORK`` is killed at a completion point drawn
   again, up to three times, and run until the fork ends. The fork must be absent (killed
   before anything was written) or end with the edited result, having run only its fresh calls,
   each once (no copied step run again, no edit lost); the parent must stay byte-identical.

It prints the kills made, where they landed and every failure with its seed. Benchmarks
report, they do not assert: the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RELAY = [sys.executable, "-m", "relay_notebook.cli"]

SOURCE = """\
import os

from dbos import DBOS


def note(step, i):
    fd = os.open("effects.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{step} {i}\\n".encode())
    finally:
        os.close(fd)


@DBOS.step()
async def fetch(i):
    note("fetch", i)
    return i * 10


@DBOS.step()
async def add(total, value):
    note("add", value)
    return total + value


@DBOS.workflow()
async def run(INPUT):
    total = 0
    for i in range(INPUT["n"]):
        value = await fetch(i)
        total = await add(total, value)
    return {"total": total}
"""
N = 6
EXPECTED = {"total": sum(i * 10 for i in range(N))}


def child_part(cases: int) -> tuple[int, int, str]:
    """Run the child-kill fuzz; (cases passed, cases failed, the kills line)."""
    env = {**os.environ, "RELAY_FUZZ_CASES": str(cases)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "integration" / "test_crash_fuzz.py")],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    out = proc.stdout
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", out)) else 0
    failed = int(m.group(1)) if (m := re.search(r"(\d+) failed", out)) else 0
    kills = next((line for line in out.splitlines() if "kills drawn" in line), "")
    if failed:
        print(out[-4000:])
    return passed, failed, kills


def _start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RELAY, "--home", str(home), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _effects(home: Path, run_id: str) -> list[str]:
    number = run_id.rsplit("-", 1)[1]
    path = home / "fuzz" / "runs" / f"iteration-{number}-hook" / "execution" / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def cli_case(home: Path, seed: int, stats: Counter[str]) -> str | None:
    """One supervisor-kill case; None if it held, else what went wrong."""
    rng = random.Random(seed)
    proc = _start(home, "run", "fuzz", "--input", json.dumps({"n": N}), "--json")
    time.sleep(rng.uniform(0.2, 1.6))
    if proc.poll() is None:
        _kill_group(proc)
        stats["supervisor kills"] += 1
    else:
        proc.communicate()
    runs = sorted((home / "fuzz" / "runs").glob("iteration-*-hook"), key=os.path.getmtime)
    if not runs:
        return None  # killed before the run existed: nothing to recover
    if not (runs[-1] / "run.json").exists():
        # killed between allocating the folder and recording the run: no run was started
        stats["killed before the run was recorded"] += 1
        return None
    run_id = f"fuzz-{runs[-1].name.split('-')[1]}"
    last = ""
    for _ in range(12):
        recover = _start(home, "recover", run_id, "--json")
        if rng.random() < 1 / 3:
            time.sleep(rng.uniform(0.1, 2.0))
            if recover.poll() is None:
                _kill_group(recover)
                stats["recover kills"] += 1
                continue
        out, err = recover.communicate(timeout=120)
        last = f"exit {recover.returncode}: {err.strip()[-400:]}"
        if "[internal-error]" in err:
            return f"seed {seed}: recover ended in an internal error: {err.strip()[-300:]}"
        if recover.returncode == 0:
            result = json.loads(out)
            if result.get("result") != EXPECTED:
                return f"seed {seed}: result {result.get('result')} != {EXPECTED}"
            # a body runs again only if an attempt died inside it: at most once per attempt
            number = run_id.rsplit("-", 1)[1]
            meta = home / "fuzz" / "runs" / f"iteration-{number}-hook" / "run.json"
            attempts = len(json.loads(meta.read_text())["attempts"])
            seen = Counter(_effects(home, run_id))
            over = [line for line, n in seen.items() if n > attempts]
            if over:
                return f"seed {seed}: step bodies ran more often than attempts: {over}"
            stats["recovered"] += 1
            return None
        if "[run-locked]" in err or "locked" in err:
            time.sleep(0.5)  # a killed holder's lock is still going away
            continue
        if "[attempt-budget-exhausted]" in err:
            stats["budget used up (kills ate the attempts)"] += 1
            return None
    return f"seed {seed}: run {run_id} did not end after 12 recoveries; the last: {last}"


FORK_FROM = ("--from", "add#2")
#: where `relay recover` completing a half-made fork can be killed (``FORK_POINTS`` after the
#: run.json is written; a point the recovery does not pass lets it finish)
COMPLETION_POINTS = (
    "fork:copied", "fork:forked", "fork:edited", "fork:resumed", "fork:placed", "fork:published",
)  # fmt: skip
FORK_POINTS = ("fork:planned", "fork:recorded", *COMPLETION_POINTS)


def _relay(home: Path, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAY_TEST_KILL_AT"}
    env["RELAY_WARM_START"] = "0"  # a process killed on purpose needs no warm parent
    if kill_at is not None:
        env["RELAY_TEST_KILL_AT"] = kill_at
    return subprocess.run(
        [*RELAY, "--home", str(home), *args], capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def fork_parent(home: Path) -> str:
    """The run every fork case forks: n = 3 (calls fetch#1, add#1, ..., add#3)."""
    (home / "fuzz").mkdir(parents=True, exist_ok=True)
    (home / "fuzz" / "relay.py").write_text(SOURCE)
    done = _relay(home, "run", "fuzz", "--input", json.dumps({"n": 3}), "--json")
    if done.returncode != 0:
        raise RuntimeError(f"the parent run failed: {done.stderr[-400:]}")
    return str(json.loads(done.stdout)["run_id"])


def _passed_points(folder: Path) -> tuple[str | None, ...]:
    """The completion points a recovery of this fork passes now (none once it is complete)."""
    if json.loads((folder / "run.json").read_text())["status"] != "creating":
        return (None,)
    if (folder / ".relay_dbos" / "dbos.sqlite").exists():  # made; its record not yet written
        return ("fork:published",)
    return COMPLETION_POINTS


def fork_case(home: Path, parent: str, seed: int, stats: Counter[str]) -> str | None:
    """One fork-kill case; None if it held, else what went wrong."""
    rng = random.Random(seed)
    value = rng.randrange(100, 10_000)
    expected = {"total": value + 20}  # 0 (copied add#1) + V (the edited fetch#2) + 20
    fresh = [f"add {value}", "fetch 2", "add 20"]  # add#2, fetch#3, add#3: each once
    point = rng.choice(FORK_POINTS)
    runs = home / "fuzz" / "runs"
    before = {p.name for p in runs.iterdir()}
    killed = _relay(home, "fork", parent, *FORK_FROM, "--set", f"fetch#2={value}", kill_at=point)
    if killed.returncode != -signal.SIGKILL:
        return f"seed {seed}: relay fork at {point} exited {killed.returncode}: {killed.stderr}"
    stats["fork kills"] += 1
    made = sorted({p.name for p in runs.iterdir()} - before)
    if point == "fork:planned":
        stats["killed before anything was written"] += 1
        return f"seed {seed}: a fork killed at {point} left {made}" if made else None
    if len(made) != 1:
        return f"seed {seed}: relay fork killed at {point} left {made}"
    fork = f"fuzz-{made[0].split('-')[1]}"
    folder = runs / made[0]
    for tries in range(8):
        kill_at = None
        if tries < 3 and rng.random() < 0.8:
            kill_at = rng.choice(_passed_points(folder))
        done = _relay(home, "recover", fork, "--json", kill_at=kill_at)
        if "[internal-error]" in done.stderr or "Traceback" in done.stderr:
            return f"seed {seed}: recover {fork} ended in an internal error: {done.stderr[-400:]}"
        if done.returncode == -signal.SIGKILL:
            stats["recover kills (completing a fork)"] += 1
            continue
        if done.returncode != 0:
            return f"seed {seed}: recover {fork} exited {done.returncode}: {done.stderr[-400:]}"
        result = json.loads(done.stdout).get("result")
        effects = (folder / "execution" / "effects.log").read_text().splitlines()
        meta = json.loads((folder / "run.json").read_text())
        if result != expected:
            stats["forks with a lost edit"] += 1
            return f"seed {seed}: fork {fork} returned {result}, expected {expected}"
        if effects != fresh:
            stats["forks with a re-run copied step"] += 1
            return f"seed {seed}: fork {fork} ran {effects}, expected only {fresh}"
        if meta["fork"]["edits"]["outputs"] != ["fetch#2"]:
            return f"seed {seed}: fork {fork} records edits {meta['fork']['edits']}"
        stats["forks completed and right"] += 1
        return None
    return f"seed {seed}: fork {fork} did not end after 8 recoveries"


def fork_part(cases: int, seed: int, stats: Counter[str], home: Path | None = None) -> list[str]:
    """The fork-kill cases, in a home of their own; the parent is checked byte for byte."""
    home = home or Path(tempfile.mkdtemp(prefix="relay-fork-fuzz-")) / "relays"
    parent = fork_parent(home)
    parent_folder = home / "fuzz" / "runs" / f"iteration-{parent.rsplit('-', 1)[1]}-hook"
    before = _snapshot(parent_folder)
    problems = [p for i in range(cases) if (p := fork_case(home, parent, seed + i, stats))]
    if _snapshot(parent_folder) != before:
        problems.append(f"the parent {parent} changed while it was forked")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child-cases", type=int, default=320)
    parser.add_argument("--cli-cases", type=int, default=120)
    parser.add_argument("--fork-cases", type=int, default=80)
    parser.add_argument("--seed", type=int, default=9_100_000)
    args = parser.parse_args()
    started = time.time()
    passed, failed, kills = child_part(args.child_cases) if args.child_cases else (0, 0, "")
    child_s = time.time() - started
    home = Path(tempfile.mkdtemp(prefix="relay-fuzz-")) / "relays"
    (home / "fuzz").mkdir(parents=True)
    (home / "fuzz" / "relay.py").write_text(SOURCE)
    stats: Counter[str] = Counter()
    problems = []
    t0 = time.time()
    for i in range(args.cli_cases):
        problem = cli_case(home, args.seed + i, stats)
        if problem:
            problems.append(problem)
    cli_s = time.time() - t0
    t1 = time.time()
    fork_stats: Counter[str] = Counter()
    fork_problems = (
        fork_part(args.fork_cases, args.seed + 50_000, fork_stats) if args.fork_cases else []
    )
    fork_s = time.time() - t1
    drawn = re.search(r"(\d+) kills drawn", kills)
    child_kills = int(drawn.group(1)) if drawn else 0
    fork_kills = fork_stats["fork kills"] + fork_stats["recover kills (completing a fork)"]
    total = child_kills + stats["supervisor kills"] + stats["recover kills"] + fork_kills
    print(f"children: {passed} cases held, {failed} failed in {child_s:.0f} s; {kills.strip()}")
    print(
        f"supervisors and recover: {args.cli_cases} cases in {cli_s:.0f} s; "
        f"{stats['supervisor kills']} supervisor kills, {stats['recover kills']} recover kills, "
        f"{stats['recovered']} runs recovered to the uncrashed result, "
        f"{stats['budget used up (kills ate the attempts)']} ended by the attempt budget, "
        f"{stats['killed before the run was recorded']} killed before the run was recorded; "
        f"{len(problems)} problems"
    )
    for problem in problems:
        print("  " + problem)
    print(
        f"forks being made: {args.fork_cases} cases in {fork_s:.0f} s; {fork_kills} kills "
        f"during a fork's making ({fork_stats['fork kills']} of relay fork, "
        f"{fork_stats['recover kills (completing a fork)']} of relay recover completing one), "
        f"{fork_stats['killed before anything was written']} left no fork, "
        f"{fork_stats['forks completed and right']} forks completed with the edit and only "
        f"their fresh calls run, {fork_stats['forks with a re-run copied step']} with a re-run "
        f"copied step, {fork_stats['forks with a lost edit']} with a lost edit; "
        f"{len(fork_problems)} problems"
    )
    for problem in fork_problems:
        print("  " + problem)
    print(f"total SIGKILLs: {total}")


if __name__ == "__main__":
    main()
