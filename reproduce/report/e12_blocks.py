"""The generated blocks of docs/e12.md: the medium E12 control group, each pair's outcome and the
contrasts, from ``results/medium/fig8/summary.json`` (written by the Fig. 8 target), beside the
paper's values from the claims table."""

from __future__ import annotations

import json

from reproduce.report.claims import REPO, load_claims

SUMMARY = REPO / "results" / "medium" / "fig8" / "summary.json"
#: the contrasts in the order the doc discusses them, and the variants shown
CONTRASTS = ("B-A", "C-A", "C-B", "P-A", "B-P", "C-P")

__all__ = ["e12_bg", "e12_contrasts", "e12_controls", "e12_pairs"]


def _key(control: dict) -> str:
    """A pair's key in the summary: '7_0.05'."""
    return f"{control['seed']}_{control['wd']:g}"


def _summary() -> dict:
    return json.loads(SUMMARY.read_text())


def e12_controls(facts=None) -> str:
    """Per control seed: grok epoch, min s_bar, the summed peak and its epoch E, whether E precedes
    grokking, the argmax before grokking; the paper's A at lambda 0.05."""
    s, claims = _summary(), load_claims()
    controls = s["controls"]
    pre = s.get("pre_arm", {}).get("E_pre", {})
    head = " | ".join(f"seed {c['seed']}" for c in controls)
    paper = lambda cid: claims[cid].text + (f" -+{claims[cid].margin:g}" if claims[cid].margin else "")
    rows = [("grok epoch", lambda c: f"{c['grok_epoch']:,}", paper("e12.A_grok_ep.0.05") + " (mean)"),
            ("min s_bar after epoch 100", lambda c: f"{c['min_s_bar']:.3f}", paper("e12.A_min_sim.0.05")),
            ("peak sigma_H summed over layers (epoch = E)", lambda c: f"{c['peak_sum_layers']:.3f} ({c['E']:,})",
             paper("e12.A_peak.0.05")),
            ("E before grokking?", lambda c: "yes" if c["E_before_grok"] else "no", "\"typically 1,000-2,000, before grokking\""),
            ("argmax before grokking (`peak_before_grok.ckpt`)",
             lambda c: f"{pre[_key(c)]:,}" if _key(c) in pre else "-", "")]
    lines = [f"| | {head} | paper's A at lambda 0.05 |", "|---|" + "---|" * (len(controls) + 1)]
    for label, cell, theirs in rows:
        lines.append(f"| {label} | " + " | ".join(cell(c) for c in controls) + f" | {theirs} |")
    return "\n".join(lines)


def e12_pairs(facts=None) -> str:
    """Each pair's peak of summed sigma_H on (E, end of run], per group."""
    s = _summary()
    groups = {"A": "A", "B": "B (2 of 8 heads re-initialised)", "P": "P (placebo: another order)", "C": "C (norm clip)"}
    lines = ["| seed | E (A's argmax) | " + " | ".join(groups.values()) + " |", "|---|---|" + "---|" * len(groups)]
    for c in s["controls"]:
        key = _key(c)
        cells = [s["per_pair"].get(g, {}).get(key, {}).get("peak_ent") for g in groups]
        lines.append(f"| {c['seed']} | {c['E']:,} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in cells) + " |")
    return "\n".join(lines)


def _test_row(label: str, t: dict, bonferroni: bool = True) -> str:
    lo, hi = t["ci_95_diff_t"]
    dlo, dhi = t["cohen_d_ci"]
    p_bonf = f"{t['p_bonferroni']:.2g} ({t['family']}'s)" if bonferroni and t.get("p_bonferroni") is not None else "-"
    return (f"| {label} | {t['mean_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] | {t['cohen_d']:.2f} [{dlo:.2f}, {dhi:.2f}] | "
            f"{t['p_value_t']:.2g} | {t['wilcoxon_p']:.2g} | {p_bonf} |")


def e12_contrasts(facts=None) -> str:
    """The six contrasts of the peak (headline reading) and the untouched-heads sensitivity rows."""
    tests = [t for t in _summary()["tests"] if t["outcome"] == "peak_ent"]
    find = lambda contrast, variant: next((t for t in tests if t["contrast"] == contrast and t["variant"] == variant), None)
    n = next((t["n"] for t in tests), 0)
    lines = [f"| contrast ({n} pairs) | mean difference [95% t interval] | Cohen's d [exact 95%] | paired t p | "
             "Wilcoxon p | Bonferroni p (family) |", "|---|---|---|---|---|---|"]
    for contrast in CONTRASTS:
        t = find(contrast, "headline")
        if t is not None:
            lines.append(_test_row(contrast.replace("-", " - "), t))
    for contrast in ("B-A", "B-P"):
        t = find(contrast, "untouched heads")
        if t is not None:
            lines.append(_test_row(f"{contrast.replace('-', ' - ')}, 6 untouched heads per layer", t, bonferroni=False))
    return "\n".join(lines)


def e12_bg(facts=None) -> str:
    """Bg (B at A's argmax before grokking) against A: its start per seed and the paired test."""
    before = _summary()["before_grok"]
    starts = ", ".join(f"seed {key.split('_')[0]} at {e:,}" for key, e in before["E"].items())
    t = next(t for t in before["tests"] if t["contrast"] == "B-A" and t["outcome"] == "peak_ent")
    lo, hi = t["ci_95_diff_t"]
    dlo, dhi = t["cohen_d_ci"]
    return (f"Bg starts {starts}. B - A on its {t['n']} pairs: mean {t['mean_diff']:+.3f}, t interval "
            f"[{lo:+.3f}, {hi:+.3f}], p_t {t['p_value_t']:.2g}, Wilcoxon {t['wilcoxon_p']:.2g}, d {t['cohen_d']:.2f} "
            f"[{dlo:.2f}, {dhi:.2f}].")
