"""One GPU window turned into science: the open pilots as ensembles, time-boxed, with records where
the CPU reports read them.

    python benchmarks/gpu_pilots.py --deadline 540                       # make gpu-pilots
    python benchmarks/gpu_pilots.py --device cpu --tiny --deadline 120   # the CPU-sized check of the script

Parts, in order, each with its share of the deadline (a part not started by then is skipped):

1. ``fig2_arms``: the Fig. 2 trajectory search's arms (``configs/sweeps/fig2_search.yaml``, paper
   profile: 8 arms x 8 seeds x 3,000 epochs), one ensemble task per arm, into
   ``results/pilots/fig2_search/gpu_arms`` (``python -m reproduce.pilots.fig2_search`` reads it).
2. ``fig2_default``: the canonical default at lambda = 1 over the same seeds
   (``configs/sweeps/fig2.yaml`` is its cohort; here its first 8 seeds x 3,000 epochs), into
   ``results/pilots/fig2_search/gpu_default``: the arms' reference.
3. ``e12_pilot``: the E12 control group at lambda = 0.05 (``configs/sweeps/e12_pilot.yaml``, paper
   profile: 8 seeds x 2,500 epochs, peak checkpoints kept), into ``results/pilots/e12_pilot/gpu``.

A part cut by its time box stops its runs as ``interrupted`` with their checkpoints: the same
command (on a GPU or a CPU) resumes them. The JSON (``--out``) says what each part reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml
from _common import REPO
from gpu_check import MARGIN_S, epochs_reached, time_box

#: (part, sweep file, output folder under results/pilots, share of the time left, ensembles?). The
#: E12 controls keep a peak checkpoint each (where B and C start), so they run as separate runs,
#: one worker per seed on the one device.
PARTS = (
    ("fig2_arms", "fig2_search.yaml", "fig2_search/gpu_arms", 0.5, True),
    ("fig2_default", None, "fig2_search/gpu_default", 0.4, True),
    ("e12_pilot", "e12_pilot.yaml", "e12_pilot/gpu", 1.0, False),
)
SEEDS = [7, 11, 31, 42, 73, 97, 123, 199]
TINY = {"model.init_args.n_layers": 1, "model.init_args.n_heads": 2, "model.init_args.d_model": 16,
        "model.init_args.d_ff": 32, "data.init_args.p": 23, "data.init_args.batch_size": 64}


def default_sweep(out_dir: Path) -> Path:
    """The canonical default over the arms' seeds and horizon (the arms' reference)."""
    path = out_dir / "fig2_default.yaml"
    path.write_text(yaml.safe_dump({
        "name": "fig2_default", "base": str(REPO / "configs" / "canonical.yaml"), "checkpoint_min_epochs": 0,
        "checkpoint_every": 100, "keep_checkpoints": False,
        "overrides": {"model.init_args.weight_decay": 1.0, "grok.extra_epochs": None, "diagnostics.image_every": 0,
                      "diagnostics.readings": True},
        "profiles": {"paper": {"overrides": {"trainer.max_epochs": 3000}, "grid": {"seed": SEEDS}}}}))
    return path


def shrunk(sweep_file: Path, out_dir: Path, device: str, tiny: bool, compile_mode: str | None = None) -> Path:
    """The sweep file with the device (and ``run.compile``) set, and with ``tiny`` a 1-layer model
    on p = 23 for a few epochs: the CPU check of this script."""
    data = yaml.safe_load(sweep_file.read_text())
    data["base"] = str(REPO / "configs" / "canonical.yaml")
    extra = {"trainer.accelerator": device, **({"run.compile": compile_mode} if compile_mode else {})}
    if tiny:
        extra.update(TINY, **{"trainer.max_epochs": 3})
        data["profiles"]["paper"]["grid"] = {"seed": SEEDS[:2]}
    for profile in data["profiles"].values():
        profile.setdefault("overrides", {}).update(extra)
    path = out_dir / f"{sweep_file.stem}_run.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_part(sweep_file: Path, out: Path, seconds: float | None, ensemble_size: int, workers: int) -> dict:
    from grok_lightning.records import iter_records
    from grok_lightning.sweep.grid import load_sweep
    from grok_lightning.sweep.launchers import run_sweep

    start = time.perf_counter()
    with time_box(seconds):
        result = run_sweep(sweep_file, profile="paper", out=out, workers=workers, ensemble_size=ensemble_size,
                           ensemble_on_cpu=True, threads_per_worker=1, extend=True, stream=sys.stdout)
    wall = time.perf_counter() - start
    planned = {spec.run_id for spec in load_sweep(sweep_file, profile="paper").expand()}
    records = [r for _, r in iter_records(out / "runs") if r.get("run_id") in planned]  # this part's, not the store's
    member_epochs = sum(epochs_reached(r) for r in records)
    return {"out": str(out), "wall_s": round(wall, 1), "time_box_s": seconds, "cut_by_time_box": bool(result.interrupted),
            "statuses": result.statuses, "member_epochs": member_epochs,
            "member_epochs_per_s": round(member_epochs / wall, 2) if wall else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for all parts together")
    parser.add_argument("--ensemble-size", type=int, default=64)
    parser.add_argument("--tiny", action="store_true", help="a 1-layer model on p = 23, 3 epochs, 2 seeds")
    parser.add_argument("--root", default=str(REPO / "results" / "pilots"), help="where the records go")
    parser.add_argument("--out", default="gpu_pilots.json")
    parser.add_argument("--compile", default=None, choices=("default", "reduce-overhead", "max-autotune"),
                        help="run.compile for every run (the same records: it is not part of a run's identity)")
    args = parser.parse_args()
    end = time.time() + args.deadline
    root, work = Path(args.root), Path(args.root) / ".gpu_pilots"
    work.mkdir(parents=True, exist_ok=True)
    seeds = 2 if args.tiny else len(SEEDS)

    def start(sweep_name, folder, ensembles):
        def part(seconds):
            source = REPO / "configs" / "sweeps" / sweep_name if sweep_name else default_sweep(work)
            return run_part(shrunk(source, work, args.device, args.tiny, args.compile), root / folder, seconds,
                            args.ensemble_size if ensembles else 1, 1 if ensembles else seeds)
        return part

    run_timed_parts([(name, share, start(sweep_name, folder, ensembles))
                     for name, sweep_name, folder, share, ensembles in PARTS], end, {"args": vars(args)}, Path(args.out))


def run_timed_parts(parts, end: float, report: dict, out: Path) -> dict:
    """Run ``(name, share, part)`` in order, each ``part(seconds)`` given its share of the time
    left before ``end``; a part with no time left is skipped, a part that fails is reported and
    the next one still runs. The report is rewritten to ``out`` after every part."""
    report["parts"] = {}
    for name, share, part in parts:
        left = end - time.time() - MARGIN_S
        if left <= MARGIN_S:
            report["parts"][name] = {"status": "skipped: no time left"}
            continue
        try:
            report["parts"][name] = {"status": "ran", **part(left * share)}
        except Exception as err:  # noqa: BLE001 - the next part still gets its time
            report["parts"][name] = {"status": "error", "error": f"{type(err).__name__}: {err}"}
        out.write_text(json.dumps(report, indent=1))
        print(f"{name}: {report['parts'][name]}", flush=True)
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
