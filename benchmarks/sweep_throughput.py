"""Sweep throughput on this machine: runs per hour, sequential vs the default parallel layout.

    python benchmarks/sweep_throughput.py [--runs 6] [--epochs 30] [--keep DIR]

Runs the same fixed grid twice through the real launcher (``run_sweep``, worker processes,
records, checkpoints): once as one worker with all cores' threads (``1 x N``) and once in the
default layout (``N workers x 1 thread``), then prints a table and the ratio (goal >= 1.5x on
2 cores). The grid is the smoke-sized model (2 layers x 4 heads, d 64, d_ff 256,
p = 97, batch 512, evaluation every 10 epochs, attention diagnostics on) for a few dozen
epochs, so each run takes seconds and the whole benchmark a few minutes. Wall time includes
worker start-up (importing torch/Lightning once per worker), which is part of what a sweep costs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def grid_file(folder: Path, runs: int, epochs: int) -> Path:
    wds = [0.1, 0.3, 1.0, 3.0, 0.5, 2.0, 0.05, 5.0]
    n_wd = min(len(wds), max(1, runs // 2))
    seeds = list(range((runs + n_wd - 1) // n_wd))
    spec = {
        "name": "throughput",
        "base": str(REPO / "configs" / "canonical.yaml"),
        "checkpoint_min_epochs": 0,
        "checkpoint_every": 20,
        "overrides": {
            "model.init_args.n_layers": 2, "model.init_args.n_heads": 4, "model.init_args.d_model": 64,
            "model.init_args.d_ff": 256, "trainer.max_epochs": epochs, "grok.extra_epochs": None,
            "diagnostics.image_every": 0, "run.profile": "benchmark",
        },
        "grid": {"wd": wds[:n_wd], "seed": seeds},
    }
    path = folder / "throughput.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def measure(sweep: Path, out: Path, workers: int, threads: int) -> dict:
    from grok_lightning.sweep.launchers import run_sweep
    from grok_lightning.sweep.store import collect

    t0 = time.time()
    with open(os.devnull, "w") as sink:
        result = run_sweep(sweep, out=out, workers=workers, threads_per_worker=threads, stream=sink)
    wall = time.time() - t0
    frame = collect(out)
    assert result.statuses == {"completed": result.total}, result.statuses
    return {"layout": f"{workers} worker(s) x {threads} thread(s)", "runs": result.total, "wall_s": wall,
            "runs_per_hour": result.total / wall * 3600, "mean_run_s": float(frame["wall_time_s"].mean())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="runs in the grid (default 6)")
    parser.add_argument("--epochs", type=int, default=30, help="epochs per run (default 30)")
    parser.add_argument("--keep", help="keep the sweep directories here")
    args = parser.parse_args(argv)

    import grok_lightning.run  # noqa: F401  (import once, outside the timings)
    from grok_lightning.sweep.launchers import available_cores, default_layout

    cores = available_cores()
    workers, threads = default_layout()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sweep_throughput_"))
    folder.mkdir(parents=True, exist_ok=True)
    sweep = grid_file(folder, args.runs, args.epochs)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{cores} cores, load average {load:.2f} before; grid: {args.runs} runs x {args.epochs} epochs "
          f"(2L x 4H x d64, p = 97)", flush=True)
    rows = [measure(sweep, folder / "sequential", 1, cores),
            measure(sweep, folder / "parallel", workers, threads)]
    print(f"\n{'layout':<44} {'runs':>5} {'wall s':>8} {'runs/hour':>10} {'mean run s':>11}")
    for label, row in zip(("sequential", "parallel (default)"), rows):
        print(f"{label + ': ' + row['layout']:<44} {row['runs']:>5} {row['wall_s']:>8.1f} "
              f"{row['runs_per_hour']:>10.0f} {row['mean_run_s']:>11.1f}")
    ratio = rows[1]["runs_per_hour"] / rows[0]["runs_per_hour"]
    print(f"\nratio parallel / sequential = {ratio:.2f}x (goal >= 1.5x); "
          f"load average after {os.getloadavg()[0]:.2f}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
