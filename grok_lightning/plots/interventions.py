"""Fig. 8 (forest plot of the E12 paired contrasts) and Fig. 4 (peak sigma_H vs d/H with the
random-label null) of arXiv 2605.20441."""

from __future__ import annotations

from collections import Counter

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, plt
from grok_lightning.stats.phases import history_curve

__all__ = ["figure_forest", "figure_head_width", "figure_head_width_curves"]


def figure_forest(tests: list[dict], paper_d: dict, caption_text: str):
    """Cohen's d of each (contrast, lambda stratum) with an approximate 95% CI (the bootstrap CI
    of the mean difference divided by the sd of the differences); paper values as black stars."""
    shown = [t for t in tests if t.get("cohen_d") is not None]
    matched = {(t["contrast"], t["stratum"]) for t in shown}
    # paper contrasts without a counterpart here (e.g. a smoke run at another lambda) get their own line
    shown += [{"contrast": c, "stratum": s, "paper_only": True} for (c, s) in paper_d if (c, s) not in matched]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(shown), 3) + 2.2))
    for i, t in enumerate(shown):
        paper = paper_d.get((t["contrast"], t["stratum"]))
        if paper:
            ax.plot(paper[0], i, "*", color="black", markersize=10)
        if t.get("paper_only"):
            continue
        d, sd = t["cohen_d"], t.get("std_diff") or np.nan
        lo, hi = (np.asarray(t["ci_95_diff"], float) / sd) if t.get("ci_95_diff") and None not in t["ci_95_diff"] else (d, d)
        color = "tab:red" if t.get("reject_bonferroni") else "tab:blue"
        ax.errorbar(d, i, xerr=[[d - lo], [hi - d]], fmt="o", color=color, capsize=3)
    ax.plot([], [], "*", color="black", label="paper d")
    ax.plot([], [], "o", color="tab:red", label="ours, Bonferroni-significant")
    ax.plot([], [], "o", color="tab:blue", label="ours, not significant")
    ax.axvline(0, color="grey", linewidth=1)
    labels = [f"paper only: {t['contrast']}  lambda {t['stratum']}" if t.get("paper_only")
              else f"{t['contrast']}  lambda {t['stratum']}  (n = {t.get('n')})" for t in shown]
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("Cohen's d on peak $\\sigma_H$ after the intervention (paired)")
    ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Fig. 8: interventions at peak differentiation (E12)", fontsize=11)
    fig.text(0.01, 0.005, caption_text, fontsize=6.5, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.2, 1, 0.95))
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
    ax.plot(bins, means, "o-", color="tab:blue", label="bin mean (population std over heads, as the paper)")
    if unbiased is not None and len(unbiased):
        ax.plot(bins, [float(np.mean(unbiased[dh == b])) for b in bins], "o--", color="tab:blue",
                markerfacecolor="none", label="bin mean, unbiased std over heads")
    for (reading, (real, null_peaks)), color in zip((alternatives or {}).items(), ("tab:green", "tab:purple")):
        seen = np.isfinite(real)
        if seen.any():
            at = sorted(set(dh[seen].tolist()))
            ax.plot(at, [float(np.mean(real[seen & (dh == b)])) for b in at], "o-.", color=color, markersize=4,
                    label=f"bin mean, {reading} reading")
        null_peaks = np.asarray(null_peaks, float)[np.isfinite(null_peaks)]
        if len(null_peaks):
            ax.plot([null_dh], [float(np.mean(null_peaks))], "v", color=color, markerfacecolor="none", markersize=8,
                    label=f"random-label null, {reading} reading (n = {len(null_peaks)})")
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
    ax.plot(paper["dh"], paper["peak"], **PAPER_STYLE, marker="s", label="paper bin means (read off Fig. 4)")
    ax.axhline(paper["null"], color="black", linestyle="--", linewidth=0.8, label=f"paper null {paper['null']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("head width d/H (log2)")
    ax.set_ylabel("peak $\\sigma_H$ (epochs > 100)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: it hid the d/H = 16-32 points
    fig.suptitle("Fig. 4: differentiation amplitude vs head width, and the random-label null", fontsize=11)
    fig.text(0.01, 0.005, caption_text, fontsize=6.5, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.13, 1, 0.95))
    return fig


def figure_head_width_curves(records: list[dict], paper: dict, caption_text: str, after: int = 100):
    """The trajectories behind Fig. 4: every run's sigma_H (top) and s_bar (bottom) against epoch,
    coloured by head count, the random-label null dashed, and the paper's Fig. 4 bin mean at each
    run's d/H dotted, so that a reader sees whether the scored maximum is a peak."""
    fig, axes = plt.subplots(2, 1, figsize=(11.5, 7.5), sharex=True)
    heads = sorted({r["config"]["model"]["n_heads"] for r in records})
    colors = dict(zip(heads, plt.cm.viridis(np.linspace(0, 0.9, len(heads)))))
    paper_peak = dict(zip(paper["dh"], paper["peak"]))
    seen = Counter()  # seeds of one head count share its colour; each further seed is fainter
    for r in sorted(records, key=lambda r: r["config"]["seed"]):
        h, m = r["history"], r["config"]["model"]
        null, d_head = bool(r["config"]["data"].get("random_labels")), m["d_model"] // m["n_heads"]
        alpha = (1.0, 0.55, 0.35, 0.25, 0.2)[min(seen[(m["n_heads"], null)], 4)]
        seen[(m["n_heads"], null)] += 1
        style = dict(color=colors[m["n_heads"]], linewidth=0.9, linestyle="--" if null else "-", alpha=alpha)
        label = f"H {m['n_heads']} (d/H {d_head}), seed {r['config']['seed']}{', random labels' if null else ''}"
        axes[0].plot(*history_curve(h, "entropy_std"), label=label, **style)
        axes[1].plot(*history_curve(h, "mean_similarity"), **style)
        if not null and d_head in paper_peak:
            axes[0].axhline(paper_peak[d_head], color=colors[m["n_heads"]], linestyle=":", linewidth=0.8)
    axes[0].axvline(after, color="grey", linewidth=0.6)
    axes[0].set_ylabel(r"$\sigma_H$ (dotted: paper's Fig. 4 bin mean at that d/H)", fontsize=9)
    axes[1].set_ylabel(r"$\bar s$", fontsize=9)
    axes[1].set_xlabel(f"epoch (grey: the peak statistic starts after epoch {after})")
    # beside the panel, not on it: with every run drawn, a legend inside hides the peaks it labels
    axes[0].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig, "Fig. 4 trajectories: sigma_H and s_bar by head count", caption_text, bottom=0.11)
