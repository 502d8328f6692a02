"""Small-sample intervals, equivalence and tests against published samples (grok_lightning.stats
intervals, equivalence, samples): each checked against an independent computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from grok_lightning.stats.equivalence import (
    Count,
    Estimate,
    difference,
    exact,
    inside,
    mean_of_runs,
    one_run,
    shift_interval,
)
from grok_lightning.stats.intervals import bootstrap_runs, clopper_pearson, median_interval, wilson
from grok_lightning.stats.samples import fisher_counts, rank_test, stratified_exact_test


@pytest.mark.parametrize("n", [3, 5, 8, 15])
def test_the_median_interval_covers_as_often_as_it_says(n):
    rng = np.random.default_rng(n)
    draws = rng.exponential(size=(20000, n))  # skewed: the true median is ln 2
    hits = [median_interval(x).lo <= np.log(2) <= median_interval(x).hi for x in draws[:4000]]
    assert np.mean(hits) == pytest.approx(median_interval(draws[0]).coverage, abs=0.02)


def test_fraction_intervals_match_their_closed_forms():
    k, n = 3, 10
    z = sps.norm.ppf(0.975)
    p = k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert wilson(k, n).ci == pytest.approx([centre - half, centre + half])
    assert clopper_pearson(k, n).ci == pytest.approx([sps.beta.ppf(0.025, k, n - k + 1), sps.beta.ppf(0.975, k + 1, n - k)])
    with pytest.raises(ValueError):
        wilson(4, 3)


def test_a_single_stratum_is_fishers_exact_test():
    for counts in ((1, 3, 8, 10), (0, 3, 2, 30), (5, 5, 1, 9)):
        assert stratified_exact_test([counts]).p_exact == pytest.approx(fisher_counts(*counts), rel=1e-9)


def test_strata_that_agree_with_the_paper_do_not_reject():
    same = stratified_exact_test([(3, 10, 3, 10), (7, 10, 7, 10), (10, 10, 10, 10)])
    assert same.p_exact == pytest.approx(1.0) and same.observed == pytest.approx(same.expected)


def test_the_rank_test_is_exact_with_ties_and_finds_a_shift():
    assert rank_test([1, 2, 3], [1, 2, 3]).p == pytest.approx(1.0)
    shifted = rank_test([200, 210, 220, 230], [100, 110, 110, 120, 130])
    assert shifted.exact and shifted.p == pytest.approx(2 / 126)  # the most extreme of C(9, 4) splits, both tails


def test_the_rank_test_matches_scipys_permutation_test():
    rng = np.random.default_rng(3)
    stat = lambda a, b: sps.mannwhitneyu(a, b, alternative="two-sided").statistic
    for _ in range(5):
        x, y = rng.integers(0, 6, 4) * 10.0, rng.integers(0, 6, 6) * 10.0  # grid values: ties
        slow = sps.permutation_test((x, y), stat, permutation_type="independent", n_resamples=np.inf).pvalue
        assert rank_test(x, y).p == pytest.approx(slow, rel=1e-9)


def test_the_difference_of_two_counts_is_newcombes_interval():
    # Newcombe (1998) method 10 for 56/70 against 48/80: [0.0524, 0.3339] at 95%
    d, lo, hi = difference(Count(56, 70), Count(48, 80), 0.95)
    assert d == pytest.approx(0.2) and (lo, hi) == pytest.approx((0.0524, 0.3339), abs=1e-4)


def test_the_difference_of_two_normal_intervals_adds_their_variances():
    a, b = Estimate(1.0, 0.0, 2.0, 0.95), Estimate(0.5, 0.2, 0.8, 0.95)
    d, lo, hi = difference(a, b, 0.95)
    assert (d, hi - d) == pytest.approx((0.5, np.hypot(1.0, 0.3)))
    _, lo90, hi90 = difference(a, b, 0.90)
    assert hi90 - d == pytest.approx((hi - d) * sps.norm.ppf(0.95) / sps.norm.ppf(0.975))
    assert inside((lo90, hi90), 2.0) and not inside((lo90, hi90), 1.0)
    d, lo, hi = difference(exact(3.0), exact(2.0, 0.5), 0.9, log=True)  # a factor: log(3 / 2) -+ the bound
    assert d == pytest.approx(np.log(1.5)) and lo == pytest.approx(np.log(3 / 2.5)) and hi == pytest.approx(np.log(2))


def test_a_mean_of_runs_against_one_run_is_the_prediction_interval():
    runs = [1.0, 1.4, 2.0, 2.3, 2.9]
    d, lo, hi = difference(mean_of_runs(runs), one_run(1.8, runs), 0.95)
    half = sps.t.ppf(0.975, 4) * np.std(runs, ddof=1) * np.sqrt(1 + 1 / 5)
    assert (lo, hi) == pytest.approx((d - half, d + half))


def test_the_shift_interval_covers_as_often_as_it_says():
    rng = np.random.default_rng(5)
    hits, coverage = [], None
    for _ in range(2000):
        x, y = rng.normal(1.0, 1.0, 6), rng.normal(0.0, 1.0, 5)
        _, lo, hi, coverage = shift_interval(x, y, 0.90)
        hits.append(lo <= 1.0 <= hi)
    assert coverage >= 0.90 and np.mean(hits) == pytest.approx(coverage, abs=0.02)
    assert shift_interval([1, 2], [3, 4], 0.90) is None  # 2 against 2: no 90% interval exists


def test_the_exact_bootstrap_of_three_runs_enumerates_every_resample():
    seen = []
    bootstrap_runs(3, lambda idx: seen.append(tuple(idx)) or 0.0)
    assert len(set(seen)) == 27 and len(seen) == 27 + 1  # every 3^3 resample, then the original order
