"""Spectral lock-in target 4, the eta sweep (``python -m reproduce.lockin --only eta``):
``lockin_eta.yaml``; the eta = 1e-5, 2,000-epoch extension ``lockin_eta_long.yaml`` runs under the
medium and paper profiles.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from grok_lightning.plots.lockin import eta_sweep_figure
from grok_lightning.stats.lockin import lockin_key
from reproduce.common import median_ci
from reproduce.lockin_common import (
    HEADLINE_W,
    P_ETA,
    P_ETA_FIT,
    P_ETA_LONG,
    PAPER,
    RHO_THRESHOLD,
    _act,
    _caption_text,
    _differs,
    _eta,
    _fire,
    _first_at,
    _fmt,
    _horizon,
    _med,
    _model,
    _save,
    _seed,
    _series,
    _values,
    _window_median,
    add_caption,
    describe_tian,
)
from reproduce.report import row


# --- target 4: eta sweep --------------------------------------------------------------------------
def eta_fire_figure(records: list[dict], long_records: list[dict], profile: str) -> Figure:
    """Lock-in fire epoch vs eta (per seed and median, published medians) and rho fire vs test 0.5."""
    fig = Figure(figsize=(10, 3.8))
    ax, ax2 = fig.subplots(1, 2)
    etas = sorted({_eta(r) for r in records if _eta(r) > 0})
    for eta in etas:
        runs = [r for r in records if np.isclose(_eta(r), eta)]
        fires = [_fire(r) for r in runs]
        horizon = max(map(_horizon, runs))
        ax.scatter([eta] * len(fires), [f if f is not None else horizon for f in fires], s=18,
                   facecolors=["C0" if f is not None else "none" for f in fires], edgecolors="C0",
                   label=None if eta != etas[0] else "ours, per run (open: no fire by the horizon)")
    med = [(eta, _med([_fire(r) for r in records if np.isclose(_eta(r), eta)])) for eta in etas]
    med = [(e, v) for e, v in med if np.isfinite(v)]
    if med:
        ax.plot(*zip(*med), "-", color="C0", label="ours, median of the runs that fired")
    ax.plot(list(P_ETA), [v["lockin"] for v in P_ETA.values()], "kx--", lw=0.8, ms=8, label="published median")
    for r in long_records:
        if _fire(r) is not None:
            ax.plot(_eta(r), _fire(r), "D", color="C3", label=f"ours, {_horizon(r)}-epoch extension")
    ax.plot([1e-5], [P_ETA_LONG["lockin"]], "D", mfc="none", color="k", label="published, 2,000-epoch extension")
    ax.set(xscale="log", xlabel="eta (coupled L2)", ylabel="slope fire epoch (W = 20)")
    ax.legend(fontsize=6.5)
    cmap = matplotlib.colormaps["viridis"]
    labelled = set()
    for i, eta in enumerate(etas):
        for r in [r for r in records if np.isclose(_eta(r), eta)]:
            t_test, t_rho = _first_at(r, "test_acc", 0.5), _first_at(r, "rho_tian", RHO_THRESHOLD)
            if t_test is not None and t_rho is not None:
                ax2.scatter(t_test, t_rho, color=cmap(i / max(1, len(etas) - 1)), s=22,
                            label=None if eta in labelled else f"eta={eta:g}")
                labelled.add(eta)
    xs = np.linspace(80, 340, 2)
    ax2.plot(xs, P_ETA_FIT[0] * xs + P_ETA_FIT[1], "k--", lw=0.8, label="published fit t_rho = 0.80 t_test - 75")
    ax2.plot([v["test"] for v in P_ETA.values() if v["test"]], [v["rho"] for v in P_ETA.values() if v["test"]], "kx",
             ms=7, label="published medians")
    ax2.set(xlabel="epoch test acc >= 0.5", ylabel=f"epoch rho_tian >= {RHO_THRESHOLD}")
    ax2.legend(fontsize=6.5)
    fig.suptitle(f"eta sweep: lock-in epoch vs eta, rho_tian lead [{profile}]", fontsize=9)
    return fig


def target_eta(records: list[dict], long_records: list[dict], configs: dict, long_configs: dict, profile: str, out: Path):
    x2 = [r for r in records if _act(r) == "x2"]
    etas = sorted({_eta(r) for r in x2 if _eta(r) > 0})
    H = min((_horizon(r) for r in x2), default=0)
    per_eta, rows = {}, []
    points = []
    for eta in etas:
        runs = sorted([r for r in x2 if np.isclose(_eta(r), eta)], key=_seed)
        fires = [_fire(r) for r in runs]
        rho = [_first_at(r, "rho_tian", RHO_THRESHOLD) for r in runs]
        test = [_first_at(r, "test_acc", 0.5) for r in runs]
        grokked = [r.get("grok_epoch") for r in runs]
        late = [_window_median(r, lockin_key(HEADLINE_W, "ratio23"), 300, 600) for r in runs]
        points += [(t, p) for t, p in zip(test, rho) if t is not None and p is not None]
        per_eta[f"{eta:g}"] = dict(seeds=[_seed(r) for r in runs], fire=fires, rho_fire=rho, test_half=test,
                                   grok_epoch_099=grokked, late_300_600=late)
        p = next((v for k, v in P_ETA.items() if np.isclose(k, eta)), None)
        n = len(runs)
        fired = [f for f in fires if f is not None]
        med, ci = median_ci(fired)
        rows.append(row(PAPER, f"eta sweep eta={eta:g}: median slope fire epoch", p and p["lockin"], med, profile, len(fired),
                        ours_ci=ci, note=f"{len(fired)}/{n} fired by epoch {H}: {fires}"
                                         + (f"; late sigma2/sigma3 paper {p['late']} (epochs 300-600), ours "
                                            f"{_fmt(_med(late))} (epochs 300-{H})" if p else "")))
        hits = [v for v in rho if v is not None]
        med, ci = median_ci(hits)
        rows.append(row(PAPER, f"eta sweep eta={eta:g}: median rho_tian fire epoch", p and p["rho"], med, profile, len(hits),
                        ours_ci=ci, note=f"{len(hits)}/{n} crossed {RHO_THRESHOLD}: {rho}; rho every "
                                         f"{_values([_model(r).get('rho_every') for r in runs])} epoch(s)"))
        hits = [v for v in test if v is not None]
        med, ci = median_ci(hits)
        never = p is not None and p["test"] is None  # the paper's runs at this eta never reach 0.5 by epoch 600
        rows.append(row(PAPER, f"eta sweep eta={eta:g}: median epoch test acc >= 0.5", "never" if never else p and p["test"],
                        "never" if never and not hits else med, profile, len(hits),
                        ours_ci=ci, note=f"{len(hits)}/{n} reached it by epoch {H}: {test}; grokked (0.99) "
                                         f"{sum(g is not None for g in grokked)}/{n}"
                                         + (f" (paper {p['grokked']}/5 by 600)" if p else "")))
    fit = None
    if len(points) >= 3 and len({t for t, _ in points}) >= 2:
        slope, intercept = np.polyfit([t for t, _ in points], [p for _, p in points], 1)
        fit = [float(slope), float(intercept)]
    rows.append(row(PAPER, "eta sweep: slope of t_rho vs t_test(0.5) regression", P_ETA_FIT[0], fit[0] if fit else None,
                    profile, len(points), note=(f"ours t_rho = {fit[0]:.2f} t_test {fit[1]:+.0f} over {len(points)} runs"
                                                + ("" if len(points) >= 10 else " (too few runs for a meaningful slope)")
                                                + "; " if fit else f"{len(points)} runs with both epochs: too few for a fit; ")
                    + "paper: 0.80 t_test - 75, R^2 = 0.87, 20 runs"))
    long = [r for r in long_records if _eta(r) > 0]
    lr = long[0] if long else None
    peak = float(np.nanmax(_series(lr, lockin_key(HEADLINE_W, "ratio23"))[1])) if lr else None
    long_vals = dict(test_half=_first_at(lr, "test_acc", 0.5) if lr else None, test_099=lr.get("grok_epoch") if lr else None,
                     rho=_first_at(lr, "rho_tian", RHO_THRESHOLD) if lr else None, lockin=_fire(lr) if lr else None, peak=peak)
    why = "" if lr else "medium and paper profiles only (2,000 epochs do not fit the smoke budget)"
    for key, label in (("test_half", "epoch test acc >= 0.5"), ("test_099", "epoch test acc >= 0.99"),
                       ("rho", "rho_tian fire epoch"), ("lockin", "slope fire epoch"), ("peak", "peak sigma2/sigma3")):
        rows.append(row(PAPER, f"eta=1e-5 extension (2,000 epochs, seed 0): {label}", P_ETA_LONG[key], long_vals[key],
                        profile, 1 if lr else 0, note=why or (f"seed {_seed(lr)}, {_horizon(lr)} epochs; None = not reached")))

    seeds_text = (f"eta in {_values(etas)}, seeds {sorted({_seed(r) for r in x2})} per eta, horizon {H} epochs; "
                  f"bands: IQR over seeds (a single line when n = 1)"
                  + (f"; extension: eta {_eta(lr):g}, seed {_seed(lr)}, {_horizon(lr)} epochs" if lr else ""))
    differs = _differs(profile, "eta", seeds=len({_seed(r) for r in x2}), epochs=H,
                       rho_every=_model(x2[0]).get("rho_every") if x2 else None)
    if not lr:
        differs += "; no eta = 1e-5, 2,000-epoch extension (medium and paper profiles only)"
    describe = describe_tian(x2, configs)
    fig = eta_sweep_figure(x2, window=HEADLINE_W, profile=profile)
    add_caption(fig, _caption_text(profile, seeds_text, describe, differs))
    figures = [_save(fig, out / "lockin_eta_sweep.png")]
    fig = eta_fire_figure(x2, long, profile)
    add_caption(fig, _caption_text(profile, seeds_text, describe, differs,
                                   "Left: fire epoch per run (open circles at the horizon: no fire). Right: one point per "
                                   "run that both crossed rho_tian >= 0.075 and reached test 0.5; the published fit is "
                                   "over 20 runs at 600 epochs."))
    figures.append(_save(fig, out / "lockin_eta_fire.png"))
    summary = dict(horizon=H, per_eta=per_eta, rho_vs_test_fit=fit, extension=long_vals if lr else None,
                   statuses={r.get("name"): r.get("status") for r in records + long_records})
    return summary, rows, figures
