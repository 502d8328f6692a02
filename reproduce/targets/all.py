"""`make reproduce-all`: every target of the registry in turn, then <out>/REPORT.md.

    python -m reproduce all --profile smoke|medium|paper --out reproduction
    python -m reproduce all --profile medium --out results/medium --no-train   # make report PROFILE=medium
    python -m reproduce all --profile medium --out results/medium --targets fig2 long_horizon

The targets and their order per profile come from :mod:`reproduce.targets.registry`. It ends with
a tally (:mod:`reproduce.tally`): each target's rows and figures, and what did not
run and why. Each target's wall and CPU seconds (this process and its sweep workers, from ``getrusage``) go
to ``<out>/cpu_time.json``; a ``--no-train`` pass keeps the times of the pass that trained. ``--targets`` runs a subset
(two passes on disjoint targets may share ``--out``: each merges its own times into the file).
"""

from __future__ import annotations

import importlib
import json
import resource
import time
from contextlib import nullcontext
from pathlib import Path

from reproduce.manifest import MANIFEST_NAME, check_manifest, measurements_listed, write_manifest
from reproduce.report import write_report
from reproduce.tally import tally
from reproduce.targets.common import cli, launch_argv, missing_runs, parse_args
from reproduce.targets.costs import medium_left_out
from reproduce.targets.registry import order, target


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _missing_runs(target_out: Path) -> str:
    """What a target lacks: its sweep stores whose runs are not all final, and the parts it noted
    as without records (``missing`` in its summary.json; the lock-in target's sweeps). Empty when
    nothing is missing."""
    found = [f"{store}: {m} of {n} runs missing" for store, (m, n) in missing_runs(target_out).items()]
    try:
        found += [text for text in json.loads((target_out / "summary.json").read_text()).get("missing", [])
                  if text not in found]
    except (OSError, ValueError, AttributeError):
        pass
    return "; ".join(found)


def _read_times(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _run_targets(targets: list[str], forwarded: list[str], args, times_path: Path, not_run: dict[str, str]) -> None:
    """Run each target's ``main`` in order; a ``--no-train`` target without records goes to ``not_run``."""
    for name in targets:
        start, cpu = time.time(), _cpu_seconds()
        print(f"== {name} ({args.profile}) ==", flush=True)
        try:
            importlib.import_module(target(name).module).main(forwarded)
        except SystemExit as stop:  # --no-train: a target without records is named in the report, not fatal
            if not args.no_train or stop.code in (None, 0):
                raise
            not_run[name] = _missing_runs(Path(args.out) / name) or str(stop.code)
            print(f"== {name}: not run: {stop.code} ==", flush=True)
            continue
        missing = _missing_runs(Path(args.out) / name) if args.no_train else ""
        if missing:  # the rows stand on the runs present; the report says how many are missing
            not_run[name] = "partial: " + missing
        wall, used = time.time() - start, _cpu_seconds() - cpu
        print(f"== {name}: {wall:.0f} s wall, {used:.0f} CPU-s ==", flush=True)
        if not args.no_train:  # re-read: another pass on other targets may have written since
            times = {**_read_times(times_path), name: {"wall_s": round(wall), "cpu_s": round(used)}}
            times_path.parent.mkdir(parents=True, exist_ok=True)
            times_path.write_text(json.dumps(times, indent=1))


def main(argv=None) -> Path:
    def extra(parser):
        parser.add_argument("--targets", nargs="+", default=None, help="run only these targets, in the profile's order")
        parser.add_argument("--require-manifest", action="store_true",
                            help="--no-train: refuse without <out>/MANIFEST.json (make report); it is checked whenever "
                                 "it is there")

    args = parse_args(__doc__, argv, extra=extra)
    targets = list(order(args.profile))
    unknown = sorted(set(args.targets or ()) - set(targets))
    if unknown:
        raise SystemExit(f"--targets: {', '.join(unknown)} not in the {args.profile} targets {targets}")
    targets = [name for name in targets if args.targets is None or name in args.targets]
    checked = args.no_train and (args.require_manifest or (Path(args.out) / MANIFEST_NAME).exists())
    if checked:
        check_manifest(args.out)  # before any verdict: the records are the ones listed
    forwarded = ["--profile", args.profile, "--out", args.out] + launch_argv(args)
    times_path = Path(args.out) / "cpu_time.json"
    not_run: dict[str, str] = {}
    began = time.time()
    with measurements_listed(args.out, checked=checked) if args.no_train else nullcontext():
        _run_targets(targets, forwarded, args, times_path, not_run)
    if not args.no_train and Path(args.out).is_dir():
        write_manifest(args.out)
    left_out = medium_left_out() if args.profile == "medium" else {}
    Path(args.out).mkdir(parents=True, exist_ok=True)  # --no-train with no records at all: the report says so
    report = write_report(Path(args.out), _read_times(times_path), args.profile, left_out, not_run)
    print(tally(Path(args.out), args.profile, targets, not_run, left_out, report, (time.time() - began) / 60), flush=True)
    return report


if __name__ == "__main__":
    cli(main)
