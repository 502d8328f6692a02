"""Distance of a set of runs' median trajectory to the paper's Fig. 2 median curves.

The paper's Fig. 2 (median of n = 50 canonical runs at lambda = 1) is matched as a whole
trajectory, not only at its extremes. ``reference/fig2_median_read_off.csv`` holds its three
median curves read off the published figure at 26 log-spaced epochs (reading error about 0.005
on s_bar and sigma_H, 0.02 on test accuracy).

The distance of one curve (``key``: a history column, e.g. ``mean_similarity``):

1. the median over runs at every evaluated epoch that all runs share (``median_curve``);
2. "ours" at a read-off epoch ``e`` = the median of that curve over the evaluations within
   ``+-10%`` of ``e`` (``[0.9 e, 1.1 e]``): a window, so a read-off epoch between two
   evaluations, and the post-grokking sawtooth, are read as the figure's eye would;
3. the RMS of (ours - paper) over the read-off epochs in ``[lo, hi]`` that our runs reach
   (``e <= the last shared epoch``) and whose window holds at least one evaluation.

:func:`trajectory_distances` scores the three curves of Fig. 2 at once; the column of s_bar or
sigma_H can be any reading (``reading/<inputs>/<reading>/<name>``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from grok_lightning.package_data import reference_file

__all__ = ["FIG2_CURVES", "FIG2_GOALS", "TrajectoryDistance", "median_curve", "read_off_reference",
           "trajectory_distance", "trajectory_distances"]

#: the packaged read-off (grok_lightning.package_data: reference/ in a clone, package data when installed)
REFERENCE_CSV = "fig2_median_read_off.csv"
#: Fig. 2's curves: the CSV's column -> the history column of the released reading
FIG2_CURVES = {"test_acc": "test_acc", "s_bar": "mean_similarity", "sigma_H": "entropy_std"}
#: the goal of a matched trajectory (RMS), per curve
FIG2_GOALS = {"test_acc": 0.05, "s_bar": 0.015, "sigma_H": 0.015}
WINDOW = 0.10


def read_off_reference(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """``{"epoch": ..., "test_acc": ..., "s_bar": ..., "sigma_H": ...}`` as float arrays, from
    ``path`` or (default) the packaged :data:`REFERENCE_CSV`."""
    path = reference_file(REFERENCE_CSV) if path is None else path
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return {column: np.array([float(row[column]) for row in rows]) for column in rows[0]}


def median_curve(histories: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, median over runs)`` at the evaluated epochs every run has (NaN values skipped)."""
    if not histories:
        raise ValueError("no runs to take a median over")
    columns = []
    for history in histories:
        if key not in history:
            raise KeyError(f"history has no column {key!r}")
        columns.append({int(e): (math.nan if v is None else float(v)) for e, v in zip(history["epoch"], history[key])})
    shared = sorted(set.intersection(*(set(c) for c in columns)))
    values = np.array([[c[e] for c in columns] for e in shared])
    with np.errstate(all="ignore"):
        median = np.nanmedian(values, axis=1) if len(shared) else np.array([])
    return np.array(shared, dtype=float), median


@dataclass
class TrajectoryDistance:
    """The RMS distance of one curve and what it was computed over."""

    curve: str  # test_acc | s_bar | sigma_H
    key: str  # the history column scored
    rms: float  # NaN when no read-off epoch could be scored
    n_points: int
    epochs: list[int]  # the read-off epochs scored
    ours: list[float]
    paper: list[float]
    lo: int
    hi: int

    def to_dict(self) -> dict:
        return asdict(self)


def trajectory_distance(histories: list[dict], curve: str, key: str | None = None, lo: int = 1,
                        hi: int = 3000, reference: dict[str, np.ndarray] | None = None) -> TrajectoryDistance:
    """RMS distance of the runs' median ``key`` curve to the paper's ``curve`` (module docstring).

    >>> ref = {"epoch": np.array([1.0, 10.0, 100.0]), "s_bar": np.array([0.9, 0.8, 0.95])}
    >>> run = {"epoch": [0, 1, 2, 10, 20, 100], "mean_similarity": [0.95, 0.92, 0.9, 0.8, 0.85, 0.97]}
    >>> round(trajectory_distance([run], "s_bar", reference=ref).rms, 4)  # (0.02, 0, 0.02)
    0.0163
    """
    reference = read_off_reference() if reference is None else reference
    key = key or FIG2_CURVES[curve]
    epochs, median = median_curve(histories, key)
    last = epochs.max() if len(epochs) else -math.inf
    scored, ours, paper = [], [], []
    for epoch, target in zip(reference["epoch"], reference[curve]):
        if not lo <= epoch <= hi or epoch > last:
            continue
        window = (epochs >= (1 - WINDOW) * epoch) & (epochs <= (1 + WINDOW) * epoch) & np.isfinite(median)
        if not window.any():
            continue
        scored.append(int(epoch))
        ours.append(float(np.median(median[window])))
        paper.append(float(target))
    diff = np.array(ours) - np.array(paper)
    rms = float(np.sqrt(np.mean(diff**2))) if len(diff) else math.nan
    return TrajectoryDistance(curve, key, rms, len(diff), scored, ours, paper, lo, hi)


def trajectory_distances(histories: list[dict], lo: int = 1, hi: int = 3000, keys: dict[str, str] | None = None,
                         reference: dict[str, np.ndarray] | None = None) -> dict[str, TrajectoryDistance]:
    """The three Fig. 2 curves at once; ``keys`` overrides the history column per curve (e.g.
    ``{"sigma_H": "reading/all/pooled/entropy_std"}``)."""
    reference = read_off_reference() if reference is None else reference
    columns = {**FIG2_CURVES, **(keys or {})}
    return {curve: trajectory_distance(histories, curve, columns[curve], lo, hi, reference) for curve in FIG2_CURVES}
