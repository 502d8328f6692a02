"""One device check: environment, mamba-ssm parity, ensemble throughput, a paper-profile slice,
precision side by side, and the projected wall time of the whole ``paper`` profile -> one JSON.

    python benchmarks/gpu_check.py --device cuda --out gpu_check.json      # make gpu-check
    python benchmarks/gpu_check.py --device cpu --tiny --out check.json    # CI: minutes on 2 cores

Parts (each in its own ``try``: a failing part is recorded with its error and the rest go on):

- ``environment``: versions, device, memory, CPU count.
- ``mamba_parity``: the ``mamba_ssm`` CUDA kernels against this package's torch scan on the same
  weights (logits and gradients); ``skipped`` with the reason where mamba-ssm or CUDA is missing.
- ``throughput``: training steps of the canonical model as vectorised ensembles of E members
  (``benchmarks/ensemble_throughput.py``'s steps): member-epochs/s and achieved TFLOP/s
  (6 x non-embedding parameters x tokens per step) against the device's peak.
- ``slice``: a real slice of the paper profile through the sweep runner (canonical model,
  lambda = 1, ``--slice-seeds`` seeds x ``--slice-epochs`` epochs, one ensemble task, records,
  diagnostics and all): end-to-end member-epochs/s.
- ``precision``: the same seeds again with TF32 matmuls and with bf16 autocast; t_grok and the
  diagnostics side by side with FP32 (``--precision-seeds``; 0 skips).
- ``projection``: the paper profile's canonical-equivalent epochs over the slice's end-to-end rate
  (1 device; 8 devices assume independent runs spread evenly), and over the best training-only rate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import torch
import yaml

from _common import REPO
from ensemble_throughput import build, ensemble_step, paper_member_epochs, timed

#: dense peak TFLOP/s by device name (vendor datasheets, SXM parts): plain FP32 and TF32 tensor cores
PEAK_TFLOPS = {"H200": {"fp32": 67.0, "tf32": 494.7}, "H100": {"fp32": 67.0, "tf32": 494.7},
               "A100": {"fp32": 19.5, "tf32": 156.0}}


def environment(device: str) -> dict:
    import lightning
    import torchmetrics

    env = {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning.__version__,
           "torchmetrics": torchmetrics.__version__, "cpu_count": os.cpu_count(), "device": device,
           "platform": platform.platform()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), gpu=props.name,
                   gpu_memory_gib=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}",
                   multiprocessors=props.multi_processor_count, gpu_count=torch.cuda.device_count())
    return env


def mamba_parity(device: str) -> dict:
    if device != "cuda":
        return {"status": "skipped", "reason": "needs CUDA (the mamba_ssm kernels are CUDA-only)"}
    try:
        import mamba_ssm  # noqa: F401
    except ImportError as err:
        return {"status": "skipped", "reason": f"mamba_ssm not importable: {err}"}
    from grok_lightning.models.mamba import MambaClassifier

    torch.manual_seed(0)
    reference = MambaClassifier(vocab_size=97, n_classes=97, backend="torch").to(device)
    kernels = MambaClassifier(vocab_size=97, n_classes=97, backend="mamba_ssm").to(device)
    kernels.load_state_dict(reference.state_dict())
    tokens = torch.randint(0, 97, (64, 2), device=device)
    out = {}
    for name, model in (("torch", reference), ("mamba_ssm", kernels)):
        logits = model(tokens)
        logits.square().mean().backward()
        out[name] = (logits.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()})
    grad_diff = max(float((out["torch"][1][n] - g).abs().max()) for n, g in out["mamba_ssm"][1].items())
    logit_diff = float((out["torch"][0] - out["mamba_ssm"][0]).abs().max())
    return {"status": "ok" if logit_diff < 1e-3 else "mismatch", "max_abs_logit_diff": logit_diff,
            "max_abs_grad_diff": grad_diff}


def non_embedding_parameters(module) -> int:
    return sum(p.numel() for n, p in module.model.named_parameters() if "embedding" not in n)


def throughput(device: str, sizes: list[int], steps: int, precision: str) -> dict:
    torch.set_float32_matmul_precision(precision)
    members, batches, steps_per_epoch = build(1, "cpu")
    tokens_per_step = batches[0][0].numel()
    flops_per_member_step = 6 * non_embedding_parameters(members[0]) * tokens_per_step
    name = torch.cuda.get_device_name(0) if device == "cuda" else ""
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    rows = []
    for n in sizes:
        seconds = min(timed(ensemble_step(n, device), steps, device) for _ in range(2))
        tflops = n * flops_per_member_step / seconds / 1e12
        rows.append({"E": n, "s_per_step": round(seconds, 5),
                     "member_epochs_per_s": round(n / (seconds * steps_per_epoch), 2),
                     "achieved_tflops": round(tflops, 3),
                     "fraction_of_fp32_peak": round(tflops / peak["fp32"], 4) if peak else None})
        print(f"throughput E={n}: {rows[-1]}", flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()
    torch.set_float32_matmul_precision("highest")
    return {"matmul_precision": precision, "steps_per_epoch": steps_per_epoch, "tokens_per_step": tokens_per_step,
            "flops_per_member_step": flops_per_member_step, "peak_tflops": peak, "rows": rows}


def slice_sweep(out_dir: Path, seeds: list[int], epochs: int, tiny: bool, device: str,
                matmul_precision: str = "highest", trainer_precision: str | None = None) -> dict:
    """Write and run a one-task sweep of the canonical model (tiny: p = 23, 1 layer)."""
    from grok_lightning.records import iter_records
    from grok_lightning.sweep.launchers import run_sweep

    overrides = {"model.init_args.weight_decay": 1.0, "trainer.max_epochs": epochs, "grok.extra_epochs": None,
                 "diagnostics.image_every": 0, "trainer.accelerator": device,
                 "run.matmul_precision": matmul_precision}
    if trainer_precision:
        overrides["trainer.precision"] = trainer_precision
    if tiny:
        overrides.update({"model.init_args.n_layers": 1, "model.init_args.n_heads": 2, "model.init_args.d_model": 16,
                          "model.init_args.d_ff": 32, "data.init_args.p": 23, "data.init_args.batch_size": 64})
    name = f"slice-{matmul_precision}-{trainer_precision or 'fp32'}"
    sweep_file = out_dir / f"{name}.yaml"
    sweep_file.write_text(yaml.safe_dump({
        "name": name, "base": str(REPO / "configs" / "canonical.yaml"), "checkpoint_min_epochs": 10**9,
        "overrides": overrides, "grid": {"seed": seeds}, "profiles": {"paper": {}}}))
    start = time.perf_counter()
    result = run_sweep(sweep_file, profile="paper", out=out_dir / name, workers=1, ensemble_size=len(seeds),
                       stream=sys.stdout)
    wall = time.perf_counter() - start
    records = sorted((r for _, r in iter_records(out_dir / name / "runs")), key=lambda r: r["seed"])
    member_epochs = sum(r.get("final_epoch") or 0 for r in records)
    return {"seeds": seeds, "epochs": epochs, "matmul_precision": matmul_precision,
            "trainer_precision": trainer_precision or "32-true", "wall_s": round(wall, 1),
            "statuses": result.statuses, "member_epochs": member_epochs,
            "member_epochs_per_s": round(member_epochs / wall, 2) if wall else None,
            "runs": [run_summary(r) for r in records]}


def run_summary(record: dict) -> dict:
    from grok_lightning.stats.phases import phase_summary

    history = record.get("history") or {}
    summary = {"seed": record["seed"], "status": record.get("status"),
               "grok_epoch": record.get("grok_epoch"), "final_test_acc": record.get("final_test_acc"),
               "vectorized": record.get("vectorized"),
               "history": {k: history.get(k) for k in ("epoch", "test_acc", "mean_similarity", "entropy_std")}}
    if history.get("mean_similarity"):
        landmarks = asdict(phase_summary(history, record.get("grok_epoch")))
        summary.update({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in landmarks.items()})
    return summary


def projection(slice_part: dict | None, throughput_part: dict | None) -> dict:
    runs, member_epochs, equivalent = paper_member_epochs()
    out = {"paper_runs": runs, "paper_member_epochs": member_epochs,
           "paper_canonical_equivalent_epochs": round(equivalent)}
    if slice_part and slice_part.get("member_epochs_per_s"):
        hours = equivalent / slice_part["member_epochs_per_s"] / 3600
        out.update(end_to_end_hours_1_device=round(hours, 1), end_to_end_hours_8_devices=round(hours / 8, 1),
                   end_to_end_basis=f"slice at E = {len(slice_part['seeds'])}, records and diagnostics included")
    if throughput_part and throughput_part.get("rows"):
        best = max(r["member_epochs_per_s"] for r in throughput_part["rows"])
        out.update(training_only_hours_1_device=round(equivalent / best / 3600, 1),
                   training_only_basis=f"best ensemble training rate {best} member-epochs/s")
    return out


class Parts:
    """Runs the check's parts in order: each in its own ``try``, the JSON rewritten after each (a
    check cut short by a time limit keeps what it measured), parts skipped once the deadline passed."""

    def __init__(self, out: str, deadline: float | None) -> None:
        self.out, self.deadline, self.report = Path(out), deadline, {}

    def run(self, key: str, fn, *args, into: dict | None = None, **kwargs):
        into = self.report if into is None else into
        if self.deadline is not None and time.time() > self.deadline:
            into[key] = {"status": "skipped", "reason": "the check's --deadline had passed"}
            return into[key]
        start = time.perf_counter()
        try:
            into[key] = fn(*args, **kwargs)
        except Exception as err:
            into[key] = {"status": "error", "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}
        into.setdefault("part_seconds", {})[key] = round(time.perf_counter() - start, 1)
        self.write()
        return into[key]

    def write(self) -> None:
        self.out.write_text(json.dumps(self.report, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--tiny", action="store_true", help="CPU-sized: E in {1, 2}, 2 seeds x 3 epochs of a tiny model")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--slice-seeds", type=int, default=64)
    parser.add_argument("--slice-epochs", type=int, default=300)
    parser.add_argument("--precision-seeds", type=int, default=16, help="seeds for TF32 / bf16 vs FP32 (0 skips)")
    parser.add_argument("--work-dir", default=None, help="where the slice sweeps go (default: a temporary folder)")
    parser.add_argument("--deadline", type=float, default=None, help="skip the parts not started after this many seconds")
    args = parser.parse_args()
    if args.tiny:
        args.sizes, args.steps, args.slice_seeds, args.slice_epochs = [1, 2], 2, 2, 3
        args.precision_seeds = min(args.precision_seeds, 2)
    parts = Parts(args.out, None if args.deadline is None else time.time() + args.deadline)
    report = parts.report
    report["args"] = vars(args)
    parts.run("environment", environment, args.device)
    parts.run("mamba_parity", mamba_parity, args.device)
    parts.run("throughput", throughput, args.device, args.sizes, args.steps, "highest")
    if args.device == "cuda":
        parts.run("throughput_tf32", throughput, args.device, args.sizes, args.steps, "high")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_check_"))
    work.mkdir(parents=True, exist_ok=True)
    seeds = list(range(1, args.slice_seeds + 1))
    fp32 = parts.run("slice", slice_sweep, work, seeds, args.slice_epochs, args.tiny, args.device)
    report["projection"] = projection(fp32 if "runs" in fp32 else None, report.get("throughput"))
    if args.precision_seeds:
        precision_seeds = seeds[: args.precision_seeds]
        modes = [("high", None)] + ([("highest", "bf16-mixed")] if args.device == "cuda" else [])
        report["precision"] = {"seeds": precision_seeds, "fp32": [r for r in fp32.get("runs", [])
                                                                if r["seed"] in precision_seeds]}
        for matmul, trainer_precision in modes:
            parts.run(f"{matmul}-{trainer_precision or '32-true'}", slice_sweep, work, precision_seeds,
                      args.slice_epochs, args.tiny, args.device, matmul, trainer_precision, into=report["precision"])
    parts.write()
    print(json.dumps(report["projection"], indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
