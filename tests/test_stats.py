"""Tests for grok_lightning.stats: golden numbers from the paper's published JSONs + edge cases.

Golden tests read the published aggregates in reference/ and fail if a file is missing.
Numbers measured by these tests are recorded in docs/statistics.md.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import read_reference as _ref
from grok_lightning.stats import (
    P_RELAX_LEVELS,
    PAPER_LR,
    PAPER_T_MAX,
    adamw_bound,
    adamw_bound_table,
    cohens_d,
    cohens_d_ci,
    correct,
    fit_critical_weight_decay,
    fit_exponential_relaxation,
    fit_saturation_models,
    fit_tanh_rise,
    fit_time_to_grok_power_law,
    jackknife_ci,
    kappa_from_rate,
    paired_comparison,
    pearson_r,
    permutation_p_floor,
    permutation_test,
    records_to_arrays,
    relaxation_curve,
    tanh_rise,
)
from reproduce.report import claim


def _expand_bins(bins):
    """Published bins -> per-run outcomes: round(p_grok * n) grokked runs per bin."""
    wd, g = [], []
    for b in bins:
        k = round(b["p_grok"] * b["n"])
        wd += [b["wd"]] * b["n"]
        g += [1] * k + [0] * (b["n"] - k)
    return np.array(wd), np.array(g)


def _is_json_safe(d: dict) -> bool:
    json.dumps(d, allow_nan=False)
    return True


# ------------------------------------------------------------------------ golden: lambda_c
@pytest.fixture(scope="module")
def canonical():
    return _ref("a5_wdc_fit.json")


@pytest.fixture(scope="module")
def paper_fit(canonical):
    wd, g = _expand_bins(canonical["wd_c_fit"]["bins"])
    return fit_critical_weight_decay(wd, g, method="paper", n_bootstrap=1500, seed=42, interval="bootstrap")


def test_paper_lambda_c_golden(paper_fit, canonical):
    """The author's bootstrap over runs (``interval="bootstrap"``) reproduces the published interval."""
    ref = canonical["wd_c_fit"]
    assert abs(paper_fit.wd_c / 0.015771 - 1) < 1e-4
    assert paper_fit.wd_c == pytest.approx(ref["wd_c"], rel=1e-9)  # measured: 0.015771145334983784
    assert paper_fit.k == pytest.approx(13.71, abs=5e-3)  # measured: 13.710396668761742
    assert paper_fit.n_bootstrap_ok == 1500
    lo, hi = paper_fit.wd_c_ci  # measured: [0.010871057907696532, 0.019999975354463285]
    assert abs(lo - 0.0109) < 1e-3 and abs(hi - 0.0200) < 1e-3
    assert abs(lo - ref["wd_c_ci"][0]) < 1e-4 and abs(hi - ref["wd_c_ci"][1]) < 1e-4
    d = paper_fit.to_dict()
    assert _is_json_safe(d) and d["ci_95"] == d["wd_c_ci"] and d["separable"] is False
    for mine, theirs in zip(d["bins"], ref["bins"]):
        assert mine["wd"] == theirs["wd"] and mine["n"] == theirs["n"]
        assert mine["p_grok"] == pytest.approx(theirs["p_grok"], abs=1e-12)
        assert mine["wilson_lo"] <= mine["p_grok"] <= mine["wilson_hi"]
    assert d["n_records"] == 190 and d["warnings"] == []
    assert paper_fit.bootstrap_note() == ""  # every refit kept: nothing for a row to disclose


def test_failed_refits_are_kept_at_their_edge_and_disclosed():
    # 3 runs a bin, as in a medium sweep: many resamples are steps the curve cannot fit
    wd = np.repeat([0.01, 0.02, 0.03, 0.05, 0.1], 3)
    grokked = [0, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1]
    fit = fit_critical_weight_decay(wd, grokked, method="paper", n_bootstrap=300, seed=42, interval="bootstrap")
    assert fit.status == "ok" and 0 < fit.n_bootstrap_ok < 300
    assert fit.bootstrap_note().startswith(f"{300 - fit.n_bootstrap_ok} of 300 refits did not converge")
    assert f"{300 - fit.n_bootstrap_ok} of 300 bootstrap refits did not converge" in " ".join(fit.warnings)
    # kept, not dropped: the interval over every resample is wider than over the converged ones
    converged = np.quantile(10.0 ** fit.bootstrap_params[:, 0], [0.025, 0.975])
    assert fit.wd_c_ci[0] <= converged[0] + 1e-12 or fit.wd_c_ci[1] >= converged[1] - 1e-12


def test_the_reports_lambda_c_interval_draws_each_bins_fraction_from_its_posterior(canonical):
    wd, g = _expand_bins(canonical["wd_c_fit"]["bins"])
    fit = fit_critical_weight_decay(wd, g, n_bootstrap=300, seed=1)
    assert fit.interval == "jeffreys" and fit.to_dict()["ci_method"] == "jeffreys"
    lo, hi = fit.wd_c_ci
    assert lo < fit.wd_c < hi and fit.n_bootstrap_ok == 300  # posterior draws are never a step: all converge
    with pytest.raises(ValueError, match="interval"):
        fit_critical_weight_decay(wd, g, interval="percentile")


def test_glm_lambda_c_golden(canonical, paper_fit):
    wd, g = _expand_bins(canonical["wd_c_fit"]["bins"])
    fit = fit_critical_weight_decay(wd, g, method="glm")
    # measured: lambda_c 0.0171183, k 2.3419, delta CI [0.010773, 0.027202],
    # profile-likelihood CI [0.009961, 0.026104]
    assert fit.status == "ok" and not fit.separable
    assert fit.wd_c == pytest.approx(0.0171183, rel=1e-4)
    assert fit.k == pytest.approx(2.3419, rel=1e-3)
    lo, hi = fit.wd_c_ci
    assert lo < fit.wd_c < hi
    assert lo == pytest.approx(0.010773, rel=1e-3) and hi == pytest.approx(0.027202, rel=1e-3)
    plo, phi = fit.extra["wd_c_ci_profile"]
    assert plo < fit.wd_c < phi and plo == pytest.approx(0.009961, rel=1e-3)
    # per-run likelihood weighs the high-lambda failures (0.7, 1.0): flatter k than least squares
    assert fit.k < paper_fit.k / 3
    assert _is_json_safe(fit.to_dict())


def test_paper_bootstrap_is_reproducible_and_seeded():
    wd = np.repeat([0.001, 0.01, 0.03, 0.1, 1.0], 10)
    g = np.r_[[0] * 10, [0] * 8 + [1] * 2, [1] * 5 + [0] * 5, [1] * 9 + [0], [1] * 10]
    a = fit_critical_weight_decay(wd, g, n_bootstrap=60, seed=1)
    b = fit_critical_weight_decay(wd, g, n_bootstrap=60, seed=1)
    c = fit_critical_weight_decay(wd, g, n_bootstrap=60, seed=2)
    assert a.wd_c_ci == b.wd_c_ci and a.wd_c_ci != c.wd_c_ci and a.wd_c == c.wd_c


def test_laplace_smoothing_and_exclusion():
    wd = np.r_[[0.0] * 3, np.repeat([0.001, 0.01, 0.1, 1.0], 4), [10.0] * 3]
    g = np.r_[[0] * 3, [0, 0, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [0] * 3]
    fit = fit_critical_weight_decay(wd, g, smoothing=0.5, n_bootstrap=20)
    assert fit.n_excluded == 6 and fit.n_fit == 16 and fit.n_records == 22
    assert [b["p_fit"] for b in fit.bins] == pytest.approx([0.1, 0.3, 0.7, 0.9])
    assert [b["p_grok"] for b in fit.bins] == pytest.approx([0.0, 0.25, 0.75, 1.0])
    assert any("excluded 6" in w for w in fit.warnings) and np.isfinite(fit.wd_c)


# ---------------------------------------------------------------- lambda_c edge cases
@pytest.mark.parametrize("method", ["paper", "glm"])
@pytest.mark.parametrize("outcome,status", [(1, "all_grokked"), (0, "none_grokked")])
def test_all_or_none_grokked_is_flagged(method, outcome, status):
    wd = np.repeat([0.01, 0.1, 1.0], 5)
    fit = fit_critical_weight_decay(wd, [outcome] * 15, method=method, n_bootstrap=10)
    assert fit.status == status and math.isnan(fit.wd_c) and fit.warnings
    assert fit.wd_c_bracket == ((0.0, 0.01) if outcome else (1.0, math.inf))
    assert fit.to_dict()["wd_c"] is None


@pytest.mark.parametrize("g", [[0] * 10 + [1] * 10,               # clean step
                               [0] * 10 + [0, 1] * 5 + [1] * 10])  # quasi: one mixed bin
def test_separable_data_is_flagged(g):
    wd = np.repeat([0.001, 0.01, 0.1][: len(g) // 10], 10)
    glm = fit_critical_weight_decay(wd, g, method="glm")
    assert glm.separable and glm.status == "separable" and math.isnan(glm.wd_c)
    assert glm.wd_c_bracket[0] <= glm.wd_c_bracket[1] and any("MLE" in w for w in glm.warnings)
    paper = fit_critical_weight_decay(wd, g, method="paper", n_bootstrap=10)
    assert paper.separable and paper.n_bootstrap_ok == 0 and math.isnan(paper.wd_c_ci[0])


def test_lambda_c_input_errors():
    with pytest.raises(ValueError, match="at least 2 distinct"):
        fit_critical_weight_decay([0.1] * 5, [0, 1, 0, 1, 1])
    with pytest.raises(ValueError, match="non-finite"):
        fit_critical_weight_decay([0.1, np.nan, 1.0], [0, 1, 1])
    with pytest.raises(ValueError, match="non-finite"):
        fit_critical_weight_decay([0.1, 0.5, 1.0], [0, np.nan, 1])
    with pytest.raises(ValueError, match="mismatched"):
        fit_critical_weight_decay([0.1, 0.5, 1.0], [0, 1])
    with pytest.raises(ValueError, match="0/1"):
        fit_critical_weight_decay([0.1, 0.5, 1.0], [0, 2, 1])
    with pytest.raises(ValueError, match="no runs left"):
        fit_critical_weight_decay([0.0, 10.0], [0, 1])
    with pytest.raises(ValueError, match="method"):
        fit_critical_weight_decay([0.1, 1.0], [0, 1], method="probit")
    with pytest.raises(ValueError, match="smoothing"):
        fit_critical_weight_decay([0.1, 1.0], [0, 1], method="glm", smoothing=0.5)


@settings(max_examples=25, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.floats(0, 1)), min_size=2, max_size=6))
def test_bins_have_valid_wilson_intervals(spec):
    wd, g = [], []
    for i, (n, frac) in enumerate(spec):
        k = int(round(frac * n))
        wd += [10.0 ** ((i - 4) / 2)] * n  # 0.01 ... 3.2: all inside the fit range
        g += [1] * k + [0] * (n - k)
    fit = fit_critical_weight_decay(wd, g, n_bootstrap=0)
    assert sum(b["n"] for b in fit.bins) == len(wd)
    for b in fit.bins:
        assert 0 <= b["wilson_lo"] <= b["p_grok"] <= b["wilson_hi"] <= 1
    assert fit.status in ("ok", "extrapolated", "separable", "all_grokked", "none_grokked",
                          "fit_failed")
    if fit.status == "ok":  # a point estimate is only called ok inside the tested range
        assert min(wd) <= fit.wd_c <= max(wd)
    if fit.status == "extrapolated":
        assert any("outside the tested range" in w for w in fit.warnings)


# ------------------------------------------------------------------------------ records
def test_records_to_arrays():
    recs = [{"config": {"wd": 0.1}, "status": "completed", "grok_epoch": 900},
            {"config": {"wd": 0.01}, "status": "completed", "grok_epoch": None},
            {"config": {"wd": 1.0}, "status": "diverged", "grok_epoch": 50},
            {"config": {"wd": 1.0}, "status": "running", "grok_epoch": None},
            {"config": {"wd": 1.0}, "status": "failed", "grok_epoch": None},
            {"config": {"wd": 2.0}, "grok_epoch": 80}]  # paper JSON: no status field
    with pytest.warns(RuntimeWarning, match="skipped 2 record"):
        wd, g, t = records_to_arrays(recs)
    assert wd.tolist() == [0.1, 0.01, 1.0, 2.0] and g.tolist() == [True, False, False, True]
    assert t[0] == 900 and np.isnan(t[1]) and np.isnan(t[2]) and t[3] == 80
    with pytest.raises(ValueError, match="config"):
        records_to_arrays([{"status": "completed", "grok_epoch": None, "config": {}}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert records_to_arrays([])[0].size == 0


# -------------------------------------------------------------------------------- nu
def test_nu_on_published_sample(canonical):
    # The sample holds 30 runs (9/10/8/3) at lambda in {0.1, 0.5, 1, 2} only (the paper's
    # nu = 0.757 used 140 runs over 11 bins). Measured: nu = 0.8416, bootstrap CI [0.8018, 0.8787],
    # OLS CI [0.8049, 0.8782], A = 124.96.
    s = canonical["nu_fit"]["sample"]
    wd = [r["wd"] for r in s]
    t = [r["grok_epoch"] for r in s]
    fit = fit_time_to_grok_power_law(wd, t, canonical["wd_c_fit"]["wd_c"], n_bootstrap=1500,
                                     jackknife=True)
    assert fit.n_points == 30 and fit.n_bootstrap_ok == 1500
    assert fit.nu == pytest.approx(0.8416, abs=1e-3) and 0.6 < fit.nu < 1.0
    assert fit.nu_ci[0] < fit.nu < fit.nu_ci[1] and fit.nu_ci_ols[0] < fit.nu < fit.nu_ci_ols[1]
    assert 100 < fit.A < 150
    assert fit.jackknife["ci_95"][0] < fit.nu < fit.jackknife["ci_95"][1]
    d = fit.to_dict()
    assert _is_json_safe(d) and {"nu", "A", "n_points", "nu_ci", "nu_ci_ols"} <= set(d)
    two = fit_time_to_grok_power_law(wd, t, canonical["wd_c_fit"]["wd_c"], lambdas=[0.1, 0.5],
                                     n_bootstrap=100)
    assert two.n_points == 19 and two.lambdas == [0.1, 0.5]


def test_nu_synthetic_recovery():
    rng = np.random.default_rng(0)
    wd = np.repeat([0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.3, 0.5, 0.7, 1.0, 2.0], 13)
    t = 135 * (wd - 0.0158) ** -0.757 * np.exp(rng.normal(0, 0.25, wd.size))
    t = np.r_[t, np.nan, np.nan]  # two non-grokked runs are ignored
    wd = np.r_[wd, 0.001, 0.01]
    fit = fit_time_to_grok_power_law(wd, t, 0.0158, n_bootstrap=1000, jackknife=True)
    assert fit.n_points == 143
    assert fit.nu_ci[0] < 0.757 < fit.nu_ci[1] and fit.nu_ci_ols[0] < 0.757 < fit.nu_ci_ols[1]
    assert fit.jackknife["ci_95"][0] < 0.757 < fit.jackknife["ci_95"][1]
    assert fit.A == pytest.approx(135, rel=0.15)
    assert fit.predict([0.1])[0] == pytest.approx(fit.A * (0.1 - 0.0158) ** -fit.nu)
    four = fit_time_to_grok_power_law(wd, t, 0.0158, lambdas=(0.1, 0.5, 1.0, 2.0), n_bootstrap=200)
    assert four.n_points == 52 and four.nu_ci[0] < 0.757 < four.nu_ci[1]


def test_nu_input_errors():
    with pytest.raises(ValueError, match="distinct"):
        fit_time_to_grok_power_law([0.1, 0.1, 0.1], [10, 11, 12], 0.0158)
    with pytest.raises(ValueError, match="distinct"):
        fit_time_to_grok_power_law([0.001, 0.01], [10, 11], 0.0158)  # all below lambda_c
    with pytest.raises(ValueError, match="> 0"):
        fit_time_to_grok_power_law([0.1, 0.5, 1.0], [10, -1, 12], 0.0158)
    with pytest.raises(ValueError, match="mismatched"):
        fit_time_to_grok_power_law([0.1, 0.5, 1.0], [10, 12], 0.0158)
    with pytest.raises(ValueError, match="non-finite"):
        fit_time_to_grok_power_law([0.1, np.nan, 1.0], [10, 11, 12], 0.0158)
    with pytest.raises(ValueError, match="lambda_c"):
        fit_time_to_grok_power_law([0.1, 0.5, 1.0], [10, 11, 12], np.nan)


def test_jackknife_formula_matches_reference_json():
    ref = _ref("a5_nu_jackknife.json")
    n, jk = ref["n_points"], ref["jackknife"]
    # LOO values with the reference mean and the spread that gives the reference SE
    z = np.resize([-1.0, 1.0], n)
    loo = jk["nu_mean_leave_one"] + z * jk["se"] / np.sqrt(n - 1)
    out = jackknife_ci(ref["nu_full"], loo)
    assert out["bias_corrected"] == pytest.approx(jk["nu_bias_corrected"], abs=1e-12)
    assert out["se"] == pytest.approx(jk["se"], rel=1e-9)
    assert out["ci_95"] == pytest.approx(jk["ci_95"], abs=1e-9)


# ----------------------------------------------------------------------- paired / tests
def test_paired_comparison_golden_peak_entropy():
    row = _ref("intervention_stats.json")["paired_tests"]["B_minus_A"]["peak_ent"]
    n = row["n"]
    z = np.random.default_rng(3).normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)
    diff = row["mean_diff"] + row["std_diff"] * z  # exactly the published mean and sd
    a = row["mean_a"] + np.random.default_rng(4).normal(0, 0.02, n)
    a += row["mean_a"] - a.mean()
    b = a + diff  # diff = b - a, so B_minus_A = paired_comparison(A, B)
    r = paired_comparison(a, b, n_bootstrap=10000, seed=42)
    for key in ("t_stat", "p_value_t", "cohen_d", "mean_diff", "std_diff", "mean_a", "mean_b"):
        assert getattr(r, key) == pytest.approx(row[key], abs=1e-6), key
    assert r.n == n and 0 < r.wilcoxon_p < 0.05
    lo, hi = r.ci_95_diff  # bootstrap percentile CI: near, not equal to, the published one
    assert lo < r.mean_diff < hi < 0 and abs(lo - row["ci_95_diff"][0]) < 0.01
    assert set(row) <= set(r.to_dict()) and _is_json_safe(r.to_dict())


def test_paired_comparison_edge_cases():
    with pytest.raises(ValueError, match="mismatched"):
        paired_comparison([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        paired_comparison([1, 2, np.nan], [1, 2, 3])
    r = paired_comparison([1, 2, np.nan, 4], [2, 2.5, 3, 5.5], nan_policy="omit", n_bootstrap=50)
    assert r.n == 3 and r.n_dropped == 1
    with pytest.raises(ValueError, match="at least 2"):
        paired_comparison([1.0], [2.0])
    r = paired_comparison([1, 2, 3], [2, 3, 4], n_bootstrap=50)  # constant difference
    assert math.isnan(r.cohen_d) and math.isnan(r.t_stat) and r.warnings
    assert r.ci_95_diff == (1.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # defined in code, not left to scipy's division by zero
        r = paired_comparison([1, 2, 3], [1, 2, 3], n_bootstrap=0)  # every pair tied
    assert math.isnan(r.wilcoxon_p) and "Wilcoxon undefined: every difference is zero" in r.warnings


def test_cohens_d_two_sample_golden():
    ref, perm = _ref("a7_cohens_d.json")["add_vs_random_amplitude"], _ref("a3_perm_test.json")

    def sample(stats, seed):  # published std is numpy's default ddof = 0
        v = np.random.default_rng(seed).normal(size=stats["n"])
        return stats["mean"] + stats["std"] * (v - v.mean()) / v.std()

    x, y = sample(perm["true_amp_stats"], 0), sample(perm["null_amp_stats"], 1)
    assert cohens_d(x, y) == pytest.approx(ref["d"], abs=1e-9)  # 1.1068073316469063
    assert len(x) == ref["n_a"] and len(y) == ref["n_b"]


def test_permutation_p_value_convention():
    ref = _ref("a3_perm_test.json")
    for key in ("amplitude_perm", "entropy_std_perm", "tail_drift_perm"):
        k = ref[key]["p"] * (ref[key]["n_perm"] + 1) - 1  # (count + 1) / (n + 1)
        assert abs(k - round(k)) < 1e-6
    assert round(ref["amplitude_perm"]["p"] * 10001) == 94


def test_permutation_test_sanity():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0, 1, 30), rng.normal(0, 1, 30)
    same = permutation_test(x, y, n_permutations=2000, seed=1)
    assert same.p > 0.05 and (same.p * 2001) == pytest.approx(round(same.p * 2001))
    far = permutation_test(x + 10, y, n_permutations=2000, seed=1)
    assert far.p == pytest.approx(1 / 2001)
    assert permutation_test(x, x, n_permutations=500).p == 1.0  # every permutation ties at 0
    greater = permutation_test(x + 1, y, n_permutations=500, alternative="greater")
    assert greater.p < 0.01 and greater.obs_diff > 0
    with pytest.raises(ValueError):
        permutation_test(x, [np.nan], n_permutations=10)


def test_cohens_d_ci_inverts_the_noncentral_t():
    """The bounds put the observed t at the 2.5% / 97.5% points of the noncentral t; d = 0 gives a
    symmetric interval; large samples approach d +- 1.96 sqrt((n_x + n_y) / (n_x n_y) + d^2 / (2 (n_x + n_y)))."""
    from scipy import stats as sps

    d, nx, ny = 1.107, 44, 15  # the paper's A3 comparison
    lo, hi = cohens_d_ci(d, nx, ny)
    scale = np.sqrt(nx * ny / (nx + ny))
    assert sps.nct.cdf(d * scale, nx + ny - 2, lo * scale) == pytest.approx(0.975, abs=1e-6)
    assert sps.nct.cdf(d * scale, nx + ny - 2, hi * scale) == pytest.approx(0.025, abs=1e-6)
    lo0, hi0 = cohens_d_ci(0.0, 3, 3)
    assert lo0 == pytest.approx(-hi0, abs=1e-9) and hi0 > 0
    big = 2000
    se = np.sqrt(2 / big + 0.25 / (4 * big))
    assert cohens_d_ci(0.5, big, big) == pytest.approx((0.5 - 1.96 * se, 0.5 + 1.96 * se), abs=2e-3)
    with pytest.raises(ValueError):
        cohens_d_ci(1.0, 1, 1)


def test_cohens_d_ci_is_exact_for_two_runs_a_side_with_tight_seeds():
    """2 vs 2 with d = 50 (df 2, t = 50): the bounds still put t at the 97.5% / 2.5% points of the
    noncentral t, checked by integrating Phi(t sqrt(V / df) - ncp) over V ~ chi2(df) (no nct code)."""
    from scipy import integrate
    from scipy import stats as sps

    def cdf(t, df, ncp):
        f = lambda v: sps.norm.cdf(t * np.sqrt(v / df) - ncp) * sps.chi2.pdf(v, df)  # noqa: E731
        return integrate.quad(f, 0, sps.chi2.ppf(1 - 1e-14, df), limit=500, points=[df])[0]

    lo, hi = cohens_d_ci(50.0, 2, 2)  # scale sqrt(2 * 2 / 4) = 1: ncp = d
    assert (lo, hi) == pytest.approx((7.90, 96.07), abs=0.01)
    assert cdf(50.0, 2, lo) == pytest.approx(0.975, abs=1e-4) and cdf(50.0, 2, hi) == pytest.approx(0.025, abs=1e-4)


def test_permutation_p_floor_is_what_the_permutation_test_reaches():
    """Fully separated groups give the smallest p there is: 2/C two-sided with equal sizes (the
    mirror split ties), 1/C otherwise; the Monte-Carlo p sits at that floor within its noise."""
    for nx, ny in ((2, 2), (3, 3), (3, 5)):
        x, y = np.arange(nx) + 100.0, np.arange(ny, dtype=float)
        p = permutation_test(x, y, n_permutations=20000).p
        assert p == pytest.approx(permutation_p_floor(nx, ny), abs=0.006)
    assert permutation_p_floor(3, 3) == pytest.approx(0.1) and permutation_p_floor(3, 3, "greater") == pytest.approx(0.05)


def test_cohens_d_and_correct_and_pearson():
    with pytest.raises(ValueError, match="pooled"):
        cohens_d([1, 1, 1], [1, 1])
    reject, p_adj = correct([0.001, 0.01, 0.04, 0.2], "bonferroni")
    assert p_adj.tolist() == pytest.approx([0.004, 0.04, 0.16, 0.8])
    assert reject.tolist() == [True, True, False, False]
    reject, p_adj = correct([0.001, 0.01, 0.04, 0.2], "holm")
    assert p_adj.tolist() == pytest.approx([0.004, 0.03, 0.08, 0.2])
    with pytest.raises(ValueError):
        correct([0.1, 1.2])
    with pytest.raises(ValueError):
        correct([0.1, np.nan], "holm")
    r = pearson_r(np.arange(10.0), np.arange(10.0) ** 1.5)
    assert r["ci_95"][0] < r["r"] < r["ci_95"][1] <= 1


# ------------------------------------------------------------- curves and the AdamW bound
def test_adamw_bound_golden():
    # Paper Table 4: kappa = 18.583 (18.6 in the text), eta = 1e-3, T_max = 20,000 epochs.
    paper_kappa = claim("fig11.kappa_arithmetic").value
    assert (paper_kappa, PAPER_LR, PAPER_T_MAX) == (18.583, 1e-3, 20000)
    assert round(adamw_bound(18.583, 1e-3, 20000, 0.99), 4) == 0.0124
    assert round(adamw_bound(18.6, 1e-3, 20000, 0.99), 4) == 0.0124
    table = adamw_bound(paper_kappa, PAPER_LR, PAPER_T_MAX, P_RELAX_LEVELS)
    assert table.round(4).tolist() == [0.0019, 0.0032, 0.0062, 0.0081, 0.0124]
    rows = adamw_bound_table(paper_kappa, PAPER_LR, PAPER_T_MAX, empirical_wd_c=0.015771,
                             ci=(0.010897, 0.019999))
    assert [r["in_ci"] for r in rows] == [False] * 4 + [True]
    assert rows[-1]["ratio_to_empirical"] == pytest.approx(0.786, abs=2e-3)
    # early-window kappa 18.4 -> 0.0125, 8.1 -> 0.0284 (paper appendix C.5)
    assert round(adamw_bound(18.4, 1e-3, 20000), 4) == 0.0125
    assert round(adamw_bound(8.1, 1e-3, 20000), 4) == 0.0284
    for bad in ((0, 1e-3, 2e4, 0.9), (18.6, 1e-3, 2e4, 1.0), (18.6, -1, 2e4, 0.5)):
        with pytest.raises(ValueError):
            adamw_bound(*bad)


def test_relaxation_fit_recovers_rate():
    t = np.linspace(0, 20000, 11)  # 11 checkpoints as in the paper's calibration
    om = relaxation_curve(t, 28.4, 55.2, 1.86e-4) + np.random.default_rng(0).normal(0, 0.2, 11)
    fit = fit_exponential_relaxation(t, om)
    assert fit.converged and fit.r2 > 0.99 and fit.rate == pytest.approx(1.86e-4, rel=0.05)
    assert fit.kappa(1e-3, 0.01) == pytest.approx(18.6, rel=0.05)
    assert kappa_from_rate(1.86e-2, 1e-3, 1.0) == pytest.approx(18.6)
    capped = fit_exponential_relaxation(t, om, bounds=([0, 0, 0], [np.inf, 50.0, np.inf]))
    assert "omega_0" in capped.at_bound
    assert _is_json_safe(fit.to_dict())


def test_tanh_fit_bounded_and_unbounded():
    t = np.linspace(0, 3000, 50)
    s = tanh_rise(t, 0.6, 0.25, 1400, 400) + np.random.default_rng(0).normal(0, 0.01, t.size)
    free = fit_tanh_rise(t, s)
    box = fit_tanh_rise(t, s, bounded=True)
    for fit in (free, box):
        assert fit.converged and not fit.degenerate and fit.r2 > 0.95
        assert fit.tc == pytest.approx(1400, rel=0.05) and fit.tau == pytest.approx(400, rel=0.15)
    assert box.bounded and 0 <= box.A <= 1 and 0 <= box.s0 <= 1.5
    flat = fit_tanh_rise(t, 0.5 + 1e-4 * t)  # a straight line: tanh parameters not identified
    assert flat.degenerate
    with pytest.raises(ValueError):
        fit_tanh_rise([1, 2, 3], [1, 2, 3])


def test_saturation_model_selection():
    x = np.array([1.0, 2, 4, 8, 16, 32, 64])
    y = 0.2 * (1 - np.exp(-x / 10)) + 0.02 + np.random.default_rng(0).normal(0, 0.002, x.size)
    out = fit_saturation_models(x, y)
    assert out["best"] == "saturating_exp" and out["delta_aic"]["saturating_exp"] == 0
    assert out["models"]["saturating_exp"]["params"]["b"] == pytest.approx(10, rel=0.2)
    assert set(out["models"]) == {"saturating_exp", "linear", "log", "power"}
    lin = fit_saturation_models(x, 0.003 * x + 0.1 + np.random.default_rng(1).normal(0, 0.001, 7))
    assert lin["best"] in ("linear", "power")
    with pytest.raises(ValueError):
        fit_saturation_models([1, 2, 3], [1, 2, 3])
