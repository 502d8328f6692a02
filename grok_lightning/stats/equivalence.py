"""The difference D = ours - paper with both sides' uncertainty, for a verdict in two steps:
is ours *consistent* with the paper (D's 95% interval contains 0), and is it *equivalent* within a
tolerance Delta fixed in advance (D's 90% interval inside -+Delta: two one-sided tests at 5%).

Each side of a comparison is a :class:`Side`: an estimate and its interval at any level.

* :class:`Estimate` (an estimate with any interval with a stated coverage, rescaled to another level by the ratio
  of normal or Student-t quantiles; plus a ``bound`` that holds at every level, e.g. the rounding of
  a printed value),
* :class:`Count` (a count k/n: its Wilson interval at the level asked for),
* :func:`exact` (a value known up to a bound only: a deterministic replay, a printed number),
* :func:`one_run` (the paper's one run, whose spread is the run-to-run spread of our runs of the
  same configuration: with :func:`mean_of_runs` on our side, D's interval is the prediction
  interval of one more run).

:func:`difference` combines two sides by the method of variance estimates recovery (MOVER, Zou and
Donner 2008): ``lo = D - sqrt((a - a_lo)^2 + (b_hi - b)^2)``, ``hi = D + sqrt((a_hi - a)^2 + (b -
b_lo)^2)``. With two Wilson intervals this is Newcombe's interval for a difference of proportions;
with two symmetric normal intervals it is the usual sqrt(se_a^2 + se_b^2). On the ``log`` scale it
is an interval for log(ours / paper), for quantities compared as a factor.

:func:`shift_interval` is the Hodges-Lehmann interval of a shift between two samples (ours against a
published one), inverted from the exact Mann-Whitney distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from .intervals import clopper_pearson, mean_interval, wilson

__all__ = ["Count", "Estimate", "Side", "difference", "exact", "inside", "mean_of_runs", "one_run",
           "shift_interval"]


def _quantile(level: float, df: float) -> float:
    """The two-sided quantile of a level: z or Student t with ``df``."""
    upper = (1.0 + level) / 2.0
    return float(sps.norm.ppf(upper) if math.isinf(df) else sps.t.ppf(upper, df))


class Side:
    """One side of a comparison: ``estimate`` and ``interval(level) -> (lo, hi)``."""

    estimate: float

    def interval(self, level: float) -> tuple[float, float]:
        raise NotImplementedError


@dataclass(frozen=True)
class Estimate(Side):
    """An estimate with an interval ``[lo, hi]`` of real coverage ``coverage`` (an asymmetric one
    keeps its shape); another level scales each side's half-width by q(level) / q(coverage), q from
    Student t with ``df`` (normal when infinite). ``bound`` (a rounding or reading error) is added
    to both ends at every level. A coverage of 1 is a hard bound: the interval at any level.

    >>> Estimate(10.0, 8.0, 13.0).interval(0.95)
    (8.0, 13.0)
    >>> [round(v, 3) for v in Estimate(10.0, 8.0, 13.0).interval(0.90)]
    [8.322, 12.518]
    """

    estimate: float
    lo: float
    hi: float
    coverage: float = 0.95
    df: float = math.inf
    bound: float = 0.0

    def __post_init__(self):
        values = (self.estimate, self.lo, self.hi, self.bound)
        if not all(math.isfinite(v) for v in values) or not self.lo <= self.estimate <= self.hi:
            raise ValueError(f"interval [{self.lo}, {self.hi}] must be finite and contain its estimate {self.estimate}")
        if not 0.0 < self.coverage <= 1.0 or self.bound < 0 or not self.df > 0:
            raise ValueError(f"coverage {self.coverage} must be in (0, 1], bound {self.bound} >= 0, df {self.df} > 0")

    def interval(self, level: float) -> tuple[float, float]:
        scale = 1.0 if self.coverage >= 1.0 else _quantile(level, self.df) / _quantile(self.coverage, self.df)
        return (self.estimate - (self.estimate - self.lo) * scale - self.bound,
                self.estimate + (self.hi - self.estimate) * scale + self.bound)


@dataclass(frozen=True)
class Count(Side):
    """A count k/n with its interval at each level: Wilson's, or with ``exact`` Clopper-Pearson's,
    which covers at least its level for every true fraction (a count near 0 or 1 is where Wilson's
    falls short).

    >>> [round(v, 4) for v in Count(15, 15).interval(0.90)], [round(v, 4) for v in Count(15, 15, True).interval(0.90)]
    ([0.8472, 1.0], [0.819, 1.0])
    """

    k: int
    n: int
    exact: bool = False

    def __post_init__(self):
        if self.n < 1 or not 0 <= self.k <= self.n:
            raise ValueError(f"need 0 <= k <= n and n >= 1, got {self.k}/{self.n}")

    @property
    def estimate(self) -> float:
        return self.k / self.n

    def interval(self, level: float) -> tuple[float, float]:
        return _count_interval(self.k, self.n, level, self.exact)


@lru_cache(maxsize=65536)
def _count_interval(k: int, n: int, level: float, exact_: bool) -> tuple[float, float]:
    w = (clopper_pearson if exact_ else wilson)(k, n, level)
    # the closed forms leave ~1e-17 at the ends: an all-0 (all-1) count has lo = 0 (hi = 1)
    return (0.0 if k == 0 else max(0.0, w.lo)), (1.0 if k == n else min(1.0, w.hi))


def exact(value: float, bound: float = 0.0) -> Estimate:
    """A value known up to ``bound`` at every level (a replay, a printed number)."""
    return Estimate(value, value, value, 1.0, bound=bound)


def mean_of_runs(values) -> Estimate:
    """The mean of our runs with its Student-t interval (df = n - 1)."""
    x = np.asarray(values, float)
    m = mean_interval(x)
    return Estimate(m.estimate, m.lo, m.hi, 0.95, df=x.size - 1)


def one_run(value: float, runs, bound: float = 0.0) -> Estimate:
    """A single run (the paper's) whose run-to-run spread is that of ``runs`` (ours, same
    configuration): value -+ t s. Against :func:`mean_of_runs` of the same runs, D's interval is
    the prediction interval of one more run, mean -+ t s sqrt(1 + 1/n).

    >>> runs = [1.0, 2.0, 3.0]
    >>> d, lo, hi = difference(mean_of_runs(runs), one_run(2.0, runs), 0.95)
    >>> round(hi, 4), round(float(sps.t.ppf(0.975, 2)) * math.sqrt(1 + 1 / 3), 4)
    (4.9683, 4.9683)
    """
    x = np.asarray(runs, float)
    half = _quantile(0.95, x.size - 1) * float(x.std(ddof=1))
    return Estimate(value, value - half, value + half, 0.95, df=x.size - 1, bound=bound)


def _log(side: Side, level: float) -> tuple[float, float, float]:
    lo, hi = side.interval(level)
    if side.estimate <= 0:
        raise ValueError(f"a factor comparison needs a positive estimate, got {side.estimate}")
    log = lambda v: math.log(v) if v > 0 else -math.inf
    return math.log(side.estimate), log(lo), log(hi)


def difference(ours: Side, paper: Side, level: float, log: bool = False) -> tuple[float, float, float]:
    """``(D, lo, hi)``: D = ours - paper (log(ours / paper) with ``log``) and its MOVER interval
    at ``level`` (module docstring).

    >>> [round(v, 4) for v in difference(Count(15, 15), Count(15, 15), 0.90)]
    [0.0, -0.1528, 0.1528]
    >>> [round(v, 3) for v in difference(exact(0.83), exact(0.83, 0.005), 0.95)]
    [0.0, -0.005, 0.005]
    """
    if log:
        a, a_lo, a_hi = _log(ours, level)
        b, b_lo, b_hi = _log(paper, level)
    else:
        (a, (a_lo, a_hi)), (b, (b_lo, b_hi)) = (ours.estimate, ours.interval(level)), (paper.estimate, paper.interval(level))
    d = a - b
    return d, d - math.hypot(a - a_lo, b_hi - b), d + math.hypot(a_hi - a, b - b_lo)


def inside(interval: tuple[float, float], delta: float) -> bool:
    """Whether ``[lo, hi]`` lies within -+delta (equivalence by two one-sided tests when the
    interval is D's 90% interval)."""
    lo, hi = interval
    return -delta <= lo and hi <= delta


@lru_cache(maxsize=None)
def _u_distribution(m: int, n: int) -> np.ndarray:
    """The exact null distribution of Mann-Whitney U for samples of m and n without ties: the
    number of orderings with each U = 0 .. m n, over C(m + n, m)."""
    # f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u): the largest value belongs to x or to y
    if m == 0 or n == 0:
        return np.ones(1)
    a, b = _u_distribution(m - 1, n), _u_distribution(m, n - 1)
    out = np.zeros(m * n + 1)
    out[n:n + a.size] += a
    out[:b.size] += b
    return out


def shift_interval(ours, paper, level: float, log: bool = False) -> tuple[float, float, float, float] | None:
    """Hodges-Lehmann estimate and interval of the shift ours - paper (of the logs with ``log``):
    the median of the m n pairwise differences, and the order statistics ``[d_(k), d_(mn+1-k)]``
    with k the largest such that P(U <= k - 1) <= (1 - level) / 2 under the exact Mann-Whitney null
    (no ties; with ties the interval is slightly conservative). ``(estimate, lo, hi, coverage)``,
    the coverage being the interval's real one; ``None`` when the samples are too small for any
    interval of that level (e.g. 2 against 2).

    >>> [round(v, 3) for v in shift_interval([5, 6, 7, 8, 9], [1, 2, 3], 0.90)]
    [5.0, 3.0, 7.0, 0.929]
    """
    x, y = np.asarray(ours, float), np.asarray(paper, float)
    if log:
        x, y = np.log(x), np.log(y)
    m, n = x.size, y.size
    if m < 1 or n < 1:
        return None
    if m * n <= 2500:
        cdf = np.cumsum(_u_distribution(m, n)) / math.comb(m + n, m)
    else:  # the normal approximation of U (mean mn/2, variance mn(m + n + 1)/12)
        u = np.arange(m * n + 1)
        cdf = sps.norm.cdf((u + 0.5 - m * n / 2) / math.sqrt(m * n * (m + n + 1) / 12))
    tail = (1.0 - level) / 2.0
    below = np.nonzero(cdf <= tail)[0]  # P(U <= u) <= tail for u < k: k - 1 = the largest such u
    if below.size == 0:
        return None
    k = int(below[-1]) + 1
    diffs = np.sort((x[:, None] - y[None, :]).ravel())
    return float(np.median(diffs)), float(diffs[k - 1]), float(diffs[m * n - k]), float(1.0 - 2.0 * cdf[k - 1])
