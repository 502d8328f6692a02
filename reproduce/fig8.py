"""Fig. 8 (E12): causal interventions at peak differentiation, paired over seeds.

    python -m reproduce.fig8 --profile smoke|medium|paper --out reproduction [--window W]

1. Group A (control): configs/sweeps/interventions.yaml. Its ``InterventionSource`` callback keeps
   a checkpoint at each run's peak-sigma_H epoch E (epochs > 100) and each weight matrix's norm
   trajectory.
2. Groups B and C start from A's checkpoint at E (identical to A up to E, half the cost) with the
   callback of configs/interventions/head_reinit.yaml (B) or weight_norm_clip.yaml (C) acting at E.
   The derived sweep files are written next to their runs (``<out>/fig8/B/sweep_file.yaml``).
3. Every group is scored by one rule on one window, (E, E + W] (``--window``; default: to the
   end of the run): peak sigma_H, min s_bar; plus grok epoch and final test accuracy. The
   whole-run peak (epochs > 100) is a secondary row. Paired contrasts B-A, C-A, C-B per lambda
   and pooled (paired t, Wilcoxon, Cohen's d, bootstrap CI), Bonferroni over the whole family;
   forest plot of d.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import yaml

from grok_lightning.plots.common import caption
from grok_lightning.plots.interventions import figure_forest
from grok_lightning.stats import correct, paired_comparison, peak_entropy_std
from grok_lightning.stats.validity import decided_early, peak_check, summarise_checks
from reproduce.common import (
    REPO,
    SWEEPS,
    cli,
    describe,
    model_shape,
    parse_args,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.report import row

PAPER = "2605.20441 Fig. 8 (E12)"
OUTCOMES = ("peak_entropy_std", "min_similarity", "grok_epoch", "final_test_acc", "peak_entropy_std_whole_run")
CONTRASTS = (("B", "A"), ("C", "A"), ("C", "B"), ("Cm", "A"))
#: intervention groups: callback file and overrides. C clips each matrix to its own median norm over
#: the run up to E (the reading that fits the paper's mild C); Cm to the median across matrices at E
GROUPS = {"B": ("head_reinit.yaml", {}), "C": ("weight_norm_clip.yaml", {}),
          "Cm": ("weight_norm_clip.yaml", {"reference": "matrices"})}
#: published paired contrasts on peak sigma_H (intervention_stats.json; PAPER_WD_REGIMES.md section 7)
PAPER_D = {("B-A", "0.05"): (-1.190, 4.46e-3), ("B-A", "pooled"): (-0.876, 9.3e-4), ("B-A", "0.015"): (-0.609, 0.086),
           ("C-A", "pooled"): (-0.406, 0.094), ("C-B", "0.05"): (1.586, 1.4e-3)}
PAPER_LAMBDAS = sorted({stratum for _, stratum in PAPER_D if stratum != "pooled"}, key=float)


def group_callback(group: str, profile: str, epoch: int) -> dict:
    filename, overrides = GROUPS[group]
    spec = yaml.safe_load((REPO / "configs" / "interventions" / filename).read_text())
    init_args = dict(spec["init_args"], **(spec.get("profiles") or {}).get(profile, {}), **overrides, epoch=int(epoch))
    return {"class_path": spec["class_path"], "init_args": init_args}


def derived_sweep(group: str, profile: str, peaks: dict[tuple[int, float], int], starts: dict[tuple[int, float], str],
                  out: Path) -> Path:
    """The control sweep, each run starting from its control's peak checkpoint with one
    intervention callback acting there (epoch and checkpoint zipped with (seed, lambda))."""
    sweep = yaml.safe_load((SWEEPS / "interventions.yaml").read_text())
    sweep["name"] = f"interventions_{group}"
    sweep["base"] = str(REPO / sweep["base"])
    keys = sorted(peaks)
    source = dict(sweep["overrides"]["trainer.callbacks"][0])
    source["init_args"] = dict(source.get("init_args") or {}, save_peak=False)  # the trajectory comes from A
    sweep["overrides"]["trainer.callbacks"] = [source, group_callback(group, profile, 1)]
    sweep["grid"] = {}
    for p in sweep.get("profiles", {}).values():
        p["grid"] = {k: None for k in (p.get("grid") or {})}
    sweep["zip"] = {"seed": [k[0] for k in keys], "wd": [k[1] for k in keys],
                    "trainer.callbacks.1.init_args.epoch": [peaks[k] for k in keys],
                    "run.start_from": [starts[k] for k in keys]}
    path = out / "sweep_file.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# derived by reproduce/fig8.py from configs/sweeps/interventions.yaml ({group})\n"
                    + yaml.safe_dump(sweep, sort_keys=False))
    return path


def outcomes(record: dict, epoch: int, window: int | None = None) -> dict:
    """Outcomes of one run on the scoring window (E, E + W] (to the end when W is None).

    The same rule for A, B and C: the evaluation labelled E comes before the intervention
    (history epoch E = after E epochs; the callback acts at the start of the next one) and is
    A's own maximum, so including it would bias A upward and B - A downward. The whole-run peak
    (epochs > 100, every group alike) is kept as a secondary outcome.
    """
    h = record["history"]
    ep = np.asarray(h["epoch"], float)
    sim = np.asarray([np.nan if v is None else v for v in h.get("mean_similarity", [None] * len(ep))], float)
    sig = np.asarray([np.nan if v is None else v for v in h.get("entropy_std", [None] * len(ep))], float)
    end = ep[-1] if window is None else epoch + window
    inside = (ep > epoch) & (ep <= end)
    ok = record["status"] == "completed"
    pick = lambda values, reduce: float(reduce(values[inside & np.isfinite(values)])) if ok and (inside & np.isfinite(values)).any() else np.nan
    whole, _ = peak_entropy_std(h, after_epoch=100)
    return {"peak_entropy_std": pick(sig, np.max), "min_similarity": pick(sim, np.min),
            "grok_epoch": float(record["grok_epoch"]) if ok and record["grok_epoch"] is not None else np.nan,
            "final_test_acc": record.get("final_test_acc") if ok else np.nan,
            "peak_entropy_std_whole_run": whole if ok else np.nan}


#: the first epochs after E in which an intervention group's peak is the intervention's own
#: transient (a fresh head is more diffuse than trained ones), not the dynamics it sets off
EARLY_EPOCHS = 20
CHECK_WORDS = {"flat": "A's peak sigma_H does not stand out of its trajectory",
               "edge": "E sits on the edge of its allowed range",
               "early": f"the intervention group's peak falls within {EARLY_EPOCHS} epochs after E"}


def pair_checks(table: dict, keys: list, peaks: dict, allowed: tuple[float, float]) -> dict:
    """Per pair: whether A shows a peak to act on and whether each intervention group's outcome is
    decided at the first evaluations after E (grok_lightning.stats.validity)."""
    checks = {}
    for key in keys:
        h = table["A"][key]["history"]
        lo, hi = allowed
        peak = peak_check(h["epoch"], h.get("entropy_std", []), lo, hi if hi is not None else math.inf)
        checks[key] = {"A": {**peak.to_dict(), "E": peaks[key]}}
        for g in table:
            if g != "A":
                gh = table[g][key]["history"]
                checks[key][g] = {"early": decided_early(gh["epoch"], gh.get("entropy_std", []), peaks[key], EARLY_EPOCHS)}
    return checks


def invalid_reason(checks: dict, contrast: str) -> str | None:
    """Why a contrast cannot test the paper's claim (``None`` when a majority of pairs can)."""
    b, a = contrast.split("-")
    units = [{"flat": not c["A"]["stands_out"], "edge": c["A"]["on_edge"],
              "early": any(c[g]["early"] for g in (b, a) if g != "A")} for c in checks.values()]
    return summarise_checks(units, CHECK_WORDS)


PILOT_SUMMARY = REPO / "results" / "pilots" / "e12_pilot" / "summary.json"


def pilot_rows(profile: str, summary_path: Path = PILOT_SUMMARY) -> list[dict]:
    """The E12 pilot on the canonical model (medium only; reproduce/pilots/e12_pilot.py): per
    lambda, control group A's mean peak sigma_H before grokking against the paper's A, and how
    many runs show a peak an intervention could act at."""
    if profile != "medium" or not summary_path.is_file():
        return []
    summary = json.loads(summary_path.read_text())
    paper = summary["paper_A"]
    rows = []
    for wd, text in summary["verdicts"].items():
        runs = [r for r in summary["runs"] if f"{r['wd']:g}" == wd]
        peaks = [r["released"]["peak"] for r in runs if r["released"] and math.isfinite(r["released"]["peak"])]
        min_s = [r["min_s_bar_before_grok"] for r in runs if r["min_s_bar_before_grok"] is not None]
        groks = [str(r["grok_epoch"] or f"none by {r['horizon']}") for r in runs]
        rows.append(row(
            PAPER, f"E12 pilot, control A on the canonical model at lambda {wd}: mean peak sigma_H before grokking",
            paper["peak_sigma_H"], float(np.mean(peaks)) if peaks else None, profile, len(runs),
            note=f"{text}; min s_bar before grokking {np.mean(min_s):.3f} (paper's A {paper['min_s_bar']}); "
                 f"t_grok {', '.join(groks)} (paper's A mean {paper['grok_epoch']}); paper values are group A's "
                 f"means over lambda 0.015 and 0.05 (n = 20); seeds {sorted(r['seed'] for r in runs)}; "
                 "results/pilots/e12_pilot/e12_pilot.md, docs/e12.md"))
    return rows


def analyse(groups: dict[str, list[dict]], peaks: dict, profile: str, out: Path, n_bootstrap: int = 10000,
            window: int | None = None, allowed: tuple[float, float | None] = (100, None)) -> dict:
    """Paired tests of every contrast; ``allowed``: the range (after, before] in which E was taken."""
    out.mkdir(parents=True, exist_ok=True)
    table = {g: {(r["config"]["seed"], r["config"]["wd"]): r for r in recs} for g, recs in groups.items()}
    names = list(groups)
    keys = sorted(k for k in peaks if all(k in table[g] for g in names))
    checks = pair_checks(table, keys, peaks, allowed)
    values = {g: {o: np.array([outcomes(table[g][k], peaks[k], window)[o] for k in keys], float) for o in OUTCOMES}
              for g in names}
    wds = sorted({k[1] for k in keys})
    strata = [(f"{w:g}", np.array([k[1] == w for k in keys])) for w in wds] + ([("pooled", np.ones(len(keys), bool))] if len(wds) > 1 else [])
    tests = []
    for b, a in (c for c in CONTRASTS if c[0] in groups and c[1] in groups):
        for name, mask in strata:
            for o in OUTCOMES:
                x, y = values[a][o][mask], values[b][o][mask]
                try:
                    res = paired_comparison(x, y, n_bootstrap=n_bootstrap, nan_policy="omit").to_dict()
                except ValueError as err:
                    res = {"error": str(err)}
                tests.append({"contrast": f"{b}-{a}", "stratum": name, "outcome": o, **res})
    family = [t for t in tests if t.get("p_value_t") is not None]
    if family:
        reject, p_adj = correct([t["p_value_t"] for t in family], "bonferroni")
        for t, r, p in zip(family, reject, p_adj):
            t["p_bonferroni"], t["reject_bonferroni"] = float(p), bool(r)
    excluded = {g: [r["excluded_reason"] for r in recs if r["status"] == "excluded"] for g, recs in groups.items()}
    info = sweep_summary(groups["A"])
    horizon = info["horizon"]
    where = f"(E, E + {window}]" if window else "(E, end of run]"
    details = (f"{info['text']}; n pairs = {len(keys)}; E (A's peak-sigma_H epoch) {sorted(set(peaks.values()))}; "
               f"outcomes scored on {where} for A, B and C alike; "
               + "; ".join(f"{g}: {_args(g, profile)}" for g in names if g != "A")
               + f"; excluded {excluded}\n{describe(groups['A'][0])}")
    differs = None if profile == "paper" else (
        f"{model_shape(groups['A'][0])}, lambda {info['wds']}, {len(info['seeds'])} seeds, {horizon} epochs "
        "(paper: canonical 4L x 8H, lambda 0.015 and 0.05, 10 seeds, 10,000 epochs)")
    fig = figure_forest([t for t in tests if t["outcome"] == "peak_entropy_std"], PAPER_D, caption(profile, details, differs, figure="fig8"))
    fig.savefig(out / "fig8_forest.png", dpi=130)
    rows = []
    for t in tests:
        paper, compared = PAPER_D.get((t["contrast"], t["stratum"])), ""
        if paper is None and t["stratum"] not in PAPER_LAMBDAS:  # another lambda (smoke, medium): the pooled effect
            paper = PAPER_D.get((t["contrast"], "pooled"))
            compared = f"paper d pooled over lambda {' and '.join(PAPER_LAMBDAS)}; " if paper else ""
        main_row = t["outcome"] == "peak_entropy_std"
        if not (main_row or t["outcome"] == "peak_entropy_std_whole_run"):
            continue
        if paper is None and t["stratum"] != "pooled" and len(wds) > 1:
            continue
        ci = t.get("ci_95_diff") or [None, None]
        note = f"{compared}mean {t['contrast']} {_g(t.get('mean_diff'))} [{_g(ci[0])}, {_g(ci[1])}] " \
               f"({t['contrast'].split('-')[1]} {_g(t.get('mean_a'))}); p_t = {_g(t.get('p_value_t'))} (Bonferroni {_g(t.get('p_bonferroni'))} " \
               f"over {len(family)} tests); paper p_t = {paper[1] if paper else '-'}"
        quantity = (f"Cohen's d, peak sigma_H on {where}, {t['contrast']} at lambda {t['stratum']}" if main_row else
                    f"Cohen's d, whole-run peak sigma_H (secondary), {t['contrast']} at lambda {t['stratum']}")
        rows.append(row(PAPER, quantity, paper[0] if paper else None, t.get("cohen_d"), profile, t.get("n", 0),
                        note=note, null=0.0, invalid=invalid_reason(checks, t["contrast"])))
    for g in names:
        grokked = int(np.isfinite(values[g]["grok_epoch"]).sum())
        rows.append(row(PAPER, f"group {g}: grokked / pairs", "20/20 (A, B), 19/19 (C)", f"{grokked}/{len(keys)}",
                        profile, len(keys)))
    summary = {"profile": profile, "pairs": [list(k) for k in keys], "peaks": {f"{k[0]}_{k[1]}": v for k, v in peaks.items()},
               "window": window, "tests": tests, "excluded": excluded, "sweep": info, "allowed_range": list(allowed),
               "checks": {f"{k[0]}_{k[1]}": v for k, v in checks.items()},
               "invalid": {f"{b}-{a}": invalid_reason(checks, f"{b}-{a}") for b, a in CONTRASTS if b in groups and a in groups},
               "grok_rates": {g: [int(np.isfinite(values[g]["grok_epoch"]).sum()), len(keys)] for g in names}}
    write_outputs(out, summary, rows + pilot_rows(profile))
    return summary


def _args(group: str, profile: str) -> dict:
    return {k: v for k, v in group_callback(group, profile, 1)["init_args"].items() if k != "epoch"}


def _g(x):
    return "-" if x is None else f"{x:.3g}"


def allowed_range(profile: str) -> tuple[float, float | None]:
    """(after_epoch, before_epoch) of the control's InterventionSource in this profile."""
    from grok_lightning.sweep.grid import get_dotted, load_sweep

    config = load_sweep(SWEEPS / "interventions.yaml", profile=profile).expand()[0].config
    source = next(c for c in get_dotted(config, "trainer.callbacks") if c["class_path"].endswith("InterventionSource"))
    return source["init_args"].get("after_epoch", 100), source["init_args"].get("before_epoch")


def control_peaks(control: list[dict], store: Path) -> tuple[dict, dict]:
    """Each completed control run's E and its peak checkpoint (in the run's folder of ``store``)."""
    from grok_lightning.records import iter_records

    folders = {record.get("run_id"): path.parent for path, record in iter_records(store / "runs")}
    peaks, starts = {}, {}
    for r in control:
        source = r.get("intervention_source") or {}
        if r["status"] != "completed" or source.get("peak_epoch") is None:
            continue
        key = (r["config"]["seed"], r["config"]["wd"])
        peaks[key] = int(source["peak_epoch"])
        starts[key] = str((folders[r["run_id"]] / "checkpoints" / "peak.ckpt").resolve())
    return peaks, starts


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv, extra=lambda p: p.add_argument(
        "--window", type=int, default=None, help="score outcomes on (E, E + W] (default: to the end of the run)"))
    out = Path(args.out) / "fig8"
    # each control run keeps its own peak checkpoint; B and C start from distinct ones: no ensembles
    launch = dataclasses.replace(args.launch, ensemble_size=1)
    control = sweep_records("interventions.yaml", args.profile, out / "A", launch)[0]
    peaks, starts = control_peaks(control, out / "A" / "sweep")
    if not peaks:
        raise SystemExit("fig8: no completed control run has sigma_H after epoch 100; nothing to intervene on")
    groups = {"A": control}
    for group in GROUPS:
        if group == "Cm" and args.profile == "smoke":  # the smoke budget keeps the two paper groups
            continue
        path = derived_sweep(group, args.profile, peaks, starts, out / group)
        groups[group] = sweep_records(path, args.profile, out / group, launch)[0]
    summary = analyse(groups, peaks, args.profile, out, window=args.window, allowed=allowed_range(args.profile))
    print(f"fig8: {len(summary['pairs'])} pairs; {out / 'fig8_forest.png'}")
    return out


if __name__ == "__main__":
    cli(main)
