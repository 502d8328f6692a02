"""Shared plotting helpers: aligned histories, median/IQR bands, captions that state the profile."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # figures are written to files; never needs a display
import numpy as np
from matplotlib import pyplot as plt

from grok_lightning.records import series

__all__ = ["aligned", "band", "caption", "finish", "place_caption", "plt", "PAPER_STYLE"]

PAPER_STYLE = dict(color="black", linestyle=":", linewidth=1.2)


def aligned(records: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Stack one history column of many runs on the union of their epochs (NaN where missing)."""
    epochs = sorted({e for r in records for e in r["history"]["epoch"]})
    index = {e: i for i, e in enumerate(epochs)}
    table = np.full((len(records), len(epochs)), np.nan)
    for row, record in enumerate(records):
        at, values = series(record, key)
        table[row, [index[e] for e in at]] = values
    return np.asarray(epochs, dtype=float), table


def band(ax, epochs: np.ndarray, table: np.ndarray, color: str, label: str) -> None:
    """Median line with an interquartile band over runs (rows)."""
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            q25, q50, q75 = np.nanpercentile(table, [25, 50, 75], axis=0)
    ax.plot(epochs, q50, color=color, label=label, linewidth=1.6)
    ax.fill_between(epochs, q25, q75, color=color, alpha=0.25, linewidth=0)


#: what each figure's smoke run can show, and what needs the ``medium`` profile (or ``paper``);
#: added to every smoke caption, so a reader never takes a pipeline check for a null result
SMOKE_SCOPE = {
    "canonical": ("grokking of the canonical model at lambda 1",
                  "Phase 2 (medium Fig. 2: 2,000 epochs)"),
    "fig1": ("the regime map's plumbing on the 2 smallest models",
             "the 19M and 85M models (paper profile, GPU)"),
    "fig2": ("memorisation, grokking and the Phase-1 rise of s_bar",
             "Phase 2, the sigma_H peak and the s_bar dip after grokking (medium: 3 seeds x 2,000 epochs)"),
    "fig3": ("the five-stage panels' pipeline on 300-epoch runs",
             "the later stages (medium: 1,000 epochs; paper: 20,000)"),
    "fig4": ("the amplitude fit and null on 6 runs",
             "the slope's sign and size (medium: H 4/8/16 + null, 4 seeds, 600 epochs)"),
    "fig5": ("the grok-probability sigmoid and its fits at a short horizon",
             "lambda_c of the canonical model at the paper's 5,000-epoch horizon (medium)"),
    "fig6": ("PR_norm at the smoke checkpoints", "Table 3's rows at epochs 100/500/1,000 (medium)"),
    "fig7": ("the ESD alpha pipeline", "alpha at epochs 100/500/1,000 (medium)"),
    "fig8": ("A, B and C on 2 paired seeds (no test can pass)",
             "the paired tests of E12 (medium: 6 seeds, 300-epoch window)"),
    "fig9": ("per-task grok counts at a short horizon", "per-task lambda_c (medium profile: make reproduce-fig9 PROFILE=medium)"),
    "fig10": ("every architecture's pipeline at 200 epochs", "the 10,000-epoch comparison (paper profile, GPU)"),
    "fig11": ("kappa from lambda = 1 smoke runs", "kappa with the paper's estimator on 1,000-epoch runs (medium)"),
    "predict": ("the predictor's pipeline (underpowered)", "~15 seeds per lambda inside the transition (paper)"),
    "rllc": ("the SGLD estimate on the smoke checkpoints", "a correlation over many checkpoints (paper)"),
    "lockin": ("the detector and sign rule on shortened runs", "the paper's own protocol (medium: 15 + 15 seeds)"),
}


def finish(fig, title: str, caption_text: str, bottom: float = 0.05, top: float = 0.97, caption_size: float = 7):
    """Title, the caption along the bottom edge, and a layout that leaves both room."""
    fig.suptitle(title, fontsize=11)
    return place_caption(fig, caption_text, bottom, top, size=caption_size)


#: the space between the caption's top line and the lowest axis label, as a fraction of the figure's height
CAPTION_GAP = 0.01


def place_caption(fig, caption_text: str, bottom: float = 0.05, top: float = 0.97, right: float = 1.0,
                  size: float = 7):
    """The caption along the bottom edge, and a tight layout whose axes, tick labels and axis labels
    included, start above it: at ``bottom`` (a fraction of the figure's height), or higher when the
    caption's wrapped lines reach further up, so that a longer caption (a smoke profile's extra
    line) never overprints an axis label."""
    note = fig.text(0.01, 0.005, caption_text, fontsize=size, va="bottom", wrap=True)
    caption_top = note.get_window_extent(fig.canvas.get_renderer()).y1 / fig.bbox.height
    fig.tight_layout(rect=(0, max(bottom, caption_top + CAPTION_GAP), right, top))
    return fig


def caption(profile: str, details: str, differs: str | None = None, figure: str | None = None) -> str:
    """``profile | details``, what differs from the paper, and (smoke) what the figure can show."""
    text = f"profile: {profile} | {details}"
    if differs:
        text += f"\ndiffers from the paper: {differs}"
    return text + smoke_scope(profile, figure)


def smoke_scope(profile: str, figure: str | None) -> str:
    """The smoke caption's last line: what this run can show and what needs a longer profile."""
    if profile != "smoke" or figure is None:
        return ""
    shows, needs = SMOKE_SCOPE[figure]
    return f"\nsmoke shows: {shows}; needs a longer profile: {needs}"
