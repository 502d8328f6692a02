"""Phase helpers: landmark quantities of one run's diagnostic history (arXiv 2605.20441 section 5).

The paper's phases are fixed landmark windows, not fitted boundaries: Phase 1 (head
coordination, s_bar rises from about 0.93 to 0.995 around grokking; Fig. 2 shades epochs
100-500) and Phase 2 (differentiation, sigma_H peaks and s_bar dips; epochs 1,000-3,000).
Peak differentiation amplitude = max sigma_H over epochs > 100 (the author's aggregates "skip
first 100 epochs to strip init transient").

The Phase-1 rise (0.93 -> 0.995) runs from s_bar's minimum *during memorisation* to its peak
around grokking. Memorisation is the stretch where the training split is fitted and the test
split is not: from the first evaluation with train accuracy >= 0.99 (the grokking threshold,
applied to the training split) up to t_grok. The initialisation and the early transient before
memorisation (Fig. 2 dips to about 0.88 near epoch 5) are not part of it; the value at
initialisation is reported on its own.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from grok_lightning.metrics.readings import sigma_h_from_layers

__all__ = ["RECORD_READINGS", "PhaseSummary", "heads_curve", "history_curve", "layer_columns", "peak_entropy_std",
           "phase1_rise_window", "phase_summary", "sigma_h_curve"]

PHASE1_WINDOW = (100, 500)
PHASE2_WINDOW = (1000, 3000)


def history_curve(history: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, values of key)`` of a record's history as float arrays; NaN where a value is
    missing, all NaN when the history has no such column."""
    epochs = np.asarray(history["epoch"], dtype=float)
    values = np.asarray([np.nan if v is None else v for v in history.get(key, [None] * len(epochs))], dtype=float)
    return epochs, values


#: the readings of sigma_H a record's columns give (metrics/readings.py): ``released`` is the
#: ``entropy_std`` column itself; the others pool the per-layer columns ``layer_<l>/entropy_std``
#: (and ``layer_<l>/entropy_mean`` for ``pooled``) with the function that pools a tensor's layers
RECORD_READINGS = ("released", "max_layer", "pooled", "sum_layers")


def layer_columns(history: dict, key: str) -> tuple[list[int], np.ndarray | None]:
    """``(layers, (L, epochs) table)``: the per-layer columns ``layer_<l>/<key>`` of a record's
    history in layer order (NaN where a value is missing); ``([], None)`` without such columns."""
    layers = sorted(int(k.split("/")[0].removeprefix("layer_")) for k in history
                    if k.startswith("layer_") and k.endswith(f"/{key}"))
    if not layers:
        return [], None
    return layers, np.vstack([history_curve(history, f"layer_{layer}/{key}")[1] for layer in layers])


def sigma_h_curve(history: dict, reading: str = "released") -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, sigma_H under reading)`` from a record's history (:data:`RECORD_READINGS`): the
    function that reads one evaluation's attention (:func:`~grok_lightning.metrics.readings.sigma_h_from_layers`)
    applied to the per-layer columns. All NaN when the record lacks the columns a reading needs.

    >>> h = {"epoch": [0, 10], "entropy_std": [0.15, 0.2], "layer_0/entropy_std": [0.1, 0.3],
    ...      "layer_1/entropy_std": [0.2, None]}
    >>> sigma_h_curve(h, "max_layer")[1], sigma_h_curve(h, "sum_layers")[1], sigma_h_curve(h)[1]
    (array([0.2, 0.3]), array([0.3, nan]), array([0.15, 0.2 ]))
    >>> h = {"epoch": [0], "layer_0/entropy_std": [0.0], "layer_0/entropy_mean": [1.0],
    ...      "layer_1/entropy_std": [0.0], "layer_1/entropy_mean": [2.0]}
    >>> sigma_h_curve(h, "pooled")[1]  # two layers of identical heads, means 1 and 2: std over all heads 0.5
    array([0.5])
    """
    if reading not in RECORD_READINGS:
        raise ValueError(f"reading={reading!r}: a record gives {', '.join(RECORD_READINGS)}")
    epochs = np.asarray(history["epoch"], dtype=float)
    if reading == "released":  # the layer mean, written at training time by the same function
        return history_curve(history, "entropy_std")
    layers, std = layer_columns(history, "entropy_std")
    mean_layers, mean = layer_columns(history, "entropy_mean") if reading == "pooled" else (layers, None)
    if std is None or mean_layers != layers:
        return epochs, np.full(len(epochs), np.nan)
    return epochs, sigma_h_from_layers(reading, std, mean)


def heads_curve(history: dict, skip: dict[int, list[int]] | None = None, reduce: str = "sum") -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, sigma_H over the heads not in skip)`` from a record's per-head entropies
    (``head_entropy/layer_<l>/head_<h>``): per layer, the population std over the kept heads, then
    pooled over layers by the ``sum_layers`` reading (``reduce="sum"``) or ``released``
    (``"mean"``). ``skip`` maps a layer to the head indices left out: the heads an intervention
    re-initialised, so that A and B are read on the same untouched heads. All NaN without per-head
    columns.

    >>> h = {"epoch": [0], **{f"head_entropy/layer_0/head_{i}": [v] for i, v in enumerate([0.0, 1.0, 5.0])}}
    >>> heads_curve(h)[1], heads_curve(h, skip={0: [2]})[1]
    (array([2.1602469]), array([0.5]))
    """
    if reduce not in ("sum", "mean"):
        raise ValueError(f"reduce={reduce!r}: expected sum or mean")
    epochs = np.asarray(history["epoch"], dtype=float)
    columns: dict[int, dict[int, np.ndarray]] = {}
    for key in history:
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == "head_entropy":
            layer, head = int(parts[1].removeprefix("layer_")), int(parts[2].removeprefix("head_"))
            columns.setdefault(layer, {})[head] = history_curve(history, key)[1]
    if not columns:
        return epochs, np.full(len(epochs), np.nan)
    skip = skip or {}
    per_layer = [np.vstack([v for h, v in sorted(heads.items()) if h not in skip.get(layer, [])]).std(axis=0)
                 for layer, heads in sorted(columns.items())]
    return epochs, sigma_h_from_layers("sum_layers" if reduce == "sum" else "released", np.vstack(per_layer))


def peak_entropy_std(history: dict, after_epoch: int = 100) -> tuple[float, int | None]:
    """``(max sigma_H over epochs > after_epoch, its epoch)``; ``(nan, None)`` if none.

    >>> peak_entropy_std({"epoch": [0, 50, 150, 200], "entropy_std": [0.5, 0.4, 0.09, 0.12]})
    (0.12, 200)
    """
    epochs, values = history_curve(history, "entropy_std")
    mask = (epochs > after_epoch) & np.isfinite(values)
    if not mask.any():
        return math.nan, None
    index = int(np.flatnonzero(mask)[np.argmax(values[mask])])
    return float(values[index]), int(epochs[index])


@dataclass
class PhaseSummary:
    grok_epoch: int | None
    s_bar_start: float  # at epoch 0 (initialisation)
    memorised_epoch: int | None  # first evaluation with train accuracy >= the memorisation threshold
    s_bar_memorised: float  # Phase-1 start: min s_bar over [memorised_epoch, grok_epoch)
    s_bar_min_before_grok: float  # min s_bar over (0, grok_epoch): the early transient included
    s_bar_peak: float  # Phase-1 end: max s_bar within [grok_epoch - 50, grok_epoch + 400]
    s_bar_peak_epoch: int | None
    phase1_rise: float  # s_bar_peak - s_bar_memorised
    s_bar_min_after_grok: float  # Phase-2 dip: min s_bar after the Phase-1 peak
    peak_entropy_std: float  # max sigma_H over epochs > 100
    peak_entropy_std_epoch: int | None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def phase_summary(history: dict, grok_epoch: int | None, memorised_threshold: float = 0.99) -> PhaseSummary:
    """Landmarks of one run; quantities that need grokking are NaN when it never grokked, and the
    memorisation minimum is NaN when the training split was not fitted before t_grok.

    >>> history = {"epoch": [0, 5, 20, 60, 100, 150, 200], "mean_similarity": [0.95, 0.85, 0.90, 0.88, 0.92, 0.99, 0.97],
    ...            "train_acc": [0.01, 0.3, 0.995, 1.0, 1.0, 1.0, 1.0], "entropy_std": [0.02] * 7}
    >>> s = phase_summary(history, grok_epoch=150)
    >>> s.s_bar_start, s.memorised_epoch, s.s_bar_memorised, s.s_bar_min_before_grok, s.s_bar_peak
    (0.95, 20, 0.88, 0.85, 0.99)
    """
    epochs, s_bar = history_curve(history, "mean_similarity")
    _, train_acc = history_curve(history, "train_acc")
    finite = np.isfinite(s_bar)
    start = float(s_bar[0]) if len(s_bar) and finite[0] else math.nan
    nan = math.nan
    memorised = early = peak = rise = dip = nan
    peak_epoch = memorised_epoch = None
    fitted = np.flatnonzero(np.isfinite(train_acc) & (train_acc >= memorised_threshold))
    if fitted.size:
        memorised_epoch = int(epochs[fitted[0]])
    if grok_epoch is not None and finite.any():
        before = finite & (epochs > 0) & (epochs < grok_epoch)
        early = float(s_bar[before].min()) if before.any() else nan
        if memorised_epoch is not None:
            window = finite & (epochs >= memorised_epoch) & (epochs < grok_epoch)
            memorised = float(s_bar[window].min()) if window.any() else nan
        around = finite & (epochs >= grok_epoch - 50) & (epochs <= grok_epoch + 400)
        if around.any():
            index = int(np.flatnonzero(around)[np.argmax(s_bar[around])])
            peak, peak_epoch = float(s_bar[index]), int(epochs[index])
            rise = peak - memorised
            after = finite & (epochs > peak_epoch)
            dip = float(s_bar[after].min()) if after.any() else nan
    amplitude, amplitude_epoch = peak_entropy_std(history)
    return PhaseSummary(grok_epoch, start, memorised_epoch, memorised, early, peak, peak_epoch, rise, dip, amplitude,
                        amplitude_epoch)


def phase1_rise_window(history: dict, grok_epoch: int | None, memorised_threshold: float = 0.99,
                       before_grok: bool = False) -> tuple[int, int] | None:
    """The epochs ``(start, end)`` of one run's Phase-1 rise, the stretch the paper's tanh is fitted
    to: from s_bar's minimum while memorised to its peak around grokking (:func:`phase_summary`'s
    landmarks), or, with ``before_grok``, to t_grok itself. None where a landmark is undefined
    (the run never grokked, or was not memorised before t_grok).

    >>> history = {"epoch": [0, 5, 20, 60, 100, 150, 200], "mean_similarity": [0.95, 0.85, 0.90, 0.88, 0.92, 0.99, 0.97],
    ...            "train_acc": [0.01, 0.3, 0.995, 1.0, 1.0, 1.0, 1.0], "entropy_std": [0.02] * 7}
    >>> phase1_rise_window(history, 150), phase1_rise_window(history, 150, before_grok=True), phase1_rise_window(history, None)
    ((60, 150), (60, 150), None)
    """
    summary = phase_summary(history, grok_epoch, memorised_threshold)
    if summary.memorised_epoch is None or not math.isfinite(summary.s_bar_memorised) or summary.s_bar_peak_epoch is None:
        return None
    epochs, s_bar = history_curve(history, "mean_similarity")
    window = np.isfinite(s_bar) & (epochs >= summary.memorised_epoch) & (epochs < grok_epoch)
    start = int(epochs[window][np.argmin(s_bar[window])])
    return start, int(grok_epoch if before_grok else summary.s_bar_peak_epoch)
