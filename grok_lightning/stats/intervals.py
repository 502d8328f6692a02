"""Exact small-sample intervals: a fraction's Wilson and Clopper-Pearson intervals, a median's
distribution-free order-statistic interval with its real coverage, a mean's t interval.

With a handful of runs the usual large-sample intervals mislead: a bootstrap "95% CI" of the
median of 3 values is their range, which covers the true median only 75% of the time. Each
function here says what its interval covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from .arrays import as_1d_float

__all__ = ["Interval", "bootstrap_runs", "clopper_pearson", "mean_interval", "median_interval", "wilson"]


@dataclass(frozen=True)
class Interval:
    """An estimate, its interval ``[lo, hi]`` and the interval's real coverage (a probability)."""

    estimate: float
    lo: float
    hi: float
    coverage: float

    @property
    def ci(self) -> list[float]:
        return [self.lo, self.hi]


def _check_count(k: int, n: int) -> None:
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")


def wilson(k: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval of a fraction k/n:
    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = Phi^-1((1 + level)/2).

    >>> r = wilson(2, 30); round(r.lo, 4), round(r.hi, 4)
    (0.0185, 0.2132)
    """
    _check_count(k, n)
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
    return Interval(k / n, float(lo), float(hi), level)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Interval:
    """Clopper-Pearson (exact binomial) interval of k/n: the Beta((1-level)/2; k, n-k+1) and
    Beta((1+level)/2; k+1, n-k) quantiles; it covers at least ``level`` for every true fraction.

    >>> r = clopper_pearson(0, 3); round(r.lo, 4), round(r.hi, 4)
    (0.0, 0.7076)
    """
    _check_count(k, n)
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="beta")
    return Interval(k / n, float(lo), float(hi), level)


def median_interval(values, level: float = 0.95) -> Interval:
    """Distribution-free interval of a median from order statistics:
    ``[x_(j), x_(n+1-j)]`` covers the true median with probability 1 - 2 P(B <= j - 1),
    B ~ Binomial(n, 1/2). The largest j whose coverage reaches ``level`` is used; when even
    ``j = 1`` (the range) falls short, the range is returned with its real, lower coverage.

    >>> r = median_interval([3.0, 1.0, 2.0]); (r.estimate, r.lo, r.hi, r.coverage)
    (2.0, 1.0, 3.0, 0.75)
    >>> r = median_interval(range(15)); (r.lo, r.hi, round(r.coverage, 4))
    (3.0, 11.0, 0.9648)
    """
    x = np.sort(as_1d_float(values, "values"))
    n = x.size
    # coverage of [x_(j), x_(n+1-j)] for j = 1 .. (n+1)//2, falling with j: the last j that reaches level
    coverage = 1.0 - 2.0 * sps.binom.cdf(np.arange((n + 1) // 2), n, 0.5)
    j = max(1, int(np.count_nonzero(coverage >= level)))
    return Interval(float(np.median(x)), float(x[j - 1]), float(x[n - j]), float(coverage[j - 1]))


def mean_interval(values, level: float = 0.95) -> Interval:
    """Student-t interval of a mean: mean -+ t_{(1+level)/2, n-1} s / sqrt(n), s with ddof 1.

    >>> r = mean_interval([1.0, 2.0, 3.0]); round(r.lo, 3), round(r.hi, 3)
    (-0.484, 4.484)
    """
    x = as_1d_float(values, "values", min_len=2)
    half = float(sps.t.ppf((1 + level) / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Interval(float(x.mean()), float(x.mean()) - half, float(x.mean()) + half, level)


def bootstrap_runs(n: int, statistic, level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Percentile interval of ``statistic(indices)`` over resamples of n runs with replacement (for
    a functional of several runs, e.g. the peak of their median curve). With n <= 6 every one of
    the n^n ordered resamples is used (the exact bootstrap distribution), else ``n_resamples``.
    Its real coverage with a handful of runs is unknown and below ``level``: the reported
    ``coverage`` is that of the range of n values for a median, 1 - 2^(1-n), a ceiling for what so
    few runs can give (75% at n = 3).

    >>> r = bootstrap_runs(3, lambda idx: max(idx)); (r.estimate, r.lo, r.hi, r.coverage)
    (2.0, 0.0, 2.0, 0.75)
    """
    import itertools

    if n < 1:
        raise ValueError("n must be >= 1")
    if n ** n <= 50_000:
        draws = [list(d) for d in itertools.product(range(n), repeat=n)]
    else:
        rng = np.random.default_rng(seed)
        draws = [list(rng.integers(0, n, n)) for _ in range(n_resamples)]
    values = np.array([statistic(d) for d in draws], dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        raise ValueError("the statistic is undefined on every resample")
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, tail, method="lower"), np.quantile(values, 1 - tail, method="higher")
    return Interval(float(statistic(list(range(n)))), float(lo), float(hi), min(level, 1.0 - 2.0 ** (1 - n)))
