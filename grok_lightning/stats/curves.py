r"""Curve fits behind the paper's scaling claims.

Time-to-grok power law (lambda_c fixed at the logistic point estimate)::

    t_grok = A * (lambda - lambda_c) ** (-nu)
    ln t_grok = ln A - nu * ln(lambda - lambda_c)        (OLS; nu = -slope, A = exp(intercept))

over grok-positive runs (finite t_grok) with lambda > lambda_c. CIs: pairs bootstrap
(``numpy.random.default_rng(seed)``; the author's nu script is not public), the OLS t-interval
(statsmodels), and optionally the leave-one-out jackknife: with theta_(i) the estimate without
point i and theta_bar their mean, bias-corrected = n theta - (n - 1) theta_bar,
se = sqrt((n - 1)/n * sum (theta_(i) - theta_bar)^2), CI = bias-corrected +- 1.96 se (the form of
``a5_nu_jackknife.json``), plus the LOOCV RMSE of ln t_grok.

Pre-grokking rise of mean similarity (paper section 3.3)::

    s(t) = s0 + A * tanh((t - t_c) / tau)

Peak sigma_H against d/H, compared by AIC = n ln(RSS / n) + 2 (p + 1) (p curve parameters plus
the noise variance; the +1 cancels in differences)::

    saturating  y = a (1 - exp(-x / b)) + c     linear  y = a x + c
    log         y = a ln x + c                  power   y = a x ** b

The AdamW relaxation fit and bound live in :mod:`.relaxation` and are re-exported here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from .arrays import as_1d_float, check_same_length, nan_to_none
from .relaxation import adamw_bound, fit_exponential_relaxation  # noqa: F401  (re-export)

JACKKNIFE_Z = 1.96  # the reference jackknife CI uses 1.96 exactly


def jackknife_ci(theta_full: float, theta_loo) -> dict:
    """Leave-one-out jackknife summary (bias correction, SE, normal 95% CI).

    >>> d = jackknife_ci(1.0, [0.9, 1.0, 1.1])
    >>> round(d["bias_corrected"], 6), round(d["se"], 6)
    (1.0, 0.11547)
    """
    loo = as_1d_float(theta_loo, "theta_loo", min_len=2)
    n = loo.size
    mean = float(loo.mean())
    bias_corrected = n * float(theta_full) - (n - 1) * mean
    se = float(np.sqrt((n - 1) / n * np.sum((loo - mean) ** 2)))
    return {"n": n, "mean_leave_one": mean, "bias_corrected": bias_corrected, "se": se,
            "ci_95": [bias_corrected - JACKKNIFE_Z * se, bias_corrected + JACKKNIFE_Z * se]}


@dataclass
class PowerLawFit:
    """Result of :func:`fit_time_to_grok_power_law`; ``to_dict()`` is the ``nu_fit`` object."""

    nu: float
    A: float
    n_points: int
    nu_ci: tuple[float, float]
    nu_ci_ols: tuple[float, float]
    wd_c: float
    lambdas: list[float] | None
    n_bootstrap: int
    n_bootstrap_ok: int
    r2: float
    jackknife: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def predict(self, weight_decay):
        """t_grok predicted at ``weight_decay`` (NaN where lambda <= lambda_c)."""
        d = np.asarray(weight_decay, float) - self.wd_c
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(d > 0, self.A * np.abs(d) ** (-self.nu), np.nan)

    def to_dict(self) -> dict:
        return nan_to_none({
            "nu": self.nu, "A": self.A, "n_points": self.n_points, "nu_ci": list(self.nu_ci),
            "nu_ci_ols": list(self.nu_ci_ols), "wd_c": self.wd_c, "lambdas": self.lambdas,
            "n_bootstrap": self.n_bootstrap, "n_bootstrap_ok": self.n_bootstrap_ok,
            "r2": self.r2, "jackknife": self.jackknife, "warnings": list(self.warnings)})


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise OLS slopes of y on x (2-D arrays); NaN where x has no spread."""
    xc = x - x.mean(axis=1, keepdims=True)
    sxx = np.sum(xc * xc, axis=1)
    sxy = np.sum(xc * (y - y.mean(axis=1, keepdims=True)), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 1e-12, sxy / sxx, np.nan)


def fit_time_to_grok_power_law(weight_decay, t_grok, lambda_c: float,
                               lambdas: Sequence[float] | None = None, n_bootstrap: int = 1500,
                               seed: int = 42, jackknife: bool = False) -> PowerLawFit:
    """Fit nu and A of t_grok = A (lambda - lambda_c)^-nu (see the module docstring).

    ``t_grok`` is NaN/inf for runs that did not grok (they are dropped, as are runs with
    lambda <= lambda_c). ``lambdas`` keeps only those bins, e.g. the four-bin variant
    ``(0.1, 0.5, 1.0, 2.0)``.

    >>> wd = [0.1, 0.1, 0.5, 0.5, 1.0, 1.0, 2.0, 2.0, 0.01]
    >>> t = [880, 890, 240, 250, 130, 135, 80, 81, float("nan")]
    >>> fit = fit_time_to_grok_power_law(wd, t, lambda_c=0.0158, n_bootstrap=200)
    >>> fit.n_points, round(fit.nu, 2), fit.nu_ci[0] < fit.nu < fit.nu_ci[1]
    (8, 0.76, True)
    """
    import statsmodels.api as sm

    wd = as_1d_float(weight_decay, "weight_decay")
    t = as_1d_float(t_grok, "t_grok", allow_nan=True)
    check_same_length(weight_decay=wd, t_grok=t)
    if not np.isfinite(lambda_c) or lambda_c < 0:
        raise ValueError(f"lambda_c must be finite and >= 0, got {lambda_c}")
    if n_bootstrap < 0:
        raise ValueError("n_bootstrap must be >= 0")
    if np.any(np.isfinite(t) & (t <= 0)):
        raise ValueError("t_grok must be > 0 for grokked runs (NaN/inf marks 'did not grok')")
    notes: list[str] = []
    keep = np.isfinite(t) & (wd > lambda_c)
    if lambdas is not None:
        want = np.asarray(list(lambdas), float)
        keep &= np.isclose(wd[:, None], want[None, :], rtol=1e-9, atol=0).any(axis=1)
        missing = [float(w) for w in want if not np.isclose(wd[keep], w, rtol=1e-9, atol=0).any()]
        if missing:
            notes.append(f"requested lambdas with no grok-positive run: {missing}")
    x = np.log(wd[keep] - lambda_c)
    y = np.log(t[keep])
    n = int(x.size)
    if n < 3 or np.unique(x).size < 2:
        raise ValueError(f"need >= 3 grok-positive runs over >= 2 distinct lambda > lambda_c, got "
                         f"{n} run(s) at {np.unique(wd[keep]).tolist()}")
    if np.unique(x).size == 2:
        notes.append("only 2 distinct lambda values: the power law is not testable, only fitted")

    res = sm.OLS(y, sm.add_constant(x)).fit()
    intercept, slope = (float(v) for v in res.params)
    lo, hi = (float(v) for v in np.asarray(res.conf_int(0.05))[1])
    nu_ci_ols = (-hi, -lo) if n > 2 else (float("nan"), float("nan"))

    rng = np.random.default_rng(seed)
    nus = []
    for start in range(0, n_bootstrap, 500):  # chunks keep memory flat for big cohorts
        idx = rng.integers(0, n, size=(min(500, n_bootstrap - start), n))
        nus.append(-_slopes(x[idx], y[idx]))
    nus = np.concatenate(nus) if nus else np.empty(0)
    nus = nus[np.isfinite(nus)]  # resamples that drew a single lambda have no slope
    if n_bootstrap and nus.size < n_bootstrap:
        notes.append(f"{n_bootstrap - nus.size} bootstrap resample(s) had a single lambda; dropped")
    nu_ci = tuple(float(v) for v in np.quantile(nus, [0.025, 0.975])) if nus.size >= 2 \
        else (float("nan"), float("nan"))

    jk = None
    if jackknife:
        jk = _jackknife_power_law(x, y, -slope)
    return PowerLawFit(nu=-slope, A=float(np.exp(intercept)), n_points=n, nu_ci=nu_ci,
                       nu_ci_ols=nu_ci_ols, wd_c=float(lambda_c),
                       lambdas=None if lambdas is None else [float(v) for v in lambdas],
                       n_bootstrap=n_bootstrap, n_bootstrap_ok=int(nus.size),
                       r2=float(res.rsquared), jackknife=jk, warnings=notes)


def _jackknife_power_law(x: np.ndarray, y: np.ndarray, nu_full: float) -> dict:
    n = x.size
    drop = ~np.eye(n, dtype=bool)  # row i = all points but i
    xs = np.broadcast_to(x, (n, n))[drop].reshape(n, n - 1)
    ys = np.broadcast_to(y, (n, n))[drop].reshape(n, n - 1)
    slopes = _slopes(xs, ys)
    if not np.all(np.isfinite(slopes)):
        raise ValueError("jackknife: leaving one point out leaves a single lambda")
    intercepts = ys.mean(axis=1) - slopes * xs.mean(axis=1)
    rmse = float(np.sqrt(np.mean((y - (intercepts + slopes * x)) ** 2)))  # LOOCV in ln t
    s = jackknife_ci(nu_full, -slopes)
    return {"nu_mean_leave_one": s["mean_leave_one"], "nu_bias_corrected": s["bias_corrected"],
            "se": s["se"], "ci_95": s["ci_95"], "loocv_rmse_log": rmse}


# ----------------------------------------------------------------------------- tanh rise
PAPER_TANH_BOUNDS = ((0.0, 0.0, -5000.0, 1e-9), (1.5, 1.0, 5000.0, 5000.0))  # s0, A, t_c, tau


def tanh_rise(t, s0, A, tc, tau):
    return s0 + A * np.tanh((np.asarray(t, float) - tc) / tau)


@dataclass
class TanhFit:
    s0: float
    A: float
    tc: float
    tau: float
    r2: float
    bounded: bool
    converged: bool
    degenerate: bool  # failed, or t_c/tau outside what the data can pin down
    message: str = ""

    def to_dict(self) -> dict:
        return nan_to_none(dict(self.__dict__))


def _r2(y, yhat) -> float:
    tss = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - yhat) ** 2)) / tss if tss > 0 else float("nan")


def fit_tanh_rise(t, s, bounded: bool = False, bounds=PAPER_TANH_BOUNDS, p0=None) -> TanhFit:
    """Fit s(t) = s0 + A tanh((t - t_c)/tau); ``bounded=True`` uses the paper's box.

    Degenerate (our criterion, the paper's is not published): the fit failed, or t_c lies more
    than one window width outside the data, or tau > 10 window widths (then tanh is a straight
    line over the window and A, tau are not separately identified).
    """
    t = as_1d_float(t, "t", min_len=5)
    s = as_1d_float(s, "s", min_len=5)
    check_same_length(t=t, s=s)
    span = float(np.ptp(t))
    if span <= 0:
        raise ValueError("t must span more than one time point")
    if p0 is None:
        p0 = [(s.max() + s.min()) / 2, max((s.max() - s.min()) / 2, 1e-3), float(np.median(t)),
              span / 4]
    kw = {"maxfev": 20000}
    if bounded:
        lo, hi = (np.asarray(b, float) for b in bounds)
        p0 = np.clip(np.asarray(p0, float), lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
        kw = {"bounds": (lo, hi), "max_nfev": 20000}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            popt, _ = curve_fit(tanh_rise, t, s, p0=list(p0), **kw)
    except (RuntimeError, ValueError) as exc:
        nan = float("nan")
        return TanhFit(nan, nan, nan, nan, nan, bounded, False, True, str(exc))
    s0, A, tc, tau = (float(v) for v in popt)
    if tau < 0:  # tanh is odd: (A, tau) and (-A, -tau) are the same curve; report tau > 0
        A, tau = -A, -tau
    r2 = _r2(s, tanh_rise(t, s0, A, tc, tau))
    degenerate = bool(not (t.min() - span <= tc <= t.max() + span) or tau > 10 * span
                      or not np.isfinite(r2))
    return TanhFit(s0, A, tc, tau, r2, bounded, True, degenerate)


# ------------------------------------------------------------------- d/H model selection
def _saturating(x, a, b, c):
    return a * (1.0 - np.exp(-x / b)) + c


def fit_saturation_models(x, y) -> dict:
    """Fit saturating-exponential, linear, log and power models; rank by AIC.

    Returns ``{"models": {name: {params, rss, aic, n_params, converged}}, "best": name,
    "delta_aic": {name: aic - min aic}}``. ``log`` and ``power`` need x > 0 (and power y > 0
    for its start values); a model that cannot be fitted has ``converged=False``, AIC = inf.
    """
    x = as_1d_float(x, "x", min_len=4)
    y = as_1d_float(y, "y", min_len=4)
    n = check_same_length(x=x, y=y)
    specs = {
        "saturating_exp": (_saturating, [float(np.ptp(y)) or 1.0,
                                         float(np.median(np.abs(x))) or 1.0, float(y.min())],
                           ("a", "b", "c")),
        "linear": (lambda v, a, c: a * v + c, list(np.polyfit(x, y, 1)), ("a", "c")),
        "log": (lambda v, a, c: a * np.log(v) + c, [1.0, float(y.mean())], ("a", "c")),
        "power": (lambda v, a, b: a * v ** b, [1.0, 1.0], ("a", "b")),
    }
    if np.all(x > 0) and np.all(y > 0):  # log-log OLS start for the power law
        b, ln_a = np.polyfit(np.log(x), np.log(y), 1)
        specs["power"] = (specs["power"][0], [float(np.exp(ln_a)), float(b)], ("a", "b"))
    models = {}
    for name, (f, p0, names) in specs.items():
        entry = {"params": None, "rss": float("inf"), "aic": float("inf"),
                 "n_params": len(names), "converged": False}
        if name in ("log", "power") and np.any(x <= 0):
            entry["message"] = "needs x > 0"
            models[name] = entry
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                popt, _ = curve_fit(f, x, y, p0=p0, maxfev=20000)
        except (RuntimeError, ValueError) as exc:
            entry["message"] = str(exc)
            models[name] = entry
            continue
        rss = float(np.sum((y - f(x, *popt)) ** 2))
        aic = n * np.log(rss / n) + 2 * (len(names) + 1) if rss > 0 else -np.inf
        entry.update(params=dict(zip(names, map(float, popt))), rss=rss, aic=float(aic),
                     converged=bool(np.isfinite(rss)))
        models[name] = entry
    ok = {k: v["aic"] for k, v in models.items() if v["converged"]}
    if not ok:
        raise ValueError("no model could be fitted to these points")
    best = min(ok, key=ok.get)
    return {"models": models, "best": best,
            "delta_aic": {k: v - ok[best] for k, v in ok.items()}, "n": n}
