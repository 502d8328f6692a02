"""Which attention / initialisation choices reproduce the paper's starting point and its Phase 2?

The paper states pre-LayerNorm but neither the attention-logit scale nor the initialisation. Its
model starts at s_bar = 0.93 (Fig. 2) and shows a Phase 2 (s_bar dips toward 0.88-0.92 while
sigma_H peaks near 0.095) at epochs 1,000-3,000 at lambda = 1.

    python -m reproduce.init_calibration --part init  --out reproduction      # s_bar at init, CPU, ~1 min
    python -m reproduce.init_calibration --part train --device cuda --epochs 3000 --seeds 7 11 31 42
    python -m reproduce.init_calibration --part report --out reproduction     # figure + table from the JSONs

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
import statistics
import time
from pathlib import Path

import torch
import yaml
from torch.func import functional_call, vmap
from torch.nn import functional as F

from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.metrics.functional import attention_statistics
from grok_lightning.models.transformer import DecoderTransformer
from reproduce.common import SWEEPS

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
    base = models[0].to(device)
    names = [n for n, _ in base.named_parameters()]
    params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).to(device).requires_grad_()
              for n in names}
    splits = [split(m["seed"]) for m in members]
    x_train = torch.stack([s.x_train for s in splits]).to(device)
    y_train = torch.stack([s.y_train for s in splits]).to(device)
    x_test = torch.stack([s.x_test for s in splits]).to(device)
    y_test = torch.stack([s.y_test for s in splits]).to(device)
    n_train, E = x_train.shape[1], len(members)
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


def groups_of(variants: list[dict]) -> list[list[dict]]:
    """Variants that share a forward (attention scale, LayerNorm placement) train as one group."""
    groups: dict[tuple, list[dict]] = {}
    for variant in variants:
        groups.setdefault((variant["attention_scale"], variant["norm_position"]), []).append(variant)
    return list(groups.values())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("init", "train"), required=True)
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
    main()
