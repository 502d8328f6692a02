"""The E12 control group in the paper's regime: does A's sigma_H rise to a peak before grokking?

    python -m reproduce.pilots.e12_pilot [--root results/pilots/e12_pilot] [--also DIR ...]

E12 re-initialises heads at A's peak-sigma_H epoch E; the test is valid only if A has such a
peak (the paper's A: mean peak sigma_H 0.28, min s_bar 0.75, before grokking at 1,000-5,000
epochs). This reads the final records of the ``e12_pilot`` sweep under ``--root`` (and of any
sweep store given with ``--also``: canonical-model runs at other lambdas, e.g. the medium Fig. 5
runs at 0.03 and 0.1) and writes into ``--root``, training nothing:

- ``e12_pilot.md``: per run lambda, seed, t_grok, the maximum of sigma_H over epochs in
  (100, t_grok) (the whole run if it never grokked) with the peak check of
  :mod:`grok_lightning.stats.validity` (does it stand out of that range, is it on its edge), its
  epoch and width (the epochs within half its height above the range's median), the same for the
  pooled-over-layers reading when recorded, min s_bar before grokking, and the train-loss spikes
  before grokking (epoch-mean loss > 1 after the run first memorised, train accuracy >= 0.99); per lambda the verdict: a peak in the majority of runs or
  not;
- ``e12_pilot.png``: every run's sigma_H (released and pooled), s_bar, test accuracy and train
  loss against epoch, with the paper's A values.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grok_lightning.plots.common import finish, plt
from grok_lightning.records import FINAL_STATUSES, iter_records, write_json_atomic
from grok_lightning.stats.phases import history_curve
from grok_lightning.stats.validity import peak_check
from reproduce.report import claim
from reproduce.targets.common import cli

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "results" / "pilots" / "e12_pilot"
POOLED = "reading/test/pooled/entropy_std"
#: the paper's group A, both lambdas pooled (n = 20), from the claims table. Its peak is summed over
#: layers (docs/sigma_h_readings.md); this pilot's figure draws the released reading beside it.
PAPER_A = {name: claim(f"e12.{key}.pooled").value for name, key in
           (("peak_sigma_H", "A_peak"), ("min_s_bar", "A_min_sim"), ("grok_epoch", "A_grok_ep"))}
SPIKE_LOSS = 1.0


def _column(history: dict, key: str) -> np.ndarray:
    return history_curve(history, key)[1]


def peak_before_grokking(history: dict, grok_epoch: int | None, key: str = "entropy_std") -> dict | None:
    """The maximum of ``key`` over epochs in (100, t_grok), whether it stands out, and its width."""
    if key not in history:
        return None
    epochs, values = np.asarray(history["epoch"], float), _column(history, key)
    hi = (grok_epoch - 1) if grok_epoch else float(epochs.max())
    check = peak_check(epochs, values, lo=100, hi=hi)
    inside = (epochs > 100) & (epochs <= hi) & np.isfinite(values)
    e, v = epochs[inside], values[inside]
    width = 0
    if len(v) and np.isfinite(check.peak):
        # the contiguous stretch around the peak at or above half its height over the median
        half, top = check.median + 0.5 * (check.peak - check.median), int(np.argmax(v))
        left, right = top, top
        while left > 0 and v[left - 1] >= half:
            left -= 1
        while right < len(v) - 1 and v[right + 1] >= half:
            right += 1
        width = int(e[right] - e[left])
    return {**check.to_dict(), "range": [100, int(hi)], "width": width}


def run_summary(record: dict) -> dict:
    history, grok = record["history"], record.get("grok_epoch")
    epochs = np.asarray(history["epoch"], float)
    before = (epochs > 0) & (epochs < (grok or np.inf))
    s_bar, loss = _column(history, "mean_similarity"), _column(history, "train_loss")
    # a spike is a return of the train loss after memorisation (the first train accuracy >= 0.99)
    memorised = np.flatnonzero(_column(history, "train_acc") >= 0.99)
    after_memorising = epochs >= (epochs[memorised[0]] if len(memorised) else np.inf)
    return {"wd": record["config"]["wd"], "seed": record["config"]["seed"], "grok_epoch": grok,
            "horizon": int(epochs.max()), "released": peak_before_grokking(history, grok),
            "pooled": peak_before_grokking(history, grok, POOLED),
            "min_s_bar_before_grok": float(np.nanmin(s_bar[before])) if before.any() else None,
            "min_s_bar_epoch": int(epochs[before][np.nanargmin(s_bar[before])]) if before.any() else None,
            "spikes_before_grok": [int(e) for e in epochs[before & after_memorising & (loss > SPIKE_LOSS)]]}


def load(roots: list[Path]) -> list[dict]:
    """Final canonical-model records of every sweep store at or one level under ``roots`` (the
    CPU pilot in the root, a GPU window's in ``gpu/``)."""
    records = []
    for store in [s for root in roots for s in (root, *sorted(p for p in root.glob("*") if p.is_dir()))]:
        if (store / "runs").is_dir():
            records += [r for _, r in iter_records(store / "runs") if r.get("status") in FINAL_STATUSES
                        and r["config"]["model"]["n_layers"] == 4 and r["config"]["model"]["d_model"] == 128]
    return sorted(records, key=lambda r: (r["config"]["wd"], r["config"]["seed"]))


def verdicts(runs: list[dict]) -> dict[str, str]:
    out = {}
    for wd in sorted({r["wd"] for r in runs}):
        group = [r for r in runs if r["wd"] == wd]
        peaks = sum(bool(r["released"] and r["released"]["stands_out"] and not r["released"]["on_edge"]) for r in group)
        out[f"{wd:g}"] = (f"A peak before grokking in {peaks}/{len(group)} runs: "
                          + ("E12 can be tested at this lambda" if 2 * peaks > len(group) else "no peak to intervene at"))
    return out


def markdown(runs: list[dict], verdict: dict[str, str]) -> str:
    f = (lambda v, d=3: "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{d}f}")
    lines = ["# E12 control group (A) in the paper's regime", "",
             f"Paper's A (n = 20, lambda 0.015 and 0.05): peak sigma_H {PAPER_A['peak_sigma_H']}, min s_bar "
             f"{PAPER_A['min_s_bar']}, grok epoch {PAPER_A['grok_epoch']} (means). A peak counts when it stands out of "
             "epochs (100, t_grok) (stats/validity.py PEAK_RULE) and is not on that range's edge.", "",
             "| lambda | seed | t_grok | peak sigma_H (epoch) | stands out / edge | median | width | pooled peak (epoch) "
             "| min s_bar (epoch) | loss spikes before grokking |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        p, q = r["released"], r["pooled"] or {}
        grok = r["grok_epoch"] or f"none by {r['horizon']}"
        lines.append(
            f"| {r['wd']:g} | {r['seed']} | {grok} | "
            f"{f(p['peak'])} ({p['peak_epoch']}) | {p['stands_out']} / {p['on_edge']} | {f(p['median'])} | {p['width']} | "
            f"{f(q.get('peak'))} ({q.get('peak_epoch')}) | {f(r['min_s_bar_before_grok'])} ({r['min_s_bar_epoch']}) | "
            f"{', '.join(map(str, r['spikes_before_grok'])) or '-'} |")
    lines += ["", *(f"- lambda {wd}: {text}" for wd, text in verdict.items()), ""]
    return "\n".join(lines)


def figure(records: list[dict], caption: str):
    panels = (("entropy_std", r"$\sigma_H$ (released; dashed: pooled)"), ("mean_similarity", r"$\bar s$"),
              ("test_acc", "test accuracy"), ("train_loss", "train loss"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 10), sharex=True)
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, r in enumerate(records):
        h, color = r["history"], colors[i % 10]
        label = f"lambda {r['config']['wd']:g}, seed {r['config']['seed']}"
        for ax, (key, _) in zip(axes, panels):
            ax.plot(h["epoch"], _column(h, key), color=color, linewidth=0.9, label=label)
        if POOLED in h:
            axes[0].plot(h["epoch"], _column(h, POOLED), color=color, linewidth=0.8, linestyle="--")
        if r.get("grok_epoch"):
            for ax in axes:
                ax.axvline(r["grok_epoch"], color=color, linewidth=0.6, linestyle=":")
    axes[0].axhline(PAPER_A["peak_sigma_H"], color="k", linestyle="-.", linewidth=0.8, label="paper A: mean peak")
    axes[1].axhline(PAPER_A["min_s_bar"], color="k", linestyle="-.", linewidth=0.8, label="paper A: mean min")
    axes[3].set_yscale("log")
    for ax, (_, name) in zip(axes, panels):
        ax.set_ylabel(name, fontsize=9)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[1].legend(fontsize=7, loc="lower right", handles=axes[1].get_lines()[-1:])
    axes[-1].set_xlabel("epoch (dotted: grokking)")
    return finish(fig, "E12 control group A in the paper's regime: is there a peak to intervene at?", caption)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--also", type=Path, nargs="*", default=[], help="more sweep stores of the canonical model")
    args = parser.parse_args(argv)
    records = load([args.root, *args.also])
    if not records:
        raise SystemExit(f"{args.root}: no final records of the canonical model")
    runs = [run_summary(r) for r in records]
    verdict = verdicts(runs)
    summary = {"paper_A": PAPER_A, "runs": runs, "verdicts": verdict}
    write_json_atomic(args.root / "summary.json", summary)
    (args.root / "e12_pilot.md").write_text(markdown(runs, verdict))
    precisions = sorted({r["config"].get("precision") or "32-true" for r in records})
    caption = (f"pilots (profile medium): canonical 4L x 8H d128, lambdas {sorted({r['wd'] for r in runs})}, seeds "
               f"{sorted({r['seed'] for r in runs})}, horizons {sorted({r['horizon'] for r in runs})} epochs, precision "
               f"{precisions}; paper's A: 10 seeds per lambda")
    figure(records, caption).savefig(args.root / "e12_pilot.png", dpi=120)
    print((args.root / "e12_pilot.md").read_text())
    return summary


if __name__ == "__main__":
    cli(main)
