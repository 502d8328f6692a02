"""E12 outcomes of one run, read from its record under a chosen reading of sigma_H.

The paper's outcomes (``intervention_stats.json``): ``peak_ent`` (peak sigma_H), ``min_sim`` (min
s_bar), ``grok_ep`` and ``final_test``. Every group (control A, interventions B and C, placebo P)
is scored by one rule on one window, (E, end] or (E + skip, E + W]: epoch E's own evaluation
precedes the intervention and is A's maximum by construction, so a window that includes it makes
B - A >= 0 for every seed.

sigma_H is read from the record's columns (:mod:`grok_lightning.stats.phases`), so one set of
runs can be scored under every reading: ``sum_layers`` (per-layer sigma_H summed over layers,
the E12 cohort's: docs/sigma_h_readings.md), ``released`` (their mean), ``max_layer``,
``pooled``, and ``untouched`` (``sum_layers`` over the heads no intervention re-initialised,
from the per-head entropies, so that A and B are read on the same heads).
"""

from __future__ import annotations

import math

import numpy as np

from grok_lightning.stats.phases import heads_curve, history_curve, sigma_h_curve

__all__ = ["E12_OUTCOMES", "SIGMA_READINGS", "e12_outcomes", "reinitialised_heads", "sigma_curve"]

E12_OUTCOMES = ("peak_ent", "min_sim", "grok_ep", "final_test")
SIGMA_READINGS = ("sum_layers", "released", "max_layer", "pooled", "untouched")


def sigma_curve(history: dict, reading: str, skip_heads: dict[int, list[int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, sigma_H)`` of a record's history under ``reading`` (module docstring).

    >>> h = {"epoch": [0, 10], "entropy_std": [0.1, 0.2], "layer_0/entropy_std": [0.1, 0.1], "layer_1/entropy_std": [0.1, 0.3]}
    >>> sigma_curve(h, "sum_layers")[1], sigma_curve(h, "released")[1]
    (array([0.2, 0.4]), array([0.1, 0.2]))
    """
    if reading == "untouched":
        return heads_curve(history, skip=skip_heads, reduce="sum")
    if reading in SIGMA_READINGS:
        return sigma_h_curve(history, reading)
    raise ValueError(f"reading={reading!r}: expected one of {', '.join(SIGMA_READINGS)}")


def reinitialised_heads(record: dict) -> dict[int, list[int]]:
    """``{layer: [head, ...]}`` re-initialised by a record's ``HeadReinit`` (empty if none)."""
    heads: dict[int, list[int]] = {}
    for event in record.get("interventions") or []:
        for layer, chosen in (event.get("heads") or {}).items():
            heads.setdefault(int(layer), []).extend(int(h) for h in chosen)
    return heads


def e12_outcomes(record: dict, epoch: int, reading: str = "sum_layers", window: int | None = None,
                 skip_epochs: int = 0, skip_heads: dict[int, list[int]] | None = None,
                 skip_evaluations: int = 0) -> dict[str, float]:
    """The E12 outcomes of one run on (E + skip_epochs, E + window] (to the end when ``window`` is
    None), less the first ``skip_evaluations`` evaluations after E (counted on the run's own
    evaluation epochs, so every group skips the same epochs: they share the schedule); NaN for a run
    that did not complete or has no value there.

    >>> h = {"epoch": [90, 100, 110, 120], "entropy_std": [0.1, 0.5, 0.3, 0.2],
    ...      "mean_similarity": [0.9, 0.8, 0.85, 0.7]}
    >>> r = {"status": "completed", "grok_epoch": 110, "final_test_acc": 1.0, "history": h}
    >>> e12_outcomes(r, 100, reading="released")
    {'peak_ent': 0.3, 'min_sim': 0.7, 'grok_ep': 110.0, 'final_test': 1.0}
    >>> e12_outcomes(r, 100, reading="released", skip_evaluations=1)["peak_ent"]
    0.2
    """
    if record.get("status") != "completed":
        return {name: math.nan for name in E12_OUTCOMES}
    history = record["history"]
    epochs, sigma = sigma_curve(history, reading, skip_heads)
    _, s_bar = history_curve(history, "mean_similarity")
    end = epochs[-1] if window is None else epoch + window
    inside = (epochs > epoch + skip_epochs) & (epochs <= end)
    if skip_evaluations > 0:
        inside[np.flatnonzero(inside)[:skip_evaluations]] = False

    def pick(values: np.ndarray, reduce) -> float:
        keep = inside & np.isfinite(values)
        return float(reduce(values[keep])) if keep.any() else math.nan

    grok = record.get("grok_epoch")
    final = record.get("final_test_acc")
    return {"peak_ent": pick(sigma, np.max), "min_sim": pick(s_bar, np.min),
            "grok_ep": math.nan if grok is None else float(grok),
            "final_test": math.nan if final is None else float(final)}
