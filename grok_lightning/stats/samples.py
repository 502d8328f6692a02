"""Tests of our runs against a sample the paper published (its grok epochs, its per-bin grok
counts), rather than against a summary of it.

* :func:`rank_test`: Mann-Whitney U of our values against the paper's, with its exact permutation
  distribution when the number of splits is small (ties are common: grok epochs are multiples of
  10), else the normal approximation.
* :func:`fisher_counts`: Fisher's exact test of two counts k1/n1 and k2/n2.
* :func:`stratified_exact_test`: one test across several bins (strata) of "our grok fraction
  equals the paper's in every bin" against a common shift (common odds ratio != 1): the exact
  conditional test (Birch / Zelen) whose statistic is our total of successes, distributed as the
  convolution of each stratum's hypergeometric given its margins; two-sided p by probability
  ordering, as Fisher's. The Cochran-Mantel-Haenszel chi-square (statsmodels) is returned beside it:
  an approximation that needs expected cell counts of about 5, which a few runs per bin do not give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from .arrays import as_1d_float

__all__ = ["RankTest", "StratifiedTest", "fisher_counts", "rank_test", "stratified_exact_test"]

#: the exact permutation distribution is enumerated up to this many splits
EXACT_SPLITS = 200_000


@dataclass(frozen=True)
class RankTest:
    u: float  # Mann-Whitney U of ours against the paper's
    p: float  # two-sided
    exact: bool  # the exact permutation distribution (else normal approximation)
    n_ours: int
    n_paper: int


def rank_test(ours, paper) -> RankTest:
    """Two-sided Mann-Whitney U test of ``ours`` against ``paper`` (midranks for ties).

    >>> r = rank_test([130, 140, 140], [120, 120, 120, 130, 130, 130, 130, 130])
    >>> r.exact, round(r.p, 4)
    (True, 0.0727)
    """
    x, y = as_1d_float(ours, "ours"), as_1d_float(paper, "paper")
    u = float(sps.mannwhitneyu(x, y, alternative="two-sided").statistic)
    if math.comb(x.size + y.size, x.size) <= EXACT_SPLITS:
        return RankTest(u, _exact_rank_p(x, y), True, x.size, y.size)
    return RankTest(u, float(sps.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue), False,
                    x.size, y.size)


def _exact_rank_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided p of the permutation distribution of U given the pooled midranks (ties kept):
    twice the smaller tail, at most 1, as ``scipy.stats.permutation_test`` gives it. U is our rank
    sum less a constant, so the distribution is that of the sum of ``x.size`` of the pooled
    (doubled, hence integer) midranks over every split, counted by dynamic programming."""
    ranks = np.rint(2 * sps.rankdata(np.concatenate([x, y]))).astype(int)
    m, total = x.size, int(ranks.sum())
    ways = np.zeros((m + 1, total + 1))  # ways[j, s]: subsets of j ranks summing to s
    ways[0, 0] = 1.0
    for r in ranks:
        ways[1:, r:] += ways[:-1, :total + 1 - r].copy()
    dist = ways[m] / math.comb(ranks.size, m)
    observed = int(ranks[:m].sum())
    return float(min(1.0, 2.0 * min(dist[:observed + 1].sum(), dist[observed:].sum())))


def fisher_counts(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p of k1/n1 against k2/n2.

    >>> round(fisher_counts(1, 3, 8, 10), 3)
    0.203
    """
    return float(sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


@dataclass(frozen=True)
class StratifiedTest:
    p_exact: float  # two-sided exact conditional p
    p_cmh: float  # Cochran-Mantel-Haenszel chi-square p (no continuity correction; NaN if undefined)
    observed: int  # our successes over all strata
    expected: float  # their expectation under equal fractions in every stratum
    n_strata: int


def stratified_exact_test(strata) -> StratifiedTest:
    """``strata``: ``[(k_ours, n_ours, k_paper, n_paper), ...]``, one per bin (module docstring).

    >>> r = stratified_exact_test([(0, 3, 2, 30), (1, 3, 8, 10), (2, 3, 10, 10)])
    >>> r.observed, round(r.expected, 2), round(r.p_exact, 3)
    (3, 5.03, 0.09)
    >>> round(r.p_cmh, 3)  # the chi-square approximation, poor at these counts
    0.03
    """
    from statsmodels.stats.contingency_tables import StratifiedTable

    strata = [tuple(int(v) for v in s) for s in strata]
    if not strata:
        raise ValueError("need at least one stratum")
    dist, observed, expected, tables = np.array([1.0]), 0, 0.0, []
    for k1, n1, k2, n2 in strata:
        if n1 < 1 or n2 < 1 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
            raise ValueError(f"stratum {(k1, n1, k2, n2)}: need 0 <= k <= n, n >= 1")
        total = k1 + k2
        support = np.arange(max(0, total - n2), min(n1, total) + 1)
        pmf = np.zeros(min(n1, total) + 1)
        pmf[support] = sps.hypergeom.pmf(support, n1 + n2, total, n1)
        dist = np.convolve(dist, pmf)
        observed, expected = observed + k1, expected + n1 * total / (n1 + n2)
        tables.append(np.array([[k1, n1 - k1], [k2, n2 - k2]], dtype=float))
    p_exact = float(min(1.0, dist[dist <= dist[observed] * (1 + 1e-7)].sum()))
    try:
        p_cmh = float(StratifiedTable(tables).test_null_odds(correction=False).pvalue)
    except (ValueError, ZeroDivisionError, np.linalg.LinAlgError):
        p_cmh = float("nan")
    return StratifiedTest(p_exact, p_cmh, observed, float(expected), len(strata))
