"""PR_norm candidates: every head covariance construction on one run's saved weights, against Table 3.

    python -m reproduce.pilots.pr_norm_candidates --run RUN_DIR --out results/pilots/pr_norm/candidates.json

``RUN_DIR`` holds the run's ``record.json`` and ``weights/epoch_XXXXX.pt`` (``CheckpointSchedule``).
For every checkpoint it rebuilds the model and its test split (the diagnostics' evaluation batch),
and computes PR_norm (affine ``(R - 1)/(H - 1)``, layer mean, as Table 3) under every construction
of :mod:`grok_lightning.metrics.participation`, on attention patterns and on head outputs. The
distance to the paper is the mean absolute difference over the epochs that Table 3 lists and the
run has (100, 500 and 1,000 for a 1,000-epoch run); ``nearest`` is the construction with the
smallest one. Prints a markdown table; writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from grok_lightning.metrics.participation import PR_CONSTRUCTIONS, parse_pr_construction, pr_compute
from grok_lightning.records import write_json_atomic
from reproduce.targets.common import cli
from reproduce.targets.long_horizon import paper_table3
from reproduce.targets.weight_analysis import checkpoint_files, eval_split, head_pr_states, load_checkpoint

__all__ = ["candidate_table", "main"]


def candidate_table(record: dict, files: dict[int, Path], batch_size: int = 1024) -> dict:
    """``{"epochs", "test_acc", "candidates": {name: {"per_layer": {epoch: [...]}, "mean": {epoch: x},
    "ratio_mean": {epoch: x}}}}`` over the checkpoint ``files`` (``{epoch: path}``)."""
    split = eval_split(record, "test")
    out = {"epochs": sorted(files), "test_acc": {}, "candidates": {n: {"per_layer": {}, "mean": {}, "ratio_mean": {}}
                                                                   for n in PR_CONSTRUCTIONS}}
    for epoch, path in sorted(files.items()):
        model, _ = load_checkpoint(record, path)
        correct, states = head_pr_states(model, *split, sources=("pattern", "output"), per_example=True,
                                         batch_size=batch_size)
        out["test_acc"][epoch] = correct / len(split[1])
        for name in PR_CONSTRUCTIONS:
            state = states[parse_pr_construction(name)[0]]
            affine, ratio = pr_compute(state, name, "affine"), pr_compute(state, name, "ratio")
            entry = out["candidates"][name]
            entry["per_layer"][epoch] = [float(v) for v in affine]
            entry["mean"][epoch], entry["ratio_mean"][epoch] = float(affine.mean()), float(ratio.mean())
    return out


def compare(table: dict, paper: dict[int, float]) -> dict:
    """Mean |ours - paper| per construction over the epochs both have; ``nearest`` is the smallest."""
    epochs = [e for e in table["epochs"] if e in paper]
    distance = {}
    for name, entry in table["candidates"].items():
        gaps = [abs(entry["mean"][e] - paper[e]) for e in epochs]
        distance[name] = sum(gaps) / len(gaps) if gaps and all(map(math.isfinite, gaps)) else math.nan
    finite = {k: v for k, v in distance.items() if math.isfinite(v)}
    return {"epochs_compared": epochs, "mean_abs_difference": distance,
            "nearest": min(finite, key=finite.get) if finite else None}


def markdown(table: dict, paper: dict[int, float], result: dict) -> str:
    epochs = table["epochs"]
    head = ["construction"] + [f"epoch {e}" for e in epochs] + ["mean abs diff to Table 3"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| **Table 3 (paper, seed 42)** | " + " | ".join(
        f"{paper[e]:.3f}" if e in paper else "-" for e in epochs) + " | - |")
    for name, entry in table["candidates"].items():
        d = result["mean_abs_difference"][name]
        cells = [f"{entry['mean'][e]:.3f}" for e in epochs]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {d:.3f} |")
    lines.append("| test accuracy | " + " | ".join(f"{table['test_acc'][e]:.3f}" for e in epochs) + " | |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run folder with record.json and weights/")
    parser.add_argument("--out", required=True, help="JSON to write")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--train-command", default=None, help="how the run was trained (stored in the JSON)")
    args = parser.parse_args(argv)
    run = Path(args.run)
    record = json.loads((run / "record.json").read_text())
    files = checkpoint_files({**record, "weight_checkpoint_dir": str(run / "weights")})
    if not files:
        parser.error(f"--run {run}: no weights/epoch_XXXXX.pt files")
    torch.set_num_threads(1)  # a shared 2-core machine; the forward passes are small
    rows, _, source = paper_table3()
    paper = {int(r["epoch"]): float(r["mean_PR_norm_measured"]) for r in rows}
    table = candidate_table(record, files, args.batch_size)
    result = compare(table, paper)
    c = record["config"]
    payload = {"command": f"python -m reproduce.pilots.pr_norm_candidates --run {args.run} --out {args.out}",
               "train_command": args.train_command,
               "run": {"seed": c["seed"], "wd": c["wd"], "max_epochs": c["max_epochs"], "model": c["model"],
                       "grok_epoch": record.get("grok_epoch"), "run_id": record.get("run_id")},
               "paper_table3": {"source": source, "pr_norm_by_epoch": {e: paper[e] for e in table["epochs"] if e in paper}},
               "metric": "PR_norm = (R - 1)/(H - 1) per layer, mean over layers; test split; float64",
               **table, **result}
    write_json_atomic(Path(args.out), payload)
    print(markdown(table, paper, result))
    print(f"nearest Table 3: {result['nearest']}; {args.out}")
    return payload


if __name__ == "__main__":
    cli(main)
