r"""Critical weight decay lambda_c: where P(grok) crosses 1/2.

Model (both methods)::

    P(grok | lambda) = 1 / (1 + exp(-k * (log10 lambda - log10 lambda_c)))

``method="paper"`` (the published method, reproduced exactly):
    least squares (``scipy.optimize.curve_fit``, p0 = (log10 0.05, 5)) of the curve on the
    per-bin grok fractions p_j = g_j / n_j (or (g_j + a) / (n_j + 2a) with Laplace smoothing
    ``smoothing=a``). Runs with lambda <= 0 or lambda > 5 are excluded (collapse regime).
    CI (``interval="jeffreys"``, the default): each bin's grok fraction is drawn from its Jeffreys
    posterior Beta(g + 1/2, n - g + 1/2), the curve refit to the drawn fractions from the point
    estimate, ``n_bootstrap`` times; the 2.5/97.5 percentiles of lambda_c. Its simulated coverage
    is about nominal on the paper's design (docs/statistics.md), where the author's bootstrap
    covers about 80%: a bin at 10/10 never varies in a resample of its runs, though its true
    fraction may be 0.97.
    CI (``interval="bootstrap"``, the author's, which reproduces the published interval):
    percentile bootstrap over runs - resample the (lambda, grok) runs with replacement using
    Python ``random.Random(seed)`` exactly as the author's aggregator does (runs grouped by
    lambda in order of first appearance, ``randrange(N)`` N times per resample), recompute bin
    fractions, refit from p0 = the point estimate, take the 2.5/97.5 percentiles.
    Either way a refit that does not converge (a step, which the curve only approaches as
    k -> inf, or a resample that drew < 2 bins) is not dropped, as the author's aggregator drops
    it, but kept at the lambda_c its bins imply: the step's edge, halfway (in log10 lambda)
    between the last bin below 1/2 and the first at or above it, or the grid's end when every
    bin is on one side; ``n_bootstrap_ok`` counts the refits that converged. Every bin weighs the
    same whatever its n: the 30-run bins count as much as the 10-run ones.

``method="glm"`` (our addition):
    binomial GLM with logit link on the per-run 0/1 outcomes against x = log10 lambda
    (statsmodels): logit P = b0 + b1 x, so k = b1 and log10 lambda_c = -b0 / b1. This is the
    maximum-likelihood version: each run counts once, so big bins weigh more and bins near
    0/1 carry the binomial variance, which the least-squares fit ignores. On the canonical
    bins the high-lambda failures (0.7, 1.0) flatten the GLM slope and move lambda_c; both
    are reported. CI: delta method on theta = -b0/b1, grad = (-1/b1, b0/b1^2),
    theta +- 1.96 se, mapped through 10**theta (so asymmetric in lambda). A profile-likelihood
    CI (refit logit P = k (x - theta) over k for fixed theta; keep theta with
    2 (llf_max - llf(theta)) <= chi2_1(0.95)) is returned as ``wd_c_ci_profile``.
    If the data are separable (max lambda of a failure <= min lambda of a success, i.e. a
    clean step, at most one mixed bin) the MLE does not exist (b1 -> inf): the result is
    flagged ``separable=True`` with ``wd_c = nan`` and the bracket that contains lambda_c.

All grokked / none grokked: lambda_c lies outside the grid; both methods return NaN with
``status`` ``"all_grokked"``/``"none_grokked"`` and the bracket. One bin, NaN input, or
mismatched lengths raise ``ValueError``.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import OptimizeWarning, brentq, curve_fit
from scipy.stats import chi2

from .arrays import as_1d_float, as_bool_outcome, check_same_length, group_bins, nan_to_none

PAPER_P0 = (float(np.log10(0.05)), 5.0)  # the author's initial guess
WD_MAX = 5.0  # runs above this are in the collapse regime and excluded, as in the paper
Z95 = 1.959963984540054


def logistic_log10(log_wd, log_wd_c, k):
    """P(grok) at log10 lambda = ``log_wd``; the published curve."""
    return 1.0 / (1.0 + np.exp(-k * (log_wd - log_wd_c)))


@dataclass
class CriticalFit:
    """Result of :func:`fit_critical_weight_decay`; ``to_dict`` gives the reference schema."""

    method: str
    wd_c: float
    k: float
    wd_c_ci: tuple[float, float]
    n_bootstrap: int | None
    n_bootstrap_ok: int | None  # refits that converged; the others are kept at their implied edge
    n_records: int  # runs passed in, excluded ones included (the author's n_points / n_records)
    n_fit: int  # runs that entered the fit
    n_excluded: int
    smoothing: float
    bins: list[dict]
    separable: bool
    status: str  # ok | extrapolated | separable | all_grokked | none_grokked | fit_failed
    wd_c_bracket: tuple[float, float]
    warnings: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    #: how ``wd_c_ci`` of the paper method was made: "jeffreys" (refits to posterior draws of the
    #: bin fractions) or "bootstrap" (the author's bootstrap over runs)
    interval: str = "jeffreys"
    #: (log10 lambda_c, k) of every converged refit (figures draw the band from these);
    #: not part of ``to_dict``
    bootstrap_params: np.ndarray | None = field(default=None, repr=False)

    def curve_band(self, wd, level: float = 0.95) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise percentile band of the bootstrap logistic curves at ``wd`` (None without)."""
        if self.bootstrap_params is None or len(self.bootstrap_params) < 2:
            return None
        log_wd = np.log10(np.asarray(wd, float))[None, :]
        curves = logistic_log10(log_wd, self.bootstrap_params[:, :1], self.bootstrap_params[:, 1:])
        tail = 50.0 * (1.0 - level)
        return np.percentile(curves, tail, axis=0), np.percentile(curves, 100.0 - tail, axis=0)

    def bootstrap_note(self) -> str:
        """Says how many bootstrap refits failed and what became of them ('' when none did).

        >>> fit = CriticalFit("paper", 0.02, 10.0, (0.01, 0.04), 1500, 872, 22, 22, 0, 0.0, [], False,
        ...                   "ok", (0.01, 0.05))
        >>> fit.bootstrap_note()
        '628 of 1500 refits did not converge (a step, or < 2 bins drawn): kept at the lambda_c edge their bins imply, not dropped'
        """
        if not self.n_bootstrap or self.n_bootstrap_ok is None or self.n_bootstrap_ok >= self.n_bootstrap:
            return ""
        return (f"{self.n_bootstrap - self.n_bootstrap_ok} of {self.n_bootstrap} refits did not converge "
                f"(a step, or < 2 bins drawn): kept at the lambda_c edge their bins imply, not dropped")

    def to_dict(self) -> dict[str, Any]:
        out = {
            "method": self.method, "wd_c": self.wd_c, "k": self.k,
            # the author's JSONs store tau = 1/k
            "tau": 1.0 / self.k if np.isfinite(self.k) and self.k != 0 else float("nan"),
            "wd_c_ci": list(self.wd_c_ci), "ci_95": list(self.wd_c_ci),
            "n_bootstrap": self.n_bootstrap, "n_bootstrap_ok": self.n_bootstrap_ok,
            "ci_method": self.interval if self.method == "paper" else "delta",
            "n_records": self.n_records, "n_fit": self.n_fit, "n_excluded": self.n_excluded,
            "smoothing": self.smoothing, "bins": self.bins, "separable": self.separable,
            "status": self.status, "wd_c_bracket": list(self.wd_c_bracket),
            "warnings": list(self.warnings),
        }
        out.update(self.extra)
        return nan_to_none(out)


def _bin_rates(n: np.ndarray, n_grok: np.ndarray, smoothing: float) -> np.ndarray:
    # Laplace smoothing (g + a) / (n + 2a) keeps bins off 0/1 (used for Mamba, a = 0.5).
    return (n_grok + smoothing) / (n + 2.0 * smoothing)


def _wilson_bins(wd, n, n_grok, p_fit) -> list[dict]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(n_grok, n, alpha=0.05, method="wilson")
    # the closed form leaves ~1e-17 rounding at the ends; an all-0 (all-1) bin has lo = 0 (hi = 1)
    lo = np.where(n_grok == 0, 0.0, np.clip(lo, 0.0, 1.0))
    hi = np.where(n_grok == n, 1.0, np.clip(hi, 0.0, 1.0))
    return [{"wd": float(w), "p_grok": float(g / m), "n": int(m), "n_grok": int(g),
             "wilson_lo": float(a), "wilson_hi": float(b), "p_fit": float(pf)}
            for w, m, g, a, b, pf in zip(wd, n, n_grok, lo, hi, p_fit)]


def _separation(wd: np.ndarray, y: np.ndarray) -> tuple[str, tuple[float, float]]:
    """Classify the outcome pattern and bracket lambda_c from the data alone."""
    if not y.any():
        return "none_grokked", (float(wd.max()), float("inf"))
    if y.all():
        return "all_grokked", (0.0, float(wd.min()))
    lo_fail, hi_fail = wd[~y].min(), wd[~y].max()
    lo_grok, hi_grok = wd[y].min(), wd[y].max()
    # In one dimension the logistic MLE exists iff the two classes overlap strictly.
    if hi_fail <= lo_grok:
        return "separable", (float(hi_fail), float(lo_grok))
    if hi_grok <= lo_fail:  # grokking only at low lambda: separable the other way round
        return "separable", (float(hi_grok), float(lo_fail))
    return "ok", (float("nan"), float("nan"))


def fit_critical_weight_decay(weight_decay, grokked, method: str = "paper", smoothing: float = 0.0,
                              n_bootstrap: int = 1500, seed: int = 42, interval: str = "jeffreys") -> CriticalFit:
    """Fit lambda_c (see the module docstring for both methods).

    >>> wd = [0.001] * 10 + [0.01] * 10 + [0.1] * 10 + [1.0] * 10
    >>> g = [0] * 10 + [0] * 7 + [1] * 3 + [1] * 9 + [0] + [1] * 10
    >>> fit = fit_critical_weight_decay(wd, g, n_bootstrap=100)
    >>> fit.status, round(fit.wd_c, 4), fit.bins[1]["p_grok"], fit.n_bootstrap_ok
    ('ok', 0.0189, 0.3, 100)
    >>> fit_critical_weight_decay(wd, g, n_bootstrap=100, interval="bootstrap").n_bootstrap_ok < 100
    True

    Refits that do not converge (in the author's bootstrap here, resamples such as p = (0, 0.2,
    1, 1), whose least-squares optimum is a step) are kept at the edge they imply and counted in
    ``warnings``.
    """
    if method not in ("paper", "glm"):
        raise ValueError(f"method must be 'paper' or 'glm', got {method!r}")
    if interval not in ("jeffreys", "bootstrap"):
        raise ValueError(f"interval must be 'jeffreys' or 'bootstrap', got {interval!r}")
    if smoothing < 0 or not np.isfinite(smoothing):
        raise ValueError(f"smoothing must be a finite number >= 0, got {smoothing}")
    if method == "glm" and smoothing:
        raise ValueError("smoothing applies to the least-squares 'paper' method only; the GLM "
                         "uses the per-run outcomes")
    if n_bootstrap < 0:
        raise ValueError("n_bootstrap must be >= 0")
    wd_all = as_1d_float(weight_decay, "weight_decay")
    y_all = as_bool_outcome(grokked, "grokked")
    check_same_length(weight_decay=wd_all, grokked=y_all)

    notes: list[str] = []
    keep = (wd_all > 0) & (wd_all <= WD_MAX)
    n_excluded = int((~keep).sum())
    if n_excluded:
        notes.append(f"excluded {n_excluded} run(s) with lambda <= 0 or lambda > {WD_MAX}")
    wd, y = wd_all[keep], y_all[keep]
    if wd.size == 0:
        raise ValueError(f"no runs left with 0 < lambda <= {WD_MAX}")
    wd_u, n, n_grok = group_bins(wd, y)
    if wd_u.size < 2:
        raise ValueError(f"need at least 2 distinct lambda bins to fit lambda_c, got {wd_u.size} "
                         f"(lambda = {wd_u.tolist()})")
    p_fit = _bin_rates(n, n_grok, smoothing)
    bins = _wilson_bins(wd_u, n, n_grok, p_fit)
    pattern, bracket = _separation(wd, y)
    nan2 = (float("nan"), float("nan"))
    common = dict(method=method, n_records=int(wd_all.size), n_fit=int(wd.size),
                  n_excluded=n_excluded, smoothing=float(smoothing), bins=bins,
                  wd_c_bracket=bracket, warnings=notes)

    if pattern in ("all_grokked", "none_grokked"):
        where = "below the smallest" if pattern == "all_grokked" else "above the largest"
        notes.append(f"{pattern.replace('_', ' ')}: lambda_c is {where} lambda tested "
                     f"and cannot be estimated; bracket {bracket}")
        return CriticalFit(wd_c=float("nan"), k=float("nan"), wd_c_ci=nan2, n_bootstrap=None,
                           n_bootstrap_ok=None, separable=True, status=pattern, **common)
    separable = pattern == "separable"
    if separable:
        notes.append(f"separable outcomes (no overlap of grokked and non-grokked lambdas): "
                     f"the logistic MLE does not exist; lambda_c is only known to lie in {bracket}")
    if wd_u.size == 2:
        notes.append("only 2 bins for a 2-parameter curve: no residual degrees of freedom")
    if method == "glm":
        return _fit_glm(wd, y, separable, common)
    return _fit_paper(wd, y, wd_u, p_fit, smoothing, n_bootstrap, seed, separable, common, interval)


def _curve_fit(log_wd, p, p0, maxfev):
    with warnings.catch_warnings():
        # OptimizeWarning = covariance not estimable (e.g. 2 bins); the point fit is still valid.
        warnings.simplefilter("ignore", OptimizeWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # exp overflow for very steep trial k
        popt, _ = curve_fit(logistic_log10, log_wd, p, p0=list(p0), maxfev=maxfev)
    return float(popt[0]), float(popt[1])


def _restart_fit(wd_u, p_fit, log_c, k, notes) -> tuple[float, float]:
    """The published p0 (lambda_c = 0.05) suits the paper's grid; on a grid far from it the curve
    starts flat and the optimiser stalls (k -> 0). Retry from the grid's median lambda and keep
    whichever fits the bins better; the paper's own grid never gets here."""
    retry = (float(np.median(np.log10(wd_u))), PAPER_P0[1])
    try:
        log_r, k_r = _curve_fit(np.log10(wd_u), p_fit, retry, maxfev=5000)
    except (RuntimeError, ValueError):
        return log_c, k
    with np.errstate(all="ignore"):
        sse = lambda lc, kk: float(np.sum((logistic_log10(np.log10(wd_u), lc, kk) - p_fit) ** 2))
        if not sse(log_r, k_r) < sse(log_c, k):
            return log_c, k
    notes.append(f"least-squares fit restarted from p0 = ({retry[0]:.3g}, {retry[1]:g}) (the published p0 stalled)")
    return log_r, k_r


def _fit_paper(wd, y, wd_u, p_fit, smoothing, n_bootstrap, seed, separable, common, interval) -> CriticalFit:
    notes = common["warnings"]
    try:
        log_c, k = _curve_fit(np.log10(wd_u), p_fit, PAPER_P0, maxfev=5000)
        if not (k > 0 and np.log10(wd_u.min()) <= log_c <= np.log10(wd_u.max())):
            log_c, k = _restart_fit(wd_u, p_fit, log_c, k, notes)
    except (RuntimeError, ValueError) as exc:
        notes.append(f"least-squares fit did not converge: {exc}")
        return CriticalFit(wd_c=float("nan"), k=float("nan"), wd_c_ci=(float("nan"),) * 2,
                           n_bootstrap=n_bootstrap, n_bootstrap_ok=0, separable=separable,
                           status="fit_failed", **common)
    if k <= 0:
        notes.append(f"fitted k = {k:.3g} <= 0: P(grok) falls with lambda on this grid")
    if separable and smoothing == 0:
        # Every resample of a step is a step too: the refits only echo p0, so the bootstrap
        # interval would have ~zero width. Report no CI rather than a false one.
        notes.append(f"paper fit on separable data: k = {k:.3g} and lambda_c within the bracket "
                     f"are set by the optimiser's stopping point; bootstrap CI not computed")
        n_bootstrap = 0

    if interval == "bootstrap":
        wdcs, params = _run_bootstrap(wd, y, smoothing, n_bootstrap, seed, (log_c, k))
    else:
        wdcs, params = _jeffreys_draws(wd_u, wd, y, n_bootstrap, seed, (log_c, k))
    what = "bootstrap refits" if interval == "bootstrap" else "refits to posterior draws"
    if n_bootstrap and len(params) < n_bootstrap:
        notes.append(f"{n_bootstrap - len(params)} of {n_bootstrap} {what} did not converge (a step, or "
                     f"< 2 bins drawn): kept at the lambda_c edge their bins imply")
    ci = tuple(float(v) for v in np.quantile(wdcs, [0.025, 0.975])) if len(wdcs) >= 2 \
        else (float("nan"), float("nan"))
    wd_c, status = _range_check(log_c, wd_u, notes)
    return CriticalFit(wd_c=wd_c, k=k, wd_c_ci=ci, n_bootstrap=n_bootstrap,
                       n_bootstrap_ok=len(params), separable=separable,
                       status="separable" if separable else status, interval=interval,
                       bootstrap_params=np.asarray(params, float) if params else None, **common)


def _refit(log_wd: np.ndarray, rates: np.ndarray, start, wdcs: list, params: list) -> None:
    """Refit the curve to one resample's (or draw's) bin rates from ``start``; a refit that does
    not converge is kept at the edge its bins imply (:func:`_implied_log_wd_c`), never dropped."""
    try:
        if log_wd.size < 2:
            raise ValueError("fewer than 2 bins drawn")
        lc, kb = _curve_fit(log_wd, rates, start, 2000)
        if not abs(lc) < 300:  # 10**lc would overflow: far past the grid, on that side of it
            raise ValueError("lambda_c out of range")
    except (RuntimeError, ValueError):
        wdcs.append(10.0 ** _implied_log_wd_c(log_wd, rates))
        return
    wdcs.append(10.0 ** lc)
    params.append((lc, kb))


def _jeffreys_draws(wd_u, wd, y, n_draws, seed, start) -> tuple[list, list]:
    """The curve refit to draws of every bin's grok fraction from its Jeffreys posterior
    Beta(g + 1/2, n - g + 1/2): an interval for the least-squares lambda_c whose coverage holds at
    the paper's design (docs/statistics.md), where the run bootstrap's does not."""
    _, n, n_grok = group_bins(wd, y)
    rng, wdcs, params = np.random.default_rng(seed), [], []
    for rates in rng.beta(n_grok + 0.5, n - n_grok + 0.5, size=(n_draws, n.size)):
        _refit(np.log10(wd_u), rates, start, wdcs, params)
    return wdcs, params


def _run_bootstrap(wd, y, smoothing, n_bootstrap, seed, start) -> tuple[list, list]:
    """The author's aggregator's bootstrap: runs grouped by lambda in order of first appearance,
    Python's Mersenne Twister, randrange(N) N times per resample, the bin rates refit from the
    point estimate."""
    order: dict[float, int] = {}
    for w in wd:
        order.setdefault(float(w), len(order))
    groups = [[] for _ in order]
    for w, g in zip(wd, y):
        groups[order[float(w)]].append(int(g))
    keys = list(order)
    item_w = np.array([i for i, gs in enumerate(groups) for _ in gs])
    item_g = np.array([g for gs in groups for g in gs], dtype=float)
    rank = np.argsort(keys)  # bin indices in ascending lambda, as sorted(bb) does
    log_keys = np.log10(np.array(keys))[rank]
    rng, N = random.Random(seed), item_w.size
    wdcs, params = [], []
    for _ in range(n_bootstrap):
        idx = np.fromiter((rng.randrange(N) for _ in range(N)), dtype=np.intp, count=N)
        cnt = np.bincount(item_w[idx], minlength=len(keys))[rank]
        gro = np.bincount(item_w[idx], weights=item_g[idx], minlength=len(keys))[rank]
        present = cnt > 0
        _refit(log_keys[present], _bin_rates(cnt[present], gro[present], smoothing), start, wdcs, params)
    return wdcs, params


def _implied_log_wd_c(log_wd: np.ndarray, rates: np.ndarray) -> float:
    """log10 lambda_c of a resample the curve cannot fit: the edge of its step, halfway between the
    last bin below 1/2 and the first at or above it, or the grid's end when all bins lie on one side.

    >>> _implied_log_wd_c(np.array([-2.0, -1.0, 0.0]), np.array([0.0, 1.0, 1.0]))
    -1.5
    >>> _implied_log_wd_c(np.array([-2.0, -1.0]), np.array([1.0, 1.0])), _implied_log_wd_c(np.array([-2.0]), np.array([0.0]))
    (-2.0, -2.0)
    """
    above = np.nonzero(rates >= 0.5)[0]
    if above.size == 0:
        return float(log_wd[-1])
    i = int(above[0])
    return float(log_wd[0]) if i == 0 else float((log_wd[i - 1] + log_wd[i]) / 2)


def _range_check(log_c: float, wd_u: np.ndarray, notes: list[str]) -> tuple[float, str]:
    """10**log_c, flagged 'extrapolated' when lambda_c lies outside the tested lambdas."""
    wd_c = 10.0 ** log_c if abs(log_c) < 300 else (0.0 if log_c < 0 else float("inf"))
    if wd_u.min() <= wd_c <= wd_u.max():
        return wd_c, "ok"
    notes.append(f"lambda_c = {wd_c:.3g} lies outside the tested range [{wd_u.min():g}, "
                 f"{wd_u.max():g}]: an extrapolation, not a measurement")
    return wd_c, "extrapolated"


def _fit_glm(wd, y, separable, common) -> CriticalFit:
    import statsmodels.api as sm

    notes = common["warnings"]
    nan2 = (float("nan"), float("nan"))
    if separable:
        return CriticalFit(wd_c=float("nan"), k=float("nan"), wd_c_ci=nan2, n_bootstrap=None,
                           n_bootstrap_ok=None, separable=True, status="separable", **common)
    x = np.log10(wd)
    yf = y.astype(float)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = sm.GLM(yf, sm.add_constant(x), family=sm.families.Binomial()).fit()
    except (ValueError, np.linalg.LinAlgError) as exc:  # e.g. a singular information matrix
        notes.append(f"GLM fit failed: {exc}")
        return CriticalFit(wd_c=float("nan"), k=float("nan"), wd_c_ci=nan2, n_bootstrap=None,
                           n_bootstrap_ok=None, separable=False, status="fit_failed", **common)
    notes.extend(f"statsmodels: {w.message}" for w in caught
                 if not issubclass(w.category, DeprecationWarning))
    b0, b1 = (float(v) for v in res.params)
    cov = np.asarray(res.cov_params())
    theta = -b0 / b1
    grad = np.array([-1.0 / b1, b0 / b1 ** 2])
    se = float(np.sqrt(grad @ cov @ grad))
    ci = tuple(float(v) for v in np.power(10.0, np.clip([theta - Z95 * se, theta + Z95 * se],
                                                         -300, 300)))
    if b1 <= 0:
        notes.append(f"GLM slope k = {b1:.3g} <= 0: P(grok) falls with lambda on this grid")
    prof = _profile_ci(x, yf, theta, float(res.llf), notes)
    extra = {"glm": {"b0": b0, "b1": b1, "se_b0": float(np.sqrt(cov[0, 0])),
                     "se_b1": float(np.sqrt(cov[1, 1])), "llf": float(res.llf),
                     "log10_wd_c_se": se, "ci_method": "delta"},
             "wd_c_ci_profile": list(prof)}
    wd_c, status = _range_check(theta, np.unique(wd), notes)
    return CriticalFit(wd_c=wd_c, k=b1, wd_c_ci=ci, n_bootstrap=None, n_bootstrap_ok=None,
                       separable=False, status=status, extra=extra, **common)


def _profile_ci(x, y, theta_hat, llf_max, notes) -> tuple[float, float]:
    """Profile-likelihood 95% CI for lambda_c: logit P = k (x - theta), k profiled out."""
    import statsmodels.api as sm

    cut = chi2.ppf(0.95, 1) / 2.0

    def excess(theta):
        llf = sm.GLM(y, (x - theta)[:, None], family=sm.families.Binomial()).fit().llf
        return (llf_max - llf) - cut

    span = max(float(np.ptp(x)), 1.0)
    bounds = []
    for direction in (-1.0, 1.0):
        prev, step, found = theta_hat, 0.05 * span, None  # excess(theta_hat) = -cut < 0
        while step <= 4.0 * span:  # search up to 4 grid-widths past the estimate
            cur = theta_hat + direction * step
            if excess(cur) > 0:
                root = brentq(excess, *sorted((prev, cur)), xtol=1e-10)
                found = float(np.power(10.0, np.clip(root, -300, 300)))
                break
            prev, step = cur, step * 2.0
        if found is None:
            notes.append("profile-likelihood CI is open on one side (flat likelihood)")
            found = 0.0 if direction < 0 else float("inf")
        bounds.append(found)
    return bounds[0], bounds[1]
