"""What each GPU-sized system of 2605.20441 would cost on CPU: CPU-seconds per epoch, measured.

    python -m reproduce.pilots.costs [--systems fig10_lstm fig9_medium ...] [--epochs 10]
    python -m reproduce.pilots.costs --table      # trains nothing: prints the table of costs.json

For each system, the first run of its sweep's ``paper`` profile (the paper's model size, data and
optimiser) trains ``--epochs`` epochs plus one, on one thread, with the medium profile's bf16
autocast and every diagnostic the real runs record, evaluated every 10 epochs as a long run is
(the dense evaluation of the first 10 epochs would overstate the cost). The cost per epoch is the CPU time of the
last ``--epochs`` epochs (the first epoch carries the setup and is left out), read from two
records of the same configuration: ``(cpu(1 + K) - cpu(1)) / K``. Multiplied by the paper
protocol's runs x epochs it gives the CPU-hours the medium report states for every system it does
not run ("not run here (compute: N CPU-h measured)"); runs that stop 20 epochs after grokking
cost less, so the protocol's figure is an upper bound, said so in the rows.

Writes ``results/pilots/costs/costs.json`` (one entry per system, merged with what is there) and
the run records under ``results/pilots/costs/<system>/``; the reports read it with
:mod:`reproduce.targets.costs`.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

from grok_lightning.records import write_json_atomic
from grok_lightning.sweep.grid import get_dotted, load_sweep, set_dotted
from reproduce.targets.common import SWEEPS, cli
from reproduce.targets.costs import COSTS, costs_table, load_costs

ROOT = COSTS.parent
#: system -> (sweep file, the paper-profile runs it stands for: {dotted key: value} filter)
SYSTEMS = {
    "fig9_small": ("multitask.yaml", {"model.init_args.n_layers": 4}),
    "fig9_medium": ("multitask.yaml", {"model.init_args.n_layers": 6}),
    "fig10_mlp": ("cross_arch.yaml", {"model.init_args.arch": "mlp"}),
    "fig10_lstm": ("cross_arch.yaml", {"model.init_args.arch": "lstm"}),
    "fig10_mamba": ("cross_arch.yaml", {"model.init_args.arch": "mamba", "model.init_args.arch_kwargs.expand": 4,
                                         "data.init_args.operation": "add"}),
    "fig1_19M": ("regime_map.yaml", {"model.init_args.d_model": 512}),
    "fig1_85M": ("regime_map.yaml", {"model.init_args.d_model": 768}),
    # rLLC's 11 checkpoints come from one run: seed 42 at lambda 1 for 20,000 epochs
    "rllc_run": ("long_horizon.yaml", {"seed_everything": 42, "model.init_args.weight_decay": 1.0}),
}
#: the medium profiles' precision: bf16 autocast (measured equal to FP32 on the canonical model),
#: FP32 where a medium sweep runs a model bf16 was not measured on
PRECISION = "bf16-mixed"
PRECISION_OF = {"fig10_mlp": "32-true"}


def paper_runs(system: str) -> list:
    """The paper profile's runs this system stands for (its sweep's specs that match the filter)."""
    sweep_file, match = SYSTEMS[system]
    specs = load_sweep(SWEEPS / sweep_file, profile="paper").expand()
    return [s for s in specs if all(get_dotted(s.config, k, None) == v for k, v in match.items())]


def timed_config(config: dict, epochs: int, record_path: Path, precision: str = PRECISION) -> dict:
    """The run's config for ``epochs`` epochs on one thread: no checkpoints, no logger files."""
    config = copy.deepcopy(config)
    set_dotted(config, "trainer.max_epochs", int(epochs))
    set_dotted(config, "trainer.precision", precision)
    set_dotted(config, "trainer.logger", False)
    set_dotted(config, "trainer.enable_progress_bar", False)
    set_dotted(config, "grok.extra_epochs", None)  # time every epoch asked for, grokked or not
    # the cadence of a long run (evaluation and diagnostics every 10 epochs), not its dense start;
    # no attention images, as in every medium sweep
    set_dotted(config, "model.init_args.eval_dense_until", 0)
    set_dotted(config, "diagnostics.image_every", 0)
    set_dotted(config, "run.threads", 1)
    set_dotted(config, "run.checkpoint_every", 0)
    set_dotted(config, "run.record_path", str(record_path))
    set_dotted(config, "trainer.default_root_dir", str(record_path.parent))  # config.yaml goes there, not to cwd
    set_dotted(config, "run.profile", "custom")
    return config


def measure(system: str, epochs: int, out: Path) -> dict:
    """Train the system's first paper run for 1 and 1 + ``epochs`` epochs; its cost per epoch."""
    from grok_lightning.run import run_config

    runs = paper_runs(system)
    spec, precision = runs[0], PRECISION_OF.get(system, PRECISION)
    cpu = {}
    for n in (1, 1 + epochs):
        started = time.time()
        record = run_config(timed_config(spec.config, n, out / system / f"epochs{n}" / "record.json", precision))
        cpu[n] = (record["cpu_time_s"], time.time() - started)
    per_epoch = (cpu[1 + epochs][0] - cpu[1][0]) / epochs
    horizon = int(get_dotted(spec.config, "trainer.max_epochs", 0))
    model = get_dotted(spec.config, "model.init_args", {})
    return {"system": system, "sweep": SYSTEMS[system][0], "run": spec.name, "n_params": record.get("n_params"),
            "model": {k: model.get(k) for k in ("arch", "n_layers", "n_heads", "d_model", "d_ff", "arch_kwargs")},
            "precision": precision, "threads": 1, "epochs_timed": epochs,
            "cpu_s_per_epoch": per_epoch, "cpu_s_first_epoch": cpu[1][0],
            "paper_runs": len(runs), "paper_epochs": horizon,
            "paper_protocol_cpu_h": per_epoch * len(runs) * horizon / 3600,
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "note": "one thread, cores possibly shared with other runs; the protocol's CPU-h is an upper bound "
                    "(runs stop 20 epochs after grokking where the sweep says so)"}


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--epochs", type=int, default=10,
                        help="epochs timed after the first (default 10: one evaluation among them, as in a long run)")
    parser.add_argument("--out", type=Path, default=ROOT)
    parser.add_argument("--table", action="store_true", help="print the table of costs.json; train nothing")
    args = parser.parse_args(argv)
    path = args.out / "costs.json"
    costs = load_costs(path)
    if not args.table:
        for system in args.systems:
            costs[system] = measure(system, args.epochs, args.out)
            write_json_atomic(path, costs)  # each system as it finishes
            print(f"{system}: {costs[system]['cpu_s_per_epoch']:.2f} CPU-s/epoch", flush=True)
    print(costs_table(costs))
    return path


if __name__ == "__main__":
    cli(main)
