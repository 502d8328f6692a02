"""Xu's (2026) spectral lock-in rule on the series r(t) = sigma_2 / sigma_3 of the rolling
first-layer update Gram (arXiv 2605.08119):

    s(t) = [ln max(r(t), 1e-6) - ln max(r(t - span), 1e-6)] / span        (span = 25)

fires at the first ``t >= min_epoch`` (100) with ``s(t) > threshold`` (0.04). ``r`` is NaN while
fewer than 3 updates are held (as in Xu's code), so ``s`` is undefined for t < span + 3. With
``persistence = p > 0`` the condition must hold at p + 1 consecutive steps and the fire epoch is
the step at which it is first confirmed (what an online detector knows); the paper uses p = 0.

Two forms of the same rule, no Lightning in either: :func:`slope_fire_epoch` on a whole series
(records, figures) and :class:`LockInRule` fed one step at a time (the callback
:class:`~grok_lightning.callbacks.lockin.LockInDetector`, which computes r(t) from the weights).
"""

from __future__ import annotations

import math

import numpy as np

from grok_lightning.config import require
from grok_lightning.records import rows

__all__ = ["LockInRule", "finite_median", "fire_epoch", "first_epoch_at_least", "history_column", "interquartile_range",
           "late_window", "lockin_key", "record_horizon", "slope_fire_epoch", "theorem6_value", "tian_activation",
           "tian_eta", "tian_model", "window_median"]


def lockin_key(window: int, name: str) -> str:
    """History column of a detector value, e.g. ``lockin_key(20, "ratio23") == "lockin_w20_ratio23"``."""
    return f"lockin_w{window}_{name}"


def slope_fire_epoch(ratio: list[float], span: int = 25, threshold: float = 0.04, min_epoch: int = 100,
                     persistence: int = 0, clip: float = 1e-6) -> int | None:
    """Offline version on a per-epoch series ``ratio[t] = r(t)`` (NaN where undefined).

    >>> r = [1.0] * 120 + [math.exp(0.05 * k) for k in range(1, 60)]
    >>> slope_fire_epoch(r)  # ln r rises at 0.05 per epoch from epoch 120 on
    140
    """
    rule = LockInRule(span, threshold, min_epoch, persistence, clip)
    for t, r in enumerate(ratio):
        rule.observe(t, r)
        if rule.fire_epoch is not None:
            return rule.fire_epoch
    return None


class LockInRule:
    """The slope rule fed one step at a time (see the module docstring).

    Args:
        span: steps between the two ln r values of the slope (25).
        threshold: slope threshold (0.04 per epoch).
        min_epoch: earliest step that may fire (100).
        persistence: extra consecutive steps the condition must hold (0 = paper).
        clip: lower clip of r before the log (1e-6, as Xu).
    """

    def __init__(self, span: int = 25, threshold: float = 0.04, min_epoch: int = 100, persistence: int = 0,
                 clip: float = 1e-6) -> None:
        require(isinstance(span, int) and span >= 1, "lockin.slope_span", span, "must be >= 1")
        require(isinstance(persistence, int) and persistence >= 0, "lockin.persistence", persistence, "must be >= 0")
        require(clip > 0, "lockin.clip", clip, "must be > 0")
        self.span, self.threshold, self.min_epoch = span, float(threshold), min_epoch
        self.persistence, self.clip = persistence, clip
        self.ln_r: dict[int, float] = {}
        self.fire_epoch: int | None = None
        self.run = 0  # consecutive steps meeting the condition

    def observe(self, step: int, ratio: float | None) -> float:
        """Feed r(step); return the slope s(step) (NaN while undefined)."""
        finite = ratio is not None and math.isfinite(ratio)
        self.ln_r[step] = math.log(max(ratio, self.clip)) if finite else math.nan
        slope = (self.ln_r[step] - self.ln_r.get(step - self.span, math.nan)) / self.span
        self.run = self.run + 1 if (step >= self.min_epoch and slope > self.threshold) else 0  # NaN compares False
        if self.fire_epoch is None and self.run > self.persistence:
            self.fire_epoch = step
        return slope

    def state_dict(self) -> dict:
        return {"ln_r": dict(self.ln_r), "fire_epoch": self.fire_epoch, "run": self.run}

    def load_state_dict(self, state_dict: dict) -> None:
        self.ln_r = {int(k): float(v) for k, v in state_dict["ln_r"].items()}
        self.fire_epoch = state_dict["fire_epoch"]
        self.run = int(state_dict.get("run", 0))


# --- reading Tian-run records (the lock-in targets' statistics) -----------------------------------
def tian_model(record: dict) -> dict:
    return record["config"].get("model", {})


def tian_eta(record: dict) -> float:
    return float(tian_model(record).get("eta") or 0.0)


def tian_activation(record: dict) -> str:
    return str(tian_model(record).get("activation", "x2"))


def record_horizon(record: dict) -> int:
    return int(record.get("final_epoch") or record["config"].get("max_epochs") or 0)


def history_column(record: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Every evaluated epoch and the value of ``key`` there, as float arrays (NaN where missing)."""
    table = list(rows(record, key))
    epochs = np.asarray([e for e, _ in table], dtype=float)
    values = np.asarray([np.nan if v is None else v for _, v in table], dtype=float)
    return epochs, values


def first_epoch_at_least(record: dict, key: str, threshold: float) -> int | None:
    epochs, values = history_column(record, key)
    hit = np.nonzero(values >= threshold)[0]
    return int(epochs[hit[0]]) if len(hit) else None


def window_median(record: dict, key: str, lo: int, hi: int) -> float:
    epochs, values = history_column(record, key)
    keep = (epochs >= lo) & (epochs <= hi) & np.isfinite(values)
    return float(np.median(values[keep])) if keep.any() else float("nan")


def fire_epoch(record: dict, window: int = 20) -> int | None:
    return record.get(f"lockin_fire_epoch_w{window}")


def theorem6_value(record: dict, epoch: int, key: str) -> float | None:
    value = (record.get("theorem6") or {}).get(str(epoch), {}).get(key)
    return None if value is None else float(value)


def finite_median(values) -> float:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.median(values)) if values else float("nan")


def interquartile_range(values) -> list[float] | None:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return [float(np.percentile(values, 25)), float(np.percentile(values, 75))] if values else None


def late_window(records: list[dict], lo: int = 200, hi: int = 400) -> tuple[int, int]:
    horizon = min((record_horizon(r) for r in records), default=hi)
    hi = min(hi, horizon)
    return (lo if lo < hi else hi // 2), hi
