"""Fig. 5: the critical weight decay lambda_c (logistic P(grok)) and the exponent nu of
t_grok ~ (lambda - lambda_c)^-nu, on the canonical weight-decay sweep.

    python -m reproduce.targets.fig5 --profile smoke|medium|paper --out reproduction

Writes ``fig5_critical.png``, ``fits.json`` (both lambda_c fits and nu; Fig. 1 and Fig. 11 read
it) and the report rows. lambda > 5 (the collapse point 10) is excluded from the fits, as in the
paper's aggregator.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from grok_lightning.plots.regimes import figure_critical
from grok_lightning.stats import fit_critical_weight_decay, fit_time_to_grok_power_law, records_to_arrays
from grok_lightning.stats.samples import fisher_counts, rank_test, stratified_exact_test
from reproduce.report import claim, claim_row, join_notes, load_claims
from reproduce.report.sources import claim_sample
from reproduce.targets.common import (
    caption,
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

LAPLACE = 0.5
#: the paper's values drawn in the figure (from reference/claims.csv)
PAPER_VALUES = {"wd_c": claim("wd.lambda_c").value, "wd_c_ci": list(claim("wd.lambda_c").ci),
                "nu": claim("wd.nu").value, "nu_ci": list(claim("wd.nu").ci),
                "excluded": [claim(c).value for c in ("wd.nu_excludes_0.5", "wd.nu_excludes_0.63")]}
#: the paper's bins: lambda -> (grokked, runs), from the claims of its Fig. 5A counts
PAPER_BINS = {float(c.id.removeprefix("wd.bin_")): c.count for c in load_claims().values() if c.id.startswith("wd.bin_")}
TRANSITION = (0.01, 0.02, 0.03)
#: lambda -> the paper's published grok epochs (a5's nu sample): the claims scored by rank tests;
#: lambda = 0.1 is also the horizon check (a horizon inside its range cannot give lambda_c ~ 0.016)
SAMPLE_CLAIMS = {0.1: "wd.t_grok_0.1", 0.5: "wd.t_grok_0.5", 2.0: "wd.t_grok_2"}
HORIZON_CHECK_WD = 0.1
PAPER_NU_SAMPLE = [(w, t) for w, cid in {**SAMPLE_CLAIMS, 1.0: "wd.t_grok_1"}.items() for t in claim_sample(cid)]
PAPER_T_GROK_01 = sorted(claim_sample(SAMPLE_CLAIMS[HORIZON_CHECK_WD]))

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
            nu_fit = fit_time_to_grok_power_law(wd, t_grok, wd_c, n_bootstrap=n_bootstrap, jackknife=True)
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
    horizon = info["horizon"]
    ci_of = lambda fit: _ci(fit.wd_c_ci)
    rows = [
        claim_row("wd.lambda_c", "lambda_c, least-squares logistic + bootstrap (paper method)",
                  shown(_finite(paper_fit.wd_c)), profile, n_fit, ours_ci=ci_of(paper_fit),
                  note=join_notes(note, f"status {paper_fit.status}", paper_fit.bootstrap_note()), invalid=invalid,
                  horizon=horizon),
        claim_row("wd.lambda_c", "lambda_c, binomial GLM (our addition)", shown(_finite(glm_fit.wd_c)), profile,
                  glm_fit.n_fit, ours_ci=ci_of(glm_fit), note=f"status {glm_fit.status}", invalid=invalid,
                  horizon=horizon, sensitivity=True),
        *([] if smoothed is None else [claim_row(
            "wd.lambda_c", f"lambda_c, paper method with Laplace smoothing {LAPLACE} (outcomes separable)",
            shown(_finite(smoothed.wd_c)), profile, smoothed.n_fit, ours_ci=ci_of(smoothed),
            note=join_notes(f"status {smoothed.status}; used for nu and Fig. 11", smoothed.bootstrap_note()),
            invalid=invalid, horizon=horizon,
            sensitivity=True)]),
    ]
    nu_ci = None if nu_fit is None else _ci(nu_fit.nu_ci)
    nu = None if nu_fit is None else shown(nu_fit.nu)
    nu_n = 0 if nu_fit is None else nu_fit.n_points
    rows.append(claim_row("wd.nu", "nu of t_grok ~ (lambda - lambda_c)^-nu", nu, profile, nu_n, ours_ci=nu_ci,
                          note=nu_error or note, invalid=invalid, horizon=horizon))
    for value in ("0.5", "0.63"):
        rows.append(claim_row(f"wd.nu_excludes_{value}", f"nu's 95% interval excludes {value}", nu, profile, nu_n,
                              ours_ci=nu_ci, invalid=invalid, horizon=horizon,
                              note=f"the paper's interval {list(claim('wd.nu').ci)} excludes it"))
    jack = None if nu_fit is None or not nu_fit.jackknife else nu_fit.jackknife
    rows.append(claim_row("wd.nu_jackknife", "nu, leave-one-run-out jackknife (bias-corrected, normal 95% CI)",
                          None if jack is None else shown(jack["nu_bias_corrected"]), profile, nu_n, ours_ci=None if jack is None else _ci(jack["ci_95"]),
                          invalid=invalid, horizon=horizon,
                          note="the paper's jackknife runs over the multi-task-extended cohort of 148 grok-positive runs"))
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
    """Our grok fraction (Wilson 95% CI, Fisher's exact test against the paper's count) in each of
    the paper's bins that we ran, a ``not run here`` row for each planned transition bin without
    runs yet, the exact stratified test across the transition bins, and the median grok epoch at
    each lambda where the paper published its grok epochs, tested against them by rank."""
    horizon = max((r["config"]["max_epochs"] for r in records), default=None)
    rows = [claim_row(f"wd.bin_{w:g}", f"grok fraction at lambda = {w:g} (Wilson 95% CI)", None, profile, 0,
                      note=f"planned, no finished run yet; paper {PAPER_BINS[w][0]}/{PAPER_BINS[w][1]}")
            for w in unrun]
    strata = []
    for b in bins:
        key = next((w for w in PAPER_BINS if np.isclose(b["wd"], w)), None)
        if key is None:
            continue
        paper_k, paper_n = PAPER_BINS[key]
        fisher = fisher_counts(b["n_grok"], b["n"], paper_k, paper_n)
        if any(np.isclose(key, w) for w in TRANSITION):
            strata.append((b["n_grok"], b["n"], paper_k, paper_n))
        rows.append(claim_row(f"wd.bin_{key:g}", f"grok fraction at lambda = {b['wd']:g} (Wilson 95% CI)",
                              b["p_grok"], profile, b["n"], ours_ci=[b["wilson_lo"], b["wilson_hi"]],
                              test_p=fisher, test_name="Fisher exact", horizon=horizon, invalid=invalid,
                              note=f"ours {b['n_grok']}/{b['n']}, paper {paper_k}/{paper_n}; Fisher exact p = {fisher:.2g}"
                                   f"{_not_grokked(records, b['wd'])}"))
    if strata and not unrun:
        test = stratified_exact_test(strata)
        rows.append(claim_row("wd.transition", "transition bins 0.01-0.03: one exact stratified test of ours against "
                              "the paper's counts", test.p_exact, profile, sum(s[1] for s in strata),
                              test_name="exact stratified (Birch)", horizon=horizon, invalid=invalid,
                              note=f"ours grokked {test.observed} of {sum(s[1] for s in strata)}, "
                                   f"{test.expected:.2f} expected if every bin's fraction were the paper's; "
                                   f"Cochran-Mantel-Haenszel chi-square p = {test.p_cmh:.2g} (an approximation "
                                   "that needs ~5 expected per cell, which 3 runs per bin do not give)"))
    for w, claim_id in SAMPLE_CLAIMS.items():
        at = np.isclose(wd, w) & np.isfinite(t_grok)
        if not np.isclose(wd, w).any():
            continue
        sample = sorted(claim_sample(claim_id))
        median, ci, level = median_ci(t_grok[at])
        test = rank_test(t_grok[at], sample) if at.any() else None
        extra = (f"; by epoch {SHORT_HORIZON:,}: ours {int((t_grok[at] <= SHORT_HORIZON).sum())}/{int(at.sum())}, the "
                 f"paper's {sum(t <= SHORT_HORIZON for t in sample)}/{len(sample)} (a horizon below the paper's grok "
                 "epochs puts lambda_c above 0.1)") if w == HORIZON_CHECK_WD else ""
        rows.append(claim_row(claim_id, f"median grok epoch at lambda = {w:g}", _finite(median), profile,
                              int(at.sum()), ours_ci=ci, ci_level=level, runs=t_grok[at].tolist(), horizon=horizon,
                              invalid=invalid,
                              test_p=None if test is None else test.p,
                              test_name=f"Mann-Whitney U ({'exact' if test and test.exact else 'normal approx.'})",
                              note=f"{int(at.sum())}/{int(np.isclose(wd, w).sum())} grokked, at epochs "
                                   f"{', '.join(str(int(t)) for t in sorted(t_grok[at]))}; the paper's published "
                                   f"sample: {', '.join(str(int(t)) for t in sample)}"
                                   + ("" if test is None else f"; Mann-Whitney p = {test.p:.2g}") + extra))
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
