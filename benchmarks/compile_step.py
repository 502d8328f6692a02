"""``torch.compile`` on the canonical training step, on this machine: compile time and epoch time.

Plain loop (no Lightning), one thread, the canonical model and data; eager and compiled models
alternate within each round, so load drift hits both. Reports the first compiled epoch (which
pays the compilation) and the median of the later ones, and how many epochs a run needs before
the compilation has paid for itself.

    python benchmarks/compile_step.py [--epochs 6] [--rounds 2] [--mode default] [--precision 32-true]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.nn import functional as F

from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.models import build_model
from grok_lightning.modules import parameter_groups


def epochs(compiled: bool, n: int, mode: str, bf16: bool) -> list[float]:
    torch.manual_seed(0)
    data = ModularArithmeticDataModule(p=97)
    data.setup()
    model = build_model("transformer", 98, 97, d_model=128, n_layers=4, n_heads=8, d_ff=512, init="mha")
    optimizer = torch.optim.AdamW(parameter_groups(model, 1.0, "all"), lr=1e-3)
    forward = torch.compile(model, mode=mode, dynamic=True) if compiled else model
    loader = data.train_dataloader()
    times = []
    for epoch in range(n):
        start = time.process_time()
        loader.sampler.set_epoch(epoch)
        for tokens, labels in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(forward(tokens), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        times.append(time.process_time() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--precision", default="32-true", choices=("32-true", "bf16-mixed"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bf16 = args.precision == "bf16-mixed"
    eager, compiled, first = [], [], []
    for _ in range(args.rounds):
        eager += epochs(False, args.epochs, args.mode, bf16)[1:]
        times = epochs(True, args.epochs, args.mode, bf16)
        first.append(times[0])
        compiled += times[1:]
    e, c = statistics.median(eager), statistics.median(compiled)
    payback = (statistics.median(first) - c) / (e - c) if e > c else float("inf")
    result = {"precision": args.precision, "mode": args.mode, "eager_cpu_s_per_epoch": e, "compiled_cpu_s_per_epoch": c,
              "speedup": e / c, "first_compiled_epoch_cpu_s": statistics.median(first), "epochs_to_pay_back": payback}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
