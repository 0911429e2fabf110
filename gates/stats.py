"""Small statistics for the perf gate: distribution-free intervals for a median.

Per-pair speed ratios have rare large outliers (a pair caught by a clock or
scheduling hiccup, far off the median of an A/A run),
so the gate uses the median with the binomial order-statistic interval, which
needs no normality assumption (docs/measurement.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evo.core.records import Interval


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


def median_interval(xs: Sequence[float], confidence: float = 0.95) -> Interval:
    """Median with the order-statistic interval [x_(k), x_(n-k+1)].

    k is the largest rank whose two-sided coverage is still >= confidence;
    with too few samples for that, the interval is the full range (and says
    so through a coverage below ``confidence``).
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("interval of nothing")
    half_alpha = (1.0 - confidence) / 2.0
    r = 1  # one-based rank of the lower bound; P(B <= r - 1) is the lower tail
    while r + 1 <= (n + 1) // 2 and _binom_cdf(r, n) <= half_alpha:
        r += 1
    coverage = 1.0 - 2.0 * _binom_cdf(r - 1, n)
    return Interval(median(s), s[r - 1], s[n - r], round(coverage, 4), n)


def spread_pct(xs: Sequence[float]) -> float:
    """(p90 - p10) / median in percent: the nvbench-style noise of one series."""
    s = sorted(xs)
    n = len(s)
    if n < 2:
        return 0.0

    def p(q: float) -> float:
        return float(s[min(n - 1, max(0, round(q * (n - 1))))])

    return 100.0 * (p(0.9) - p(0.1)) / median(s)


def geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    tw = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / tw)
