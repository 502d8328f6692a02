"""Spectral lock-in target 3, x^2 vs ReLU (``python -m reproduce.targets.lockin --only activation``):
``lockin_relu.yaml`` plus the x^2 grok runs of ``lockin_main.yaml``; Theorem 6 on the real ReLU
network next to the published (x^2-replay) values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from grok_lightning.plots.lockin import activation_figure
from grok_lightning.stats.lockin import (
    finite_median,
    fire_epoch,
    first_epoch_at_least,
    history_column,
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
    P_RELU,
    P_SIGN_SEED0,
    PAPER,
    RHO_THRESHOLD,
    add_caption,
    caption_text,
    describe_tian,
    differs_from_paper,
    fire_list,
    format_number,
    fraction,
    record_seed,
    save_figure,
    value_set,
)


# --- target 3: x^2 vs ReLU ------------------------------------------------------------------------
def relu_theorem6_figure(relu: list[dict], x2: list[dict], profile: str) -> Figure:
    """Theorem-6 sign-match on the real ReLU network (both modes) next to the published 'ReLU'
    values and our x^2 values (the published ones look like an x^2 replay)."""
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()

    def plot(records, mode, label, **style):
        epochs = sorted({int(e) for r in records for e in (r.get("theorem6") or {})})
        if not epochs:
            return
        for r in records:  # each seed, thin
            pts = [(e, theorem6_value(r, e, f"sign_match_{mode}")) for e in epochs if theorem6_value(r, e, f"sign_match_{mode}") is not None]
            if pts:
                ax.plot(*zip(*pts), color=style["color"], alpha=0.25, lw=0.8, ls=style.get("ls", "-"))
        med = [(e, finite_median([theorem6_value(r, e, f"sign_match_{mode}") for r in records])) for e in epochs]
        med = [(e, v) for e, v in med if np.isfinite(v)]
        if med:
            ax.plot(*zip(*med), label=f"{label} (median, n={len(records)})", **style)

    plot(relu, "paper", "ReLU, paper mode (ours)", color="C2", marker="o")
    plot(relu, "exact", "ReLU, exact mode (ours)", color="C2", marker="s", ls=":")
    plot(x2, "paper", "x^2, paper mode (ours)", color="C0", marker="o")
    published = sorted(P_RELU["sign_match"].items())
    ax.plot(*zip(*published), "kx", ms=9, mew=2, label="published 'ReLU' (seed 0)")
    ax.plot(*zip(*sorted(P_SIGN_SEED0.items())), "+", color="gray", ms=9, mew=1.5, label="published x^2, seed 0")
    ax.set(xlabel="epoch", ylabel="Theorem-6 sign-match (top-200 |cos| pairs)", ylim=(0.5, 1.02))
    ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Theorem 6 on the real ReLU network [{profile}]", fontsize=9)
    return fig


def target_activation(relu_records: list[dict], main_records: list[dict], relu_configs: dict, main_configs: dict,
                      profile: str, out: Path):
    relu = [r for r in relu_records if tian_activation(r) == "relu"]
    rg = sorted([r for r in relu if tian_eta(r) > 0], key=record_seed)
    rc = sorted([r for r in relu if tian_eta(r) == 0], key=record_seed)
    x2g = sorted([r for r in main_records if tian_activation(r) == "x2" and tian_eta(r) > 0], key=record_seed)
    W = HEADLINE_W
    key23, key12 = lockin_key(W, "ratio23"), lockin_key(W, "ratio12")
    H = min((record_horizon(r) for r in rg + rc), default=0)
    lo, hi = H // 2, H  # paper: "late" for ReLU is unstated; second half = 400-800 at the paper horizon
    fires_g = [fire_epoch(r, W) for r in rg]
    fires_c = [fire_epoch(r, W) for r in rc]
    late_g = [window_median(r, key23, lo, hi) for r in rg]
    late_c = [window_median(r, key23, lo, hi) for r in rc]
    late_g_200 = [window_median(r, key23, 200, 400) for r in rg]
    med_g, ci_g, lvl_g = median_ci(late_g)
    med_c, ci_c, lvl_c = median_ci(late_c)
    separation = med_g / med_c if med_c and np.isfinite(med_c) else float("nan")
    sig = {k: finite_median([window_median(r, lockin_key(W, f"sigma{k}"), lo, hi) for r in rg]) for k in range(1, 6)}
    late12 = [window_median(r, key12, lo, hi) for r in rg]
    x2_late12 = finite_median([window_median(r, key12, 200, min(400, record_horizon(r))) for r in x2g])
    rho0 = [float(history_column(r, "rho_tian")[1][0]) if len(history_column(r, "rho_tian")[1]) else None for r in rg + rc]
    test_half = [first_epoch_at_least(r, "test_acc", 0.5) for r in rg]
    grok_099 = [r.get("grok_epoch") for r in rg]
    seed0 = next((r for r in rg if record_seed(r) == 0), None)
    x2_seed0 = next((r for r in x2g if record_seed(r) == 0), None)
    t6_epochs = sorted({int(e) for r in rg for e in (r.get("theorem6") or {})})
    t6 = {e: dict(paper_seed0=theorem6_value(seed0, e, "sign_match_paper") if seed0 else None,
                  paper_all=[v for v in (theorem6_value(r, e, "sign_match_paper") for r in rg) if v is not None],
                  exact_all=[v for v in (theorem6_value(r, e, "sign_match_exact") for r in rg) if v is not None],
                  frac_neg_B_pos_cos=finite_median([theorem6_value(r, e, "frac_neg_B_pos_cos") for r in rg]),
                  x2_seed0=theorem6_value(x2_seed0, e, "sign_match_paper") if x2_seed0 else None)
          for e in t6_epochs}

    # figures
    seeds_text = (f"ReLU grok eta = {value_set([tian_eta(r) for r in rg])}: seeds {[record_seed(r) for r in rg]}, horizon "
                  f"{value_set([record_horizon(r) for r in rg])}; x^2 grok (main-figure runs): seeds {[record_seed(r) for r in x2g]}, "
                  f"horizon {value_set([record_horizon(r) for r in x2g])}; bands: IQR over seeds")
    differs = differs_from_paper(profile, "relu", grok=len(rg), control=len(rc), epochs=H,
                       rho_every=tian_model(rg[0]).get("rho_every") if rg else None)
    if H < 530:
        differs += f"; ReLU groks (test 0.99) near epoch 530, past this {H}-epoch horizon"
    fig = activation_figure(x2g + rg, window=W, profile=profile)
    add_caption(fig, caption_text(profile, seeds_text, describe_tian(rg, relu_configs) + " | x^2 runs: "
                                   + describe_tian(x2g, main_configs), differs))
    figures = [save_figure(fig, out / "lockin_activation.png")]

    vals = ", ".join(f"epoch {e}: seed 0 {format_number(t6[e]['paper_seed0'])}" for e in t6_epochs)
    x2vals = ", ".join(f"{e}: {format_number(t6[e]['x2_seed0'])}" for e in t6_epochs if t6[e]["x2_seed0"] is not None)
    extra = ("Published 'ReLU' values 0.91/0.995/1.000 (epochs 100/300/500) equal Xu's x^2 seed-0 values (0.91 at 100, "
             "0.995 at 300): the published theorem6_verify.py rebuilds the model without passing the activation, so it "
             f"replays x^2. On the real ReLU network the paper-mode metric gives {vals}; our x^2 seed 0 gives {x2vals or 'n/a'}. "
             f"Exact mode is {format_number(min((v for e in t6_epochs for v in t6[e]['exact_all']), default=None))} (min over runs and epochs), "
             "an identity.")
    t6_seeds = f"ReLU grok seeds {[record_seed(r) for r in rg]}; x^2 grok seeds {[record_seed(r) for r in x2g]} (thin lines: single seeds)"
    fig = relu_theorem6_figure(rg, x2g, profile)
    add_caption(fig, caption_text(profile, t6_seeds, describe_tian(rg, relu_configs),
                                   differs + ("; no epoch-500 point (past the horizon)" if H < 500 else ""), extra))
    figures.append(save_figure(fig, out / "lockin_relu_theorem6.png"))

    n_g, n_c = len(rg), len(rc)
    t099, t099_ci, t099_lvl = median_ci([g for g in grok_099 if g is not None])
    rows = [
        count_row("lock.relu_fire", "ReLU: slope fire rate, grok (W=20)", sum(f is not None for f in fires_g), n_g,
                  profile, note=f"fire epochs {fire_list(fires_g)}", horizon=H),
        row(PAPER, "ReLU: slope fire rate, control (W=20)", None, fraction(sum(f is not None for f in fires_c), n_c), profile, n_c,
            note=f"fire epochs {fire_list(fires_c)}; paper gives no control count"),
        claim_row("lock.relu_late", f"ReLU: late sigma2/sigma3 grok (median, epochs {lo}-{hi})", med_g, profile, n_g,
                  ours_ci=ci_g, ci_level=lvl_g, horizon=H,
                  note=f"the paper's ReLU window is unstated; second half of the horizon used; over epochs 200-400: "
                       f"{format_number(finite_median(late_g_200))} (independent numpy check: 2.73)"),
        row(PAPER, f"ReLU: late sigma2/sigma3 control (epochs {lo}-{hi})", None, med_c, profile, n_c, ours_ci=ci_c,
            ci_level=lvl_c, note="the paper does not give the control value behind 1.4x"),
        claim_row("lock.relu_separation", "ReLU: separation late grok / late control", separation, profile, n_g + n_c,
                  ours_ci=None if ci_g is None or ci_c is None else [ci_g[0] / ci_c[1], ci_g[1] / ci_c[0]],
                  ci_level=None if lvl_g is None else lvl_g * lvl_c, horizon=H,
                  note=f"n = {n_g} + {n_c}; interval: the ratio of the two intervals' opposite ends"),
        row(PAPER, f"ReLU: late sigma1/sigma2 grok (rank-1 dominance, epochs {lo}-{hi})", None, finite_median(late12), profile, n_g,
            note=f"paper: sigma1 >> sigma2 ~ sigma3 ~ sigma4 ~ sigma5; ours median sigma1..5 "
                 f"{[float(f'{sig[k]:.3g}') for k in range(1, 6)]}; x^2 late sigma1/sigma2 {format_number(x2_late12)}"),
        count_row("lock.relu_rho0", f"ReLU: rho_tian >= {RHO_THRESHOLD} at epoch 0", sum(v is not None and v >= RHO_THRESHOLD
                                                                                         for v in rho0[:n_g]), n_g, profile,
                  note=f"grok runs' values {[round(v, 4) for v in rho0[:n_g] if v is not None]}", horizon=H),
        claim_row("lock.relu_test", "ReLU: epoch test acc >= 0.99 (median)",
                  t099 if all(g is not None for g in grok_099) and grok_099 else None, profile, n_g, ours_ci=t099_ci,
                  ci_level=t099_lvl, horizon=H, note=f"per seed {grok_099} (None: not by epoch {H}); test >= 0.5 at {test_half}"),
    ]
    relu_epochs = (100, 300, 500)  # the epochs of the paper's 'ReLU' sign-match claims
    for e in sorted(set(t6_epochs) | set(relu_epochs)):
        entry = t6.get(e)
        quantity = f"ReLU: Theorem-6 sign-match, paper mode, epoch {e}, seed 0"
        scored = e in relu_epochs
        if entry is None:
            rows.append((claim_row(f"lock.relu_sign_{e}", quantity, None, profile, 0, horizon=H) if scored else
                         row(PAPER, quantity, None, None, profile, 0)) | {"note": f"epoch {e} is past this profile's horizon ({H})"})
            continue
        note = (f"real ReLU network; median over {len(entry['paper_all'])} ReLU seeds {format_number(finite_median(entry['paper_all']))}; "
                f"frac B<0 on +cos {format_number(entry['frac_neg_B_pos_cos'])}")
        if scored:
            note += (f"; the published value looks like an x^2 replay (our x^2 seed 0 at epoch {e}: "
                     f"{format_number(entry['x2_seed0'])}, Xu's x^2 seed 0: {format_number(P_SIGN_SEED0.get(e))})")
        n = 1 if entry["paper_seed0"] is not None else 0
        rows.append(claim_row(f"lock.relu_sign_{e}", quantity, entry["paper_seed0"], profile, n, note=note, horizon=H,
                              runs=entry["paper_all"])
                    if scored else row(PAPER, quantity, None, entry["paper_seed0"], profile, n, note=note))
    exact = [v for e in t6_epochs for v in t6[e]["exact_all"]]
    rows.append(row(PAPER, "ReLU: Theorem-6 sign-match, exact mode (min over runs and epochs)", None,
                    min(exact) if exact else None, profile, len(exact), kind="identity", expected=1.0, margin=0.0,
                    note=f"our check, not a claim of the paper: {len(exact)} (run, epoch) values at epochs {t6_epochs}; "
                         "an identity, 1.000 by construction"))
    summary = dict(seeds_grok=[record_seed(r) for r in rg], seeds_control=[record_seed(r) for r in rc], horizon=H, late_window=[lo, hi],
                   fire_epochs_grok=fires_g, fire_epochs_control=fires_c, late_ratio_grok=late_g, late_ratio_control=late_c,
                   late_ratio_grok_200_400=late_g_200, separation=separation, late_sigmas_grok={str(k): v for k, v in sig.items()},
                   late_ratio12_grok=late12, x2_late_ratio12=x2_late12, rho_epoch0=rho0, test_half=test_half,
                   grok_epoch_099=grok_099, theorem6={str(e): v for e, v in t6.items()},
                   statuses={r.get("name"): r.get("status") for r in relu_records})
    return summary, rows, figures
