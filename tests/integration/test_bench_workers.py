"""The worker-pool benchmark still runs end to end and prints its numbered rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_workers.py"


@pytest.mark.slow
def test_quick_benchmark_prints_every_row() -> None:
    """`bench_workers.py --quick`, one round of 4 runs (the rows, not the figures), exits 0 and
    prints the throughput rows, the steps/s row and the warm pool's rows against a spawning
    worker, with the DBOS queue settings."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--repeats", "1", "--runs", "4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line[:2] in ("1 ", "2 ")]
    labels = [line.split("  ")[0] for line in rows]
    assert labels == [
        "1 kit, 1 worker",
        "1 kit, 2 workers",
        "1 kit, 4 workers",
        "1 bare DBOS, 1 worker",
        "2 200-step relay",
    ], proc.stdout
    assert all("runs/s" in line for line in rows[:4]), proc.stdout
    assert "steps/s" in rows[4] and rows[4].rstrip().endswith(("yes", "NO")), rows[4]
    assert "PostgreSQL: " in proc.stdout and "fsync on" in proc.stdout
    warm = [line for line in proc.stdout.splitlines() if line.startswith("3 warm pool")]
    assert [line.split("  ")[0] for line in warm] == [
        "3 warm pool, runs/s",
        "3 warm pool, CPU per run",
    ], proc.stdout
    assert all(line.rstrip().endswith(("yes", "NO")) for line in warm), warm
    assert "worker_concurrency 2, polling_interval_sec 0.5" in proc.stdout
