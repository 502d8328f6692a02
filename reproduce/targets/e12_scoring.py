"""E12's scoring: outcomes of every group under every reading, paired contrasts, report rows.

The protocol and why each choice is what it is: docs/decisions.md ("E12 by the paper's protocol").
Paper values come from the claims table (``reproduce.report.claims``); nothing here is typed in.
"""

from __future__ import annotations

import math
import re

import numpy as np

from grok_lightning.stats import MIN_PAIRS_COHEN_D, correct, paired_comparison, paired_d_ci
from grok_lightning.stats.intervals import mean_interval, wilson
from grok_lightning.stats.interventions import E12_OUTCOMES, e12_outcomes, reinitialised_heads, sigma_curve
from grok_lightning.stats.phases import history_curve
from reproduce.report import join_notes, load_claims, row

PAPER = "2605.20441 Fig. 8 (E12)"
#: the paper's contrasts, then the placebo's (beyond the paper)
CONTRASTS = (("B", "A"), ("C", "A"), ("C", "B"), ("P", "A"), ("B", "P"), ("C", "P"))
PAPER_CONTRASTS = ("B-A", "C-A", "C-B")
#: Bonferroni families: the paper's (intervention_stats.json's note) and, the same way, the placebo's
FAMILIES = {"paper": PAPER_CONTRASTS, "placebo": ("P-A", "B-P", "C-P")}
#: the cohort's reading first (docs/sigma_h_readings.md), then the sensitivity variants
VARIANTS = {"headline": {"reading": "sum_layers"}, "released": {"reading": "released"},
            "untouched heads": {"reading": "untouched"}, "first 20 epochs after E skipped": {"skip_epochs": 20},
            "max_layer": {"reading": "max_layer"}, "pooled": {"reading": "pooled"}}
AFTER_EPOCH = 100  # A's argmax is taken over epochs > 100 (the paper skips the initial transient)
#: a paired d's row below MIN_PAIRS_COHEN_D pairs is shown but not scored (docs/decisions.md, "Verdicts")
D_ROW = {"min_n": MIN_PAIRS_COHEN_D,
         "min_n_reason": "the fewest pairs at which Cohen's d (noncentral t on n - 1 df) has a finite variance"}


def _control_facts(record: dict, epoch: int) -> dict:
    """A's own numbers: its peak (at E by construction) under the cohort's reading, its min s_bar
    after epoch 100, its grok epoch, and whether E falls before grokking."""
    history = record["history"]
    epochs, summed = sigma_curve(history, "sum_layers")
    _, s_bar = history_curve(history, "mean_similarity")
    after = (epochs > AFTER_EPOCH) & np.isfinite(summed)
    grok = record.get("grok_epoch")
    before = after & (epochs < grok) if grok is not None else after
    return {"seed": record["config"]["seed"], "wd": record["config"]["wd"], "E": epoch, "grok_epoch": grok,
            "E_before_grok": grok is None or epoch < grok,  # a run that never groks is before it throughout
            "peak_sum_layers": float(summed[after].max()) if after.any() else math.nan,
            "argmax_sum_layers": int(epochs[after][np.argmax(summed[after])]) if after.any() else None,
            "peak_before_grok_sum_layers": float(summed[before].max()) if before.any() else math.nan,
            "min_s_bar": float(np.nanmin(s_bar[epochs > AFTER_EPOCH])) if (epochs > AFTER_EPOCH).any() else math.nan,
            "final_test_acc": record.get("final_test_acc")}


def _replay(records: list[dict], control: dict, peaks: dict) -> list[dict]:
    """R against A on (E, E + its horizon]: every history column both records carry, compared at
    every evaluation both have; identical means no column differs anywhere."""
    checks = []
    for r in records:
        key = (r["config"]["seed"], r["config"]["wd"])
        if key not in control or r.get("status") != "completed":
            continue
        ha, hr = control[key]["history"], r["history"]
        ea, er = np.asarray(ha["epoch"], float), np.asarray(hr["epoch"], float)
        common = np.intersect1d(ea[ea > peaks[key]], er[er > peaks[key]])
        ia, ir = np.searchsorted(ea, common), np.searchsorted(er, common)
        differs = {}
        for name in sorted((set(ha) & set(hr)) - {"epoch"}):
            va, vr = history_curve(ha, name)[1][ia], history_curve(hr, name)[1][ir]
            both = np.isfinite(va) & np.isfinite(vr)
            gap = float(np.max(np.abs(va[both] - vr[both]), initial=0.0))
            if gap > 0 or (np.isfinite(va) != np.isfinite(vr)).any():
                differs[name] = gap
        checks.append({"seed": key[0], "wd": key[1], "E": peaks[key], "epochs_compared": int(len(common)),
                       "columns_differing": differs, "identical": len(common) > 0 and not differs})
    return checks


def paired_test(x: np.ndarray, y: np.ndarray, n_bootstrap: int = 10000) -> dict:
    """``y - x`` over the pairs where both are finite, in ``intervention_stats.json``'s schema: mean
    difference, paired t, Wilcoxon, bootstrap interval, Cohen's d with its exact interval and the t
    interval of the difference; ``{"error", "n"}`` when there are too few pairs."""
    try:
        res = paired_comparison(x, y, n_bootstrap=n_bootstrap, nan_policy="omit").to_dict()
        if res.get("cohen_d") is not None:
            res["cohen_d_ci"] = list(paired_d_ci(res["cohen_d"], res["n"]))
        both = np.isfinite(x) & np.isfinite(y)
        # the t interval scores the row (the bootstrap's, the JSON's schema, is the range of the
        # differences at a few pairs: no 95% coverage there)
        res["ci_95_diff_t"] = mean_interval(y[both] - x[both]).ci if both.sum() >= 2 else None
    except ValueError as err:
        res = {"error": str(err), "n": int((np.isfinite(x) & np.isfinite(y)).sum())}
    return res


def score_pairs(groups: dict[str, list[dict]], peaks: dict, n_bootstrap: int = 10000, window: int | None = None) -> dict:
    """Outcomes per group, variant and pair; every contrast's paired tests and each pair's headline
    outcomes (``per_pair``: group -> ``"seed_lambda"`` -> outcome), JSON-ready."""
    table = {g: {(r["config"]["seed"], r["config"]["wd"]): r for r in recs} for g, recs in groups.items()}
    pairs = sorted(peaks)
    heads = {k: reinitialised_heads(table.get("B", {}).get(k, {})) for k in pairs}
    values: dict = {}
    for g in (g for g in groups if g != "R"):
        values[g] = {}
        for variant, kwargs in VARIANTS.items():
            per_pair = [e12_outcomes(table[g][k], peaks[k], window=window, skip_heads=heads[k], **kwargs)
                        if k in table[g] and (variant != "untouched heads" or heads[k]) else dict.fromkeys(E12_OUTCOMES, math.nan)
                        for k in pairs]
            values[g][variant] = {o: np.array([p[o] for p in per_pair], float) for o in E12_OUTCOMES}
    wds = sorted({k[1] for k in pairs})
    strata = [(f"{w:g}", np.array([k[1] == w for k in pairs])) for w in wds]
    strata += [("pooled", np.ones(len(pairs), bool))] if len(wds) > 1 else []
    tests = []
    for b, a in (c for c in CONTRASTS if c[0] in values and c[1] in values):
        for variant in VARIANTS:
            for outcome in (E12_OUTCOMES if variant == "headline" else ("peak_ent",)):
                for stratum, mask in strata:
                    x, y = values[a][variant][outcome][mask], values[b][variant][outcome][mask]
                    res = paired_test(x, y, n_bootstrap)
                    tests.append({"contrast": f"{b}-{a}", "variant": variant, "stratum": stratum, "outcome": outcome, **res})
    # each family: its three contrasts x the outcomes, Bonferroni (the paper's, per intervention_stats.json's
    # note; the placebo's contrasts are corrected the same way, as their own family)
    for name, contrasts in FAMILIES.items():
        family = [t for t in tests if t["variant"] == "headline" and t["contrast"] in contrasts and t.get("p_value_t") is not None]
        if family:
            reject, p_adj = correct([t["p_value_t"] for t in family], "bonferroni")
            for t, r, p in zip(family, reject, p_adj):
                t["p_bonferroni"], t["reject_bonferroni"], t["family"] = float(p), bool(r), name
    # each pair's headline outcomes, so that a reader can check every contrast by hand
    per_pair = {g: {f"{k[0]}_{k[1]:g}": outcomes for i, k in enumerate(pairs)
                    if (outcomes := {o: float(v[o][i]) for o in E12_OUTCOMES if math.isfinite(v[o][i])})}
                for g, v in ((g, values[g]["headline"]) for g in values)}
    excluded = {g: [r.get("excluded_reason") for r in recs if r["status"] == "excluded"] for g, recs in groups.items()}
    horizon = max((r["config"].get("max_epochs") or 0 for r in groups["A"]), default=0)
    timed = [r for r in groups["A"] if r.get("status") == "completed" and r.get("cpu_time_s") and r.get("final_epoch")]
    rate_a = sum(r["cpu_time_s"] for r in timed) / sum(r["final_epoch"] for r in timed) if timed else None
    return {"pairs": pairs, "horizon": horizon, "cpu_s_per_epoch_A": rate_a, "controls": [_control_facts(table["A"][k], peaks[k]) for k in pairs], "tests": tests,
            "per_pair": per_pair, "excluded": excluded, "replay": _replay(groups.get("R", []), table["A"], peaks),
            "reinitialised_heads": {f"{k[0]}_{k[1]:g}": v for k, v in heads.items() if v},
            "n_runs": {g: len(recs) for g, recs in groups.items()}}


def _mean_ci(values: list[float]) -> tuple[float | None, list | None]:
    """The mean of the finite values and its t interval (:func:`stats.intervals.mean_interval`);
    no interval from one value."""
    x = [v for v in values if v is not None and math.isfinite(v)]
    if len(x) < 2:
        return (float(x[0]), None) if x else (None, None)
    return float(np.mean(x)), mean_interval(x).ci


#: rows the paper reports no number for, shown as context: our placebo P, the outcomes other than
#: peak_ent in each contrast, and control A's min s_bar, grok epoch and grok count at lambda 0.015
UNREPORTED = re.compile(r"e12\.(\w-P|P-\w)\.|e12\.\w-\w\.(min_sim|grok_ep|final_test)\.|"
                        r"e12\.(A_min_sim|A_grok_ep|grok_A|grok_B|grok_C|B-A\.grok_epoch)\.0\.015$")


def scored_row(claim_id: str, quantity: str, ours, profile: str, n, **fields) -> dict:
    """A row against the claim ``claim_id`` of reference/claims.csv, or a context row (no paper
    value, no verdict) for a number the paper does not report (:data:`UNREPORTED`); any other id
    missing from the table is an error (``KeyError``), never a silent context row."""
    from reproduce.report import claim_row

    if (UNREPORTED.match(claim_id) or off_paper_stratum(claim_id)) and claim_id not in load_claims():
        return row(PAPER, quantity, None, ours, profile, n, **fields)
    return claim_row(claim_id, quantity, ours, profile, n, **fields)


#: the lambdas of the paper's E12 strata (a profile may run others: the smoke profile's lambda 0.3)
PAPER_STRATA = (0.015, 0.05)


def off_paper_stratum(claim_id: str) -> bool:
    """Whether ``claim_id`` names a stratum at a lambda the paper did not run (its rows are context).

    >>> off_paper_stratum("e12.A_peak.0.3"), off_paper_stratum("e12.A_peak.0.05"), off_paper_stratum("e12.grok_A")
    (True, False, False)
    """
    found = re.search(r"\.(\d+(?:\.\d+)?)$", claim_id)
    return found is not None and float(found[1]) not in PAPER_STRATA


#: claims pooled over both lambdas whose ids carry no stratum
UNSUFFIXED = ("e12.grok_A", "e12.grok_B", "e12.grok_C", "e12.B-A.grok_epoch")
#: config keys that do not change what a control run computes up to its grok epoch
HORIZON_KEYS = ("max_epochs", "run_id", "name", "profile")


def claim_id(base: str, stratum: str) -> str:
    """The claim of ``base`` at a stratum: ``e12.A_peak.0.05``, ``e12.A_peak.pooled``, but
    ``e12.grok_A`` for the pooled grok count (the table's ids).

    >>> claim_id("e12.grok_A", "0.05"), claim_id("e12.grok_A", "pooled"), claim_id("e12.A_peak", "pooled")
    ('e12.grok_A.0.05', 'e12.grok_A', 'e12.A_peak.pooled')
    """
    return base if stratum == "pooled" and base in UNSUFFIXED else f"{base}.{stratum}"


def same_model_runs(control: list[dict], others: list[dict], source: str) -> dict:
    """Runs of another target on A's model, data and precision at A's lambdas (e.g. Fig. 5's bin at
    lambda 0.05): a run with A's whole configuration but the horizon is A's own run (training does
    not depend on the horizon before it ends), so pooling adds only the others' new seeds.
    ``{"added": [records], "same": [(seed, wd)], "grok_differs": [(seed, wd)], "source": source}``,
    for the grok rows (a grok epoch is a first crossing: the same at any horizon past it)."""
    strip = lambda r: {k: v for k, v in r["config"].items() if k not in HORIZON_KEYS and k != "seed"}
    mine = {(r["config"]["seed"], r["config"]["wd"]): r for r in control}
    shapes = [strip(r) for r in control]
    added, same, differs = [], [], []
    for r in others:
        if r.get("status") != "completed" or strip(r) not in shapes:
            continue
        key = (r["config"]["seed"], r["config"]["wd"])
        if key not in mine:
            added.append(r)
            continue
        same.append(key)
        if r.get("grok_epoch") != mine[key].get("grok_epoch"):
            differs.append(key)
    return {"added": added, "same": sorted(same), "grok_differs": sorted(differs), "source": source}


def e12_rows(scored: dict, profile: str, planned: dict[str, int], where: str, pooled_runs: dict | None = None) -> list[dict]:
    """Report rows: control A against the paper's A at each lambda and, where the runs span more
    than one, over both (the paper's pooled claims; else those rows say what is missing), then
    every contrast, the interventions' grok counts and the determinism check. ``pooled_runs``:
    :func:`same_model_runs` of another target, pooled into A's grok rows."""
    controls = scored["controls"]
    rows: list[dict] = []
    smoke = None if profile != "smoke" else "the smoke-sized model at lambda 0.3: a pipeline check, not the paper's design"
    wds = sorted({c["wd"] for c in controls})
    strata = [(f"{wd:g}", [c for c in controls if c["wd"] == wd]) for wd in wds]
    strata += [("pooled", controls)] if len(wds) > 1 else []
    for stratum, mine in strata:
        rows += _control_rows(scored, mine, stratum, profile, planned, smoke, pooled_runs)
        rows += _contrast_rows(scored, profile, planned, stratum, where, smoke)
        rows += _group_grok_rows(scored, mine, stratum, profile, smoke)
    if len(wds) == 1:
        rows += _unpooled_rows(scored, profile, wds[0])
    for check in scored["replay"]:
        differing = check["columns_differing"]
        rows.append(row(PAPER, "E12 determinism: A resumed at E with its own order repeats A (largest gap over every "
                        "recorded column)", None, max(differing.values(), default=0.0), profile, 1, kind="identity",
                        expected=0.0, margin=0.0,
                        note=f"seed {check['seed']}, {check['epochs_compared']} evaluations after E = {check['E']}; "
                             f"columns that differ: {sorted(differing) or 'none'}"))
    return rows


def _control_rows(scored: dict, mine: list[dict], stratum: str, profile: str, planned: dict, smoke: str | None,
                  pooled_runs: dict | None) -> list[dict]:
    """A's peak, min s_bar, grok epoch and grok count at one stratum (or pooled over all)."""
    rows = []
    done = f"{len(mine)} of {planned.get('A', len(mine))} planned control runs finished" if stratum != "pooled" else \
        f"{len(mine)} control runs over lambda {sorted({c['wd'] for c in mine})}"
    before = sum(c["E_before_grok"] for c in mine)
    grokked = [c["grok_epoch"] for c in mine if c["grok_epoch"] is not None]
    n_runs, horizon = len(mine), scored["horizon"]
    pooled_note = ""
    if pooled_runs and stratum != "pooled":
        added = [r for r in pooled_runs["added"] if f"{r['config']['wd']:g}" == stratum]
        same = [k[0] for k in pooled_runs["same"] if f"{k[1]:g}" == stratum]
        grokked += [r["grok_epoch"] for r in added if r.get("grok_epoch") is not None]
        n_runs += len(added)
        horizon = min([horizon] + [r["config"]["max_epochs"] for r in added])
        differs = [k[0] for k in pooled_runs["grok_differs"] if f"{k[1]:g}" == stratum]
        pooled_note = (f"pooled with {pooled_runs['source']}'s runs of this model at this lambda: seeds {same} there are "
                       "A's own runs (the same configuration but the horizon; "
                       + (f"grok epochs differ on seeds {differs}" if differs else "the same grok epochs")
                       + f"), {len(added)} added")
    context = join_notes(done, f"seeds {[c['seed'] for c in mine]}", f"E per seed {[c['E'] for c in mine]}",
                         f"grok epochs {[c['grok_epoch'] for c in mine]}",
                         f"E before A's grokking in {before} of {len(mine)}", f"horizon {scored['horizon']:,} epochs "
                         "(the paper's E12: 10,000)")
    # a grok epoch is a first crossing: when every run grokked before our horizon, the grok rows
    # are final at any longer one; peaks and minima over (E, end] are not
    final = (f"every run grokked by epoch {max(grokked):,}, before our {horizon:,}"
             if grokked and len(grokked) == n_runs else "")
    for quantity, base, values, horizon_final, note in (
            ("E12 control A: peak sigma_H summed over layers (the cohort's reading)", "e12.A_peak",
             [c["peak_sum_layers"] for c in mine], "", context),
            ("E12 control A: min s_bar after epoch 100", "e12.A_min_sim", [c["min_s_bar"] for c in mine], "", context),
            ("E12 control A: grok epoch (mean of the grokked runs)", "e12.A_grok_ep", grokked, final,
             join_notes(context, pooled_note))):
        mean, ci = _mean_ci(values)
        rows.append(scored_row(claim_id(base, stratum), f"{quantity} at lambda {stratum}", mean, profile, len(values),
                                ours_ci=ci, invalid=smoke, note=note, horizon=horizon, horizon_final=horizon_final))
        if base == "e12.A_peak":
            # the paper places E "typically 1,000-2,000, before grokking": A's maximum before its
            # grok epoch is the other reading of "peak" (sensitivity, never counted)
            peaks_before = [c["peak_before_grok_sum_layers"] for c in mine]
            mean_b, ci_b = _mean_ci(peaks_before)
            rows.append(scored_row(claim_id(base, stratum), f"sensitivity (maximum before A's grok epoch): {quantity} "
                                    f"at lambda {stratum}", mean_b, profile, len(peaks_before), ours_ci=ci_b,
                                    invalid=smoke, horizon=scored["horizon"], sensitivity="A's maximum before its grok epoch",
                                    note=f"per seed {[round(v, 3) for v in peaks_before]}"))
    lo, hi = wilson(len(grokked), n_runs).ci
    rows.append(scored_row(claim_id("e12.grok_A", stratum), f"E12 control A: grokked at lambda {stratum}",
                            len(grokked) / n_runs, profile, n_runs, ours_ci=[lo, hi], invalid=smoke, horizon=horizon,
                            horizon_final=final, note=join_notes(f"{len(grokked)}/{n_runs}, Wilson 95% interval",
                                                                 pooled_note)))
    return rows


def _group_grok_rows(scored: dict, mine: list[dict], stratum: str, profile: str, smoke: str | None) -> list[dict]:
    """B's and C's grok counts and B - A's grok-epoch difference. Where E follows A's grokking in
    most seeds, a group's grok epoch there is A's by construction: an invalid test. B's rows are
    sensitivity rows: the pre-grokking arm's B_pre scores those claims (docs/decisions.md)."""
    keys = {f"{c['seed']}_{c['wd']:g}" for c in mine}
    after = sum(not c["E_before_grok"] for c in mine)
    invalid = smoke or (f"E follows A's grokking in {after} of {len(mine)} seeds: a group's grok epoch there is A's "
                        "by construction" if 2 * after > len(mine) else None)
    b_sensitivity = "group B at E (the paper's rule); B_pre, before grokking, scores this claim"
    rows = []
    for group in ("B", "C"):
        runs = [v for k, v in scored["per_pair"].get(group, {}).items() if k in keys]
        if not runs:
            continue
        k = sum("grok_ep" in v for v in runs)
        grok_final = f"every group {group} run grokked before our {scored['horizon']:,}" if k == len(runs) else ""
        lo, hi = wilson(k, len(runs)).ci
        rows.append(scored_row(claim_id(f"e12.grok_{group}", stratum), f"E12 group {group}: grokked at lambda {stratum}",
                                k / len(runs), profile, len(runs), ours_ci=[lo, hi], invalid=invalid,
                                horizon=scored["horizon"], horizon_final=grok_final,
                                note=f"{k}/{len(runs)}, Wilson 95% interval",
                                **({"sensitivity": b_sensitivity} if group == "B" else {})))
    test = next((t for t in scored["tests"] if (t["contrast"], t["variant"], t["outcome"], t["stratum"])
                 == ("B-A", "headline", "grok_ep", stratum)), {})
    if test.get("mean_diff") is not None:
        rows.append(scored_row(claim_id("e12.B-A.grok_epoch", stratum), f"E12 B-A: mean difference of the grok epoch at "
                                f"lambda {stratum}", test["mean_diff"], profile, test["n"], ours_ci=test.get("ci_95_diff_t"),
                                null=0.0, invalid=invalid, sensitivity=b_sensitivity, horizon=scored["horizon"],
                                note=f"p_t {short_number(test.get('p_value_t'))}"))
    return rows


def _unpooled_rows(scored: dict, profile: str, wd: float) -> list[dict]:
    """The paper's claims pooled over lambda 0.015 and 0.05, where these runs have one lambda: not
    run here, with what the other stratum's control group alone would cost."""
    rate, n = scored.get("cpu_s_per_epoch_A"), len(scored["controls"])
    cost = (f"; its control group alone ({n} seeds x 10,000 epochs) is about {n * 10000 * rate / 3600:.0f} CPU-h at "
            f"the {rate:.2f} CPU-s per epoch measured in this A" if rate else "")
    why = f"the paper pools lambda 0.015 and 0.05; these runs have lambda {wd:g} only{cost}"
    pooled = [claim_id(base, "pooled") for base in ("e12.A_peak", "e12.A_min_sim", "e12.A_grok_ep", *UNSUFFIXED)]
    pooled += [f"e12.{c}.{k}.pooled" for c in PAPER_CONTRASTS for k in ("d", "diff", "p")]
    claims = load_claims()
    return [scored_row(c, f"E12 over lambda 0.015 and 0.05 (the paper's pooled claim): {claims[c].claim}", None, profile,
                        0, not_run=why) for c in pooled if c in claims]


def _contrast_rows(scored: dict, profile: str, planned: dict, stratum: str, where: str, invalid: str | None) -> list[dict]:
    rows = []
    runs = scored["n_runs"]
    for contrast in ("-".join(c) for c in CONTRASTS):
        missing = [g for g in contrast.split("-") if runs.get(g, 0) < planned.get(g, 0)]
        lacking = ", ".join(f"group {g} has {runs.get(g, 0)} of {planned.get(g)} runs" for g in missing)
        for variant in VARIANTS:
            if variant != "headline" and contrast not in ("B-A", "B-P", "C-A", "C-P"):
                continue
            sensitivity = {} if variant == "headline" else {"sensitivity": variant}
            label = "" if variant == "headline" else f"sensitivity ({variant}): "
            for outcome in (E12_OUTCOMES if variant == "headline" else ("peak_ent",)):
                test = next((t for t in scored["tests"] if (t["contrast"], t["variant"], t["outcome"], t["stratum"])
                             == (contrast, variant, outcome, stratum)), {})
                base = f"e12.{contrast}" if outcome == "peak_ent" else f"e12.{contrast}.{outcome}"
                quantity = f"{label}E12 {contrast}: {{}} of {outcome} on {where} at lambda {stratum}"
                if test.get("cohen_d") is None:
                    why = f"not run here: {lacking}" if missing else test.get("error", "no complete pairs")
                    rows.append(scored_row(f"{base}.d.{stratum}", quantity.format("Cohen's d"), None, profile, 0,
                                            note=why, invalid=invalid, **sensitivity))
                    continue
                ci = test.get("ci_95_diff") or [None, None]
                note = join_notes(f"mean {contrast} {short_number(test.get('mean_diff'))} (bootstrap [{short_number(ci[0])}, {short_number(ci[1])}]) "
                                  f"({contrast.split('-')[1]} {short_number(test.get('mean_a'))})",
                                  f"p_t {short_number(test.get('p_value_t'))}", f"Wilcoxon p {short_number(test.get('wilcoxon_p'))}",
                                  f"Bonferroni {short_number(test.get('p_bonferroni'))}" if "p_bonferroni" in test else "",
                                  _dropped(test.get("n_dropped")),
                                  "the placebo is beyond the paper" if "P" in contrast else "",
                                  f"missing runs: {lacking}" if missing else "")
                common = dict(profile=profile, n=test["n"], invalid=invalid, horizon=scored["horizon"], **sensitivity)
                rows.append(scored_row(f"{base}.d.{stratum}", quantity.format("Cohen's d"), test["cohen_d"],
                                        ours_ci=test.get("cohen_d_ci"), null=0.0, note=note, **D_ROW, **common))
                if variant == "headline" and outcome == "peak_ent":
                    rows.append(scored_row(f"{base}.diff.{stratum}", quantity.format("mean difference"),
                                            test.get("mean_diff"), ours_ci=test.get("ci_95_diff_t"), null=0.0,
                                            **common))
                    paper_diff = load_claims().get(f"{base}.diff.{stratum}")
                    paper_sign = None if paper_diff is None else paper_diff.value > 0
                    rows.append(scored_row(f"{base}.p.{stratum}", quantity.format("paired t test p"),
                                            test.get("p_value_t"), null=0.0,
                                            same_sign=paper_sign is None or (test.get("mean_diff", 0) > 0) == paper_sign,
                                            **common))
    return rows


def pre_grok_rows(scored: dict, profile: str, planned: int, where: str) -> list[dict]:
    """Sensitivity rows of Bg (B started at A's argmax before grokking) against A on the same
    seeds: Cohen's d and the mean difference of peak_ent, headline reading, on (E before
    grokking, end]. ``scored``: :func:`score_pairs` of ``{"A": ..., "B": Bg}`` with the
    pre-grokking argmax as E."""
    rows, runs = [], scored["n_runs"].get("B", 0)
    label = f"B at A's argmax before grokking, {planned} seeds"
    for stratum in sorted({f"{k[1]:g}" for k in scored["pairs"]}):
        test = next((t for t in scored["tests"] if (t["contrast"], t["variant"], t["outcome"], t["stratum"])
                     == ("B-A", "headline", "peak_ent", stratum)), {})
        quantity = f"sensitivity ({label}): E12 B-A: {{}} of peak_ent on {where} at lambda {stratum}"
        epochs = [c["E"] for c in scored["controls"] if f"{c['wd']:g}" == stratum]
        facts = f"E before grokking per seed {epochs}"
        common = dict(profile=profile, sensitivity=label, horizon=scored["horizon"])
        if test.get("cohen_d") is None:
            why = f"not run here: group Bg has {runs} of {planned} runs" if runs < planned else test.get("error", "no pairs")
            rows.append(scored_row(f"e12.B-A.d.{stratum}", quantity.format("Cohen's d"), None, n=0,
                                    note=join_notes(why, facts), **common))
            continue
        ci = test.get("ci_95_diff") or [None, None]
        note = join_notes(facts, f"mean B-A {short_number(test.get('mean_diff'))} [{short_number(ci[0])}, {short_number(ci[1])}]",
                          f"p_t {short_number(test.get('p_value_t'))}", f"missing runs: Bg has {runs} of {planned}" if runs < planned else "")
        rows.append(scored_row(f"e12.B-A.d.{stratum}", quantity.format("Cohen's d"), test["cohen_d"], n=test["n"],
                                ours_ci=test.get("cohen_d_ci"), null=0.0, note=note, **D_ROW, **common))
        rows.append(scored_row(f"e12.B-A.diff.{stratum}", quantity.format("mean difference"), test.get("mean_diff"),
                                n=test["n"], ours_ci=test.get("ci_95_diff_t"), null=0.0, **common))
    return rows


def short_number(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


def _dropped(n: int | None) -> str:
    """Pairs left out because one side has no run for that seed."""
    return f"{n} pair{'s' if n != 1 else ''} dropped" if n else ""
