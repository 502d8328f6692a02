"""Shared plotting helpers: aligned histories, median/IQR bands, captions that state the profile."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # figures are written to files; never needs a display
import numpy as np
from matplotlib import pyplot as plt

from grok_lightning.records import series

__all__ = ["aligned", "band", "caption", "plt", "PAPER_STYLE"]

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


def caption(profile: str, details: str, differs: str | None = None) -> str:
    text = f"profile: {profile} | {details}"
    if differs:
        text += f"\ndiffers from the paper: {differs}"
    return text
