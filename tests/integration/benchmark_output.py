"""Running a benchmark with ``--quick`` and reading its numbered rows, for the benchmark tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
