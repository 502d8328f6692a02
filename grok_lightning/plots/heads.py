"""Head-role clusters of arXiv 2605.20441 section 5: the number of clusters over checkpoints, per seed.

A function of per-run series computed post hoc from the saved weights
(reproduce/targets/head_clusters.py): ``[{"seed", "lead", "n_heads", "epoch": [...],
"clusters": [...], "clusters_other": [...], "clusters_mean": [...]}]``, ``clusters`` under the chosen
positions, ``clusters_other`` under the other and ``clusters_mean`` of one mean vector per head
(optional). The paper's value is passed in by the caller and drawn
as the paper's.
"""

from __future__ import annotations

from grok_lightning.plots.common import PAPER_STYLE, finish, plt

__all__ = ["figure_head_clusters"]

SEED_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]


def figure_head_clusters(series: list[dict], paper: tuple[int, float, str], readings: tuple[str, ...],
                         caption_text: str):
    """Clusters vs checkpoint epoch, one line per seed (the lead seed thicker), the other reading of
    the positions dashed and the mean vectors dotted, faint in the seed's colour; ``paper``: ``(epoch, value, label)`` drawn as
    a black star; ``readings``: the names of the chosen and the other reading, for the labels."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, s in enumerate(sorted(series, key=lambda s: not s["lead"])):
        color = SEED_COLORS[i % len(SEED_COLORS)]
        lead = " (lead)" if s["lead"] else ""
        ax.plot(s["epoch"], s["clusters"], marker="o", markersize=4, color=color, linewidth=2.2 if s["lead"] else 1.3,
                label=f"seed {s['seed']}{lead}")
        ax.plot(s["epoch"], s["clusters_other"], marker="x", markersize=4, color=color, linestyle="--", linewidth=0.9,
                alpha=0.6, label=f"dashed: {readings[1]}" if i == 0 else None)
        if any(v is not None for v in s.get("clusters_mean") or ()):
            ax.plot(s["epoch"], s["clusters_mean"], marker="^", markersize=4, color=color, linestyle=":", linewidth=0.9,
                    alpha=0.6, label=f"dotted: {readings[2]}" if i == 0 and len(readings) > 2 else None)
    n_heads = max((s["n_heads"] for s in series), default=0)
    if n_heads:
        ax.axhline(n_heads, color="grey", linestyle="-.", linewidth=0.8, label=f"{n_heads} heads: each its own cluster")
    epoch, value, label = paper
    ax.plot([epoch], [value], marker="*", markersize=14, linestyle="none",
            **{k: v for k, v in PAPER_STYLE.items() if k == "color"}, label=label)
    ax.set_xlabel("checkpoint epoch")
    ax.set_ylabel(f"head-role clusters ({readings[0]})")
    ax.set_ylim(0, 1.35 * max(n_heads, value, 1))  # headroom for the legend
    ax.legend(fontsize=7, loc="upper right", ncol=3)
    return finish(fig, "Head-role clusters: single linkage of the heads' output vectors by cosine distance",
                  caption_text, 0.13, top=0.95, caption_size=6.5)
