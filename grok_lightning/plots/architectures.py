"""Fig. 10 of arXiv 2605.20441: lambda_c with its bootstrap CI per architecture, paper overlaid."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import place_caption, plt

__all__ = ["figure_architectures"]


def figure_architectures(entries: list[dict], paper: dict, caption_text: str):
    """``entries``: ``{"label", "wd_c", "wd_c_ci", "status", "n", "n_grok"}`` per architecture (``why``:
    the reason an architecture has no runs, written on its line);
    ``paper``: ``{label: (wd_c, [lo, hi])}`` drawn as black stars with bars on the same line."""
    fig, ax = plt.subplots(figsize=(8, 0.55 * max(len(entries), 3) + 2.0))
    for i, e in enumerate(entries):
        if e["wd_c"] is not None and np.isfinite(e["wd_c"]):
            lo, hi = e["wd_c_ci"] if e.get("wd_c_ci") and None not in e["wd_c_ci"] else (e["wd_c"], e["wd_c"])
            ax.errorbar(e["wd_c"], i, xerr=[[e["wd_c"] - lo], [hi - e["wd_c"]]], fmt="o", color="tab:blue", capsize=3)
        else:
            text = f"not run here ({e['why']})" if e.get("why") else f"no estimate ({e['status']}; {e['n_grok']}/{e['n']} grokked)"
            ax.text(0.02, i, text, fontsize=7, va="center", transform=ax.get_yaxis_transform())
        ref = paper.get(e["paper_key"])
        if ref:
            ax.errorbar(ref[0], i + 0.2, xerr=[[ref[0] - ref[1][0]], [ref[1][1] - ref[0]]], fmt="*", color="black",
                        capsize=2, markersize=8)
    ax.plot([], [], "o", color="tab:blue", label="ours: lambda_c, bootstrap 95% CI")
    ax.plot([], [], "*", color="black", label="paper")
    ax.set_yticks(range(len(entries)), [f"{e['label']} (n = {e['n']})" for e in entries], fontsize=8)
    ax.set_ylim(len(entries) - 0.4, -0.6)  # first architecture on top, room for the paper's star below each line
    ax.set_xscale("log")
    ax.set_xlabel(r"critical weight decay $\lambda_c$ (log)")
    ax.legend(fontsize=7, loc="best")
    fig.suptitle("Fig. 10: critical weight decay across architectures", fontsize=11)
    place_caption(fig, caption_text, bottom=0.16, top=0.95, size=6.5)
    return fig
