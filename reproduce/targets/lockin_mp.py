"""Spectral lock-in target 5, the M x p scaling sweep (``python -m reproduce.targets.lockin --only mp``):
``lockin_mp.yaml`` (medium and paper profiles). Its claim, ``lock.mp_rho``: rho_tian reaches 0.075
in every run, whether it groks or not. A run that diverges later still counts by what its record
holds before it (the paper's M = 127, p = 0.5 cell diverges, its rho having fired).
"""

from __future__ import annotations

import numpy as np

from grok_lightning.stats.lockin import first_epoch_at_least
from reproduce.report import count_row
from reproduce.targets.lockin_common import RHO_THRESHOLD

__all__ = ["target_mp"]


def _cell(record: dict) -> tuple[int, float]:
    data = record["config"]["data"]
    return int(data["M"]), round(float(data["train_fraction"]), 4)


def target_mp(records: list[dict], profile: str) -> tuple[dict, list[dict], list]:
    """``(summary part, rows, figures)``: per (M, p) cell the runs whose rho_tian fired, their fire
    epochs and how many grokked; the count over every run scores ``lock.mp_rho``."""
    runs = [r for r in records if r.get("status") in ("completed", "diverged") and r.get("history")]
    cells: dict[tuple[int, float], dict] = {}
    for r in runs:
        cell = cells.setdefault(_cell(r), {"runs": 0, "fired": [], "grokked": 0, "diverged": 0})
        cell["runs"] += 1
        fire = first_epoch_at_least(r, "rho_tian", RHO_THRESHOLD)
        if fire is not None:
            cell["fired"].append(fire)
        cell["grokked"] += r.get("grok_epoch") is not None
        cell["diverged"] += r.get("status") == "diverged"
    fired = sum(len(c["fired"]) for c in cells.values())
    epochs = [e for c in cells.values() for e in c["fired"]]
    note = "; ".join(f"M {m}, p {p:g}: {len(c['fired'])}/{c['runs']} fired"
                     + (f" (median epoch {np.median(c['fired']):g})" if c["fired"] else "")
                     + f", {c['grokked']} grokked" + (f", {c['diverged']} diverged" if c["diverged"] else "")
                     for (m, p), c in sorted(cells.items()))
    horizon = max((int(r["config"].get("max_epochs") or 0) for r in runs), default=None)
    # a fire is a first crossing: when every run fired, the count is final at any longer horizon
    final = f"every run's rho_tian fired by epoch {max(epochs)}" if runs and fired == len(runs) else ""
    row = count_row("lock.mp_rho", f"M x p sweep: runs whose rho_tian reaches {RHO_THRESHOLD}, grokking or not", fired,
                    len(runs), profile, note=note, horizon=horizon, horizon_final=final)
    summary = {"cells": {f"M{m}_p{p:g}": c for (m, p), c in sorted(cells.items())}, "fired": fired, "runs": len(runs),
               "fire_epoch_range": [min(epochs), max(epochs)] if epochs else None}
    return summary, [row], []
