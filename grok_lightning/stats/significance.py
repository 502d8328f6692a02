r"""Hypothesis tests and effect sizes used by the paper (intervention E12, A3/A7 comparisons).

Paired comparison of outcomes a (control, e.g. group A) and b (treatment, e.g. group B),
with d_i = b_i - a_i (so ``B_minus_A`` in ``intervention_stats.json`` is
``paired_comparison(A, B)``)::

    t = mean(d) / (sd(d) / sqrt(n))          paired t-test, df = n - 1 (scipy ttest_rel)
    Wilcoxon signed-rank on d                (scipy defaults: zero differences dropped)
    Cohen's d_z = mean(d) / sd(d, ddof=1)
    95% CI of mean(d): percentile bootstrap, resampling pairs (scipy.stats.bootstrap,
        default_rng(seed), batches of 2,000 resamples)

Two-sample statistics (x vs y)::

    permutation test: obs = mean(x) - mean(y); p = (#{|perm| >= |obs|} + 1) / (n_perm + 1)
        (the published A3 convention; scipy.stats.permutation_test's two-sided p is twice the
        smaller one-sided p instead, a different number, so this one stays hand-written)
    Cohen's d = (mean(x) - mean(y)) / s_pooled,
        s_pooled^2 = ((n_x - 1) s_x^2 + (n_y - 1) s_y^2) / (n_x + n_y - 2)   (ddof = 1)
    Pearson r with a Fisher-z CI: z = atanh(r) +- 1.96 / sqrt(n - 3) (scipy.stats.pearsonr)

Multiple comparisons: ``correct`` wraps statsmodels ``multipletests`` (Bonferroni, Holm).

>>> round(cohens_d([1.0, 2.0, 3.0], [0.0, 1.0, 2.0]), 6)
1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq

from .arrays import as_1d_float, check_same_length, nan_to_none


@dataclass
class PairedComparison:
    """Field names follow ``intervention_stats.json``; ``to_dict`` returns that schema."""

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    std_diff: float
    t_stat: float
    p_value_t: float
    wilcoxon_p: float
    ci_95_diff: tuple[float, float]
    cohen_d: float
    n_bootstrap: int
    n_dropped: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["ci_95_diff"] = list(self.ci_95_diff)
        return nan_to_none(d)


def paired_comparison(a, b, n_bootstrap: int = 10000, seed: int = 42,
                      nan_policy: str = "raise") -> PairedComparison:
    """Paired comparison of b against a (differences b - a).

    ``nan_policy="omit"`` drops pairs with a NaN on either side (an excluded run) and counts
    them in ``n_dropped``; the default raises.

    >>> r = paired_comparison([1.0, 2.0, 3.0, 4.0], [1.5, 2.4, 3.7, 4.4], n_bootstrap=100)
    >>> r.n, round(r.mean_diff, 3), r.t_stat > 0
    (4, 0.5, True)
    """
    if nan_policy not in ("raise", "omit"):
        raise ValueError("nan_policy must be 'raise' or 'omit'")
    a = as_1d_float(a, "a", allow_nan=True)
    b = as_1d_float(b, "b", allow_nan=True)
    check_same_length(a=a, b=b)
    finite = np.isfinite(a) & np.isfinite(b)
    if not finite.all() and nan_policy == "raise":
        raise ValueError(f"{int((~finite).sum())} pair(s) contain NaN/inf; pass "
                         f"nan_policy='omit' to drop them")
    n_dropped = int((~finite).sum())
    a, b = a[finite], b[finite]
    n = a.size
    if n < 2:
        raise ValueError(f"need at least 2 complete pairs, got {n}")
    if n_bootstrap < 0:
        raise ValueError("n_bootstrap must be >= 0")
    diff = b - a
    notes: list[str] = []
    mean_d = float(diff.mean())
    sd = float(diff.std(ddof=1))
    if sd == 0:
        # t and d are undefined (division by zero): report NaN, not +-inf.
        notes.append("all differences are identical: t, p and Cohen's d are undefined")
        t_stat = p_t = cohen = float("nan")
    else:
        res = sps.ttest_rel(b, a)
        t_stat, p_t, cohen = float(res.statistic), float(res.pvalue), mean_d / sd
    if not np.any(diff):
        # every pair tied: the signed-rank statistic has no ranks (scipy raises or divides by zero,
        # depending on its version), so the case is defined here
        notes.append("Wilcoxon undefined: every difference is zero")
        w_p = float("nan")
    else:
        w_p = float(sps.wilcoxon(diff).pvalue)
    if n_bootstrap:
        # batches of 2,000 resamples keep memory flat for large n (and fix the random stream)
        result = sps.bootstrap((diff,), np.mean, n_resamples=n_bootstrap, batch=2000, method="percentile",
                               random_state=np.random.default_rng(seed), vectorized=True)
        ci = (float(result.confidence_interval.low), float(result.confidence_interval.high))
    else:
        ci = (float("nan"), float("nan"))
    return PairedComparison(n=n, mean_a=float(a.mean()), mean_b=float(b.mean()), mean_diff=mean_d,
                            std_diff=sd, t_stat=t_stat, p_value_t=p_t, wilcoxon_p=w_p,
                            ci_95_diff=ci, cohen_d=cohen, n_bootstrap=n_bootstrap,
                            n_dropped=n_dropped, warnings=notes)


def correct(pvalues, method: str = "bonferroni", alpha: float = 0.05):
    """Family-wise correction: returns ``(reject, p_adjusted)`` numpy arrays.

    >>> reject, p_adj = correct([0.01, 0.02, 0.04], "holm")
    >>> reject.tolist(), p_adj.round(2).tolist()
    ([True, True, True], [0.03, 0.04, 0.04])
    """
    from statsmodels.stats.multitest import multipletests

    if method not in ("bonferroni", "holm"):
        raise ValueError(f"method must be 'bonferroni' or 'holm', got {method!r}")
    p = as_1d_float(pvalues, "pvalues")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    reject, p_adj, _, _ = multipletests(p, alpha=alpha, method=method)
    return np.asarray(reject, bool), np.asarray(p_adj, float)


@dataclass
class PermutationResult:
    obs_diff: float
    p: float
    n_perm: int
    alternative: str
    n_x: int
    n_y: int

    def to_dict(self) -> dict:
        return nan_to_none(dict(self.__dict__))


def _check_alternative(alternative: str) -> None:
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError("alternative must be 'two-sided', 'greater' or 'less'")


def permutation_test(x, y, n_permutations: int = 10000, seed: int = 42,
                     alternative: str = "two-sided") -> PermutationResult:
    """Permutation test of mean(x) - mean(y) with the +1 correction (p >= 1/(n_perm + 1)).

    >>> r = permutation_test([5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], n_permutations=999)
    >>> r.obs_diff, r.p < 0.05
    (4.0, True)
    """
    _check_alternative(alternative)
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    x = as_1d_float(x, "x")
    y = as_1d_float(y, "y")
    pooled = np.concatenate([x, y])
    nx, ny = x.size, y.size
    obs = float(x.mean() - y.mean())
    # Sums of the same numbers in another order differ in the last bits; without a tolerance an
    # exact tie with obs (e.g. the identity permutation) could be missed.
    eps = 1e-10 * max(float(np.abs(pooled).max()), 1e-300)
    rng = np.random.default_rng(seed)
    total, count = pooled.sum(), 0
    for start in range(0, n_permutations, 2000):
        m = min(2000, n_permutations - start)
        perm = rng.permuted(np.broadcast_to(pooled, (m, pooled.size)), axis=1)
        sx = perm[:, :nx].sum(axis=1)
        d = sx / nx - (total - sx) / ny
        if alternative == "two-sided":
            count += int(np.sum(np.abs(d) >= abs(obs) - eps))
        elif alternative == "greater":
            count += int(np.sum(d >= obs - eps))
        else:
            count += int(np.sum(d <= obs + eps))
    return PermutationResult(obs_diff=obs, p=(count + 1) / (n_permutations + 1),
                             n_perm=n_permutations, alternative=alternative, n_x=nx, n_y=ny)


def permutation_p_floor(n_x: int, n_y: int, alternative: str = "two-sided") -> float:
    """The smallest p an exact permutation test of n_x against n_y values can give (a lower bound:
    the Monte-Carlo p of :func:`permutation_test` can fall a little below it by chance). Of the
    C(n_x + n_y, n_x) splits, the observed one is at best the most extreme: p_min = 1 / C; two-sided
    with n_x = n_y its mirror split has the same |difference|, so p_min = 2 / C. It must be below
    the significance level for the test to be able to reject at all.

    >>> permutation_p_floor(2, 2), permutation_p_floor(3, 3), round(permutation_p_floor(3, 5), 4)
    (0.3333333333333333, 0.1, 0.0179)
    >>> permutation_p_floor(2, 2, alternative="greater")
    0.16666666666666666
    """
    if n_x < 1 or n_y < 1:
        raise ValueError("n_x and n_y must be >= 1")
    _check_alternative(alternative)
    ties = 2 if alternative == "two-sided" and n_x == n_y else 1
    return ties / math.comb(n_x + n_y, n_x)


def cohens_d(x, y) -> float:
    """Two-sample Cohen's d with the pooled (ddof = 1) standard deviation."""
    x = as_1d_float(x, "x")
    y = as_1d_float(y, "y")
    nx, ny = x.size, y.size
    if nx + ny < 3 or min(nx, ny) < 1:
        raise ValueError("need n_x + n_y >= 3 with both groups non-empty")
    ss = float(np.sum((x - x.mean()) ** 2) + np.sum((y - y.mean()) ** 2))  # (n-1) s^2 each
    pooled = np.sqrt(ss / (nx + ny - 2))
    if pooled == 0:
        raise ValueError("pooled standard deviation is 0: Cohen's d is undefined")
    return float((x.mean() - y.mean()) / pooled)


def cohens_d_ci(d: float, n_x: int, n_y: int, level: float = 0.95) -> tuple[float, float]:
    """Exact confidence interval of a two-sample Cohen's d by inverting the noncentral t
    (Steiger & Fouladi 1997): t = d sqrt(n_x n_y / (n_x + n_y)) follows nct(df = n_x + n_y - 2,
    ncp = delta sqrt(n_x n_y / (n_x + n_y))); the bounds are the ncp at which the observed t sits at
    the upper and lower (1 - level) / 2 tails, scaled back to d. Hand-written: scipy has the
    distribution but not the inversion.

    >>> lo, hi = cohens_d_ci(1.0, 20, 20)
    >>> round(lo, 2), round(hi, 2)
    (0.34, 1.65)
    """
    if n_x < 1 or n_y < 1 or n_x + n_y < 3:
        raise ValueError("need n_x + n_y >= 3 with both groups non-empty")
    scale = math.sqrt(n_x * n_y / (n_x + n_y))
    return _noncentral_t_interval(d * scale, n_x + n_y - 2, level, scale)


#: The fewest pairs at which a paired Cohen's d is scored against a value. d = t / sqrt(n) with t
#: noncentral t on n - 1 degrees of freedom, which has a mean only for df > 1 and a variance only
#: for df > 2: below 4 pairs the estimate has no finite variance and its exact interval rests
#: wholly on the normality of 2 or 3 differences (at 2 pairs the interval is bounded while the
#: mean difference's t interval is 12.7 SEs wide). Fixed by that property, not by any data.
MIN_PAIRS_COHEN_D = 4


def paired_d_ci(d: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact confidence interval of a paired Cohen's d (mean difference over the SD of the
    differences, ``intervention_stats.json``'s ``cohen_d``): t = d sqrt(n) follows nct(n - 1,
    delta sqrt(n)), inverted as in :func:`cohens_d_ci`.

    >>> lo, hi = paired_d_ci(-0.88, 20)
    >>> round(lo, 2), round(hi, 2)
    (-1.39, -0.35)
    """
    if n < 2:
        raise ValueError("need n >= 2 pairs")
    return _noncentral_t_interval(d * math.sqrt(n), n - 1, level, math.sqrt(n))


def _noncentral_t_interval(t: float, df: int, level: float, scale: float) -> tuple[float, float]:
    """The noncentrality parameters at which the observed ``t`` sits at the upper and lower
    ``(1 - level) / 2`` tails of nct(df, ncp), divided by ``scale``."""
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    tail = (1 - level) / 2
    spread = math.sqrt(1 + t * t / (2 * df))  # roughly the sd of t around its ncp

    def cdf(ncp: float) -> float:
        # far out in ncp scipy's nct.cdf can return NaN; there the cdf is at its limit (1 below t, 0 above)
        value = float(sps.nct.cdf(t, df, ncp))
        return value if math.isfinite(value) else float(ncp < t)

    def ncp_at(q: float) -> float:  # the ncp with P(T <= t | ncp) = q; that cdf falls as ncp rises
        for k in (4.0, 8.0, 16.0, 32.0, 64.0):
            lo, hi = t - k * spread, t + k * spread
            if cdf(lo) >= q >= cdf(hi):
                return brentq(lambda ncp: cdf(ncp) - q, lo, hi)
        raise ValueError(f"no noncentrality bracket found for t = {t:g}, df = {df}")

    return ncp_at(1 - tail) / scale, ncp_at(tail) / scale


def pearson_r(x, y) -> dict:
    """Pearson r, its p-value and a Fisher-z 95% CI (needs n >= 4).

    >>> round(pearson_r([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])["r"], 4)
    0.7746
    """
    x = as_1d_float(x, "x", min_len=4)
    y = as_1d_float(y, "y", min_len=4)
    n = check_same_length(x=x, y=y)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise ValueError("a constant input has no correlation")
    result = sps.pearsonr(x, y)
    ci = result.confidence_interval(confidence_level=0.95)  # Fisher z
    return {"r": float(result.statistic), "p": float(result.pvalue), "n": n, "ci_95": [float(ci.low), float(ci.high)]}


def unbiased_std_factor(n: int) -> float:
    """Factor turning a population std (ddof 0) of ``n`` normal draws into an unbiased estimate of
    sigma: ``sqrt(n / (n - 1)) / c4(n)`` with ``c4(n) = sqrt(2 / (n - 1)) Gamma(n/2) / Gamma((n-1)/2)``.

    sigma_H is a population std over the H heads of a layer, so at small H it reads low (H = 2:
    E[s] = 0.56 sigma; H = 16: 0.95 sigma). Comparing different H needs the unbiased spread; the
    factor depends on H only, so it applies to the layer mean of sigma_H as well.

    >>> round(unbiased_std_factor(2), 3), round(unbiased_std_factor(4), 3), round(unbiased_std_factor(16), 3)
    (1.772, 1.253, 1.05)
    """
    if n < 2:
        raise ValueError(f"n={n}: a spread needs at least 2 values")
    from scipy.special import gammaln

    c4 = math.sqrt(2.0 / (n - 1)) * math.exp(gammaln(n / 2) - gammaln((n - 1) / 2))
    return math.sqrt(n / (n - 1)) / c4
