"""rLLC vs sigma_H over the long-horizon checkpoints (arXiv 2605.20441: Pearson r = 0.46,
95% CI [-0.20, 0.82], n = 11 checkpoints of seed 42).

    python -m reproduce.targets.rllc --profile smoke|medium|paper --out reproduction [--runs lead|all] [--max-checkpoints N]

Reads the long-horizon sweep (``sweep_records("long_horizon.yaml", ...)`` into ``<out>/long_horizon``,
the call reproduce/targets/long_horizon.py makes, so it is cached under ``make reproduce-all``) and its saved
``weights/epoch_XXXXX.pt``. For each checkpoint of the lead run (seed 42 at the lambda closest to 1,
as in the paper; ``--runs all`` for every run): the rLLC restricted to the attention weights on the
run's training split (grok_lightning.stats.llc, devinterp SGLD), sigma_H at the same epoch (the
record's history where that epoch was evaluated, else recomputed from the checkpoint on the test
split, the same computation) and the wall time of both. Then Pearson r with a Fisher-z CI.

Each run's measurements are stored beside its record (``RLLC_FILE``, per SGLD setting) and shipped,
so the report is rebuilt from them without the weights, devinterp or the SGLD's minutes. Measuring
needs the optional extra ``llc`` (devinterp >= 2, < 3); without it and without stored measurements
the target writes "not run" rows. Smoke SGLD: 2 chains x 80 draws after 40 burn-in steps (medium and
paper: 3 x 200 after 100, the paper's chains x draws, on the medium profile's 20,000-epoch lambda-1
runs); lr 3e-6, gamma 3e4, nbeta 46.2, batch 256 (docs/predict_and_llc.md).

A negative rLLC means the chains found lower training loss than the checkpoint's: the checkpoint is
not at a local minimum (here: a slingshot spike, train accuracy ~0.1 for one evaluation), where the
LLC is undefined. r is reported over all checkpoints (as the paper) and without those.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from grok_lightning.stats.llc import SGLDSettings, devinterp_version
from reproduce.report import claim, claim_row, row
from reproduce.targets.common import caption, cli, describe, parse_args, sweep_records, sweep_summary, write_outputs

PAPER = "2605.20441 rLLC"
PAPER_R = {"r": claim("rllc.r").value, "ci": list(claim("rllc.r").ci), "n": claim("rllc.r").n}
SWEEP = "long_horizon.yaml"
LEAD_SEED, LEAD_WD = 42, 1.0
PROFILE_SGLD = {
    "smoke": SGLDSettings(num_chains=2, num_draws=80, num_burnin_steps=40),
    # the paper's chains x draws: minutes per checkpoint of the canonical model on one CPU core
    "medium": SGLDSettings(num_chains=3, num_draws=200, num_burnin_steps=100),
    "paper": SGLDSettings(num_chains=3, num_draws=200, num_burnin_steps=100),
}
#: per run, beside its record: the rLLC measurements per SGLD setting (``{key: {"devinterp", "points"}}``)
RLLC_FILE = "rllc_points.json"


class DevinterpMissing(RuntimeError):
    """A checkpoint must be measured and devinterp (the ``llc`` extra) is not installed."""


def settings_key(settings: SGLDSettings, restrict: str) -> str:
    """The key of one SGLD setting's measurements in :data:`RLLC_FILE`."""
    return f"{restrict} {json.dumps(settings.to_dict(), sort_keys=True)}"


def stored_points(record: dict, runs_root: Path, settings: SGLDSettings, restrict: str = "attention") -> dict:
    """``{"devinterp", "points"}`` stored beside the run for this setting, else ``{}``."""
    from reproduce.targets.weight_analysis import run_folder

    folder = run_folder(record, runs_root)
    cache = folder / RLLC_FILE if folder is not None else None
    stored = json.loads(cache.read_text()) if cache is not None and cache.is_file() else {}
    return stored.get(settings_key(settings, restrict), {})


def pick_lead(records: list[dict]) -> dict:
    """Seed 42 (else the smallest seed) at the lambda closest to 1 (log scale), among runs with checkpoints."""
    wd = min({r["config"]["wd"] for r in records}, key=lambda w: abs(math.log(w / LEAD_WD)) if w > 0 else math.inf)
    same = sorted((r for r in records if r["config"]["wd"] == wd), key=lambda r: r["config"]["seed"])
    return next((r for r in same if r["config"]["seed"] == LEAD_SEED), same[0])


def _history_value(record: dict, epoch: int, key: str = "entropy_std"):
    history = record["history"]
    if epoch in history["epoch"]:
        value = history.get(key, [None] * len(history["epoch"]))[history["epoch"].index(epoch)]
        return None if value is None else float(value)
    return None


def measure_run(record: dict, runs_root: Path, settings: SGLDSettings, max_checkpoints: int | None = None,
                restrict: str = "attention") -> tuple[list[dict], str | None]:
    """``(points, devinterp version)``: rLLC, sigma_H and their wall times at every saved checkpoint of
    one run, read from :data:`RLLC_FILE` where stored (the SGLD costs minutes per checkpoint), else
    measured from the weights and stored. Raises :class:`DevinterpMissing` when a checkpoint must be
    measured without devinterp."""
    from grok_lightning.records import write_json_atomic
    from reproduce.targets.weight_analysis import checkpoint_files, run_folder

    stored = stored_points(record, runs_root, settings, restrict)
    known = {p["epoch"]: p for p in stored.get("points", [])}
    epochs = sorted(set(checkpoint_files(record, runs_root)) | set(known))
    if max_checkpoints is not None and len(epochs) > max_checkpoints:  # evenly spaced, first and last kept
        keep = np.unique(np.linspace(0, len(epochs) - 1, max_checkpoints).round().astype(int))
        epochs = [epochs[i] for i in keep.tolist()]
    todo = [e for e in epochs if e not in known]
    version = stored.get("devinterp")
    if todo:
        if devinterp_version() is None:
            raise DevinterpMissing("devinterp is not installed (pip install -e '.[llc]')")
        known.update(_measure(record, runs_root, todo, settings, restrict))
        version = devinterp_version()
        folder = run_folder(record, runs_root)
        cache = folder / RLLC_FILE
        everything = json.loads(cache.read_text()) if cache.is_file() else {}
        everything[settings_key(settings, restrict)] = {"devinterp": version,
                                                        "points": [known[e] for e in sorted(known)]}
        write_json_atomic(cache, everything)
    return [known[e] for e in epochs], version


def _measure(record: dict, runs_root: Path, epochs: list[int], settings: SGLDSettings, restrict: str) -> dict:
    """``{epoch: point}`` measured from the run's weights at ``epochs``."""
    from grok_lightning.stats.llc import estimate_rllc, time_sigma_h
    from reproduce.targets.weight_analysis import checkpoint_files, eval_split, load_checkpoint

    files = checkpoint_files(record, runs_root)
    x_train, y_train = eval_split(record, "train")
    x_test, _ = eval_split(record, "test")
    points = {}
    for epoch in epochs:
        model, _ = load_checkpoint(record, files[epoch])
        timing = time_sigma_h(model, x_test)
        estimate = estimate_rllc(model, x_train, y_train, settings, restrict=restrict)
        logged = _history_value(record, epoch)
        points[epoch] = {
            "run_id": record["run_id"], "seed": record["config"]["seed"], "wd": record["config"]["wd"], "epoch": epoch,
            "rllc_mean": estimate.mean, "rllc_std": estimate.std, "rllc_per_chain": estimate.per_chain,
            "init_loss": estimate.init_loss, "devinterp_llc_mean": estimate.devinterp_llc_mean,
            "rllc_s": estimate.wall_s, "n_parameters": estimate.n_parameters,
            "sigma_H": logged if logged is not None else timing["sigma_H"],
            "sigma_H_source": "history" if logged is not None else "recomputed from the checkpoint",
            "sigma_H_recomputed": timing["sigma_H"], "sigma_H_s": timing["forward_and_stats_s"],
            "sigma_H_stats_only_s": timing["stats_only_s"], "notes": estimate.notes,
            "trace_first_last": [float(np.mean([c[0] for c in estimate.draw_loss])),
                                 float(np.mean([c[-1] for c in estimate.draw_loss]))],
        }
        print(f"rllc: {str(record.get('run_id'))[:8]} epoch {epoch}: rLLC {estimate.mean:.3f} +- {estimate.std:.3f} "
              f"({estimate.wall_s:.1f} s), sigma_H {points[epoch]['sigma_H']:.4f} "
              f"({timing['forward_and_stats_s']:.3f} s)", flush=True)
    return points


def correlation(points: list[dict]) -> dict:
    """Pearson r (Fisher-z CI) of rLLC vs sigma_H; ``{"undefined": reason}`` when it cannot be computed."""
    from grok_lightning.stats import pearson_r

    pairs = [(p["sigma_H"], p["rllc_mean"]) for p in points
             if p["sigma_H"] is not None and p["rllc_mean"] is not None and np.isfinite(p["rllc_mean"])]
    if len(pairs) < 4:
        return {"undefined": f"undefined: {len(pairs)} finite checkpoint(s); Pearson r with a Fisher-z CI needs >= 4",
                "n": len(pairs)}
    x, y = map(np.asarray, zip(*pairs))
    try:
        result = pearson_r(x, y)
    except ValueError as err:
        return {"undefined": f"undefined: {err}", "n": len(pairs)}
    from scipy.stats import spearmanr

    result["spearman_rho"] = float(spearmanr(x, y).statistic)
    return result


def analyse(records: list[dict], runs_root: Path, profile: str, out: Path, settings: SGLDSettings,
            runs: str = "lead", max_checkpoints: int | None = None) -> dict:
    from grok_lightning.plots.predict import figure_rllc
    from reproduce.targets.weight_analysis import checkpoint_files

    out.mkdir(parents=True, exist_ok=True)
    usable = [r for r in records if r["status"] in ("completed", "diverged")
              and (checkpoint_files(r, runs_root) or stored_points(r, runs_root, settings))]
    base = {"profile": profile, "paper": PAPER_R, "settings": settings.to_dict(), "devinterp": devinterp_version(),
            "restrict": "attention"}
    reason = None if usable else "no run of the long-horizon sweep has saved weights or stored rLLC measurements"
    if usable:
        lead = pick_lead(usable)
        chosen = [lead] if runs == "lead" else usable
        try:
            measured = [measure_run(record, runs_root, settings, max_checkpoints) for record in chosen]
        except DevinterpMissing as err:
            reason = str(err)
        else:
            points = [p for run_points, _ in measured for p in run_points]
            base["devinterp"] = next((version for _, version in measured if version), base["devinterp"])
    if reason is not None:
        write_outputs(out, {**base, "undefined": f"undefined: {reason}"},
                      [claim_row("rllc.r", "Pearson r, rLLC vs sigma_H over checkpoints", None, profile, 0,
                                 note=f"not run: {reason}")])
        print(f"rllc: not run: {reason}")
        return base
    lead_points = [p for p in points if p["run_id"] == lead["run_id"]]
    corr = correlation(lead_points)
    at_minimum = [p for p in lead_points if p["rllc_mean"] is not None and p["rllc_mean"] > 0]
    corr_min = correlation(at_minimum)
    spikes = [p["epoch"] for p in lead_points if p not in at_minimum]
    pooled = correlation(points) if runs != "lead" else None
    ratio = [p["rllc_s"] / p["sigma_H_s"] for p in points if p["sigma_H_s"] > 0]
    ratio_stats = [p["rllc_s"] / p["sigma_H_stats_only_s"] for p in points if p["sigma_H_stats_only_s"] > 0]
    agree = [abs(p["sigma_H_recomputed"] - p["sigma_H"]) for p in points if p["sigma_H_source"] == "history"]
    with open(out / "checkpoints.csv", "w", newline="") as handle:
        keys = ["run_id", "seed", "wd", "epoch", "rllc_mean", "rllc_std", "devinterp_llc_mean", "init_loss", "sigma_H",
                "sigma_H_source", "sigma_H_recomputed", "rllc_s", "sigma_H_s", "sigma_H_stats_only_s", "n_parameters"]
        writer = csv.DictWriter(handle, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(points)
    s = settings
    sgld = (f"devinterp {base['devinterp']} SGLD on the attention weights ({lead_points[0]['n_parameters']:,} params), "
            f"train split: {s.num_chains} chains x {s.num_draws} draws after {s.num_burnin_steps} burn-in, lr {s.lr:g}, "
            f"gamma {s.localization:g}, nbeta {s.resolved_nbeta():.1f}, batch {s.batch_size}")
    info = sweep_summary(records)
    details = (f"lead run: seed {lead['config']['seed']}, lambda {lead['config']['wd']}, {len(lead_points)} checkpoints; "
               f"{info['text']}\n{sgld}\n{describe(lead)}")
    differs = _differs(profile, info["horizon"], len(lead_points), lead, s)
    if spikes:
        details += (f"\nnegative rLLC at epochs {spikes}: the chains found lower loss than the checkpoint (not a local "
                    f"minimum: slingshot spikes, hollow markers); r without them: "
                    + (f"{corr_min['r']:.2f} [{corr_min['ci_95'][0]:.2f}, {corr_min['ci_95'][1]:.2f}], n = {corr_min['n']}"
                       if "r" in corr_min else corr_min["undefined"]))
    fig = figure_rllc(lead_points, corr, PAPER_R, caption(profile, details, differs, figure="rllc"))
    fig.savefig(out / "rllc_sigma_h.png", dpi=130)
    median_ratio = float(np.median(ratio)) if ratio else None
    median_rllc_s = float(np.median([p["rllc_s"] for p in points]))
    median_sigma_s = float(np.median([p["sigma_H_s"] for p in points]))
    note = differs or ""
    r_note = f"{note}; Spearman rho {corr.get('spearman_rho', float('nan')):.2f}" if "r" in corr else \
        f"{corr['undefined']}; {note}"
    rows = [
        claim_row("rllc.r", "Pearson r, rLLC (attention) vs sigma_H over checkpoints, lead run", corr.get("r"),
                  profile, corr.get("n"), ours_ci=corr.get("ci_95"), note=r_note.strip("; "), horizon=info["horizon"]),
        claim_row("rllc.r", "Pearson r, same, without checkpoints of negative rLLC (not at a local minimum)",
                  corr_min.get("r"), profile, corr_min.get("n"), ours_ci=corr_min.get("ci_95"), horizon=info["horizon"],
                  sensitivity=True,
            note=(f"excluded epochs {spikes}" if spikes else "none excluded") +
                 ("" if "r" in corr_min else f"; {corr_min['undefined']}")),
        row(PAPER, "compute: rLLC time / sigma_H time per checkpoint (median)", None, median_ratio, profile,
            len(points), note=(f"rLLC {median_rllc_s:.1f} s ({s.num_chains}x({s.num_draws}+{s.num_burnin_steps}) SGLD "
                               f"steps), sigma_H {median_sigma_s:.3f} s (forward + statistics on the test split); "
                               f"statistics alone (the in-training cost) ratio {np.median(ratio_stats):.0f}x")),
    ]
    summary = {**base, "lead": {"run_id": lead["run_id"], "seed": lead["config"]["seed"], "wd": lead["config"]["wd"],
                                "grok_epoch": lead.get("grok_epoch"), "retention": lead.get("retention")},
               "points": points, "correlation": corr, "correlation_at_minimum": corr_min,
               "negative_rllc_epochs": spikes, "pooled_correlation": pooled,
               "median_rllc_s": median_rllc_s, "median_sigma_H_s": median_sigma_s, "median_time_ratio": median_ratio,
               "median_time_ratio_stats_only": float(np.median(ratio_stats)) if ratio_stats else None,
               "max_sigma_H_history_vs_recomputed": max(agree) if agree else None,
               # the measurements' own time (stored with them), not this run's: a run that reads them writes the same
               "measured_s": float(sum(p["rllc_s"] + p["sigma_H_s"] for p in points)), "sweep": info}
    write_outputs(out, summary, rows)
    return summary


def _differs(profile: str, horizon, n_checkpoints: int, lead: dict, s: SGLDSettings) -> str | None:
    """How this run and SGLD setting differ from the paper's (seed 42's 11 checkpoints of a 20,000-epoch
    run, 3 x 200 draws); ``None`` when they do not."""
    if profile == "smoke":
        return (f"smoke model and {horizon}-epoch horizon (paper: canonical model, 20,000 epochs, 11 checkpoints), "
                f"{s.num_chains} x {s.num_draws} SGLD draws (paper 3 x 200)")
    parts = [f"{horizon:,}-epoch horizon (paper 20,000)" if horizon != 20000 else "",
             f"{n_checkpoints} checkpoints (paper 11)" if n_checkpoints != 11 else "",
             f"seed {lead['config']['seed']} (paper 42)" if lead["config"]["seed"] != LEAD_SEED else "",
             f"{s.num_chains} x {s.num_draws} SGLD draws (paper 3 x 200)" if (s.num_chains, s.num_draws) != (3, 200) else "",
             "trained with bf16 autocast" if profile != "paper" and "bf16" in str(lead["config"].get("precision", "")) else ""]
    return ", ".join(part for part in parts if part) or None


def main(argv=None) -> Path:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--runs", choices=("lead", "all"), default="lead",
                       help="lead: seed 42 at lambda ~1 (the paper's 11 checkpoints); all: every run")
    extra.add_argument("--max-checkpoints", type=int, default=None, help="at most this many per run (evenly spaced)")
    known, rest = extra.parse_known_args(argv)
    args = parse_args(__doc__, rest)
    root = Path(args.out)
    lh = root / "long_horizon"
    records = sweep_records(SWEEP, args.profile, lh, args.launch)[0]
    summary = analyse(records, lh / "sweep" / "runs", args.profile, root / "rllc", PROFILE_SGLD[args.profile],
                      known.runs, known.max_checkpoints)
    corr = summary.get("correlation", {})
    if "r" in corr:
        print(f"rllc: r = {corr['r']:.3f} {corr['ci_95']} (n = {corr['n']}; paper {PAPER_R['r']} {PAPER_R['ci']}); "
              f"time ratio rLLC / sigma_H = {summary['median_time_ratio']:.0f}x; {root / 'rllc' / 'rllc_sigma_h.png'}")
    return root / "rllc"


if __name__ == "__main__":
    cli(main)
