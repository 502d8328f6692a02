"""The Fig. 2 trajectory search: every pilot scored against the paper's Fig. 2 median curves.

    python -m reproduce.pilots.fig2_search [--root results/pilots/fig2_search] [--hi 2000]

Reads the final records of every sweep stored under ``--root`` (``precision/``: the canonical
default under bf16 and FP32; ``arms/``: one lasting training choice each; ``lambda0.05/``,
``confirm/``: later stages), groups them into arms (the sweep's run label, the precision and
lambda) and writes into ``--root``, training nothing:

- ``summary.json`` and ``arms.md``: per arm the RMS distances of the median test accuracy,
  s_bar and sigma_H curves to the paper's (:mod:`grok_lightning.stats.trajectory`) over epochs
  1..H and 500..H, t_grok, s_bar at epoch 1 and the CPU seconds per run, ranked by the sum of the
  two order-parameter distances;
- ``readings.md``: the same distances for every reading x input set (metrics/readings.py);
- ``precision.md``: bf16 autocast against FP32 on the same seeds (the verdict rule is stated there);
- ``low_lambda.md``: arms run at a lambda other than 1 (the paper's Fig. 2 is at lambda = 1, so
  they are not scored against it): how far sigma_H rises (released and pooled readings; the
  paper's E12 controls at lambda 0.015-0.05 peak at 0.28) and how far s_bar falls;
- ``sawtooth.md``: the post-grokking sawtooth of s_bar per arm (:mod:`grok_lightning.stats.oscillation`):
  its period, its link to train-loss spikes, and how much of it a median over seeds keeps;
- ``fig2_search.png``: every arm's median curves over the paper's.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from grok_lightning.metrics.readings import READINGS as ALL_READINGS
from grok_lightning.plots.trajectory import figure_trajectories
from grok_lightning.records import FINAL_STATUSES, iter_records, write_json_atomic
from grok_lightning.stats.oscillation import sawtooth_summary
from grok_lightning.stats.phases import history_curve
from grok_lightning.stats.trajectory import FIG2_CURVES, FIG2_GOALS, median_curve, trajectory_distances
from reproduce.targets.common import cli

#: the readings the search's records carry (``sum_layers``, L times ``released``, would add nothing to
#: a ranking of distances)
READINGS = tuple(r for r in ALL_READINGS if r != "sum_layers")

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "results" / "pilots" / "fig2_search"
MEDIUM_FIG2 = REPO / "results" / "medium" / "fig2" / "sweep"
INPUT_SETS = ("test", "train", "all", "batch")
ORDER_PARAMETERS = ("s_bar", "sigma_H")
POOLED_SIGMA = "reading/test/pooled/entropy_std"



def arm_name(label: str, record: dict) -> str:
    config = record["config"]
    parts = [label]
    if str((record.get("environment") or {}).get("device", "")).startswith("cuda"):
        parts.append("gpu")
    if config.get("precision") == "bf16-mixed":
        parts.append("bf16")
    if config.get("wd") != 1.0:
        parts.append(f"lambda {config['wd']}")
    return " ".join(parts)


def load_arms(root: Path, also: tuple[Path, ...] = ()) -> dict[str, list[dict]]:
    """``{arm: [final records]}`` over every sweep store under ``root`` and the stores ``also``
    (labels from each plan; a seed already in an arm is not added twice)."""
    arms: dict[str, dict[int, dict]] = {}
    for plan_path in [*sorted(root.glob("*/plan.json")), *(Path(a) / "plan.json" for a in also)]:
        plan = json.loads(plan_path.read_text())
        labels = {entry["run_id"]: entry.get("axes", {}).get("label", "default") for entry in plan["runs"]}
        for _, record in iter_records(plan_path.parent / "runs"):
            if record.get("status") in FINAL_STATUSES and record.get("run_id") in labels:
                arm = arms.setdefault(arm_name(labels[record["run_id"]], record), {})
                arm.setdefault(record["config"]["seed"], record)
    return {name: [by_seed[s] for s in sorted(by_seed)] for name, by_seed in sorted(arms.items())}


def _at(history: dict, key: str, epoch: int) -> float | None:
    return history[key][history["epoch"].index(epoch)] if epoch in history["epoch"] else None


def arm_summary(records: list[dict], hi: int) -> dict:
    histories = [r["history"] for r in records]
    horizon = min(r["history"]["epoch"][-1] for r in records)
    full = trajectory_distances(histories, 1, min(hi, horizon))
    late = trajectory_distances(histories, 500, min(hi, horizon))
    groks = [r["grok_epoch"] for r in records if r.get("grok_epoch") is not None]
    start = [_at(h, "mean_similarity", 1) for h in histories]
    cpu = [r.get("cpu_time_s") for r in records if r.get("cpu_time_s")]
    return {
        "seeds": [r["config"]["seed"] for r in records], "horizon": horizon,
        "distance": {c: full[c].rms for c in FIG2_CURVES}, "distance_late": {c: late[c].rms for c in FIG2_CURVES},
        "score": full["s_bar"].rms + full["sigma_H"].rms,
        "t_grok_median": float(np.median(groks)) if groks else None, "grokked": f"{len(groks)}/{len(records)}",
        "s_bar_epoch1": float(np.median([s for s in start if s is not None])) if any(s is not None for s in start) else None,
        "cpu_s_per_run": float(np.mean(cpu)) if cpu else None,
        "within_goal": all(full[c].rms <= FIG2_GOALS[c] for c in FIG2_CURVES),
    }


def reading_table(records: list[dict], hi: int) -> dict:
    """``{"<inputs>/<reading>": {"s_bar": rms, "sigma_H": rms}}`` where the runs recorded readings."""
    histories = [r["history"] for r in records]
    if not all("reading/test/released/entropy_std" in h for h in histories):
        return {}
    horizon = min(min(hi, h["epoch"][-1]) for h in histories)
    table = {}
    for inputs, reading in itertools.product(INPUT_SETS, READINGS):
        keys = {c: f"reading/{inputs}/{reading}/{FIG2_CURVES[c]}" for c in ORDER_PARAMETERS}
        distances = trajectory_distances(histories, 1, horizon, keys)
        table[f"{inputs}/{reading}"] = {c: distances[c].rms for c in ORDER_PARAMETERS}
    return table


def _curve_rms(a: dict, b: dict, key: str) -> float:
    ea, va = median_curve([a], key)
    eb, vb = median_curve([b], key)
    shared = sorted(set(ea[ea >= 1]) & set(eb))
    x = dict(zip(ea, va))
    y = dict(zip(eb, vb))
    return float(np.sqrt(np.nanmean([(x[e] - y[e]) ** 2 for e in shared])))


def precision_verdict(fp32: list[dict], bf16: list[dict], hi: int) -> dict:
    """bf16 vs FP32 on the same seeds, against the seed-to-seed spread of FP32.

    Rule: bf16 may stand in for FP32 in pilots when, for every Fig. 2 curve, the median over
    seeds of the same-seed bf16 - FP32 curve RMS is at most the median FP32 seed-to-seed curve
    RMS, and every same-seed t_grok difference is within the FP32 seeds' t_grok range.
    """
    by_seed = {r["config"]["seed"]: r for r in fp32}
    pairs = [(by_seed[r["config"]["seed"]], r) for r in bf16 if r["config"]["seed"] in by_seed]
    if len(pairs) < 2:
        return {"verdict": "not run here", "reason": "fewer than 2 seeds in both precisions"}
    curves = {}
    for curve, key in FIG2_CURVES.items():
        same = [_curve_rms(a["history"], b["history"], key) for a, b in pairs]
        across = [_curve_rms(a["history"], b["history"], key) for a, b in itertools.combinations(fp32, 2)]
        curves[curve] = {"same_seed_bf16_vs_fp32": same, "fp32_seed_to_seed": across,
                         "within_spread": float(np.median(same)) <= float(np.median(across))}
    groks = [r["grok_epoch"] for r in fp32]
    spread = (max(groks) - min(groks)) if None not in groks else None
    t_grok = [{"seed": a["config"]["seed"], "fp32": a["grok_epoch"], "bf16": b["grok_epoch"]} for a, b in pairs]
    t_ok = spread is not None and all(t["bf16"] is not None and abs(t["bf16"] - t["fp32"]) <= spread for t in t_grok)
    ok = t_ok and all(c["within_spread"] for c in curves.values())
    return {"verdict": "cannot be told apart (bf16 allowed for pilots)" if ok else "differs (pilots stay FP32)",
            "rule": precision_verdict.__doc__.split("Rule: ")[1].strip().replace("\n    ", " "),
            "t_grok": t_grok, "fp32_t_grok_range": spread, "curves": curves,
            "distance": {"fp32": arm_summary(fp32, hi)["distance"], "bf16": arm_summary(bf16, hi)["distance"]},
            "cpu_s_per_run": {"fp32": arm_summary(fp32, hi)["cpu_s_per_run"], "bf16": arm_summary(bf16, hi)["cpu_s_per_run"]}}


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.{digits}f}"


def arms_markdown(summaries: dict[str, dict], hi: int) -> str:
    ranked = sorted(summaries.items(), key=lambda item: item[1]["score"])
    lines = [f"RMS distance to the paper's Fig. 2 medians (read off), epochs 1-{hi} (and 500-{hi}); goal "
             f"s_bar, sigma_H <= 0.015, test accuracy <= 0.05. Ranked by the sum of the two order-parameter distances.",
             "", "| arm | seeds | s_bar | sigma_H | test acc | s_bar 500+ | sigma_H 500+ | t_grok | s_bar at 1 | CPU s/run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in ranked:
        d, late = s["distance"], s["distance_late"]
        lines.append(f"| {name} | {s['seeds']} | {_fmt(d['s_bar'])} | {_fmt(d['sigma_H'])} | {_fmt(d['test_acc'])} | "
                     f"{_fmt(late['s_bar'])} | {_fmt(late['sigma_H'])} | {_fmt(s['t_grok_median'], 0)} ({s['grokked']}) | "
                     f"{_fmt(s['s_bar_epoch1'])} | {_fmt(s['cpu_s_per_run'], 0)} |")
    return "\n".join(lines) + "\n"


def readings_markdown(tables: dict[str, dict]) -> str:
    lines = ["RMS distance of s_bar / sigma_H to the paper's medians, per reading and input set "
             "(metrics/readings.py); `test/released` is the released code on the test split (the default).", ""]
    for arm, table in tables.items():
        if not table:
            continue
        lines += [f"### {arm}", "", "| inputs | " + " | ".join(READINGS) + " |", "|---" * (len(READINGS) + 1) + "|"]
        for inputs in INPUT_SETS:
            cells = [f"{_fmt(table[f'{inputs}/{r}']['s_bar'])} / {_fmt(table[f'{inputs}/{r}']['sigma_H'])}" for r in READINGS]
            lines.append(f"| {inputs} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _lambda(records: list[dict]) -> float:
    return float(records[0]["config"]["wd"])


def low_lambda_markdown(arms: dict[str, list[dict]]) -> str:
    """Every run scored on epochs (100, H], H the shortest horizon among them (runs of one length
    compare alike); the first loss spike is the first evaluation after memorising (train accuracy
    >= 0.99) whose epoch-mean train loss exceeds 1."""
    horizon = min(int(r["history"]["epoch"][-1]) for records in arms.values() for r in records)
    lines = [f"Arms at lambda != 1 (not scored against Fig. 2, which is at lambda = 1), every run on epochs 100-{horizon} "
             "(the shortest horizon among them). The paper's E12 controls (lambda 0.015 / 0.05) peak at sigma_H 0.28 "
             "with s_bar down to 0.75.", "",
             "| arm | seed | run's horizon | peak sigma_H (epoch) | pooled peak | min s_bar (epoch) | first loss spike "
             f"| test acc at {horizon} | t_grok |", "|---|---|---|---|---|---|---|---|---|"]
    for name, records in arms.items():
        for r in records:
            h = r["history"]
            epochs = np.asarray(h["epoch"], float)
            inside = (epochs > 100) & (epochs <= horizon)
            cell = {}
            for key, how in (("entropy_std", np.nanargmax), (POOLED_SIGMA, np.nanargmax), ("mean_similarity", np.nanargmin)):
                values = history_curve(h, key)[1]
                i = int(how(np.where(inside, values, np.nan))) if np.isfinite(values[inside]).any() else None
                cell[key] = "-" if i is None else f"{values[i]:.3f} ({int(epochs[i])})"
            memorised = np.flatnonzero(history_curve(h, "train_acc")[1] >= 0.99)
            spikes = epochs[(epochs <= horizon) & (history_curve(h, "train_loss")[1] > 1)
                            & (np.arange(len(epochs)) > (memorised[0] if len(memorised) else len(epochs)))]
            at_horizon = history_curve(h, "test_acc")[1][np.flatnonzero(epochs <= horizon)[-1]]
            lines.append(f"| {name} | {r['config']['seed']} | {int(epochs[-1])} | {cell['entropy_std']} | "
                         f"{cell[POOLED_SIGMA].split(' ')[0]} | {cell['mean_similarity']} | "
                         f"{int(spikes[0]) if len(spikes) else '-'} | {_fmt(at_horizon)} | {r.get('grok_epoch') or '-'} |")
    return "\n".join(lines) + "\n"


def sawtooth_markdown(arms: dict[str, list[dict]], hi: int) -> str:
    lines = [f"Post-grokking sawtooth of s_bar, epochs 200-{hi} (stats/oscillation.py): residual = s_bar minus its "
             "Savitzky-Golay trend (31 evaluations); a spike is an evaluation whose epoch-mean train loss is > 0.1. "
             "`phase corr`: mean pairwise correlation of the seeds' residuals; `sd median/one`: the residual's standard "
             "deviation in the median over seeds vs in one seed.", "",
             "| arm | seeds | period (epochs) | sd one seed | sd median | phase corr | spikes | residual at spikes / elsewhere "
             "| variance explained by spikes | corr(test acc, log train loss) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, records in arms.items():
        histories = [r["history"] for r in records if r["history"]["epoch"][-1] >= hi]
        if not histories:
            continue
        s = sawtooth_summary(histories, hi=hi)
        runs = s["runs"]
        lines.append(
            f"| {name} | {len(runs)} | {', '.join(_fmt(r['period'], 0) for r in runs)} | {_fmt(s['single_residual_sd'], 4)} | "
            f"{_fmt(s['median_residual_sd'], 4)} | {_fmt(s['phase_correlation'], 2)} | {', '.join(str(r['spikes']) for r in runs)} | "
            + ", ".join(f"{_fmt(r['residual_at_spikes'], 4)} / {_fmt(r['residual_elsewhere'], 4)}" for r in runs)
            + f" | {', '.join(_fmt(r['spike_r2'], 2) for r in runs)} | {', '.join(_fmt(r['corr_test_acc_log_loss'], 2) for r in runs)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--hi", type=int, default=3000, help="last epoch scored (default 3000, the goal's window)")
    parser.add_argument("--also", type=Path, nargs="*", default=[MEDIUM_FIG2],
                        help="more sweep stores to read (default: the shipped medium Fig. 2 runs, FP32)")
    args = parser.parse_args(argv)
    loaded = load_arms(args.root, tuple(args.also))
    if not loaded:
        raise SystemExit(f"{args.root}: no final pilot records")
    arms = {name: records for name, records in loaded.items() if _lambda(records) == 1.0}
    other = {name: records for name, records in loaded.items() if _lambda(records) != 1.0}
    if other:
        (args.root / "low_lambda.md").write_text(low_lambda_markdown(other))
    summaries = {name: arm_summary(records, args.hi) for name, records in arms.items()}
    readings = {name: reading_table(records, args.hi) for name, records in arms.items()}
    summary = {"arms": summaries, "readings": readings}
    if "default" in arms and "default bf16" in arms:
        summary["precision"] = precision_verdict(arms["default"], arms["default bf16"], args.hi)
        p = summary["precision"]
        (args.root / "precision.md").write_text(
            f"# bf16 autocast vs FP32 (canonical, lambda 1)\n\nVerdict: **{p['verdict']}**\n\nRule: {p.get('rule', '')}\n\n"
            + "```json\n" + json.dumps({k: v for k, v in p.items() if k not in ("verdict", "rule")}, indent=1) + "\n```\n")
    write_json_atomic(args.root / "summary.json", summary)
    (args.root / "arms.md").write_text(arms_markdown(summaries, args.hi))
    (args.root / "readings.md").write_text(readings_markdown(readings))
    (args.root / "sawtooth.md").write_text(sawtooth_markdown(arms, min(args.hi, 2000)))
    horizons = sorted({s["horizon"] for s in summaries.values()})
    caption = (f"pilots (profile medium): canonical 4L x 8H d128, lambda 1 unless named, seeds per arm in arms.md, "
               f"horizons {horizons} epochs; one lasting choice per arm from the default (docs/fig2_search.md)")
    fig = figure_trajectories({k: [r["history"] for r in v] for k, v in arms.items()}, caption,
                              "Fig. 2 trajectory search: median curves per arm vs the paper's median", highlight=("default",))
    fig.savefig(args.root / "fig2_search.png", dpi=120)
    print((args.root / "arms.md").read_text())
    return summary


if __name__ == "__main__":
    cli(main)
