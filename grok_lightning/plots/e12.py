"""E12's control group on its own: every seed's trajectory with its intervention epoch E."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, plt
from grok_lightning.stats.interventions import sigma_curve
from grok_lightning.stats.phases import history_curve

__all__ = ["figure_controls"]


def figure_controls(records: list[dict], peaks: dict, paper: dict, caption_text: str):
    """Three panels against epoch: sigma_H summed over layers (the E12 cohort's reading) with each
    seed's E marked, s_bar, test accuracy. ``peaks``: ``{(seed, wd): E}``; ``paper``: optional
    ``{"peak": (value, margin), "min_sim": (value, margin), "grok_epoch": (value, margin)}``,
    drawn as a line with a band of +- the claim's margin."""
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, record in enumerate(sorted(records, key=lambda r: r["config"]["seed"])):
        color, seed = colors[i % 10], record["config"]["seed"]
        history = record["history"]
        epochs, sigma = sigma_curve(history, "sum_layers")
        axes[0].plot(epochs, sigma, color=color, linewidth=0.9, label=f"seed {seed}")
        epoch = peaks.get((seed, record["config"]["wd"]))
        if epoch is not None:
            at = int(np.argmin(np.abs(epochs - epoch)))
            axes[0].plot([epoch], [sigma[at]], "v", color=color, markersize=8)
        axes[1].plot(*history_curve(history, "mean_similarity"), color=color, linewidth=0.9)
        axes[2].plot(*history_curve(history, "test_acc"), color=color, linewidth=0.9)
        if record.get("grok_epoch") is not None:
            for ax in axes:
                ax.axvline(record["grok_epoch"], color=color, linestyle=":", linewidth=0.8)
    for ax, key, label in ((axes[0], "peak", "paper A: mean peak"), (axes[1], "min_sim", "paper A: mean min s_bar")):
        if key in paper:
            value, margin = paper[key]
            ax.axhline(value, **PAPER_STYLE, label=f"{label} {value:g} (+- {margin:g})")
            ax.axhspan(value - margin, value + margin, color="black", alpha=0.08)
    if "grok_epoch" in paper:
        value, margin = paper["grok_epoch"]
        axes[2].axvspan(value - margin, value + margin, color="black", alpha=0.08,
                        label=f"paper A: mean grok epoch {value:g} (+- {margin:g})")
    axes[0].plot([], [], "v", color="grey", label="E (argmax after epoch 100)")
    axes[0].plot([], [], ":", color="grey", label="grok epoch")
    axes[0].set_ylabel("$\\sigma_H$ summed over layers")
    axes[1].set_ylabel("$\\bar s$ (mean head cosine)")
    axes[2].set_ylabel("test accuracy")
    axes[2].set_xlabel("epoch")
    for ax in axes:
        if ax.get_legend_handles_labels()[1]:  # at a lambda the paper did not run, panels 2-3 have no paper line
            ax.legend(fontsize=7, loc="best")
    return finish(fig, "E12 control group A: where the interventions start", caption_text, bottom=0.09)
