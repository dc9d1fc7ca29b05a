"""The fork, history and runner benchmarks still run end to end (``--quick``) and print their
numbered rows (the workers' benchmark: ``test_benchmark_workers.py``, a file of its own so the
two halves run on different test workers)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.integration.benchmark_output import labels, numbered, quick


@pytest.mark.slow
def test_quick_fork_benchmark_prints_every_row() -> None:
    """`bench_fork.py --quick` exits 0 with the fresh, fork and floor rows and a verdict, and
    takes its workspace with it (it once left 7 MB in the temporary folder each run)."""
    scratch = Path(tempfile.gettempdir())
    before = set(scratch.glob("relay-bench-fork-*"))
    out = quick("bench_fork")
    assert "fresh one-step run" in out and "copy and enqueue" in out, out
    assert "whole run (11 fresh)" in out and "fresh run of the same 11 steps" in out, out
    assert ("<= 1.5x: yes" in out) or ("<= 1.5x: NO" in out), out
    assert set(scratch.glob("relay-bench-fork-*")) == before


@pytest.mark.slow
def test_quick_history_benchmark_prints_every_row() -> None:
    """`bench_history.py --quick` exits 0 and prints the detail and listing rows."""
    out = quick("bench_history")
    rows = numbered(out, 2)
    assert labels(rows) == [
        "1 detail of a 500-step run",
        "1 same, with output previews",
        "2 listing 100 runs",
    ], out
    assert rows[0].rstrip().endswith(("yes", "NO")) and rows[2].rstrip().endswith(("yes", "NO"))
    assert "hard-linked copies" in out


@pytest.mark.slow
def test_quick_runner_benchmark_prints_every_row() -> None:
    """`bench_runner.py --quick`, one round with a 40-step loop measured twice (the rows, not
    the figures: kept small for the suite's time), exits 0 and prints the cold-run, recovery,
    steps/s, warm start and terminal `relay run` rows, each with its paired samples' interval;
    one round decides no row, so each says unsure."""
    out = quick("bench_runner", "--repeats", "1", "--steps", "40", "--loop-samples", "2")
    rows = numbered(out, 8)
    assert labels(rows) == [
        "1 cold run, one-step",
        "2 recovery after crash",
        "3 40-step relay",
        "3 40-step relay",
        "4 warm cold run",
        "5 warm recovery",
        "6 first run, cold parent",
        "7 relay run, terminal",
        "8 CPU per loop step",
    ], out
    for line in rows:
        assert line.rstrip().endswith("unsure"), line
    lines = out.splitlines()
    at = lines.index("paired medians' intervals (low-high, their coverage, pairs):")
    intervals = [line.split("  ")[1] for line in lines[at + 1 : at + 10]]
    assert intervals == [
        "1 cold run, one-step against bare cold run",
        "2 recovery after crash against kit fresh run",
        "3 40-step relay against bare loop WAL",
        "3 40-step relay against bare loop default",
        "4 warm cold run against bare cold run",
        "5 warm recovery against bare fresh run",
        "6 first run, cold parent against bare cold run",
        "7 relay run, terminal against bare cold run",
        "8 CPU per loop step against bare loop WAL",
    ], out
    pairs = [line.rsplit("n=", 1)[1].rstrip(")") for line in lines[at + 1 : at + 10]]
    assert pairs == ["1", "1", "2", "2", "1", "1", "1", "1", "2"], out  # the loop's twice
    assert lines[at + 10].startswith("(a row of 1 sample says unsure whatever its figures"), out
    assert "bare DBOS recovery" in out


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_quick_step_path_benchmark_prints_its_row(database: str) -> None:
    """`bench_step_path.py --quick` (few small blocks, for the suite's time) exits 0 with its
    contestants, the row judged against 0.95x with its interval, and the CPU row beside; the
    kit's blocks wrote two ledger lines a step (it checks, and fails the run otherwise), so the
    kit's contestant went the kit's whole way. On PostgreSQL it starts a server of its own."""
    options = ["--blocks", "6", "--block-steps", "20"]
    out = quick("bench_step_path", *options, *(["--postgres"] if database == "postgres" else []))
    assert ("PostgreSQL (fsync on)" if database == "postgres" else "SQLite (WAL)") in out, out
    assert "ledger: 240 lines, two for each of the kit's steps" in out, out
    (row,) = [line for line in out.splitlines() if line.startswith("row: ")]
    assert "kit steps/s over bare DBOS's, paired" in row and "target >= 0.95x" in row, out
    assert row.rstrip().endswith(("yes", "NO", "unsure")), out
    assert [line.split()[0] for line in out.splitlines()[3:5]] == ["kit", "bare"], out
