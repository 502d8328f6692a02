"""Does it predict? Held-out AUC of training-clock / loss / weight-norm baselines vs the attention
diagnostics (arXiv 2605.20441 section 4.8, E11, and the author's later "no added value" note).

    python -m reproduce.targets.predict --profile smoke|medium|paper --out reproduction [--epoch E] [--slope-window W]

No extra training where possible: the records are those of the canonical weight-decay sweep
(``sweep_records("canonical_wd.yaml", ...)`` into ``<out>/fig5``, the call reproduce/targets/fig5.py makes,
so under ``make reproduce-all`` it is cached) plus, read-only, the regime-map sweep of Fig. 1
(``<out>/fig1/sweep``) when its records exist. Features are read at epoch ``E`` (smoke 50, paper
1,000 as in the paper); targets: grokked within the horizon and retained (E11's label). Writes
``predict_auc.png``, ``features.csv``, ``summary.json``, ``rows.json`` and ``NOTES.md``.

``--profile medium`` trains nothing: E11's held-out test by weight decay on the medium records
already shipped (reproduce/targets/predict_medium.py).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from grok_lightning.plots.predict import figure_auc
from grok_lightning.stats.predict import (
    BASELINE_FEATURES,
    BASELINE_PLUS_TEST,
    DIAGNOSTIC_FEATURES,
    FEATURE_SETS,
    auc_study,
    feature_table,
    is_undefined,
    table_records,
)
from reproduce.report import claim, claim_row, row
from reproduce.targets.common import (
    SWEEPS,
    caption,
    cli,
    describe,
    parse_args,
    read_planned,
    sweep_records,
    sweep_summary,
    write_outputs,
)

NOTE_SOURCE = "author's later note"
#: the published values (reference/claims.csv, E11)
PAPER_VALUES = {key: claim(f"e11.{key}").value for key in ("rf_auc", "logistic_auc", "rf_brier")}
PROFILE_DEFAULTS = {
    "smoke": dict(epoch=50, slope_window=40, n_bootstrap=1000, n_estimators=100),
    "paper": dict(epoch=1000, slope_window=200, n_bootstrap=2000, n_estimators=300),
}
TARGETS = ("grokked", "retained")


def existing_records(sweep_file: str, profile: str, out: Path) -> list[dict]:
    """Records of a sweep already run into ``out/sweep`` (current grid only); never trains."""
    from grok_lightning.sweep.grid import load_sweep

    return read_planned(out / "sweep", load_sweep(SWEEPS / sweep_file, profile=profile).expand())


def _num(x):
    return x if isinstance(x, (int, float)) else None


def _ci(x):
    return x if isinstance(x, list) else None


def report_rows(studies: dict, profile: str, epoch: int, underpowered: str, horizon: int | None = None) -> list[dict]:
    rows = []
    retained = studies["retained"]
    for model, key in (("random_forest", "rf_auc"), ("logistic", "logistic_auc")):
        entry = retained.get("results", {}).get(model, {}).get("baseline+diagnostics", {})
        note = (f"features at epoch {epoch} (paper 1,000), baseline+diagnostics set, grouped CV by (scale, lambda); "
                f"paper: holdout at unseen lambda, 998 train runs, features incl. test accuracy")
        if is_undefined(entry.get("auc")):
            note = f"{entry['auc']}; {note}"
        rows.append(claim_row(f"e11.{key}", f"retention classifier AUC, {model.replace('_', ' ')}",
                              _num(entry.get("auc")), profile, retained.get("n"), ours_ci=_ci(entry.get("auc_ci")),
                              note=f"{note}; {underpowered}".strip("; "), horizon=horizon))
    for target in TARGETS:
        study = studies[target]
        for model in ("random_forest", "logistic"):
            base = study.get("results", {}).get(model, {}).get("baseline", {})
            diff = study.get("differences", {}).get(model, {})
            d = diff.get("diff")
            note = (f"target {target}; AUC baseline {_fmt(base.get('auc'))}, +diagnostics "
                    f"{_fmt(study.get('results', {}).get(model, {}).get('baseline+diagnostics', {}).get('auc'))}; "
                    f"bootstrap P(diff <= 0) = {_fmt(diff.get('p_le_0'))}")
            if is_undefined(d):
                note = f"{d}; {note}"
            rows.append(row(NOTE_SOURCE, f"AUC gain of the diagnostics over the baselines ({target}, "
                            f"{model.replace('_', ' ')}); 0 = 'no added value'", None, _num(d), profile, study.get("n"),
                            None, _ci(diff.get("ci")), note=f"{note}; {underpowered}".strip("; "), null=0.0))
    return rows


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def notes_md(studies: dict, profile: str, epoch: int, underpowered: str) -> str:
    lines = [f"### predict: does it predict? (features at epoch {epoch}, profile {profile})", "",
             "Held-out AUC of pooled out-of-fold predictions, whole (scale, lambda) cells held out; 95% CIs from a "
             "cluster bootstrap over cells. Baseline = " + ", ".join(BASELINE_FEATURES) + "; diagnostics = "
             + ", ".join(DIAGNOSTIC_FEATURES) + ".", ""]
    if underpowered:
        lines += [f"**{underpowered}**", ""]
    lines += ["| target | model | baseline | diagnostics | baseline+diagnostics | baseline+test | gain (CI) |",
              "|---|---|---|---|---|---|---|"]
    for target, study in studies.items():
        for model in study.get("models", []):
            res = study.get("results", {}).get(model, {})
            cells = []
            for name in ("baseline", "diagnostics", "baseline+diagnostics", "baseline+test"):
                e = res.get(name, {})
                auc, ci = e.get("auc"), e.get("auc_ci")
                cells.append(f"{auc:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]" if isinstance(auc, float) and isinstance(ci, list)
                             else _fmt(auc) if auc is not None else "-")
            diff = study.get("differences", {}).get(model, {})
            gain = diff.get("diff")
            gain_text = (f"{gain:+.3f} [{diff['ci'][0]:+.2f}, {diff['ci'][1]:+.2f}]"
                         if isinstance(gain, float) and isinstance(diff.get("ci"), list) else _fmt(gain))
            lines.append(f"| {target} (n={study.get('n')}, pos={study.get('n_positive')}) | {model} | "
                         + " | ".join(cells) + f" | {gain_text} |")
    return "\n".join(lines) + "\n"


def analyse(records: list[dict], profile: str, out: Path, epoch: int, slope_window: int, n_bootstrap: int,
            n_estimators: int, sources: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    rows, skipped = feature_table(records, epoch, slope_window)
    flat = table_records(rows)
    with open(out / "features.csv", "w", newline="") as handle:
        if flat:
            writer = csv.DictWriter(handle, fieldnames=list(flat[0]))
            writer.writeheader()
            writer.writerows(flat)
    feature_sets = {**FEATURE_SETS, **BASELINE_PLUS_TEST}
    studies = {t: auc_study(rows, t, feature_sets, n_bootstrap=n_bootstrap, n_estimators=n_estimators)
               for t in TARGETS}
    info = sweep_summary(records)
    n_min = min((s["n"] for s in studies.values()), default=0)
    underpowered = ""
    if profile != "paper" or n_min < 50:
        underpowered = (f"underpowered: {len(rows)} runs in {studies['grokked']['n_groups']} (scale, lambda) cells "
                        f"(paper: 998 training runs + 50 holdout); read the CIs, not the point values")
    details = (f"{info['text']}\nrecords: {sources}; features at the history row at/before epoch {epoch}, slopes over "
               f"{slope_window} epochs; LeaveOneGroupOut by (scale, lambda); RF {n_estimators} trees, logistic C=1; "
               f"{n_bootstrap} cluster-bootstrap resamples\n{describe(records[0])}")
    differs = None if profile == "paper" else (
        f"smoke sweeps (smaller model, 250-epoch horizon, features at epoch {epoch}); grokked runs stop 20 epochs "
        f"after grokking, so retention is observable only on the regime-map runs and the runs that never grokked")
    fig = figure_auc(studies, PAPER_VALUES["rf_auc"], caption(profile, details + "\n" + underpowered, differs, figure="predict"))
    fig.savefig(out / "predict_auc.png", dpi=130)
    summary = {"profile": profile, "epoch": epoch, "slope_window": slope_window, "sources": sources,
               "n_runs": len(rows), "skipped": skipped, "studies": studies, "paper": PAPER_VALUES,
               "underpowered": underpowered, "sweep": info}
    horizon = min(r["config"]["max_epochs"] for r in records)  # the labels are read at the end of each run
    write_outputs(out, summary, report_rows(studies, profile, epoch, underpowered, horizon))
    (out / "NOTES.md").write_text(notes_md(studies, profile, epoch, underpowered))
    return summary


def main(argv=None) -> Path:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--epoch", type=int, default=None, help="feature epoch E (smoke 50, paper 1000)")
    extra.add_argument("--slope-window", type=int, default=None, help="epochs of the s_bar / sigma_H slopes")
    extra.add_argument("--n-bootstrap", type=int, default=None)
    known, rest = extra.parse_known_args(argv)
    args = parse_args(__doc__, rest)
    root = Path(args.out)
    out = root / "predict"
    try:
        import sklearn  # noqa: F401
    except ImportError:
        reason = "scikit-learn is not installed (pip install -e '.[predict]')"
        write_outputs(out, {"profile": args.profile, "undefined": f"undefined: {reason}"},
                      [claim_row("e11.rf_auc", "retention classifier AUC, random forest", None, args.profile, 0,
                                 note=f"not run: {reason}")])
        print(f"predict: not run: {reason}")
        return out
    if args.profile == "medium":
        from reproduce.targets.predict_medium import run

        return run(root, known.epoch, known.slope_window, known.n_bootstrap)
    defaults = PROFILE_DEFAULTS[args.profile]
    canonical = sweep_records("canonical_wd.yaml", args.profile, root / "fig5", args.launch)[0]
    regime = existing_records("regime_map.yaml", args.profile, root / "fig1")
    sources = {"canonical_wd": len(canonical),
               "regime_map": len(regime) if regime else "absent (run reproduce.targets.fig1 first to add it)"}
    summary = analyse(canonical + regime, args.profile, out, known.epoch or defaults["epoch"],
                      known.slope_window or defaults["slope_window"], known.n_bootstrap or defaults["n_bootstrap"],
                      defaults["n_estimators"], sources)
    for target, study in summary["studies"].items():
        rf = study.get("results", {}).get("random_forest", {})
        print(f"predict [{target}] n={study['n']}: RF AUC baseline {_fmt(rf.get('baseline', {}).get('auc'))}, "
              f"+diagnostics {_fmt(rf.get('baseline+diagnostics', {}).get('auc'))}")
    print(f"predict: {out / 'predict_auc.png'}")
    return out


if __name__ == "__main__":
    cli(main)
