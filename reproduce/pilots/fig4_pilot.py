"""Fig. 4 at the paper's width, the pilot: does each head count's sigma_H curve have a peak?

    python -m reproduce.pilots.fig4_pilot [--root results/pilots/fig4_paper_width] [--also DIR ...]

Fig. 4 fits peak sigma_H against d/H and compares the real task with a random-label null. The
statistic (maximum after epoch 100, the paper's a3 note) means something only if the curve has a
peak: not a single evaluation at the end of the run, not the start-up transient. This reads the
final records of the ``head_width`` sweep store ``<root>/sweep`` (the medium profile: d 128,
4 layers, H 4-32, lambda 1, 3,000 epochs) and of any store given with ``--also`` (e.g. the medium
Fig. 2 runs, H = 8), and writes into ``--root``, training nothing:

- ``fig4_pilot.md``: per run H, d/H, labels, seed, precision, t_grok, the maximum of sigma_H over
  epochs > 100 with the peak check of :mod:`grok_lightning.stats.validity` (does it stand out of
  that range, is it on its edge), and the mean sigma_H over the last 500 epochs;
- ``fig4_pilot.png``: every run's sigma_H and s_bar against epoch, by head count, with the
  paper's Fig. 4 peak at that d/H.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grok_lightning.plots.common import finish, plt
from grok_lightning.records import FINAL_STATUSES, iter_records, write_json_atomic
from grok_lightning.stats.phases import history_curve
from grok_lightning.stats.validity import peak_check
from reproduce.common import cli
from reproduce.fig4 import PAPER_VALUES

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "results" / "pilots" / "fig4_paper_width"
AFTER, LATE = 100, 500


def load(stores: list[Path]) -> list[dict]:
    """Final records of the d128 x 4-layer model at lambda 1 under the stores' ``runs`` folders."""
    records = []
    for store in stores:
        for _, r in iter_records(store / "runs" if (store / "runs").is_dir() else store / "sweep" / "runs"):
            m = r["config"]["model"]
            if r.get("status") in FINAL_STATUSES and (m["d_model"], m["n_layers"]) == (128, 4) and r["config"]["wd"] == 1.0:
                records.append(r)
    return sorted(records, key=lambda r: (r["config"]["data"].get("random_labels", False),
                                          r["config"]["model"]["n_heads"], r["config"]["seed"]))


def run_summary(record: dict) -> dict:
    h, m = record["history"], record["config"]["model"]
    epochs, sigma = history_curve(h, "entropy_std")
    check = peak_check(epochs, sigma, lo=AFTER)
    late = (epochs > epochs.max() - LATE) & np.isfinite(sigma)
    return {"n_heads": m["n_heads"], "d_head": m["d_model"] // m["n_heads"], "seed": record["config"]["seed"],
            "random_labels": bool(record["config"]["data"].get("random_labels")),
            "precision": record["config"].get("precision") or "32-true", "horizon": int(epochs.max()),
            "grok_epoch": record.get("grok_epoch"), "peak": check.to_dict(),
            "late_mean": float(np.mean(sigma[late])) if late.any() else None}


def markdown(runs: list[dict]) -> str:
    f = (lambda v, d=3: "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{d}f}")
    paper = dict(zip(PAPER_VALUES["dh"], PAPER_VALUES["peak"]))
    lines = ["# Fig. 4 at the paper's width: the pilot", "",
             f"d 128, 4 layers, lambda 1. Peak = maximum of sigma_H over epochs > {AFTER}; it counts when it stands "
             "out of that range (stats/validity.py PEAK_RULE) and is not on its edge (the last evaluation of the run).",
             "", f"| H | d/H | labels | seed | precision | epochs | t_grok | peak sigma_H (epoch) | stands out / edge "
                 f"| median after {AFTER} | mean, last {LATE} epochs | paper's peak at this d/H |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        p = r["peak"]
        lines.append(f"| {r['n_heads']} | {r['d_head']} | {'random' if r['random_labels'] else 'real'} | {r['seed']} | "
                     f"{r['precision']} | {r['horizon']} | {r['grok_epoch'] or '-'} | {f(p['peak'])} ({p['peak_epoch']}) | "
                     f"{p['stands_out']} / {p['on_edge']} | {f(p['median'])} | {f(r['late_mean'])} | "
                     f"{'-' if r['random_labels'] else f(paper.get(r['d_head']))} |")
    return "\n".join(lines) + "\n"


def figure(records: list[dict], caption: str):
    fig, axes = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True)
    heads = sorted({r["config"]["model"]["n_heads"] for r in records})
    colors = dict(zip(heads, plt.cm.viridis(np.linspace(0, 0.9, len(heads)))))
    paper = dict(zip(PAPER_VALUES["dh"], PAPER_VALUES["peak"]))
    for r in records:
        h, m = r["history"], r["config"]["model"]
        null = bool(r["config"]["data"].get("random_labels"))
        style = dict(color=colors[m["n_heads"]], linewidth=0.9, linestyle="--" if null else "-")
        label = f"H {m['n_heads']} (d/H {m['d_model'] // m['n_heads']}), seed {r['config']['seed']}{', random labels' if null else ''}"
        axes[0].plot(*history_curve(h, "entropy_std"), label=label, **style)
        axes[1].plot(*history_curve(h, "mean_similarity"), **style)
        if not null and m["d_model"] // m["n_heads"] in paper:
            axes[0].axhline(paper[m["d_model"] // m["n_heads"]], color=colors[m["n_heads"]], linestyle=":", linewidth=0.8)
    axes[0].axvline(AFTER, color="grey", linewidth=0.6)
    axes[0].set_ylabel(r"$\sigma_H$ (dotted: paper's Fig. 4 peak at that d/H)", fontsize=9)
    axes[1].set_ylabel(r"$\bar s$", fontsize=9)
    axes[1].set_xlabel("epoch (grey: the peak statistic starts after epoch 100)")
    axes[0].legend(fontsize=7, loc="upper right")
    return finish(fig, "Fig. 4 pilot at the paper's width: sigma_H by head count", caption)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--also", type=Path, nargs="*", default=[], help="more sweep stores of the d128 x 4-layer model")
    args = parser.parse_args(argv)
    records = load([args.root, *args.also])
    if not records:
        raise SystemExit(f"{args.root}: no final records of the d128 x 4-layer model at lambda 1")
    runs = [run_summary(r) for r in records]
    write_json_atomic(args.root / "summary.json", {"paper": PAPER_VALUES, "runs": runs})
    (args.root / "fig4_pilot.md").write_text(markdown(runs))
    caption = (f"pilot (profile medium): d 128, 4 layers, lambda 1, H {sorted({r['n_heads'] for r in runs})}, seeds "
               f"{sorted({r['seed'] for r in runs})}, horizons {sorted({r['horizon'] for r in runs})} epochs, precision "
               f"{sorted({r['precision'] for r in runs})}; paper: H 4-64, n = 44 + 15 null")
    figure(records, caption).savefig(args.root / "fig4_pilot.png", dpi=120)
    print((args.root / "fig4_pilot.md").read_text())
    return {"runs": runs}


if __name__ == "__main__":
    cli(main)
