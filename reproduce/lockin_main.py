"""Spectral lock-in targets 1 and 2 (``python -m reproduce.lockin --only main|window``).

* ``main``: median sigma2/sigma3 (W = 20) with IQR, grok (eta = 2e-4) vs control (eta = 0), slope
  fire epoch, Theorem-6 sign-match in both modes (``lockin_main.yaml``).
* ``window``: W = 5/10/20/30 detectors on the same runs (false positives in the control at W <= 10).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grok_lightning.plots.lockin import PUBLISHED_SIGN_MATCH, main_figure, window_sweep_figure
from grok_lightning.stats.lockin import (
    finite_median,
    fire_epoch,
    first_epoch_at_least,
    history_column,
    interquartile_range,
    late_window,
    lockin_key,
    record_horizon,
    theorem6_value,
    tian_activation,
    tian_eta,
    tian_model,
    window_median,
)
from reproduce.common import median_ci
from reproduce.lockin_common import (
    HEADLINE_W,
    P_MAIN,
    P_SIGN_IQR,
    P_WINDOW,
    PAPER,
    RHO_THRESHOLD,
    T6_EPOCHS,
    WINDOWS,
    add_caption,
    caption_text,
    describe_tian,
    differs_from_paper,
    format_number,
    fraction,
    record_seed,
    save_figure,
    value_set,
)
from reproduce.report import row


# --- target 1: main figure ------------------------------------------------------------------------
def target_main(records: list[dict], configs: dict, profile: str, out: Path):
    x2 = [r for r in records if tian_activation(r) == "x2"]
    grok = sorted([r for r in x2 if tian_eta(r) > 0], key=record_seed)
    control = sorted([r for r in x2 if tian_eta(r) == 0], key=record_seed)
    W = HEADLINE_W
    fires_g = [fire_epoch(r, W) for r in grok]
    fires_c = [fire_epoch(r, W) for r in control]
    fired_g = [f for f in fires_g if f is not None]
    fired_c = [f for f in fires_c if f is not None]
    lo, hi = late_window(grok + control)
    key = lockin_key(W, "ratio23")
    late_g = [window_median(r, key, lo, hi) for r in grok]
    late_c = [window_median(r, key, lo, hi) for r in control]
    med_g, ci_g = median_ci(late_g)
    med_c, ci_c = median_ci(late_c)
    separation = med_g / med_c if med_c and np.isfinite(med_c) else float("nan")
    # Theorem 6: the paper's medians are over seeds 0-4
    t6_seeds = [r for r in grok if record_seed(r) <= 4]
    sign = {}
    for e in T6_EPOCHS:
        paper_vals = [theorem6_value(r, e, "sign_match_paper") for r in t6_seeds]
        exact_all = [theorem6_value(r, e, "sign_match_exact") for r in grok]
        sign[e] = dict(paper=[v for v in paper_vals if v is not None],
                       paper_all=[theorem6_value(r, e, "sign_match_paper") for r in grok if theorem6_value(r, e, "sign_match_paper") is not None],
                       exact=[v for v in exact_all if v is not None],
                       frac_neg_B_pos_cos=finite_median([theorem6_value(r, e, "frac_neg_B_pos_cos") for r in t6_seeds]),
                       median_abs_cos=finite_median([theorem6_value(r, e, "median_abs_cos") for r in t6_seeds]),
                       seed0=theorem6_value(grok[0], e, "sign_match_paper") if grok and record_seed(grok[0]) == 0 else None)
    test_half = [first_epoch_at_least(r, "test_acc", 0.5) for r in grok]
    grok_099 = [r.get("grok_epoch") for r in grok]
    lags = [f - g for f, g in zip(fires_g, grok_099) if f is not None and g is not None]
    rho_g = [first_epoch_at_least(r, "rho_tian", RHO_THRESHOLD) for r in grok]
    rho_c = [first_epoch_at_least(r, "rho_tian", RHO_THRESHOLD) for r in control]
    rho_c_max = max((np.nanmax(history_column(r, "rho_tian")[1]) for r in control
                     if np.isfinite(history_column(r, "rho_tian")[1]).any()), default=float("nan"))
    rho_every = value_set([tian_model(r).get("rho_every") for r in grok + control])
    horizon = value_set([r["config"].get("max_epochs") for r in grok + control])

    # figure
    seeds_text = (f"grok eta = {value_set([tian_eta(r) for r in grok])}: seeds {[record_seed(r) for r in grok]} (n = {len(grok)}); "
                  f"control eta = 0: seeds {[record_seed(r) for r in control]} (n = {len(control)}); horizon {horizon} epochs; "
                  f"bands: IQR over seeds; sign-match: median over grok seeds {[record_seed(r) for r in t6_seeds]} (paper: seeds 0-4)")
    differs = differs_from_paper(profile, "main", grok=len(grok), control=len(control), epochs=max(map(record_horizon, grok + control), default=0),
                       rho_every=tian_model(grok[0]).get("rho_every") if grok else None)
    if hi < 400:
        differs += f"; late window epochs {lo}-{hi} (paper 200-400; the ratio decays after ~300)"
    extra = ("Published sign-match (x): Xu's 5-seed medians. 'paper' mode = sgn B_jl = -sgn cos_jl, which is what "
             "the published code measures (its Woodbury has 1/eta^2 where 1/eta is correct); 'exact' mode = the "
             "Theorem-6 rule with the exact leave-pair-out projector, an algebraic identity, so 1.000 by construction.")
    fig = main_figure(grok + control, window=W, profile=profile)
    add_caption(fig, caption_text(profile, seeds_text, describe_tian(grok + control, configs), differs, extra))
    figures = [save_figure(fig, out / "lockin_main.png")]

    n_g, n_c = len(grok), len(control)
    fire_med, fire_ci = median_ci(fired_g)
    rows = [
        row(PAPER, "slope fire rate, grok eta=2e-4 (W=20)", P_MAIN["fire_rate_grok"], fraction(len(fired_g), n_g), profile, n_g,
            note=f"{len(fired_g)}/{n_g} fired (paper 15/15); fire epochs {fires_g}"),
        row(PAPER, "slope fire rate, control eta=0 (W=20)", P_MAIN["fire_rate_control"], fraction(len(fired_c), n_c), profile, n_c,
            note=f"{len(fired_c)}/{n_c} fired (paper 0/15)" + (f"; fire epochs {fired_c}" if fired_c else "")),
        row(PAPER, "median slope fire epoch, grok (W=20)", P_MAIN["fire_epoch"], fire_med, profile, len(fired_g), ours_ci=fire_ci,
            note=f"paper IQR [173, 174] (not a CI); ours IQR {format_number(interquartile_range(fired_g))}, n = {len(fired_g)} fired runs"),
        row(PAPER, f"late sigma2/sigma3 grok (median of per-run medians, epochs {lo}-{hi})", P_MAIN["late_grok"], med_g,
            profile, n_g, ours_ci=ci_g,
            note=f"paper bracket [168, 320] is probably the min-max over 15 seeds; ours range {format_number([min(late_g, default=None), max(late_g, default=None)])}"
                 + ("" if hi >= 400 else f"; horizon {hi}: window {lo}-{hi}, not 200-400")),
        row(PAPER, f"late sigma2/sigma3 control (epochs {lo}-{hi})", P_MAIN["late_control"], med_c, profile, n_c, ours_ci=ci_c,
            note=f"paper bracket [1.25, 1.37] (probably min-max); ours range {format_number([min(late_c, default=None), max(late_c, default=None)])}"),
        row(PAPER, "separation: late grok / late control", P_MAIN["separation"], separation, profile, n_g + n_c,
            note=f"ratio of the two medians above (n = {n_g} + {n_c}); no CI"),
    ]
    for e in T6_EPOCHS:
        s = sign[e]
        value, ci = median_ci(s["paper"])
        iqr, rng = P_SIGN_IQR[e]
        rows.append(row(PAPER, f"Theorem-6 sign-match, paper mode, epoch {e}", PUBLISHED_SIGN_MATCH[e], value, profile,
                        len(s["paper"]), ours_ci=ci,
                        note=f"median over grok seeds 0-4 present (n = {len(s['paper'])}); paper 5-seed IQR {list(iqr)}, range "
                             f"{list(rng)}; ours values {[round(v, 3) for v in s['paper']]}"
                             + (f"; all {len(s['paper_all'])} grok seeds: median {format_number(finite_median(s['paper_all']))}"
                                if len(s["paper_all"]) > len(s["paper"]) else "")))
    for e in T6_EPOCHS:
        s = sign[e]
        rows.append(row(PAPER, f"Theorem-6 sign-match, exact mode, epoch {e} (min over runs)", 1.0,
                        min(s["exact"]) if s["exact"] else None, profile, len(s["exact"]),
                        note="an identity (Schur complement), must be 1.000 for any features; paper reports only the "
                             "published (paper-mode) metric"))
    th_med, th_ci = median_ci(test_half)
    lag_med, lag_ci = median_ci(lags)
    rho_med, rho_ci = median_ci(rho_g)
    rows += [
        row(PAPER, "median epoch test acc >= 0.5, grok", P_MAIN["test_half"], th_med, profile, n_g, ours_ci=th_ci,
            note=f"paper IQR [99, 102]; ours {test_half}"),
        row(PAPER, "lag: slope fire - epoch test acc >= 0.99 (median)", P_MAIN["lag_099"], lag_med, profile, len(lags),
            ours_ci=lag_ci, note=f"paper pilot: median 35, IQR [34, 36], 6 seeds; ours per run {lags}"),
        row(PAPER, f"rho_tian >= {RHO_THRESHOLD}: median fire epoch, grok", P_MAIN["rho_fire"], rho_med, profile,
            sum(v is not None for v in rho_g), ours_ci=rho_ci,
            note=f"paper IQR [17, 18]; rho_tian computed every {rho_every} epoch(s), so ours is resolved to that"),
        row(PAPER, f"rho_tian >= {RHO_THRESHOLD}: fire rate, control", 0.0,
            fraction(sum(v is not None for v in rho_c), n_c), profile, n_c,
            note=f"paper: 0/15, control max 0.065; ours max rho_tian over control runs {format_number(rho_c_max)}"),
    ]
    summary = dict(
        seeds_grok=[record_seed(r) for r in grok], seeds_control=[record_seed(r) for r in control], horizon=horizon,
        late_window=[lo, hi], fire_epochs_grok=fires_g, fire_epochs_control=fires_c,
        late_ratio_grok=late_g, late_ratio_control=late_c, late_median_grok=med_g, late_median_control=med_c,
        separation=separation, test_half=test_half, grok_epoch_099=grok_099, lag_fire_minus_099=lags,
        rho_fire_grok=rho_g, rho_fire_control=rho_c, rho_control_max=rho_c_max,
        theorem6={str(e): dict(paper_mode_seeds0_4=s["paper"], paper_mode_all=s["paper_all"], exact_all=s["exact"],
                               paper_mode_seed0=s["seed0"], frac_neg_B_pos_cos_median=s["frac_neg_B_pos_cos"],
                               median_abs_cos_median=s["median_abs_cos"])
                  for e, s in sign.items()},
        statuses={r.get("name"): r.get("status") for r in records},
    )
    return summary, rows, figures


# --- target 2: window sweep -----------------------------------------------------------------------
def target_window(records: list[dict], configs: dict, profile: str, out: Path):
    x2 = [r for r in records if tian_activation(r) == "x2"]
    grok = sorted([r for r in x2 if tian_eta(r) > 0], key=record_seed)
    control = sorted([r for r in x2 if tian_eta(r) == 0], key=record_seed)
    lo, hi = late_window(grok + control)
    rows, per_w = [], {}
    for W in WINDOWS:
        fg = [fire_epoch(r, W) for r in grok]
        fc = [fire_epoch(r, W) for r in control]
        key = lockin_key(W, "ratio23")
        late = (finite_median([window_median(r, key, lo, hi) for r in grok]), finite_median([window_median(r, key, lo, hi) for r in control]))
        sub_c = [f for r, f in zip(control, fc) if record_seed(r) <= 2]
        sub_g = [f for r, f in zip(grok, fg) if record_seed(r) <= 2]
        per_w[W] = dict(fire_grok=fg, fire_control=fc, late_grok=late[0], late_control=late[1])
        p = P_WINDOW[W]
        k_c, k_g = sum(f is not None for f in fc), sum(f is not None for f in fg)
        subset = (f"; seeds 0-2 (the paper's): grok {sum(f is not None for f in sub_g)}/{len(sub_g)}, control "
                  f"{sum(f is not None for f in sub_c)}/{len(sub_c)}") if len(fc) > 3 or len(fg) > 3 else ""
        rows.append(row(PAPER, f"window sweep W={W}: control false-positive rate", p["control"] / 3, fraction(k_c, len(fc)),
                        profile, len(fc),
                        note=f"{k_c}/{len(fc)} control runs fired at {[f for f in fc if f is not None]} (paper {p['control']}/3"
                             f"{', 0/15 in the headline runs' if W == 20 else ''}); late sigma2/sigma3 ours "
                             f"{format_number(late[1])} (paper {p['late'][1]}), epochs {lo}-{hi}{subset}"))
        rows.append(row(PAPER, f"window sweep W={W}: grok fire rate", p["grok"] / 3, fraction(k_g, len(fg)), profile, len(fg),
                        note=f"{k_g}/{len(fg)} grok runs fired (paper {p['grok']}/3); late sigma2/sigma3 ours {format_number(late[0])} "
                             f"(paper {p['late'][0]})"))
        fired = [f for f in fg if f is not None]
        med, ci = median_ci(fired)
        rows.append(row(PAPER, f"window sweep W={W}: median grok fire epoch", float(np.median(p["fire_epochs"])), med, profile,
                        len(fired), ours_ci=ci,
                        note=f"paper fire epochs {list(p['fire_epochs'])}; ours {fg}"))
    seeds_text = (f"the runs of the main figure: grok seeds {[record_seed(r) for r in grok]}, control seeds "
                  f"{[record_seed(r) for r in control]}; four detectors (W = {', '.join(map(str, WINDOWS))}) on every run; "
                  f"bands: IQR over seeds; late-window medians over epochs {lo}-{hi}")
    differs = differs_from_paper(profile, "main", grok=len(grok), control=len(control), epochs=max(map(record_horizon, grok + control), default=0))
    differs += "; the paper ran W = 5/10/30 on seeds 0-2 only (W = 20 from the 15-seed headline runs)"
    fig = window_sweep_figure(grok + control, windows=WINDOWS, profile=profile)
    add_caption(fig, caption_text(profile, seeds_text, describe_tian(grok + control, configs), differs))
    figures = [save_figure(fig, out / "lockin_window_sweep.png")]
    summary = dict(late_window=[lo, hi], windows={str(w): v for w, v in per_w.items()})
    return summary, rows, figures
