"""Figures of the weight-decay-regimes paper (arXiv 2605.20441), as functions of run records."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, aligned, band, place_caption, plt
from grok_lightning.stats.trajectory import read_off_reference

__all__ = ["figure_two_phase"]

#: the reading error of the paper's Fig. 2 median curves (n = 50 seeds, lambda = 1.0), read off the
#: published figure (stats.trajectory.read_off_reference)
FIG2_READING_ERROR = {"test_acc": 0.02, "s_bar": 0.005, "sigma_H": 0.005}
PHASE1, PHASE2 = (100, 500), (1000, 3000)


def figure_two_phase(records: list[dict], caption_text: str):
    """Fig. 2: median and IQR over seeds of test accuracy, s_bar and sigma_H vs epoch (log x), with
    the paper's median curve of each panel read off its figure (black, the band its reading error).

    Phase-1 (100-500) and Phase-2 (1,000-3,000) bands are the paper's fixed landmark windows.
    """
    read_off = read_off_reference()
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 8.5), sharex=True)
    panels = [("test_acc", "test_acc", "test accuracy", "tab:green"),
              ("mean_similarity", "s_bar", r"$\bar s$ (mean head cosine)", "tab:blue"),
              ("entropy_std", "sigma_H", r"$\sigma_H$ (entropy std)", "tab:red")]
    paper_epochs = read_off["epoch"]
    for ax, (key, column, label, color) in zip(axes, panels):
        epochs, table = aligned(records, key)
        keep = epochs >= 1  # log axis: the initialisation (epoch 0) is reported in the summary
        band(ax, epochs[keep], table[:, keep], color, f"ours: median, IQR (n = {len(records)})")
        paper, error = read_off[column], FIG2_READING_ERROR[column]
        ax.fill_between(paper_epochs, paper - error, paper + error, color="black", alpha=0.12, linewidth=0)
        ax.plot(paper_epochs, paper, color="black", linestyle=PAPER_STYLE.get("linestyle", ":"), marker=".",
                markersize=4, linewidth=1.2, label=f"paper: median of 50 (read off, +-{error:g})")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        for (lo, hi), name in ((PHASE1, "Phase 1"), (PHASE2, "Phase 2")):
            ax.axvspan(lo, hi, color="grey", alpha=0.12)
            ax.text(np.sqrt(lo * hi), 0.97, name, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=8,
                    bbox=dict(facecolor="white", alpha=0.75, linewidth=0, pad=1))
    grok = [r["grok_epoch"] for r in records if r.get("grok_epoch") is not None]
    if grok:
        for ax in axes:
            ax.axvline(float(np.median(grok)), color="tab:green", linestyle="--", linewidth=1)
        axes[0].text(float(np.median(grok)), 0.05, f" our median t_grok = {np.median(grok):.0f}", fontsize=8)
    for ax, where in zip(axes, ("center right", "lower right", "lower left")):  # where the curves leave room
        ax.legend(loc=where, fontsize=7)
    axes[-1].set_xlabel("epoch (log)")
    fig.suptitle("Fig. 2: two-phase dynamics of the attention order parameters", fontsize=11)
    return place_caption(fig, caption_text, bottom=0.05, top=0.97)
