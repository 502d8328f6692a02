"""Long-horizon figures of arXiv 2605.20441: Fig. 3 (five-stage trajectory), Fig. 6 + Table 3
(PR_norm over checkpoints, the C1 identity) and Fig. 7 (ESD alpha over checkpoints).

Functions of results: run records (Fig. 3) and per-checkpoint series computed post hoc from the
saved weights (``series``: ``[{"wd", "seed", "lead", "epoch": [...], "pr_norm": [...],
"esd_alpha": [...]}]``). The paper's values and stage bands are passed in by the caller
(reproduce/targets/long_horizon.py) and drawn dotted / shaded, labelled as the paper's.
"""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, plt
from grok_lightning.records import series

__all__ = ["figure_esd_alpha", "figure_five_stage", "figure_pr_norm"]

#: this module's figure layout: the shared title/caption finish with a smaller caption
_layout = partial(finish, top=0.96, caption_size=6.5)

WD_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]


def _bands(ax, bands: dict, lo: float, hi: float, inside: bool = False, log: bool = False) -> None:
    """Shade the paper's stage bands that overlap [lo, hi]; name them above the axes (or inside, at the top)."""
    for name, (start, stop) in bands.items():
        if stop < lo or start > hi:
            continue
        a, b = max(start, lo), min(stop, hi)
        ax.axvspan(a, b, color="grey", alpha=0.12, linewidth=0)
        mid = np.sqrt(a * b) if log else (a + b) / 2
        ax.text(mid, 0.985 if inside else 1.0, name, transform=ax.get_xaxis_transform(), ha="center",
                va="top" if inside else "bottom", fontsize=7, color="dimgrey")


def _colors(series: list[dict]) -> dict:
    return {wd: WD_COLORS[i % len(WD_COLORS)] for i, wd in enumerate(sorted({s["wd"] for s in series}))}


def _history(record: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    epochs, values = series(record, key)
    return np.asarray(epochs, float).reshape(-1), np.asarray(values, float).reshape(-1)


def figure_five_stage(lead: dict, underlay: list[dict], bands: dict, paper_note: str, caption_text: str):
    """Fig. 3: test accuracy, s_bar and sigma_H vs epoch for the lead run, the other seeds of the
    same lambda as a grey underlay, the paper's Fig. 3 stage bands where inside the horizon, the
    lead run's grok and anti-grok epochs, and the paper's landmark values as text."""
    fig, axes = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True)
    panels = [("test_acc", "test accuracy"), ("mean_similarity", r"$\bar s$ (mean head cosine)"),
              ("entropy_std", r"$\sigma_H$ (entropy std)")]
    horizon = max(r["config"]["max_epochs"] for r in [lead, *underlay])
    for ax, (key, label) in zip(axes, panels):
        for i, other in enumerate(underlay):
            ax.plot(*_history(other, key), color="grey", alpha=0.55, linewidth=0.8,
                    label=f"other seeds (n = {len(underlay)})" if i == 0 else None)
        ax.plot(*_history(lead, key), color="tab:blue", linewidth=1.3, label=f"seed {lead['config']['seed']} (lead)")
        ax.set_ylabel(label)
        _bands(ax, bands, 0, horizon)
        for epoch, style, name in ((lead.get("grok_epoch"), "tab:green", "grok"),
                                   (lead.get("anti_grok_epoch"), "tab:red", "anti-grok")):
            if epoch is not None:
                ax.axvline(epoch, color=style, linestyle="--", linewidth=1,
                           label=f"lead {name} epoch {epoch}" if key == "test_acc" else None)
    epochs, sigma = _history(lead, "entropy_std")
    late = epochs > 100
    if late.any():
        i = int(np.argmax(np.where(late, sigma, -np.inf)))
        axes[2].plot(epochs[i], sigma[i], "v", color="tab:red", label=f"lead peak {sigma[i]:.3f} at {epochs[i]:.0f}")
    top = np.nanmax([np.nanmax(_history(r, "entropy_std")[1], initial=0) for r in [lead, *underlay]])
    axes[2].set_ylim(0, 1.3 * top if top > 0 else 1)
    axes[2].legend(loc="upper left", fontsize=7, ncol=3)  # in the headroom above the data
    axes[0].set_ylim(-0.03, 1.3)
    axes[0].legend(loc="upper left", fontsize=7, ncol=2)
    axes[-1].set_xlabel("epoch")
    axes[-1].set_xlim(0, horizon)
    title = f"Fig. 3: long-horizon trajectory, lambda = {lead['config']['wd']} (shaded: the paper's stage bands)"
    title += f"\n{paper_note}"
    return _layout(fig, title, caption_text, 0.09)


def _seed_band(ax, runs: list[dict], key: str, color: str, label: str) -> None:
    epochs = sorted({e for s in runs for e in s["epoch"]})
    index = {e: i for i, e in enumerate(epochs)}
    table = np.full((len(runs), len(epochs)), np.nan)
    for row, s in enumerate(runs):
        for e, v in zip(s["epoch"], s[key]):
            table[row, index[e]] = np.nan if v is None else v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q25, q50, q75 = np.nanpercentile(table, [25, 50, 75], axis=0)
    ax.plot(epochs, q50, color=color, linewidth=1.5, label=label)
    ax.fill_between(epochs, q25, q75, color=color, alpha=0.2, linewidth=0)


def _series_panel(ax, series: list[dict], key: str) -> None:
    colors = _colors(series)
    for wd, color in colors.items():
        runs = [s for s in series if s["wd"] == wd]
        _seed_band(ax, runs, key, color, f"lambda {wd}: median, IQR ({len(runs)} seeds)")
        for s in runs:
            if s["lead"]:
                ax.plot(s["epoch"], s[key], color=color, linestyle="--", marker=".", linewidth=1,
                        label=f"lambda {wd}, seed {s['seed']} (lead)")


def figure_pr_norm(series: list[dict], lead_table: list[dict], paper_fig6: list[tuple], paper_table3: list[dict],
                   paper_p2_p4: tuple, bands: dict, identity: dict, paper_n_heads: int, caption_text: str):
    """Fig. 6 + Table 3. (A) PR_norm = (R-1)/(H-1), median over layers, per checkpoint: median and
    IQR over seeds per lambda, the lead seed dashed, the paper's seed-42 Fig. 6 values dotted.
    (B) the C1 identity on the lead run: layer-mean PR_norm measured vs 1/(1+CV^2)-predicted
    (sample CV, var_pop correction), with the paper's Table 3 (c1_empirical_validation.json)."""
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(12, 4.8))
    _series_panel(ax_a, series, "pr_norm")
    ax_a.plot(*zip(*paper_fig6), marker="s", markersize=4, **PAPER_STYLE, label="paper Fig. 6, seed 42")
    (x0, x1), (y0, y1) = paper_p2_p4
    ax_a.fill_between([x0, x1], y0, y1, facecolor="none", edgecolor="black", hatch="///", linewidth=0.5,
                      label=f"paper P2-P4: {y0}-{y1}")
    ax_a.axhline(1 / paper_n_heads, color="grey", linestyle="-.", linewidth=0.8,
                 label=f"paper's floor 1/H = {1 / paper_n_heads:.3g} (R/H form)")
    ax_a.set_ylabel("PR_norm (median over layers)")
    ax_a.set_title("(A) PR_norm over checkpoints", fontsize=9)
    if lead_table:
        epochs = [r["epoch"] for r in lead_table]
        ax_b.plot(epochs, [r["mean_PR_norm_measured"] for r in lead_table], "o-", color="tab:blue", markersize=4,
                  label="ours: measured (layer mean)")
        ax_b.plot(epochs, [r["mean_PR_norm_predicted_C1_corrected"] for r in lead_table], "x", color="tab:red",
                  markersize=7, label="ours: C1-predicted 1/(1+CV$^2$)")
    if paper_table3:
        ax_b.plot([r["epoch"] for r in paper_table3], [r["mean_PR_norm_measured"] for r in paper_table3],
                  marker="s", markersize=4, **PAPER_STYLE, label="paper Table 3 (seed 42)")
    ax_b.set_ylabel("PR_norm (layer mean)")
    ax_b.set_title(f"(B) Table 3, C1 identity: max |measured - C1| ours {identity['ours']:.2g}, "
                   f"paper {identity['paper']:.2g}", fontsize=9)
    for ax in (ax_a, ax_b):
        ax.set_xscale("log")
        _bands(ax, bands, 1, 1e9, inside=True, log=True)
        ax.set_xlabel("checkpoint epoch (log)")
        ax.set_ylim(-0.02, 1.25)  # headroom for the legend
        ax.legend(fontsize=6.5, loc="upper right", bbox_to_anchor=(1, 0.95))
    return _layout(fig, "Fig. 6 / Table 3: head-pattern participation ratio over checkpoints "
                        "(shaded: the paper's Fig. 6/7 stage bands)", caption_text, 0.12)


def figure_esd_alpha(series: list[dict], paper_points: list[tuple], paper_band: tuple, bands: dict, caption_text: str):
    """Fig. 7: ESD alpha (median over weight matrices) per checkpoint: median and IQR over seeds per
    lambda, the lead seed dashed, the paper's seed-42 values dotted and its 1.30-1.36 plateau."""
    fig, ax = plt.subplots(figsize=(8, 5))
    _series_panel(ax, series, "esd_alpha")
    ax.plot(*zip(*paper_points), marker="s", markersize=4, **PAPER_STYLE, label="paper Fig. 7, seed 42")
    (x0, x1), (y0, y1) = paper_band
    ax.fill_between([x0, x1], y0, y1, facecolor="none", edgecolor="black", hatch="///", linewidth=0.5,
                    label=f"paper: {y0}-{y1} after onset")
    ax.axhline(2.0, color="grey", linestyle="-.", linewidth=0.8, label="alpha = 2")
    ax.set_xscale("log")
    _bands(ax, bands, 1, 1e9, inside=True, log=True)
    ax.set_xlabel("checkpoint epoch (log)")
    ax.set_ylabel("ESD alpha (median over weight matrices)")
    ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1, 0.94))
    return _layout(fig, "Fig. 7: power-law exponent of the weight spectra over checkpoints "
                        "(shaded: the paper's stage bands)", caption_text, 0.13)
