"""Fig. 5: the critical weight decay lambda_c (logistic P(grok)) and the exponent nu of
t_grok ~ (lambda - lambda_c)^-nu, on the canonical weight-decay sweep.

    python -m reproduce.fig5 --profile smoke|medium|paper --out reproduction

Writes ``fig5_critical.png``, ``fits.json`` (both lambda_c fits and nu; Fig. 1 and Fig. 11 read
it) and the report rows. lambda > 5 (the collapse point 10) is excluded from the fits, as in the
paper's aggregator.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import fisher_exact, mannwhitneyu
from statsmodels.stats.proportion import proportion_confint

from grok_lightning.plots.common import caption
from grok_lightning.plots.regimes import figure_critical
from grok_lightning.stats import fit_critical_weight_decay, fit_time_to_grok_power_law, records_to_arrays
from reproduce.common import (
    REPO,
    cli,
    describe,
    median_ci,
    model_shape,
    parse_args,
    planned_configs,
    sweep_records,
    sweep_summary,
    write_outputs,
)
from reproduce.report import join_notes, row

PAPER = "2605.20441 Fig. 5"
#: published values (a5_wdc_fit.json / a5_nu_jackknife.json under ../shared/reference)
LAPLACE = 0.5
PAPER_VALUES = {"wd_c": 0.0158, "wd_c_ci": [0.0109, 0.0200], "n": 210, "nu": 0.757, "nu_ci": [0.725, 0.799], "nu_n": 140}


#: the paper's bins (a5_wdc_fit.json): lambda -> (grok fraction, n); its transition bins get a row each
PAPER_BINS = {b["wd"]: (b["p_grok"], b["n"]) for b in json.loads(
    (REPO / "reference" / "a5_wdc_fit.json").read_text())["wd_c_fit"]["bins"]}
TRANSITION = (0.01, 0.02, 0.03)
#: the paper's published grok epochs at lambda = 0.1 (a5_wdc_fit.json nu sample, 9 runs): the
#: horizon check (a horizon inside this range cannot give lambda_c ~ 0.016 on the paper's model)
HORIZON_CHECK_WD = 0.1
PAPER_NU_SAMPLE = [(s["wd"], s["grok_epoch"]) for s in json.loads(
    (REPO / "reference" / "a5_wdc_fit.json").read_text())["nu_fit"]["sample"]]
PAPER_T_GROK_01 = sorted(t for w, t in PAPER_NU_SAMPLE if w == HORIZON_CHECK_WD)

#: a horizon at which lambda = 0.1 sits inside the transition (the small model's first sweep used it)
SHORT_HORIZON = 1000
#: the paper's canonical sweep: lambda_c and nu are properties of a model at a horizon
PAPER_SHAPE, PAPER_HORIZON = "4L x 8H d128", 5000


def invalid_reason(records: list[dict], horizon: int) -> str | None:
    """A lambda_c (and nu) measured on another model or at another horizon cannot test the paper's
    numbers: the grok fraction at a lambda is a statement about both (lambda_c scales roughly as
    1/horizon, Fig. 11)."""
    shapes = sorted({model_shape(r) for r in records})
    if shapes == [PAPER_SHAPE] and horizon >= PAPER_HORIZON:
        return None
    return (f"model {', '.join(shapes)} at a {horizon:,}-epoch horizon (paper: {PAPER_SHAPE} at {PAPER_HORIZON:,}); "
            "lambda_c moves with both by construction")


def unrun_transition(planned_wd, wd: np.ndarray) -> list[float]:
    """The paper's transition bins the sweep plans but has no counted run in yet: a lambda_c
    fitted without them is not a measurement of lambda_c (every other bin groks)."""
    return sorted({w for w in TRANSITION for p in planned_wd if np.isclose(p, w) and not np.isclose(wd, w).any()})


def analyse(records: list[dict], profile: str, out: Path, n_bootstrap: int = 1500, planned_wd=()) -> dict:
    """Fits, figure and report rows from the sweep's records (no training here); ``planned_wd``:
    the lambda of every run the sweep plans (an unfinished sweep names what it still lacks)."""
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # unfinished runs are reported in the summary
        wd, grokked, t_grok = records_to_arrays(records)
    unrun = unrun_transition(planned_wd, wd)
    paper_fit = fit_critical_weight_decay(wd, grokked, method="paper", n_bootstrap=n_bootstrap)
    glm_fit = fit_critical_weight_decay(wd, grokked, method="glm")
    # Few seeds per lambda often give (quasi-)separated outcomes: no failure above a grokked run.
    # Then neither the published fit nor the GLM has a CI, so we add the published method with
    # the Laplace smoothing the paper used for Mamba ((g + 0.5) / (n + 1)), reported as such.
    smoothed = None
    if not np.all(np.isfinite(paper_fit.wd_c_ci)):
        smoothed = fit_critical_weight_decay(wd, grokked, method="paper", smoothing=LAPLACE, n_bootstrap=n_bootstrap)
    main_fit = paper_fit if smoothed is None or not np.isfinite(smoothed.wd_c) else smoothed
    wd_c = main_fit.wd_c if np.isfinite(main_fit.wd_c) else glm_fit.wd_c
    nu_fit, nu_error = None, None
    if np.isfinite(wd_c):
        try:
            nu_fit = fit_time_to_grok_power_law(wd, t_grok, wd_c, n_bootstrap=n_bootstrap)
        except ValueError as err:
            nu_error = str(err)
    info = sweep_summary(records)
    details = (f"{info['text']}\n{describe(records[0])}")
    invalid = invalid_reason(records, info["horizon"])
    differs = None if profile == "paper" else (
        ("" if invalid is None else "smaller model or horizon (lambda_c scales with 1/horizon: compare it with the "
                                    "AdamW bound for this horizon, Fig. 11), ")
        + f"{info['seeds_per_wd']} seeds per lambda (paper 10-30)")
    if smoothed is not None:
        details += f"\nseparable outcomes: the paper-method curve shown uses Laplace smoothing {LAPLACE} (status unsmoothed: {paper_fit.status})"
    if unrun:
        details += (f"\nNOT A MEASUREMENT YET: no finished run at lambda {', '.join(f'{w:g}' for w in unrun)} (the transition); "
                    "the lambda_c and nu fits drawn here extrapolate below the lowest bin run; the report says 'not run here'")
    fig = figure_critical(main_fit, glm_fit, wd, t_grok, nu_fit, PAPER_VALUES, caption(profile, details, differs, figure="fig5"),
                          paper_sample=PAPER_NU_SAMPLE)
    fig.savefig(out / "fig5_critical.png", dpi=130)
    n_fit = paper_fit.n_fit
    note = "" if profile == "paper" else (f"{profile} profile: {info['horizon']}-epoch horizon (paper 5,000), "
                                           f"{model_shape(records[0])} model")
    if len(planned_wd) > len(wd):  # an unfinished sweep: the fits stand on what has run
        note = join_notes(f"{len(wd)} of {len(planned_wd)} planned runs finished", note)
    # Until the transition bins have runs, the fits are shown in the figure but not reported.
    shown = (lambda x: None) if unrun else (lambda x: x)
    if unrun:
        note = join_notes(f"not run here yet: no finished run at lambda {', '.join(f'{w:g}' for w in unrun)}", note)
    rows = [
        row(PAPER, "lambda_c, least-squares logistic + bootstrap (paper method)", PAPER_VALUES["wd_c"],
            shown(_finite(paper_fit.wd_c)), profile, n_fit, PAPER_VALUES["wd_c_ci"], _ci(paper_fit.wd_c_ci),
            note=join_notes(note, f"status {paper_fit.status}"), invalid=invalid),
        row(PAPER, "lambda_c, binomial GLM (our addition)", PAPER_VALUES["wd_c"], shown(_finite(glm_fit.wd_c)), profile,
            glm_fit.n_fit, PAPER_VALUES["wd_c_ci"], _ci(glm_fit.wd_c_ci), note=f"status {glm_fit.status}", invalid=invalid),
        *([] if smoothed is None else [row(
            PAPER, f"lambda_c, paper method with Laplace smoothing {LAPLACE} (outcomes separable)", PAPER_VALUES["wd_c"],
            shown(_finite(smoothed.wd_c)), profile, smoothed.n_fit, PAPER_VALUES["wd_c_ci"], _ci(smoothed.wd_c_ci),
            note=f"status {smoothed.status}; used for nu and Fig. 11", invalid=invalid)]),
        row(PAPER, "nu of t_grok ~ (lambda - lambda_c)^-nu", PAPER_VALUES["nu"],
            None if nu_fit is None else shown(nu_fit.nu), profile, 0 if nu_fit is None else nu_fit.n_points,
            PAPER_VALUES["nu_ci"], None if nu_fit is None else _ci(nu_fit.nu_ci), note=nu_error or note, invalid=invalid),
    ]
    rows += bin_rows(paper_fit.bins, wd, t_grok, profile, invalid, unrun, records)
    fits = {"profile": profile, "horizon": info["horizon"], "paper": paper_fit.to_dict(), "glm": glm_fit.to_dict(),
            "paper_smoothed": None if smoothed is None else smoothed.to_dict(), "main": main_fit.to_dict(),
            "nu": None if nu_fit is None else nu_fit.to_dict(), "nu_error": nu_error, "wd_c_used": shown(_finite(wd_c)),
            "unrun_transition_bins": unrun, "lr": records[0]["config"]["model"]["lr"], "sweep": info}
    write_outputs(out, fits, rows)
    (out / "fits.json").write_text((out / "summary.json").read_text())
    return fits


def bin_rows(bins: list[dict], wd: np.ndarray, t_grok: np.ndarray, profile: str, invalid: str | None,
             unrun: list[float] = (), records: list[dict] = ()) -> list[dict]:
    """Our grok fraction (Wilson 95% CI) in each of the paper's transition bins that we ran (and a
    ``not run here`` row for each planned one without runs yet), and the median grok epoch at
    lambda = 0.1 against the paper's published ones there."""
    rows = [row(PAPER, f"grok fraction at lambda = {w:g} (Wilson 95% CI)", round(PAPER_BINS[w][0], 4), None, profile, 0,
                note=f"planned, no finished run yet; paper {round(PAPER_BINS[w][0] * PAPER_BINS[w][1])}/{PAPER_BINS[w][1]}")
            for w in unrun]
    for b in bins:
        if not any(np.isclose(b["wd"], w) for w in TRANSITION):
            continue
        paper_p, paper_n = PAPER_BINS[round(b["wd"], 6)]
        paper_k = round(paper_p * paper_n)
        # both fractions are samples (the paper's of 10-30 runs): each gets its Wilson interval, and
        # Fisher's exact test of the two counts is in the note
        fisher = fisher_exact([[b["n_grok"], b["n"] - b["n_grok"]], [paper_k, paper_n - paper_k]]).pvalue
        rows.append(row(PAPER, f"grok fraction at lambda = {b['wd']:g} (Wilson 95% CI)", round(paper_p, 4),
                        b["p_grok"], profile, b["n"], paper_ci=[float(v) for v in proportion_confint(
                            paper_k, paper_n, alpha=0.05, method="wilson")], ours_ci=[b["wilson_lo"], b["wilson_hi"]],
                        note=f"ours {b['n_grok']}/{b['n']}, paper {paper_k}/{paper_n}; Fisher exact p = {fisher:.2g}"
                             f"{_not_grokked(records, b['wd'])}", invalid=invalid))
    at = np.isclose(wd, HORIZON_CHECK_WD) & np.isfinite(t_grok)
    if at.any() or np.isclose(wd, HORIZON_CHECK_WD).any():
        median, ci = median_ci(t_grok[at])
        # a rank test of our grok epochs against the paper's published ones (scipy: exact without ties,
        # the normal approximation with them; the paper's sample holds 1,100 twice)
        same = f"; Mann-Whitney U two-sided p = {mannwhitneyu(t_grok[at], PAPER_T_GROK_01).pvalue:.2g}" if at.sum() >= 3 else ""
        rows.append(row(PAPER, f"median grok epoch at lambda = {HORIZON_CHECK_WD:g}",
                        float(np.median(PAPER_T_GROK_01)), _finite(median), profile, int(at.sum()),
                        paper_ci=[PAPER_T_GROK_01[0], PAPER_T_GROK_01[-1]], ours_ci=ci,
                        note=f"{int(at.sum())}/{int(np.isclose(wd, HORIZON_CHECK_WD).sum())} grokked, at epochs "
                             f"{', '.join(str(int(t)) for t in sorted(t_grok[at]))}; by epoch {SHORT_HORIZON:,}: ours "
                             f"{int((t_grok[at] <= SHORT_HORIZON).sum())}/{int(at.sum())}, the paper's "
                             f"{sum(t <= SHORT_HORIZON for t in PAPER_T_GROK_01)}/{len(PAPER_T_GROK_01)}; the paper's range "
                             f"is its published sample of {len(PAPER_T_GROK_01)} runs, not a CI; a horizon below it "
                             f"puts lambda_c above 0.1{same}", invalid=invalid))
    return rows


def _not_grokked(records: list[dict], wd: float) -> str:
    """'; not grokked: seed 31 (test accuracy 0.925 at epoch 5,000)' for a bin's runs that did not grok."""
    left = [r for r in records if np.isclose(r["config"]["wd"], wd) and r.get("grok_epoch") is None]
    return "; not grokked: " + ", ".join(
        f"seed {r['config']['seed']} (test accuracy {_fmt3(r.get('final_test_acc'))} at epoch "
        f"{r['history']['epoch'][-1]:,})" for r in sorted(left, key=lambda r: r["config"]["seed"])) if left else ""


def _fmt3(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _finite(x):
    return float(x) if x is not None and np.isfinite(x) else None


def _ci(ci):
    return [float(v) for v in ci] if ci is not None and np.all(np.isfinite(ci)) else None


def planned_wd(profile: str) -> list[float]:
    """The lambda of every run the profile's canonical sweep plans."""
    return [float(config["model"]["init_args"]["weight_decay"]) for config in planned_configs("canonical_wd.yaml", profile)]


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig5"
    records = sweep_records("canonical_wd.yaml", args.profile, out, args.launch)[0]
    fits = analyse(records, args.profile, out, planned_wd=planned_wd(args.profile))
    print(f"fig5: lambda_c = {fits['paper']['wd_c']} {fits['paper']['wd_c_ci']} (paper method), "
          f"{fits['glm']['wd_c']} (glm); {out / 'fig5_critical.png'}")
    return out


if __name__ == "__main__":
    cli(main)
