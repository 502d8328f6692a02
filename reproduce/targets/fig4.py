"""Fig. 4: peak sigma_H vs head width d/H, the saturating fit (AIC against linear, log, power), and
the random-label null with a permutation test of the real task against it.

    python -m reproduce.targets.fig4 --profile smoke|medium|paper --out reproduction

sigma_H is the population std over a layer's H heads (the paper's ddof = 0), which reads low at
small H (0.80 sigma at H = 4, 0.95 at H = 16). Every comparison across H is reported twice: as
the paper computes it, and with the unbiased spread (``stats.unbiased_std_factor(H)``, a factor
of H alone, so it applies to the layer mean).
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from grok_lightning.plots.interventions import figure_head_width, figure_head_width_curves
from grok_lightning.stats import cohens_d, cohens_d_ci, fit_saturation_models, permutation_p_floor, permutation_test
from grok_lightning.stats.phases import sigma_h_curve
from grok_lightning.stats.significance import unbiased_std_factor
from grok_lightning.stats.validity import peak_check, summarise_checks
from reproduce.report import claim, claim_row, join_notes
from reproduce.report.sources import source_value
from reproduce.targets.a7 import CONTRAST_SWEEP, a7_rows, contrast_records, unique_runs
from reproduce.targets.common import (
    caption,
    cli,
    describe,
    parse_args,
    planned_configs,
    sweep_records,
    sweep_summary,
    write_outputs,
)

#: the level at which the real-vs-null permutation test rejects (the paper's)
ALPHA = 0.05
#: the paper's Fig. 4 values drawn in the figures (reference/claims.csv: bin means read off the figure)
DH_BINS = (2, 4, 8, 16, 32)
PAPER_VALUES = {"dh": list(DH_BINS), "peak": [claim(f"fig4.bin_{b}").value for b in DH_BINS],
                "margin": [claim(f"fig4.bin_{b}").margin for b in DH_BINS],
                "null": claim("fig4.null").value, "true": claim("fig4.true").value}
TRUE_DH = 16  # the real-task arm of the paper's null comparison is the canonical d/H = 16
AFTER = 100  # the paper's amplitude statistic skips the first 100 epochs (reference a3 note)
#: how else the layers' heads may be pooled (metrics/readings.py), rebuilt from the records' per-layer columns;
#: sensitivity rows only: the Fig. 4 cohort is scored by the released reading (docs/sigma_h_readings.md)
ALTERNATIVE_READINGS = ("max_layer", "pooled", "sum_layers")
#: the tail of a run the paper's "tail drift" permutation test compares (its window is not stated)
TAIL_FRACTION = 0.1
CHECK_WORDS = {"flat": "peak sigma_H (epochs > 100) does not stand out of its trajectory",
               "edge": "the peak is the first or the last evaluation after epoch 100 (start-up transient or end of run)"}
PAPER_SHAPE = {"d_model": 128, "n_layers": 4}
#: Phase 2 (the peak the statistic is after) lies in epochs 1,000-3,000 at lambda 1 (docs/fig2_search.md)
PHASE2_END = 3000


def peak_checks(runs: list[dict]) -> str:
    """What the trajectories' maxima are (``runs`` from :func:`run_table`): how many stand out of
    their run (stats.validity), how many sit on the edge of the scored range; empty when every
    one is a peak."""
    return summarise_checks([{"flat": not r["peak"]["stands_out"], "edge": r["peak"]["on_edge"]} for r in runs],
                            CHECK_WORDS)


def invalid_reason(records: list[dict]) -> str | None:
    """Why these runs cannot measure the head-width effect: the model is not the paper's width
    and depth, which sets the amplitude (the paper's own a7: d = 2.19 between high and low d_model),
    or the runs end before Phase 2 has passed; then also whether the scored maxima are peaks.

    On the paper's model over the paper's window the statistic is the paper's, so a maximum that
    does not stand out is a finding (the note says so), not a flaw of the design."""
    reasons = []
    shapes = {(r["config"]["model"]["d_model"], r["config"]["model"]["n_layers"]) for r in records}
    if shapes != {(PAPER_SHAPE["d_model"], PAPER_SHAPE["n_layers"])}:
        reasons.append(f"model d_model x layers {sorted(shapes)} (paper 128 x 4; the amplitude depends on d_model, "
                       "the paper's own d = 2.19)")
    horizon = max(r["config"]["max_epochs"] for r in records)
    if horizon < PHASE2_END:
        reasons.append(f"{horizon}-epoch runs end before Phase 2 has passed (epochs 1,000-{PHASE2_END:,} at lambda 1)")
    if not reasons:
        return None
    return join_notes(peak_checks(run_table(records)), *reasons)


def planned_bins(profile: str) -> list[tuple[int, bool]]:
    """``(d/H, random labels)`` of every run the profile's head_width sweep plans."""
    return [(int(config["model"]["init_args"]["d_model"]) // int(config["model"]["init_args"]["n_heads"]),
             bool(config["data"]["init_args"].get("random_labels", False)))
            for config in planned_configs("head_width.yaml", profile)]


def run_table(records: list[dict]) -> list[dict]:
    """Per run, in the records' order: H, d/H, labels, seed, precision, t_grok, the peak check
    of its sigma_H over epochs > 100 (its ``peak`` is the paper's amplitude statistic) under the
    released reading and the alternatives (:data:`ALTERNATIVE_READINGS`), and the mean sigma_H
    over its last 500 epochs."""
    runs = []
    for r in records:
        m = r["config"]["model"]
        epochs, sigma = sigma_h_curve(r["history"], "released")
        late = (epochs > np.nanmax(epochs) - 500) & np.isfinite(sigma)
        runs.append({"n_heads": m["n_heads"], "d_head": m["d_model"] // m["n_heads"], "seed": r["config"]["seed"],
                     "random_labels": bool(r["config"]["data"].get("random_labels")),
                     "precision": r["config"].get("precision") or "32-true", "horizon": int(np.nanmax(epochs)),
                     "grok_epoch": r.get("grok_epoch"), "peak": peak_check(epochs, sigma, lo=AFTER).to_dict(),
                     **{f"{k}_peak": peak_check(*sigma_h_curve(r["history"], k), lo=AFTER).to_dict()
                        for k in ALTERNATIVE_READINGS},
                     "after_mean": _mean_over(epochs, sigma, AFTER, np.inf),
                     "tail_mean": _mean_over(epochs, sigma, np.nanmax(epochs) * (1 - TAIL_FRACTION), np.inf),
                     "late_mean": float(np.mean(sigma[late])) if late.any() else None})
    return runs


def _mean_over(epochs: np.ndarray, values: np.ndarray, lo: float, hi: float) -> float | None:
    inside = (epochs > lo) & (epochs <= hi) & np.isfinite(values)
    return float(np.mean(values[inside])) if inside.any() else None


def run_markdown(runs: list[dict]) -> str:
    """The per-run table as markdown: is each run's scored maximum a peak?"""
    f = (lambda v: "-" if v is None or not np.isfinite(v) else f"{v:.3f}")
    paper = dict(zip(PAPER_VALUES["dh"], PAPER_VALUES["peak"]))
    lines = ["# Fig. 4 runs: is the scored maximum a peak?", "",
             f"Peak = maximum of sigma_H over epochs > {AFTER} (the paper's statistic); it stands out when it passes "
             "stats/validity.py PEAK_RULE, and is on the edge when it is the first or last evaluation of that range.",
             "", "| H | d/H | labels | seed | precision | epochs | t_grok | peak sigma_H (epoch) | stands out / edge "
                 f"| median after {AFTER} | mean, last 500 epochs | max_layer reading: peak (epoch), stands out "
                 "| pooled reading: peak (epoch), stands out | paper's bin mean |",
             "|---" * 14 + "|"]
    for r in sorted(runs, key=lambda r: (r["random_labels"], r["n_heads"], r["seed"])):
        p = r["peak"]
        lines.append(f"| {r['n_heads']} | {r['d_head']} | {'random' if r['random_labels'] else 'real'} | {r['seed']} | "
                     f"{r['precision']} | {r['horizon']} | {r['grok_epoch'] or '-'} | {f(p['peak'])} ({p['peak_epoch']}) | "
                     f"{p['stands_out']} / {p['on_edge']} | {f(p['median'])} | {f(r['late_mean'])} | "
                     + "".join(f"{f(r[k]['peak'])} ({r[k]['peak_epoch']}), {r[k]['stands_out']} | "
                               for k in ("max_layer_peak", "pooled_peak")) +
                     f"{'-' if r['random_labels'] else f(paper.get(r['d_head']))} |")
    return "\n".join(lines) + "\n"


def analyse(records: list[dict], profile: str, out: Path, n_permutations: int = 10000, planned=(),
            contrasts=()) -> dict:
    """Fits, figures and report rows from the sweep's records (no training here); ``planned``:
    ``(d/H, random labels)`` of every run the sweep plans. While a planned bin has no finished
    run, the comparisons across bins (null test, AIC) are shown in the figure but reported as
    ``not run here``, and each bin's row says how many of its planned runs have finished.
    ``contrasts``: records of the a7 sweep's runs (:mod:`reproduce.targets.a7`), which only the
    a7 rows read, pooled with these: they change a factor Fig. 4 holds fixed, so never its fit."""
    out.mkdir(parents=True, exist_ok=True)
    done = [r for r in records if r["status"] == "completed"]
    runs = run_table(done)
    peaks, dhs, null, unbiased, keys = [], [], [], [], []
    alternative = {reading: ([], []) for reading in ALTERNATIVE_READINGS}  # (real, null) peaks per reading
    for r in runs:
        peak = r["peak"]["peak"]
        if not np.isfinite(peak):
            continue
        keys.append((r["d_head"], r["random_labels"]))
        for reading, (real_peaks, null_peaks) in alternative.items():
            (null_peaks if r["random_labels"] else real_peaks).append(r[f"{reading}_peak"]["peak"])
        if r["random_labels"]:
            null.append(peak)
        else:
            peaks.append(peak)
            unbiased.append(peak * unbiased_std_factor(r["n_heads"]))
            dhs.append(r["d_head"])
    dh, peak, null = np.asarray(dhs, float), np.asarray(peaks, float), np.asarray(null, float)
    unbiased = np.asarray(unbiased, float)
    alternative = {k: (np.asarray(a, float), np.asarray(b, float)) for k, (a, b) in alternative.items()}
    enough = len(set(dhs)) >= 3 and len(dh) >= 4
    fit = fit_saturation_models(dh, peak) if enough else None
    fit_unbiased = fit_saturation_models(dh, unbiased) if enough else None
    true = peak[dh == TRUE_DH]
    perm = permutation_test(true, null, n_permutations=n_permutations).to_dict() if len(true) >= 2 and len(null) >= 2 else None
    d = cohens_d(true, null) if len(true) >= 2 and len(null) >= 2 else None
    d_ci = list(cohens_d_ci(d, len(true), len(null))) if d is not None else None
    info = sweep_summary(done)
    details = (f"{info['text']}\nreal task at d/H = {TRUE_DH}: {np.round(true, 4).tolist()}; null: {np.round(null, 4).tolist()}; "
               f"AIC-best: {fit and fit['best']}\n{describe(_with_every_head_count(done))}")
    per_bin = min((int((dh == b).sum()) for b in set(dhs)), default=0)
    differs = None if profile == "paper" else (
        f"{_shape(done[0])}, H {sorted({int(r['config']['model']['n_heads']) for r in done})}, {info['horizon']} epochs, "
        f">= {per_bin} seeds per bin, null n = {len(null)} (paper: d 128, 4 layers, H 4-64, horizon not stated, n = 44 over widths; its null test 12 real + 15 null)"
        + ("; a pipeline check: 2-vs-2 seeds cannot reach p < 0.05 and 200 epochs end before Phase 2"
           if profile == "smoke" else ""))
    fig = figure_head_width(dh, peak, fit, null, PAPER_VALUES, caption(profile, details, differs, figure="fig4"), unbiased,
                            alternative, TRUE_DH)
    fig.savefig(out / "fig4_head_width.png", dpi=130)
    figure_head_width_curves(done, PAPER_VALUES, caption(profile, details, differs, figure="fig4"), AFTER).savefig(
        out / "fig4_curves.png", dpi=120)
    (out / "fig4_runs.md").write_text(run_markdown(runs))
    invalid = invalid_reason(done)
    peaks_found = "" if invalid else peak_checks(runs)
    note = "smoke: a pipeline check (200 epochs end before Phase 2; too few seeds for p < 0.05)" if profile == "smoke" \
        else join_notes(differs, peaks_found and f"trajectories: {peaks_found} (fig4_runs.md)")
    got = Counter(keys)
    wanted = Counter(planned)
    unrun = sorted(k for k in wanted if got[k] == 0)
    shown = (lambda x: None) if unrun else (lambda x: x)
    progress = f"{sum(got[k] for k in wanted)} of {sum(wanted.values())} planned runs finished" if wanted else ""
    across = join_notes(
        unrun and "not run here yet: no finished run at " + ", ".join(f"d/H {b}{' (null)' if n else ''}" for b, n in unrun),
        progress, note)
    # a permutation p and a pooled sd need two runs on each side; the row says so rather than staying blank
    two_sided = across if perm is not None else join_notes(
        f"needs >= 2 finished runs on each side (real task at d/H {TRUE_DH}: {len(true)}, null: {len(null)})", across)
    # with few runs no split of them can give p < 0.05: such a p is no evidence either way
    floor = permutation_p_floor(len(true), len(null)) if perm is not None else 0.0
    cannot_reject = floor > ALPHA and (
        f"with {len(true)} real and {len(null)} null runs the smallest attainable p is {floor:.3g} > {ALPHA:g}: "
        "the test cannot reject")
    perm_note = two_sided if perm is None else join_notes(
        f"mean difference {perm['obs_diff']:+.4f}, p {perm['p']:.3g} ({perm['n_perm']} permutations)", two_sided)
    horizon = max((r["horizon"] for r in runs), default=None)
    real_runs = [r for r in runs if not r["random_labels"] and r["d_head"] == TRUE_DH]
    null_runs = [r for r in runs if r["random_labels"]]
    rows = [
        claim_row("fig4.null", "random-label null peak sigma_H (mean)", _mean(null), profile, len(null),
                  ours_ci=_t_ci(null), note=_count_note(got, wanted, (TRUE_DH, True), note), invalid=invalid,
                  horizon=horizon),
        claim_row("fig4.true", f"real task (d/H = {TRUE_DH}) peak sigma_H (mean)", _mean(true), profile,
                  len(true), ours_ci=_t_ci(true), note=_count_note(got, wanted, (TRUE_DH, False), note),
                  invalid=invalid, horizon=horizon),
        claim_row("fig4.diff", "real minus null peak sigma_H (Welch 95% CI)",
                  None if perm is None else shown(perm["obs_diff"]), profile, len(true) + len(null),
                  ours_ci=_welch_ci(true, null), null=0.0, note=two_sided, invalid=invalid, horizon=horizon),
        claim_row("fig4.perm_p", "real vs null: permutation p (mean difference)",
                  None if perm is None else shown(perm.get("p")), profile, len(true) + len(null), note=perm_note,
                  invalid=invalid or cannot_reject or None, same_sign=perm is None or perm["obs_diff"] > 0,
                  horizon=horizon),
        claim_row("fig4.d", "real vs null: Cohen's d (exact noncentral-t 95% CI)", shown(d), profile,
                  len(true) + len(null), ours_ci=d_ci, note=two_sided, null=0.0, invalid=invalid, horizon=horizon),
        *[_summary_test_row(claim_id, key, words, real_runs, null_runs, profile, n_permutations, shown, invalid,
                            horizon, two_sided)
          for claim_id, key, words in (("fig4.entropy_std_p", "after_mean", f"mean sigma_H over epochs > {AFTER}"),
                                       ("fig4.tail_drift_p", "tail_mean",
                                        f"mean sigma_H over the last {TAIL_FRACTION:.0%} of the run"))],
        claim_row("fig4.shape", "AIC-preferred d/H model", shown(fit["best"]) if fit else None, profile, len(dh),
                  note=join_notes(None if fit else "not fitted (< 3 bins)",
                                  f"with the unbiased spread: {fit_unbiased['best'] if fit_unbiased else '-'}", across),
                  invalid=invalid, horizon=horizon),
    ]
    for b in sorted({int(x) for x in dhs} | {b for b, n in wanted if not n}):
        inside = dh == b
        rows.append(claim_row(f"fig4.bin_{b}", f"peak sigma_H at d/H = {b} (bin mean, t 95% CI; unbiased spread in the note)",
                              _mean(peak[inside]), profile, int(inside.sum()), ours_ci=_t_ci(peak[inside]),
                              note=_count_note(got, wanted, (b, False), f"unbiased: {_fmt(_mean(unbiased[inside]))}; {note}"),
                              invalid=invalid, horizon=horizon))
    for reading, (real_peaks, null_peaks) in alternative.items():
        rows += _reading_rows(reading, dh, real_peaks, null_peaks, got, wanted, profile, note, invalid, horizon)
    # the author's one-factor contrasts: Fig. 4's runs and the a7 sweep's, which change one factor of its 8-head cell
    rows += a7_rows(unique_runs([*done, *contrasts]), profile, f"Fig. 4 and {CONTRAST_SWEEP}" if contrasts else "Fig. 4")
    summary = {"profile": profile, "dh": dh.tolist(), "peak": peak.tolist(), "peak_unbiased": unbiased.tolist(),
               **{f"peak_{k}": a.tolist() for k, (a, _) in alternative.items()},
               **{f"null_{k}": b.tolist() for k, (_, b) in alternative.items()},
               "null": null.tolist(), "fit": fit, "fit_unbiased": fit_unbiased, "permutation": perm, "cohens_d": d,
               "cohens_d_ci": d_ci,
               "sweep": info, "invalid": invalid, "unrun_bins": [list(k) for k in unrun], "runs": runs}
    write_outputs(out, summary, rows)
    return summary


def _reading_rows(reading, dh, real_peaks, null_peaks, got, wanted, profile, note, invalid, horizon) -> list[dict]:
    """Sensitivity rows: each bin's mean peak and the null's under another reading (``max_layer``:
    the highest per-layer sigma_H; ``pooled``: the spread over all L x H heads; ``sum_layers``: the
    per-layer sigma_H summed). The Fig. 4 cohort is scored by the released reading; these rows are
    listed beside it and never count (docs/sigma_h_readings.md)."""
    rows, where = [], f"sensitivity: the Fig. 4 cohort is scored by the released reading; {note}"
    for b in sorted({int(x) for x in dh[np.isfinite(real_peaks)]}):
        inside = (dh == b) & np.isfinite(real_peaks)
        rows.append(claim_row(f"fig4.bin_{b}", f"peak sigma_H at d/H = {b}, {reading} reading (alternative; bin mean, t 95% CI)",
                              _mean(real_peaks[inside]), profile, int(inside.sum()), ours_ci=_t_ci(real_peaks[inside]),
                              note=_count_note(got, wanted, (b, False), where), invalid=invalid, sensitivity=True,
                              reading=reading, horizon=horizon))
    null_peaks = null_peaks[np.isfinite(null_peaks)]
    if len(null_peaks):
        true = real_peaks[(dh == TRUE_DH) & np.isfinite(real_peaks)]
        gap = f"real d/H {TRUE_DH} minus null: {_mean(true) - _mean(null_peaks):+.4f}" if len(true) else ""
        paper_gap = f"paper {PAPER_VALUES['true']:g} - {PAPER_VALUES['null']:g} = {PAPER_VALUES['true'] - PAPER_VALUES['null']:+.4f}"
        rows.append(claim_row("fig4.null", f"random-label null peak sigma_H (mean), {reading} reading (alternative)",
                              _mean(null_peaks), profile, len(null_peaks), ours_ci=_t_ci(null_peaks),
                              note=_count_note(got, wanted, (TRUE_DH, True), join_notes(gap and f"{gap} ({paper_gap})", where)),
                              invalid=invalid, sensitivity=True, reading=reading, horizon=horizon))
    return rows


#: the a3 field holding the difference behind each published p (its sign is the paper's direction)
A3_DIFFERENCE = {"fig4.entropy_std_p": "entropy_std_perm.obs_diff", "fig4.tail_drift_p": "tail_drift_perm.obs_diff"}


def _summary_test_row(claim_id, key, words, real_runs, null_runs, profile, n_permutations, shown, invalid, horizon,
                      note) -> dict:
    """A permutation test of real (d/H 16) against null runs on another per-run summary of sigma_H
    (the paper's a3 names them 'entropy_std' and 'tail drift' without defining them; ``words`` says
    which summary we test)."""
    real = np.array([r[key] for r in real_runs if r[key] is not None], float)
    null = np.array([r[key] for r in null_runs if r[key] is not None], float)
    test = permutation_test(real, null, n_permutations=n_permutations) if len(real) >= 2 and len(null) >= 2 else None
    floor = permutation_p_floor(len(real), len(null)) if test is not None else 0.0
    return claim_row(claim_id, f"real vs null permutation p, {words}", None if test is None else shown(test.p), profile,
                     len(real) + len(null), invalid=invalid or (floor > ALPHA and f"the smallest attainable p is {floor:.3g}")
                     or None, same_sign=test is None or (test.obs_diff > 0) == (source_value(claim_id, A3_DIFFERENCE[claim_id]) > 0),
                     horizon=horizon,
                     note=join_notes(None if test is None else f"mean difference {test.obs_diff:+.4f}",
                                     f"ours: {words} (the paper does not define its statistic)", note))


def _welch_ci(x: np.ndarray, y: np.ndarray) -> list[float] | None:
    """Welch 95% interval of mean(x) - mean(y) (n >= 2 on each side)."""
    if len(x) < 2 or len(y) < 2:
        return None
    from scipy.stats import ttest_ind

    ci = ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    return [float(ci.low), float(ci.high)]


def _count_note(got: Counter, wanted: Counter, key: tuple[int, bool], note: str) -> str:
    """``k of n planned runs finished`` in front of a bin row's note, when the sweep plans it."""
    head = f"{got[key]} of {wanted[key]} planned runs finished" if wanted[key] else ""
    return join_notes(head, note)


def _t_ci(x: np.ndarray) -> list[float] | None:
    """95% t interval of a bin mean (n >= 2; the paper's bin means are read off a figure, without CIs)."""
    if len(x) < 2:
        return None
    half = float(student_t.ppf(0.975, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x)))
    return [float(np.mean(x)) - half, float(np.mean(x)) + half]


def _with_every_head_count(records: list[dict]) -> dict:
    """The first record with its head count replaced by every count the runs use ('4/32'), for
    a caption that describes all of them."""
    first = copy.deepcopy(records[0])
    first["config"]["model"]["n_heads"] = "/".join(str(h) for h in sorted({r["config"]["model"]["n_heads"] for r in records}))
    return first


def _shape(record: dict) -> str:
    m = record["config"]["model"]
    return f"d {m['d_model']}, {m['n_layers']} layers"


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def _mean(x):
    return float(np.mean(x)) if len(x) else None


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig4"
    # the a7 sweep is read, never trained here: its campaigns train it (configs/campaigns.yaml, a7_*)
    analyse(sweep_records("head_width.yaml", args.profile, out, args.launch)[0], args.profile, out,
            planned=planned_bins(args.profile), contrasts=contrast_records(args.profile, out / "a7" / "sweep"))
    print(f"fig4: {out / 'fig4_head_width.png'}")
    return out


if __name__ == "__main__":
    cli(main)
