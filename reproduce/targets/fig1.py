"""Fig. 1: the regime diagram over weight decay x model size (grok / no-grok / collapse).

    python -m reproduce.targets.fig1 --profile smoke|medium|paper --out reproduction [--collapse-s-bar 0.9995]

The first size is the canonical sweep of Fig. 5 (read from, or run into, ``<out>/fig5/sweep``);
configs/sweeps/regime_map.yaml adds the others and lambda = 10 (medium: lambda 10 and 3 on the
canonical model only; the 85M claim's row gives the measured cost of the runs it needs). A run's regime comes from
:func:`grok_lightning.stats.classify_run` (collapse = s_bar >= 0.9995 and sigma_H <= 1e-3 at the
horizon without grokking; both thresholds are options here).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from grok_lightning.plots.regimes import figure_regime_map
from grok_lightning.stats import CollapseCriterion, classify_run, fit_critical_weight_decay, records_to_arrays
from grok_lightning.stats.intervals import median_interval
from reproduce.report import claim, claim_row, row
from reproduce.targets.common import (
    caption,
    cli,
    describe,
    n_params,
    parse_args,
    planned_configs,
    records_if_any,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.targets.costs import compute_needed

PAPER = "2605.20441 Fig. 1"


def planned_collapse_runs(profile: str) -> list[dict]:
    """The configs the profile plans at lambda >= 5 (the collapse side), over both sweep files."""
    return [c for name in ("canonical_wd.yaml", "regime_map.yaml") for c in planned_configs(name, profile)
            if c["model"]["init_args"]["weight_decay"] >= 5]


def shortest_horizon(records: list[dict], default=None):
    """The smallest max_epochs among ``records``: the horizon every one of them reached."""
    return min((r["config"].get("max_epochs") or 0 for r in records), default=default)


def planned_at_collapse(profile: str) -> str:
    """Why there is no lambda >= 5 run yet: the runs the profile plans there, or that it plans none."""
    planned = planned_collapse_runs(profile)
    if not planned:
        return f"no lambda = 10 run in the {profile} profile"
    epochs = sorted({c["trainer"]["max_epochs"] for c in planned})
    return f"none shipped yet of the {len(planned)} lambda = 10 runs planned at {', '.join(f'{e:,}' for e in epochs)} epochs"


def analyse(small: list[dict], others: list[dict], profile: str, out: Path, criterion: CollapseCriterion,
            wd_c: float | None, missing: list[str] | None = None) -> dict:
    """The regime map and its rows; ``missing``: what the report should say is not there yet."""
    out.mkdir(parents=True, exist_ok=True)
    records = small + others
    points = [{"wd": r["config"]["wd"], "n_params": n_params(r), "regime": classify_run(r, criterion),
               "seed": r["config"]["seed"], "status": r["status"]} for r in records]
    if wd_c is None:
        wd, grokked, _ = records_to_arrays([r for r in small if r["status"] in ("completed", "diverged")])
        fit = fit_critical_weight_decay(wd, grokked, n_bootstrap=0)
        wd_c = fit.wd_c if np.isfinite(fit.wd_c) else None
    info = sweep_summary(records)
    sizes = sorted({p["n_params"] for p in points})
    details = (f"{info['text']}\nsizes (parameters) {sizes}; collapse = no grok and s_bar >= {criterion.s_bar_min} "
               f"and sigma_H <= {criterion.sigma_h_max} at the horizon\nsmallest-size runs: {describe(small[0])}")
    differs = {"paper": None, "medium": "the 0.82M model only (19M and 85M: GPU-sized); lambda 3 at 1,000 epochs "
               "(paper: 0.82M, 19M, 85M x 5,000 epochs)"}.get(profile, "model sizes and horizon (paper: 0.82M, 19M, "
                                                                     "85M x 5,000 epochs)")
    fig = figure_regime_map(points, wd_c, caption(profile, details, differs, figure="fig1"),
                            paper_wd_c=claim("wd.lambda_c").value)
    fig.savefig(out / "fig1_regime_map.png", dpi=130)
    at_10 = [r for r in records if r["config"]["wd"] >= 5]
    collapsed = [r for r in at_10 if classify_run(r, criterion) == "collapse"]
    last_s = [r["history"]["mean_similarity"][-1] for r in at_10 if r["history"].get("mean_similarity")]
    # the order-statistic interval of the median (its real coverage: 75% for 3 runs)
    median = median_interval(last_s) if last_s else None
    horizon_10 = shortest_horizon(at_10, default=info["horizon"])
    waiting = None if at_10 else planned_at_collapse(profile)
    rows = [
        row(PAPER, "fraction of lambda = 10 runs in collapse (s_bar = 1, no grok)", None,
            len(collapsed) / len(at_10) if at_10 else None, profile, len(at_10), not_run=waiting, horizon=horizon_10),
        claim_row("fig1.collapse", "s_bar at the horizon, lambda = 10 (median)", median.estimate if median else None,
                  profile, len(last_s), horizon=horizon_10, ours_ci=median.ci if median else None,
                  ci_level=median.coverage if median else None, not_run=waiting,
                  note=f"s_bar per run {[round(s, 4) for s in last_s]}; {len(collapsed)}/{len(at_10)} classified "
                       f"collapse; {len(at_10)} of the {len(planned_collapse_runs(profile))} planned runs shipped"
                       if at_10 else ""),
    ]
    for wd in sorted({r["config"]["wd"] for r in records if 2 < r["config"]["wd"] < 5}):  # between grokking and collapse
        at_wd = [r for r in records if r["config"]["wd"] == wd]
        mine = [classify_run(r, criterion) for r in at_wd]
        rows.append(row(PAPER, f"regimes at lambda = {wd:g} (context: the edge between grokking and collapse)", None,
                        mine.count("grok") / len(mine), profile, len(mine),
                        horizon=shortest_horizon(at_wd),
                        note=", ".join(f"{mine.count(k)} {k}" for k in sorted(set(mine)))))
    if max(sizes, default=0) < 50e6:  # no 85M run here: the null-state claim needs one
        rows.append(claim_row("fig1.null_85M", "s_bar at epoch 3,000 of the 85M model, lambda 1", None, profile, 0,
                              not_run=compute_needed({"fig1_85M": "85M E5 runs"}) or "GPU-sized"))
    summary = {"profile": profile, "points": points, "wd_c": wd_c, "sizes": sizes,
               "criterion": criterion.__dict__, "sweep": info, "missing": missing or []}
    write_outputs(out, summary, rows)
    return summary


def main(argv=None) -> Path:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--collapse-s-bar", type=float, default=CollapseCriterion.s_bar_min)
    extra.add_argument("--collapse-sigma-h", type=float, default=CollapseCriterion.sigma_h_max)
    known, rest = extra.parse_known_args(argv)
    args = parse_args(__doc__, rest)
    criterion = CollapseCriterion(known.collapse_s_bar, known.collapse_sigma_h)
    root = Path(args.out)
    out = root / "fig1"
    small = sweep_records("canonical_wd.yaml", args.profile, root / "fig5", args.launch)[0]
    # no run of the other sizes / lambdas yet: the map from Fig. 5's runs
    others, missing = records_if_any("regime_map.yaml", args.profile, out, args.launch, "fig1")
    fits = root / "fig5" / "fits.json"
    wd_c = None
    if fits.exists() and json.loads(fits.read_text()).get("profile") == args.profile:
        wd_c = json.loads(fits.read_text()).get("wd_c_used")
    summary = analyse(small, others, args.profile, out, criterion, wd_c, missing=missing)
    print(f"fig1: {len(summary['points'])} runs over sizes {summary['sizes']}; {out / 'fig1_regime_map.png'}")
    return out


if __name__ == "__main__":
    cli(main)
