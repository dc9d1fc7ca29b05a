"""The fork benchmark still runs end to end and prints its rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fork.py"


@pytest.mark.slow
def test_quick_fork_benchmark_prints_every_row() -> None:
    """`bench_fork.py --quick` exits 0 with the fresh, fork and floor rows and a verdict."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "fresh one-step run" in out and "copy and enqueue" in out, out
    assert "whole run (11 fresh)" in out and "fresh run of the same 11 steps" in out, out
    assert ("<= 1.5x: yes" in out) or ("<= 1.5x: NO" in out), out
