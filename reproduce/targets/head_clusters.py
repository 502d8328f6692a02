"""Head-role clusters (arXiv 2605.20441 section 5): how many roles the heads fall into, per checkpoint.

    python -m reproduce.targets.head_clusters --profile smoke|medium|paper --out reproduction

Runs (or, with ``--no-train``, reads) ``configs/sweeps/head_clusters.yaml`` into
``<out>/head_clusters/sweep``; each run saves its weights at the profile's checkpoint epochs. At
every checkpoint of every run the heads' output vectors (each head's write into the residual
stream) on the probe set are clustered by single linkage at cosine distance 0.5, all heads of the
model pooled (:mod:`grok_lightning.metrics.head_clusters`).

* **Probe**: the run's own test split (rebuilt from its record), the examples the training-time
  diagnostics and the long-horizon checkpoint analysis read; the paper does not say which
  examples it used.
* **Positions**: the answer position (``--positions answer``, the default), and every position
  beside it as a sensitivity row (``all``; docs/decisions.md, "Head-role clusters").
* **Vectors**: each head's outputs flattened over the probe examples (the rows above), and one
  mean vector per head (its answer-position output averaged over the probe) as a second
  sensitivity row.
* **Without the weights** (a clone: the stores ship records, not weights) the counts are read back
  from ``checkpoint_points.json`` beside each record, written when they were counted.

The claim ``heads.clusters`` (seed 42 falls to 4 clusters at epoch 160) is one run's value: the row
is seed 42's count at epoch 160, judged by the prediction interval of every seed's count there
(``runs``; the verdict needs at least 3, reproduce/report/verdict.py). Runs that end before epoch
160 (smoke) read "not run here (horizon)".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from grok_lightning.metrics.head_clusters import (
    HEAD_CLUSTER_POSITIONS,
    HEAD_CLUSTER_THRESHOLD,
    head_cluster_count,
    head_output_grams,
)
from grok_lightning.plots.heads import figure_head_clusters
from grok_lightning.records import write_json_atomic
from reproduce.report import claim, claim_row, join_notes, row
from reproduce.targets.common import (
    caption,
    cli,
    describe,
    model_shape,
    parse_args,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.targets.long_horizon import POINTS_FILE
from reproduce.targets.weight_analysis import checkpoint_files, eval_split, load_checkpoint, run_folder

__all__ = ["CLAIM", "LEAD_SEED", "SWEEP", "analyse", "run_clusters"]

PAPER = "2605.20441 §5"
SWEEP = "head_clusters.yaml"
CLAIM = "heads.clusters"
#: the seed whose count the paper reports
LEAD_SEED = 42
#: the reading of one mean vector per head (its answer-position output averaged over the probe), a
#: sensitivity row beside the per-example vectors
MEAN = "answer_mean"


def run_clusters(record: dict, runs_root: str | Path, threshold: float = HEAD_CLUSTER_THRESHOLD,
                 batch_size: int = 1024) -> list[dict]:
    """``[{"epoch", "clusters": {positions: count}, "n_heads", "logged_test_acc"}]`` for every
    checkpoint the run saved, counted on its test split from its weights where they are here, else
    read back from the counts stored beside its record (``POINTS_FILE``, shipped where the weights
    are not); empty when there is neither."""
    run_dir = run_folder(record, runs_root)
    cache = run_dir / POINTS_FILE if run_dir is not None else None
    stored = json.loads(cache.read_text()) if cache is not None and cache.is_file() else {}
    key = f"head_clusters (threshold {threshold:g})"
    files = checkpoint_files(record, runs_root)
    if not files:
        return stored.get(key, [])
    tokens = eval_split(record, "test")[0]
    found = []
    for epoch, path in files.items():
        model, payload = load_checkpoint(record, path)
        readings = {positions: (positions, "examples") for positions in HEAD_CLUSTER_POSITIONS} | {MEAN: ("answer", "mean")}
        computed = head_output_grams(model, tokens, list(readings.values()), batch_size)
        grams = {name: computed[reading] for name, reading in readings.items()}
        found.append({"epoch": epoch, "clusters": {p: head_cluster_count(g, threshold) for p, g in grams.items()},
                      "n_heads": int(next(iter(grams.values())).shape[0]),
                      "logged_test_acc": (payload.get("metrics") or {}).get("test_acc")})
    if cache is not None and stored.get(key) != found:
        write_json_atomic(cache, {**stored, key: found})
    return found


def _at(checkpoints: list[dict], epoch: int, positions: str) -> int | None:
    return next((c["clusters"].get(positions) for c in checkpoints if c["epoch"] == epoch), None)


def analyse(records: list[dict], runs_root: str | Path, profile: str, out: Path, positions: str = "answer",
            threshold: float = HEAD_CLUSTER_THRESHOLD, batch_size: int = 1024) -> dict:
    """Count the clusters at every checkpoint of every completed run; write the figure,
    ``summary.json`` and ``rows.json`` to ``out``; return the summary with its ``rows``."""
    out.mkdir(parents=True, exist_ok=True)
    other = next(p for p in HEAD_CLUSTER_POSITIONS if p != positions)
    paper = claim(CLAIM)
    epoch = paper.horizon
    runs = sorted((r for r in records if r.get("status") == "completed"),
                  key=lambda r: (r["config"]["seed"] != LEAD_SEED, r["config"]["seed"]))
    counted = {r["run_id"]: run_clusters(r, runs_root, threshold, batch_size) for r in runs}
    with_weights = [r for r in runs if counted[r["run_id"]]]
    lead = next((r for r in with_weights if r["config"]["seed"] == LEAD_SEED), None)
    per_seed = {r["config"]["seed"]: counted[r["run_id"]] for r in with_weights}
    horizon = min((int(r["config"]["max_epochs"]) for r in runs), default=None)
    probe = len(eval_split(runs[0], "test")[0]) if runs else 0
    rows = [_row(per_seed, epoch, p, profile, horizon, threshold, probe, sensitive=p != positions)
            for p in (positions, other, MEAN)]
    if per_seed:  # what the heads start from: context, no claim
        first = {seed: c[0]["clusters"][positions] for seed, c in per_seed.items()}
        rows.append(row(PAPER, f"head-role clusters at the first checkpoint (epoch {min(c[0]['epoch'] for c in per_seed.values())}), "
                        f"median over seeds, {positions} position", None, float(np.median(list(first.values()))),
                        profile, len(first), note=f"per seed {first} of {next(iter(per_seed.values()))[0]['n_heads']} heads"))
    summary = {"profile": profile, "positions": positions, "threshold": threshold, "probe": "test split",
               "n_probe": probe, "paper_epoch": epoch, "lead_seed": LEAD_SEED,
               "runs": {str(seed): {"checkpoints": [{**c, "clusters": c["clusters"][positions],
                                                     "clusters_other": c["clusters"][other],
                                                     "clusters_mean": c["clusters"].get(MEAN)} for c in found],
                                    "at_paper_epoch": _at(found, epoch, positions),
                                    "at_paper_epoch_other": _at(found, epoch, other),
                                    "at_paper_epoch_mean": _at(found, epoch, MEAN)}
                        for seed, found in per_seed.items()},
               "without_weights": [r["config"].get("name") or r["run_id"] for r in runs if not counted[r["run_id"]]],
               "sweep": sweep_summary(runs) if runs else None}
    if per_seed:
        _figure(summary, lead or with_weights[0], profile, out, (epoch, float(paper.value)), positions, other, threshold)
    write_outputs(out, summary, rows)
    return {**summary, "rows": rows}


def _row(per_seed: dict, epoch: int, positions: str, profile: str, horizon: int | None, threshold: float, probe: int,
         sensitive: bool) -> dict:
    """Seed 42's count at the paper's epoch, with every seed's count there as the runs its
    prediction interval is drawn from (seed 42 first)."""
    at = {seed: _at(found, epoch, positions) for seed, found in per_seed.items()}
    at = {seed: value for seed, value in at.items() if value is not None}
    n_heads = {c["n_heads"] for found in per_seed.values() for c in found}
    vectors = ("one mean output vector per head over the probe, answer position" if positions == MEAN else
               f"the heads' output vectors, {positions} position{'s' if positions == 'all' else ''}")
    quantity = (f"head-role clusters at epoch {epoch}, seed {LEAD_SEED} (single linkage of {vectors}, "
                f"at cosine distance {threshold:g})")
    missing = "" if at.get(LEAD_SEED) is not None else (
        f"no weights of seed {LEAD_SEED} at epoch {epoch}" if horizon is not None and horizon >= epoch else "")
    note = join_notes(at and f"per seed {at}", n_heads and f"{'/'.join(map(str, sorted(n_heads)))} heads",
                      probe and f"probe: the test split ({probe} examples)", missing)
    ours = at.get(LEAD_SEED)
    return claim_row(CLAIM, quantity, ours, profile, int(ours is not None), note=note, horizon=horizon,
                     runs=list(at.values()), not_run=missing,
                     sensitivity={MEAN: "mean vectors", "all": "all positions"}.get(positions, "") if sensitive else "")


def _figure(summary: dict, shown: dict, profile: str, out: Path, paper: tuple[int, float], positions: str,
            other: str, threshold: float) -> None:
    series = [{"seed": int(seed), "lead": int(seed) == LEAD_SEED, "n_heads": run["checkpoints"][0]["n_heads"],
               "epoch": [c["epoch"] for c in run["checkpoints"]],
               "clusters": [c["clusters"] for c in run["checkpoints"]],
               "clusters_other": [c["clusters_other"] for c in run["checkpoints"]],
               "clusters_mean": [c.get("clusters_mean") for c in run["checkpoints"]]}
              for seed, run in summary["runs"].items()]
    epochs = series[0]["epoch"]
    sweep = summary["sweep"]
    details = (f"{sweep['n_runs']} runs: lambda {sweep['wds']}, seeds {sweep['seeds']}, horizon {sweep['horizon']} "
               f"epochs, checkpoints {epochs}; probe: the test split ({summary['n_probe']} examples), single linkage "
               f"at cosine distance {threshold:g}\n{describe(shown)}")
    differs = None if profile == "paper" else (
        f"{model_shape(shown)} ({series[0]['n_heads']} heads), {sweep['horizon']}-epoch runs, checkpoints {epochs} "
        "(paper: 4L x 8H d128, 32 heads, 24 checkpoints x 3 seeds)")
    label = f"paper: seed {LEAD_SEED}, {paper[1]:g} at epoch {paper[0]}"
    fig = figure_head_clusters(series, (paper[0], paper[1], label), (f"{positions} position", f"{other} positions",
                                                                     "one mean vector per head"),
                               caption(profile, details, differs, figure="head_clusters"))
    fig.savefig(out / "head_clusters.png", dpi=130)


def main(argv=None) -> Path:
    def extra(parser):
        parser.add_argument("--positions", choices=HEAD_CLUSTER_POSITIONS, default="answer",
                            help="which positions a head's output vector holds (the other is a sensitivity row)")
        parser.add_argument("--threshold", type=float, default=HEAD_CLUSTER_THRESHOLD,
                            help=f"the cosine distance that joins two heads (default {HEAD_CLUSTER_THRESHOLD}, the paper's)")

    args = parse_args(__doc__, argv, extra=extra)
    root = Path(args.out)
    records = sweep_records(SWEEP, args.profile, root / "head_clusters", args.launch)[0]
    out = root / "head_clusters"
    summary = analyse(records, out / "sweep" / "runs", args.profile, out, args.positions, args.threshold)
    at = {seed: run["at_paper_epoch"] for seed, run in summary["runs"].items()}
    print(f"head_clusters: clusters at epoch {summary['paper_epoch']} per seed {at}; {out / 'head_clusters.png'}")
    return out


if __name__ == "__main__":
    cli(main)
