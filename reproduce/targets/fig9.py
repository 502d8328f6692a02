"""Fig. 9: grok counts over operation x scale x weight decay (multi-task grid, E9).

    python -m reproduce.targets.fig9 --profile smoke|medium|paper --out reproduction

Writes ``fig9_multitask.png`` (ours beside the paper's counts), pooled and per-task lambda_c
(paper method) where the outcomes allow a fit, per-task grok rates, and the report rows.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from grok_lightning.plots.regimes import figure_multitask
from grok_lightning.records import is_grokked
from grok_lightning.stats import fit_critical_weight_decay, records_to_arrays
from grok_lightning.stats.intervals import mean_interval
from grok_lightning.stats.phases import sigma_h_curve
from reproduce.report import claim_row, count_row, join_notes, load_claims, row
from reproduce.report.sources import source_value
from reproduce.targets.common import (
    caption,
    cli,
    describe,
    n_params,
    parse_args,
    sweep_records,
    sweep_summary,
    write_outputs,
)

PAPER = "2605.20441 Fig. 9"
SYMBOL = {"add": "+", "sub": "-", "mul": "x", "div": "/"}
#: the paper's grok counts out of 5 (the author's repository, gen_fig9.py; PAPER_WD_REGIMES.md)
def paper_grid() -> dict:
    """The paper's Fig. 9 grid (grokked of 5 per task, scale and lambda), from the file its E9 claims
    cite (reference/multitask_summary.json)."""
    cells = source_value("e9.rate_mod_add", "multitask_full_grid").values()
    wds = sorted({c["wd"] for c in cells})
    symbol = {"mod_add": "+", "mod_sub": "-", "mod_mul": "x", "mod_div": "/"}
    rows = [f"{symbol[t]} {scale}" for t in symbol for scale in ("small", "medium")]
    counts = {row: [0] * len(wds) for row in rows}
    for c in cells:
        counts[f"{symbol[c['task']]} {c['scale']}"][wds.index(c["wd"])] = int(c["grok_rate"].split("/")[0])
    return {"out_of": max(c["n"] for c in cells), "wds": wds, "rows": rows, "counts": counts}


#: the paper's E9 claims (reference/claims.csv): per-task grok rates and pooled lambda_c per scale
TASK_CLAIMS = {"add": "e9.rate_mod_add", "div": "e9.rate_mod_div", "mul": "e9.rate_mod_mul", "sub": "e9.rate_mod_sub"}
WD_C_CLAIMS = {"small": "e9.transformer_small_pooled_4ops", "medium": "e9.transformer_medium_pooled_4ops"}
#: per-lambda grok rates pooled over tasks and scales: lambda -> claim
WD_CLAIMS = {float(c.removeprefix("e9.rate_wd")): c for c in load_claims() if c.startswith("e9.rate_wd")}
#: the 19M model's mean peak sigma_H (summed over layers) in one cell: (operation, scale, lambda)
SIGMA_CELL = ("add", "medium", 0.015)


def _scale(n: int) -> str:
    if n == 818785:
        return "small"
    return "medium" if abs(n - 19.02e6) < 0.05e6 else f"{n / 1e6:.2f}M"


def _fit(records: list[dict]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        wd, grokked, _ = records_to_arrays(records)
    if len(set(wd.tolist())) < 2:
        return None
    return fit_critical_weight_decay(wd, grokked, method="paper", n_bootstrap=1500)


def _sigma_cell_row(counted: list[dict], profile: str, horizon) -> dict:
    """The mean over seeds of peak sigma_H (summed over layers, epochs > 100) in the 19M model's
    mod-add cell at lambda 0.015 (``e9.sigma_peak_medium``), with its t interval."""
    op, scale, wd = SIGMA_CELL
    cell = [r for r in counted if r["config"]["data"]["operation"] == op and _scale(n_params(r)) == scale
            and abs(r["config"]["wd"] - wd) < 1e-12]
    peaks = []
    for r in cell:
        epochs, summed = sigma_h_curve(r["history"], "sum_layers")
        keep = (epochs > 100) & np.isfinite(summed)
        if keep.any():
            peaks.append(float(summed[keep].max()))
    mean = float(np.mean(peaks)) if peaks else None
    return claim_row("e9.sigma_peak_medium", f"peak sigma_H summed over layers, task {SYMBOL[op]}, {scale} model, lambda "
                     f"{wd:g} (mean over seeds)", mean, profile, len(peaks), horizon=horizon,
                     ours_ci=mean_interval(peaks).ci if len(peaks) >= 2 else None,
                     note=f"per seed {[round(v, 4) for v in peaks]}" if peaks else "no run in that cell")


def analyse(records: list[dict], profile: str, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    counted = [r for r in records if r["status"] in ("completed", "diverged")]
    label = {id(r): f"{SYMBOL[r['config']['data']['operation']]} {_scale(n_params(r))}" for r in counted}
    rows_order = sorted(set(label.values()), key=lambda s: ("+-x/".index(s[0]), s[2:]))
    counts, totals = defaultdict(dict), defaultdict(dict)
    for r in counted:
        key, wd = label[id(r)], r["config"]["wd"]
        counts[key][wd] = counts[key].get(wd, 0) + int(is_grokked(r))
        totals[key][wd] = totals[key].get(wd, 0) + 1
    wds = sorted({r["config"]["wd"] for r in counted})
    info = sweep_summary(records)
    details = f"{info['text']}\n{describe(records[0])}"
    differs = None if profile == "paper" else (
        "one smaller scale, lambda 1 and 2, one seed, 250 epochs: the paper's grid (right) is 0.003-0.07 x 5 seeds "
        "x 10,000 epochs at 0.82M and 19M; compare which tasks grok, not the counts")
    fig = figure_multitask(counts, totals, wds, rows_order, caption(profile, details, differs, figure="fig9"), paper_grid())
    fig.savefig(out / "fig9_multitask.png", dpi=130)

    rows, fits = [], {}
    horizon = max((r["config"]["max_epochs"] for r in counted), default=None)
    for op, claim_id in TASK_CLAIMS.items():
        mine = [r for r in counted if r["config"]["data"]["operation"] == op]
        note = "" if profile == "paper" else "smoke grid (lambda 1, 2) is not the paper's: rates are not comparable"
        rows.append(count_row(claim_id, f"grok rate, task {SYMBOL[op]} (pooled over scales and lambda)",
                              sum(is_grokked(r) for r in mine), len(mine), profile, note=note, horizon=horizon))
    for wd, claim_id in sorted(WD_CLAIMS.items()):
        mine = [r for r in counted if abs(r["config"]["wd"] - wd) < 1e-12]
        rows.append(count_row(claim_id, f"grok rate at lambda {wd:g} (pooled over tasks and scales)",
                              sum(is_grokked(r) for r in mine), len(mine), profile, horizon=horizon,
                              note="" if mine else f"no run at lambda {wd:g}"))
    rows.append(_sigma_cell_row(counted, profile, horizon))
    for size in sorted({n_params(r) for r in counted}):
        group = [r for r in counted if n_params(r) == size]
        fit = _fit(group)
        fits[str(size)] = None if fit is None else fit.to_dict()
        if fit is None:
            continue
        estimable = fit.status == "ok" and np.isfinite(fit.wd_c)  # a separable step has no lambda_c to report
        ci = [float(v) for v in fit.wd_c_ci] if estimable and np.all(np.isfinite(fit.wd_c_ci)) else None
        quantity, value = f"pooled lambda_c, {_scale(size)} ({size:,} parameters)", float(fit.wd_c) if estimable else None
        note = join_notes(f"status {fit.status}", fit.bootstrap_note(), "" if estimable else f"bracket {fit.wd_c_bracket}")
        rows.append(claim_row(WD_C_CLAIMS[_scale(size)], quantity, value, profile, fit.n_fit, ours_ci=ci, note=note,
                              horizon=horizon) if _scale(size) in WD_C_CLAIMS else
                    row(PAPER, quantity, None, value, profile, fit.n_fit, ours_ci=ci, note=note))
    summary = {"profile": profile, "counts": {k: {str(w): v for w, v in c.items()} for k, c in counts.items()},
               "totals": {k: {str(w): v for w, v in c.items()} for k, c in totals.items()}, "fits": fits, "sweep": info}
    write_outputs(out, summary, rows)
    return summary


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig9"
    records = sweep_records("multitask.yaml", args.profile, out, args.launch)[0]
    if args.profile == "smoke":  # addition at the same lambdas, seeds and model: the Fig. 5 smoke runs
        wds, seeds = {r["config"]["wd"] for r in records}, {r["config"]["seed"] for r in records}
        records += [r for r in sweep_records("canonical_wd.yaml", "smoke", Path(args.out) / "fig5", args.launch)[0]
                    if r["config"]["wd"] in wds and r["config"]["seed"] in seeds]
    analyse(records, args.profile, out)
    print(f"fig9: {out / 'fig9_multitask.png'}")
    return out


if __name__ == "__main__":
    cli(main)
