"""Phase helpers: landmark quantities of one run's diagnostic history (arXiv 2605.20441 section 5).

The paper's phases are fixed landmark windows, not fitted boundaries: Phase 1 (head
coordination, s_bar rises from about 0.93 to 0.995 around grokking; Fig. 2 shades epochs
100-500) and Phase 2 (differentiation, sigma_H peaks and s_bar dips; epochs 1,000-3,000).
Peak differentiation amplitude = max sigma_H over epochs > 100 (the author's aggregates "skip
first 100 epochs to strip init transient").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["PhaseSummary", "phase_summary", "peak_entropy_std"]

PHASE1_WINDOW = (100, 500)
PHASE2_WINDOW = (1000, 3000)


def _column(history: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    epochs = np.asarray(history["epoch"], dtype=float)
    values = np.asarray([np.nan if v is None else v for v in history.get(key, [None] * len(epochs))], dtype=float)
    return epochs, values


def peak_entropy_std(history: dict, after_epoch: int = 100) -> tuple[float, int | None]:
    """``(max sigma_H over epochs > after_epoch, its epoch)``; ``(nan, None)`` if none.

    >>> peak_entropy_std({"epoch": [0, 50, 150, 200], "entropy_std": [0.5, 0.4, 0.09, 0.12]})
    (0.12, 200)
    """
    epochs, values = _column(history, "entropy_std")
    mask = (epochs > after_epoch) & np.isfinite(values)
    if not mask.any():
        return math.nan, None
    index = int(np.flatnonzero(mask)[np.argmax(values[mask])])
    return float(values[index]), int(epochs[index])


@dataclass
class PhaseSummary:
    grok_epoch: int | None
    s_bar_start: float  # at epoch 0 (initialisation)
    s_bar_memorised: float  # minimum before grokking (the memorisation trough)
    s_bar_peak: float  # Phase-1 maximum: max s_bar within [grok_epoch - 50, grok_epoch + 400]
    s_bar_peak_epoch: int | None
    phase1_rise: float  # s_bar_peak - s_bar_memorised
    s_bar_min_after_grok: float  # Phase-2 dip: min s_bar after the Phase-1 peak
    peak_entropy_std: float  # max sigma_H over epochs > 100
    peak_entropy_std_epoch: int | None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def phase_summary(history: dict, grok_epoch: int | None) -> PhaseSummary:
    """Landmarks of one run; quantities that need grokking are NaN when it never grokked."""
    epochs, s_bar = _column(history, "mean_similarity")
    finite = np.isfinite(s_bar)
    start = float(s_bar[0]) if len(s_bar) and finite[0] else math.nan
    nan = math.nan
    memorised = peak = rise = dip = nan
    peak_epoch = None
    if grok_epoch is not None and finite.any():
        before = finite & (epochs > 0) & (epochs < grok_epoch)
        memorised = float(s_bar[before].min()) if before.any() else nan
        around = finite & (epochs >= grok_epoch - 50) & (epochs <= grok_epoch + 400)
        if around.any():
            index = int(np.flatnonzero(around)[np.argmax(s_bar[around])])
            peak, peak_epoch = float(s_bar[index]), int(epochs[index])
            rise = peak - memorised
            after = finite & (epochs > peak_epoch)
            dip = float(s_bar[after].min()) if after.any() else nan
    amplitude, amplitude_epoch = peak_entropy_std(history)
    return PhaseSummary(grok_epoch, start, memorised, peak, peak_epoch, rise, dip, amplitude, amplitude_epoch)
