"""Seconds per training epoch of the canonical config: Lightning vs a plain PyTorch loop.

Both sides use the same model, data, AdamW settings, batch order and thread count, in one
process, alternating rounds so machine drift hits both equally. Evaluation is excluded from
both (it is identical code) so the ratio is the framework's own per-epoch overhead. Each side is
also timed with ``torch.set_flush_denormal(True)``.

    python benchmarks/lightning_overhead.py [--epochs 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch
from _common import EpochTimer, PlainCanonical, canonical_config, median

from grok_lightning.run import GrokCLI


def plain_epochs(epochs: int) -> list[float]:
    run = PlainCanonical()
    times = []
    for epoch in range(epochs):
        start = time.perf_counter()
        run.train_epoch(epoch)
        times.append(time.perf_counter() - start)
    return times


def lightning_epochs(epochs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = canonical_config(tmp, max_epochs=epochs)
        config["model"]["init_args"].update(eval_every=10**9, eval_dense_until=-1)
        config["run"].update(checkpoint_every=0, flush_denormal=FLUSH)
        cli = GrokCLI(args=config, run=False)
        timer = EpochTimer()
        cli.trainer.callbacks.append(timer)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return timer.times


FLUSH = False


def main() -> None:
    global FLUSH
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for flush in (False, True):
        FLUSH = flush
        torch.set_flush_denormal(flush)
        plain, lightning = [], []
        for _ in range(args.rounds):
            plain += plain_epochs(args.epochs)[1:]  # drop the first (warm-up) epoch
            lightning += lightning_epochs(args.epochs)[1:]
        results[f"flush_denormal={flush}"] = {
            "plain_s_per_epoch": median(plain),
            "lightning_s_per_epoch": median(lightning),
            "overhead_pct": 100 * (median(lightning) / median(plain) - 1),
        }
    print(f"threads={torch.get_num_threads()} cpus={os.cpu_count()} torch={torch.__version__}")
    print(f"{'setting':24s} {'plain s/epoch':>14s} {'Lightning s/epoch':>18s} {'overhead':>9s}")
    for name, r in results.items():
        print(f"{name:24s} {r['plain_s_per_epoch']:14.3f} {r['lightning_s_per_epoch']:18.3f} {r['overhead_pct']:8.1f}%")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
