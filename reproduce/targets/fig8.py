"""Fig. 8 (E12): causal interventions at peak differentiation, paired over seeds.

    python -m reproduce.targets.fig8 --profile smoke|medium|paper --out reproduction [--window W]

The paper's protocol (docs/decisions.md, "E12 by the paper's protocol"):

1. Group A (control) trains to the horizon: configs/sweeps/e12.yaml (medium, paper: the canonical
   model at the paper's lambda) or configs/sweeps/interventions.yaml (smoke: a shrunk model, a
   pipeline check). Its ``InterventionSource`` keeps a checkpoint at E, A's argmax of sigma_H
   after epoch 100 (released reading; the E12 cohort's ``sum_layers`` has the same argmax).
2. Groups start from A's checkpoint at E: B re-initialises 2 of 8 heads per layer, C clips each
   block matrix to its own median norm up to E, and (medium, paper) the placebo P changes
   nothing but the minibatch order, and R, one seed, repeats A's own order for 200 epochs (A
   must be reproduced exactly). When E falls after A's grokking in most seeds, Bg (a sensitivity
   group) is B started at A's argmax before grokking on the first 3 seeds where it differs from E
   (elsewhere Bg would repeat B). On every seed, the pre-grokking arm starts there too: B_pre (B,
   heads drawn per seed) and its own placebo P_pre (another minibatch order), scored by
   ``reproduce.targets.e12_pre`` (docs/decisions.md, "E12 before grokking"). The derived sweep files
   are written next to their runs.
3. Every group is scored on (E, E + W] (``--window``; default: to the end of the run) under the
   cohort's reading (``sum_layers``) and, as sensitivity rows, the released reading, the heads no
   intervention touched, the first 20 epochs after E skipped, ``max_layer`` and ``pooled``.
   Paired contrasts B-A, C-A, C-B (the paper's) and P-A, B-P, C-P (net of regression to the mean),
   each outcome with mean difference, paired t, Wilcoxon, t interval and Cohen's d.

Without training (``--no-train``), whatever groups have records are scored and the others'
rows say what is missing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from grok_lightning.plots.e12 import figure_controls
from grok_lightning.plots.interventions import figure_forest
from reproduce.report import load_claims
from reproduce.targets.common import (
    REPO,
    SWEEPS,
    caption,
    cli,
    describe,
    parse_args,
    read_planned,
    records_if_any,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.targets.e12_pre import GROUPS as PRE_ARM
from reproduce.targets.e12_pre import measured_rate, missing_cost, pre_arm_rows, score_pre_arm
from reproduce.targets.e12_scoring import PAPER_CONTRASTS, e12_rows, pre_grok_rows, same_model_runs, score_pairs

#: the control group's sweep per profile: the paper's model where the profile can afford it
SWEEP_FILES = {"smoke": "interventions.yaml", "medium": "e12.yaml", "paper": "e12.yaml"}
#: intervention groups: callback file and overrides. C clips each matrix to its own median norm over
#: the run up to E (the reading that fits the paper's mild C); Cm to the median across matrices at E
INTERVENTIONS = {"B": ("head_reinit.yaml", {}), "C": ("weight_norm_clip.yaml", {}),
                 "Cm": ("weight_norm_clip.yaml", {"reference": "matrices"})}
#: groups that re-initialise heads as B does (Bg: at A's pre-grokking argmax on 3 seeds; B_pre: there
#: on every seed)
RE_INITIALISING = {"Bg": "B", "B_pre": "B"}
#: groups that change nothing but the minibatch order (P at E, P_pre at A's pre-grokking argmax)
PLACEBOS = ("P", "P_pre")
#: groups that keep their last.ckpt, so that a longer horizon extends them instead of retraining
KEEP_LAST = ("B_pre", "P_pre")
#: (control sweep, profile, group) -> the head draw its shipped records used: one draw (seed 0) for
#: every seed. Their stored plans are checked against what the runs compute, so these groups keep
#: it; every other group draws its heads and fresh weights from each run's own seed
ONE_DRAW_GROUPS = {("e12.yaml", "medium", "B"): {"seed": 0}, ("e12.yaml", "medium", "Bg"): {"seed": 0}}
#: the groups each control sweep gets (P: placebo, R: the determinism check)
GROUPS_OF = {"interventions.yaml": ("B", "C"), "e12.yaml": ("B", "C", "P", "R")}
#: P's minibatch order: seed + this (any fixed offset gives an order unrelated to A's)
PLACEBO_ORDER_OFFSET = 1000
#: epochs after E over which R must repeat A
REPLAY_EPOCHS = 200
#: the sensitivity group Bg: B started at A's argmax before grokking, on this many of the seeds where
#: that is not E, when E falls after A's grokking in most seeds (docs/decisions.md, "E12 by the
#: paper's protocol")
PRE_GROK_SEEDS = 3


def group_callback(group: str, profile: str, epoch: int, control: str = "interventions.yaml") -> dict:
    """The group's intervention callback acting at ``epoch``. The callback file's ``profiles`` fit
    the shrunk model of interventions.yaml (4 heads: 1 re-initialised keeps the paper's quarter);
    the E12 sweep runs the paper's model and takes the paper's settings (2 of 8 heads). Heads are
    drawn per seed (the file's ``seed: run``) except in the groups of :data:`ONE_DRAW_GROUPS`."""
    filename, overrides = INTERVENTIONS[RE_INITIALISING.get(group, group)]
    spec = yaml.safe_load((REPO / "configs" / "interventions" / filename).read_text())
    shrunk = (spec.get("profiles") or {}).get(profile, {}) if control == "interventions.yaml" else {}
    one_draw = ONE_DRAW_GROUPS.get((control, profile, group), {})
    init_args = dict(spec["init_args"], **shrunk, **overrides, **one_draw, epoch=int(epoch))
    return {"class_path": spec["class_path"], "init_args": init_args}


def derived_sweep(group: str, profile: str, peaks: dict[tuple[int, float], int], starts: dict[tuple[int, float], str],
                  out: Path, control: str = "interventions.yaml") -> Path:
    """The control sweep, each run starting from its control's peak checkpoint (seed, lambda,
    epoch and checkpoint zipped): B and C with one intervention callback acting at E, P with
    another minibatch order, R (the first pair only) with A's own order for REPLAY_EPOCHS, Bg
    (the first PRE_GROK_SEEDS pairs; ``peaks`` and ``starts`` then hold A's pre-grokking argmax
    and its checkpoint) as B, and B_pre and P_pre (every pair, from the same pre-grokking
    checkpoints) as B and P, keeping their last.ckpt."""
    sweep = yaml.safe_load((SWEEPS / control).read_text())
    sweep["name"] = f"{sweep['name']}_{group}"
    sweep["base"] = str(REPO / sweep["base"])
    sweep["keep_checkpoints"] = group in KEEP_LAST  # the others: only A's checkpoints are started from
    keys = sorted(peaks)[:{"R": 1, "Bg": PRE_GROK_SEEDS}.get(group, len(peaks))]
    source = dict(sweep["overrides"]["trainer.callbacks"][0])
    source["init_args"] = dict(source.get("init_args") or {}, save_peak=False)  # the trajectory comes from A
    intervenes = group in INTERVENTIONS or group in RE_INITIALISING
    callbacks = [source] + ([group_callback(group, profile, 1, control)] if intervenes else [])
    sweep["overrides"]["trainer.callbacks"] = callbacks
    sweep["grid"] = {}
    for p in sweep.get("profiles", {}).values():
        p["grid"] = {k: None for k in (p.get("grid") or {})}
    zipped = {"seed": [k[0] for k in keys], "wd": [k[1] for k in keys]}
    if intervenes:
        zipped["trainer.callbacks.1.init_args.epoch"] = [peaks[k] for k in keys]
    if group in PLACEBOS:
        zipped["data.init_args.order_seed"] = [k[0] + PLACEBO_ORDER_OFFSET for k in keys]
    if group == "R":
        zipped["trainer.max_epochs"] = [peaks[k] + REPLAY_EPOCHS for k in keys]
    sweep["zip"] = {**zipped, "run.start_from": [starts[k] for k in keys]}
    path = out / "sweep_file.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# derived by reproduce/targets/fig8.py from configs/sweeps/{control} ({group})\n"
                    + yaml.safe_dump(sweep, sort_keys=False))
    return path


def control_peaks(control: list[dict], store: Path, before_grok: bool = False) -> tuple[dict, dict]:
    """Each completed control run's E and its peak checkpoint (in the run's folder of ``store``);
    with ``before_grok``, its argmax before grokking and ``peak_before_grok.ckpt`` instead."""
    from grok_lightning.sweep.store import SweepStore

    # the folder of each planned run (the records in ``control`` were read from these)
    folders = {entry["run_id"]: store / "runs" / entry["name"] for entry in SweepStore(store).load_plan()}
    peaks, starts = {}, {}
    for r in control:
        source = r.get("intervention_source") or {}
        if before_grok:
            source = source.get("before_grok") or {}
        if r["status"] != "completed" or source.get("peak_epoch") is None:
            continue
        key = (r["config"]["seed"], r["config"]["wd"])
        peaks[key] = int(source["peak_epoch"])
        name = "peak_before_grok.ckpt" if before_grok else "peak.ckpt"
        starts[key] = str((folders[r["run_id"]] / "checkpoints" / name).resolve())
    return peaks, starts


def pre_grok_group(peaks: dict, pre_peaks: dict) -> dict:
    """Bg's seeds and starting epochs: A's pre-grokking argmax on the first PRE_GROK_SEEDS seeds
    where it is not E (elsewhere Bg would repeat B exactly); empty unless the trigger holds."""
    if not needs_pre_grok_group(peaks, pre_peaks):
        return {}
    moved = sorted(k for k in pre_peaks if k in peaks and pre_peaks[k] != peaks[k])[:PRE_GROK_SEEDS]
    return {k: pre_peaks[k] for k in moved}


def needs_pre_grok_group(peaks: dict, pre_peaks: dict) -> bool:
    """The protocol's trigger for Bg: E (A's whole-run argmax) is not A's pre-grokking argmax in
    most of the seeds that have both (a run that never groks has E before grokking throughout)."""
    both = [k for k in peaks if k in pre_peaks]
    return 2 * sum(peaks[k] != pre_peaks[k] for k in both) > len(both)


def analyse(groups: dict[str, list[dict]], peaks: dict, profile: str, out: Path, n_bootstrap: int = 10000,
            window: int | None = None, planned: dict[str, int] | None = None, pre_peaks: dict | None = None,
            pre_arm: dict | None = None, pooled_runs: dict | None = None) -> dict:
    """Score every group's records, test every contrast, write rows, summary and the forest plot.
    ``planned``: runs planned per group (rows of groups with missing runs say so); ``pre_peaks``:
    A's argmax before grokking for the seeds of the sensitivity group Bg (in ``groups`` if run);
    ``pre_arm``: that argmax on every seed, where B_pre and P_pre start (``groups`` holds their
    records, empty lists for groups without any); ``pooled_runs``: another target's runs of A's
    model (:func:`~reproduce.targets.e12_scoring.same_model_runs`), pooled into A's grok rows."""
    out.mkdir(parents=True, exist_ok=True)
    groups = dict(groups)
    pre_group = groups.pop("Bg", None)
    arm = {g: groups.pop(g, []) for g in PRE_ARM}
    scored = score_pairs(groups, peaks, n_bootstrap=n_bootstrap, window=window)
    info = sweep_summary(groups["A"])
    where = f"(E, E + {window}]" if window else "(E, end of run]"
    details = (f"{info['text']}; {len(scored['pairs'])} controls; E {sorted(set(peaks.values()))}; "
               f"sigma_H summed over layers (the E12 cohort's reading), scored on {where} for every group; "
               + "; ".join(f"{g}: {len(recs)} runs" for g, recs in groups.items() if g != "A")
               + f"\n{describe(groups['A'][0])}")
    differs = None if profile == "paper" else (
        f"lambda {info['wds']}, {len(info['seeds'])} seeds, {info['horizon']} epochs, "
        f"{groups['A'][0]['config'].get('precision')} (paper: lambda 0.015 and 0.05, 10 seeds, 10,000 epochs)")
    rows = e12_rows(scored, profile, planned or {}, where, pooled_runs=pooled_runs)
    pre_scored = None
    if pre_group is not None and pre_peaks:
        pre_scored = score_pairs({"A": groups["A"], "B": pre_group}, pre_peaks, n_bootstrap=n_bootstrap, window=window)
        where_pre = f"(E before grokking, +{window}]" if window else "(E before grokking, end of run]"
        rows += pre_grok_rows(pre_scored, profile, (planned or {}).get("Bg", len(pre_peaks)), where_pre)
    claims = load_claims()
    strata = sorted({f"{k[1]:g}" for k in scored["pairs"]})
    paper_d = {(c, s): (claims[f"e12.{c}.d.{s}"].value, None) for c in PAPER_CONTRASTS for s in strata
               if f"e12.{c}.d.{s}" in claims}
    headline = [t for t in scored["tests"] if t["outcome"] == "peak_ent" and t["variant"] == "headline"]
    text = caption(profile, details, differs, figure="fig8")
    figure_forest(headline, paper_d, text).savefig(out / "fig8_forest.png", dpi=130)
    paper_a = {key: (claims[f"e12.{name}.{s}"].value, claims[f"e12.{name}.{s}"].margin) for s in strata[:1]
               for key, name in (("peak", "A_peak"), ("min_sim", "A_min_sim"), ("grok_epoch", "A_grok_ep"))
               if f"e12.{name}.{s}" in claims}
    figure_controls(groups["A"], peaks, paper_a, text).savefig(out / "fig8_controls.png", dpi=130)
    summary = {"profile": profile, "window": window, "planned": planned or {}, "sweep": info, **scored,
               "pairs": [list(k) for k in scored["pairs"]]}
    if pre_scored is not None:
        summary["before_grok"] = {"E": {f"{k[0]}_{k[1]:g}": e for k, e in pre_peaks.items()},
                                  "controls": pre_scored["controls"], "tests": pre_scored["tests"],
                                  "per_pair": pre_scored["per_pair"],
                                  "n_runs": pre_scored["n_runs"]}
    if pre_arm:
        rate = measured_rate(groups)
        missing = {g: missing_cost(g, arm[g], pre_arm, scored["horizon"], rate) for g in PRE_ARM}
        arm_scored = score_pre_arm({"A": groups["A"], **arm}, pre_arm, n_bootstrap=n_bootstrap)
        rows += pre_arm_rows(arm_scored, profile, missing)
        summary["pre_arm"] = {**arm_scored, "measured_rate": rate, "missing": missing}
    write_outputs(out, summary, [{k: v for k, v in r.items() if k not in ("contrast", "stratum", "outcome")} for r in rows])
    return summary


def fig5_runs(root: Path, control: list[dict], profile: str) -> dict | None:
    """Fig. 5's shipped runs of A's model at A's lambdas (read, never trained here), for A's grok
    rows: the runs Fig. 5's sweep plans for ``profile``, each once (``read_planned``); None where
    Fig. 5 has no records under ``root``."""
    from grok_lightning.sweep.grid import load_sweep

    store = root / "fig5" / "sweep"
    if not (store / "runs").is_dir():
        return None
    planned = load_sweep(SWEEPS / "canonical_wd.yaml", profile=profile).expand()
    return same_model_runs(control, read_planned(store, planned), "Fig. 5")


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv, extra=lambda p: p.add_argument(
        "--window", type=int, default=None, help="score outcomes on (E, E + W] (default: to the end of the run)"))
    out = Path(args.out) / "fig8"
    control_file = SWEEP_FILES[args.profile]
    # each control run keeps its own peak checkpoint; the groups start from distinct ones: no ensembles
    launch = dataclasses.replace(args.launch, ensemble_size=1)
    control, missing = sweep_records(control_file, args.profile, out / "A", launch)
    planned = {"A": len(control) + len(missing)}
    peaks, starts = control_peaks(control, out / "A" / "sweep")
    if not peaks:
        raise SystemExit("fig8: no completed control run has sigma_H after epoch 100; nothing to intervene on")
    def run_group(group: str, group_peaks: dict, group_starts: dict) -> list[dict]:
        path = derived_sweep(group, args.profile, group_peaks, group_starts, out / group, control=control_file)
        return records_if_any(path, args.profile, out / group, launch, f"fig8: group {group}")[0]

    groups = {"A": control}
    for group in GROUPS_OF[control_file]:
        planned[group] = 1 if group == "R" else planned["A"]
        groups[group] = run_group(group, peaks, starts)
    pre_all, pre_starts = control_peaks(control, out / "A" / "sweep", before_grok=True)
    pre_peaks = pre_grok_group(peaks, pre_all) if control_file == "e12.yaml" else {}
    if pre_peaks:
        planned["Bg"] = min(PRE_GROK_SEEDS, planned["A"])
        groups["Bg"] = run_group("Bg", pre_peaks, pre_starts)
    pre_arm = pre_all if control_file == "e12.yaml" else {}
    for group in PRE_ARM if pre_arm else ():
        planned[group] = len(pre_arm)
        groups[group] = run_group(group, pre_arm, pre_starts)
    summary = analyse(groups, peaks, args.profile, out, window=args.window, planned=planned, pre_peaks=pre_peaks or None,
                      pre_arm=pre_arm or None, pooled_runs=fig5_runs(Path(args.out), control, args.profile))
    print(f"fig8: {len(summary['pairs'])} controls; {out / 'fig8_forest.png'}")
    return out


if __name__ == "__main__":
    cli(main)
