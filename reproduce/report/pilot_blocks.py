"""Generated blocks from the pilots' shipped outputs (``results/pilots/``): the measurements that
decided a default (docs/decisions.md) or a protocol (docs/*.md), rendered from the JSON each
pilot wrote, never typed."""

from __future__ import annotations

import json

from reproduce.report.claims import REPO

PILOTS = REPO / "results" / "pilots"

__all__ = ["benchmark_output", "fig2_search_table", "gpu_check", "pr_norm_candidates", "update_sizes"]


def _read(*parts) -> dict:
    return json.loads(PILOTS.joinpath(*parts).read_text())


def update_sizes(facts=None) -> str:
    """RMS update of re-initialised heads over the other heads, per Adam-state mode
    (``reproduce.pilots.e12_update_sizes``)."""
    data = _read("e12_update_sizes", "update_sizes.json")
    labels = {"keep": "`keep` (default)", "fresh": "`fresh` (per-slice bias correction)",
              "zeroed": "zeroed moments, shared step count (not offered)"}
    steps = data["steps"]
    lines = [f"| Adam state | step 1 | steps 1-10 | steps 1-{steps} |", "|---|---|---|---|"]
    for mode, r in data["modes"].items():
        lines.append(f"| {labels.get(mode, mode)} | {r['ratio_first_step']:.2f} | {r['ratio_mean_steps_1_10']:.2f} | "
                     f"{r['ratio_mean_steps_1_50']:.2f} |")
    return "\n".join(lines)


def pr_norm_candidates(facts=None) -> str:
    """PR_norm per head-covariance construction on the seed-42 canonical run, against Table 3
    (``reproduce.pilots.pr_norm_candidates``): every epoch of the default model (init mha), and the
    mean absolute difference to Table 3 under both initialisations."""
    runs = {init: _read("pr_norm", f"candidates_seed42_init_{init}.json") for init in ("mha", "pytorch")}
    mha = runs["mha"]
    epochs = mha["epochs"]
    paper = mha["paper_table3"]["pr_norm_by_epoch"]
    head = " | ".join(f"epoch {e:,}" for e in epochs)
    lines = [f"| construction | {head} | mean abs diff to Table 3, mha | mean abs diff, pytorch |",
             "|---|" + "---|" * (len(epochs) + 2),
             "| Table 3 (paper, seed 42) | " + " | ".join(f"{paper[str(e)]:.3f}" if str(e) in paper else "-"
                                                       for e in epochs) + " | - | - |"]
    best = min(mha["mean_abs_difference"], key=mha["mean_abs_difference"].get)
    for name, values in mha["candidates"].items():
        cells = " | ".join(f"{values['mean'][str(e)]:.3f}" for e in epochs)
        shown = f"**{name}**" if name == best else name
        lines.append(f"| {shown} | {cells} | {mha['mean_abs_difference'][name]:.3f} | "
                     f"{runs['pytorch']['mean_abs_difference'][name]:.3f} |")
    return "\n".join(lines)


def _rate(row: dict | None) -> str:
    return "-" if row is None else f"{row['member_epochs_per_s']:.1f}"


def gpu_check(facts=None) -> str:
    """One run of ``benchmarks/gpu_check.py`` (``results/pilots/gpu_check/gpu_check.json``): the
    ensemble training throughput at each size and matmul precision, the sweep-runner slice (its
    member-epochs counted from the runs' histories) and the JSON's projection."""
    data = _read("gpu_check", "gpu_check.json")
    env = data["environment"]
    fp32, tf32 = data["throughput"], data.get("throughput_tf32") or {}
    by_e = {r["E"]: r for r in tf32.get("rows", [])}
    lines = [f"One run on one {env['gpu']} ({env['gpu_memory_gib']} GiB, CUDA {env['cuda']}, torch {env['torch']}, "
             f"Lightning {env['lightning']}), the earlier ensemble implementation, training steps only:", "",
             "| ensemble size E | member-epochs/s, FP32 | achieved TFLOP/s | share of the FP32 peak | member-epochs/s, TF32 |",
             "|---|---|---|---|---|"]
    for r in fp32["rows"]:
        other = by_e.get(r["E"])
        lines.append(f"| {r['E']} | {r['member_epochs_per_s']:.1f} | {r['achieved_tflops']:.1f} | "
                     f"{r['fraction_of_fp32_peak']:.1%} | {_rate(other)} |")
    part = data.get("slice") or {}
    runs = part.get("runs", [])
    if runs:
        reached = [max(r["history"]["epoch"]) for r in runs if r.get("history")]
        grokked = sorted(r["grok_epoch"] for r in runs if r.get("grok_epoch") is not None)
        epochs = sum(reached)
        median = grokked[len(grokked) // 2] if grokked else None
        lines += ["", f"The sweep runner on a slice of the paper profile ({len(part['seeds'])} seeds x {part['epochs']} "
                  f"epochs planned, the time box stopped them at epoch {min(reached)}): {epochs:,} member-epochs in "
                  f"{part['wall_s']} s, {epochs / part['wall_s']:.1f} member-epochs/s end to end (records, evaluation "
                  f"and diagnostics included); {len(grokked)} of {len(runs)} seeds grokked"
                  + (f", median t_grok {median}" if median is not None else "") + "."]
    proj = data.get("projection") or {}
    if proj:
        lines += ["", f"Its projection: the paper profile of that day ({proj['paper_runs']:,} runs, "
                  f"{proj['paper_canonical_equivalent_epochs'] / 1e6:.1f} M canonical-equivalent epochs) in "
                  f"{proj['training_only_hours_1_device']} h of training on one device ({proj['training_only_basis']})."]
    return "\n".join(lines)


def fig2_search_table(name: str):
    """The renderer of a table the Fig. 2 search writes (``python -m reproduce.pilots.fig2_search``
    -> ``results/pilots/fig2_search/<name>.md``, from the shipped records): the file as written."""
    def render(facts=None) -> str:
        return (PILOTS / "fig2_search" / f"{name}.md").read_text().strip()

    render.__name__ = f"fig2_search_{name}"
    return render


def benchmark_output(name: str, fenced: bool = False):
    """The renderer of a benchmark's saved output (``benchmarks/results/<name>``, written by the
    command the doc gives beside the block, e.g. ``... | tee benchmarks/results/epoch_cost.md``):
    the file as written, in a code fence where it is plain text."""
    def render(facts=None) -> str:
        text = (REPO / "benchmarks" / "results" / name).read_text().strip()
        return f"```\n{text}\n```" if fenced else text

    render.__name__ = f"benchmark_{name.replace('.', '_')}"
    return render
