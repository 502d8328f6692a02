"""Figures of the weight-decay-regimes paper (arXiv 2605.20441), as functions of run records."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, aligned, band, plt

__all__ = ["figure_two_phase"]

#: Fig. 2 landmarks (paper, n = 50 seeds, lambda = 1.0)
FIG2_PAPER = {"s_bar_start": 0.93, "s_bar_peak": 0.995, "s_bar_dip": 0.88}
PHASE1, PHASE2 = (100, 500), (1000, 3000)


def figure_two_phase(records: list[dict], caption_text: str):
    """Fig. 2: median and IQR over seeds of test accuracy, s_bar and sigma_H vs epoch (log x).

    Phase-1 (100-500) and Phase-2 (1,000-3,000) bands are the paper's fixed landmark windows;
    dotted lines mark the paper's s_bar reference values 0.93 -> 0.995 -> 0.88.
    """
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 8.5), sharex=True)
    panels = [("test_acc", "test accuracy", "tab:green"), ("mean_similarity", r"$\bar s$ (mean head cosine)", "tab:blue"),
              ("entropy_std", r"$\sigma_H$ (entropy std)", "tab:red")]
    for ax, (key, label, color) in zip(axes, panels):
        epochs, table = aligned(records, key)
        keep = epochs >= 1  # log axis: the initialisation (epoch 0) is reported in the summary
        band(ax, epochs[keep], table[:, keep], color, f"median, IQR (n = {len(records)})")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        for (lo, hi), name in ((PHASE1, "Phase 1"), (PHASE2, "Phase 2")):
            ax.axvspan(lo, hi, color="grey", alpha=0.12)
            ax.text(np.sqrt(lo * hi), 1.0, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8)
    for name, value in FIG2_PAPER.items():
        axes[1].axhline(value, **PAPER_STYLE)
        axes[1].text(1.05, value, f"paper {value}", fontsize=7, va="bottom")
    grok = [r["grok_epoch"] for r in records if r.get("grok_epoch") is not None]
    if grok:
        for ax in axes:
            ax.axvline(float(np.median(grok)), color="tab:green", linestyle="--", linewidth=1)
        axes[0].text(float(np.median(grok)), 0.05, f" median t_grok = {np.median(grok):.0f}", fontsize=8)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("epoch (log)")
    fig.suptitle("Fig. 2: two-phase dynamics of the attention order parameters", fontsize=11)
    fig.text(0.01, 0.005, caption_text, fontsize=7, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    return fig
