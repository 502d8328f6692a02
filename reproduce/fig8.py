"""Fig. 8 (E12): causal interventions at peak differentiation, paired over seeds.

    python -m reproduce.fig8 --profile smoke|paper --out reproduction

1. Group A (control): configs/sweeps/interventions.yaml.
2. Each A run's peak-sigma_H epoch (epochs > 100) is where B and C intervene.
3. Groups B and C: the same runs from scratch (same seed, same everything) plus the callback of
   configs/interventions/head_reinit.yaml (B) or weight_norm_clip.yaml (C) at that epoch. The
   derived sweep files are written next to their runs (``<out>/fig8/B/sweep_file.yaml``).
4. Outcomes per run: peak sigma_H after the intervention epoch (A: its peak), min s_bar after
   it, grok epoch, final test accuracy (see :func:`outcomes`). Paired contrasts B-A, C-A, C-B
   per lambda and pooled (paired t, Wilcoxon, Cohen's d, bootstrap CI), Bonferroni over the
   whole family; forest plot of d.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from grok_lightning.plots.common import caption
from grok_lightning.plots.interventions import figure_forest
from grok_lightning.stats import correct, paired_comparison, peak_entropy_std
from reproduce.common import REPO, SWEEPS, describe, parse_args, sweep_records, sweep_summary, write_outputs
from reproduce.report import row

PAPER = "2605.20441 Fig. 8 (E12)"
OUTCOMES = ("peak_entropy_std", "min_similarity", "grok_epoch", "final_test_acc")
CONTRASTS = (("B", "A"), ("C", "A"), ("C", "B"))
GROUP_FILES = {"B": "head_reinit.yaml", "C": "weight_norm_clip.yaml"}
#: published paired contrasts on peak sigma_H (intervention_stats.json; PAPER_WD_REGIMES.md section 7)
PAPER_D = {("B-A", "0.05"): (-1.190, 4.46e-3), ("B-A", "pooled"): (-0.876, 9.3e-4), ("B-A", "0.015"): (-0.609, 0.086),
           ("C-A", "pooled"): (-0.406, 0.094), ("C-B", "0.05"): (1.586, 1.4e-3)}


def group_callback(group: str, profile: str, epoch: int) -> dict:
    spec = yaml.safe_load((REPO / "configs" / "interventions" / GROUP_FILES[group]).read_text())
    init_args = dict(spec["init_args"], **(spec.get("profiles") or {}).get(profile, {}), epoch=int(epoch))
    return {"class_path": spec["class_path"], "init_args": init_args}


def derived_sweep(group: str, profile: str, peaks: dict[tuple[int, float], int], out: Path) -> Path:
    """The control sweep with one intervention callback whose epoch is zipped with (seed, lambda)."""
    sweep = yaml.safe_load((SWEEPS / "interventions.yaml").read_text())
    sweep["name"] = f"interventions_{group}"
    sweep["base"] = str(REPO / sweep["base"])
    keys = sorted(peaks)
    sweep.setdefault("overrides", {})["trainer.callbacks"] = [group_callback(group, profile, 1)]
    sweep["grid"] = {}
    for p in sweep.get("profiles", {}).values():
        p["grid"] = {k: None for k in (p.get("grid") or {})}
    sweep["zip"] = {"seed": [k[0] for k in keys], "wd": [k[1] for k in keys],
                    "trainer.callbacks.0.init_args.epoch": [peaks[k] for k in keys]}
    path = out / "sweep_file.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# derived by reproduce/fig8.py from configs/sweeps/interventions.yaml ({group})\n"
                    + yaml.safe_dump(sweep, sort_keys=False))
    return path


def outcomes(record: dict, epoch: int, intervened: bool) -> dict:
    """Outcomes after the intervention epoch E.

    The evaluation labelled E is taken before the intervention (history epoch E = after E
    epochs; the callback acts at the start of the next one), so B and C are read over epochs
    > E. For A, whose peak is at E by construction, the window includes E: A's value is its
    peak. This is the only reading under which the paper's B - A can be negative (over the
    whole run, B's peak could never be below A's, since both are identical up to E).
    """
    h = record["history"]
    ep = np.asarray(h["epoch"], float)
    sim = np.asarray([np.nan if v is None else v for v in h.get("mean_similarity", [None] * len(ep))], float)
    start = epoch + 1 if intervened else epoch
    after = (ep >= start) & np.isfinite(sim)
    peak, _ = peak_entropy_std(h, after_epoch=start - 1)
    ok = record["status"] == "completed"
    return {"peak_entropy_std": peak if ok else np.nan,
            "min_similarity": float(sim[after].min()) if ok and after.any() else np.nan,
            "grok_epoch": float(record["grok_epoch"]) if ok and record["grok_epoch"] is not None else np.nan,
            "final_test_acc": record.get("final_test_acc") if ok else np.nan}


def analyse(groups: dict[str, list[dict]], peaks: dict, profile: str, out: Path, n_bootstrap: int = 10000) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    table = {g: {(r["config"]["seed"], r["config"]["wd"]): r for r in recs} for g, recs in groups.items()}
    keys = sorted(k for k in peaks if all(k in table[g] for g in "ABC"))
    values = {g: {o: np.array([outcomes(table[g][k], peaks[k], g != "A")[o] for k in keys], float) for o in OUTCOMES}
              for g in "ABC"}
    wds = sorted({k[1] for k in keys})
    strata = [(f"{w:g}", np.array([k[1] == w for k in keys])) for w in wds] + ([("pooled", np.ones(len(keys), bool))] if len(wds) > 1 else [])
    tests = []
    for b, a in CONTRASTS:
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
    details = (f"{info['text']}; n pairs = {len(keys)}; intervention epochs {sorted(set(peaks.values()))}; "
               f"B: {_args('B', profile)}; C: {_args('C', profile)}; "
               f"excluded {excluded}\n{describe(groups['A'][0])}")
    differs = None if profile == "paper" else "smoke model at lambda 1, 3 seeds, 200 epochs (paper: canonical, 0.015/0.05, 10 seeds, 10,000)"
    fig = figure_forest([t for t in tests if t["outcome"] == "peak_entropy_std"], PAPER_D, caption(profile, details, differs))
    fig.savefig(out / "fig8_forest.png", dpi=130)
    rows = []
    for t in tests:
        paper = PAPER_D.get((t["contrast"], t["stratum"]))
        if t["outcome"] != "peak_entropy_std" or (paper is None and t["stratum"] != "pooled" and len(wds) > 1):
            continue
        note = f"p_t = {_g(t.get('p_value_t'))} (Bonferroni {_g(t.get('p_bonferroni'))} over {len(family)} tests); " \
               f"paper p_t = {paper[1] if paper else '-'}"
        rows.append(row(PAPER, f"Cohen's d, peak sigma_H, {t['contrast']} at lambda {t['stratum']}",
                        paper[0] if paper else None, t.get("cohen_d"), profile, t.get("n", 0), note=note))
    summary = {"profile": profile, "pairs": [list(k) for k in keys], "peaks": {f"{k[0]}_{k[1]}": v for k, v in peaks.items()},
               "tests": tests, "excluded": excluded, "grok_rates": {g: [int(np.isfinite(values[g]["grok_epoch"]).sum()), len(keys)] for g in "ABC"},
               "sweep": info}
    write_outputs(out, summary, rows)
    return summary


def _args(group: str, profile: str) -> dict:
    return {k: v for k, v in group_callback(group, profile, 1)["init_args"].items() if k != "epoch"}


def _g(x):
    return "-" if x is None else f"{x:.3g}"


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig8"
    control = sweep_records("interventions.yaml", args.profile, out / "A", args.workers)
    peaks = {}
    for r in control:
        _, epoch = peak_entropy_std(r["history"], after_epoch=100)
        if r["status"] == "completed" and epoch is not None:
            peaks[(r["config"]["seed"], r["config"]["wd"])] = epoch
    if not peaks:
        raise SystemExit("fig8: no completed control run has sigma_H after epoch 100; nothing to intervene on")
    groups = {"A": control}
    for group in "BC":
        path = derived_sweep(group, args.profile, peaks, out / group)
        groups[group] = sweep_records(path, args.profile, out / group, args.workers)
    summary = analyse(groups, peaks, args.profile, out)
    print(f"fig8: {len(summary['pairs'])} pairs; {out / 'fig8_forest.png'}")
    return out


if __name__ == "__main__":
    main()
