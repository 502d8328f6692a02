"""The author's a7 contrasts (``reference/a7_cohens_d.json``): two-sample Cohen's d of peak sigma_H
between runs that differ in one factor alone, mod add vs mod mul, pre-LN vs post-LN, high vs low
d_model, deep vs shallow.

Peak sigma_H is the released reading's maximum over epochs > 100 (the paper's amplitude). Two
groups are compared only where every other setting is equal (seeds aside), so a difference is the
factor's; among the cells of runs that share everything else, the one with the most runs at two
levels is used. Where no two groups of the records differ in the factor alone, the row says what
runs it needs (the claim's ``needs``) and, in a profile that has them, what trains them.

Fig. 4's runs hold none of these factors' second level: the runs that give each contrast its
other side are ``configs/sweeps/a7_contrasts.yaml``'s, Fig. 4's 8-head config with one factor
changed, read beside Fig. 4's (:func:`contrast_records`, pooled by :func:`unique_runs`) and never
part of Fig. 4's own fit. Each contrast is one profile of that file, trained by the campaign
``a7_<profile>`` of ``configs/campaigns.yaml``; the target's profile reads their union.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from grok_lightning.records import FINAL_STATUSES
from grok_lightning.stats import cohens_d, cohens_d_ci
from grok_lightning.stats.phases import peak_entropy_std
from reproduce.report import claim, claim_row, join_notes
from reproduce.targets.common import read_planned, sweep_path

#: claim -> (the factor in words, its place in a record's config, the level of group a then of b:
#: fixed names, or None for the highest and the lowest value present, the profile of
#: :data:`CONTRAST_SWEEP` whose runs give it the side Fig. 4's runs lack)
CONTRASTS = {
    "a7.add_vs_mul": ("the operation", ("data", "operation"), ("add", "mul"), "add_vs_mul"),
    "a7.lnpre_vs_lnpost": ("the LayerNorm position", ("model", "norm_position"), ("pre", "post"), "post_ln"),
    "a7.dmodel_high_vs_low": ("d_model", ("model", "d_model"), None, "dmodel"),
    "a7.depth_deep_vs_shallow": ("the depth", ("model", "n_layers"), None, "depth"),
}
#: record config keys that say where or how long a run ran, not what it is
PLACEMENT = ("seed", "run_id", "name", "profile")
#: the runs that change one factor of Fig. 4's 8-head cell, and the target profiles that read them
#: (its profile of that name: the union of the contrasts' profiles)
CONTRAST_SWEEP = "a7_contrasts.yaml"
CONTRAST_PROFILES = ("medium",)

__all__ = ["CONTRASTS", "CONTRAST_PROFILES", "CONTRAST_SWEEP", "a7_rows", "contrast_records", "factor_groups",
           "unique_runs"]


def contrast_records(profile: str, store: str | Path) -> list[dict]:
    """The final records of :data:`CONTRAST_SWEEP`'s runs under ``profile`` in the sweep folder
    ``store``: none in a profile without such runs, or before any has run (a fresh clone)."""
    if profile not in CONTRAST_PROFILES:
        return []
    from grok_lightning.sweep.grid import load_sweep

    specs = load_sweep(sweep_path(CONTRAST_SWEEP), profile=profile).expand()
    return [r for r in read_planned(Path(store), specs) if r.get("status") in FINAL_STATUSES]


def unique_runs(records: list[dict]) -> list[dict]:
    """``records`` with each run id once (the first): two stores may hold the same run, and a run
    counts once in a contrast."""
    seen, kept = set(), []
    for r in records:
        run_id = r.get("run_id")
        if run_id is not None and run_id in seen:
            continue
        seen.add(run_id)
        kept.append(r)
    return kept


def _trained_by(profile: str, contrast_profile: str) -> str:
    """What trains a contrast's missing side in ``profile`` (empty where nothing does)."""
    if profile not in CONTRAST_PROFILES:
        return ""
    return (f"python -m reproduce.plan run a7_{contrast_profile} --profile {profile} trains them "
            f"(configs/sweeps/{CONTRAST_SWEEP}, profile {contrast_profile})")


def factor_groups(records: list[dict], where: tuple[str, str], levels: tuple | None) -> tuple | None:
    """``(level_a, peaks_a, level_b, peaks_b)`` of the cell of runs that differ in the factor at
    ``where`` alone and has the most runs at two levels (``levels``, or the highest and lowest
    present); None when no cell has two levels."""
    cells: dict[str, dict] = {}
    for r in records:
        if r.get("status") != "completed":
            continue
        config = {k: v for k, v in r["config"].items() if k not in PLACEMENT}
        section = dict(config.get(where[0]) or {})
        level = section.pop(where[1], None)
        if level is None:
            continue
        key = json.dumps({**config, where[0]: section}, sort_keys=True, default=str)
        peak, _ = peak_entropy_std(r["history"])
        if np.isfinite(peak):
            cells.setdefault(key, {}).setdefault(level, []).append(peak)
    best = None
    for by_level in cells.values():
        present = sorted(by_level, key=lambda v: (isinstance(v, str), v))
        pair = levels if levels is not None else (present[-1], present[0]) if len(present) >= 2 else None
        if pair is None or not all(level in by_level for level in pair) or pair[0] == pair[1]:
            continue
        size = len(by_level[pair[0]]) + len(by_level[pair[1]])
        if best is None or size > best[0]:
            best = (size, pair[0], by_level[pair[0]], pair[1], by_level[pair[1]])
    return None if best is None else best[1:]


def a7_rows(records: list[dict], profile: str, source: str) -> list[dict]:
    """One row per a7 claim from ``records`` (each run once; ``source`` names where they come from)."""
    rows = []
    for claim_id, (factor, where, levels, contrast_profile) in CONTRASTS.items():
        quantity = f"Cohen's d of peak sigma_H between runs that differ in {factor} alone ({claim(claim_id).claim})"
        groups = factor_groups(records, where, levels)
        horizon = max((r["config"].get("max_epochs") or 0 for r in records), default=None)
        if groups is None or min(len(groups[1]), len(groups[3])) < 2:
            found = "" if groups is None else f"{len(groups[1])} + {len(groups[3])} runs"
            why = join_notes(f"no two groups of the runs of {source} differ in {factor} alone"
                             f"{f' ({found})' if found else ''}: needs {claim(claim_id).needs}",
                             _trained_by(profile, contrast_profile))
            rows.append(claim_row(claim_id, quantity, None, profile, 0, not_run=why))
            continue
        level_a, a, level_b, b = groups
        d = cohens_d(a, b)
        rows.append(claim_row(claim_id, quantity, d, profile, len(a) + len(b), ours_ci=list(cohens_d_ci(d, len(a), len(b))),
                              null=0.0, horizon=horizon,
                              note=join_notes(f"runs of {source}, {level_a} ({len(a)}) vs {level_b} ({len(b)})",
                                              f"mean peak {np.mean(a):.4g} vs {np.mean(b):.4g}",
                                              "released reading, maximum over epochs > 100")))
    return rows
