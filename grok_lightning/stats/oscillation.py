"""The post-grokking sawtooth of s_bar: its period, its link to train-loss spikes, and how much of
it survives a median over seeds.

After grokking, a canonical run's s_bar oscillates around a slow trend; test accuracy dips at
times. Two questions decide whether this is a difference from the paper, whose Fig. 2 median
(n = 50) is smooth there:

1. Do the teeth come from train-loss spikes (the slingshot of Adam with a small eps)? Compare the
   detrended s_bar at evaluations whose epoch-mean train loss is above ``spike_loss`` with the rest,
   and the correlation of test accuracy with log train loss.
2. Are the seeds' teeth in phase? If not, a median over n seeds shrinks them roughly as
   1/sqrt(n), and the paper's 50-seed median would be smooth whatever each seed does.

Per run, over evaluations in ``[lo, hi]`` (which must be evenly spaced):

* ``residual = s_bar - savgol(s_bar, window, 2)`` (the slow trend removed);
* ``period``: the lag of the residual's autocorrelation's first positive maximum after its first
  minimum, in epochs (NaN when there is none within ``max_lag`` evaluations);
* ``residual_at_spikes`` and ``residual_elsewhere``: mean residual at spike / other evaluations;
  ``spike_r2``: the share of the residual's variance the spike indicator explains.

Across runs: the mean pairwise correlation of the residuals (phase agreement) and the standard
deviation of the residuals' median over runs, next to one run's.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.signal import savgol_filter

__all__ = ["sawtooth_summary"]


def _first_period(residual: np.ndarray, step: float, max_lag: int) -> float:
    lags = range(1, min(max_lag, len(residual) - 2) + 1)
    ac = np.array([np.corrcoef(residual[:-k], residual[k:])[0, 1] for k in lags])
    # the first local minimum, then the first positive local maximum after it (index i is lag i + 1)
    troughs = [i for i in range(len(ac) - 1) if ac[i] < 0 and ac[i] <= ac[i + 1] and (i == 0 or ac[i] <= ac[i - 1])]
    if not troughs:
        return math.nan
    peaks = [i for i in range(troughs[0] + 1, len(ac) - 1) if ac[i] > 0 and ac[i] >= ac[i - 1] and ac[i] >= ac[i + 1]]
    return float((peaks[0] + 1) * step) if peaks else math.nan


def sawtooth_summary(histories: list[dict], key: str = "mean_similarity", lo: int = 200, hi: int = 2000,
                     spike_loss: float = 0.1, window: int = 31, max_lag: int = 15) -> dict:
    """The sawtooth of ``key`` after grokking (module docstring); ``histories``: record histories.

    >>> e = list(range(200, 1010, 10)); s = [0.96 + 0.01 * math.sin(2 * math.pi * x / 40) for x in e]
    >>> out = sawtooth_summary([{"epoch": e, "mean_similarity": s, "train_loss": [0.01] * len(e),
    ...                          "test_acc": [1.0] * len(e)}], hi=1000)
    >>> out["runs"][0]["period"]
    40.0
    """
    runs, residuals = [], []
    for history in histories:
        epochs = np.asarray(history["epoch"], dtype=float)
        keep = (epochs >= lo) & (epochs <= hi)
        epochs = epochs[keep]
        steps = np.diff(epochs)
        if len(epochs) < window or not np.allclose(steps, steps[0]):
            raise ValueError(f"sawtooth_summary needs >= {window} evenly spaced evaluations in [{lo}, {hi}]")
        values = np.asarray(history[key], dtype=float)[keep]
        loss = np.asarray(history["train_loss"], dtype=float)[keep]
        accuracy = np.asarray(history["test_acc"], dtype=float)[keep]
        residual = values - savgol_filter(values, window, 2)
        spikes = loss > spike_loss
        runs.append({
            "period": _first_period(residual, float(steps[0]), max_lag),
            "residual_sd": float(residual.std()),
            "spikes": int(spikes.sum()),
            "evaluations": int(len(residual)),
            "residual_at_spikes": float(residual[spikes].mean()) if spikes.any() else math.nan,
            "residual_elsewhere": float(residual[~spikes].mean()) if (~spikes).any() else math.nan,
            # share of the sawtooth's variance that the spike indicator explains (squared point-biserial r)
            "spike_r2": float(np.corrcoef(residual, spikes)[0, 1] ** 2) if 0 < spikes.sum() < len(spikes) else math.nan,
            "corr_test_acc_log_loss": float(np.corrcoef(accuracy, np.log(loss))[0, 1])
            if accuracy.std() > 0 and loss.std() > 0 else math.nan,
        })
        residuals.append(residual)
    length = min(len(r) for r in residuals)
    stacked = np.array([r[:length] for r in residuals])
    pairs = [np.corrcoef(a, b)[0, 1] for a, b in itertools.combinations(stacked, 2)]
    return {"key": key, "lo": lo, "hi": hi, "spike_loss": spike_loss, "runs": runs,
            "phase_correlation": float(np.mean(pairs)) if pairs else math.nan,
            "median_residual_sd": float(np.median(stacked, axis=0).std()),
            "single_residual_sd": float(np.mean([r["residual_sd"] for r in runs]))}
