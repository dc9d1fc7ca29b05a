"""How the benchmarks judge a row: the median's distribution-free interval, and yes, NO or
unsure against the target (``benchmarks/verdict.py``)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_verdict() -> ModuleType:
    """``benchmarks/verdict.py`` loaded by path (benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("verdict", BENCHMARKS / "verdict.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("verdict", module)  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


verdict = load_verdict()


@pytest.mark.parametrize(
    ("n", "rank", "coverage"),
    [
        (5, 1, 1 - 2 / 32),  # the whole range: 93.75%
        (10, 2, 1 - 2 * 11 / 1024),  # x(2)..x(9)
        (15, 4, 1 - 2 * (1 + 15 + 105 + 455) / 2**15),  # x(4)..x(12)
        (30, 10, 1 - 2 * sum(math.comb(30, i) for i in range(10)) / 2**30),
    ],
)
def test_the_interval_is_the_order_statistics_the_binomial_gives(
    n: int, rank: int, coverage: float
) -> None:
    samples = [float(x) for x in range(n, 0, -1)]  # unsorted on purpose
    interval = verdict.median_interval(samples)
    assert (interval.low, interval.high) == (rank, n + 1 - rank)
    assert interval.coverage == pytest.approx(coverage)
    assert interval.coverage >= verdict.CONFIDENCE or rank == 1
    assert interval.median == (n + 1) / 2 and interval.n == n


def test_a_row_is_decided_only_when_its_whole_interval_is_on_one_side() -> None:
    clear = verdict.median_interval([0.96, 0.97, 0.98, 0.99, 1.01])
    assert verdict.judge(clear, 0.95, ">=") == "yes"
    assert verdict.judge(clear, 0.955, "<=") == "NO"
    straddling = verdict.median_interval([0.93, 0.96, 0.97, 0.98, 0.99])
    assert straddling.median > 0.95  # the median alone would say yes
    assert verdict.judge(straddling, 0.95, ">=") == "unsure"
    below = verdict.median_interval([0.90, 0.91, 0.92, 0.93, 0.94])
    assert verdict.judge(below, 0.95, ">=") == "NO"
    assert verdict.judge(below, 0.95, "<=") == "yes"


def test_too_few_samples_decide_nothing() -> None:
    """Four samples cover the median with 88% only: far from the target, still unsure."""
    assert verdict.judge(verdict.median_interval([0.5, 0.5, 0.5, 0.5]), 0.95, ">=") == "unsure"
    assert verdict.judge(verdict.median_interval([2.0]), 0.95, ">=") == "unsure"
    with pytest.raises(ValueError, match="no samples"):
        verdict.median_interval([])
    with pytest.raises(ValueError, match="comparison"):
        verdict.judge(verdict.median_interval([1.0] * 5), 1.0, "==")


def test_the_report_says_when_rows_had_too_few_samples() -> None:
    two = verdict.median_interval([1.0, 1.1])
    assert verdict.too_few([verdict.median_interval([1.0] * 5), two]) == (
        "(a row of 2 samples says unsure whatever its figures: fewer than 5 decide nothing; the "
        "default 5 rounds, or more --repeats, decide them)"
    )
    assert verdict.too_few([verdict.median_interval([1.0] * 5)]) is None
