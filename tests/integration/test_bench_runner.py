"""The runner benchmark still runs end to end and prints its three comparison rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runner.py"


@pytest.mark.slow
def test_quick_benchmark_prints_every_row() -> None:
    """`bench_runner.py --quick`, one round (the rows, not the figures), exits 0 and prints the
    cold-run, recovery, steps/s, warm start and terminal `relay run` rows."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [
        line
        for line in proc.stdout.splitlines()
        if line[:2] in ("1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "7 ")
    ]
    labels = [line.split("  ")[0] for line in rows]
    assert labels == [
        "1 cold run, one-step",
        "2 recovery after crash",
        "3 200-step relay",
        "3 200-step relay",
        "4 warm cold run",
        "5 warm recovery",
        "6 first run, cold parent",
        "7 relay run, terminal",
    ], proc.stdout
    for line in rows:
        assert line.rstrip().endswith(("yes", "NO")), line
    assert "bare DBOS recovery" in proc.stdout
