"""Which attention / initialisation choices reproduce the paper's starting point and its Phase 2?

The paper states pre-LayerNorm but neither the attention-logit scale nor the initialisation. Its
model starts at s_bar = 0.93 (Fig. 2) and shows a Phase 2 (s_bar dips toward 0.88-0.92 while
sigma_H peaks near 0.095) at epochs 1,000-3,000 at lambda = 1.

    python -m reproduce.pilots.init_calibration --part init  --out reproduction      # s_bar at init, CPU, ~1 min
    python -m reproduce.pilots.init_calibration --part train --device cuda --epochs 3000 --seeds 7 11 31 42
    python -m reproduce.pilots.init_calibration --part report --out reproduction     # figure + table from the JSONs

``init`` measures s_bar and sigma_H at initialisation (full test split, 5 seeds) for every
variant. ``train`` trains the candidate variants (``configs/sweeps/init_calibration.yaml``'s zip)
x seeds for ``--epochs`` at lambda = 1 and records test accuracy, s_bar and sigma_H every 10
epochs. It uses a lean vectorised loop, not the Lightning path: all members of one forward
(variants that differ only in their initial weights) are one ``vmap`` over stacked weights with
one AdamW (decoupled decay applied before the step, exactly what ``torch.optim.AdamW`` does per
group), which runs a 16-member x 3,000-epoch calibration in minutes on one GPU. The data split,
the per-epoch batch order and the model construction are the package's own, so a variant
adopted here trains the same way under ``grok-lightning fit``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from torch.func import functional_call, vmap
from torch.nn import functional as F

from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.metrics.functional import attention_statistics
from grok_lightning.models.transformer import DecoderTransformer
from reproduce.report import claim
from reproduce.targets.common import REPO, SWEEPS, cli

RESULTS = REPO / "results" / "pilots" / "init_calibration"

INIT_SEEDS = (7, 11, 31, 42, 73)
VARIANT_KEYS = ("init", "embedding_std", "attention_scale", "norm_position")
#: every variant whose s_bar at initialisation is measured (pre-LN first: the paper states pre-LN)
ALL_VARIANTS = [dict(init=i, embedding_std=e, attention_scale=s, norm_position=n)
                for n in ("pre", "post") for s in ("inv_sqrt_d_head", "none")
                for i in ("pytorch", "gpt", "mha", "xavier") for e in (None, 0.02)
                if not (i == "gpt" and e is not None)]


def variant_label(v: dict) -> str:
    emb = "" if v["embedding_std"] is None else f", emb {v['embedding_std']}"
    scale = "1/sqrt(d_head)" if v["attention_scale"] == "inv_sqrt_d_head" else "no scale"
    return f"{v['init']}{emb}, {scale}, {v['norm_position']}-LN"


def candidate_variants() -> list[dict]:
    """The trained candidates: the zip axes of configs/sweeps/init_calibration.yaml."""
    with open(SWEEPS / "init_calibration.yaml") as handle:
        zipped = yaml.safe_load(handle)["zip"]
    columns = [zipped[f"model.init_args.{k}"] for k in VARIANT_KEYS]
    return [dict(zip(VARIANT_KEYS, values)) for values in zip(*columns)]


def build(variant: dict, seed: int) -> DecoderTransformer:
    torch.manual_seed(seed)
    return DecoderTransformer(98, 97, **variant)


def split(seed: int) -> ModularArithmeticDataModule:
    dm = ModularArithmeticDataModule(p=97, operation="add", train_fraction=0.5, batch_size=512, split_seed=seed)
    dm.setup()
    return dm


def measure_init() -> list[dict]:
    rows = []
    for variant in ALL_VARIANTS:
        s_bar, sigma = [], []
        for seed in INIT_SEEDS:
            tokens = split(seed).x_test
            with torch.no_grad():
                _, attention = build(variant, seed).eval()(tokens, return_attention=True)
            stats = attention_statistics(attention)
            s_bar.append(float(stats["mean_similarity"]))
            sigma.append(float(stats["entropy_std"]))
        rows.append({**variant, "label": variant_label(variant), "seeds": list(INIT_SEEDS), "s_bar": s_bar,
                     "s_bar_mean": statistics.mean(s_bar), "sigma_H_mean": statistics.mean(sigma)})
        print(f"{variant_label(variant):44s} s_bar {rows[-1]['s_bar_mean']:.4f}  sigma_H {rows[-1]['sigma_H_mean']:.4f}",
              flush=True)
    return rows


# --- the vectorised calibration loop ----------------------------------------------------------
def train_group(members: list[dict], epochs: int, device: str, wd: float = 1.0, lr: float = 1e-3,
                eval_every: int = 10, dense_until: int = 10, deadline: float | None = None) -> list[dict]:
    """Train members sharing one forward (same attention scale and LayerNorm placement)."""
    models = [build(m["variant"], m["seed"]) for m in members]
    names = [n for n, _ in models[0].named_parameters()]
    params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).to(device).requires_grad_()
              for n in names}
    base = models[0].to(device)  # only its structure is used: functional_call supplies the weights
    splits = [split(m["seed"]) for m in members]
    x_train = torch.stack([s.x_train for s in splits]).to(device)
    y_train = torch.stack([s.y_train for s in splits]).to(device)
    x_test = torch.stack([s.x_test for s in splits]).to(device)
    y_test = torch.stack([s.y_test for s in splits]).to(device)
    n_train = x_train.shape[1]
    optimizer = torch.optim.AdamW(list(params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    keep = 1.0 - lr * wd

    def loss_of(p, x, y):
        return F.cross_entropy(functional_call(base, p, (x,)), y)

    batched_loss = vmap(loss_of)
    histories = [{"epoch": [], "train_acc": [], "test_acc": [], "mean_similarity": [], "entropy_std": [],
                  "weight_norm": []} for _ in members]

    @torch.no_grad()
    def evaluate(epoch: int) -> None:
        def forward(p, x):
            return functional_call(base, p, (x,), {"return_attention": True})

        logits_test, attention = vmap(forward)(params, x_test)
        logits_train = vmap(lambda p, x: functional_call(base, p, (x,)))(params, x_train)
        test_acc = (logits_test.argmax(-1) == y_test).double().mean(1).tolist()
        train_acc = (logits_train.argmax(-1) == y_train).double().mean(1).tolist()
        norms = torch.sqrt(sum(p.double().pow(2).flatten(1).sum(1) for p in params.values())).tolist()
        for e, history in enumerate(histories):
            stats = attention_statistics([a[e] for a in attention])
            for key, value in (("epoch", epoch), ("train_acc", train_acc[e]), ("test_acc", test_acc[e]),
                               ("mean_similarity", float(stats["mean_similarity"])),
                               ("entropy_std", float(stats["entropy_std"])), ("weight_norm", norms[e])):
                history[key].append(value)

    evaluate(0)
    for epoch in range(1, epochs + 1):
        # the package's batch order: a permutation seeded by (split seed, epoch) per member
        orders = torch.stack([torch.randperm(n_train, generator=torch.Generator().manual_seed(m["seed"] * 1_000_003 + epoch - 1))
                              for m in members]).to(device)
        for index in orders.split(512, dim=1):
            xb = torch.gather(x_train, 1, index.unsqueeze(-1).expand(-1, -1, x_train.shape[-1]))
            yb = torch.gather(y_train, 1, index)
            loss = batched_loss(params, xb, yb).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():  # AdamW's decoupled decay, p <- p (1 - lr lambda), before the update
                torch._foreach_mul_(list(params.values()), keep)
            optimizer.step()
        if epoch <= dense_until or epoch % eval_every == 0:
            evaluate(epoch)
        if deadline is not None and time.time() > deadline:
            break
    return [{"seed": m["seed"], "variant": m["variant"], "label": variant_label(m["variant"]), "wd": wd,
             "epochs_trained": epoch, "device": device, "history": h} for m, h in zip(members, histories)]


def landmarks(history: dict) -> dict:
    """The Fig. 2 landmarks of one trajectory (NaN where the trajectory does not reach them)."""
    epochs, s_bar = np.asarray(history["epoch"]), np.asarray(history["mean_similarity"])
    sigma, acc = np.asarray(history["entropy_std"]), np.asarray(history["test_acc"])
    grokked = acc >= 0.99
    grok = int(epochs[np.argmax(grokked)]) if grokked.any() else None

    def over(lo, hi, values, reduce):
        keep = (epochs >= lo) & (epochs <= hi)
        return float(reduce(values[keep])) if keep.any() else math.nan

    return {"s_bar_init": float(s_bar[0]), "t_grok": grok,
            "s_bar_min_memorising": over(1, grok - 1, s_bar, np.min) if grok else math.nan,
            "s_bar_peak_100_500": over(100, 500, s_bar, np.max),
            "s_bar_min_after_500": over(501, epochs[-1], s_bar, np.min),
            "sigma_H_median_100_500": over(100, 500, sigma, np.median),
            "sigma_H_max_after_100": over(101, epochs[-1], sigma, np.max),
            "sigma_H_max_epoch": int(epochs[epochs > 100][np.argmax(sigma[epochs > 100])]) if (epochs > 100).any() else None,
            "final_test_acc": float(acc[-1]), "epochs": int(epochs[-1])}


#: the landmarks the table compares (the keys of :func:`landmarks` that Fig. 2 shows)
LANDMARKS = ("s_bar_init", "t_grok", "s_bar_min_memorising", "s_bar_peak_100_500", "s_bar_min_after_500",
             "sigma_H_median_100_500", "sigma_H_max_after_100")


def paper_landmarks() -> dict:
    """The same landmarks of the paper's Fig. 2 median curve, read off
    (``reference/fig2_median_read_off.csv``): one function for ours and the paper's, no typed value."""
    from grok_lightning.stats.trajectory import read_off_reference

    ref = read_off_reference()
    marks = landmarks({"epoch": ref["epoch"], "mean_similarity": ref["s_bar"], "entropy_std": ref["sigma_H"],
                       "test_acc": ref["test_acc"]})
    return {key: marks[key] for key in LANDMARKS}


def report(results: Path, out: Path) -> None:
    from grok_lightning.plots.calibration import figure_init_calibration

    init_rows = json.loads((results / "init_s_bar.json").read_text())
    runs_by_label: dict[str, list[dict]] = {}
    meta = []
    for path in sorted(results.glob("train_group*.json")):
        payload = json.loads(path.read_text())
        meta.append(f"group {payload['group']}: {payload['device_name']}, torch {payload['torch']}, {payload['wall_s']} s")
        for run in payload["runs"]:
            runs_by_label.setdefault(run["label"], []).append(run)
    table = []
    for label, runs in runs_by_label.items():
        marks = [landmarks(r["history"]) for r in runs]
        row = {"variant": label, "seeds": [r["seed"] for r in runs], "epochs": min(m["epochs"] for m in marks)}
        for key in LANDMARKS:
            values = [m[key] for m in marks if m[key] is not None and not (isinstance(m[key], float) and math.isnan(m[key]))]
            row[key] = float(np.median(values)) if values else None
        table.append(row)
    paper = paper_landmarks()

    def cell(key, value):
        return "-" if value is None else (f"{value:.0f}" if key == "t_grok" else f"{value:.3f}")

    lines = ["| variant | seeds | epochs | " + " | ".join(LANDMARKS) + " |",
             "|---" * (3 + len(LANDMARKS)) + "|",
             "| paper (Fig. 2 median, n = 50, read off) | | | " + " | ".join(cell(k, paper[k]) for k in LANDMARKS) + " |"]
    for row in table:
        cells = [cell(k, row[k]) for k in LANDMARKS]
        lines.append(f"| {row['variant']} | {len(row['seeds'])} | {row['epochs']} | " + " | ".join(cells) + " |")
    (out / "calibration.md").write_text("\n".join(lines) + "\n")
    (out / "calibration.json").write_text(json.dumps({"rows": table, "paper": paper, "runs": meta}, indent=1))
    seeds = sorted({s for row in table for s in row["seeds"]})
    caption = (f"pilot (calibration, not a profile) | lambda = 1, AdamW lr 1e-3 betas (0.9, 0.999), batch 512, p = 97 add, "
               f"4L x 8H d128, seeds {seeds}, up to {max(r['epochs'] for r in table)} epochs (time-boxed), FP32 | "
               + "; ".join(meta) + "\ns_bar at initialisation: full test split, seeds " + ", ".join(map(str, INIT_SEEDS)))
    levels = {name: claim(f"fig2.{name}").value for name in ("s_bar_init", "s_bar_peak", "s_bar_dip")}
    fig = figure_init_calibration(init_rows, runs_by_label, caption,
                                  paper_s_bar={"start": levels["s_bar_init"], "peak": levels["s_bar_peak"],
                                               "dip": levels["s_bar_dip"]},
                                  paper_sigma_h={"at epoch 1": claim("fig2.sigma_init").value,
                                                 "Phase-2 peak": claim("fig2.sigma_peak").value})
    fig.savefig(out / "init_calibration.png", dpi=120)
    print("\n".join(lines))


def groups_of(variants: list[dict]) -> list[list[dict]]:
    """Variants that share a forward (attention scale, LayerNorm placement) train as one group."""
    groups: dict[tuple, list[dict]] = {}
    for variant in variants:
        groups.setdefault((variant["attention_scale"], variant["norm_position"]), []).append(variant)
    return list(groups.values())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("init", "train", "report"), required=True)
    parser.add_argument("--results", default=str(RESULTS), help="where the shipped calibration JSONs are (report)")
    parser.add_argument("--out", default="reproduction")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=3000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[7, 11])
    parser.add_argument("--group", type=int, default=None, help="train only this variant group (index)")
    parser.add_argument("--deadline", type=float, default=None, help="stop training after this many seconds")
    args = parser.parse_args(argv)
    out = Path(args.out) / "init_calibration"
    out.mkdir(parents=True, exist_ok=True)
    if args.part == "init":
        rows = measure_init()
        (out / "init_s_bar.json").write_text(json.dumps(rows, indent=1))
        return
    if args.part == "report":
        report(Path(args.results), out)
        return
    deadline = None if args.deadline is None else time.time() + args.deadline
    for index, group in enumerate(groups_of(candidate_variants())):
        if args.group is not None and index != args.group:
            continue
        members = [{"variant": v, "seed": s} for v in group for s in args.seeds]
        start = time.perf_counter()
        runs = train_group(members, args.epochs, args.device, deadline=deadline)
        payload = {"group": index, "wall_s": round(time.perf_counter() - start, 1), "torch": torch.__version__,
                   "device_name": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "runs": runs}
        (out / f"train_group{index}.json").write_text(json.dumps(payload))
        print(f"group {index}: {len(members)} members x {runs[0]['epochs_trained']} epochs in {payload['wall_s']} s",
              flush=True)


if __name__ == "__main__":
    cli(main)
