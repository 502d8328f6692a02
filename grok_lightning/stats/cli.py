"""``grok-lightning analyze``: statistics straight from run records.

    grok-lightning analyze critical-wd RUNS_DIR --method paper|glm [--smoothing 0.5]
        [--n-bootstrap 1500] [--seed 42] --out fit.json
    grok-lightning analyze power-law RUNS_DIR (--wd-c X | --fit fit.json) [--lambdas 0.1,0.5,1,2]
        [--n-bootstrap 1500] [--seed 42] --out nu.json
    grok-lightning analyze paired DIR_A DIR_B --metric KEY [--n-bootstrap 10000] --out paired.json

Every ``record.json`` below a directory is read (:func:`grok_lightning.records.iter_records`);
a run counts as grokked when its record has a ``grok_epoch`` (see
:func:`grok_lightning.stats.records_to_arrays` for how statuses count). ``--where KEY=VALUE``
keeps only records whose (dotted) field equals the value, e.g. ``--where config.data.operation=add``.
Bad input is one line (``error: ...``, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from grok_lightning.config import ConfigError, OneLineArgumentParser

__all__ = ["main", "build_parser", "load_records", "record_value"]


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="grok-lightning analyze", description="Statistics from run records.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, runs=True):
        if runs:
            p.add_argument("runs_dir", help="directory searched recursively for record.json")
        p.add_argument("--out", required=True, help="JSON result file")
        p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                       help="keep records whose dotted field equals VALUE (repeatable)")
        p.add_argument("--seed", type=int, default=42, help="bootstrap seed (default 42)")

    crit = sub.add_parser("critical-wd", help="lambda_c from grok outcomes vs weight decay")
    common(crit)
    crit.add_argument("--method", choices=("paper", "glm"), default="paper")
    crit.add_argument("--smoothing", type=float, default=0.0, help="Laplace smoothing a (paper method; Mamba used 0.5)")
    crit.add_argument("--n-bootstrap", type=int, default=1500)

    power = sub.add_parser("power-law", help="nu of t_grok = A (lambda - lambda_c)^-nu")
    common(power)
    source = power.add_mutually_exclusive_group(required=True)
    source.add_argument("--wd-c", type=float, help="lambda_c (fixed)")
    source.add_argument("--fit", help="a critical-wd result JSON whose wd_c is used")
    power.add_argument("--lambdas", type=_floats, default=None,
                       help="keep only these lambda bins, e.g. 0.1,0.5,1,2 (the four-bin variant)")
    power.add_argument("--n-bootstrap", type=int, default=1500)
    power.add_argument("--jackknife", action="store_true", help="add a leave-one-out jackknife")

    paired = sub.add_parser("paired", help="paired comparison of a metric between two run directories, by seed")
    paired.add_argument("dir_a")
    paired.add_argument("dir_b")
    common(paired, runs=False)
    paired.add_argument("--metric", required=True,
                        help="record field (dotted), e.g. grok_epoch, final_test_acc, peak_entropy_std")
    paired.add_argument("--n-bootstrap", type=int, default=10000)
    return parser


# --- records --------------------------------------------------------------------------------------
_MISSING = object()


def record_value(record: dict, key: str, default: Any = _MISSING) -> Any:
    """Dotted lookup in a record; list items by index (``history.test_acc.-1``).

    >>> record_value({"config": {"wd": 0.1}, "history": {"x": [1, 2]}}, "history.x.-1")
    2
    """
    node: Any = record
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                node = _MISSING
                break
        else:
            node = _MISSING
            break
    if node is _MISSING:
        if default is _MISSING:
            raise KeyError(key)
        return default
    return node


def _matches(record: dict, where: list[str]) -> bool:
    for clause in where:
        key, sep, value = clause.partition("=")
        if not sep:
            raise ConfigError(f"--where={clause!r}: expected KEY=VALUE")
        actual = record_value(record, key.strip(), None)
        if actual is None:
            if value.strip().lower() not in ("none", "null"):
                return False
            continue
        if isinstance(actual, (int, float)) and not isinstance(actual, bool):
            try:
                if not math.isclose(float(actual), float(value), rel_tol=1e-9, abs_tol=0.0):
                    return False
                continue
            except ValueError:
                return False
        if str(actual).lower() != value.strip().lower():
            return False
    return True


def load_records(root: str | Path, where: list[str] | None = None) -> list[tuple[Path, dict]]:
    """``(path, record)`` for every record below ``root`` passing the ``--where`` filters."""
    from grok_lightning.records import iter_records

    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such directory")
    try:
        found = list(iter_records(root))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not found:
        raise ConfigError(f"{root}: no record.json below it")
    kept = [(p, r) for p, r in found if _matches(r, where or [])]
    if not kept:
        raise ConfigError(f"{root}: no record matches {' and '.join(where or [])} ({len(found)} records)")
    return kept


def _write(out: str | Path, payload: dict) -> Path:
    from grok_lightning.records import write_json_atomic
    from grok_lightning.stats.arrays import nan_to_none

    return write_json_atomic(out, nan_to_none(payload))


def _arrays(records: list[dict]):
    from grok_lightning.stats import records_to_arrays

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wd, grokked, t_grok = records_to_arrays(records)
    notes = [str(w.message) for w in caught]
    return wd, grokked, t_grok, notes


def _fmt(x: Any) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


# --- commands -------------------------------------------------------------------------------------
def _critical(args) -> int:
    from grok_lightning.stats import fit_critical_weight_decay

    pairs = load_records(args.runs_dir, args.where)
    wd, grokked, _, notes = _arrays([r for _, r in pairs])
    fit = fit_critical_weight_decay(wd, grokked, method=args.method, smoothing=args.smoothing,
                                    n_bootstrap=args.n_bootstrap, seed=args.seed)
    result = fit.to_dict()
    result["warnings"] = list(result.get("warnings") or []) + notes
    result["source"] = {"runs_dir": str(Path(args.runs_dir).resolve()), "n_record_files": len(pairs),
                        "where": args.where, "command": "critical-wd"}
    path = _write(args.out, result)
    lo, hi = fit.wd_c_ci
    where = f"({fit.method}, status {fit.status}, {fit.n_fit} runs in {len(fit.bins)} bins) -> {path}"
    if fit.separable:
        # no point estimate exists (the paper method's number is where its optimiser stopped):
        # the data only say that lambda_c lies between the largest failure and the smallest success
        a, b = fit.wd_c_bracket
        print(f"lambda_c in [{_fmt(a)}, {_fmt(b)}] (the outcomes bracket it; no point estimate) {where}")
    else:
        print(f"lambda_c = {_fmt(fit.wd_c)} [{_fmt(lo)}, {_fmt(hi)}] {where}")
    for note in result["warnings"]:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _power_law(args) -> int:
    from grok_lightning.stats import fit_time_to_grok_power_law

    if args.fit:
        try:
            with open(args.fit) as handle:
                fit_json = json.load(handle)
            wd_c = fit_json["wd_c"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"--fit={args.fit}: cannot read wd_c ({type(err).__name__}: {err})") from None
        if fit_json.get("separable") or fit_json.get("status") in ("separable", "all_grokked", "none_grokked"):
            # lambda_c is only bracketed, and nu depends strongly on where in the bracket it lies:
            # a nu from one point of it, with a CI that ignores the rest, would be a false precision
            bracket = ", ".join(_fmt(v) for v in fit_json.get("wd_c_bracket") or [None, None])
            raise ConfigError(f"--fit={args.fit}: status {fit_json.get('status')!r}: lambda_c is only known to "
                              f"lie in [{bracket}], so nu is not identified; pass --wd-c to fix lambda_c yourself")
        if wd_c is None:
            raise ConfigError(f"--fit={args.fit}: wd_c is null (the lambda_c fit failed); pass --wd-c")
    else:
        wd_c = args.wd_c
    pairs = load_records(args.runs_dir, args.where)
    wd, _, t_grok, notes = _arrays([r for _, r in pairs])
    fit = fit_time_to_grok_power_law(wd, t_grok, lambda_c=float(wd_c), lambdas=args.lambdas,
                                     n_bootstrap=args.n_bootstrap, seed=args.seed, jackknife=args.jackknife)
    result = fit.to_dict()
    result["warnings"] = list(result.get("warnings") or []) + notes
    result["source"] = {"runs_dir": str(Path(args.runs_dir).resolve()), "n_record_files": len(pairs),
                        "where": args.where, "wd_c_from": args.fit or "--wd-c", "command": "power-law"}
    path = _write(args.out, result)
    lo, hi = fit.nu_ci
    print(f"nu = {_fmt(fit.nu)} [{_fmt(lo)}, {_fmt(hi)}] (lambda_c {_fmt(float(wd_c))}, {fit.n_points} runs) -> {path}")
    for note in result["warnings"]:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _by_seed(root: str, where: list[str], metric: str) -> dict[int, float]:
    values: dict[int, float] = {}
    missing_metric = 0
    for path, record in load_records(root, where):
        seed = record_value(record, "config.seed", record.get("seed"))
        if seed is None:
            raise ConfigError(f"{path}: record has no config.seed to pair by")
        if seed in values:
            raise ConfigError(f"{root}: two records with seed {seed} (e.g. {path}); pair one condition per "
                              f"directory or narrow it with --where")
        absent = object()
        value = record_value(record, metric, absent)
        if value is absent:
            missing_metric += 1
            value = None
        try:
            values[seed] = float("nan") if value is None else float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: --metric {metric}={value!r} is not a number") from None
    if missing_metric == len(values):
        raise ConfigError(f"{root}: no record has the field {metric!r}")
    return values


def _paired(args) -> int:
    from grok_lightning.stats import paired_comparison

    a = _by_seed(args.dir_a, args.where, args.metric)
    b = _by_seed(args.dir_b, args.where, args.metric)
    seeds = sorted(set(a) & set(b))
    unpaired = sorted(set(a) ^ set(b))
    if len(seeds) < 2:
        raise ConfigError(f"need at least 2 seeds present in both directories, got {seeds}")
    result_obj = paired_comparison([a[s] for s in seeds], [b[s] for s in seeds],
                                   n_bootstrap=args.n_bootstrap, seed=args.seed, nan_policy="omit")
    result = result_obj.to_dict()
    notes = list(result.get("warnings") or [])
    if unpaired:
        notes.append(f"seeds in only one directory (left out): {unpaired}")
    if result_obj.n_dropped:
        notes.append(f"{result_obj.n_dropped} pair(s) without a value (e.g. a run that did not grok) left out")
    result["warnings"] = notes
    result["metric"] = args.metric
    result["seeds"] = seeds
    result["a"] = {str(s): a[s] for s in seeds}
    result["b"] = {str(s): b[s] for s in seeds}
    result["source"] = {"dir_a": str(Path(args.dir_a).resolve()), "dir_b": str(Path(args.dir_b).resolve()),
                        "where": args.where, "command": "paired"}
    path = _write(args.out, result)
    print(f"{args.metric}: mean(b - a) = {_fmt(result_obj.mean_diff)}, t p = {_fmt(result_obj.p_value_t)}, "
          f"Wilcoxon p = {_fmt(result_obj.wilcoxon_p)}, d = {_fmt(result_obj.cohen_d)} (n = {result_obj.n}) -> {path}")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"critical-wd": _critical, "power-law": _power_law, "paired": _paired}
    try:
        return commands[args.command](args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # the statistics refuse input they cannot fit (one clear line)
        print(f"error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
