"""Fig. 8 (forest plot of the E12 paired contrasts) and Fig. 4 (peak sigma_H vs d/H with the
random-label null) of arXiv 2605.20441."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, place_caption, plt
from grok_lightning.stats.phases import history_curve
from grok_lightning.stats.significance import MIN_PAIRS_COHEN_D

__all__ = ["figure_forest", "figure_head_width", "figure_head_width_curves"]


def figure_forest(tests: list[dict], paper_d: dict, caption_text: str):
    """Cohen's d of each (contrast, lambda stratum) with its exact (noncentral t) 95% interval, the
    one the report's rows score (without it, the bootstrap CI of the mean difference over the SD of
    the differences); paper values as black stars. A d from fewer than ``MIN_PAIRS_COHEN_D`` pairs
    is drawn hollow: shown, not scored."""
    shown = [t for t in tests if t.get("cohen_d") is not None]
    matched = {(t["contrast"], t["stratum"]) for t in shown}
    # paper contrasts without a counterpart here (e.g. a smoke run at another lambda) get their own line
    shown += [{"contrast": c, "stratum": s, "paper_only": True} for (c, s) in paper_d if (c, s) not in matched]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(shown), 3) + 2.2))
    drawn = set()  # the legend names only the marks the figure has
    for i, t in enumerate(shown):
        paper = paper_d.get((t["contrast"], t["stratum"]))
        if paper:
            ax.plot(paper[0], i, "*", color="black", markersize=10)
            drawn.add("paper")
        if t.get("paper_only"):
            continue
        d, sd = t["cohen_d"], t.get("std_diff") or np.nan
        if t.get("cohen_d_ci") and None not in t["cohen_d_ci"]:  # d's exact interval, the one the rows score
            lo, hi = t["cohen_d_ci"]
        elif t.get("ci_95_diff") and None not in t["ci_95_diff"]:
            lo, hi = np.asarray(t["ci_95_diff"], float) / sd
        else:
            lo, hi = d, d
        color = "tab:red" if t.get("reject_bonferroni") else "tab:blue"
        scored = (t.get("n") or 0) >= MIN_PAIRS_COHEN_D
        ax.errorbar(d, i, xerr=[[d - lo], [hi - d]], fmt="o", color=color, markerfacecolor=color if scored else "white",
                    capsize=3)
        drawn.add(("significant" if t.get("reject_bonferroni") else "not significant") if scored else "not scored")
    legend = {"paper": dict(marker="*", color="black", label="paper d"),
              "significant": dict(marker="o", color="tab:red", label="ours, Bonferroni-significant in its family"),
              "not significant": dict(marker="o", color="tab:blue", label="ours, not significant"),
              "not scored": dict(marker="o", color="tab:blue", markerfacecolor="white",
                                 label=f"ours, < {MIN_PAIRS_COHEN_D} pairs: not scored")}
    for kind, style in legend.items():
        if kind in drawn:
            ax.plot([], [], linestyle="none", **style)
    ax.axvline(0, color="grey", linewidth=1)
    labels = [f"paper only: {t['contrast']}  lambda {t['stratum']}" if t.get("paper_only")
              else f"{t['contrast']}  lambda {t['stratum']}  (n = {t.get('n')})" for t in shown]
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("Cohen's d on peak $\\sigma_H$ after the intervention (paired)")
    if drawn:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: it hides no point
    fig.suptitle("Fig. 8: interventions at peak differentiation (E12)", fontsize=11)
    place_caption(fig, caption_text, bottom=0.2, top=0.95, size=6.5)
    return fig


def figure_head_width(dh: np.ndarray, peak: np.ndarray, fit: dict | None, null: np.ndarray, paper: dict, caption_text: str,
                      unbiased: np.ndarray | None = None, alternatives: dict | None = None, null_dh: float = 16):
    """Fig. 4: peak sigma_H per run vs d/H (log2 x), bin means, the saturating fit, the null band;
    with ``unbiased``, the bin means with the unbiased spread over heads as well (hollow); with
    ``alternatives`` (``{reading: (real peaks aligned with dh, null peaks)}``), each reading's bin
    means (dash-dot) and its null mean as a triangle at ``null_dh``."""
    fig, ax = plt.subplots(figsize=(10, 4.6))
    ax.scatter(dh, peak, color="tab:blue", alpha=0.6, label=f"runs (n = {len(peak)})")
    bins = sorted(set(dh.tolist()))
    means = [float(np.mean(peak[dh == b])) for b in bins]
    half = [_t_half(peak[dh == b]) for b in bins]
    ax.errorbar(bins, means, yerr=half, fmt="o-", color="tab:blue", capsize=4,
                label="bin mean, t 95% interval (population std over heads, as the paper)")
    if unbiased is not None and len(unbiased):
        ax.plot(bins, [float(np.mean(unbiased[dh == b])) for b in bins], "o--", color="tab:blue",
                markerfacecolor="none", label="bin mean, unbiased std over heads")
    for (reading, (real, null_peaks)), color in zip((alternatives or {}).items(), ("tab:green", "tab:purple")):
        seen = np.isfinite(real)
        if seen.any():
            at = sorted(set(dh[seen].tolist()))
            ax.plot(at, [float(np.mean(real[seen & (dh == b)])) for b in at], "o-.", color=color, markersize=4,
                    label=f"bin mean, {reading} reading (sensitivity)")
        null_peaks = np.asarray(null_peaks, float)[np.isfinite(null_peaks)]
        if len(null_peaks):
            ax.plot([null_dh], [float(np.mean(null_peaks))], "v", color=color, markerfacecolor="none", markersize=8,
                    label=f"random-label null, {reading} reading (sensitivity, n = {len(null_peaks)})")
    sat = (fit or {}).get("models", {}).get("saturating_exp", {})
    if sat.get("params"):
        p = sat["params"]
        xs = np.linspace(min(bins), max(bins), 200)
        ax.plot(xs, p["c"] + p["a"] * (1 - np.exp(-xs / p["b"])), color="tab:orange",
                label=f"saturating fit c + a(1 - exp(-(d/H)/b)) (AIC prefers: {fit.get('best')})")
    if len(null):
        m = float(np.mean(null))
        if len(null) > 1:  # one run has no spread: a line, not a band of width zero
            s = float(np.std(null, ddof=1))
            ax.axhspan(m - s, m + s, color="grey", alpha=0.2, label=f"random-label null {m:.3f} +- {s:.3f} sd (n = {len(null)})")
        ax.axhline(m, color="grey", linestyle=":", label=None if len(null) > 1 else f"random-label null {m:.3f} (n = 1)")
    ax.errorbar(paper["dh"], paper["peak"], yerr=paper.get("margin"), **PAPER_STYLE, marker="s", capsize=3,
                label="paper bin means (read off Fig. 4), +- the equivalence margin")
    ax.axhline(paper["null"], color="black", linestyle="--", linewidth=0.8, label=f"paper null {paper['null']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("head width d/H (log2)")
    ax.set_ylabel("peak $\\sigma_H$ (epochs > 100)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: it hid the d/H = 16-32 points
    fig.suptitle("Fig. 4: differentiation amplitude vs head width, and the random-label null", fontsize=11)
    place_caption(fig, caption_text, bottom=0.13, top=0.95, size=6.5)
    return fig


def _t_half(x: np.ndarray) -> float:
    """Half-width of the t 95% interval of a mean (0 for fewer than 2 values)."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def figure_head_width_curves(records: list[dict], paper: dict, caption_text: str, after: int = 100):
    """The trajectories behind Fig. 4 as small multiples: one column per head count and one for the
    random-label null, each run's sigma_H (top) and s_bar (bottom) against epoch, one colour per
    seed, the paper's Fig. 4 bin mean at that d/H dotted, so that a reader sees whether each scored
    maximum is a peak."""
    groups = sorted({(bool(r["config"]["data"].get("random_labels")), r["config"]["model"]["n_heads"]) for r in records})
    fig, axes = plt.subplots(2, len(groups), figsize=(2.6 * len(groups) + 1.5, 6.5), sharex=True, sharey="row",
                             squeeze=False)
    seeds = sorted({r["config"]["seed"] for r in records})
    colors = dict(zip(seeds, plt.cm.tab10(np.arange(len(seeds)) % 10)))
    paper_peak = dict(zip(paper["dh"], paper["peak"]))
    for col, (null, heads) in enumerate(groups):
        top, bottom = axes[0][col], axes[1][col]
        runs = [r for r in records if (bool(r["config"]["data"].get("random_labels")), r["config"]["model"]["n_heads"])
                == (null, heads)]
        d_head = runs[0]["config"]["model"]["d_model"] // heads
        for r in sorted(runs, key=lambda r: r["config"]["seed"]):
            style = dict(color=colors[r["config"]["seed"]], linewidth=0.9, label=f"seed {r['config']['seed']}")
            top.plot(*history_curve(r["history"], "entropy_std"), **style)
            bottom.plot(*history_curve(r["history"], "mean_similarity"), **style)
        if null:
            top.axhline(paper["null"], color="black", linestyle=":", linewidth=1, label=f"paper null {paper['null']:g}")
        elif d_head in paper_peak:
            top.axhline(paper_peak[d_head], color="black", linestyle=":", linewidth=1,
                        label=f"paper bin mean {paper_peak[d_head]:g}")
        top.axvline(after, color="grey", linewidth=0.6)
        top.set_title(f"{'random labels, ' if null else ''}H {heads} (d/H {d_head}), n = {len(runs)}", fontsize=9)
        top.legend(fontsize=6, loc="upper right")
        bottom.set_xlabel("epoch")
    axes[0][0].set_ylabel(r"$\sigma_H$ (grey: the peak statistic starts after epoch " + f"{after})", fontsize=8)
    axes[1][0].set_ylabel(r"$\bar s$", fontsize=9)
    return finish(fig, "Fig. 4 trajectories: sigma_H and s_bar per head count", caption_text, bottom=0.16)
