"""Fig. 2 as a whole trajectory: groups' median curves over the paper's read-off medians."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import place_caption, plt
from grok_lightning.stats.trajectory import FIG2_CURVES, read_off_reference, trajectory_distance

__all__ = ["figure_trajectories"]

LABELS = {"test_acc": "test accuracy", "s_bar": r"$\bar s$", "sigma_H": r"$\sigma_H$"}


def figure_trajectories(groups: dict[str, list[dict]], caption_text: str, title: str,
                        keys: dict[str, str] | None = None, highlight: tuple[str, ...] = ()):
    """One line per group in each of the three Fig. 2 panels, as the distance scores it: at every
    read-off epoch, the median over evaluations within +-10% of it of the group's median-over-runs
    curve (``stats.trajectory``; this also smooths the post-grokking sawtooth, which a 50-seed
    median would not show). The paper's read-off median is drawn as black dots. ``keys`` picks
    the history column of s_bar / sigma_H (a reading); ``highlight`` draws those groups thicker."""
    reference = read_off_reference()
    columns = {**FIG2_CURVES, **(keys or {})}
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    for index, (name, histories) in enumerate(groups.items()):
        for ax, curve in zip(axes, FIG2_CURVES):
            scored = trajectory_distance(histories, curve, columns[curve], hi=10**9, reference=reference)
            thick = name in highlight
            ax.plot(scored.epochs, scored.ours, marker=".", markersize=4, color=colors[index % 10],
                    linewidth=1.8 if thick else 0.9, alpha=1.0 if thick or not highlight else 0.6,
                    label=f"{name} (n = {len(histories)})")
    for ax, curve in zip(axes, FIG2_CURVES):
        ax.plot(reference["epoch"], reference[curve], "ko", markersize=4, label="paper median (read off)")
        ax.set_ylabel(LABELS[curve] + ("" if columns[curve] == FIG2_CURVES[curve] else f"\n{columns[curve]}"),
                      fontsize=8 if columns[curve] != FIG2_CURVES[curve] else 10)
        ax.set_xscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=7)
    axes[-1].set_xlabel("epoch (log)")
    fig.suptitle(title, fontsize=11)
    place_caption(fig, caption_text, bottom=0.06, top=0.97, right=0.78)
    return fig
