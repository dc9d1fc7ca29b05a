"""The benchmarks still run end to end (``--quick``) and print their numbered rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def quick(name: str, *options: str, timeout: float = 300) -> str:
    """What ``benchmarks/NAME.py --quick OPTIONS`` prints, once it has exited 0."""
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick", *options],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def numbered(out: str, last: int) -> list[str]:
    """The rows of ``out`` numbered 1 to ``last``."""
    return [line for line in out.splitlines() if line[:2] in {f"{n} " for n in range(1, last + 1)}]


def labels(rows: list[str]) -> list[str]:
    """Each row's label: what comes before its first double space."""
    return [line.split("  ")[0] for line in rows]


@pytest.mark.slow
def test_quick_fork_benchmark_prints_every_row() -> None:
    """`bench_fork.py --quick` exits 0 with the fresh, fork and floor rows and a verdict."""
    out = quick("bench_fork")
    assert "fresh one-step run" in out and "copy and enqueue" in out, out
    assert "whole run (11 fresh)" in out and "fresh run of the same 11 steps" in out, out
    assert ("<= 1.5x: yes" in out) or ("<= 1.5x: NO" in out), out


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
    """`bench_runner.py --quick`, one round (the rows, not the figures), exits 0 and prints the
    cold-run, recovery, steps/s, warm start and terminal `relay run` rows."""
    out = quick("bench_runner", "--repeats", "1")
    rows = numbered(out, 7)
    assert labels(rows) == [
        "1 cold run, one-step",
        "2 recovery after crash",
        "3 200-step relay",
        "3 200-step relay",
        "4 warm cold run",
        "5 warm recovery",
        "6 first run, cold parent",
        "7 relay run, terminal",
    ], out
    for line in rows:
        assert line.rstrip().endswith(("yes", "NO")), line
    assert "bare DBOS recovery" in out


@pytest.mark.slow
def test_quick_workers_benchmark_prints_every_row() -> None:
    """`bench_workers.py --quick`, one round of 4 runs (the rows, not the figures), exits 0 and
    prints the throughput rows, the steps/s row and the warm pool's rows against a spawning
    worker, with the DBOS queue settings."""
    out = quick("bench_workers", "--repeats", "1", "--runs", "4", timeout=600)
    rows = numbered(out, 2)
    assert labels(rows) == [
        "1 kit, 1 worker",
        "1 kit, 2 workers",
        "1 kit, 4 workers",
        "1 bare DBOS, 1 worker",
        "2 200-step relay",
    ], out
    assert all("runs/s" in line for line in rows[:4]), out
    assert "steps/s" in rows[4] and rows[4].rstrip().endswith(("yes", "NO")), rows[4]
    assert "PostgreSQL: " in out and "fsync on" in out
    warm = [line for line in out.splitlines() if line.startswith("3 warm pool")]
    assert labels(warm) == ["3 warm pool, runs/s", "3 warm pool, CPU per run"], out
    assert all(line.rstrip().endswith(("yes", "NO")) for line in warm), warm
    assert "worker_concurrency 2, polling_interval_sec 0.5" in out
