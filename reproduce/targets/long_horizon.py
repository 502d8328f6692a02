"""Long-horizon targets of arXiv 2605.20441: Fig. 3 (five-stage trajectory), Fig. 6 + Table 3
(PR_norm over checkpoints, the C1 identity), Fig. 7 (ESD alpha) and the E8 retention table.

    python -m reproduce.targets.long_horizon --profile smoke|medium|paper --out reproduction [--only fig3|fig6|fig7|e8]
        [--pr-construction examples|heads|coordinates|uncentred|output_examples|...]

One sweep (configs/sweeps/long_horizon.yaml, into ``<out>/long_horizon/sweep``) with CheckpointSchedule
and RetentionMonitor attached; then, post hoc and without training, the saved ``weights/epoch_*.pt``
are rebuilt into the model and measured on the run's test split (reproduce/targets/weight_analysis.py). Writes
into ``<out>/long_horizon/``: fig3_five_stage.png, fig6_pr_norm.png, fig7_esd_alpha.png,
checkpoints.csv (one row per run and checkpoint), retention.csv, summary.json, rows.json, NOTES.md.
``--only`` (repeatable) runs some parts and merges their rows into the existing rows.json.
``--pr-construction`` names the head covariance behind PR_norm (default ``output_examples``, the one
nearest the paper's Table 3; docs/decisions.md "PR_norm"); the ``per_example`` ones have no spectrum per
layer, hence no Table 3, and are not offered here.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

from grok_lightning.metrics.participation import DIAGNOSTICS_PR_CONSTRUCTION, PR_CONSTRUCTIONS
from grok_lightning.plots.long_horizon import figure_esd_alpha, figure_five_stage, figure_pr_norm
from grok_lightning.records import rows, write_json_atomic
from grok_lightning.stats.spectra import TABLE3_PHASES, pr_norm_checkpoint_table
from reproduce.report import claim, claim_row, load_claims, row
from reproduce.targets.common import (
    REPO,
    SWEEPS,
    caption,
    cli,
    describe,
    median_ci,
    parse_args,
    smoke_scope,
    sweep_records,
    sweep_summary,
)
from reproduce.targets.weight_analysis import analyse_checkpoint, checkpoint_files, eval_split, run_folder

PAPER = "2605.20441"
PARTS = ("fig3", "fig6", "fig7", "e8")
#: constructions with one covariance spectrum per layer (a Table 3 row each)
TABLE3_CONSTRUCTIONS = tuple(c for c in PR_CONSTRUCTIONS if not c.endswith("per_example"))
SWEEP = "long_horizon.yaml"  # under configs/sweeps/; the rLLC target reads the same runs
LEAD_SEED, LEAD_WD = 42, 1.0
#: the paper's stage bands (PAPER_WD_REGIMES.md section 5): Fig. 3 read off the figure, Fig. 6/7 as labelled
FIG3_BANDS = {"P1": (100, 200), "P2": (1000, 2500), "P3": (4500, 5500), "P4": (10000, 11000), "P5": (15000, 20000)}
FIG67_BANDS = {"P1": (100, 500), "P2": (1000, 3000), "P3": (5000, 7500), "P4": (10000, 12500), "P5": (15000, 20000)}
#: the paper's values (reference/claims.csv): seed 42 at lambda 1 over 20,000 epochs, E8's retention
PAPER_FIG3 = {"final_test_acc": claim("fig3.final_test").value, "sigma_peak": claim("fig3.sigma_peak").value,
              "sigma_peak_epoch": 10500}
PAPER_E8 = {float(c.id.removeprefix("e8.retained_")): c.count[0] for c in load_claims().values()
            if c.id.startswith("e8.retained_")}  # retained of 5 seeds at 20,000 epochs
PAPER_FIG6 = sorted((int(c.id.removeprefix("fig6.pr_norm_")), c.value) for c in load_claims().values()
                    if c.id.removeprefix("fig6.pr_norm_").isdigit())
PAPER_FIG6_P2_P4 = ((2500, 12500), (claim("fig6.pr_norm_p2_p4_min").value, claim("fig6.pr_norm_p2_p4_max").value))
PAPER_FIG7 = sorted((int(c.id.removeprefix("fig7.alpha_")), c.value) for c in load_claims().values()
                    if c.id.removeprefix("fig7.alpha_").isdigit())
PAPER_FIG7_PLATEAU = ((1000, 17500), (claim("fig7.alpha_plateau_lo").value, claim("fig7.alpha_plateau_hi").value))
#: the paper's Table 3 / C1 check as published (reference/, CC-BY-4.0, L. Verma)
C1_JSON = REPO / "reference" / "c1_empirical_validation.json"


def paper_table3() -> tuple[list[dict], float, str]:
    """(rows, max |PR_norm - C1|, source) of the paper's Table 3 / C1 check."""
    data = json.loads(C1_JSON.read_text())
    return (data["cv_trajectory_canonical_s42"], data["identity_error_bias_corrected"]["PR_norm_max_err"],
            "c1_empirical_validation.json (CC-BY-4.0, L. Verma)")


def pick_lead(records: list[dict]) -> tuple[dict, list[dict]]:
    """The lead run (seed 42, else the first seed in sweep order, at the lambda closest to 1) and the
    other seeds at that lambda (Fig. 3's underlay)."""
    wd = min({r["config"]["wd"] for r in records}, key=lambda w: abs(math.log(w / LEAD_WD)) if w > 0 else math.inf)
    same = [r for r in records if r["config"]["wd"] == wd]
    lead = next((r for r in same if r["config"]["seed"] == LEAD_SEED), same[0])
    return lead, [r for r in same if r is not lead]


def checkpoint_analysis(records: list[dict], runs_root: Path, lead: dict,
                        pr_construction: str = DIAGNOSTICS_PR_CONSTRUCTION) -> tuple[list[dict], list[dict], dict]:
    """Every saved checkpoint of every run, measured: ``(series for the plots, CSV rows, tables)``;
    ``tables[run_id]`` is that run's ``pr_norm_checkpoint_table`` under ``pr_construction``."""
    series, csv_rows, tables = [], [], {}
    for record in records:
        name, points = measured_points(record, runs_root, pr_construction)
        if not points:
            continue
        eig = {p["epoch"]: p["eigenvalues"] for p in points if p["eigenvalues"] is not None}
        table = pr_norm_checkpoint_table(eig) if eig else {"rows": [], "table": []}
        tables[record["run_id"]] = table
        by_epoch = {t["epoch"]: t for t in table["table"]}
        layers = {e: [r for r in table["rows"] if r["epoch"] == e and r["valid"]] for e in by_epoch}
        c = record["config"]
        s = {"name": name, "wd": c["wd"], "seed": c["seed"], "lead": record is lead, "epoch": [],
             "pr_norm": [], "esd_alpha": []}
        for p in points:
            e, t, rows = p["epoch"], by_epoch.get(p["epoch"], {}), layers.get(p["epoch"], [])
            median = float(np.median([r["pr_norm"] for r in rows])) if rows else math.nan
            s["epoch"].append(e), s["pr_norm"].append(median), s["esd_alpha"].append(p["esd_alpha"])
            csv_rows.append({
                "run": name, "wd": c["wd"], "seed": c["seed"], "epoch": e, "test_acc": p["test_acc"],
                "logged_test_acc": p["logged_test_acc"], "pr_norm_median_layers": median,
                "pr_norm_mean_layers": t.get("mean_PR_norm_measured"),
                "pr_norm_c1_mean_layers": t.get("mean_PR_norm_predicted_C1_corrected"),
                "mean_cv_sample": t.get("mean_CV_lambda"), "pr_norm_ratio_mean_layers": t.get("mean_PR_norm_ratio"),
                "c1_max_error": max((r["pr_norm_error"] for r in rows), default=math.nan),
                "pr_construction": pr_construction,
                # the training-time value is comparable only when the run logged the same construction
                "logged_pr_norm": p["logged_pr_norm"] if p["logged_pr_construction"] == pr_construction else None,
                "n_layers_valid": len(rows), "esd_alpha": p["esd_alpha"],
                "esd_n_matrices": p["esd_n_matrices"], "paper_phase": TABLE3_PHASES.get(e)})
        series.append(s)
    return series, csv_rows, tables


#: per run, beside its record: the checkpoint measurements per PR construction. Shipped, so that
#: the report can be rebuilt where the weight files (not shipped) are absent
POINTS_FILE = "checkpoint_points.json"


def measured_points(record: dict, runs_root: Path, pr_construction: str) -> tuple[str | None, list[dict]]:
    """``(run folder name, analyse_checkpoint of every saved checkpoint)`` of a run: measured from
    its weights when they are here (and stored in ``POINTS_FILE`` for later), else read back from
    that file; no points when neither exists."""
    files = checkpoint_files(record, runs_root)
    run_dir = run_folder(record, runs_root)
    cache = run_dir / POINTS_FILE if run_dir is not None else None
    stored = json.loads(cache.read_text()) if cache is not None and cache.is_file() else {}
    if files:
        split = eval_split(record, "test")
        points = [analyse_checkpoint(record, path, split, pr_construction=pr_construction) for path in files.values()]
        fresh = _clean([{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in p.items()} for p in points])
        # remeasured weights agree with the stored measurements to round-off (BLAS builds and thread
        # counts differ in the last bits): keep the stored ones, so that a machine with the weights
        # and a clone without them compute the same report, and the shipped file stays unchanged
        if cache is not None and not _agree(stored.get(pr_construction), fresh):
            stored[pr_construction] = fresh
            write_json_atomic(cache, _clean(stored))
        elif cache is not None:
            return run_dir.name, _from_json(stored[pr_construction])
        return run_dir.name, points
    if pr_construction not in stored:
        if stored:
            raise SystemExit(f"{cache}: no weights here and no checkpoint measurements for --pr-construction "
                             f"{pr_construction} (stored: {', '.join(stored)}); retrain the run or pick one of those")
        return None, []
    return run_dir.name, _from_json(stored[pr_construction])


def _from_json(points: list[dict]) -> list[dict]:
    """Stored checkpoint measurements as :func:`analyse_checkpoint` returns them."""
    return [{k: (np.asarray(v, dtype=np.float64) if k in ("eigenvalues", "pr_norm_layers") and v is not None else v)
             for k, v in p.items()} for p in points]


def _agree(a, b, rtol: float = 1e-9) -> bool:
    """Whether two JSON-like measurements are equal, numbers to a relative ``rtol`` (round-off).

    >>> _agree([{"x": 0.30000000000000004, "e": [1.0, None]}], [{"x": 0.3, "e": [1.0, None]}])
    True
    >>> _agree({"x": 0.3}, {"x": 0.31}), _agree(None, {"x": 0.3})
    (False, False)
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_agree(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_agree(x, y, rtol) for x, y in zip(a, b))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)
    return a == b


def retention_table(records: list[dict]) -> list[dict]:
    """E8: per lambda, how many runs end in each RetentionMonitor state, with the paper's count."""
    out = []
    for wd in sorted({r["config"]["wd"] for r in records}):
        runs = [r for r in records if r["config"]["wd"] == wd]
        tags = Counter(r.get("retention") if r["status"] == "completed" else f"run {r['status']}" for r in runs)
        out.append({"wd": wd, "n": len(runs), "retained": tags.pop("retained", 0),
                    "anti-grokked": tags.pop("anti-grokked", 0), "collapsed": tags.pop("collapsed", 0),
                    "never grokked": tags.pop("never grokked", 0), "other": dict(tags),
                    "paper_retained": PAPER_E8.get(wd), "paper_n": 5 if wd in PAPER_E8 else None,
                    "anti_grok_epochs": {r["config"]["seed"]: r["anti_grok_epoch"] for r in runs
                                         if r.get("anti_grok_epoch") is not None},
                    "final_test_acc": {r["config"]["seed"]: r.get("final_test_acc") for r in runs}})
    return out


def _clean(x):
    """NaN -> None, numpy scalars -> floats (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def _peak(record: dict) -> tuple[float | None, int | None]:
    """Raw sigma_H peak after epoch 100 (the paper's amplitude convention) and its epoch."""
    pairs = [(v, e) for e, v in rows(record, "entropy_std") if v is not None and e > 100]
    return max(pairs) if pairs else (None, None)


def _differs(ctx: dict, epochs: list[int] | None = None) -> str | None:
    if ctx["profile"] == "paper":
        return None
    m, info = ctx["lead"]["config"]["model"], ctx["info"]
    text = (f"{m['n_layers']}L x {m['n_heads']}H d{m['d_model']} (paper 4L x 8H d128), {info['horizon']:,} epochs (paper "
            f"20,000), lambda {info['wds']} x {info['seeds_per_wd']} seeds (paper 0.1/0.5/1/2 x 5)")
    return text + (f", {len(epochs)} checkpoints {epochs[0]}-{epochs[-1]} (paper: 11 at 100-20,000)" if epochs else "")


def part_fig3(ctx: dict) -> list[dict]:
    lead, horizon, profile, info = ctx["lead"], ctx["horizon"], ctx["profile"], ctx["info"]
    peak, peak_epoch = _peak(lead)
    outside = [f"{k} {lo:,}-{hi:,}" for k, (lo, hi) in FIG3_BANDS.items() if lo > horizon]
    details = f"{info['text']}\n{describe(lead)}"
    if outside:
        details += f"\nthe paper's Fig. 3 bands {', '.join(outside)} lie beyond this {horizon:,}-epoch horizon: not drawn"
    paper_note = (f"paper (seed 42, lambda 1, 20,000 epochs): final test acc {PAPER_FIG3['final_test_acc']}, "
                  f"raw $\\sigma_H$ peak {PAPER_FIG3['sigma_peak']} at ~{PAPER_FIG3['sigma_peak_epoch']:,}")
    fig = figure_five_stage(lead, ctx["underlay"], FIG3_BANDS, paper_note, caption(profile, details, _differs(ctx), figure="fig3"))
    fig.savefig(ctx["out"] / "fig3_five_stage.png", dpi=130)
    ctx["summary"]["fig3"] = {
        "final_test_acc": lead.get("final_test_acc"), "sigma_peak": peak, "sigma_peak_epoch": peak_epoch,
        "grok_epoch": lead.get("grok_epoch"), "retention": lead.get("retention"),
        "anti_grok_epoch": lead.get("anti_grok_epoch"), "underlay_seeds": [r["config"]["seed"] for r in ctx["underlay"]]}
    same = [lead, *ctx["underlay"]]  # a one-run claim is judged by the prediction interval of these runs
    return [claim_row("fig3.final_test", f"final test accuracy, lead run ({ctx['label']})", lead.get("final_test_acc"),
                      profile, 1, note=ctx["note_h"], horizon=horizon, runs=[r.get("final_test_acc") for r in same]),
            claim_row("fig3.sigma_peak", f"raw sigma_H peak after epoch 100, lead run ({ctx['label']})", peak, profile, 1,
                      note=f"ours at epoch {peak_epoch} of {horizon:,}, paper at ~10,500 of 20,000", horizon=horizon,
                      runs=[_peak(r)[0] for r in same])]


def part_e8(ctx: dict) -> list[dict]:
    table = retention_table(ctx["records"])
    ctx["summary"]["e8"] = table
    keys = ["wd", "n", "retained", "anti-grokked", "collapsed", "never grokked", "paper_retained", "anti_grok_epochs"]
    with open(ctx["out"] / "retention.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**t, "anti_grok_epochs": json.dumps(t["anti_grok_epochs"])} for t in table)
    rows = []
    for t in table:
        epochs = f" (seed: epoch {t['anti_grok_epochs']})" if t["anti_grok_epochs"] else ""
        paper = "-" if t["paper_retained"] is None else f"{t['paper_retained']}/5"
        note = (f"{t['retained']}/{t['n']} retained, {t['anti-grokked']} anti-grokked{epochs}, {t['collapsed']} collapsed, "
                f"{t['never grokked']} never grokked; paper {paper}; {ctx['note_h']}").strip("; ")
        quantity = f"retained fraction at lambda {t['wd']} (still generalising at the horizon)"
        if t["paper_retained"] is None:
            rows.append(row(PAPER + " E8", quantity, None, t["retained"] / t["n"], ctx["profile"], t["n"], note=note))
        else:
            rows.append(claim_row(f"e8.retained_{t['wd']:g}", quantity, t["retained"] / t["n"], ctx["profile"], t["n"],
                                  note=note, horizon=ctx["horizon"]))
    n = sum(t["n"] for t in table)
    if n:
        rows.append(claim_row("e8.anti_grok", "fraction of runs that anti-grok by the horizon",
                              sum(t["anti-grokked"] for t in table) / n, ctx["profile"], n, horizon=ctx["horizon"],
                              note=ctx["note_h"]))
    return rows


def part_fig6(ctx: dict, series: list[dict], tables: dict, cap: str) -> list[dict]:
    lead, profile, lead_s = ctx["lead"], ctx["profile"], ctx["lead_series"]
    ref_rows, ref_err, ref_source = paper_table3()
    valid = [r for t in tables.values() for r in t["rows"] if r["valid"]]
    ours_err = max((r["pr_norm_error"] for r in valid), default=math.nan)
    ours_pr_err = max((r["pr_error"] for r in valid), default=math.nan)
    lead_table = tables[lead["run_id"]]["table"]
    fig = figure_pr_norm(series, lead_table, PAPER_FIG6, ref_rows, PAPER_FIG6_P2_P4, FIG67_BANDS,
                         {"ours": ours_err, "paper": ref_err}, 8,
                         cap + smoke_scope(profile, "fig6") + f"\npaper overlay: Fig. 6 text values and {ref_source}")
    fig.savefig(ctx["out"] / "fig6_pr_norm.png", dpi=130)
    final = [s["pr_norm"][-1] for s in series if s["wd"] == lead["config"]["wd"]]
    value, ci, level = median_ci(final)
    ctx["summary"]["fig6"] = {
        "lead_table3": lead_table, "max_pr_norm_identity_error": ours_err, "max_pr_error": ours_pr_err,
        "n_valid_layer_rows": len(valid), "n_skipped_layer_rows": sum(t.get("n_skipped", 0) for t in tables.values()),
        "paper_max_pr_norm_identity_error": ref_err, "paper_source": ref_source}
    last = lead_s["epoch"][-1]
    how = f"covariance {ctx['summary']['pr_construction']}"
    quantity = "PR_norm (median over layers) at the {} checkpoint, lead run (" + ctx["label"] + ")"
    horizon = ctx["horizon"]
    at = dict(zip(lead_s["epoch"], lead_s["pr_norm"]))
    table3 = {int(r["epoch"]): r["mean_PR_norm_measured"] for r in lead_table}
    same = _same_config(series, lead_s, "pr_norm")  # every run at the lead run's lambda: {epoch: value} each
    tables3 = [{int(r["epoch"]): r["mean_PR_norm_measured"] for r in tables[rec["run_id"]]["table"]}
               for rec in [lead, *ctx["underlay"]] if rec["run_id"] in tables]
    rows = []
    for epoch, _ in PAPER_FIG6:  # every checkpoint the paper prints; beyond our horizon: not run here (horizon)
        rows.append(claim_row(f"fig6.pr_norm_{epoch}", quantity.format(f"epoch-{epoch:,}"), at.get(epoch), profile, 1,
                              note=how, horizon=horizon, runs=[s.get(epoch) for s in same]))
        if f"tab3.pr_norm_{epoch}" in load_claims():
            rows.append(claim_row(f"tab3.pr_norm_{epoch}", f"PR_norm (mean over layers) at epoch {epoch:,}, lead run",
                                  table3.get(epoch), profile, 1, note=how, horizon=horizon,
                                  runs=[t.get(epoch) for t in tables3]))
    band = lambda values: [v for e, v in values.items() if PAPER_FIG6_P2_P4[0][0] <= e <= PAPER_FIG6_P2_P4[0][1]]
    p24 = band(at)
    for claim_id, pick in (("fig6.pr_norm_p2_p4_min", min), ("fig6.pr_norm_p2_p4_max", max)):
        rows.append(claim_row(claim_id, claim(claim_id).claim, pick(p24) if p24 else None, profile, 1, horizon=horizon,
                              runs=[pick(band(s)) for s in same if band(s)]))
    return rows + [
            row(PAPER + " Fig. 6", f"PR_norm at the last checkpoint, median over seeds at lambda {lead['config']['wd']}",
                None, value, profile, len(final), ours_ci=ci, ci_level=level, note=f"epoch {last}"),
            claim_row("c1.identity", "C1 identity: max abs(PR_norm measured - 1/(1+CV^2)) (sample CV, var_pop corrected), "
                      "all layer x checkpoint rows", ours_err, profile, len(valid),
                      note=f"max abs(PR - H/(1+CV^2)) = {_residual(ours_pr_err)} (paper 1.73e-6); float64 eigenvalues here")]


def _residual(x: float) -> str:
    """A float64 round-off residual: below 1e-12 its digits depend on the BLAS and the machine."""
    return "< 1e-12" if x < 1e-12 else f"{x:.2g}"


def _same_config(series: list[dict], lead_s: dict, key: str) -> list[dict]:
    """``{epoch: value}`` of ``key`` for every run at the lead run's lambda, the lead first: a value
    the paper reports from one run is judged by the prediction interval of these runs."""
    same = sorted((s for s in series if s["wd"] == lead_s["wd"]), key=lambda s: not s["lead"])
    return [dict(zip(s["epoch"], s[key])) for s in same]


def part_fig7(ctx: dict, series: list[dict], cap: str) -> list[dict]:
    lead_s, profile = ctx["lead_series"], ctx["profile"]
    fig = figure_esd_alpha(series, PAPER_FIG7, PAPER_FIG7_PLATEAU, FIG67_BANDS, cap + smoke_scope(profile, "fig7"))
    fig.savefig(ctx["out"] / "fig7_esd_alpha.png", dpi=130)
    alphas = [a for s in series for a in s["esd_alpha"]]
    ctx["summary"]["fig7"] = {"lead_alpha": dict(zip(lead_s["epoch"], lead_s["esd_alpha"])),
                              "alpha_range_all_runs": [float(np.nanmin(alphas)), float(np.nanmax(alphas))]}
    quantity = "ESD alpha (median over weight matrices) at the {} checkpoint, lead run (" + ctx["label"] + ")"
    at = dict(zip(lead_s["epoch"], lead_s["esd_alpha"]))
    same = _same_config(series, lead_s, "esd_alpha")
    rows = [claim_row(f"fig7.alpha_{epoch}", quantity.format(f"epoch-{epoch:,}"), at.get(epoch), profile, 1,
                      horizon=ctx["horizon"], runs=[s.get(epoch) for s in same]) for epoch, _ in PAPER_FIG7]
    band = lambda values: [v for e, v in values.items() if PAPER_FIG7_PLATEAU[0][0] <= e <= PAPER_FIG7_PLATEAU[0][1]]
    plateau = band(at)
    for claim_id, pick in (("fig7.alpha_plateau_lo", min), ("fig7.alpha_plateau_hi", max)):
        rows.append(claim_row(claim_id, claim(claim_id).claim, pick(plateau) if plateau else None, profile, 1,
                              horizon=ctx["horizon"], runs=[pick(band(s)) for s in same if band(s)]))
    return rows


def main(argv=None) -> Path:
    only = argparse.ArgumentParser(add_help=False)
    only.add_argument("--only", choices=PARTS, action="append", default=None, help="run just this part (repeatable)")
    only.add_argument("--pr-construction", choices=TABLE3_CONSTRUCTIONS, default=DIAGNOSTICS_PR_CONSTRUCTION,
                      help="head covariance behind PR_norm (Fig. 6, Table 3)")
    known, rest = only.parse_known_args(argv)
    args = parse_args(__doc__, rest)
    parts = known.only or list(PARTS)
    out = Path(args.out) / "long_horizon"
    records = sweep_records(SWEEP, args.profile, out, args.launch)[0]
    from grok_lightning.sweep.grid import load_sweep

    order = {s.run_id: i for i, s in enumerate(load_sweep(SWEEPS / SWEEP, profile=args.profile).expand())}
    records.sort(key=lambda r: order.get(r["run_id"], len(order)))
    usable = [r for r in records if r["status"] in ("completed", "diverged") and r["history"]["epoch"]]
    info = sweep_summary(records)
    lead, underlay = pick_lead(usable)
    c = lead["config"]
    ctx = {"out": out, "profile": args.profile, "records": records, "info": info, "horizon": info["horizon"],
           "lead": lead, "underlay": underlay, "label": f"lambda {c['wd']}, seed {c['seed']}",
           "note_h": f"ours at {info['horizon']:,} epochs, paper at 20,000" if info["horizon"] != 20000 else "",
           "summary": {"profile": args.profile, "sweep": info, "lead": {"run_id": lead["run_id"], "wd": c["wd"],
                       "seed": c["seed"]}, "config": c}}
    rows = {}
    if "fig3" in parts:
        rows["fig3"] = part_fig3(ctx)
    if "e8" in parts:
        rows["e8"] = part_e8(ctx)
    if "fig6" in parts or "fig7" in parts:
        series, csv_rows, tables = checkpoint_analysis(usable, out / "sweep" / "runs", lead, known.pr_construction)
        if not csv_rows:
            raise SystemExit(f"long_horizon: no checkpoint of {len(usable)} run(s) under {out / 'sweep' / 'runs'}: "
                             f"neither weights/ nor {POINTS_FILE}; rerun the sweep (--only fig3 / e8 need neither)")
        ctx["summary"]["pr_construction"] = known.pr_construction
        with open(out / "checkpoints.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(csv_rows[0]))
            writer.writeheader()
            writer.writerows(_clean(csv_rows))
        epochs = sorted({e for s in series for e in s["epoch"]})
        cap = caption(args.profile, f"{info['text']}; checkpoints at epochs {epochs}; PR_norm covariance: "
                      f"{known.pr_construction}\n{describe(lead)}",
                      _differs(ctx, epochs), figure=None)  # shared by Fig. 6 and 7: each adds its own scope
        ctx["lead_series"] = next(s for s in series if s["lead"])
        logged = [r for r in csv_rows if r["logged_test_acc"] is not None]
        ctx["summary"]["checkpoints"] = {  # the rebuilt model and split must reproduce the training-time evaluation
            "epochs": epochs, "n_checkpoints": len(csv_rows),
            "max_test_acc_mismatch": max((abs(r["test_acc"] - r["logged_test_acc"]) for r in logged), default=None),
            "max_pr_norm_vs_logged_diagnostic": max((abs(r["pr_norm_mean_layers"] - r["logged_pr_norm"]) for r in logged
                                                     if r["logged_pr_norm"] is not None), default=None)}
        if "fig6" in parts:
            rows["fig6"] = part_fig6(ctx, series, tables, cap)
        if "fig7" in parts:
            rows["fig7"] = part_fig7(ctx, series, cap)
    _write(out, args.profile, parts, ctx["summary"], rows)
    print(f"long_horizon ({', '.join(parts)}): {out}")
    return out


def _write(out: Path, profile: str, parts: list[str], summary: dict, by_part: dict[str, list[dict]]) -> None:
    """Merge with what earlier ``--only`` invocations of the same profile wrote, then write."""
    rows = [{**r, "part": part} for part in PARTS for r in by_part.get(part, [])]
    old_summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    if old_summary.get("profile") == profile and (out / "rows.json").exists():
        kept = [r for r in json.loads((out / "rows.json").read_text()) if r.get("part") not in parts]
        rows, summary = kept + rows, {**old_summary, **summary}
        rows.sort(key=lambda r: PARTS.index(r["part"]) if r.get("part") in PARTS else len(PARTS))
    summary["parts"] = sorted(set(summary.get("parts", [])) | set(parts)) if old_summary.get("profile") == profile else parts
    write_json_atomic(out / "summary.json", _clean(summary))
    (out / "rows.json").write_text(json.dumps(_clean(rows), indent=1))
    (out / "NOTES.md").write_text(notes(summary))


def notes(summary: dict) -> str:
    """Markdown for REPORT.md: the E8 table and the lead run's Table 3."""
    lines = [f"### Long horizon ({summary['profile']}): E8 retention and Table 3", ""]
    if summary.get("e8"):
        lines += ["| lambda | n | retained | anti-grokked | collapsed | never grokked | paper retained (of 5, 20 K) "
                  "| anti-grok epoch per seed |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {t['wd']} | {t['n']} | {t['retained']} | {t['anti-grokked']} | {t['collapsed']} | "
                  f"{t['never grokked']} | {'-' if t['paper_retained'] is None else t['paper_retained']} | "
                  f"{t['anti_grok_epochs'] or '-'} |" for t in summary["e8"]]
    if summary.get("fig6"):
        lead = summary["lead"]
        paper = {r["epoch"]: r for r in paper_table3()[0]}
        lines += ["", f"Table 3 on lambda {lead['wd']}, seed {lead['seed']} (layer means; paper: seed 42, "
                  "canonical model):", "",
                  "| epoch | paper phase | sample CV | PR_norm measured | C1-predicted | paper PR_norm (same epoch) |",
                  "|---|---|---|---|---|---|"]
        for t in summary["fig6"]["lead_table3"]:
            ref = paper.get(t["epoch"], {}).get("mean_PR_norm_measured")
            fmt = lambda v: "-" if v is None else f"{v:.4f}"
            lines.append(f"| {t['epoch']} | {t['phase_label'] or '-'} | {fmt(t['mean_CV_lambda'])} | "
                         f"{fmt(t['mean_PR_norm_measured'])} | {fmt(t['mean_PR_norm_predicted_C1_corrected'])} | "
                         f"{fmt(ref)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    cli(main)
