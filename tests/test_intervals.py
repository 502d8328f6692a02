"""Small-sample intervals, equivalence and tests against published samples (grok_lightning.stats
intervals, equivalence, samples): each checked against an independent computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from grok_lightning.stats.equivalence import equivalence, runs_to_decide, runs_to_decide_fraction
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


def test_equivalence_outcomes_and_the_runs_that_decide():
    assert [equivalence(ci, 1.0, 0.1) for ci in ([0.95, 1.05], [1.2, 1.3], [0.8, 1.05])] == \
        ["equivalent", "different", "undecided"]
    n = runs_to_decide(4, [0.8, 1.05], 0.95, 1.0, 0.1)
    half = 0.15 * np.sqrt(4 / n)  # the wider side shrunk to n runs fits inside the margin
    assert 0.95 - half >= 0.9 - 1e-12 and n > 4  # float64 round-off
    k = runs_to_decide_fraction(0.5, 10, 10, 0.2)
    assert fisher_counts(round(0.5 * k), k, 10, 10) < 0.05 or wilson(round(0.5 * k), k).lo >= 0.8


def test_the_exact_bootstrap_of_three_runs_enumerates_every_resample():
    seen = []
    bootstrap_runs(3, lambda idx: seen.append(tuple(idx)) or 0.0)
    assert len(set(seen)) == 27 and len(seen) == 27 + 1  # every 3^3 resample, then the original order
