"""E11's retention predictor on the shipped medium records: trains nothing.

    python -m reproduce.targets.predict --profile medium --out results/medium [--epoch 1000] [--n-bootstrap B]

The pool is every medium record already under ``--out`` (current grids only, final records only):
Fig. 5's canonical weight-decay sweep (``fig5/sweep``), Fig. 4's head widths at lambda 1
(``fig4/sweep``; its random-label null runs are left out: with nothing to generalise, the label
"still generalising at the end" means nothing) and E12's control group A at lambda 0.05
(``fig8/A/sweep``) when it has records. Features at epoch ``E`` (the paper's 1,000): sigma_H
under the released reading (the record's ``entropy_std``), s_bar, weight norm, test accuracy and
log10 lambda. Label: grokked and still generalising at the end of the run
(:func:`grok_lightning.stats.predict.retention_label`); a run that stopped after grokking has none.

The held-out lambda cells follow the rule of :func:`grok_lightning.stats.holdout.choose_holdout`;
both classifiers are fitted on the other cells and scored on the held-out runs (AUC and Brier,
stratified bootstrap CIs), and the rows are scored by ``reproduce.report.claim_row`` against
e11.rf_auc, e11.logistic_auc and e11.rf_brier. A pool in which no split leaves both labels on
both sides gives ``invalid`` rows; a held-out set with fewer than ``stats.holdout.MIN_PER_CLASS``
runs of a label gives rows without an interval (``inconclusive: too few runs``), and labels read
before the claim's horizon give ``not run here (horizon)``. Writes ``predict_auc.png``,
``features.csv``, ``summary.json``, ``rows.json`` and ``NOTES.md`` under ``<out>/predict``.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from grok_lightning.plots.predict import figure_holdout
from grok_lightning.records import FINAL_STATUSES
from grok_lightning.stats.holdout import (
    PAPER_FEATURES,
    cells_text,
    choose_holdout,
    holdout_auc,
    within_cell_auc,
)
from grok_lightning.stats.predict import feature_table, table_records
from reproduce.report import claim, claim_row, join_notes
from reproduce.targets.common import SWEEPS, caption, describe, read_planned, write_outputs

#: (folder under --out, sweep file, name): the medium records the pool reads
SOURCES = (("fig5", "canonical_wd.yaml", "Fig. 5"), ("fig4", "head_width.yaml", "Fig. 4"),
           ("fig8/A", "e12.yaml", "E12 control A"))
DEFAULTS = dict(epoch=1000, slope_window=200, n_bootstrap=2000, n_estimators=300)
#: (claim, model, statistic) of each row
ROWS = (("e11.rf_auc", "random_forest", "auc"), ("e11.logistic_auc", "logistic", "auc"),
        ("e11.rf_brier", "random_forest", "brier"))
MODELS = ("random_forest", "logistic")


def meaningless_label(record: dict) -> str | None:
    """Why a run's retention label means nothing (None when it does)."""
    if ((record.get("config") or {}).get("data") or {}).get("random_labels"):
        return "random-label null: nothing to generalise, so 'still generalising' has no meaning"
    return None


def read_source(root: Path, folder: str, sweep_file: str, profile: str = "medium") -> tuple[list[dict], int]:
    """The final records of a sweep's current grid under ``root/folder/sweep`` and the runs it plans."""
    from grok_lightning.sweep.grid import load_sweep

    specs = load_sweep(SWEEPS / sweep_file, profile=profile).expand()
    found = read_planned(root / folder / "sweep", specs)
    return [r for r in found if r.get("status") in FINAL_STATUSES], len(specs)


def build_pool(root: Path, epoch: int, slope_window: int) -> dict:
    """Feature rows of every usable run, and an account of every run that is not one."""
    rows, skipped, excluded, missing, sources, wd_of, records = [], [], [], [], {}, {}, []
    for folder, sweep_file, name in SOURCES:
        found, planned = read_source(root, folder, sweep_file)
        horizons = sorted({r["config"]["max_epochs"] for r in found})
        sources[name] = {"folder": folder, "sweep": sweep_file, "planned": planned, "records": len(found),
                         "horizon": horizons}
        if len(found) < planned:
            missing.append(f"{folder}: {sweep_file} (medium): {planned - len(found)} of {planned} runs without a "
                           f"final record")
        usable = []
        for record in found:
            wd_of[record["run_id"]] = float(record["config"]["wd"])
            why = meaningless_label(record)
            if why:
                excluded.append({"source": name, "run_id": record["run_id"], "why": why})
            else:
                usable.append(record)
        records += usable
        table, left = feature_table(usable, epoch, slope_window)
        horizon_of = {r["run_id"]: r["config"]["max_epochs"] for r in usable}
        for row in table:
            row.meta.update(source=name, horizon=horizon_of[row.run_id])
        rows += table
        skipped += [{"source": name, "run_id": run_id, "why": why} for run_id, why in left]
    return {"rows": rows, "skipped": skipped, "excluded": excluded, "missing": missing, "sources": sources,
            "wd_of": wd_of, "records": records}


def cell_counts(pool: dict) -> dict[float, dict[str, int]]:
    """Runs per lambda: retained, not retained, and no label (retention unobservable, no features at E)."""
    cells: dict[float, Counter] = {}
    for r in pool["rows"]:
        label = {1: "retained", 0: "not retained", None: "no label"}[r.retained]
        cells.setdefault(float(r.meta["wd"]), Counter())[label] += 1
    for s in pool["skipped"]:
        cells.setdefault(pool["wd_of"][s["run_id"]], Counter())["no label"] += 1
    return {wd: dict(c) for wd, c in sorted(cells.items())}


def _g(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _interval(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) else str(ci)


def pool_text(pool: dict, labelled: list) -> str:
    """How many runs each source gave and why the others carry no label."""
    by_source = Counter(r.meta["source"] for r in labelled)
    parts = [f"{name}: {by_source.get(name, 0)} labelled of {s['records']} records ({s['planned']} planned)"
             if s["records"] else f"{name}: no records ({s['planned']} planned)" for name, s in pool["sources"].items()]
    unobservable = sum(r.retained is None for r in pool["rows"])
    ends = sum(s["why"].startswith("history ends") for s in pool["skipped"])
    other = len(pool["skipped"]) - ends
    return (f"labelled pool {len(labelled)} runs ({'; '.join(parts)}); left out: {len(pool['excluded'])} random-label "
            f"null runs, {unobservable} grokked runs stopped before their horizon (retention unobservable), "
            f"{ends} runs whose history ends before the feature epoch" + (f", {other} others" if other else ""))


def report_rows(pool: dict, split: dict, result: dict, epoch: int, invalid: str | None, horizon: int | None,
                decides: str) -> list[dict]:
    labelled = [r for r in pool["rows"] if r.retained is not None]
    features = f"features at epoch {epoch:,}: {', '.join(PAPER_FEATURES)} (sigma_H: released reading, entropy_std)"
    split_text = ""  # an invalid test's reason is its verdict
    if not invalid:
        train = split["train"]
        split_text = (f"held out lambda {', '.join(f'{w:g}' for w in split['held_out'])} ({result['test_pos']} "
                      f"retained / {result['test_neg']} not; {split['why']}); trained on lambda "
                      f"{', '.join(f'{w:g}' for w in train)} ({result['train_pos']} / {result['train_neg']})")
    rows = []
    for claim_id, model, stat in ROWS:
        entry = result.get("results", {}).get(model, {}) if not invalid else {}
        ours = entry.get(stat) if isinstance(entry.get(stat), float) else None
        ci = entry.get(f"{stat}_ci") if isinstance(entry.get(f"{stat}_ci"), list) else None
        withheld = ""
        if result.get("too_few") and ci is not None:
            withheld = f"bootstrap interval {_interval(ci)} not used: {result['too_few']}"
            ci = None
        rows.append(claim_row(
            claim_id, f"retention classifier held-out {'AUC' if stat == 'auc' else 'Brier score'}, "
            f"{model.replace('_', ' ')} (medium records, E11 features)", ours, "medium",
            result.get("n_test") if not invalid else len(labelled), ours_ci=ci, invalid=invalid, horizon=horizon,
            note=join_notes(split_text, withheld, pool_text(pool, labelled), features, decides)))
    return rows


def notes_md(summary: dict) -> str:
    result, split = summary["holdout"], summary["split"]
    lines = [f"### predict (medium): E11's retention predictor on the shipped records (features at epoch "
             f"{summary['epoch']:,})", "", summary["pool_text"] + ".", "",
             f"Labels by lambda (retained/not): {cells_text(split['cells'])}.", ""]
    if summary["invalid"]:
        lines += [f"**invalid test: {summary['invalid']}**", ""]
    else:
        lines += [f"Held out lambda {split['held_out']} ({split['why']}); {result['n_test']} runs, "
                  f"{result['test_pos']} retained, {result['test_neg']} not.", "",
                  "| model | AUC [95% CI] | Brier [95% CI] | paper AUC |", "|---|---|---|---|"]
        for model in MODELS:
            e = result["results"][model]
            lines.append(f"| {model} | {_g(e['auc'])} {_interval(e['auc_ci'])} | {_g(e['brier'])} "
                         f"{_interval(e['brier_ci'])} | {summary['paper'][model]} |")
        lines.append("")
    for cell in summary["within_cell"]:
        res = cell.get("results") or {}
        lines.append(f"Context (not E11's design): leave-one-run-out inside lambda {cell['wd']:g} ({cell['pos']} "
                     f"retained, {cell['neg']} not): " + (", ".join(f"{m} AUC {_g(v['auc'])}" for m, v in res.items())
                                                         or str(cell.get("undefined"))) + ".")
    lines += ["", f"**{summary['decides']}**"]
    return "\n".join(lines) + "\n"


def run(root: Path, epoch: int | None = None, slope_window: int | None = None, n_bootstrap: int | None = None,
        n_estimators: int | None = None) -> Path:
    epoch = epoch or DEFAULTS["epoch"]
    slope_window = slope_window or DEFAULTS["slope_window"]
    n_bootstrap = DEFAULTS["n_bootstrap"] if n_bootstrap is None else n_bootstrap
    n_estimators = n_estimators or DEFAULTS["n_estimators"]
    out = Path(root) / "predict"
    pool = build_pool(Path(root), epoch, slope_window)
    labelled = [r for r in pool["rows"] if r.retained is not None]
    if not labelled:
        raise SystemExit(f"predict (medium): no run with a retention label under {root} (it reads the "
                         f"{', '.join(s[0] for s in SOURCES)} records and trains nothing)")
    out.mkdir(parents=True, exist_ok=True)
    split = choose_holdout(labelled)
    invalid = split.get("invalid")
    result = {} if invalid else holdout_auc(labelled, split["held_out"], PAPER_FEATURES, MODELS,
                                            n_bootstrap=n_bootstrap, n_estimators=n_estimators)
    invalid = invalid or result.get("undefined")
    used = labelled if invalid else [r for r in labelled if r.meta["wd"] in split["held_out"] + split["train"]]
    horizon = min(r.meta["horizon"] for r in used)
    within = [within_cell_auc(labelled, wd, PAPER_FEATURES, MODELS, n_estimators=n_estimators)
              for wd, counts in split["cells"].items() if min(counts) > 0]
    paper_pool = f"the paper: {claim('e11.rf_auc').needs}"
    if invalid:
        decides = (f"the pool cannot decide E11: {len(labelled)} labelled runs, and no held-out split by lambda "
                   f"exists ({paper_pool})")
    elif result.get("too_few"):
        decides = f"the pool is too small to decide E11: {result['too_few']} ({paper_pool})"
    else:
        decides = "the verdict follows the intervals against the paper's value and margin"
    paper = {model: claim(claim_id).value for claim_id, model, stat in ROWS if stat == "auc"}
    rows = report_rows(pool, split, result, epoch, invalid, horizon, decides)

    flat = table_records(pool["rows"])
    for entry, row in zip(flat, pool["rows"]):
        entry.update(source=row.meta["source"], horizon=row.meta["horizon"])
    with open(out / "features.csv", "w", newline="") as handle:
        if flat:
            writer = csv.DictWriter(handle, fieldnames=list(flat[0]))
            writer.writeheader()
            writer.writerows(flat)
    text = pool_text(pool, labelled)
    horizons = sorted({r.meta["horizon"] for r in labelled})
    split_line = (f"held out lambda {', '.join(f'{w:g}' for w in split['held_out'])}" if not invalid
                  else "no held-out split by lambda exists")
    details = (f"{text}\nlabels at the end of each run: horizon {', '.join(f'{h:,}' for h in horizons)} epochs; "
               f"features at epoch {epoch:,}: {', '.join(PAPER_FEATURES)} (sigma_H released reading); {split_line}; "
               f"RF {n_estimators} trees, logistic C = 1; {n_bootstrap} stratified bootstrap resamples\n"
               f"{describe(pool['records'][0])}")
    unobservable = sum(r.retained is None for r in pool["rows"])
    differs = (f"{len(labelled)} labelled runs ({paper_pool}); labels at {horizons[0]:,}-{horizons[-1]:,} epochs "
               f"(the claim's horizon {claim('e11.rf_auc').horizon:,}); {unobservable} grokked runs stopped before "
               f"their horizon (grok.extra_epochs) carry no label")
    counts = cell_counts(pool)
    fig = figure_holdout(counts, [] if invalid else split["held_out"], result, paper,
                         caption("medium", details, differs, figure="predict"), invalid=invalid)
    fig.savefig(out / "predict_auc.png", dpi=130)
    summary = {"profile": "medium", "epoch": epoch, "slope_window": slope_window, "features": list(PAPER_FEATURES),
               "sources": pool["sources"], "missing": pool["missing"], "excluded": pool["excluded"],
               "skipped": pool["skipped"], "n_records": sum(s["records"] for s in pool["sources"].values()),
               "n_labelled": len(labelled), "cells": {f"{w:g}": c for w, c in counts.items()},
               "split": {**split, "cells": {f"{w:g}": c for w, c in split["cells"].items()}},
               "holdout": result, "within_cell": within, "invalid": invalid, "horizon": horizon,
               "decides": decides, "pool_text": text, "paper": paper}
    write_outputs(out, summary, rows)
    (out / "NOTES.md").write_text(notes_md({**summary, "split": split}))
    print(f"predict (medium): {len(labelled)} labelled runs; {split_line}; {decides}")
    print(f"predict: {out / 'predict_auc.png'}")
    return out
