"""Seconds per training epoch of each cross-architecture probe vs the canonical transformer.

The cross-architecture sweep (docs/decisions.md) runs 10,000 epochs per run; this says what that
costs on this machine before anyone launches it. Same setup for every architecture: the
canonical config (p = 97, add, train fraction 0.5, batch 512, AdamW lr 1e-3, lambda 1.0), paper
sizes (transformer 818,785 parameters, MLP 981,632, LSTM 7,680,640, Mamba 957,952 at expand 4
and 492,032 at expand 2, pure-PyTorch scan), run through the same Lightning path as a real run.
Evaluation is switched off (it is a forward pass over both splits every 10 epochs, small next
to training), so the numbers are training epochs only; the first epoch of each fit (warm-up)
is dropped. With ``--rounds`` > 1 the architectures alternate so machine drift hits all alike.

    python benchmarks/arch_step_time.py [--epochs 3] [--rounds 1] [--archs transformer lstm] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings

import torch
from _common import EpochTimer, canonical_config, median

from grok_lightning.run import GrokCLI

#: name -> (arch, arch_kwargs); paper sizes (the transformer's come from canonical.yaml)
ARCHS = {
    "transformer": ("transformer", None),
    "mlp": ("mlp", {}),
    "lstm": ("lstm", {}),
    "mamba_e4": ("mamba", {"expand": 4, "backend": "torch"}),
    "mamba_e2": ("mamba", {"expand": 2, "backend": "torch"}),
}
EPOCHS_PER_RUN = 10_000


def epoch_times(name: str, epochs: int, threads: int | None) -> tuple[list[float], int]:
    """Training-epoch wall times of one fit, and the model's parameter count."""
    arch, arch_kwargs = ARCHS[name]
    with tempfile.TemporaryDirectory() as tmp:
        config = canonical_config(tmp, max_epochs=epochs)
        config["model"]["init_args"].update(arch=arch, arch_kwargs=arch_kwargs, eval_every=10**9, eval_dense_until=-1)
        config["run"].update(checkpoint_every=0, diagnostics=False, threads=threads)
        with warnings.catch_warnings():  # "args and sys.argv both given": args is what we mean
            warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
            cli = GrokCLI(args=config, run=False)
        timer = EpochTimer()
        cli.trainer.callbacks.append(timer)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        n_params = sum(p.numel() for p in cli.model.parameters())
    return timer.times[1:], n_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per fit (the first is dropped)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--archs", nargs="+", default=list(ARCHS), choices=list(ARCHS))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be >= 2 (the first epoch is dropped as warm-up)")
    times: dict[str, list[float]] = {name: [] for name in args.archs}
    params: dict[str, int] = {}
    for _ in range(args.rounds):
        for name in args.archs:
            measured, params[name] = epoch_times(name, args.epochs, args.threads)
            times[name] += measured
    per_epoch = {name: median(values) for name, values in times.items()}
    reference = per_epoch.get("transformer")
    print(f"threads={torch.get_num_threads()} cpus={os.cpu_count()} torch={torch.__version__}", end=" ")
    print(f"epochs/fit={args.epochs} rounds={args.rounds} (training epochs only, median)")
    print()
    print("| architecture | parameters | s / epoch | vs transformer | 10,000 epochs (h) |")
    print("|---|---:|---:|---:|---:|")
    results = {}
    for name, seconds in per_epoch.items():
        ratio = seconds / reference if reference else None
        hours = seconds * EPOCHS_PER_RUN / 3600
        results[name] = {"n_params": params[name], "s_per_epoch": seconds, "ratio": ratio, "hours_10k": hours}
        ratio_text = f"{ratio:.2f}x" if ratio is not None else "n/a"
        print(f"| {name} | {params[name]:,} | {seconds:.3f} | {ratio_text} | {hours:.1f} |")
    print()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
