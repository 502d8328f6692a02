"""Shared plotting helpers: aligned histories, median/IQR bands, captions that state the profile."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # figures are written to files; never needs a display
import numpy as np
from matplotlib import pyplot as plt

from grok_lightning.records import series

__all__ = ["aligned", "band", "caption", "finish", "place_caption", "plt", "smoke_line", "PAPER_STYLE"]

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


def caption(profile: str, details: str, differs: str | None = None, smoke: tuple[str, str] | None = None) -> str:
    """``profile | details``, what differs from the paper, and (smoke profile) ``smoke``: a
    ``(shows, needs)`` pair saying what the figure can show and what needs a longer profile."""
    text = f"profile: {profile} | {details}"
    if differs:
        text += f"\ndiffers from the paper: {differs}"
    return text + smoke_line(profile, smoke)


def smoke_line(profile: str, smoke: tuple[str, str] | None) -> str:
    """The smoke caption's last line, so a reader never takes a pipeline check for a null result
    (empty for the other profiles).

    >>> print(smoke_line("smoke", ("the fit", "the 5,000-epoch horizon (medium)")).strip())
    smoke shows: the fit; needs a longer profile: the 5,000-epoch horizon (medium)
    """
    if profile != "smoke" or smoke is None:
        return ""
    shows, needs = smoke
    return f"\nsmoke shows: {shows}; needs a longer profile: {needs}"
