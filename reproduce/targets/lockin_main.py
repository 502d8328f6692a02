"""Spectral lock-in targets 1 and 2 (``python -m reproduce.targets.lockin --only main|window``).

* ``main``: median sigma2/sigma3 (W = 20) with IQR, grok (eta = 2e-4) vs control (eta = 0), slope
  fire epoch, Theorem-6 sign-match in both modes (``lockin_main.yaml``).
* ``window``: W = 5/10/20/30 detectors on the same runs (false positives in the control at W <= 10).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grok_lightning.plots.lockin import main_figure, window_sweep_figure
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
from reproduce.report import claim_row, count_row, row
from reproduce.targets.common import median_ci
from reproduce.targets.lockin_common import (
    HEADLINE_W,
    P_SIGN_MEDIAN,
    PAPER,
    RHO_THRESHOLD,
    T6_EPOCHS,
    WINDOWS,
    add_caption,
    caption_text,
    describe_tian,
    differs_from_paper,
    fire_list,
    format_number,
    record_seed,
    replays_paper,
    save_figure,
    value_set,
)


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
    med_g, ci_g, lvl_g = median_ci(late_g)
    med_c, ci_c, lvl_c = median_ci(late_c)
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
                       seed0=theorem6_value(grok[0], e, "sign_match_paper") if grok and record_seed(grok[0]) == 0 else None,
                       abs_cos_seed0=theorem6_value(grok[0], e, "median_abs_cos") if grok and record_seed(grok[0]) == 0 else None)
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
    fig = main_figure(grok + control, window=W, profile=profile, published_sign_match=P_SIGN_MEDIAN)
    add_caption(fig, caption_text(profile, seeds_text, describe_tian(grok + control, configs), differs, extra))
    figures = [save_figure(fig, out / "lockin_main.png")]

    n_g, n_c = len(grok), len(control)
    fire_med, fire_ci, fire_lvl = median_ci(fired_g)
    h = value_set([record_horizon(r) for r in grok + control])
    h = h if isinstance(h, (int, float)) else min(map(record_horizon, grok + control), default=None)
    rows = [
        count_row("lock.fire_grok", "slope fire rate, grok eta=2e-4 (W=20)", len(fired_g), n_g, profile,
                  note=f"fire epochs {fire_list(fires_g)}", horizon=h),
        count_row("lock.fire_control", "slope fire rate, control eta=0 (W=20)", len(fired_c), n_c, profile,
                  note=f"fire epochs {fired_c}" if fired_c else "", horizon=h),
        claim_row("lock.fire_epoch", "median slope fire epoch, grok (W=20)", fire_med, profile, len(fired_g),
                  ours_ci=fire_ci, ci_level=fire_lvl, horizon=h,
                  note=f"ours IQR {format_number(interquartile_range(fired_g))}, n = {len(fired_g)} fired runs"),
        claim_row("lock.late_grok", f"late sigma2/sigma3 grok (median of per-run medians, epochs {lo}-{hi})", med_g,
                  profile, n_g, ours_ci=ci_g, ci_level=lvl_g, horizon=h,
                  note=f"the paper's bracket [168, 320] is probably the min-max over 15 seeds; ours range "
                       f"{format_number([min(late_g, default=None), max(late_g, default=None)])}"
                       + ("" if hi >= 400 else f"; horizon {hi}: window {lo}-{hi}, not 200-400")),
        claim_row("lock.late_control", f"late sigma2/sigma3 control (epochs {lo}-{hi})", med_c, profile, n_c,
                  ours_ci=ci_c, ci_level=lvl_c, horizon=h,
                  note=f"ours range {format_number([min(late_c, default=None), max(late_c, default=None)])}"),
        claim_row("lock.separation", "separation: late grok / late control", separation, profile, n_g + n_c,
                  ours_ci=None if ci_g is None or ci_c is None else [ci_g[0] / ci_c[1], ci_g[1] / ci_c[0]], horizon=h,
                  ci_level=None if lvl_g is None else lvl_g * lvl_c,
                  note=f"ratio of the two medians above (n = {n_g} + {n_c}); interval: the ratio of their intervals' "
                       "opposite ends (coverage at least the product of theirs)"),
    ]
    for e in T6_EPOCHS:
        s = sign[e]
        value, ci, level = median_ci(s["paper"])
        rows.append(claim_row(f"lock.sign_match_{e}", f"Theorem-6 sign-match, paper mode, epoch {e}", value, profile,
                              len(s["paper"]), ours_ci=ci, ci_level=level, horizon=h,
                              note=f"median over grok seeds 0-4 present (n = {len(s['paper'])}; the paper's IQR and "
                                   f"range: the claim's source and margin); ours values {[round(v, 3) for v in s['paper']]}"
                                   + (f"; all {len(s['paper_all'])} grok seeds: median "
                                      f"{format_number(finite_median(s['paper_all']))}"
                                      if len(s["paper_all"]) > len(s["paper"]) else "")))
    at_175 = sign.get(175, {}).get("paper", [])
    rows.append(count_row("lock.sign_match_175_all", "sign-match >= 0.95 at epoch 175 (seeds 0-4)",
                          sum(v >= 0.95 for v in at_175), len(at_175), profile, horizon=h,
                          note=f"ours {[round(v, 3) for v in at_175]}; the paper's own 5-seed range at 175 starts "
                               "below 0.95 (the claim's statistic)"))
    replay = replays_paper(grok[0] if grok else None)
    for e in T6_EPOCHS:
        n0 = int(sign[e]["seed0"] is not None)
        rows.append(claim_row(f"lock.sign_match_{e}.seed0", f"Theorem-6 sign-match, paper mode, epoch {e}, seed 0",
                              sign[e]["seed0"], profile, n0, horizon=h, note="one run on each side", replay=replay))
        rows.append(claim_row(f"lock.median_abs_cos_{e}", f"median |cos| of the top-200 pairs, epoch {e}, seed 0",
                              sign[e]["abs_cos_seed0"], profile, n0, horizon=h, replay=replay,
                              note=f"ours median over seeds 0-4 {format_number(sign[e]['median_abs_cos'])}"))
    for e in T6_EPOCHS:
        s = sign[e]
        rows.append(row(PAPER, f"Theorem-6 sign-match, exact mode, epoch {e} (min over runs)", None,
                        min(s["exact"]) if s["exact"] else None, profile, len(s["exact"]), kind="identity",
                        expected=1.0, margin=0.0,
                        note="our check, not a claim of the paper: with the exact leave-pair-out projector the "
                             "sign rule is an identity (Schur complement), 1.000 for any features"))
    rows += rank2_rows(grok, profile, h)
    th_med, th_ci, th_lvl = median_ci(test_half)
    lag_med, lag_ci, lag_lvl = median_ci(lags)
    rho_med, rho_ci, rho_lvl = median_ci(rho_g)
    rows += [
        claim_row("lock.test_half", "median epoch test acc >= 0.5, grok", th_med, profile, n_g, ours_ci=th_ci,
                  ci_level=th_lvl, horizon=h, note=f"ours {test_half}"),
        claim_row("lock.lag", "lag: slope fire - epoch test acc >= 0.99 (median)", lag_med, profile, len(lags),
                  ours_ci=lag_ci, ci_level=lag_lvl, horizon=h, note=f"ours per run {lags}"),
        claim_row("lock.rho_fire", f"rho_tian >= {RHO_THRESHOLD}: median fire epoch, grok", rho_med, profile,
                  sum(v is not None for v in rho_g), ours_ci=rho_ci, ci_level=rho_lvl, horizon=h,
                  note=f"rho_tian computed every {rho_every} epoch(s), so ours is resolved to that"),
        count_row("lock.rho_control", f"rho_tian >= {RHO_THRESHOLD}: fire rate, control",
                  sum(v is not None for v in rho_c), n_c, profile, horizon=h,
                  note=f"ours max rho_tian over control runs {format_number(rho_c_max)}"),
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


def rank2_rows(grok: list[dict], profile: str, horizon) -> list[dict]:
    """Seed 0's W = 20 spectrum, as the paper's table: how far sigma3 falls from epoch 150 to 200
    while sigma2 levels off, and sigma2/sigma3 at epoch 200."""
    seed0 = next((r for r in grok if record_seed(r) == 0), None)
    at = {}
    if seed0 is not None:
        for k in (2, 3):
            epochs, values = history_column(seed0, lockin_key(HEADLINE_W, f"sigma{k}"))
            at[k] = dict(zip(epochs.astype(int).tolist(), values.tolist()))
    value = lambda k, e: at.get(k, {}).get(e)
    drop = value(3, 150) / value(3, 200) if value(3, 150) and value(3, 200) else None
    ratio = value(2, 200) / value(3, 200) if value(2, 200) and value(3, 200) else None
    note = (f"seed 0: sigma2 {format_number(value(2, 150))} -> {format_number(value(2, 200))}, sigma3 "
            f"{format_number(value(3, 150))} -> {format_number(value(3, 200))} (epochs 150 -> 200)")
    replay = replays_paper(seed0)
    return [claim_row("lock.rank2_s3_drop", "sigma3(150) / sigma3(200), W = 20, seed 0", drop, profile, 1, note=note,
                      horizon=horizon, replay=replay),
            claim_row("lock.rank2_ratio_200", "sigma2/sigma3 at epoch 200, W = 20, seed 0", ratio, profile, 1,
                      note=note, horizon=horizon, replay=replay)]


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
        per_run = ([window_median(r, key, lo, hi) for r in grok], [window_median(r, key, lo, hi) for r in control])
        late = tuple(finite_median(v) for v in per_run)
        sub_c = [f for r, f in zip(control, fc) if record_seed(r) <= 2]
        sub_g = [f for r, f in zip(grok, fg) if record_seed(r) <= 2]
        per_w[W] = dict(fire_grok=fg, fire_control=fc, late_grok=late[0], late_control=late[1])
        k_c, k_g = sum(f is not None for f in fc), sum(f is not None for f in fg)
        subset = (f"; seeds 0-2 (the paper's): grok {sum(f is not None for f in sub_g)}/{len(sub_g)}, control "
                  f"{sum(f is not None for f in sub_c)}/{len(sub_c)}") if len(fc) > 3 or len(fg) > 3 else ""
        h = min(map(record_horizon, grok + control), default=None)
        rows.append(count_row(f"lock.window{W}.control", f"window sweep W={W}: control false-positive rate", k_c, len(fc),
                              profile, horizon=h,
                              note=f"fired at {[f for f in fc if f is not None]}{subset}"))
        rows.append(count_row(f"lock.window{W}.grok", f"window sweep W={W}: grok fire rate", k_g, len(fg), profile,
                              horizon=h))
        fired = [f for f in fg if f is not None]
        med, ci, level = median_ci(fired)
        rows.append(claim_row(f"lock.window{W}.epoch", f"window sweep W={W}: median grok fire epoch", med, profile,
                              len(fired), ours_ci=ci, ci_level=level, runs=fired, horizon=h,
                              note=f"ours {fg} (the paper's fire epochs of seeds 0-2: the claim's source)"))
        for name, values in zip(("grok", "control"), per_run):
            values = [v for v in values if v is not None and np.isfinite(v)]
            med, ci, level = median_ci(values)
            rows.append(claim_row(f"lock.window{W}.late_{name}", f"window sweep W={W}: late sigma2/sigma3, {name}", med,
                                  profile, len(values), ours_ci=ci, ci_level=level, horizon=h,
                                  note=f"epochs {lo}-{hi}; ours per run {[format_number(v) for v in values]}"))
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
