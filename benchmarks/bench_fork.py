"""Benchmark: forking a long run from late in it against a fresh one-step run, side by side.

Run ``python benchmarks/bench_fork.py [--quick] [--repeats N] [--steps N] [--at N]``. A
relay of ``steps`` trivial steps in a loop runs once; then, round after round, the kit forks
that run from ``tick#at`` (copying ``at - 1`` checkpoints, running the rest fresh) and,
alternating with it, starts a fresh run of a one-step relay (both relays are
``bench_runner.py``'s, from ``runner_sources``); both are timed from the call to the finished
outcome, on the caller's side. A fork copies checkpoints (DBOS's fork_workflow in a copy of the
run's SQLite database) and does not run their bodies again, so it should cost about one fresh
run; the target is at most 1.5x. Benchmarks report, they do not assert: the exit status is 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from runner_sources import RELAYS  # noqa: E402

from relay_notebook import commands  # noqa: E402
from relay_notebook.runner.fork import ForkRequest  # noqa: E402
from relay_notebook.runner.runs import start_fork  # noqa: E402
from relay_notebook.workspace import Workspace  # noqa: E402

TARGET = 1.5  # a fork from step 900 of 1,000 <= 1.5x a fresh one-step run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 steps, 3 rounds")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--at", type=int, default=900)
    args = parser.parse_args()
    steps, at, repeats = args.steps, args.at, args.repeats
    if args.quick:
        steps, at, repeats = 100, 90, 3
    # the workspace goes with the benchmark (it was left in the temporary folder, 7 MB a run)
    with tempfile.TemporaryDirectory(prefix="relay-bench-fork-", ignore_cleanup_errors=True) as tmp:
        measure(Workspace(Path(tmp) / "relays"), steps, at, repeats)


def measure(ws: Workspace, steps: int, at: int, repeats: int) -> None:
    """Time the parent run, then forks of it against fresh runs, round by round; print the rows."""
    ws.save_draft("long", RELAYS["loop"])
    ws.save_draft("one", RELAYS["one"])
    started = time.perf_counter()
    parent = commands.run(ws, "long", run_input={"steps": steps}).wait(600)
    parent_s = time.perf_counter() - started
    assert parent.status == "succeeded", parent.error
    rest = steps - at + 1
    times: dict[str, list[float]] = {"fork": [], "prepare": [], "fresh": [], "rest": []}
    for round_no in range(repeats):
        order = ["fork", "fresh", "rest"]
        if round_no % 2:
            order.reverse()
        for which in order:
            t0 = time.perf_counter()
            if which == "fork":
                handle = start_fork(ws, parent.run_id, ForkRequest(f"tick#{at}"))
                times["prepare"].append(time.perf_counter() - t0)
                out = handle.wait(600)
            elif which == "fresh":
                out = commands.run(ws, "one", run_input={"x": 1}).wait(600)
            else:
                out = commands.run(ws, "long", run_input={"steps": rest}).wait(600)
            times[which].append(time.perf_counter() - t0)
            assert out.status == "succeeded", out.error
    med = {k: statistics.median(v) for k, v in times.items()}
    fresh_s = med["fresh"]
    print(f"parent: {steps:,}-step run in {parent_s:.2f} s; forks copy {at - 1:,} checkpoints")
    print(f"{'row':<44} {'median s':>9} {'ratio':>7}  target")
    print(f"{'fresh one-step run':<44} {fresh_s:>9.3f} {1.0:>7.2f}")
    ratio = med["prepare"] / fresh_s
    verdict = "yes" if ratio <= TARGET else "NO"
    print(
        f"{f'fork from tick#{at}: copy and enqueue':<44} {med['prepare']:>9.3f} "
        f"{ratio:>7.2f}  <= {TARGET}x: {verdict}"
    )
    print(
        f"{f'fork from tick#{at}: whole run ({rest} fresh)':<44} {med['fork']:>9.3f} "
        f"{med['fork'] / fresh_s:>7.2f}"
    )
    print(
        f"{f'fresh run of the same {rest} steps':<44} {med['rest']:>9.3f} "
        f"{med['rest'] / fresh_s:>7.2f}  (the fork's floor: it runs these too)"
    )


if __name__ == "__main__":
    main()
