"""E12 before grokking, with its own placebo: B_pre and P_pre against A from A's pre-grokking argmax.

The protocol, fixed before any of its runs was scored: docs/decisions.md ("E12 before grokking,
with its own placebo"). On every seed of the control group A, both groups start from A's
``peak_before_grok.ckpt`` at E_pre (A's argmax of sigma_H before its grok epoch): B_pre
re-initialises 2 of 8 heads per layer (drawn from the run's seed), P_pre only changes the minibatch
order. Each is scored on the summed sigma_H over (E_pre, end], with the first k = 1, 5, 10
evaluations after E_pre skipped as sensitivity rows, and on its grok epoch. A group with missing
runs is scored on the pairs present; one without runs says what it would cost.
"""

from __future__ import annotations

import math

import numpy as np

from grok_lightning.stats import correct
from grok_lightning.stats.interventions import e12_outcomes
from reproduce.report import count_row, join_notes, load_claims, row
from reproduce.targets.e12_scoring import D_ROW, PAPER, claim_id, paired_test, scored_row, short_number

#: the arm's groups, in the order they are trained
GROUPS = ("B_pre", "P_pre")
#: (group, baseline): the re-initialisation and the placebo against A, and one against the other
CONTRASTS = (("B_pre", "A"), ("P_pre", "A"), ("B_pre", "P_pre"))
#: evaluations after E_pre left out of the window: 0 is the row reported, the others sensitivity rows
SKIPPED_EVALUATIONS = (0, 1, 5, 10)
#: the resumed groups whose records give the measured cost of an epoch
COST_GROUPS = ("B", "C", "P")
SENSITIVITY = "B at A's argmax before grokking, heads drawn per seed, every seed"

__all__ = ["CONTRASTS", "GROUPS", "SKIPPED_EVALUATIONS", "measured_rate", "missing_cost", "pre_arm_rows",
           "score_pre_arm"]


def measured_rate(groups: dict[str, list[dict]]) -> dict:
    """CPU-s per trained epoch over the completed runs of :data:`COST_GROUPS` (runs started from
    A's checkpoints: their ``cpu_time_s`` counts only the epochs they trained)."""
    cpu = epochs = 0.0
    runs = 0
    for group in COST_GROUPS:
        for r in groups.get(group, []):
            start = (r.get("started_from") or {}).get("epoch")
            if r.get("status") == "completed" and r.get("cpu_time_s") and start is not None:
                cpu, epochs, runs = cpu + r["cpu_time_s"], epochs + r["final_epoch"] - start, runs + 1
    return {"cpu_s_per_epoch": cpu / epochs if epochs else None, "runs": runs, "groups": list(COST_GROUPS)}


def missing_cost(group: str, records: list[dict], e_pre: dict, horizon: int, rate: dict) -> dict:
    """The runs of ``group`` without a completed record: how many, their epochs (E_pre to the
    horizon) and CPU-hours at the measured rate."""
    done = {(r["config"]["seed"], r["config"]["wd"]) for r in records if r.get("status") == "completed"}
    left = sorted(k for k in e_pre if k not in done)
    epochs = sum(horizon - e_pre[k] for k in left)
    per_epoch = rate.get("cpu_s_per_epoch")
    hours = None if per_epoch is None else epochs * per_epoch / 3600
    text = (f"group {group} has {len(e_pre) - len(left)} of {len(e_pre)} runs; the {len(left)} missing are {epochs:,} "
            "epochs"
            + ("" if hours is None else f", about {hours:.1f} CPU-h at the {per_epoch:.2f} CPU-s per epoch measured "
                                       f"in groups {', '.join(rate['groups'])} ({rate['runs']} runs)"))
    return {"runs_missing": len(left), "seeds_missing": [k[0] for k in left], "epochs": epochs, "cpu_h": hours,
            "text": text}


def score_pre_arm(groups: dict[str, list[dict]], e_pre: dict, n_bootstrap: int = 10000) -> dict:
    """Outcomes per group, pair and skip; every contrast's paired tests (JSON-ready).
    ``groups``: A, B_pre and P_pre records; ``e_pre``: ``(seed, wd) -> E_pre``."""
    table = {g: {(r["config"]["seed"], r["config"]["wd"]): r for r in recs} for g, recs in groups.items()}
    pairs = sorted(e_pre)
    nan = dict.fromkeys(("peak_ent", "grok_ep"), math.nan)
    values = {g: {k: np.array([[e12_outcomes(table[g][p], e_pre[p], skip_evaluations=k)[o] if p in table[g] else nan[o]
                                for p in pairs] for o in ("peak_ent", "grok_ep")]) for k in SKIPPED_EVALUATIONS}
              for g in ("A", *GROUPS)}
    strata = {f"{w:g}": np.array([p[1] == w for p in pairs]) for w in sorted({p[1] for p in pairs})}
    if len(strata) > 1:  # the paper's claims pooled over both lambdas
        strata["pooled"] = np.ones(len(pairs), bool)
    tests = []
    for b, a in CONTRASTS:
        for k in SKIPPED_EVALUATIONS:
            for index, outcome in enumerate(("peak_ent", "grok_ep")):
                if outcome == "grok_ep" and k:
                    continue  # a grok epoch does not depend on the window
                for stratum, mask in strata.items():
                    res = paired_test(values[a][k][index][mask], values[b][k][index][mask], n_bootstrap)
                    tests.append({"contrast": f"{b}-{a}", "skip": k, "outcome": outcome, "stratum": stratum, **res})
    for stratum in strata:  # Bonferroni over the arm's family: 3 contrasts x (peak, grok epoch), k = 0
        family = [t for t in tests if t["skip"] == 0 and t["stratum"] == stratum and t.get("p_value_t") is not None]
        if family:
            reject, p_adj = correct([t["p_value_t"] for t in family], "bonferroni")
            for t, r, p in zip(family, reject, p_adj):
                t["p_bonferroni"], t["reject_bonferroni"] = float(p), bool(r)
    per_pair = {g: {f"{p[0]}_{p[1]:g}": {"E_pre": e_pre[p], "peak_ent": _num(values[g][0][0][i]),
                                          "grok_ep": _num(values[g][0][1][i])}
                    for i, p in enumerate(pairs) if p in table[g]} for g in values}
    grokked = {g: {s: [table[g][p].get("grok_epoch") is not None for p, inside in zip(pairs, mask) if inside
                       and p in table[g] and table[g][p].get("status") == "completed"] for s, mask in strata.items()}
               for g in values}
    horizon = max((r["config"].get("max_epochs") or 0 for r in groups["A"]), default=0)
    return {"pairs": [list(p) for p in pairs], "E_pre": {f"{p[0]}_{p[1]:g}": e for p, e in e_pre.items()},
            "horizon": horizon, "tests": tests, "per_pair": per_pair, "grokked": grokked,
            "n_runs": {g: len(recs) for g, recs in groups.items()}}


def pre_arm_rows(scored: dict, profile: str, missing: dict[str, dict]) -> list[dict]:
    """Report rows of the arm (docs/decisions.md says which count): per stratum, the peak contrasts at
    every skip, the grok-epoch shifts, and B_pre's grok count. ``missing``: :func:`missing_cost` of
    each group."""
    rows: list[dict] = []
    lacking = {g: m["text"] for g, m in missing.items() if m["runs_missing"]}
    for stratum in sorted(scored["grokked"]["A"]):
        for b, a in CONTRASTS:
            absent = [lacking[g] for g in (b, a) if g in lacking]
            for k in SKIPPED_EVALUATIONS:
                rows += _peak_rows(scored, profile, f"{b}-{a}", k, stratum, absent)
            rows.append(_grok_shift_row(scored, profile, f"{b}-{a}", stratum, absent))
        rows.append(_grok_count_row(scored, profile, stratum, lacking.get("B_pre")))
    return rows


def _grok_count_row(scored: dict, profile: str, stratum: str, lacking: str | None) -> dict:
    """B_pre's grokked runs (the paper's B grok count at this lambda: only a group acting before
    grokking can stop a run from grokking)."""
    grok = scored["grokked"]["B_pre"][stratum]
    quantity = f"E12 B_pre (B before grokking): grokked at lambda {stratum}"
    note = _missing_note([lacking] if lacking else [])
    if not grok:
        fields = {"not_run": lacking or "no B_pre run"}
    else:
        fields = {"horizon": scored["horizon"],
                  "horizon_final": "every B_pre run grokked before our horizon" if all(grok) else ""}
    if claim_id("e12.grok_B", stratum) in load_claims():
        return count_row(claim_id("e12.grok_B", stratum), quantity, sum(grok), len(grok), profile, note=note, **fields)
    return row(PAPER, quantity, None, sum(grok) / len(grok) if grok else None, profile, len(grok), note=note, **fields)


def _missing_note(absent: list[str]) -> str:
    return join_notes(*(f"missing runs: {text}" for text in absent))


def _test(scored: dict, contrast: str, k: int, outcome: str, stratum: str) -> dict:
    return next((t for t in scored["tests"] if (t["contrast"], t["skip"], t["outcome"], t["stratum"])
                 == (contrast, k, outcome, stratum)), {})


def _peak_rows(scored: dict, profile: str, contrast: str, k: int, stratum: str, absent: list[str]) -> list[dict]:
    """Cohen's d and the mean difference (and, at k = 0, the paired t p) of one contrast and skip."""
    test = _test(scored, contrast, k, "peak_ent", stratum)
    skipped = f"first {k} evaluation{'s' if k > 1 else ''} after E_pre skipped" if k else ""
    label = f"sensitivity ({skipped}): " if k else ""
    quantity = f"{label}E12 {contrast}: {{}} of peak sigma_H (summed over layers) on (E_pre, end of run] at lambda {stratum}"
    scores_claim = contrast == "B_pre-A"
    sensitivity = {"sensitivity": SENSITIVITY + (f", {skipped}" if k else "")} if scores_claim else (
        {"sensitivity": skipped} if k else {})

    def make(kind: str, value, **fields):
        text = quantity.format({"d": "Cohen's d", "diff": "mean difference", "p": "paired t test p"}[kind])
        if scores_claim:
            return scored_row(f"e12.B-A.{kind}.{stratum}", text, value, profile, fields.pop("n"), **sensitivity, **fields)
        return row(PAPER, text, None, value, profile, fields.pop("n"), **sensitivity, **fields)

    if test.get("cohen_d") is None:
        why = "; ".join(absent) if absent else test.get("error", "no complete pairs")
        return [make("d", None, n=0, note=why, **({"not_run": why} if absent else {}))]
    ci = test.get("ci_95_diff") or [None, None]
    note = join_notes(f"mean {contrast} {short_number(test.get('mean_diff'))} (bootstrap [{short_number(ci[0])}, {short_number(ci[1])}]) "
                      f"({contrast.split('-')[1]} {short_number(test.get('mean_a'))})", f"p_t {short_number(test.get('p_value_t'))}",
                      f"Wilcoxon p {short_number(test.get('wilcoxon_p'))}",
                      f"Bonferroni {short_number(test.get('p_bonferroni'))}" if "p_bonferroni" in test else "",
                      "beyond the paper" if "P_pre" in contrast else "", _missing_note(absent))
    common = dict(n=test["n"], horizon=scored["horizon"], null=0.0)
    rows = [make("d", test["cohen_d"], ours_ci=test.get("cohen_d_ci"), note=note, **D_ROW, **common),
            make("diff", test.get("mean_diff"), ours_ci=test.get("ci_95_diff_t"), **common)]
    if not k:
        rows.append(make("p", test.get("p_value_t"), **common))
    return rows


def _grok_shift_row(scored: dict, profile: str, contrast: str, stratum: str, absent: list[str]) -> dict:
    """The mean grok-epoch difference of one contrast; B_pre - A scores the paper's B - A."""
    test = _test(scored, contrast, 0, "grok_ep", stratum)
    quantity = f"E12 {contrast}: mean difference of the grok epoch at lambda {stratum}"
    claimed = claim_id("e12.B-A.grok_epoch", stratum) if contrast == "B_pre-A" else None
    b, a = contrast.split("-")
    grok_b, grok_a = scored["grokked"][b][stratum], scored["grokked"][a][stratum]
    final = "every run of both groups grokked before our horizon" if grok_a and grok_b and all(grok_a + grok_b) else ""
    if test.get("mean_diff") is None or not math.isfinite(test.get("mean_diff", math.nan)):
        why = "; ".join(absent) if absent else test.get("error", "no complete pairs")
        fields = dict(note=why, **({"not_run": why} if absent else {}))
        return (scored_row(claimed, quantity, None, profile, 0, **fields) if claimed
                else row(PAPER, quantity, None, None, profile, 0, **fields))
    note = join_notes(f"{b} {short_number(test.get('mean_b'))}, {a} {short_number(test.get('mean_a'))}", f"p_t {short_number(test.get('p_value_t'))}",
                      f"Cohen's d {short_number(test.get('cohen_d'))}",
                      f"Bonferroni {short_number(test.get('p_bonferroni'))}" if "p_bonferroni" in test else "",
                      "E_pre precedes A's grok epoch on every seed (by construction)", _missing_note(absent))
    fields = dict(ours_ci=test.get("ci_95_diff_t"), null=0.0, note=note, horizon=scored["horizon"], horizon_final=final)
    if claimed:
        return scored_row(claimed, quantity, test["mean_diff"], profile, test["n"], **fields)
    return row(PAPER, quantity, None, test["mean_diff"], profile, test["n"], **fields)


def _num(x) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None

