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
from _common import PlainCanonical


def epochs(compiled: bool, n: int, mode: str, bf16: bool) -> list[float]:
    run = PlainCanonical(compile_mode=mode if compiled else None)
    times = []
    for epoch in range(n):
        start = time.process_time()
        run.train_epoch(epoch, bf16)
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
