"""The weight-decay paper's GPU-sized systems at its own protocol, as vectorised ensembles in one
time-boxed GPU window, with records where the paper-profile report reads them.

    python benchmarks/gpu_systems.py --deadline 540                          # make gpu-systems
    python benchmarks/gpu_systems.py --device cpu --tiny --root /tmp/gs      # the CPU-sized check

Parts, in order, each with its share of the time left (a part not started by then is skipped):

1. ``fig10_mlp``: Fig. 10's MLP (``configs/sweeps/cross_arch.yaml``, paper profile: 7 lambdas x 10
   seeds x 10,000 epochs, runs stop 20 epochs after grokking), one ensemble of 70 members, into
   ``<root>/fig10/sweep``.
2. ``fig10_lstm``: Fig. 10's LSTM, the same grid and store.
3. ``fig9_small``: Fig. 9's small transformer (``multitask.yaml``, paper profile: 4 operations x 7
   lambdas x 5 seeds), one ensemble per operation, four on the device at once, into
   ``<root>/fig9/sweep``.

Each part is its sweep file with the paper profile narrowed to that system (the ``zip`` axis), so
its run ids are the paper profile's own: ``python -m reproduce.targets.fig10 --profile paper --out
results/paper --no-train`` scores what ran and names what did not. A run cut by the time box stops
as ``interrupted`` (its record says how far it got); the JSON (``--out``) gives each part's
statuses and member-epochs/s, the throughput a full GPU sweep would be planned from.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml
from _common import REPO
from gpu_pilots import SEEDS, TINY, run_part, run_timed_parts

#: (part, sweep file, its zip narrowed to one system, store under --root, share of the time left,
#: concurrent ensembles on the device)
PARTS = (
    ("fig10_mlp", "cross_arch.yaml", {"model.init_args.arch": ["mlp"], "model.init_args.arch_kwargs": [{}],
                                      "data.init_args.operation": ["add"]}, "fig10", 0.35, 1),
    ("fig10_lstm", "cross_arch.yaml", {"model.init_args.arch": ["lstm"], "model.init_args.arch_kwargs": [{}],
                                       "data.init_args.operation": ["add"]}, "fig10", 0.6, 1),
    ("fig9_small", "multitask.yaml", {"model.init_args.n_layers": [4], "model.init_args.d_model": [128],
                                      "model.init_args.d_ff": [512]}, "fig9", 1.0, 4),
)


def narrowed(sweep_name: str, zip_axes: dict, out_dir: Path, tiny: bool) -> Path:
    """The sweep file with its paper profile narrowed to one system; ``tiny``: a 1-layer model on
    p = 23, 3 epochs, 2 seeds and 2 lambdas (the CPU check of this script)."""
    data = yaml.safe_load((REPO / "configs" / "sweeps" / sweep_name).read_text())
    data["base"] = str(REPO / "configs" / "canonical.yaml")
    paper = data["profiles"]["paper"]
    paper["zip"] = {**(data.get("zip") or {}), **zip_axes}
    if tiny:
        paper.setdefault("overrides", {}).update(TINY, **{"trainer.max_epochs": 3})
        grid = dict(data.get("grid") or {})
        paper["grid"] = {**grid, "wd": grid["wd"][-2:], "seed": SEEDS[:2]}
    data["profiles"] = {"paper": paper}
    path = out_dir / f"{Path(sweep_name).stem}_{next(iter(zip_axes.values()))[0]}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for the tiny check")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for all parts together")
    parser.add_argument("--ensemble-size", type=int, default=70, help="members per ensemble (70: a system's whole grid)")
    parser.add_argument("--tiny", action="store_true", help="a 1-layer model on p = 23, 3 epochs, 2 seeds, 2 lambdas")
    parser.add_argument("--root", default=str(REPO / "results" / "paper"), help="the paper profile's output folder")
    parser.add_argument("--parts", nargs="+", default=[p[0] for p in PARTS], choices=[p[0] for p in PARTS])
    parser.add_argument("--out", default="gpu_systems.json")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (use --device cpu --tiny for the check)")
    end = time.time() + args.deadline
    root = Path(args.root)
    work = root / ".gpu_systems"
    work.mkdir(parents=True, exist_ok=True)

    def start(sweep_name, zip_axes, folder, concurrent):
        def part(seconds):  # trainer.accelerator stays "auto" (the GPU there): the run ids are the paper profile's
            path = narrowed(sweep_name, zip_axes, work, args.tiny)
            return run_part(path, root / folder / "sweep", seconds, args.ensemble_size, concurrent)
        return part

    run_timed_parts([(name, share, start(sweep_name, zip_axes, folder, concurrent))
                     for name, sweep_name, zip_axes, folder, share, concurrent in PARTS if name in args.parts],
                    end, {"args": vars(args)}, Path(args.out))


if __name__ == "__main__":
    main()
