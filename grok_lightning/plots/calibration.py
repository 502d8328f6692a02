"""The initialisation calibration: s_bar at initialisation per variant, and each candidate's
trajectory of test accuracy, s_bar and sigma_H against the paper's Fig. 2 landmarks."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, aligned, place_caption, plt
from grok_lightning.plots.figures import PHASE1, PHASE2

__all__ = ["figure_init_calibration"]


def figure_init_calibration(init_rows: list[dict], runs_by_label: dict[str, list[dict]], caption_text: str,
                            paper_s_bar: dict[str, float], paper_sigma_h: dict[str, float]):
    """Left: s_bar at initialisation (mean over seeds) per variant, the paper's start dotted.
    Right: median over seeds of test accuracy, s_bar and sigma_H per trained variant (log x).

    ``paper_s_bar`` ({name: level}, its ``start`` the paper's starting s_bar) and ``paper_sigma_h``
    ({name: level}) are the paper's Fig. 2 levels, given by the caller, drawn dotted."""
    fig = plt.figure(figsize=(14, 8.5))
    grid = fig.add_gridspec(3, 2, width_ratios=(1, 1.6))
    ax_init = fig.add_subplot(grid[:, 0])
    labels = [r["label"] for r in init_rows]
    means = [r["s_bar_mean"] for r in init_rows]
    spread = np.array([[r["s_bar_mean"] - min(r["s_bar"]), max(r["s_bar"]) - r["s_bar_mean"]] for r in init_rows]).T
    y = np.arange(len(labels))
    trained = set(runs_by_label)
    colors = ["tab:orange" if label in trained else "tab:grey" for label in labels]
    ax_init.barh(y, means, xerr=spread, color=colors, alpha=0.8)
    start = paper_s_bar["start"]
    ax_init.axvline(start, **PAPER_STYLE)
    ax_init.text(start, len(labels) - 0.4, f" paper {start:g}", fontsize=8)
    ax_init.set_yticks(y, labels, fontsize=7)
    ax_init.invert_yaxis()
    ax_init.set_xlim(min(0.7, min(means) - 0.02), 1.005)
    ax_init.set_xlabel(r"$\bar s$ at initialisation (mean, range over 5 seeds; orange = trained below)")
    panels = [("test_acc", "test accuracy"), ("mean_similarity", r"$\bar s$"), ("entropy_std", r"$\sigma_H$")]
    axes = [fig.add_subplot(grid[i, 1]) for i in range(3)]
    cmap = plt.get_cmap("tab10")
    for i, (label, runs) in enumerate(runs_by_label.items()):
        for ax, (key, _) in zip(axes, panels):
            epochs, table = aligned(runs, key)
            keep = epochs >= 1
            with np.errstate(all="ignore"):
                median = np.nanmedian(table[:, keep], axis=0)
            ax.plot(epochs[keep], median, color=cmap(i), linewidth=1.2, label=f"{label} (n = {len(runs)})")
    for ax, (key, ylabel) in zip(axes, panels):
        ax.set_xscale("log")
        ax.set_ylabel(ylabel)
        for lo, hi in (PHASE1, PHASE2):
            ax.axvspan(lo, hi, color="grey", alpha=0.12)
    for value in paper_s_bar.values():
        axes[1].axhline(value, **PAPER_STYLE)
    for name, value in paper_sigma_h.items():
        axes[2].axhline(value, **PAPER_STYLE)
        axes[2].text(1.05, value, f"paper {name} {value}", fontsize=7, va="bottom")
    axes[0].legend(fontsize=7, loc="lower right")
    axes[-1].set_xlabel("epoch (log); grey bands: the paper's Phase 1 (100-500) and Phase 2 (1,000-3,000)")
    fig.suptitle("Which attention / initialisation choices reproduce the paper's starting point and Phase 2?",
                 fontsize=11)
    place_caption(fig, caption_text, bottom=0.06, top=0.97)
    return fig
