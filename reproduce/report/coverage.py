"""Simulated coverage of the lambda_c and nu intervals the report uses (Fig. 5).

    python -m reproduce.report.coverage                       # print
    python -m reproduce.report.coverage --write docs/statistics.md

lambda_c: each run groks with its bin's true fraction, the paper's own (its Fig. 5A counts; a pure
logistic at its fitted k = 13.7 would be a clean step on most replicates, unlike its data, which
fail at high lambda too), on two designs: the paper's (its Fig. 5A bins, as the claims table has them) and the one our medium
sweep ran (its bins, ``results/medium/fig5/summary.json``); each replicate fitted by
:func:`grok_lightning.stats.fit_critical_weight_decay` (the paper's least squares and bootstrap).
The true lambda_c is what that method gives on the true fractions at the design's lambdas (0.0158
on the paper's). The coverage is the share of replicates whose 95% interval holds it, for the
interval the report uses (refits to posterior draws of the bin fractions) and the author's
bootstrap over runs, each with failed refits kept at the edge their bins imply and, beside it,
dropped as the author's aggregator drops them. nu: grok epochs drawn from the paper's power law with the scatter
of its published sample about it, on the same two designs' grok-positive runs, lambda_c held at its
true value (the report's nu, like the paper's, is conditional on lambda_c).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from grok_lightning.stats import fit_critical_weight_decay, fit_time_to_grok_power_law
from reproduce.report.claims import REPO, load_claims
from reproduce.report.prose import print_or_write

__all__ = ["designs", "lambda_c_coverage", "nu_coverage", "table"]

BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
PAPER_FIT = REPO / "reference" / "a5_wdc_fit.json"
#: the shipped Fig. 5 summary: its bins are the design our medium sweep ran (fits.json is not shipped)
MEDIUM_FITS = REPO / "results" / "medium" / "fig5" / "summary.json"


def _truth() -> dict:
    data = json.loads(PAPER_FIT.read_text())
    logs = [(s["wd"], math.log(s["grok_epoch"])) for s in data["nu_fit"]["sample"]]
    fit = data["wd_c_fit"]
    residual = [y - math.log(data["nu_fit"]["A"]) + data["nu_fit"]["nu"] * math.log(w - fit["wd_c"]) for w, y in logs]
    return {"wd_c": fit["wd_c"], "k": fit["k"], "nu": data["nu_fit"]["nu"], "A": data["nu_fit"]["A"],
            "scatter": float(np.std(residual, ddof=2)), "nu_design": _counts([w for w, _ in logs])}


def _counts(values) -> dict[float, int]:
    out: dict[float, int] = {}
    for v in values:
        out[float(v)] = out.get(float(v), 0) + 1
    return out


def designs() -> dict[str, dict[float, int]]:
    """``{name: {lambda: runs}}``: the paper's Fig. 5A bins and the bins our medium sweep ran."""
    paper = {float(c.id.removeprefix("wd.bin_")): c.count[1] for c in load_claims().values() if c.id.startswith("wd.bin_")}
    out = {f"paper ({sum(paper.values())} runs)": paper}
    if MEDIUM_FITS.exists():
        bins = json.loads(MEDIUM_FITS.read_text())["paper"]["bins"]
        out[f"medium ({sum(b['n'] for b in bins)} runs)"] = {float(b["wd"]): int(b["n"]) for b in bins}
    return out


def _paper_bins() -> dict[float, tuple[int, int]]:
    return {float(c.id.removeprefix("wd.bin_")): c.count for c in load_claims().values() if c.id.startswith("wd.bin_")}


def true_lambda_c(design: dict[float, int]) -> float:
    """The lambda_c the paper's method estimates on ``design``: its fit to the true grok fractions
    at the design's lambdas (the paper's own bin fractions), weighed bin by bin as it weighs them."""
    bins = _paper_bins()
    wd = np.repeat(list(design), [bins[w][1] for w in design])
    grok = np.concatenate([np.arange(bins[w][1]) < bins[w][0] for w in design])
    return fit_critical_weight_decay(wd, grok, n_bootstrap=0).wd_c


def lambda_c_coverage(design: dict[float, int], reps: int = 200, n_bootstrap: int = 400, seed: int = 0,
                      interval: str = "jeffreys") -> dict:
    """Coverage of the 95% interval of lambda_c over ``reps`` replicates of ``design``, each run
    grokking with its bin's true fraction (the paper's): the report's interval (failed refits kept
    at their edge) and the author's (dropped), among replicates that have one; the share of refits
    that failed, and of replicates with no interval (every run grokked, none did, or a clean step:
    the report reads those inconclusive)."""
    bins, rng, truth = _paper_bins(), np.random.default_rng(seed), true_lambda_c(design)
    wd = np.repeat(list(design), list(design.values()))
    p = np.repeat([bins[w][0] / bins[w][1] for w in design], list(design.values()))
    kept = dropped = none = 0
    failed = []
    for rep in range(reps):
        fit = fit_critical_weight_decay(wd, rng.random(wd.size) < p, n_bootstrap=n_bootstrap, seed=rep,
                                        interval=interval)
        if not np.all(np.isfinite(fit.wd_c_ci)):
            none += 1
            continue
        kept += fit.wd_c_ci[0] <= truth <= fit.wd_c_ci[1]
        converged = 10.0 ** fit.bootstrap_params[:, 0] if fit.bootstrap_params is not None else np.empty(0)
        if converged.size >= 2:
            lo, hi = np.quantile(converged, [0.025, 0.975])
            dropped += bool(lo <= truth <= hi)
        failed.append(1 - (fit.n_bootstrap_ok or 0) / n_bootstrap)
    scored = max(reps - none, 1)
    return {"truth": truth, "coverage": kept / scored, "coverage_dropped": dropped / scored, "no_interval": none / reps,
            "failed_refits": float(np.mean(failed)) if failed else math.nan, "reps": reps, "n_bootstrap": n_bootstrap}


def nu_coverage(design: dict[float, int], reps: int = 200, n_bootstrap: int = 400, seed: int = 0) -> dict:
    """Coverage of nu's 95% bootstrap interval over ``reps`` replicates of grok epochs at the
    grok-positive runs of ``design`` (lambda > lambda_c), lambda_c at its true value."""
    truth, rng = _truth(), np.random.default_rng(seed)
    wd = np.repeat(list(design), list(design.values()))
    wd = wd[wd > truth["wd_c"]]
    centre = np.log(truth["A"]) - truth["nu"] * np.log(wd - truth["wd_c"])
    covered = 0
    for rep in range(reps):
        t = np.exp(centre + rng.normal(0.0, truth["scatter"], wd.size))
        fit = fit_time_to_grok_power_law(wd, t, truth["wd_c"], n_bootstrap=n_bootstrap, seed=rep)
        covered += fit.nu_ci[0] <= truth["nu"] <= fit.nu_ci[1]
    return {"coverage": covered / reps, "n_points": int(wd.size), "reps": reps, "n_bootstrap": n_bootstrap}


def table(reps: int = 200, n_bootstrap: int = 400) -> str:
    """The markdown table of both intervals' coverage on both designs."""
    truth = _truth()
    nu_designs = {"paper (published grok epochs)": truth["nu_design"]}
    medium = [name for name in designs() if name.startswith("medium")]
    if medium:
        bins = json.loads(MEDIUM_FITS.read_text())["paper"]["bins"]
        nu_designs[medium[0].replace("runs", "runs' grokked")] = {float(b["wd"]): int(b["n_grok"]) for b in bins}
    lines = [f"True nu {truth['nu']:.3g} (scatter of log t_grok "
             f"{truth['scatter']:.3g}); {reps} replicates, {n_bootstrap} bootstrap resamples each (the report uses "
             "1,500); target 95% +- 3%.", "",
             "| interval | design | coverage (failed refits kept at their edge) | coverage (failed refits dropped) | "
             "refits failed | no interval |",
             "|---|---|---|---|---|---|"]
    for interval, label in (("jeffreys", "posterior draws (the report's)"), ("bootstrap", "the author's bootstrap")):
        for name, design in designs().items():
            r = lambda_c_coverage(design, reps, n_bootstrap, interval=interval)
            lines.append(f"| lambda_c (true {r['truth']:.4g}), {label} | {name} | {r['coverage']:.1%} | "
                         f"{r['coverage_dropped']:.1%} | {r['failed_refits']:.0%} | {r['no_interval']:.0%} |")
    for name, design in nu_designs.items():
        r = nu_coverage(design, reps, n_bootstrap)
        lines.append(f"| nu, bootstrap | {name}, {r['n_points']} runs | {r['coverage']:.1%} | - | - | - |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--n-bootstrap", type=int, default=400)
    parser.add_argument("--write", default=None, help="a markdown file whose coverage block to replace")
    args = parser.parse_args(argv)
    print_or_write(table(args.reps, args.n_bootstrap), args.write, "coverage")


if __name__ == "__main__":
    main()
