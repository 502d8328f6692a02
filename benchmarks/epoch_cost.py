"""CPU seconds per canonical epoch, side by side: the bf16 GEMM floor, a plain PyTorch loop, our run.

Three measurements of the canonical transformer (p 97, 4 layers x 8 heads, d 128, batch 512,
4,705 training pairs) under bf16 autocast on one thread, alternating in rounds so that the load
of a shared machine hits them alike:

* **GEMM floor**: the matrix products of one epoch's training steps alone (each linear layer's
  forward, input-gradient and weight-gradient product at its real shapes, in bf16), timed back
  to back; the epoch's GEMM FLOP count over that time is the machine's bf16 GEMM rate.
* **plain loop**: the same training steps in plain PyTorch (model, AdamW, data order and autocast
  as a run's) plus the same evaluation forwards (full train and test splits, float32) at the
  medium cadence: the floor the framework adds to.
* **our run**: ``run_config`` on the canonical config as the medium profiles train it (Lightning,
  the package's callbacks, evaluation with the attention diagnostics every 10 epochs after the
  dense phase, TensorBoard, the record, ``last.ckpt``), in a fresh interpreter per checkout
  (``--checkout NAME=PATH``, default this one: two checkouts compare code before and after a change).

Both loops are timed from the start of epoch ``--skip`` + 1 to the end of the last epoch (the
steady cadence: one evaluation per 10 epochs; start-up and the dense early evaluations left
out); CPU seconds are ``time.process_time`` of the process. Each loop's time is split into the
training arithmetic (the model's forward in training mode, the backward pass, Adam's update),
the evaluation forwards, the rest of the evaluations (for our run: the attention diagnostics,
the record, TensorBoard) and the rest (the loop itself, or the framework). Then one plain
training epoch by aten op, and the CPU time of one write of a 20,000-epoch run's record.

    python benchmarks/epoch_cost.py [--epochs 50] [--skip 10] [--rounds 2]
        [--checkout before=/path/to/main --checkout after=.] [--out table.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
EVAL_EVERY, DENSE_UNTIL = 10, 10  # configs/canonical.yaml's evaluation schedule
#: the canonical shape (configs/canonical.yaml)
D, LAYERS, D_FF, P, BATCH, TRAIN = 128, 4, 512, 97, 512, 4705


def epoch_gemms() -> list[tuple[int, int, int]]:
    """``(m, k, n)`` of every matrix product of one training epoch's steps: per batch and linear
    layer, the forward (tokens x in -> out), the input gradient and the weight gradient."""
    shapes = []
    for start in range(0, TRAIN, BATCH):
        rows = min(BATCH, TRAIN - start)
        linears = [(rows * 3, D, 3 * D), (rows * 3, D, D), (rows * 3, D, D_FF), (rows * 3, D_FF, D)] * LAYERS
        linears.append((rows, D, P))  # the head reads the last position only
        for m, k, n in linears:
            shapes += [(m, k, n), (m, n, k), (n, m, k)]
    return shapes


def gemm_floor(repeats: int = 3) -> dict:
    """CPU seconds of one epoch's GEMMs in bf16 (best of ``repeats``) and the rate they ran at."""
    operands = [(torch.randn(m, k).bfloat16(), torch.randn(k, n).bfloat16()) for m, k, n in epoch_gemms()]
    flop = sum(2 * m * k * n for m, k, n in epoch_gemms())
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for a, b in operands:
            torch.mm(a, b)
        best = min(best, time.process_time() - start)
    return {"cpu_s_per_epoch": best, "gflop_per_epoch": flop / 1e9, "gflop_per_cpu_s": flop / 1e9 / best}


def is_eval_epoch(epoch: int) -> bool:
    return epoch <= DENSE_UNTIL or epoch % EVAL_EVERY == 0


class Meter:
    """CPU seconds inside the training arithmetic (the model's forward in training mode, the
    backward pass, Adam's update), the evaluation forwards (the model's forward in eval mode) and
    ``evaluation`` (whatever an evaluation does in all, timed by the caller)."""

    def __init__(self):
        import torch.optim.adam as adam_module

        from grok_lightning.models.transformer import DecoderTransformer

        self.seconds = dict.fromkeys(("training arithmetic", "evaluation forwards", "evaluation"), 0.0)
        self.wrap(DecoderTransformer, "forward",
                  lambda args: "training arithmetic" if args[0].training else "evaluation forwards")
        self.wrap(torch.Tensor, "backward", lambda args: "training arithmetic")
        self.wrap(adam_module, "adam", lambda args: "training arithmetic")  # AdamW.step's update

    def wrap(self, owner, name: str, category) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[category(args)] += time.process_time() - start

        setattr(owner, name, timed)

    def per_epoch(self, before: dict, total: float, epochs: int) -> dict:
        """CPU-s per epoch: in all, in each part, and the rest (the loop or framework around them)."""
        parts = {key: (self.seconds[key] - before[key]) / epochs for key in self.seconds}
        parts["evaluation, besides its forwards"] = parts.pop("evaluation") - parts["evaluation forwards"]
        return {"cpu_s_per_epoch": total / epochs, **parts, "rest": total / epochs - sum(parts.values())}


def plain_loop(meter: Meter, epochs: int, skip: int) -> dict:
    """The plain loop's steady-cadence CPU seconds per epoch, and its parts."""
    from _common import PlainCanonical
    from torch.nn import functional as F

    run = PlainCanonical(seed=42)

    def evaluate() -> None:  # what GrokkingModule.evaluate computes, without the diagnostics
        start = time.process_time()
        run.model.eval()
        with torch.no_grad():
            for tokens, labels in run.data.eval_splits().values():
                logits = run.model(tokens)
                float(F.cross_entropy(logits.double(), labels, reduction="sum"))
                int((logits.argmax(-1) == labels).sum())
        run.model.train()
        meter.seconds["evaluation"] += time.process_time() - start

    evaluate()  # epoch 0
    for epoch in range(1, epochs + 1):
        if epoch == skip + 1:  # the window: epochs skip + 1 .. the last, with their evaluations
            start, before = time.process_time(), dict(meter.seconds)
        run.train_epoch(epoch - 1, bf16=True)
        if is_eval_epoch(epoch) or epoch == epochs:
            evaluate()
    return meter.per_epoch(before, time.process_time() - start, epochs - skip)


def run_inside(epochs: int, skip: int) -> dict:
    """Our run, in this interpreter (``--inside``: a fresh one per checkout): steady-cadence CPU
    seconds per epoch, from the start of epoch ``skip`` + 1 to the end of training, and its parts."""
    from _common import canonical_config
    from lightning.pytorch import Callback, Trainer

    from grok_lightning.callbacks.evaluation import ScheduledEvaluation
    from grok_lightning.run import run_config

    meter = Meter()
    meter.wrap(ScheduledEvaluation, "_run", lambda args: "evaluation")
    marks = {}

    class Start(Callback):  # the first callback
        def on_train_epoch_start(self, trainer, pl_module):
            if trainer.current_epoch == skip:
                marks["start"], marks["before"] = time.process_time(), dict(meter.seconds)

    class End(Callback):  # the last one: every other callback's work of the last epoch is in
        def on_train_end(self, trainer, pl_module):
            marks["end"] = time.process_time()

    init = Trainer.__init__

    @functools.wraps(init)  # the CLI reads the Trainer's arguments from this signature
    def with_clocks(self, *args, callbacks=None, **kwargs):
        init(self, *args, callbacks=[Start(), *(callbacks or []), End()], **kwargs)

    Trainer.__init__ = with_clocks
    with tempfile.TemporaryDirectory() as tmp:
        config = canonical_config(tmp, max_epochs=epochs, precision="bf16-mixed")
        config["seed_everything"] = 42
        config["run"].update(threads=1, checkpoint_every=100)  # the medium sweeps' settings
        config["diagnostics"].update(image_every=0)
        run_config(config)
    return meter.per_epoch(marks["before"], marks["end"] - marks["start"], epochs - skip)


def our_run(checkout: Path, epochs: int, skip: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    out = subprocess.run([sys.executable, __file__, "--inside", "--epochs", str(epochs), "--skip", str(skip)],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def training_epoch_by_op(top: int = 12) -> list[tuple[str, float, int]]:
    """``(aten op, CPU-s, calls)`` of one plain-loop training epoch (forward, backward, AdamW),
    each op timed where it is dispatched, the most expensive first."""
    from _common import PlainCanonical
    from torch.utils._python_dispatch import TorchDispatchMode

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}

    class ByOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            start = time.process_time()
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            seconds[name] = seconds.get(name, 0.0) + time.process_time() - start
            calls[name] = calls.get(name, 0) + 1
            return out

    run = PlainCanonical(seed=42)
    run.train_epoch(0, bf16=True)  # warm-up
    with ByOp():
        run.train_epoch(1, bf16=True)
    return sorted(((name, sec, calls[name]) for name, sec in seconds.items()), key=lambda row: -row[1])[:top]


def record_write_seconds(rows: int = 20_000 // EVAL_EVERY + 1, columns: int = 41, repeats: int = 3) -> float:
    """CPU seconds of one write of a record with a 20,000-epoch medium run's history (one row per
    evaluation, the canonical run's 41 columns), as the recorder writes it (best of ``repeats``)."""
    import random

    from grok_lightning.records import write_json_atomic

    history = {f"column_{i}": [random.random() for _ in range(rows)] for i in range(columns)}
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            start = time.process_time()
            write_json_atomic(Path(tmp) / "record.json", {"history": history})
            best = min(best, time.process_time() - start)
    return best


def table(results: dict, args) -> str:
    floor, plain = results["gemm floor"]["cpu_s_per_epoch"], results["plain loop"]["cpu_s_per_epoch"]
    rate = results["gemm floor"]["gflop_per_cpu_s"]
    parts = ("training arithmetic", "evaluation forwards", "evaluation, besides its forwards", "rest")
    lines = [f"canonical bf16 epoch, one thread, steady cadence (epochs {args.skip + 1}-{args.epochs}, one evaluation "
             f"per {EVAL_EVERY}), medians of {args.rounds} round(s); bf16 GEMM rate {rate:.0f} GFLOP per CPU-s "
             f"({results['gemm floor']['gflop_per_epoch']:.1f} GFLOP per epoch)", "",
             "| what | CPU-s per epoch | x GEMM floor | x plain loop | " + " | ".join(parts) + " |",
             "|---|---|---|---|" + "---|" * len(parts)]
    for name, row in results.items():
        value = row["cpu_s_per_epoch"]
        cells = " | ".join(f"{row[p]:.3f}" if p in row else "" for p in parts)
        lines.append(f"| {name} | {value:.3f} | {value / floor:.2f} | {value / plain:.2f} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--skip", type=int, default=10, help="epochs left out at the start (the dense evaluations)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                        help="time our run with this checkout's code (repeatable; default: this checkout)")
    parser.add_argument("--out", default=None, help="also write the numbers as JSON here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)  # one run, printed as JSON
    args = parser.parse_args()
    if args.inside:
        print(json.dumps(run_inside(args.epochs, args.skip)))
        return
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)  # as a run does (run.flush_denormal)
    checkouts = dict(item.split("=", 1) for item in args.checkout) or {"this checkout": str(HERE.parent)}
    meter = Meter()
    samples: dict[str, list[dict]] = {"gemm floor": [], "plain loop": []}
    samples.update({f"our run ({name})": [] for name in checkouts})
    for round_ in range(args.rounds):
        samples["gemm floor"].append(gemm_floor())
        samples["plain loop"].append(plain_loop(meter, args.epochs, args.skip))
        for name, path in checkouts.items():
            samples[f"our run ({name})"].append(our_run(Path(path), args.epochs, args.skip))
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]['cpu_s_per_epoch']:.3f}" for k, v in samples.items()),
              flush=True)
    results = {name: {key: statistics.median(s[key] for s in rows) for key in rows[0]} for name, rows in samples.items()}
    by_op = training_epoch_by_op()
    record_write = record_write_seconds()
    print()
    print(table(results, args))
    print("\nthe plain loop's training epoch by aten op (CPU-s, calls; timed per op, so their sum exceeds the "
          "untimed epoch):\n")
    print("| op | CPU-s | calls |\n|---|---|---|")
    for name, sec, n in by_op:
        print(f"| {name} | {sec:.3f} | {n} |")
    print(f"\none write of a 20,000-epoch run's record ({20_000 // EVAL_EVERY + 1} rows x 41 columns): "
          f"{record_write:.3f} CPU-s, i.e. {record_write / EVAL_EVERY:.4f} CPU-s per epoch when written at every "
          "evaluation")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "results": results, "samples": samples,
                                              "training_epoch_by_op": by_op, "record_write_s": record_write},
                                             indent=1))


if __name__ == "__main__":
    main()
