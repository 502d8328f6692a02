"""Figures of the "does it predict?" study and the rLLC comparison.

* :func:`figure_auc`: held-out AUC with bootstrap CIs per feature set and model, one panel per
  target, the paper's random-forest holdout AUC (0.799) as a dotted line, chance at 0.5, and the
  paired difference ``baseline+diagnostics - baseline`` with its CI written under each panel.
* :func:`figure_holdout`: E11's held-out test by weight decay: the labels per lambda cell (the
  held-out cells marked) and the held-out AUC of each model with its bootstrap CI next to the
  paper's, or the reason the test cannot be run.
* :func:`figure_rllc`: rLLC (mean +- std over chains) and sigma_H against the checkpoint epoch,
  and their scatter with Pearson r and its Fisher-z CI next to the paper's r.

Both take the result dicts the targets write to ``summary.json`` (no training, no fitting here).
"""

from __future__ import annotations

from functools import partial
from textwrap import fill

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, place_caption, plt

__all__ = ["figure_auc", "figure_holdout", "figure_rllc"]

#: this module's figure layout: the shared title/caption finish with a smaller caption
_layout = partial(finish, top=0.95, caption_size=6.5)

SET_COLORS = {"baseline": "tab:gray", "diagnostics": "tab:purple", "baseline+diagnostics": "tab:blue",
              "baseline+test": "tab:orange"}


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and np.isfinite(x)


def _fmt_diff(entry: dict) -> str:
    diff = entry.get("diff")
    if not _is_number(diff):
        return str(diff)
    ci = entry.get("ci")
    text = f"{diff:+.3f}"
    if isinstance(ci, list):
        text += f" [{ci[0]:+.3f}, {ci[1]:+.3f}]"
    elif ci is not None:
        text += f" ({ci})"
    return text


def figure_auc(studies: dict[str, dict], paper_auc: float, caption_text: str, title: str | None = None):
    """One panel per target (``studies[target]`` = :func:`grok_lightning.stats.predict.auc_study` output).

    Bars: AUC of the pooled out-of-fold predictions; whiskers: the cluster-bootstrap 95% CI;
    undefined values are written in the panel instead of drawn.
    """
    targets = list(studies)
    fig, axes = plt.subplots(1, len(targets), figsize=(5.6 * len(targets), 4.8), squeeze=False)
    for ax, target in zip(axes[0], targets):
        study = studies[target]
        models = study.get("models", [])
        sets = list(study.get("feature_sets", {}))
        width = 0.8 / max(1, len(sets))
        ax.axhline(0.5, color="black", linewidth=0.8, alpha=0.5)
        ax.axhline(paper_auc, label=f"paper RF holdout AUC {paper_auc}", **PAPER_STYLE)
        results = study.get("results", {})
        for j, name in enumerate(sets):
            for i, model in enumerate(models):
                entry = results.get(model, {}).get(name, {})
                x = i + (j - (len(sets) - 1) / 2) * width
                auc, ci = entry.get("auc"), entry.get("auc_ci")
                if not _is_number(auc):
                    ax.text(x, 0.05, "undefined", rotation=90, fontsize=6, ha="center", va="bottom")
                    continue
                yerr = None
                if isinstance(ci, list):
                    yerr = [[max(0.0, auc - ci[0])], [max(0.0, ci[1] - auc)]]
                ax.bar(x, auc, width * 0.9, color=SET_COLORS.get(name, f"C{j}"), yerr=yerr, capsize=3,
                       label=name if i == 0 else None, edgecolor="black", linewidth=0.4)
                inside = auc > 0.12  # the value at the bar's foot, clear of the CI whisker
                ax.text(x, 0.02 if inside else auc + 0.01, f"{auc:.2f}", fontsize=6.5, ha="center", va="bottom",
                        color="white" if inside else "black", fontweight="bold")
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([m.replace("_", " ") for m in models])
        ax.set_ylim(0, 1.18)
        ax.set_ylabel("held-out AUC (grouped CV by scale x lambda)")
        header = f"target: {target} (n = {study.get('n')}, {study.get('n_positive')} positive, " \
                 f"{study.get('n_groups')} groups)"
        if study.get("undefined"):
            ax.text(0.5, 0.5, study["undefined"], transform=ax.transAxes, ha="center", va="center", fontsize=8,
                    wrap=True, bbox=dict(facecolor="white", edgecolor="gray"))
        ax.set_title(header, fontsize=8.5)
        diffs = study.get("differences", {})
        compare = study.get("compare", ["baseline+diagnostics", "baseline"])
        lines = [f"{m.replace('_', ' ')}: {compare[0]} - {compare[1]} = {_fmt_diff(diffs.get(m, {}))}"
                 for m in models if m in diffs]
        ax.text(0.01, 0.99, "\n".join(lines), transform=ax.transAxes, fontsize=6.2, va="top")
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=len(handles), fontsize=7,
               bbox_to_anchor=(0.5, 0.935), frameon=False)
    fig.suptitle(title or "Does it predict? Held-out AUC, baselines vs attention diagnostics", fontsize=11)
    place_caption(fig, caption_text, bottom=0.17, top=0.9, size=6.5)
    return fig


LABEL_COLORS = {"retained": "tab:green", "not retained": "tab:red", "no label": "lightgray"}


def figure_holdout(cells: dict[float, dict[str, int]], held_out: list[float], result: dict, paper: dict[str, float],
                   caption_text: str, invalid: str | None = None, title: str | None = None):
    """``cells``: ``{lambda: {"retained", "not retained", "no label"}}`` run counts; ``result``:
    :func:`grok_lightning.stats.holdout.holdout_auc` output (may be empty when ``invalid``);
    ``paper``: the paper's held-out AUC per model."""
    fig, (ax_c, ax_a) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.3, 1]})
    wds = sorted(cells)
    x = np.arange(len(wds))
    bottom = np.zeros(len(wds))
    for label, color in LABEL_COLORS.items():
        counts = np.asarray([cells[w].get(label, 0) for w in wds], dtype=float)
        ax_c.bar(x, counts, 0.7, bottom=bottom, color=color, edgecolor="black", linewidth=0.4, label=label)
        bottom += counts
    for i, w in enumerate(wds):
        if w in held_out:
            ax_c.bar(x[i], bottom[i], 0.7, fill=False, edgecolor="tab:blue", linewidth=2.2)
            ax_c.text(x[i], bottom[i] + 0.3, "held out", ha="center", va="bottom", fontsize=7.5, color="tab:blue")
    ax_c.set_xticks(x)
    ax_c.set_xticklabels([f"{w:g}" for w in wds])
    ax_c.set_xlabel(r"weight decay $\lambda$")
    ax_c.set_ylabel("runs")
    ax_c.set_ylim(0, max(bottom.max(), 1) * 1.2)
    ax_c.legend(fontsize=7, loc="upper left")
    ax_c.set_title("retention label per lambda cell (the pool)", fontsize=9)

    models, bar_width = list(paper), 0.55
    ax_a.axhline(0.5, color="black", linewidth=0.8, alpha=0.5)
    results = result.get("results", {})
    for i, m in enumerate(models):
        ax_a.hlines(paper[m], i - 0.4, i + 0.4, label="paper (held-out unseen lambdas)" if i == 0 else None,
                    **PAPER_STYLE)
        # beside the bar, so that a bar reaching the line never covers its label
        ax_a.text(i + bar_width / 2 + 0.015, paper[m] + 0.01, f"paper {paper[m]:g}", ha="left", va="bottom", fontsize=7)
        entry = results.get(m, {})
        auc, ci = entry.get("auc"), entry.get("auc_ci")
        if invalid or not _is_number(auc):
            continue
        shown = isinstance(ci, list) and not result.get("too_few")  # a withheld interval is not drawn
        yerr = [[max(0.0, auc - ci[0])], [max(0.0, ci[1] - auc)]] if shown else None
        ax_a.bar(i, auc, bar_width, color="tab:blue", yerr=yerr, capsize=4, edgecolor="black", linewidth=0.4,
                 label=("ours, 95% stratified bootstrap" if shown else "ours (no interval)") if i == 0 else None)
        ax_a.text(i, auc / 2, f"{auc:.2f}", ha="center", va="center", fontsize=8, color="white", fontweight="bold")
    ax_a.set_xticks(range(len(models)))
    ax_a.set_xticklabels([m.replace("_", " ") for m in models])
    ax_a.set_xlim(-0.6, len(models) - 0.25)  # room for the last paper label beside its bar
    ax_a.set_ylim(0, 1.15)
    ax_a.set_ylabel("held-out AUC (retained at the end)")
    header = "held-out AUC"
    if result.get("n_test"):
        header += f": {result['n_test']} runs ({result['test_pos']} retained, {result['test_neg']} not)"
    ax_a.set_title(header, fontsize=9)
    message = invalid or result.get("undefined") or result.get("too_few")
    if message:
        ax_a.text(0.5, 0.3 if invalid else 0.93, fill(("cannot be tested: " if invalid else "") + message, 62),
                  transform=ax_a.transAxes, ha="center", va="center", fontsize=7,
                  bbox=dict(facecolor="white", edgecolor="gray"))
    ax_a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, frameon=False)
    return _layout(fig, title or "E11 retention predictor: held-out test by weight decay", caption_text, bottom=0.22)


def figure_rllc(points: list[dict], correlation: dict, paper: dict, caption_text: str, title: str | None = None):
    """``points``: ``{"epoch", "rllc_mean", "rllc_std", "sigma_H"}`` per checkpoint (one run);
    ``correlation``: ``{"r", "ci_95", "n", "p"}`` or ``{"undefined": reason}``; ``paper``:
    ``{"r", "ci", "n"}``."""
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.6))
    epochs = np.array([p["epoch"] for p in points], dtype=float)
    llc = np.array([np.nan if p["rllc_mean"] is None else p["rllc_mean"] for p in points], dtype=float)
    std = np.array([0.0 if p.get("rllc_std") is None else p["rllc_std"] for p in points], dtype=float)
    sigma = np.array([np.nan if p["sigma_H"] is None else p["sigma_H"] for p in points], dtype=float)
    ax_t.errorbar(epochs, llc, yerr=std, fmt="o-", color="tab:blue", capsize=3, label="rLLC (mean +- std over chains)")
    ax_t.axhline(0, color="black", linewidth=0.6, alpha=0.5)
    ax_t.set_xlabel("epoch (checkpoint)")
    ax_t.set_ylabel("rLLC (attention weights)", color="tab:blue")
    twin = ax_t.twinx()
    twin.plot(epochs, sigma, "s--", color="tab:red", label=r"$\sigma_H$")
    twin.set_ylabel(r"$\sigma_H$ (nats)", color="tab:red")
    handles = ax_t.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax_t.legend(handles, [h.get_label() for h in handles], fontsize=7, loc="best")
    ax_t.set_title("rLLC and $\\sigma_H$ over the checkpoints", fontsize=9)

    positive = llc > 0
    ax_s.scatter(sigma[positive], llc[positive], c=epochs[positive], cmap="viridis", vmin=epochs.min(),
                 vmax=epochs.max(), edgecolor="black", linewidth=0.4)
    if (~positive).any():  # negative rLLC: the checkpoint is not at a local minimum (hollow)
        ax_s.scatter(sigma[~positive], llc[~positive], facecolor="none", edgecolor="tab:red",
                     label="rLLC < 0: not at a local minimum")
        ax_s.legend(fontsize=7, loc="lower right")
    for e, s, l in zip(epochs, sigma, llc):
        ax_s.annotate(f"{int(e)}", (s, l), textcoords="offset points", xytext=(3, 3), fontsize=6)
    if "r" in correlation and _is_number(correlation.get("r")):
        ci = correlation.get("ci_95")
        ours = f"ours: r = {correlation['r']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}], n = {correlation['n']}"
        ok = np.isfinite(sigma) & np.isfinite(llc)
        if ok.sum() >= 2 and np.ptp(sigma[ok]) > 0:
            slope, intercept = np.polyfit(sigma[ok], llc[ok], 1)
            grid = np.linspace(sigma[ok].min(), sigma[ok].max(), 20)
            ax_s.plot(grid, slope * grid + intercept, color="tab:blue", linewidth=1)
    else:
        ours = f"ours: {correlation.get('undefined', 'undefined')}"
    theirs = f"paper: r = {paper['r']} [{paper['ci'][0]}, {paper['ci'][1]}], n = {paper['n']}"
    ax_s.set_title(f"{ours}\n{theirs}", fontsize=8.5)
    ax_s.set_xlabel(r"$\sigma_H$ at the checkpoint (nats)")
    ax_s.set_ylabel("rLLC")
    return _layout(fig, title or r"rLLC vs $\sigma_H$ over checkpoints", caption_text, bottom=0.17)
