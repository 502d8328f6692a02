"""Per-run regime labels for the regime map (Fig. 1) and the multi-task heatmap (Fig. 9).

A run is in one of four regimes at its horizon:

* ``grok``: test accuracy reached the grokking threshold (``record["grok_epoch"]`` is set);
* ``collapse``: it did not grok and its heads became identical, read from the attention
  diagnostics at the last evaluation: ``s_bar >= s_bar_min`` and ``sigma_H <= sigma_h_max``.
  The paper gives no number for "collapse" (s_bar = 1.000 at lambda = 10); the defaults
  (0.9995, 1e-3) are the ones the design notes fix, and both are arguments;
* ``no-grok``: neither (memorisation, or not yet generalised at the horizon);
* ``diverged``: the loss became NaN/Inf (kept, never dropped; it counts as not grokked).

Runs of architectures without attention cannot collapse by this definition (no s_bar), so they
are ``grok`` / ``no-grok`` / ``diverged`` only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

__all__ = ["REGIMES", "CollapseCriterion", "classify_run", "regime_counts"]

#: the labels, in the order figures draw them
REGIMES = ("grok", "no-grok", "collapse", "diverged")


@dataclass(frozen=True)
class CollapseCriterion:
    """Thresholds on the last evaluation's diagnostics that define head collapse."""

    s_bar_min: float = 0.9995
    sigma_h_max: float = 1e-3

    def __post_init__(self):
        if not 0.0 < self.s_bar_min <= 1.0:
            raise ValueError(f"s_bar_min must lie in (0, 1], got {self.s_bar_min}")
        if self.sigma_h_max < 0:
            raise ValueError(f"sigma_h_max must be >= 0, got {self.sigma_h_max}")


def _last_finite(history: dict, key: str) -> float | None:
    for value in reversed(history.get(key) or []):
        if value is not None and np.isfinite(value):
            return float(value)
    return None


def classify_run(record: dict, criterion: CollapseCriterion = CollapseCriterion()) -> str:
    """The regime of one run record at its horizon (see the module docstring).

    >>> history = {"mean_similarity": [0.95, 1.0], "entropy_std": [0.03, 0.0]}
    >>> classify_run({"status": "completed", "grok_epoch": None, "history": history})
    'collapse'
    >>> classify_run({"status": "completed", "grok_epoch": 180, "history": history})
    'grok'
    >>> classify_run({"status": "diverged", "grok_epoch": None, "history": {}})
    'diverged'
    """
    if record.get("status") == "diverged":
        return "diverged"
    if record.get("grok_epoch") is not None:
        return "grok"
    history = record.get("history") or {}
    s_bar, sigma_h = _last_finite(history, "mean_similarity"), _last_finite(history, "entropy_std")
    if s_bar is not None and sigma_h is not None and s_bar >= criterion.s_bar_min \
            and sigma_h <= criterion.sigma_h_max:
        return "collapse"
    return "no-grok"


def regime_counts(records: list[dict], criterion: CollapseCriterion = CollapseCriterion()) -> dict[str, int]:
    """How many runs fall in each regime (every label present, zeros included)."""
    counts = Counter(classify_run(r, criterion) for r in records)
    return {label: counts.get(label, 0) for label in REGIMES}
