"""The history benchmark still runs end to end and prints its comparison rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_history.py"


@pytest.mark.slow
def test_quick_benchmark_prints_every_row() -> None:
    """`bench_history.py --quick` exits 0 and prints the detail and listing rows."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line[:2] in ("1 ", "2 ")]
    assert [line.split("  ")[0] for line in rows] == [
        "1 detail of a 500-step run",
        "1 same, with output previews",
        "2 listing 100 runs",
    ], proc.stdout
    assert rows[0].rstrip().endswith(("yes", "NO")) and rows[2].rstrip().endswith(("yes", "NO"))
    assert "hard-linked copies" in proc.stdout
