"""Fig. 4: peak sigma_H vs head width d/H, the saturating fit (AIC against linear, log, power), and
the random-label null with a permutation test of the real task against it.

    python -m reproduce.fig4 --profile smoke|medium|paper --out reproduction

sigma_H is the population std over a layer's H heads (the paper's ddof = 0), which reads low at
small H (0.80 sigma at H = 4, 0.95 at H = 16). Every comparison across H is reported twice: as
the paper computes it, and with the unbiased spread (``stats.unbiased_std_factor(H)``, a factor
of H alone, so it applies to the layer mean).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grok_lightning.plots.common import caption
from grok_lightning.plots.interventions import figure_head_width
from grok_lightning.stats import cohens_d, fit_saturation_models, peak_entropy_std, permutation_test
from grok_lightning.stats.significance import unbiased_std_factor
from grok_lightning.stats.validity import peak_check, summarise_checks
from reproduce.common import cli, describe, parse_args, sweep_records, sweep_summary, write_outputs
from reproduce.report import row

PAPER = "2605.20441 Fig. 4"
#: bin means read off the paper's Fig. 4, the null and the permutation test (a3_perm_test.json)
PAPER_VALUES = {"dh": [2, 4, 8, 16, 32], "peak": [0.055, 0.062, 0.086, 0.113, 0.099], "null": 0.087,
                "null_sd": 0.025, "true": 0.112, "perm_p": 0.0094, "d": 1.107}
TRUE_DH = 16  # the real-task arm of the paper's null comparison is the canonical d/H = 16
CHECK_WORDS = {"flat": "peak sigma_H (epochs > 100) does not stand out of its trajectory",
               "edge": "the peak is the first or the last evaluation after epoch 100 (start-up transient or end of run)"}
PAPER_SHAPE = {"d_model": 128, "n_layers": 4}


def invalid_reason(records: list[dict]) -> str | None:
    """Why these runs cannot measure the head-width effect: the peaks they are scored by are not
    peaks (grok_lightning.stats.validity), or the model is not the paper's width and depth, which
    sets the amplitude (the paper's own a7: d = 2.19 between high and low d_model)."""
    checks = []
    for r in records:
        h = r["history"]
        check = peak_check(h["epoch"], h.get("entropy_std", []), lo=100)
        checks.append({"flat": not check.stands_out, "edge": check.on_edge})
    reasons = [summarise_checks(checks, CHECK_WORDS)]
    shapes = {(r["config"]["model"]["d_model"], r["config"]["model"]["n_layers"]) for r in records}
    if shapes != {(PAPER_SHAPE["d_model"], PAPER_SHAPE["n_layers"])}:
        reasons.append(f"model d_model x layers {sorted(shapes)} (paper 128 x 4; the amplitude depends on d_model, "
                       "the paper's own d = 2.19)")
    return "; ".join(r for r in reasons if r) or None


def analyse(records: list[dict], profile: str, out: Path, n_permutations: int = 10000) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    done = [r for r in records if r["status"] == "completed"]
    peaks, dhs, null, unbiased = [], [], [], []
    for r in done:
        peak, _ = peak_entropy_std(r["history"], after_epoch=100)
        if not np.isfinite(peak):
            continue
        m = r["config"]["model"]
        if r["config"]["data"].get("random_labels"):
            null.append(peak)
        else:
            peaks.append(peak)
            unbiased.append(peak * unbiased_std_factor(m["n_heads"]))
            dhs.append(m["d_model"] // m["n_heads"])
    dh, peak, null = np.asarray(dhs, float), np.asarray(peaks, float), np.asarray(null, float)
    unbiased = np.asarray(unbiased, float)
    enough = len(set(dhs)) >= 3 and len(dh) >= 4
    fit = fit_saturation_models(dh, peak) if enough else None
    fit_unbiased = fit_saturation_models(dh, unbiased) if enough else None
    true = peak[dh == TRUE_DH]
    perm = permutation_test(true, null, n_permutations=n_permutations).to_dict() if len(true) >= 2 and len(null) >= 2 else None
    d = cohens_d(true, null) if len(true) >= 2 and len(null) >= 2 else None
    info = sweep_summary(records)
    details = (f"{info['text']}\nreal task at d/H = {TRUE_DH}: {np.round(true, 4).tolist()}; null: {np.round(null, 4).tolist()}; "
               f"AIC-best: {fit and fit['best']}\n{describe(done[0])}")
    per_bin = min((int((dh == b).sum()) for b in set(dhs)), default=0)
    differs = None if profile == "paper" else (
        f"{_shape(done[0])}, H {sorted({int(r['config']['model']['n_heads']) for r in done})}, {info['horizon']} epochs, "
        f">= {per_bin} seeds per bin, null n = {len(null)} (paper: d 128, 4 layers, H 4-64, horizon not stated, n = 44 + 15 null)"
        + ("; a pipeline check: 2-vs-2 seeds cannot reach p < 0.05 and 200 epochs end before Phase 2"
           if profile == "smoke" else ""))
    fig = figure_head_width(dh, peak, fit, null, PAPER_VALUES, caption(profile, details, differs, figure="fig4"), unbiased)
    fig.savefig(out / "fig4_head_width.png", dpi=130)
    note = "smoke: a pipeline check (200 epochs end before Phase 2; too few seeds for p < 0.05)" if profile == "smoke" \
        else (differs or "")
    invalid = invalid_reason(done)
    rows = [
        row(PAPER, "random-label null peak sigma_H (mean)", PAPER_VALUES["null"], _mean(null), profile, len(null), note=note,
            invalid=invalid),
        row(PAPER, f"real task (d/H = {TRUE_DH}) peak sigma_H (mean)", PAPER_VALUES["true"], _mean(true), profile, len(true),
            note=note, invalid=invalid),
        row(PAPER, "real vs null: permutation p (mean difference)", PAPER_VALUES["perm_p"],
            None if perm is None else perm.get("p"), profile, len(true) + len(null), note=note, invalid=invalid),
        row(PAPER, "real vs null: Cohen's d", PAPER_VALUES["d"], d, profile, len(true) + len(null), note=note, null=0.0,
            invalid=invalid),
        row(PAPER, "AIC-preferred d/H model", "saturating_exp", fit["best"] if fit else None, profile, len(dh),
            note=f"{'' if fit else 'not fitted (< 3 bins); '}with the unbiased spread: "
                 f"{fit_unbiased['best'] if fit_unbiased else '-'}; {note}".rstrip("; "), invalid=invalid),
    ]
    for b in sorted(set(dhs)):
        paper_value = dict(zip(PAPER_VALUES["dh"], PAPER_VALUES["peak"])).get(int(b))
        inside = dh == b
        rows.append(row(PAPER, f"peak sigma_H at d/H = {int(b)} (bin mean; unbiased spread in the note)", paper_value,
                        _mean(peak[inside]), profile, int(inside.sum()),
                        note=f"unbiased: {_mean(unbiased[inside]):.4f}; {note}".rstrip("; "), invalid=invalid))
    summary = {"profile": profile, "dh": dh.tolist(), "peak": peak.tolist(), "peak_unbiased": unbiased.tolist(),
               "null": null.tolist(), "fit": fit, "fit_unbiased": fit_unbiased,
               "permutation": perm, "cohens_d": d, "sweep": info, "invalid": invalid}
    write_outputs(out, summary, rows)
    return summary


def _shape(record: dict) -> str:
    m = record["config"]["model"]
    return f"d {m['d_model']}, {m['n_layers']} layers"


def _mean(x):
    return float(np.mean(x)) if len(x) else None


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    out = Path(args.out) / "fig4"
    analyse(sweep_records("head_width.yaml", args.profile, out, args.launch)[0], args.profile, out)
    print(f"fig4: {out / 'fig4_head_width.png'}")
    return out


if __name__ == "__main__":
    cli(main)
