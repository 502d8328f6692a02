"""Member-epochs per second of vectorised ensembles (E in {1, 4, 16, 64}) vs separate runs.

Both sides train the canonical model (p = 97, 4L x 8H d128, 818,785 parameters, batch 512,
AdamW lr 1e-3) on real modular-addition batches:

- **separate**: one ``GrokkingModule`` step at a time (its own forward, backward, AdamW step),
  the way one run per process trains; E separate runs cost E times this.
- **ensemble E**: one :class:`~grok_lightning.ensembles.EnsembleModule` step (vmapped
  forward/backward over the stacked members, one AdamW over the stacked weights with per-member lambdas).

Training steps only (evaluation is per member in both cases, every 10 epochs), timed
alternately in one process (medians over ``--rounds``) so the ratios hold on a loaded machine. member-epochs/s = members x
steps/s / steps-per-epoch (canonical: 4,705 training pairs / 512 = 10 steps). The estimate for
the whole ``paper`` profile is its total epochs (every sweep file's ``paper`` grid times its
horizon), each weighted by its cost relative to a canonical epoch (parameters x training tokens),
over the best canonical throughput measured on this device.

    python benchmarks/ensemble_throughput.py [--sizes 1 4 16 64] [--steps 3] [--rounds 3] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch
from _common import REPO

from grok_lightning.data.modular import ModularArithmeticDataModule
from grok_lightning.ensembles import EnsembleModule
from grok_lightning.modules import GrokkingModule


def epoch_cost(config: dict) -> float:
    """Training FLOPs of one epoch ~ parameters x training tokens (the 6 N T rule without the 6)."""
    model = (config.get("model") or {}).get("init_args") or {}
    data = (config.get("data") or {}).get("init_args") or {}
    if "TianModule" in str((config.get("model") or {}).get("class_path", "")):
        m, k = int(model.get("M", 71)), int(model.get("hidden", 2048))
        return (2 * m * k + k * m) * round(float(data.get("train_fraction", 0.4)) * m * m)
    from grok_lightning.models import build_model

    p = int(data.get("p", 97))
    kwargs = dict(model.get("arch_kwargs") or {})
    arch = model.get("arch", "transformer")
    if arch == "transformer":
        kwargs.update({k: model[k] for k in ("d_model", "n_layers", "n_heads", "d_ff") if k in model})
    with torch.device("meta"):
        n_params = sum(t.numel() for t in build_model(arch, vocab_size=p + 1, n_classes=p, **kwargs).parameters())
    return n_params * round(float(data.get("train_fraction", 0.5)) * p * p) * 3


def paper_member_epochs() -> tuple[int, int, float]:
    """(runs, member-epochs, canonical-equivalent epochs) of every sweep file's ``paper`` profile.

    Canonical-equivalent: each run's epochs weighted by its epoch cost relative to the canonical
    model's (Fig. 1's medium and large models cost 23x and 104x a canonical epoch).
    """
    from grok_lightning.sweep.grid import load_sweep, max_epochs_of

    canonical = epoch_cost({"model": {"init_args": {"d_model": 128, "n_layers": 4, "n_heads": 8, "d_ff": 512}},
                            "data": {"init_args": {"p": 97, "train_fraction": 0.5}}})
    runs = epochs = 0
    equivalent = 0.0
    for path in sorted((REPO / "configs" / "sweeps").glob("*.yaml")):
        try:
            specs = load_sweep(path, profile="paper").expand()
        except Exception:  # a sweep without a paper profile (tiny_test) or with derived inputs
            continue
        runs += len(specs)
        for spec in specs:
            n = max_epochs_of(spec.config) or 0
            epochs += n
            equivalent += n * epoch_cost(spec.config) / canonical
    return runs, epochs, equivalent


def build(n: int, device: str) -> tuple[list[GrokkingModule], list]:
    dm = ModularArithmeticDataModule(p=97, operation="add", train_fraction=0.5, batch_size=512, split_seed=0)
    dm.setup("fit")
    members, batches = [], []
    for e in range(n):
        torch.manual_seed(e)
        module = GrokkingModule(weight_decay=0.1 * (e + 1), modulus=97).to(device)
        members.append(module)
        tokens, labels = next(iter(dm.train_dataloader()))
        batches.append((tokens.to(device), labels.to(device)))
    return members, batches, math.ceil(len(dm.y_train) / 512)


def separate_step(device: str):
    (module,), (batch,), _ = build(1, device)
    optimizer = module.configure_optimizers()

    def step():
        optimizer.zero_grad(set_to_none=True)
        module.compute_loss(module.model(batch[0]), batch[1]).backward()
        optimizer.step()

    return step


def ensemble_step(n: int, device: str):
    members, batches, _ = build(n, device)
    ensemble = EnsembleModule(members, vectorize=True).to(device)
    optimizer = ensemble.configure_optimizers()

    def step():
        ensemble.train_step(batches, optimizer)

    return step


def timed(step, steps: int, device: str) -> float:
    step()  # warm-up (allocations, vmap tracing)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    steps_per_epoch = build(1, "cpu")[2]
    rows, best = [], 0.0
    for n in args.sizes:
        separate, ensemble = separate_step(args.device), ensemble_step(n, args.device)
        times = {"separate": [], "ensemble": []}
        for _ in range(args.rounds):  # alternate, so drift and load hit both sides alike
            times["separate"].append(timed(separate, args.steps, args.device))
            times["ensemble"].append(timed(ensemble, args.steps, args.device))
        t_separate, t_ensemble = (statistics.median(times[k]) for k in ("separate", "ensemble"))
        separate_rate = 1 / (t_separate * steps_per_epoch)
        ensemble_rate = n / (t_ensemble * steps_per_epoch)
        best = max(best, ensemble_rate, separate_rate)
        rows.append({"E": n, "separate_s_per_step": round(t_separate, 4), "ensemble_s_per_step": round(t_ensemble, 4),
                     "separate_member_epochs_per_s": round(separate_rate, 3),
                     "ensemble_member_epochs_per_s": round(ensemble_rate, 3), "ratio": round(ensemble_rate / separate_rate, 2)})
        print(f"E={n:3d}  separate {separate_rate:8.3f}  ensemble {ensemble_rate:8.3f} member-epochs/s  x{ensemble_rate / separate_rate:.2f}",
              flush=True)
    runs, member_epochs, equivalent = paper_member_epochs()
    hours = equivalent / best / 3600
    print(f"paper profile: {runs} runs, {member_epochs:,} member-epochs = {equivalent:,.0f} canonical-equivalent "
          f"epochs -> {hours:,.0f} h on this {args.device} at {best:.2f} canonical member-epochs/s")
    print(json.dumps({"device": args.device, "threads": torch.get_num_threads(), "steps_per_epoch": steps_per_epoch,
                      "rows": rows, "paper_runs": runs, "paper_member_epochs": member_epochs,
                      "paper_canonical_equivalent_epochs": round(equivalent), "paper_hours_at_best_rate": round(hours, 1)}))


if __name__ == "__main__":
    main()
