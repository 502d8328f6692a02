"""``grok-lightning sweep``: run / resume, status and collect.

    grok-lightning sweep run configs/sweeps/canonical_wd.yaml --profile smoke [--workers N]
        [--threads-per-worker T] [--out DIR] [--launcher local|ray] [--address ADDR]
        [--gpus-per-run 0.25] [--ensemble-size E [--ensemble-on-cpu]] [--devices 4|0,2,5] [--runs-per-device R]
        [--extend] [--dry-run] [--trust-code MODULE]
    grok-lightning sweep run DIR                  # resume the sweep stored in DIR
    grok-lightning sweep status DIR [--json]
    grok-lightning sweep collect DIR --out runs.parquet|runs.csv [--no-pending]

Run the same ``sweep run`` command again to resume: final runs are skipped, interrupted /
killed / failed ones restart from their last checkpoint. Errors in the sweep file are one line
(``error: ...``, exit status 2) before anything runs.
"""

from __future__ import annotations

import argparse
import json
import sys

from grok_lightning.config import ConfigError, OneLineArgumentParser
from grok_lightning.sweep.launchers import LAUNCHERS

__all__ = ["main", "build_parser"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="grok-lightning sweep", description="Run, resume and aggregate sweeps.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run or resume a sweep",
                         description="Run a sweep file, or resume the sweep stored in a directory. Running the "
                                     "same command again resumes: final runs are skipped.")
    run.add_argument("sweep", help="sweep file (configs/sweeps/*.yaml, or a packaged one by name: canonical_wd) or an "
                                   "existing sweep directory")
    run.add_argument("--profile", help="profile in the sweep file (default: default_profile, else smoke)")
    run.add_argument("--out", help="sweep directory (default: runs/sweeps/<name>-<profile>)")
    run.add_argument("--workers", type=_positive_int, default=None,
                     help="local worker processes (default: one per CPU core, or devices x runs per device with "
                          "--devices; 0 = run in this process, unpinned)")
    run.add_argument("--threads-per-worker", type=_positive_int, default=None,
                     help="torch threads per run (default 1)")
    run.add_argument("--launcher", choices=tuple(LAUNCHERS), default="local")
    run.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    run.add_argument("--gpus-per-run", type=float, default=0.0, help="GPUs per Ray task (fractions share a GPU)")
    run.add_argument("--extend", action="store_true",
                     help="adopt a changed grid in an existing DIR (its runs are kept)")
    run.add_argument("--ensemble-size", type=_positive_int, default=1,
                     help="train up to this many compatible runs (same config but seed and weight decay) as one "
                          "vectorised ensemble per task (default 1: one run per task); records are the same. "
                          "GPUs only: runs that train on CPU stay single runs (docs/performance.md)")
    run.add_argument("--ensemble-on-cpu", action="store_true",
                     help="pack ensembles with --ensemble-size even where the runs train on CPU")
    run.add_argument("--devices", default=None,
                     help="GPUs for the local workers: a count (4) or device numbers (0,2,5; one device: 3,); each "
                          "worker sees one of them, round robin (default: no pinning)")
    run.add_argument("--runs-per-device", type=_positive_int, default=None,
                     help="local workers per GPU with --devices (default 1); --workers defaults to devices x this")
    run.add_argument("--dry-run", action="store_true", help="print the runs and exit")
    run.add_argument("--trust-code", action="append", default=[], metavar="MODULE",
                     help="let the sweep's configs name classes and callables of this module of yours (repeatable; "
                          "by default only grok_lightning, lightning, torch and torchmetrics)")

    status = sub.add_parser("status", help="status counts of a sweep directory, epoch / max epochs per running run")
    status.add_argument("dir")
    status.add_argument("--json", action="store_true", help="print index.json instead")
    status.add_argument("--runs", action="store_true", help="one line per run")

    collect = sub.add_parser("collect", help="records -> one table (CSV or parquet)")
    collect.add_argument("dir")
    collect.add_argument("--out", required=True, help="runs.csv or runs.parquet")
    collect.add_argument("--no-pending", action="store_true", help="leave out runs without a record")
    return parser


def _run(args) -> int:
    from grok_lightning.config import trust_code
    from grok_lightning.package_data import sweep_file
    from grok_lightning.sweep.launchers import prepare, profile_label, run_sweep

    trust_code(args.trust_code)  # the runs get the same (make_task)
    args.sweep = sweep_file(args.sweep)

    if args.dry_run:
        sweep, runs, store = prepare(args.sweep, args.profile, args.out, extend=args.extend)
        print(f"sweep {sweep.name}{profile_label(sweep)}: {len(runs)} runs -> {store.root}")
        for run in runs:
            axes = ", ".join(f"{k}={v}" for k, v in run.axes.items())
            print(f"  {run.name}  [{run.run_id}]  {axes}")
        return 0
    result = run_sweep(args.sweep, profile=args.profile, out=args.out, workers=args.workers,
                       threads_per_worker=args.threads_per_worker, launcher=args.launcher,
                       address=args.address, gpus_per_run=args.gpus_per_run, extend=args.extend,
                       ensemble_size=args.ensemble_size, devices=args.devices,
                       runs_per_device=args.runs_per_device, ensemble_on_cpu=args.ensemble_on_cpu)
    if result.interrupted:
        return 130
    return 0 if result.ok else 1


def _status(args) -> int:
    from grok_lightning.sweep.store import SweepStore

    store = SweepStore(args.dir)
    store.load_plan()  # a clear error when DIR is not a sweep
    index = store.rebuild_index(write=False)
    if args.json:
        print(json.dumps(index, indent=1))
        return 0
    print(f"{store.root}: {store.status_line(index)}")
    for line in store.running_lines(index):  # epoch / max epochs of each running run
        print(line)
    if args.runs:
        for name, run in index["runs"].items():
            extra = f" grok@{run['grok_epoch']}" if run.get("grok_epoch") is not None else ""
            error = f"  {run['error']}" if run.get("error") and run["status"] != "completed" else ""
            print(f"  {run['status']:<11} {name}{extra}{error}")
    return 0


def _collect(args) -> int:
    from grok_lightning.sweep.store import collect, write_table

    frame = collect(args.dir, include_pending=not args.no_pending)
    path, note = write_table(frame, args.out)
    if note:
        print(f"note: {note}", file=sys.stderr)
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    print(f"wrote {len(frame)} rows x {frame.shape[1]} columns to {path} "
          f"({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"run": _run, "status": _status, "collect": _collect}[args.command](args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # read-only output, a full disk, a file where a folder should be
        print(f"error: {f'{err.filename}: ' if err.filename else ''}{err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
