"""Where a canonical run's CPU time per epoch goes, against a plain loop that does the same work.

The plain loop trains exactly as ``GrokkingModule`` does (same model, AdamW settings, data order)
and runs the same evaluation forwards (full train and test splits, float64 losses, at the same
epochs: every epoch to 10, then every 10). The package's run is measured whole and with one part
switched off at a time, so each part's cost is a difference of two measured rows.

Marginal CPU seconds per epoch = (CPU(E2) - CPU(E1)) / (E2 - E1) of one process, one thread:
start-up (imports, model build, the dense early evaluations) cancels. Variants alternate within a
round, so machine drift hits them alike; the medians over rounds are printed as ratios to the
plain loop.

    python benchmarks/epoch_breakdown.py [--epochs 10 60] [--rounds 2] [--precision 32-true]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch
from _common import PlainCanonical, canonical_config
from torch.nn import functional as F

from grok_lightning.run import run_config

#: the run's parts switched off one at a time (dotted config keys -> value)
VARIANTS = {
    "run (as shipped)": {},
    "no attention diagnostics": {"run.diagnostics": False},
    "diagnostics without head outputs (PR on attention)": {"diagnostics.pr_construction": "examples"},
    "no TensorBoard": {"trainer.logger": False},
    "no checkpoints": {"run.checkpoint_every": 0},
    "not deterministic": {"trainer.deterministic": False},
    "with every reading (pilots)": {"diagnostics.readings": True},
}


def plain(epochs: int, precision: str) -> float:
    """CPU seconds of a plain loop: training and the same evaluation forwards."""
    run = PlainCanonical()
    start = time.process_time()
    for epoch in range(epochs + 1):
        if epoch <= 10 or epoch % 10 == 0 or epoch == epochs:  # the evaluation schedule
            run.model.eval()
            with torch.no_grad():
                for tokens, labels in run.data.eval_splits().values():
                    logits = run.model(tokens)
                    float(F.cross_entropy(logits.double(), labels, reduction="sum"))
                    int((logits.argmax(-1) == labels).sum())
            run.model.train()
        if epoch < epochs:
            run.train_epoch(epoch, bf16=precision == "bf16-mixed")
    return time.process_time() - start


def package(epochs: int, precision: str, overrides: dict) -> float:
    """CPU seconds of ``run_config`` on the canonical config with ``overrides``."""
    with tempfile.TemporaryDirectory() as tmp:
        config = canonical_config(tmp, max_epochs=epochs, precision=precision)
        config["run"].update(threads=1)
        config["diagnostics"].update(image_every=0)
        for key, value in overrides.items():
            section, name = key.split(".")
            config[section][name] = value
        start = time.process_time()
        run_config(config)
        return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, nargs=2, default=[10, 60])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precision", default="32-true", choices=("32-true", "bf16-mixed"))
    parser.add_argument("--out", default=None, help="also write the table as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    short, long = args.epochs
    marginal: dict[str, list[float]] = {"plain loop (same training and evaluation forwards)": []}
    marginal.update({name: [] for name in VARIANTS})
    for _ in range(args.rounds):
        for name in marginal:
            measure = (lambda e: plain(e, args.precision)) if name.startswith("plain") else \
                (lambda e, o=VARIANTS[name]: package(e, args.precision, o))
            marginal[name].append((measure(long) - measure(short)) / (long - short))
            print(f"{name}: {marginal[name][-1]:.4f} CPU-s/epoch", flush=True)
    base = statistics.median(marginal["plain loop (same training and evaluation forwards)"])
    table = {name: {"cpu_s_per_epoch": statistics.median(v), "ratio_to_plain": statistics.median(v) / base}
             for name, v in marginal.items()}
    print(f"\nmarginal CPU-s per epoch, epochs {short}->{long}, {args.rounds} round(s), {args.precision}, one thread")
    for name, row in table.items():
        print(f"  {name:<55} {row['cpu_s_per_epoch']:.4f}  x{row['ratio_to_plain']:.3f}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"epochs": args.epochs, "rounds": args.rounds, "precision": args.precision, "table": table},
                      handle, indent=1)


if __name__ == "__main__":
    main()
