"""How a benchmark row is judged: the median of its samples, with an interval that says how far
this machine's noise could have moved it.

Design note: a row's target is a ratio such as "the kit's steps per second >= 0.95x bare
DBOS's", and on a shared two-core machine one sample of a contestant can move by 10% from the
next. A verdict taken from the median alone flips from run to run when the truth is within a
few percent of the target. So a row judged here says ``yes`` only when the whole interval
meets the target, ``NO`` when none of it does, and ``unsure`` when the target lies inside it:
more samples (``--loop-samples``, ``--repeats``) narrow it.

The interval is the distribution-free one for a median (from the binomial distribution of how
many samples fall below it): with the samples sorted, ``[x(k), x(n+1-k)]`` holds the true
median with probability ``1 - 2 P(B <= k-1)``, ``B ~ Binomial(n, 1/2)``, whatever the noise's
shape. The largest ``k`` whose coverage is at least the confidence asked for is taken; too few
samples for that give ``k = 1``, the whole range, with the coverage it has (5 samples: 94%).
Fewer than 5 samples (coverage under ``MIN_COVERAGE``: 4 give 88%, 2 give 50%) decide nothing:
such a row is ``unsure`` whatever its figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CONFIDENCE", "MIN_COVERAGE", "Interval", "judge", "median_interval", "too_few"]

#: the coverage asked of an interval
CONFIDENCE = 0.95
#: the least coverage a verdict is given on (the range of 5 samples has 94%)
MIN_COVERAGE = 0.9


@dataclass(frozen=True)
class Interval:
    """The median of ``n`` samples, and the interval ``[low, high]`` that holds the true median
    with probability ``coverage``."""

    median: float
    low: float
    high: float
    coverage: float
    n: int

    def __str__(self) -> str:
        return self.shown()

    def shown(self, unit: str = "x") -> str:
        """``low-high`` in ``unit`` (a ratio ``x`` to 3 decimals; else whole ``unit``s), its
        coverage and its number of samples."""
        digits = 3 if unit == "x" else 0
        spread = f"{self.low:.{digits}f}-{self.high:.{digits}f}{unit}"
        return f"{spread} ({self.coverage:.0%}, n={self.n})"


def _below(n: int, k: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return math.ldexp(sum(math.comb(n, i) for i in range(k + 1)), -n)


def median_interval(samples: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """The median of ``samples`` and its distribution-free interval (see the module's note)."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples to judge")
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * _below(n, k) >= confidence:
        k += 1
    coverage = 1 - 2 * _below(n, k - 1) if n > 1 else 0.0
    return Interval(statistics.median(xs), xs[k - 1], xs[n - k], coverage, n)


def judge(interval: Interval, target: float, op: str) -> str:
    """``yes`` if all of ``interval`` meets ``op target``, ``NO`` if none of it does, else
    ``unsure`` (the noise could have put the truth on either side, or too few samples)."""
    if interval.coverage < MIN_COVERAGE:
        return "unsure"
    if op == ">=":
        meets, fails = interval.low >= target, interval.high < target
    elif op == "<=":
        meets, fails = interval.high <= target, interval.low > target
    else:
        raise ValueError(f"unknown comparison {op!r}")
    return "yes" if meets else "NO" if fails else "unsure"


def too_few(intervals: Iterable[Interval]) -> str | None:
    """A line to print under the rows if any of them had too few samples to be decided."""
    fewest = min((i.n for i in intervals if i.coverage < MIN_COVERAGE), default=None)
    if fewest is None:
        return None
    return (
        f"(a row of {fewest} sample{'s' if fewest > 1 else ''} says unsure whatever its figures: "
        "fewer than 5 decide nothing; the default 5 rounds, or more --repeats, decide them)"
    )
