"""Fig. 2 as a whole trajectory: groups' median curves over the paper's read-off medians."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import plt
from grok_lightning.stats.trajectory import FIG2_CURVES, median_curve, read_off_reference

__all__ = ["figure_trajectories"]

LABELS = {"test_acc": "test accuracy", "s_bar": r"$\bar s$", "sigma_H": r"$\sigma_H$"}


def figure_trajectories(groups: dict[str, list[dict]], caption_text: str, title: str,
                        keys: dict[str, str] | None = None, highlight: tuple[str, ...] = ()):
    """One line per group (the median over its runs' histories) in each of the three Fig. 2
    panels, with the paper's read-off median as black dots. ``keys`` picks the history column of
    s_bar / sigma_H (a reading); ``highlight`` draws those groups thicker."""
    reference = read_off_reference()
    columns = {**FIG2_CURVES, **(keys or {})}
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    for index, (name, histories) in enumerate(groups.items()):
        for ax, curve in zip(axes, FIG2_CURVES):
            epochs, median = median_curve(histories, columns[curve])
            keep = epochs >= 1
            thick = name in highlight
            ax.plot(epochs[keep], median[keep], color=colors[index % 10], linewidth=1.8 if thick else 0.9,
                    alpha=1.0 if thick or not highlight else 0.55, label=f"{name} (n = {len(histories)})")
    for ax, curve in zip(axes, FIG2_CURVES):
        ax.plot(reference["epoch"], reference[curve], "ko", markersize=4, label="paper median (read off)")
        ax.set_ylabel(LABELS[curve] + ("" if columns[curve] == FIG2_CURVES[curve] else f"\n{columns[curve]}"),
                      fontsize=8 if columns[curve] != FIG2_CURVES[curve] else 10)
        ax.set_xscale("log")
    axes[0].legend(loc="center left", bbox_to_anchor=(1.01, 0.0), fontsize=7)
    axes[-1].set_xlabel("epoch (log)")
    fig.suptitle(title, fontsize=11)
    fig.text(0.01, 0.005, caption_text, fontsize=7, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig
