"""Spectral lock-in target 4, the eta sweep (``python -m reproduce.targets.lockin --only eta``):
``lockin_eta.yaml``; the eta = 1e-5, 2,000-epoch extension ``lockin_eta_long.yaml`` runs under the
medium and paper profiles.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from grok_lightning.plots.lockin import eta_sweep_figure
from grok_lightning.stats.lockin import (
    finite_median,
    fire_epoch,
    first_epoch_at_least,
    history_column,
    lockin_key,
    record_horizon,
    tian_activation,
    tian_eta,
    tian_model,
    window_median,
)
from reproduce.report import claim, claim_row, count_row, load_claims, row
from reproduce.targets.common import median_ci
from reproduce.targets.lockin_common import (
    HEADLINE_W,
    P_ETA,
    P_ETA_FIT,
    P_ETA_LONG,
    PAPER,
    RHO_THRESHOLD,
    add_caption,
    caption_text,
    describe_tian,
    differs_from_paper,
    format_number,
    record_seed,
    replays_paper,
    save_figure,
    value_set,
)


# --- target 4: eta sweep --------------------------------------------------------------------------
def eta_fire_figure(records: list[dict], long_records: list[dict], profile: str) -> Figure:
    """Lock-in fire epoch vs eta (per seed and median, published medians) and rho fire vs test 0.5."""
    fig = Figure(figsize=(10, 3.8))
    ax, ax2 = fig.subplots(1, 2)
    etas = sorted({tian_eta(r) for r in records if tian_eta(r) > 0})
    for eta in etas:
        runs = [r for r in records if np.isclose(tian_eta(r), eta)]
        fires = [fire_epoch(r) for r in runs]
        horizon = max(map(record_horizon, runs))
        ax.scatter([eta] * len(fires), [f if f is not None else horizon for f in fires], s=18,
                   facecolors=["C0" if f is not None else "none" for f in fires], edgecolors="C0",
                   label=None if eta != etas[0] else "ours, per run (open: no fire by the horizon)")
    med = [(eta, finite_median([fire_epoch(r) for r in records if np.isclose(tian_eta(r), eta)])) for eta in etas]
    med = [(e, v) for e, v in med if np.isfinite(v)]
    if med:
        ax.plot(*zip(*med), "-", color="C0", label="ours, median of the runs that fired")
    ax.plot(list(P_ETA), [v["lockin"] for v in P_ETA.values()], "kx--", lw=0.8, ms=8, label="published median")
    for r in long_records:
        if fire_epoch(r) is not None:
            ax.plot(tian_eta(r), fire_epoch(r), "D", color="C3", label=f"ours, {record_horizon(r)}-epoch extension")
    ax.plot([1e-5], [P_ETA_LONG["lockin"]], "D", mfc="none", color="k", label="published, 2,000-epoch extension")
    ax.set(xscale="log", xlabel="eta (coupled L2)", ylabel="slope fire epoch (W = 20)")
    ax.legend(fontsize=6.5)
    cmap = matplotlib.colormaps["viridis"]
    labelled = set()
    for i, eta in enumerate(etas):
        for r in [r for r in records if np.isclose(tian_eta(r), eta)]:
            t_test, t_rho = first_epoch_at_least(r, "test_acc", 0.5), first_epoch_at_least(r, "rho_tian", RHO_THRESHOLD)
            if t_test is not None and t_rho is not None:
                ax2.scatter(t_test, t_rho, color=cmap(i / max(1, len(etas) - 1)), s=22,
                            label=None if eta in labelled else f"eta={eta:g}")
                labelled.add(eta)
    xs = np.linspace(80, 340, 2)
    ax2.plot(xs, P_ETA_FIT[0] * xs + P_ETA_FIT[1], "k--", lw=0.8, label=f"published fit t_rho = {P_ETA_FIT[0]:.2f} t_test {P_ETA_FIT[1]:+.0f}")
    ax2.plot([v["test"] for v in P_ETA.values() if v["test"]], [v["rho"] for v in P_ETA.values() if v["test"]], "kx",
             ms=7, label="published medians")
    ax2.set(xlabel="epoch test acc >= 0.5", ylabel=f"epoch rho_tian >= {RHO_THRESHOLD}")
    ax2.legend(fontsize=6.5)
    fig.suptitle(f"eta sweep: lock-in epoch vs eta, rho_tian lead [{profile}]", fontsize=9)
    return fig


def target_eta(records: list[dict], long_records: list[dict], configs: dict, long_configs: dict, profile: str, out: Path):
    x2 = [r for r in records if tian_activation(r) == "x2"]
    etas = sorted({tian_eta(r) for r in x2 if tian_eta(r) > 0})
    H = min((record_horizon(r) for r in x2), default=0)
    per_eta, rows = {}, []
    points = []
    for eta in etas:
        runs = sorted([r for r in x2 if np.isclose(tian_eta(r), eta)], key=record_seed)
        fires = [fire_epoch(r) for r in runs]
        rho = [first_epoch_at_least(r, "rho_tian", RHO_THRESHOLD) for r in runs]
        test = [first_epoch_at_least(r, "test_acc", 0.5) for r in runs]
        grokked = [r.get("grok_epoch") for r in runs]
        late = [window_median(r, lockin_key(HEADLINE_W, "ratio23"), 300, 600) for r in runs]
        points += [(t, p) for t, p in zip(test, rho) if t is not None and p is not None]
        per_eta[f"{eta:g}"] = dict(seeds=[record_seed(r) for r in runs], fire=fires, rho_fire=rho, test_half=test,
                                   grok_epoch_099=grokked, late_300_600=late)
        n, tag = len(runs), f"lock.eta{eta:g}"
        scored = lambda name: f"{tag}.{name}" in load_claims()
        fired = [f for f in fires if f is not None]
        med, ci, level = median_ci(fired)
        note = f"{len(fired)}/{n} fired by epoch {H}: {fires}; late sigma2/sigma3 ours {format_number(finite_median(late))} (epochs 300-{H})"
        rows.append(claim_row(f"{tag}.lockin", f"eta sweep eta={eta:g}: median slope fire epoch", med, profile,
                              len(fired), ours_ci=ci, ci_level=level, horizon=H, note=note) if scored("lockin") else
                    row(PAPER, f"eta sweep eta={eta:g}: median slope fire epoch", None, med, profile, len(fired),
                        ours_ci=ci, ci_level=level, note=note))
        hits = [v for v in rho if v is not None]
        med, ci, level = median_ci(hits)
        note = (f"{len(hits)}/{n} crossed {RHO_THRESHOLD}: {rho}; rho every "
                f"{value_set([tian_model(r).get('rho_every') for r in runs])} epoch(s)")
        rows.append(claim_row(f"{tag}.rho", f"eta sweep eta={eta:g}: median rho_tian fire epoch", med, profile, len(hits),
                              ours_ci=ci, ci_level=level, runs=hits, horizon=H, note=note) if scored("rho") else
                    row(PAPER, f"eta sweep eta={eta:g}: median rho_tian fire epoch", None, med, profile, len(hits),
                        ours_ci=ci, ci_level=level, note=note))
        hits = [v for v in test if v is not None]
        med, ci, level = median_ci(hits)
        note = f"{len(hits)}/{n} reached it by epoch {H}: {test}; grokked (0.99) {sum(g is not None for g in grokked)}/{n}"
        if scored("test") and claim(f"{tag}.test").count:  # the paper's runs never reach 0.5 by epoch 600
            rows.append(count_row(f"{tag}.test", f"eta sweep eta={eta:g}: runs reaching test acc 0.5 by epoch {H}",
                                  len(hits), n, profile, horizon=H, note=note))
        elif scored("test"):
            rows.append(claim_row(f"{tag}.test", f"eta sweep eta={eta:g}: median epoch test acc >= 0.5", med, profile,
                                  len(hits), ours_ci=ci, ci_level=level, horizon=H, note=note))
        else:
            rows.append(row(PAPER, f"eta sweep eta={eta:g}: median epoch test acc >= 0.5", None, med, profile,
                            len(hits), ours_ci=ci, ci_level=level, note=note))
    fit = None
    if len(points) >= 3 and len({t for t, _ in points}) >= 2:
        slope, intercept = np.polyfit([t for t, _ in points], [p for _, p in points], 1)
        fit = [float(slope), float(intercept)]
    slope_ci, intercept_ci = _fit_ci(points) if fit else (None, None)
    note = (f"ours t_rho = {fit[0]:.2f} t_test {fit[1]:+.0f} over {len(points)} runs" if fit
            else f"{len(points)} runs with both epochs: too few for a fit")
    rows.append(claim_row("lock.eta_fit", "eta sweep: slope of t_rho vs t_test(0.5) regression (OLS 95% CI)",
                          fit[0] if fit else None, profile, len(points), ours_ci=slope_ci, horizon=H, note=note))
    rows.append(claim_row("lock.eta_fit_intercept", "eta sweep: intercept of t_rho vs t_test(0.5) regression (OLS 95% CI)",
                          fit[1] if fit else None, profile, len(points), ours_ci=intercept_ci, horizon=H, note=note))
    long = [r for r in long_records if tian_eta(r) > 0]
    lr = long[0] if long else None
    peak = float(np.nanmax(history_column(lr, lockin_key(HEADLINE_W, "ratio23"))[1])) if lr else None
    long_vals = dict(test_half=first_epoch_at_least(lr, "test_acc", 0.5) if lr else None, test_099=lr.get("grok_epoch") if lr else None,
                     rho=first_epoch_at_least(lr, "rho_tian", RHO_THRESHOLD) if lr else None, lockin=fire_epoch(lr) if lr else None, peak=peak)
    why = "" if lr else "medium and paper profiles only (2,000 epochs do not fit the smoke budget)"
    for key, label in (("test_half", "epoch test acc >= 0.5"), ("test_099", "epoch test acc >= 0.99"),
                       ("rho", "rho_tian fire epoch"), ("lockin", "slope fire epoch"), ("peak", "peak sigma2/sigma3")):
        rows.append(claim_row(f"lock.long.{key}", f"eta=1e-5 extension (2,000 epochs, seed 0): {label}", long_vals[key],
                              profile, 1 if lr else 0, horizon=record_horizon(lr) if lr else None, replay=replays_paper(lr),
                              note=why or f"seed {record_seed(lr)}, {record_horizon(lr)} epochs; None = not reached"))

    seeds_text = (f"eta in {value_set(etas)}, seeds {sorted({record_seed(r) for r in x2})} per eta, horizon {H} epochs; "
                  f"bands: IQR over seeds (a single line when n = 1)"
                  + (f"; extension: eta {tian_eta(lr):g}, seed {record_seed(lr)}, {record_horizon(lr)} epochs" if lr else ""))
    differs = differs_from_paper(profile, "eta", seeds=len({record_seed(r) for r in x2}), epochs=H,
                       rho_every=tian_model(x2[0]).get("rho_every") if x2 else None)
    if not lr:
        differs += "; no eta = 1e-5, 2,000-epoch extension (medium and paper profiles only)"
    describe = describe_tian(x2, configs)
    fig = eta_sweep_figure(x2, window=HEADLINE_W, profile=profile)
    add_caption(fig, caption_text(profile, seeds_text, describe, differs))
    figures = [save_figure(fig, out / "lockin_eta_sweep.png")]
    fig = eta_fire_figure(x2, long, profile)
    add_caption(fig, caption_text(profile, seeds_text, describe, differs,
                                   "Left: fire epoch per run (open circles at the horizon: no fire). Right: one point per "
                                   "run that both crossed rho_tian >= 0.075 and reached test 0.5; the published fit is "
                                   "over 20 runs at 600 epochs."))
    figures.append(save_figure(fig, out / "lockin_eta_fire.png"))
    summary = dict(horizon=H, per_eta=per_eta, rho_vs_test_fit=fit, extension=long_vals if lr else None,
                   statuses={r.get("name"): r.get("status") for r in records + long_records})
    return summary, rows, figures


def _fit_ci(points: list[tuple[float, float]]) -> tuple[list[float] | None, list[float] | None]:
    """OLS 95% intervals of the slope and the intercept of rho fire epoch on test-0.5 epoch (t with n - 2 df)."""
    from scipy.stats import linregress
    from scipy.stats import t as student_t

    if len(points) < 3:
        return None, None
    fit = linregress([a for a, _ in points], [b for _, b in points])
    t = float(student_t.ppf(0.975, len(points) - 2))
    return ([fit.slope - t * fit.stderr, fit.slope + t * fit.stderr],
            [fit.intercept - t * fit.intercept_stderr, fit.intercept + t * fit.intercept_stderr])
