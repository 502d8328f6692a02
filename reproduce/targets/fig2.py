"""Fig. 2: two-phase dynamics (test accuracy, s_bar, sigma_H over epochs, median and IQR over seeds).

    python -m reproduce.targets.fig2 --profile smoke|medium|paper --out reproduction

Rows, each the paper's statistic on the same object as the paper's: Fig. 2 shows median curves
over runs, so s_bar at initialisation, its Phase-1 peak (epochs 100-500), the Phase-1 rise (that
peak minus the value at initialisation), the Phase-2 minimum (epochs 500-3,000) and the peak of
sigma_H are read off the median curves of our runs, with an exact bootstrap over runs for their
interval; t_grok is tested by rank against the paper's published grok epochs at lambda = 1. The
per-run memorisation minimum and the RMS distances of the whole curves to the paper's read-off
are context rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from grok_lightning.plots.figures import figure_two_phase
from grok_lightning.stats import fit_tanh_rise, phase_summary
from grok_lightning.stats.intervals import bootstrap_runs
from grok_lightning.stats.phases import history_curve, phase1_rise_window
from grok_lightning.stats.samples import rank_test
from grok_lightning.stats.trajectory import trajectory_distances
from reproduce.report import claim, claim_row, join_notes, row
from reproduce.report.sources import claim_sample
from reproduce.targets.common import REPO, caption, cli, describe, median_ci, parse_args, sweep_records, write_outputs

PAPER = "2605.20441 Fig. 2"
#: the released reading's history columns
S_BAR, SIGMA_H = "mean_similarity", "entropy_std"
PHASE1, PHASE2 = (100, 500), (500, 3000)


def _curve(histories: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    from grok_lightning.stats.trajectory import median_curve

    return median_curve(histories, key)


def _window(epochs: np.ndarray, values: np.ndarray, lo: float, hi: float, closed_lo: bool = False) -> np.ndarray:
    """The finite values in the epoch window; a NaN alone when the runs do not reach it."""
    keep = ((epochs >= lo) if closed_lo else (epochs > lo)) & (epochs <= hi) & np.isfinite(values)
    return values[keep] if keep.any() else np.array([np.nan])


def _at(histories: list[dict], key: str, epoch: float) -> float:
    """The median curve at one epoch (NaN when no run has it)."""
    return dict(zip(*_curve(histories, key))).get(epoch, np.nan)


#: the paper's curves start at epoch 1 (a log axis has no epoch 0), so its start is read there
FIRST = 1.0
#: claim -> (its statistic on the median curves of the runs whose histories are passed, the no-effect value)
CURVE_STATISTICS = {
    "fig2.s_bar_init": (lambda h: _at(h, S_BAR, FIRST), None),
    "fig2.s_bar_peak": (lambda h: np.max(_window(*_curve(h, S_BAR), *PHASE1)), None),
    "fig2.phase1_rise": (lambda h: np.max(_window(*_curve(h, S_BAR), *PHASE1)) - _at(h, S_BAR, FIRST), 0.0),
    "fig2.s_bar_dip": (lambda h: np.min(_window(*_curve(h, S_BAR), *PHASE2, closed_lo=True)), None),
    "fig2.sigma_peak": (lambda h: np.max(_window(*_curve(h, SIGMA_H), 100, np.inf)), None),
    "fig2.sigma_init": (lambda h: _at(h, SIGMA_H, FIRST), None),
}


def curve_rows(usable: list[dict], horizon: int, profile: str) -> list[dict]:
    """One row per Fig. 2 claim read off the median curves: the statistic of our median curve and
    its exact bootstrap interval over runs."""
    histories = [r["history"] for r in usable]
    rows = []
    for claim_id, (statistic, null) in CURVE_STATISTICS.items():
        on = lambda idx: float(statistic([histories[i] for i in idx]))
        try:
            interval = bootstrap_runs(len(histories), on)
        except ValueError:  # a window our runs do not reach
            rows.append(claim_row(claim_id, claim(claim_id).claim, None, profile, len(histories), horizon=horizon))
            continue
        rows.append(claim_row(claim_id, f"{claim(claim_id).claim}: {claim(claim_id).statistic}",
                              interval.estimate, profile, len(histories), ours_ci=interval.ci,
                              ci_level=interval.coverage, null=null, horizon=horizon,
                              note=f"exact bootstrap over the {len(histories)} runs: its coverage is at most that of "
                                   f"their range ({interval.coverage:.0%}); released reading, test split"
                                   + (f"; at initialisation (epoch 0) the median curve is {_at(histories, S_BAR, 0.0):.3f}"
                                      if claim_id == "fig2.s_bar_init" else "")))
    return rows


def tanh_rows(usable: list[dict], horizon: int, profile: str) -> list[dict]:
    """The paper's tanh, s0 + A tanh((t - t_c)/tau), fitted to each run's Phase-1 rise by
    unconstrained least squares, and the median R^2 over runs (``fig2.tanh_r2``); the window ending
    at t_grok (strictly before grokking) is a sensitivity row. A run whose rise has fewer than 5
    evaluations has no fit and is counted out (the note says how many)."""
    rows = []
    for before_grok in (False, True):
        fits = []
        for r in usable:
            window = phase1_rise_window(r["history"], r["grok_epoch"], before_grok=before_grok)
            epochs, s_bar = history_curve(r["history"], S_BAR)
            inside = window is not None and np.isfinite(s_bar) & (epochs >= window[0]) & (epochs <= window[1])
            if window is not None and inside.sum() >= 5:
                fits.append(fit_tanh_rise(epochs[inside], s_bar[inside]))
        r2 = [f.r2 for f in fits if np.isfinite(f.r2)]
        value, ci, level = median_ci(r2) if r2 else (None, None, None)
        where = ("from s_bar's minimum while memorised to t_grok" if before_grok
                 else "from s_bar's minimum while memorised to its peak around grokking (the Phase-1 rise)")
        note = join_notes(where, f"R^2 per run {[round(v, 3) for v in r2]}",
                          f"R^2 > 0.9 in {sum(v > 0.9 for v in r2)}, > 0.7 in {sum(v > 0.7 for v in r2)}",
                          f"degenerate (t_c or tau not pinned down by the window) in {sum(f.degenerate for f in fits)} "
                          f"of {len(fits)}", f"{len(usable) - len(r2)} of {len(usable)} runs without a fit" if
                          len(r2) < len(usable) else "")
        rows.append(claim_row("fig2.tanh_r2", "median R^2 of the unconstrained tanh fit to s_bar's Phase-1 rise"
                              + (" (window ending at t_grok)" if before_grok else ""), value, profile, len(r2),
                              ours_ci=ci, ci_level=level, horizon=horizon, note=note,
                              **({"sensitivity": "the window ends at t_grok"} if before_grok else {})))
    return rows


def distance_rows(records: list[dict], horizon: int, profile: str) -> list[dict]:
    """The whole trajectory: RMS distance of our median curves to the paper's (read off its Fig. 2)."""
    histories = [r["history"] for r in records]
    rows = []
    for lo in (1, 500):
        if lo >= horizon:
            continue
        distances = trajectory_distances(histories, lo, min(horizon, 3000))
        for curve, d in distances.items():
            rows.append(row(PAPER, f"RMS distance of the median {curve} curve to the paper's median, epochs {lo}-{d.hi}",
                            None, d.rms, profile, len(histories),
                            note=f"{d.n_points} read-off epochs (reference/fig2_median_read_off.csv, reading error "
                                 f"~0.005 on s_bar and sigma_H, 0.02 on test accuracy); context, no claim of the "
                                 "paper; released reading, test split"))
    return rows


#: the Fig. 2 trajectory search's scores (reproduce/pilots/fig2_search.py; docs/fig2_search.md)
SEARCH_SUMMARY = REPO / "results" / "pilots" / "fig2_search" / "summary.json"


def search_rows(profile: str, summary_path: Path = SEARCH_SUMMARY) -> list[dict]:
    """The best lasting training choice of the Fig. 2 search (medium pilots, lambda = 1): its s_bar
    and sigma_H distances against the goal, and how many choices were tried."""
    if profile != "medium" or not summary_path.is_file():
        return []
    arms = json.loads(summary_path.read_text())["arms"]
    tried = {name: arm for name, arm in arms.items() if not name.startswith("default")}
    if not tried:
        return []
    name, best = min(tried.items(), key=lambda item: item[1]["score"])
    default = arms.get("default bf16") or arms.get("default") or {}
    rows = []
    for curve in ("s_bar", "sigma_H"):
        rows.append(row(
            PAPER, f"Fig. 2 trajectory search: RMS distance of the {curve} curve for the best of {len(tried)} lasting "
                   f"training choices tested ({name}), epochs 1-{best['horizon']}",
            None, best["distance"][curve], profile, len(best["seeds"]),
            note=f"context, no claim of the paper; the default scores {default.get('distance', {}).get(curve, float('nan')):.3f}; "
                 f"choices tried: {', '.join(sorted(tried))}; docs/fig2_search.md"))
    return rows


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig2"
    records = sweep_records("fig2.yaml", args.profile, out, args.launch)[0]
    usable = [r for r in records if r["status"] == "completed"]
    seeds = sorted(r["config"]["seed"] for r in usable)
    per_seed = {str(r["config"]["seed"]): phase_summary(r["history"], r["grok_epoch"]).to_dict() for r in usable}
    horizon = max(r["config"]["max_epochs"] for r in usable)
    details = (f"lambda = {usable[0]['config']['wd']}, seeds {seeds} (n = {len(usable)}), horizon {horizon} epochs"
               f"{', stop 100 epochs after grokking' if args.profile == 'smoke' else ''}\n{describe(usable[0])}")
    differs = {"paper": None,
               "smoke": f"{len(usable)} seeds (paper 50); runs stop after grokking, so Phase 2 (1,000-3,000) is not reached",
               "medium": f"{len(usable)} seeds (paper 50), horizon {horizon} epochs (paper 5,000)"}[args.profile]
    fig = figure_two_phase(usable, caption(args.profile, details, differs, figure="fig2"))
    fig.savefig(out / "fig2_two_phase.png", dpi=130)
    column = lambda key: [s[key] for s in per_seed.values() if s[key] is not None]
    rows = curve_rows(usable, horizon, args.profile)
    grok = [float(r["grok_epoch"]) for r in usable if r["grok_epoch"] is not None]
    sample = claim_sample("wd.t_grok_1")
    median, ci, level = median_ci(grok)
    test = rank_test(grok, sample) if grok else None
    rows.append(claim_row("wd.t_grok_1", "t_grok at lambda = 1 (median; rank test against the published grok epochs)",
                          median if grok else None, args.profile, len(grok), ours_ci=ci, ci_level=level,
                          horizon=horizon, runs=grok, test_p=None if test is None else test.p,
                          test_name=f"Mann-Whitney U ({'exact' if test and test.exact else 'normal approx.'})",
                          note=f"ours {', '.join(f'{t:g}' for t in sorted(grok))}; the paper's published sample "
                               f"{', '.join(f'{t:g}' for t in sorted(sample))}"
                               + ("" if test is None else f"; Mann-Whitney p = {test.p:.2g}")))
    memorised = "memorised = from the first evaluation with train accuracy >= 0.99 to t_grok"
    for key, quantity, note in (
        ("s_bar_memorised", "s_bar minimum while memorised (median over runs)", memorised),
        ("s_bar_min_before_grok", "s_bar minimum before t_grok, early transient included (median over runs)",
         "the paper's Fig. 2 median dips to ~0.88 near epoch 5, before memorisation"),
    ):
        values = column(key)
        value, ci, level = median_ci(values) if values else (None, None, None)
        note = join_notes(note, f"{len(values)}/{len(usable)} seeds defined" if len(values) < len(usable) else "")
        rows.append(row(PAPER, quantity, None, value, args.profile, len(values), ours_ci=ci, ci_level=level, note=note))
    rows += tanh_rows(usable, horizon, args.profile)
    rows += distance_rows(usable, horizon, args.profile) + search_rows(args.profile)
    summary = {"profile": args.profile, "seeds": seeds, "horizon": horizon, "n_runs": len(records),
               "statuses": {r["run_id"] or r["name"]: r["status"] for r in records}, "per_seed": per_seed,
               "config": usable[0]["config"] if usable else None}
    write_outputs(out, summary, rows)
    print(f"fig2: {out / 'fig2_two_phase.png'}")
    return out


if __name__ == "__main__":
    cli(main)
