"""One device check: environment, mamba-ssm parity, ensemble throughput, a paper-profile slice,
precision side by side, and the projected wall time of the whole ``paper`` profile -> one JSON.

    python benchmarks/gpu_check.py --device cuda --deadline 540 --out gpu_check.json  # make gpu-check
    python benchmarks/gpu_check.py --device cpu --tiny --out check.json    # make gpu-check DEVICE=cpu (CI)

Parts (each in its own ``try``: a failing part is recorded with its error and the rest go on):

- ``environment``: versions, device, memory, CPU count.
- ``mamba_parity``: the ``mamba_ssm`` CUDA kernels against this package's torch scan on the same
  weights (logits and gradients); ``skipped`` with the reason where mamba-ssm or CUDA is missing.
- ``throughput``: training steps of the canonical model as vectorised ensembles of E members
  (``benchmarks/ensemble_throughput.py``'s steps): member-epochs/s and achieved TFLOP/s
  (6 x non-embedding parameters x tokens per step) against the device's peak; on CUDA again with
  TF32 matmuls (``throughput_tf32``) and under bf16 autocast (``throughput_bf16``).
- ``slice``: a real slice of the paper profile through the sweep runner (canonical model,
  lambda = 1, ``--slice-seeds`` seeds x ``--slice-epochs`` epochs, one ensemble task, records,
  diagnostics and all): end-to-end member-epochs/s.
- ``precision``: the first ``--precision-seeds`` seeds again with TF32 matmuls (CUDA only: a
  no-op on CPU) and with bf16 autocast (``trainer.precision: bf16-mixed``); t_grok and the
  diagnostics side by side with FP32, and a verdict against :data:`PRECISION_TOLERANCES`. This
  verdict, from a GPU run, is what decides whether a paper profile may use a mode (docs/gpu.md).
- ``projection``: the paper profile's canonical-equivalent epochs over the slice's end-to-end rate
  (1 device; 8 devices assume independent runs spread evenly), and over the best training-only rate.

With ``--deadline`` each slice gets a time box (40% of what is left for the FP32 slice, the rest
shared by the precision slices, which train a quarter of its seeds): a slice cut short stops its runs as ``interrupted`` and counts
the epochs they reached, so a check on a slow device still ends on time with rates measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
import yaml
from _common import REPO
from ensemble_throughput import build, ensemble_step, paper_member_epochs, timed

#: dense peak TFLOP/s by device name (vendor datasheets, SXM parts): plain FP32, TF32 and BF16 tensor cores
PEAK_TFLOPS = {"H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4}, "H100": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4},
               "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}}

#: A lower-precision mode agrees with FP32 when, over the same seeds, the same seeds grok, the
#: median t_grok moves by at most one evaluation interval of the canonical schedule (10 epochs;
#: t_grok is not resolved finer), the medians of s_bar's landmarks (its minimum before grokking
#: and its Phase-1 peak) move by at most 0.01 (a tenth of the canonical Phase-1 rise, ~0.1), and the
#: median peak sigma_H by at most 10%. Medians, not seed by seed: training is chaotic, so a change
#: of rounding moves single trajectories as a change of summation order does; what a figure reads
#: is the distribution over seeds.
PRECISION_TOLERANCES = {"t_grok_epochs": 10, "s_bar": 0.01, "peak_entropy_std_relative": 0.10}
#: fewest seeds grokking in FP32 for a verdict (fewer: "undecided")
MIN_GROKKED_SEEDS = 2


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


def throughput(device: str, sizes: list[int], steps: int, precision: str, autocast: bool = False) -> dict:
    """Training steps per second at each ensemble size E; ``autocast``: under bf16 autocast."""
    torch.set_float32_matmul_precision(precision)
    members, batches, steps_per_epoch = build(1, "cpu")
    tokens_per_step = batches[0][0].numel()
    flops_per_member_step = 6 * non_embedding_parameters(members[0]) * tokens_per_step
    name = torch.cuda.get_device_name(0) if device == "cuda" else ""
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    rows = []
    for n in sizes:
        step = ensemble_step(n, device)
        with torch.autocast(device, dtype=torch.bfloat16) if autocast else nullcontext():
            seconds = min(timed(step, steps, device) for _ in range(2))
        tflops = n * flops_per_member_step / seconds / 1e12
        rows.append({"E": n, "s_per_step": round(seconds, 5),
                     "member_epochs_per_s": round(n / (seconds * steps_per_epoch), 2),
                     "achieved_tflops": round(tflops, 3),
                     "fraction_of_fp32_peak": round(tflops / peak["fp32"], 4) if peak else None})
        print(f"throughput E={n}: {rows[-1]}", flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()
    torch.set_float32_matmul_precision("highest")
    return {"matmul_precision": precision, "autocast": "bf16" if autocast else None, "steps_per_epoch": steps_per_epoch, "tokens_per_step": tokens_per_step,
            "flops_per_member_step": flops_per_member_step, "peak_tflops": peak, "rows": rows}


@contextmanager
def time_box(seconds: float | None):
    """SIGTERM to this process after ``seconds``: the sweep runner then stops its runs as
    interrupted, with their histories kept. A no-op handler stays installed meanwhile, so a timer
    firing after the sweep has returned cannot end the check."""
    if not seconds:
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    timer = threading.Timer(max(1.0, seconds), os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGTERM, previous)


def epochs_reached(record: dict) -> int:
    """Epochs a run trained: ``final_epoch`` of an ended run, else its last evaluated epoch (a run
    cut by the time box; a lower bound by less than one evaluation interval)."""
    if record.get("final_epoch") is not None:
        return int(record["final_epoch"])
    epochs = (record.get("history") or {}).get("epoch") or [0]
    return int(epochs[-1])


def slice_sweep(out_dir: Path, seeds: list[int], epochs: int, tiny: bool, device: str,
                matmul_precision: str = "highest", trainer_precision: str | None = None,
                seconds: float | None = None) -> dict:
    """Write and run a one-task sweep of the canonical model (tiny: p = 23, 1 layer), cut after
    ``seconds`` when given."""
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
    with time_box(seconds):
        result = run_sweep(sweep_file, profile="paper", out=out_dir / name, workers=1, ensemble_size=len(seeds),
                           ensemble_on_cpu=True, stream=sys.stdout)
    wall = time.perf_counter() - start
    records = sorted((r for _, r in iter_records(out_dir / name / "runs")), key=lambda r: r["seed"])
    member_epochs = sum(epochs_reached(r) for r in records)
    return {"seeds": seeds, "epochs": epochs, "matmul_precision": matmul_precision,
            "trainer_precision": trainer_precision or "32-true", "wall_s": round(wall, 1),
            "time_box_s": round(seconds, 1) if seconds else None, "cut_by_time_box": bool(result.interrupted),
            "epochs_reached": sorted({epochs_reached(r) for r in records}),
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


def _median(values) -> float | None:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else None


def _truncated(run: dict, horizon: int) -> dict:
    """A run summary's history cut at ``horizon`` epochs, its landmarks recomputed from that."""
    from grok_lightning.stats.phases import phase_summary

    history = run.get("history") or {}
    keep = [i for i, epoch in enumerate(history.get("epoch") or []) if epoch <= horizon]
    cut = {k: [v[i] for i in keep] for k, v in history.items() if v}
    grok = run.get("grok_epoch") if (run.get("grok_epoch") or 0) <= horizon else None
    out = {"grok_epoch": grok, "history": cut}
    if cut.get("mean_similarity"):
        out.update(asdict(phase_summary(cut, grok)))
    return out


def precision_verdict(fp32: list[dict], mode: list[dict], tolerances: dict = PRECISION_TOLERANCES) -> dict:
    """Does a mode's slice agree with FP32's on the same seeds (:data:`PRECISION_TOLERANCES`)?

    Each seed's two runs are compared up to the epochs both reached (a time box may cut one
    shorter, a grok stop may end one earlier).
    ``verdict``: ``agrees``, ``disagrees``, or ``undecided`` (too few seeds grokked to judge).
    """
    by_seed = {r["seed"]: r for r in fp32}
    pairs = [(by_seed[r["seed"]], r) for r in mode if r["seed"] in by_seed]
    seeds = [b["seed"] for _, b in pairs]
    horizons = [min(max((r.get("history") or {}).get("epoch") or [0]) for r in pair) for pair in pairs]
    pairs = [(_truncated(a, h), _truncated(b, h)) for (a, b), h in zip(pairs, horizons)]
    grokked_fp32 = [seed for seed, (a, _) in zip(seeds, pairs) if a["grok_epoch"] is not None]
    grokked_mode = [seed for seed, (_, b) in zip(seeds, pairs) if b["grok_epoch"] is not None]
    checks = {"same_seeds_grok": {"fp32": grokked_fp32, "mode": grokked_mode, "ok": grokked_fp32 == grokked_mode}}
    for key, tolerance, relative in (("grok_epoch", tolerances["t_grok_epochs"], False),
                                     ("s_bar_min_before_grok", tolerances["s_bar"], False),
                                     ("s_bar_peak", tolerances["s_bar"], False),
                                     ("peak_entropy_std", tolerances["peak_entropy_std_relative"], True)):
        a, b = _median([x.get(key) for x, _ in pairs]), _median([y.get(key) for _, y in pairs])
        if a is None or b is None:
            checks[key] = {"fp32_median": a, "mode_median": b, "ok": None}
            continue
        limit = tolerance * abs(a) if relative else tolerance
        checks[key] = {"fp32_median": a, "mode_median": b, "difference": b - a, "tolerance": limit,
                       "ok": abs(b - a) <= limit}
    # informational: how far single trajectories drift apart (chaotic, not a criterion)
    drift = [max((abs(x - y) for x, y in zip(a["history"].get("mean_similarity") or [],
                                             b["history"].get("mean_similarity") or [])
                  if x is not None and y is not None), default=None) for a, b in pairs]
    if len(grokked_fp32) < MIN_GROKKED_SEEDS:
        verdict = "undecided"
    elif any(c["ok"] is False for c in checks.values()):
        verdict = "disagrees"
    else:
        verdict = "agrees" if all(c["ok"] for c in checks.values()) else "undecided"
    return {"verdict": verdict, "seeds": seeds, "compared_up_to_epoch": dict(zip(seeds, horizons)), "checks": checks,
            "per_seed_t_grok": {seed: [a["grok_epoch"], b["grok_epoch"]] for seed, (a, b) in zip(seeds, pairs)},
            "s_bar_max_abs_drift_median": _median(drift), "tolerances": tolerances}


def projection(slice_part: dict | None, throughputs: dict) -> dict:
    """Hours for the whole paper profile: end to end from the slice, training only from each
    throughput part's best rate (``throughputs``: part name -> part)."""
    runs, member_epochs, equivalent = paper_member_epochs()
    out = {"paper_runs": runs, "paper_member_epochs": member_epochs,
           "paper_canonical_equivalent_epochs": round(equivalent),
           "rate_needed_for_12_h_member_epochs_per_s": round(equivalent / (12 * 3600), 1)}
    if slice_part and slice_part.get("member_epochs_per_s"):
        hours = equivalent / slice_part["member_epochs_per_s"] / 3600
        out.update(end_to_end_hours_1_device=round(hours, 1), end_to_end_hours_8_devices=round(hours / 8, 1),
                   end_to_end_basis=f"slice at E = {len(slice_part['seeds'])}, records and diagnostics included")
    for name, part in throughputs.items():
        if part and part.get("rows"):
            best = max(r["member_epochs_per_s"] for r in part["rows"])
            suffix = name.removeprefix("throughput")
            out[f"training_only_hours_1_device{suffix}"] = round(equivalent / best / 3600, 1)
            out[f"training_only_basis{suffix}"] = f"best ensemble training rate {best} member-epochs/s"
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


#: sizes of the GPU check (about 10 minutes on an H200 with --deadline 540) and of the CPU one (CI)
FULL = {"sizes": [1, 4, 16, 64, 256], "steps": 10, "slice_seeds": 64, "slice_epochs": 300, "precision_seeds": 16}
TINY = {"sizes": [1, 2], "steps": 2, "slice_seeds": 2, "slice_epochs": 3, "precision_seeds": 2}
#: seconds kept back from each time box for stopping the runs and writing their records
MARGIN_S = 30.0


def precision_modes(device: str) -> dict:
    """name -> (matmul precision, trainer precision). TF32 only on CUDA: on a CPU it changes nothing."""
    modes = {"tf32": ("high", None)} if device == "cuda" else {}
    return modes | {"bf16": ("highest", "bf16-mixed")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--tiny", action="store_true",
                        help=f"CPU-sized: a 1-layer model on p = 23 and the sizes {TINY} unless given")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help=f"ensemble sizes (default {FULL['sizes']})")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--slice-seeds", type=int, default=None)
    parser.add_argument("--slice-epochs", type=int, default=None)
    parser.add_argument("--precision-seeds", type=int, default=None, help="seeds for TF32 / bf16 vs FP32 (0 skips)")
    parser.add_argument("--work-dir", default=None, help="where the slice sweeps go (default: a temporary folder)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds for the whole check: slices get time boxes, parts not started by then are skipped")
    args = parser.parse_args()
    for key, value in (TINY if args.tiny else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    end = None if args.deadline is None else time.time() + args.deadline
    parts = Parts(args.out, end)
    report = parts.report
    report["args"] = vars(args)
    parts.run("environment", environment, args.device)
    parts.run("mamba_parity", mamba_parity, args.device)
    parts.run("throughput", throughput, args.device, args.sizes, args.steps, "highest")
    if args.device == "cuda":
        parts.run("throughput_tf32", throughput, args.device, args.sizes, args.steps, "high")
        parts.run("throughput_bf16", throughput, args.device, args.sizes, args.steps, "highest", autocast=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_check_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run_slices(args, parts, work)
    finally:
        if args.work_dir is None:  # the JSON holds what the check reads from the slices' records
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report.get("projection"), indent=1))
    print(f"wrote {args.out}")


def run_slices(args, parts: Parts, work: Path) -> None:
    """The FP32 slice, the projection, then each precision mode's slice and its verdict."""
    report, end = parts.report, parts.deadline
    seeds = list(range(1, args.slice_seeds + 1))
    modes = precision_modes(args.device) if args.precision_seeds else {}

    def box(share: float) -> float | None:
        return None if end is None else max(1.0, (end - time.time() - MARGIN_S) * share)

    fp32 = parts.run("slice", slice_sweep, work, seeds, args.slice_epochs, args.tiny, args.device,
                     seconds=box(0.4 if modes else 1.0))
    throughputs = {k: report.get(k) for k in ("throughput", "throughput_tf32", "throughput_bf16")}
    report["projection"] = projection(fp32 if "runs" in fp32 else None, throughputs)
    if modes:
        precision_seeds = seeds[: args.precision_seeds]
        reference = [r for r in fp32.get("runs", []) if r["seed"] in precision_seeds]
        report["precision"] = {"seeds": precision_seeds, "tolerances": PRECISION_TOLERANCES, "fp32": reference}
        for i, (name, (matmul, trainer_precision)) in enumerate(modes.items()):
            part = parts.run(name, slice_sweep, work, precision_seeds, args.slice_epochs, args.tiny, args.device,
                             matmul, trainer_precision, seconds=box(1 / (len(modes) - i)), into=report["precision"])
            if "runs" in part:
                part["verdict"] = precision_verdict(reference, part["runs"])
                print(f"precision {name}: {part['verdict']['verdict']} "
                      f"({json.dumps(part['verdict']['checks'], default=str)})", flush=True)
    parts.write()


if __name__ == "__main__":
    main()
