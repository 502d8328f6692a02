"""Fig. 10: lambda_c per architecture (transformer, MLP, LSTM, Mamba expand 4 / 2, Mamba on mul).

    python -m reproduce.targets.fig10 --profile smoke|medium|paper --out reproduction

The published method (least-squares logistic, run bootstrap) per architecture, with Laplace
smoothing 0.5 for Mamba as the paper did, and also for any architecture whose outcomes are
separable (then flagged in the row). The transformer rows come from the multi-task sweep's add
runs (``paper``) or the canonical sweep's smoke runs (``smoke``).

Every architecture is judged at one horizon, the shortest among the runs (10,000 epochs in the
paper profile; 200 in smoke, where the transformer runs come from a 250-epoch sweep): a run that
trained longer counts as grokked only if it grokked by then. Grokking is read at the first
evaluation at or above the threshold, so cutting a longer run at H gives the outcome a run of
horizon H would have had.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from grok_lightning.plots.architectures import figure_architectures
from grok_lightning.records import is_grokked
from grok_lightning.stats import fit_critical_weight_decay, records_to_arrays
from grok_lightning.stats.intervals import mean_interval
from reproduce.report import claim, claim_row, count_row, join_notes, row
from reproduce.targets.common import (
    caption,
    cli,
    n_params,
    parse_args,
    planned_configs,
    records_if_any,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.targets.costs import compute_needed

PAPER = "2605.20441 Fig. 10"
#: published lambda_c [95% CI] (gen_fig10.py in the author's repository; PAPER_WD_REGIMES.md)
#: the paper's cross-architecture lambda_c (reference/claims.csv): architecture key -> claim
CLAIMS = {"mlp": "fig10.mlp_4L_h512_mod_add", "lstm": "fig10.lstm_4L_h512_mod_add", "mamba": "fig10.mamba_4L_d128_mod_add"}
PAPER_VALUES = {key: (claim(cid).value, list(claim(cid).ci)) for key, cid in CLAIMS.items()}
LAPLACE = 0.5
#: the paper's per-lambda MLP cells (E10) scored in reference/claims.csv: grok counts, grok epoch
MLP_GROK_CLAIMS = {0.02: "e10.mlp_grok.0.02", 0.03: "e10.mlp_grok.0.03", 0.05: "e10.mlp_grok.0.05", 0.07: "e10.mlp_grok.0.07"}
MLP_GROK_EPOCH_CLAIMS = {0.07: "e10.mlp_grok_ep.0.07"}


def label_of(record: dict) -> tuple[str, str]:
    """(readable label, paper key) of a run's architecture."""
    m, op = record["config"]["model"], record["config"]["data"]["operation"]
    arch, kw = m["arch"], m.get("arch_kwargs") or {}
    size = f"{n_params(record) / 1e6:.2f}M"
    if arch == "mamba":
        name = f"mamba expand {kw.get('expand', 4)}" + ("" if op == "add" else f" ({op})")
        return f"{name}, {size}", "mamba" if op == "add" and kw.get("expand", 4) == 4 else ""
    return f"{arch} ({op}), {size}", arch if op == "add" else ""


def _weight_decay(config: dict) -> float:
    return float(config["model"]["init_args"]["weight_decay"])


def paper_grid() -> tuple[float, float]:
    """The lambda range of the paper's Fig. 10 grid (the sweep file's paper profile)."""
    wds = [_weight_decay(c) for c in planned_configs("cross_arch.yaml", "paper")]
    return min(wds), max(wds)


def medium_plan() -> str:
    """``lambda 0.02-0.1 x 3 seeds``: the medium profile's MLP grid, read from its sweep file."""
    configs = planned_configs("cross_arch.yaml", "medium")
    wds, seeds = [_weight_decay(c) for c in configs], {c["seed_everything"] for c in configs}
    return f"lambda {min(wds):g}-{max(wds):g} x {len(seeds)} seeds"


def split_to_paper_grid(records: list[dict]) -> tuple[list[dict], str]:
    """The runs inside the paper's lambda range, and a note on those outside it. The paper's
    logistic is monotone in lambda over its grid; a point past it (medium's MLP at 0.1) may lie
    beyond a closing grokking window, so it is counted and shown but not fitted."""
    low, high = paper_grid()
    inside = [r for r in records if low <= r["config"]["wd"] <= high]
    outside: dict[float, list[bool]] = {}
    for r in records:
        if not low <= r["config"]["wd"] <= high:
            outside.setdefault(r["config"]["wd"], []).append(is_grokked(r))
    note = "; ".join(f"lambda {wd:g} (past the paper's grid {low:g}-{high:g}): {sum(g)}/{len(g)} grokked, not fitted"
                     for wd, g in sorted(outside.items()))
    return inside, note


def fit_group(records: list[dict], arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        wd, grokked, _ = records_to_arrays(records)
    if len(set(wd.tolist())) < 2:
        return None, "fewer than 2 lambdas"
    fit = fit_critical_weight_decay(wd, grokked, method="paper", smoothing=LAPLACE if arch == "mamba" else 0.0)
    if arch != "mamba" and not np.all(np.isfinite(fit.wd_c_ci)) and fit.status not in ("all_grokked", "none_grokked"):
        fit = fit_critical_weight_decay(wd, grokked, method="paper", smoothing=LAPLACE)
        return fit, f"separable: Laplace {LAPLACE}"
    return fit, "Laplace 0.5 (as the paper, Mamba)" if arch == "mamba" else "unsmoothed"


def no_estimate_reason(records: list[dict], fit) -> str:
    """Why runs that are there give no lambda_c yet (the row is then inconclusive, not 'not run')."""
    wds = sorted({r["config"]["wd"] for r in records})
    n_grok = sum(is_grokked(r) for r in records)
    span = f"lambda {wds[0]:g}" + (f"-{wds[-1]:g}" if len(wds) > 1 else "") if wds else "no lambda"
    if fit is None or len(wds) < 2:
        return f"runs at one lambda only ({span}): no edge to fit"
    if fit.status in ("all_grokked", "none_grokked"):
        which = "every" if fit.status == "all_grokked" else "no"
        return f"{which} fitted run grokked ({n_grok}/{len(records)} at {span}): no edge to fit"
    return f"the logistic fit gave no lambda_c ({fit.status}, {n_grok}/{len(records)} grokked at {span})"


def mlp_cell_rows(records: list[dict], profile: str, horizon: int) -> list[dict]:
    """The MLP's per-lambda cells against the paper's: grokked k/n (Wilson interval, Fisher's exact
    test against the paper's count) and the mean grok epoch (t interval). A cell without runs is
    'not run here'; the paper's grok epochs come from 10 runs that trained to 10,000 epochs."""
    rows = []
    for wd, claim_id in MLP_GROK_CLAIMS.items():
        at = [r for r in records if r["config"]["wd"] == wd]
        rows.append(count_row(claim_id, f"MLP grokked at lambda {wd:g}", sum(is_grokked(r) for r in at), len(at), profile,
                              horizon=horizon, not_run=None if at else f"no MLP run at lambda {wd:g} yet"))
    for wd, claim_id in MLP_GROK_EPOCH_CLAIMS.items():
        epochs = [r["grok_epoch"] for r in records if r["config"]["wd"] == wd and is_grokked(r)]
        mean = mean_interval(epochs) if len(epochs) >= 2 else None
        rows.append(claim_row(claim_id, f"MLP mean grok epoch at lambda {wd:g}", mean.estimate if mean else None, profile,
                              len(epochs), ours_ci=mean.ci if mean else None, horizon=horizon,
                              note=f"grok epochs {sorted(epochs)}",
                              not_run=None if mean else f"fewer than 2 grokked MLP runs at lambda {wd:g}"))
    return rows


def truncate_to_horizon(record: dict, horizon: int) -> dict:
    """The record's outcome as a run of ``horizon`` epochs would have had it (grokked by then, or
    diverged by then); records that already end there are returned as they are."""
    if record["config"]["max_epochs"] <= horizon:
        return record
    cut = {**record, "config": {**record["config"], "max_epochs": horizon, "trained_epochs": record["config"]["max_epochs"]}}
    if cut.get("grok_epoch") is not None and cut["grok_epoch"] > horizon:
        cut["grok_epoch"] = None
    if cut["status"] == "diverged" and (cut.get("diverged_epoch") or 0) > horizon:
        cut["status"] = "completed"
    return cut


#: the paper's probes with no medium runs: their claims (Mamba's three share one measured cost)
NOT_RUN_ON_CPU = {"lstm": (("fig10.lstm_4L_h512_mod_add",), {"fig10_lstm": "LSTM"}),
                  "mamba": (("fig10.mamba_4L_d128_mod_add", "fig10.mamba_e2", "fig10.mamba_mul"),
                            {"fig10_mamba": "Mamba (expand 4; the expand-2 probe is smaller)"})}


def not_run_rows(records: list[dict], profile: str) -> tuple[list[dict], list[dict]]:
    """Entries and rows of the probes a profile has no runs of: 'not run here' with the CPU time
    their paper protocol was measured to need (reproduce/pilots/costs.py)."""
    present = {r["config"]["model"]["arch"] for r in records}
    entries, rows = [], []
    for arch, (claim_ids, systems) in NOT_RUN_ON_CPU.items():
        if arch in present:
            continue
        why = compute_needed(systems) or "GPU-sized"
        entries.append({"label": f"{arch} at the paper's size", "paper_key": arch, "wd_c": None, "wd_c_ci": None,
                        "status": "not run here", "n": 0, "n_grok": 0,
                        "why": compute_needed(systems, detail=False) or "GPU-sized"})
        rows += [claim_row(cid, claim(cid).claim, None, profile, 0, not_run=why) for cid in claim_ids]
    return entries, rows


def analyse(records: list[dict], profile: str, out: Path, missing: list[str] | None = None) -> dict:
    """lambda_c per architecture at one horizon; ``missing``: what the report should say is not
    there yet (medium: the MLP sweep before it has records)."""
    out.mkdir(parents=True, exist_ok=True)
    horizons = {r["config"]["max_epochs"] for r in records}
    horizon = min(horizons, default=None)
    cut = sorted({label_of(r)[0] for r in records if r["config"]["max_epochs"] > horizon})
    records = [truncate_to_horizon(r, horizon) for r in records]
    same = f"every architecture at {horizon} epochs" + (f" ({', '.join(cut)}: longer runs cut at {horizon})" if cut else "")
    counted = [r for r in records if r["status"] in ("completed", "diverged")]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in counted:
        groups.setdefault(label_of(r), []).append(r)
    entries, rows = [], []
    for (label, key), recs in sorted(groups.items()):
        fitted, past_grid = split_to_paper_grid(recs) if profile != "smoke" else (recs, "")
        fit, how = fit_group(fitted, recs[0]["config"]["model"]["arch"])
        how = f"{how}; {past_grid}" if past_grid else how
        good = fit is not None and np.isfinite(fit.wd_c) and fit.status in ("ok", "separable", "extrapolated")
        ci = [float(v) for v in fit.wd_c_ci] if good and np.all(np.isfinite(fit.wd_c_ci)) else None
        n_grok = int(sum(is_grokked(r) for r in recs))
        entries.append({"label": label, "paper_key": key, "wd_c": float(fit.wd_c) if good else None, "wd_c_ci": ci,
                        "status": fit.status if fit else how, "n": len(recs), "n_grok": n_grok, "fit": how})
        per_wd = ", ".join(f"{wd:g} {sum(is_grokked(r) for r in recs if r['config']['wd'] == wd)}/"
                           f"{sum(r['config']['wd'] == wd for r in recs)}" for wd in sorted({r["config"]["wd"] for r in recs}))
        note = join_notes(f"{how}; status {entries[-1]['status']}; {n_grok}/{len(recs)} grokked by epoch {horizon} "
                          f"(per lambda: {per_wd})", fit.bootstrap_note() if good else "")
        why = None if good else no_estimate_reason(fitted, fit)
        # n counts the runs the fit reads; runs past the paper's grid are only in the note
        rows.append(claim_row(CLAIMS[key], f"lambda_c, {label}", entries[-1]["wd_c"], profile, len(fitted), ours_ci=ci,
                              note=note, horizon=horizon, no_estimate=why) if key in CLAIMS else
                    row(PAPER, f"lambda_c, {label}", None, entries[-1]["wd_c"], profile, len(fitted), ours_ci=ci,
                        note=note, no_estimate=why))
    if profile != "smoke":  # the paper's MLP size (smoke's probes are shrunk)
        rows += mlp_cell_rows([r for r in counted if label_of(r)[1] == "mlp"], profile, horizon)
    if profile == "medium":  # the probes medium does not train: their measured cost instead
        more_entries, more_rows = not_run_rows(records, profile)
        entries, rows = entries + more_entries, rows + more_rows
    info = sweep_summary(records) if records else {"text": "no runs yet: " + "; ".join(missing or [])}
    differs = {"paper": None, "medium": f"the MLP only, {medium_plan()} (paper: every probe, 7 lambdas x 10 seeds x 10,000 epochs)"
               }.get(profile, f"shrunk probes, lambda 0.4-2, 1-2 seeds, {horizon} epochs (paper: paper sizes, "
                              "7 lambdas x 10 seeds x 10,000 epochs)")
    text = f"{info['text']}; {same}" if records else info["text"]
    fig = figure_architectures(entries, PAPER_VALUES, caption(profile, text, differs, figure="fig10"))
    fig.savefig(out / "fig10_architectures.png", dpi=130)
    write_outputs(out, {"profile": profile, "entries": entries, "horizon": horizon, "cut_to_horizon": cut,
                        "sweep": info, "missing": missing or []}, rows)
    return {"entries": entries, "horizon": horizon, "cut_to_horizon": cut}


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    root = Path(args.out)
    out = root / "fig10"
    if args.profile == "medium":  # the MLP sweep may have no record yet: LSTM and Mamba rows still stand
        records, missing = records_if_any("cross_arch.yaml", args.profile, out, args.launch, "fig10")
    else:
        records, missing = sweep_records("cross_arch.yaml", args.profile, out, args.launch)[0], []
    if args.profile == "smoke":
        wds = {r["config"]["wd"] for r in records}
        records += [r for r in sweep_records("canonical_wd.yaml", "smoke", root / "fig5", args.launch)[0]
                    if r["config"]["wd"] in wds]
    elif args.profile == "paper":  # medium: the MLP alone (no transformer run at 10,000 epochs on CPU)
        # records_if_any: a GPU window may have trained the probes before any transformer run
        transformers, _ = records_if_any("multitask.yaml", "paper", root / "fig9", args.launch, "fig10 transformer rows")
        records += [r for r in transformers if r["config"]["data"]["operation"] == "add"]
    analyse(records, args.profile, out, missing=missing)
    print(f"fig10: {out / 'fig10_architectures.png'}")
    return out


if __name__ == "__main__":
    cli(main)
