"""Benchmark: the kit's step path against DBOS's own, in one process, block by block.

Run ``python benchmarks/bench_step_path.py [--quick] [--blocks N] [--block-steps N]
[--postgres]``. ``bench_runner.py`` row 3 and ``bench_workers.py`` row 2 measure the kit's
steps per second against a bare DBOS script, each contestant a process of its own, one after
the other. On this kind of machine one such sample moves by 10% or more from the next (the
host's speed changes over seconds), so those rows judge a target of 0.95x ``unsure`` unless
the kit is faster than DBOS itself. This benchmark measures the same per-step cost with the
machine's drift paired away: one process, one DBOS, one workflow, two steps doing the same
trivial work. ``tick_bare`` is decorated by DBOS's own ``DBOS.step``; ``tick_kit`` by the
kit's, as a relay's child installs it (``runner.instrument.Instrumentation``: its wrappers,
call-site recording, secret checks, the wait watch, two ledger lines per step written to a
real ledger, ``flock`` and all, held between lines as the child holds it). The workflow runs
them in alternating blocks (``--block-steps`` each, which goes first alternating too) and
times each block (wall, and CPU of the event loop's thread and of the process); a pair is a
kit block and the bare block beside it, so both see the same machine. Blocks are short (20
steps, about 40 ms) and many (600 pairs): the machine drifts less within a pair, and the
interval of the median narrows to about +-0.005 (blocks of 200 steps: +-0.02-0.03). Each
pair's steps-per-second ratio is a sample; the row is judged on their median and its 95%
interval (``verdict``).

What it leaves out, by design: what a run costs once (a process, the sandbox, DBOS's launch,
the supervisor), which ``bench_runner.py`` measures, and a live pipe (none without a listener,
as in that benchmark). Both steps checkpoint to the same database: SQLite (WAL) in a scratch
folder, or with ``--postgres`` a database on a private PostgreSQL server (fsync on), as
``bench_workers.py`` runs it. Benchmarks report, they do not assert: the exit status is 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from verdict import judge, median_interval  # noqa: E402

from relay_notebook.record.ledger import read_events  # noqa: E402

#: the target of issue #30 item 1: the kit's step rate over bare DBOS's
TARGET = 0.95

#: the contestants' process: argv DATABASE_URL FOLDER BLOCKS BLOCK_STEPS; prints its blocks
SCRIPT = """
import asyncio
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from dbos import DBOS, SetWorkflowID

URL, FOLDER = sys.argv[1], Path(sys.argv[2])
BLOCKS, BLOCK_STEPS = int(sys.argv[3]), int(sys.argv[4])


@DBOS.step()
async def tick_bare(i):
    return i


from relay_notebook.record.ledger import EventWriter
from relay_notebook.runner.instrument import Instrumentation
from relay_notebook.runner.waits import WaitWatch

events = EventWriter(FOLDER / "ledger.jsonl", run_id="bench-1", attempt=1, hold=True)
watch = WaitWatch(lambda outcome: None, grace_s=3.0)
here = Path(__file__).resolve()
Instrumentation(events, None, here.parent, None, here.name, watch).install()


@DBOS.step()
async def tick_kit(i):
    return i


def _clock():
    return time.perf_counter(), time.thread_time(), time.process_time()


@DBOS.workflow()
async def blocks(n, size):
    out = []
    for block in range(n):
        pair = {}
        order = ("kit", "bare") if block % 2 == 0 else ("bare", "kit")
        for name in order:
            tick = tick_kit if name == "kit" else tick_bare
            wall, thread, process = _clock()
            for i in range(size):
                await tick(i)
            end = _clock()
            pair[name] = [end[0] - wall, end[1] - thread, end[2] - process]
        out.append(pair)
    return out


async def main():
    if URL.startswith("sqlite:///"):  # WAL, as the kit's run databases and bare DBOS's script
        conn = sqlite3.connect(URL.removeprefix("sqlite:///"))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()
    DBOS(config={
        "name": "bench",
        "system_database_url": URL,
        "application_version": "bench-v1",
        "executor_id": "local",
        "log_level": "WARNING",
    })
    DBOS.launch()
    with SetWorkflowID("bench-1"):
        result = await blocks(BLOCKS, BLOCK_STEPS)
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)


asyncio.run(main())
"""


Pairs = list[dict[str, list[float]]]


def measure(url: str, folder: Path, blocks: int, size: int) -> tuple[Pairs, int]:
    """Run the contestants' process once; its blocks (each pair's times) and the ledger lines
    the kit's steps wrote."""
    script = folder / "step_path.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.run(
        [sys.executable, str(script), url, str(folder), str(blocks), str(size)],
        capture_output=True, text=True, timeout=3600, env=env,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the step-path process exited {proc.returncode}:\n{proc.stderr}")
    # the kit's contestant went the kit's whole way: two ledger lines a step, none for DBOS's
    kinds = Counter(event["kind"] for event in read_events(folder / "ledger.jsonl"))
    if kinds["step_start"] != blocks * size or kinds["step_end"] != blocks * size:
        raise RuntimeError(f"the kit's steps wrote {dict(kinds)}, expected {blocks * size} each")
    pairs = list(json.loads(proc.stdout.strip().splitlines()[-1]))
    return pairs, kinds["step_start"] + kinds["step_end"]


def report(pairs: Pairs, lines: int, size: int, what: str, elapsed: float) -> None:
    """Print the row: the kit's rate over bare DBOS's, per pair; CPU per step beside."""
    rate = [p["bare"][0] / p["kit"][0] for p in pairs]  # same steps: rate ratio = time ratio
    interval = median_interval(rate)
    verdict = judge(interval, TARGET, ">=")

    def per_step(who: str, part: int) -> float:
        return statistics.median(p[who][part] for p in pairs) / size * 1e6

    print(f"bench_step_path: {len(pairs)} pairs of {size}-step blocks, {what}")
    print(f"ledger: {lines} lines, two for each of the kit's steps")
    print(
        f"{'contestant':<12} {'steps/s':>8} {'loop thread CPU/step':>21} {'process CPU/step':>17}"
    )
    for who in ("kit", "bare"):
        steps_s = size / statistics.median(p[who][0] for p in pairs)
        print(
            f"{who:<12} {steps_s:>8.0f} {per_step(who, 1):>18.0f} us {per_step(who, 2):>14.0f} us"
        )
    extra = per_step("kit", 1) - per_step("bare", 1)
    print(
        f"row: kit steps/s over bare DBOS's, paired {interval.median:.3f}x "
        f"({interval.low:.3f}-{interval.high:.3f}, {interval.coverage:.0%}), "
        f"target >= {TARGET}x: {verdict}"
    )
    cpu = [p["kit"][2] / p["bare"][2] for p in pairs]
    cpu_interval = median_interval(cpu)
    print(
        f"     CPU per step (process), paired {cpu_interval.median:.3f}x "
        f"({cpu_interval.low:.3f}-{cpu_interval.high:.3f}); the kit's loop thread "
        f"+{extra:.0f} us a step"
    )
    print(f"({elapsed:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the row; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 pairs of 20 steps (CI)")
    parser.add_argument("--blocks", type=int, help="pairs of blocks (default 600, quick 60)")
    parser.add_argument("--block-steps", type=int, help="steps a block (default 20)")
    parser.add_argument(
        "--postgres", action="store_true", help="on a private PostgreSQL server (fsync on)"
    )
    args = parser.parse_args(argv)
    blocks = args.blocks or (60 if args.quick else 600)
    size = args.block_steps or 20
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-step-path-") as tmp:
        folder = Path(tmp)
        if args.postgres:
            from relay_notebook.testing import postgres_server

            with postgres_server(fsync=True) as server:
                pairs, lines = measure(server.database_url(), folder, blocks, size)
            what = "PostgreSQL (fsync on)"
        else:
            pairs, lines = measure(f"sqlite:///{folder / 'dbos.sqlite'}", folder, blocks, size)
            what = "SQLite (WAL)"
    report(pairs, lines, size, what, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
