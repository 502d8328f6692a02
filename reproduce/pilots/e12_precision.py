"""Is bf16 autocast safe for E12 at lambda 0.05? One seed in FP32 against the same seed in bf16.

    grok-lightning sweep run configs/sweeps/e12_precision.yaml --profile medium \\
        --out results/pilots/e12_precision/sweep
    python -m reproduce.pilots.e12_precision     # trains nothing: e12_precision.md, summary.json

Reads the FP32 run (``--fp32``) and every bf16 run at lambda 0.05 of the E12 control sweep and
the E12 pilot (``--bf16``), and compares them on the FP32 run's horizon: grok epoch, min s_bar
after epoch 100, peak sigma_H summed over layers after epoch 100 and its epoch. The rule, fixed
before the FP32 run finished: bf16 holds when, on each of the three values, the FP32 run's gap to
the bf16 run of its own seed is no larger than the spread (max - min) of the bf16 runs over seeds;
seed-to-seed spread is the noise the E12 contrasts are measured against.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from grok_lightning.records import FINAL_STATUSES, iter_records, write_json_atomic
from grok_lightning.stats.interventions import sigma_curve
from grok_lightning.stats.phases import history_curve
from reproduce.targets.common import cli

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "results" / "pilots" / "e12_precision"
BF16_STORES = (REPO / "results" / "medium" / "fig8" / "A" / "sweep", REPO / "results" / "pilots" / "e12_pilot")
VALUES = ("grok_epoch", "min_s_bar", "peak_sigma_H")


def summarise(record: dict, horizon: int) -> dict:
    """The compared values of one run, on epochs <= ``horizon``."""
    history = record["history"]
    epochs, sigma = sigma_curve(history, "sum_layers")
    _, s_bar = history_curve(history, "mean_similarity")
    _, test_acc = history_curve(history, "test_acc")
    after = (epochs > 100) & (epochs <= horizon)
    grokked = np.flatnonzero((test_acc >= record.get("grok_threshold", 0.99)) & (epochs <= horizon))
    peak = int(np.nanargmax(np.where(after, sigma, -np.inf)))
    return {"seed": record["config"]["seed"], "precision": record["config"].get("precision"),
            "grok_epoch": float(epochs[grokked[0]]) if grokked.size else None,
            "min_s_bar": float(np.nanmin(s_bar[after])), "peak_sigma_H": float(sigma[peak]), "peak_epoch": int(epochs[peak])}


def compare(fp32: dict, bf16: list[dict]) -> dict:
    """Per value: the FP32 run's gap to the bf16 run of its seed, the bf16 spread over seeds, and
    whether the gap is within it. A value one side lacks (a run that has not grokked by the
    horizon has no grok epoch) cannot be compared: ``within`` is None and so is ``holds`` unless
    another value already fails.

    >>> a = {"seed": 7, "grok_epoch": 2350.0, "min_s_bar": 0.76, "peak_sigma_H": 0.31}
    >>> b = [dict(a), {"seed": 11, "grok_epoch": 2300.0, "min_s_bar": 0.77, "peak_sigma_H": 0.25}]
    >>> compare(dict(a, grok_epoch=2330.0), b)["holds"]
    True
    >>> compare(dict(a, grok_epoch=None), b)["holds"] is None
    True
    """
    same = next((r for r in bf16 if r["seed"] == fp32["seed"]), None)
    checks = {}
    for name in VALUES:
        values = [r[name] for r in bf16 if r[name] is not None]
        spread = float(max(values) - min(values)) if len(values) > 1 else None
        gap = None if same is None or same[name] is None or fp32[name] is None else abs(fp32[name] - same[name])
        checks[name] = {"fp32": fp32[name], "bf16_same_seed": None if same is None else same[name], "gap": gap,
                        "bf16_spread": spread, "within": None if gap is None or spread is None else gap <= spread}
    within = [c["within"] for c in checks.values()]
    holds = False if False in within else (None if None in within else True)
    return {"checks": checks, "holds": holds, "n_bf16_seeds": len(bf16)}


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fp32", type=Path, default=ROOT / "sweep")
    parser.add_argument("--bf16", type=Path, nargs="+", default=list(BF16_STORES))
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    final = lambda store: [r for _, r in iter_records(store / "runs")] if (store / "runs").is_dir() else []
    fp32_runs = [r for r in final(args.fp32) if r["status"] in FINAL_STATUSES]
    if not fp32_runs:
        raise SystemExit(f"e12_precision: no finished FP32 run in {args.fp32}")
    (fp32,) = fp32_runs
    horizon = int(fp32["config"]["max_epochs"])
    bf16 = [summarise(r, horizon) for store in args.bf16 for r in final(store)
            if r["status"] in FINAL_STATUSES and r["config"].get("precision") == "bf16-mixed"
            and r["config"]["wd"] == fp32["config"]["wd"] and r["config"]["max_epochs"] >= horizon]
    result = {"horizon": horizon, "fp32": summarise(fp32, horizon), "bf16": bf16, **compare(summarise(fp32, horizon), bf16)}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "summary.json", result)
    lines = [f"# bf16 against FP32 for E12 (lambda {fp32['config']['wd']}, {horizon} epochs)", "",
             "| value | FP32 | bf16, same seed | gap | bf16 spread over seeds | within |", "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {c['fp32']} | {c['bf16_same_seed']} | {c['gap']} | {c['bf16_spread']} | {c['within']} |"
              for name, c in result["checks"].items()]
    verdict = {True: "holds", False: "does not hold",
               None: "is undecided: a value one side lacks by the horizon cannot be compared"}[result["holds"]]
    lines += ["", f"bf16 {verdict} ({result['n_bf16_seeds']} bf16 runs; the rule is in reproduce/pilots/e12_precision.py)."]
    (args.out / "e12_precision.md").write_text("\n".join(lines) + "\n")
    print(json.dumps({"holds": result["holds"]}))
    return args.out


if __name__ == "__main__":
    cli(main)
