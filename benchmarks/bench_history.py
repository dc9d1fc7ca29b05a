"""Benchmark: reading run history against the SQL floor, side by side in one run.

Run ``python benchmarks/bench_history.py [--quick] [--steps N] [--runs N] [--repeats N]``.
Two rows. (1) The detail of one real run of a relay whose loop calls a trivial step N times
(10,000 by default), loaded into a pandas DataFrame (``read_run_log`` then
``steps_dataframe``), against a raw SQL query of the same rows into a DataFrame
(``pandas.read_sql_query`` of DBOS's ``operation_outputs`` for the run); the same with
redacted output previews decoded is shown beside. (2) Listing M runs (1,000 by default) with
``list_runs`` and ``runs_dataframe``, against reading their ``run.json`` files with
``json.load``. The big run is one real run (unconfined, and a synchronous step, only
to make it quicker to produce); the M run folders are hard-linked copies of one real finished
run with their ``run.json`` identity rewritten. Contestants alternate within each round and
which goes first alternates between rounds; each call is timed as ``timeit`` does, after a
collection and with the garbage collector paused. Benchmarks report, they do not assert:
the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

import pandas as pd  # noqa: E402

from relay_notebook import commands  # noqa: E402
from relay_notebook.history import list_runs, read_run_log  # noqa: E402
from relay_notebook.views.tables import runs_dataframe, steps_dataframe  # noqa: E402
from relay_notebook.workspace import Workspace  # noqa: E402
from relay_notebook.workspace.file_io import write_json_atomic  # noqa: E402

DETAIL_TARGET = 1.5  # detail DataFrame <= 1.5x the raw SQL query of the same rows
LISTING_TARGET_S = 1.0  # listing M runs <= 1 s

BIG = textwrap.dedent(
    """
    from dbos import DBOS


    @DBOS.step()
    def tick(i):
        return {"i": i, "square": i * i}


    @DBOS.workflow()
    async def run(INPUT):
        total = 0
        for i in range(INPUT["n"]):
            total += tick(i)["square"]
        return {"total": total}
    """
)
SMALL = textwrap.dedent(
    """
    from dbos import DBOS


    @DBOS.step()
    async def hello(name):
        return f"hello {name}"


    @DBOS.workflow()
    async def run(INPUT):
        return {"greeting": await hello(INPUT["name"])}
    """
)


def timed(fn: Callable[[], Any]) -> float:
    """Seconds for one call, as ``timeit`` measures: collected before, collector paused."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        if was:
            gc.enable()


def race(contestants: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Every contestant once per round, the order rotating between rounds."""
    names = list(contestants)
    for fn in contestants.values():
        fn()  # warm the page cache and imports
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(timed(contestants[name]))
    return times


def big_run(ws: Workspace, steps: int) -> str:
    ws.save_draft("big", BIG)
    started = time.perf_counter()
    out = commands.run(ws, "big", run_input={"n": steps}).wait(3600)
    if out.status != "succeeded":
        raise SystemExit(f"the {steps:,}-step run did not succeed: {out.error}")
    print(f"  made 1 real run of {steps:,} steps in {time.perf_counter() - started:.1f} s")
    return out.run_id


def many_runs(ws: Workspace, count: int) -> None:
    """One real run, then ``count - 1`` hard-linked copies of its folder, identity rewritten."""
    ws.save_draft("small", SMALL)
    out = commands.run(ws, "small", run_input={"name": "bench"}).wait(300)
    if out.status != "succeeded":
        raise SystemExit(f"the small run did not succeed: {out.error}")
    source = ws.relay_dir("small") / "runs" / "iteration-1-hook"
    meta = json.loads((source / "run.json").read_text())
    for n in range(2, count + 1):
        target = source.parent / f"iteration-{n}-hook"
        shutil.copytree(source, target, copy_function=os.link)
        run_id = f"small-{n}"
        shift = float(n)  # one millisecond apart keeps the order stable
        attempts = [
            {**a, "started_at": a["started_at"] + shift, "ended_at": a["ended_at"] + shift}
            for a in meta["attempts"]
        ]
        identity = {"run_id": run_id, "workflow_id": run_id, "attempts": attempts}
        write_json_atomic(
            target / "run.json", {**meta, **identity, "created_at": meta["created_at"] + shift}
        )
    print(f"  made {count:,} run folders: 1 real run and {count - 1:,} hard-linked copies of it")


def raw_rows(database: Path, run_id: str) -> Callable[[], pd.DataFrame]:
    def query() -> pd.DataFrame:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return pd.read_sql_query(
                "SELECT * FROM operation_outputs WHERE workflow_uuid = ? ORDER BY function_id",
                conn,
                params=(run_id,),
            )
        finally:
            conn.close()

    return query


def raw_listing(ws: Workspace) -> Callable[[], list[dict[str, Any]]]:
    def read() -> list[dict[str, Any]]:
        out = []
        for path in sorted((ws.relay_dir("small") / "runs").glob("iteration-*-hook/run.json")):
            with open(path, encoding="utf-8") as fh:
                out.append(json.load(fh))
        return out

    return read


def row(label: str, kit: float, base: float, target: str, met: bool) -> str:
    return (
        f"{label:<34} {kit * 1000:>9.1f} {base * 1000:>9.1f} {kit / base:>7.2f}x  "
        f"{target:<8} {'yes' if met else 'NO'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 steps, 100 runs, 3 repeats")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.runs, args.repeats = 500, 100, 3
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        ws = Workspace(Path(tmp) / "relays", confine=False)  # only to make the big run faster
        print("setting up:")
        run_id = big_run(ws, args.steps)
        many_runs(ws, args.runs)
        database = ws.relay_dir("big") / "runs" / "iteration-1-hook" / ".relay_dbos" / "dbos.sqlite"
        detail = race(
            {
                "kit": lambda: steps_dataframe(read_run_log(ws, run_id)),
                "kit+outputs": lambda: steps_dataframe(read_run_log(ws, run_id), outputs=True),
                "sql": raw_rows(database, run_id),
            },
            args.repeats,
        )
        listing = race(
            {
                "kit": lambda: runs_dataframe(list_runs(ws)),
                "json": raw_listing(ws),
            },
            args.repeats,
        )
    med = {k: statistics.median(v) for k, v in detail.items()}
    lst = {k: statistics.median(v) for k, v in listing.items()}
    print()
    print(f"medians of {args.repeats} rounds, milliseconds")
    print(f"{'':<34} {'kit':>9} {'floor':>9} {'ratio':>8}  {'target':<8} met")
    print(
        row(
            f"1 detail of a {args.steps:,}-step run",
            med["kit"],
            med["sql"],
            f"<= {DETAIL_TARGET}x",
            med["kit"] <= DETAIL_TARGET * med["sql"],
        )
    )
    print(
        row(
            "1 same, with output previews",
            med["kit+outputs"],
            med["sql"],
            "(shown)",
            True,
        ).removesuffix("yes")
    )
    print(
        row(
            f"2 listing {args.runs:,} runs",
            lst["kit"],
            lst["json"],
            f"<= {LISTING_TARGET_S:g} s",
            lst["kit"] <= LISTING_TARGET_S,
        )
    )
    print()
    print(
        "floor: (1) pandas.read_sql_query of the run's operation_outputs rows; (2) json.load "
        "of every run.json. kit: (1) read_run_log + steps_dataframe (records joined with "
        "run.json's attempts and the ledger); (2) list_runs + runs_dataframe."
    )
    fastest = {k: min(v) * 1000 for k, v in detail.items()}
    print(
        "fastest rounds, ms: "
        + ", ".join(f"{k} {v:.1f}" for k, v in fastest.items())
        + f" (detail ratio {fastest['kit'] / fastest['sql']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
