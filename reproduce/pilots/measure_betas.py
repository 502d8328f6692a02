"""Choose the AdamW betas default by measurement.

Runs the canonical model at lambda = 1.0 with betas (0.9, 0.999) (PyTorch default) and
(0.9, 0.98) (grokking convention) over the same seeds, stopping at grokking, and prints the
per-seed t_grok and the medians (the paper's canonical t_grok is 120-130 epochs).

    python -m reproduce.pilots.measure_betas --seeds 0 1 2 3 4 --out reproduction/betas
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from pathlib import Path

import yaml

from grok_lightning.records import write_json_atomic
from grok_lightning.run import run_config
from reproduce.targets.common import cli

REPO = Path(__file__).resolve().parents[2]



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--max-epochs", type=int, default=400)
    parser.add_argument("--out", default="reproduction/betas")
    args = parser.parse_args(argv)
    base = yaml.safe_load((REPO / "configs" / "canonical.yaml").read_text())
    results = {}
    for betas in ([0.9, 0.999], [0.9, 0.98]):
        key = f"betas={betas}"
        results[key] = {}
        for seed in args.seeds:
            config = copy.deepcopy(base)
            config["seed_everything"] = seed
            config["model"]["init_args"]["betas"] = betas
            config["grok"]["extra_epochs"] = 0
            config["run"].update(profile="measure-betas", checkpoint_every=0, diagnostics=False)
            config["trainer"].update(max_epochs=args.max_epochs, enable_progress_bar=False)
            config["trainer"]["logger"]["init_args"].update(save_dir=args.out, name=f"b2_{betas[1]}", version=f"seed{seed}")
            record = run_config(config)
            results[key][seed] = record["grok_epoch"]
            print(key, "seed", seed, "t_grok", record["grok_epoch"], f"({record['wall_time_s']:.0f} s)", flush=True)
    summary = {k: {"t_grok": v, "median": statistics.median([t if t is not None else float("inf") for t in v.values()])}
               for k, v in results.items()}
    write_json_atomic(Path(args.out) / "betas.json", summary)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    cli(main)
