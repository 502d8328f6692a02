"""Glue shared by the targets: their command line, run a sweep, load its records, describe a
configuration, caption a figure with its smoke scope from the registry."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grok_lightning.plots import common as plots_common
from grok_lightning.records import write_json_atomic
from grok_lightning.sweep.launchers import LAUNCHERS
from reproduce.targets import registry
from reproduce.targets.registry import PROFILES

REPO = Path(__file__).resolve().parents[2]
SWEEPS = REPO / "configs" / "sweeps"


@dataclass(frozen=True)
class Launch:
    """How a target launches its sweeps, from its command line; passed down, never global.
    ``train=False`` (``--no-train``) reads the records already there and trains nothing."""

    train: bool = True
    workers: int | None = None
    ensemble_size: int = 1
    launcher: str = "local"
    address: str | None = None
    gpus_per_run: float = 0.0
    devices: str | None = None
    runs_per_device: int | None = None
    #: the results folder whose MANIFEST.json lists its final records, rewritten after training
    manifest_root: str | None = None


def parse_args(doc: str, argv=None, extra=None) -> argparse.Namespace:
    """The figure targets' shared flags (``args.launch`` holds how to launch); ``extra(parser)``
    adds a target's own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="smoke")
    parser.add_argument("--out", default="reproduction", help="output root (default: reproduction/)")
    parser.add_argument("--workers", type=int, default=None, help="local sweep workers (default: one per core)")
    parser.add_argument("--ensemble-size", type=int, default=1, help="runs per vectorised ensemble (sweep run --ensemble-size)")
    parser.add_argument("--launcher", choices=tuple(LAUNCHERS), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (--launcher ray)")
    parser.add_argument("--gpus-per-run", type=float, default=0.0, help="GPUs per Ray task (--launcher ray; 0.5 = two runs per GPU)")
    parser.add_argument("--devices", default=None, help="GPUs for local workers: a count (4) or numbers (0,2,5); one per worker, round robin")
    parser.add_argument("--runs-per-device", type=int, default=None, help="local workers per GPU with --devices (default 1)")
    parser.add_argument("--no-train", action="store_true",
                        help="train nothing: figures, fits and report rows from the records already in --out")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if not str(args.out).strip() or Path(args.out).is_file():
        parser.error(f"--out={args.out!r}: must name a folder")
    args.launch = Launch(train=not args.no_train, workers=args.workers, ensemble_size=args.ensemble_size,
                         launcher=args.launcher, address=args.address, gpus_per_run=args.gpus_per_run,
                         devices=args.devices, runs_per_device=args.runs_per_device, manifest_root=args.out)
    return args


def launch_argv(args: argparse.Namespace) -> list[str]:
    """The launch flags of ``args`` as a command line, for a target that calls other targets."""
    flags = {"--workers": args.workers, "--ensemble-size": args.ensemble_size, "--launcher": args.launcher,
             "--address": args.address, "--gpus-per-run": args.gpus_per_run or None, "--devices": args.devices,
             "--runs-per-device": args.runs_per_device}
    return [text for flag, value in flags.items() if value is not None for text in (flag, str(value))] + \
        (["--no-train"] if args.no_train else [])


def sweep_records(sweep_file: str | Path, profile: str, out: Path, launch: Launch) -> tuple[list[dict], list[str]]:
    """Run (or resume) a sweep into ``out/sweep``; return ``(records, missing)``: the records of
    the current grid's runs and the names of its runs without a final record.

    ``sweep_file`` is a name under configs/sweeps/ or a path (e.g. a derived sweep file).
    When the sweep file changed since ``out/sweep`` was made, the new grid is adopted and
    finished runs it still contains are kept; only the current grid's runs are returned (a
    removed lambda never leaks into a fit). With ``launch.train`` false nothing runs: the
    records already there are read; runs without a final record are named on stderr, and
    count as missing (a run left running or interrupted here too, as in a clean clone).
    """
    import sys

    from grok_lightning.records import FINAL_STATUSES
    from grok_lightning.sweep.grid import load_sweep
    from grok_lightning.sweep.launchers import run_sweep

    path = sweep_path(sweep_file)
    if launch.train:
        run_sweep(path, profile=profile, out=out / "sweep", workers=launch.workers, extend=True,
                  ensemble_size=launch.ensemble_size, launcher=launch.launcher, address=launch.address,
                  gpus_per_run=launch.gpus_per_run, devices=launch.devices, runs_per_device=launch.runs_per_device)
        if launch.manifest_root is not None:  # what was trained is listed where the report checks it
            from reproduce.manifest import write_manifest

            write_manifest(launch.manifest_root)
    specs = load_sweep(path, profile=profile).expand()
    records = read_planned(out / "sweep", specs)
    final = {r["run_id"] for r in records if r.get("status") in FINAL_STATUSES}
    missing = [spec.name for spec in specs if spec.run_id not in final]
    if missing and not launch.train:
        print(f"{path.name} ({profile}): {len(missing)} of {len(specs)} runs have no final record in {out / 'sweep'}: "
              f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}", file=sys.stderr)
        if not final:  # nothing to analyse: the caller stops (or, in a target of parts, notes it in its summary)
            raise SystemExit(f"{path.name} ({profile}): {len(specs)} of {len(specs)} runs missing (no final record yet)")
        records = [r for r in records if r["run_id"] in final]
    return records, missing


def read_planned(store: Path, specs) -> list[dict]:
    """The records of the planned runs ``specs`` in the sweep folder ``store``, in the order of
    their folder names (the order the fits' resampling sees): each run once, from its own folder,
    each the run its id names (:func:`grok_lightning.sweep.planned.planned_records`); runs without
    a record are left out. Every target reads its records through here."""
    from grok_lightning.sweep.planned import planned_records

    runs = Path(store) / "runs"
    found = planned_records(runs, sorted(specs, key=lambda spec: spec.name)) if runs.is_dir() else []
    return [record for _, record in found if record is not None]


def records_if_any(sweep_file: str | Path, profile: str, out: Path, launch: Launch, label: str) -> tuple[list[dict], list[str]]:
    """:func:`sweep_records` for a part of a target that may have no record yet (reading shipped
    records only): ``(records, [])``, or ``([], [why])`` where it has none, said on stdout under
    ``label``. Runs missing from a store that exists are found there by the report."""
    try:
        return sweep_records(sweep_file, profile, out, launch)[0], []
    except SystemExit as reason:
        print(f"{label}: {reason}")
        return [], [str(reason)]


def missing_runs(target_out: Path) -> dict[str, tuple[int, int]]:
    """``{store: (runs without a final record, runs planned)}`` of every sweep store under a
    target's output folder, for the report (read from the stores, as in a clean clone)."""
    from grok_lightning.records import FINAL_STATUSES
    from grok_lightning.sweep.store import SweepStore

    found = {}
    for plan in sorted(Path(target_out).rglob("plan.json")):
        store = SweepStore(plan.parent)
        entries = store.load_plan()
        done = sum(store.status_of(e["name"]) in FINAL_STATUSES for e in entries)
        if done < len(entries):
            sweep = store.load_sweep()
            name = Path(sweep.source).name if sweep.source else f"{sweep.name}.yaml"
            found[f"{name} ({sweep.profile})"] = (len(entries) - done, len(entries))
    return found


def cli(main) -> None:
    """Run a target's ``main()`` as a command: a configuration, record or file-system problem is
    one ``error:`` line and exit status 2, not a traceback."""
    import sys

    from grok_lightning.config import ConfigError

    try:
        main()
    except ConfigError as err:
        sys.exit(f"error: {err}")
    except OSError as err:  # read-only output, a full disk, a file where a folder should be
        where = f"{err.filename}: " if err.filename else ""
        sys.exit(f"error: {where}{err.strerror or err}")


def sweep_path(sweep_file: str | Path) -> Path:
    """A sweep file name under configs/sweeps/, or a path to a file (absolute, or relative to the
    working directory, e.g. a derived ``reproduction/fig8/B/sweep_file.yaml``).

    >>> sweep_path("canonical_wd.yaml") == SWEEPS / "canonical_wd.yaml"
    True
    """
    path = Path(sweep_file)
    return path if path.is_absolute() or path.is_file() else SWEEPS / sweep_file


def planned_configs(sweep_file: str | Path, profile: str) -> list[dict]:
    """The config of every run a sweep file plans under ``profile``, in plan order: what a target
    expects, so a bin without a finished run can be named rather than silently absent."""
    from grok_lightning.sweep.grid import load_sweep

    return [spec.config for spec in load_sweep(sweep_path(sweep_file), profile=profile).expand()]


def caption(profile: str, details: str, differs: str | None = None, figure: str | None = None) -> str:
    """A figure's caption (:func:`grok_lightning.plots.common.caption`); under the smoke profile it
    ends with what the target or figure ``figure`` of the registry can show and what needs a longer
    profile (``figure=None``: a caption shared by figures, each adding its own :func:`smoke_scope`)."""
    return plots_common.caption(profile, details, differs, registry.smoke_scope(figure) if figure else None)


def smoke_scope(profile: str, figure: str) -> str:
    """The smoke line of the registry's ``figure`` (empty for the other profiles)."""
    return plots_common.smoke_line(profile, registry.smoke_scope(figure))


def describe(record: dict) -> str:
    """Every hyperparameter of a run in one caption line (from its record, never typed in)."""
    c = record["config"]
    m, d = c.get("model", {}), c.get("data", {})
    shape = f"{m.get('n_layers')}L x {m.get('n_heads')}H, d {m.get('d_model')}, d_ff {m.get('d_ff')}"
    return (f"p={d.get('p')} {d.get('operation')} frac={d.get('train_fraction')} batch={d.get('batch_size')}; "
            f"{m.get('arch')} {shape}, init {m.get('init')}; AdamW lr {m.get('lr')} betas {tuple(m.get('betas', ()))} "
            f"wd on {m.get('weight_decay_scope')}; eval every {m.get('eval_every')} (dense to {m.get('eval_dense_until')}); "
            f"precision {c.get('precision', '32-true')}")


def model_shape(record: dict) -> str:
    """'2L x 4H d64': a transformer's size in one label (from its record)."""
    m = record["config"]["model"]
    return f"{m['n_layers']}L x {m['n_heads']}H d{m['d_model']}"


def n_params(record: dict) -> int:
    """Parameter count of a run's model: from the record, else rebuilt on the meta device."""
    if record.get("n_params"):
        return int(record["n_params"])
    import torch

    from grok_lightning.modules.grokking import build_from_config

    with torch.device("meta"):
        model = build_from_config(record["config"]["model"], record["config"]["data"])
    return sum(t.numel() for t in model.parameters())


def sweep_summary(records: list[dict]) -> dict:
    """Seeds, lambdas, horizon and status counts of a sweep, plus a caption line saying so."""
    from collections import Counter

    seeds = sorted({r["config"]["seed"] for r in records})
    wds = sorted({r["config"]["wd"] for r in records})
    horizon = max(r["config"]["max_epochs"] for r in records)
    per_wd = Counter(r["config"]["wd"] for r in records)
    statuses = dict(Counter(r["status"] for r in records))
    text = (f"{len(records)} runs: lambda {wds}, seeds {seeds}, horizon {horizon} epochs; statuses {statuses}")
    low, high = min(per_wd.values()), max(per_wd.values())
    # a range ("2-5") while some lambdas have fewer finished seeds than others
    return {"seeds": seeds, "wds": wds, "horizon": horizon,
            "seeds_per_wd": f"{low}" if low == high else f"{low}-{high}",
            "statuses": statuses, "n_runs": len(records), "text": text}


def median_ci(values) -> tuple[float, list[float] | None, float | None]:
    """Median, its distribution-free order-statistic interval and that interval's real coverage
    (``grok_lightning.stats.intervals.median_interval``: the range of 3 values covers 75%); no
    interval with fewer than 2 values.

    >>> median_ci([130, 140, 140])
    (140.0, [130.0, 140.0], 0.75)
    """
    from grok_lightning.stats.intervals import median_interval

    values = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not values:
        return float("nan"), None, None
    if len(values) < 2:
        return float(values[0]), None, None
    interval = median_interval(values)
    return interval.estimate, interval.ci, interval.coverage


def write_outputs(out: Path, summary: dict, rows: list[dict]) -> None:
    write_json_atomic(out / "summary.json", summary)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
