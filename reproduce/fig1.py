"""Fig. 1: the regime diagram over weight decay x model size (grok / no-grok / collapse).

    python -m reproduce.fig1 --profile smoke|paper --out reproduction [--collapse-s-bar 0.9995]

The first size is the canonical sweep of Fig. 5 (read from, or run into, ``<out>/fig5/sweep``);
configs/sweeps/regime_map.yaml adds the others and lambda = 10. A run's regime comes from
:func:`grok_lightning.stats.classify_run` (collapse = s_bar >= 0.9995 and sigma_H <= 1e-3 at the
horizon without grokking; both thresholds are options here).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from grok_lightning.plots.common import caption
from grok_lightning.plots.regimes import figure_regime_map
from grok_lightning.stats import CollapseCriterion, classify_run, fit_critical_weight_decay, records_to_arrays
from reproduce.claims import claim, claim_row
from reproduce.common import cli, describe, n_params, parse_args, sweep_records, sweep_summary, write_outputs
from reproduce.report import row

PAPER = "2605.20441 Fig. 1"


def analyse(small: list[dict], others: list[dict], profile: str, out: Path, criterion: CollapseCriterion,
            wd_c: float | None) -> dict:
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
    differs = None if profile == "paper" else "model sizes and horizon (paper: 0.82M, 19M, 85M x 5,000 epochs)"
    fig = figure_regime_map(points, wd_c, caption(profile, details, differs, figure="fig1"),
                            paper_wd_c=claim("wd.lambda_c").value)
    fig.savefig(out / "fig1_regime_map.png", dpi=130)
    at_10 = [r for r in records if r["config"]["wd"] >= 5]
    collapsed = [r for r in at_10 if classify_run(r, criterion) == "collapse"]
    last_s = [r["history"]["mean_similarity"][-1] for r in at_10 if r["history"].get("mean_similarity")]
    rows = [
        row(PAPER, "fraction of lambda = 10 runs in collapse (s_bar = 1, no grok)", None,
            len(collapsed) / len(at_10) if at_10 else None, profile, len(at_10)),
        claim_row("fig1.collapse", "s_bar at the horizon, lambda = 10 (median)", float(np.median(last_s)) if last_s else None,
                  profile, len(last_s), horizon=info["horizon"]),
    ]
    summary = {"profile": profile, "points": points, "wd_c": wd_c, "sizes": sizes,
               "criterion": criterion.__dict__, "sweep": info}
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
    others = sweep_records("regime_map.yaml", args.profile, out, args.launch)[0]
    fits = root / "fig5" / "fits.json"
    wd_c = None
    if fits.exists() and json.loads(fits.read_text()).get("profile") == args.profile:
        wd_c = json.loads(fits.read_text()).get("wd_c_used")
    summary = analyse(small, others, args.profile, out, criterion, wd_c)
    print(f"fig1: {len(summary['points'])} runs over sizes {summary['sizes']}; {out / 'fig1_regime_map.png'}")
    return out


if __name__ == "__main__":
    cli(main)
