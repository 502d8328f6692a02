"""One verdict vocabulary for the report, the README and the figures (:data:`VERDICTS`), each
verdict followed by its reason after a colon.

A row scored against a claim of ``reference/claims.csv`` (``claims.claim_row``) carries the
claim's kind, value, interval and margin; the verdict follows from the row alone:

* ``invalid test``: the design cannot show the effect (``invalid`` says why).
* ``not run here``: no number of ours (with the row's ``not_run`` reason in brackets, e.g. the
  measured compute it would need); ``not run here (horizon)``: our runs end before the epoch the
  claim needs, unless the row says why its number is already final there (``horizon_final``,
  e.g. every run grokked before our horizon: a grok epoch is a first crossing, the same at any
  later horizon). Runs that are there but give no estimate yet (``no_estimate`` says why, e.g. every
  run grokked, so a lambda_c fit has no edge) are ``inconclusive: too few runs``.
* an **estimate, fraction or published sample** is judged by equivalence
  (:mod:`grok_lightning.stats.equivalence`): ``matches the paper in number`` when our interval
  lies inside the paper's value -+ the claim's margin; a difference when our interval excludes
  the value (the reason says so when it still reaches into the margin's band: a gap that may be
  smaller than the margin; an interval covering less than :data:`MIN_COVERAGE` decides neither), or, where the
  row tests us against the paper's published counts or sample
  (``test_p``: Fisher, Mann-Whitney), when that test rejects at 0.05: ``same direction,
  different size`` when ours and the paper's lie on the same side of the row's no-effect value
  (``null``) with our interval excluding it, else ``not reproduced``; otherwise ``inconclusive:
  too few runs``, with the number of runs that would decide it at the observed spread. One run
  has no interval: it is compared as a point only with a claim that is one run too, and only when
  that comparison can mean something: the claim's margin is a run-to-run spread
  (``margin_from``: ``seed spread``), or our run replays the paper's (``replay``: the same
  deterministic computation, seed and data order, so any gap is a real difference). Otherwise,
  with a margin of printed precision, one run against one run is ``inconclusive: too few runs``
  whichever way it falls.
* a **p-value** (or a test of counts) by its decision at alpha: ``same decision`` when both reject
  with the same sign, ``not reproduced`` when the decisions or signs differ with ours rejecting,
  ``inconclusive: too few runs`` when ours does not reject (absence of evidence).
* an **excluded value** (the paper's interval excludes it): ``same decision`` when ours excludes
  it too, else ``inconclusive: too few runs``.
* a row with ``min_n`` (an estimate not scored below that many runs, e.g. a paired Cohen's d
  below :data:`grok_lightning.stats.significance.MIN_PAIRS_COHEN_D` pairs): ``inconclusive: too
  few runs`` below it, whatever its interval, with ``min_n_reason``.
* an **arithmetic identity**: ``identity holds`` / ``identity fails`` within the claim's margin.
* a **named** outcome: ``matches the paper in number`` when the same, else ``not reproduced``.

A row without a claim has no verdict (``-``): context, not a comparison.
"""

from __future__ import annotations

import math

from grok_lightning.stats.equivalence import equivalence, runs_to_decide, runs_to_decide_fraction

__all__ = ["ALPHA", "MIN_COVERAGE", "VERDICTS", "verdict", "verdict_class"]

#: the least coverage an interval needs to decide a row either way: equivalence by two one-sided
#: tests at 5% each is a 90% interval inside the margin; an interval of lower coverage (the range
#: of 3 runs covers 75% of their median) decides nothing at the levels the report uses. 5 runs'
#: range covers 93.75%, the most an interval of 5 runs' median can.
MIN_COVERAGE = 0.90
VERDICTS = ("matches the paper in number", "same decision", "same direction, different size", "not reproduced",
            "inconclusive: too few runs", "identity holds", "identity fails", "invalid test", "not run here")
ALPHA = 0.05


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _interval(ci) -> list[float] | None:
    return [float(v) for v in ci] if ci is not None and len(ci) == 2 and all(_finite(v) for v in ci) else None


def _g(x: float) -> str:
    return f"{x:.4g}"


def _level(r: dict) -> str:
    level = r.get("ci_level")
    return f"{level:.0%} interval" if _finite(level) and abs(level - 0.95) > 0.005 else "95% interval"


def _undercovered(r: dict) -> str:
    """Why the row's interval is too weak to decide anything ('' when it is not)."""
    level = r.get("ci_level")
    if not _finite(level) or level >= MIN_COVERAGE:
        return ""
    return f"has less than the {MIN_COVERAGE:.0%} coverage a verdict needs"


def verdict(r: dict) -> str:
    """The row's verdict and its reason (module docstring).

    >>> from reproduce.report import row
    >>> c = dict(claim="x", kind="estimate", margin=0.0049, paper_n=210)
    >>> verdict({**row("p", "q", 0.0158, 0.016, "medium", 20, ours_ci=[0.012, 0.020]), **c})
    'matches the paper in number: our 95% interval [0.012, 0.02] lies within 0.0158 +- 0.0049'
    >>> verdict({**row("p", "q", 0.0158, 0.0246, "medium", 20, ours_ci=[0.0141, 0.0551]), **c}).split(";")[0]
    'inconclusive: too few runs: our 95% interval [0.0141, 0.0551] is wider than 0.0158 +- 0.0049'
    >>> verdict({**row("p", "q", 2136, 2348, "medium", 8, ours_ci=[2089, 2606]), **c, "margin": 420}).split(";")[0]
    'inconclusive: too few runs: our 95% interval [2089, 2606] does not exclude 2136 and reaches past 2136 +- 420'
    >>> verdict({**row("p", "q", 0.113, 0.059, "medium", 3, ours_ci=[0.047, 0.070], null=0), **c, "margin": 0.017})
    'same direction, different size: our 95% interval [0.047, 0.07] excludes 0.113'
    >>> verdict({**row("p", "q", 2.3, 2.19, "medium", 5, ours_ci=[2.099, 2.280]), **c, "margin": 0.05}).split(": ", 1)
    ['not reproduced', 'our 95% interval [2.099, 2.28] excludes 2.3 but reaches into 2.3 +- 0.05: the gap may be smaller than the margin']
    >>> verdict({**row("p", "q", 130, 140, "medium", 3, ours_ci=[130, 140], ci_level=0.75), **c, "margin": 10})
    'inconclusive: too few runs: our 75% interval [130, 140] has less than the 90% coverage a verdict needs'
    >>> one = dict(c, paper_n=1, margin=0.005, margin_from="precision")
    >>> verdict({**row("p", "q", 0.48, 0.26, "medium", 1), **one}).split(" (")[0]
    'inconclusive: too few runs: one run on each side'
    >>> verdict({**row("p", "q", 0.48, 0.26, "medium", 1), **one, "replay": "same seed and code"})
    "not reproduced: our replay of the paper's run (0.26) excludes 0.48"
    >>> verdict({**row("p", "q", 0.46, 1.0, "medium", 1), **c, "horizon": 1000, "horizon_needed": 20000})
    'not run here (horizon): ours at 1,000 epochs, the claim needs 20,000'
    >>> verdict({**row("p", "q", 0.46, 0.46, "medium", 5, ours_ci=[0.458, 0.462]), **c, "horizon": 1000,
    ...          "horizon_needed": 20000, "horizon_final": "every run grokked by epoch 300"}).split(":")[0]
    'matches the paper in number'
    >>> verdict({**row("p", "q", 0.0511, None, "medium", 0, not_run="compute: 86 CPU-h measured"), **c})
    'not run here (compute: 86 CPU-h measured)'
    >>> verdict({**row("p", "q", 0.0511, None, "medium", 4, no_estimate="4/4 grokked, no edge to fit"), **c})
    'inconclusive: too few runs: 4/4 grokked, no edge to fit'
    >>> verdict({**row("p", "q", -1.19, 1.008, "medium", 2, ours_ci=[-0.90, 2.76], null=0, min_n=4), **c, "margin": 0.84})
    'inconclusive: too few runs: n = 2 is below the 4 this estimate needs'
    >>> verdict({**row("p", "q", 2.56e-7, 3e-16, "medium", 12), **c, "kind": "identity", "margin": 1e-5})
    'identity holds: |ours - paper| = 2.56e-07 <= 1e-05'
    >>> verdict({**row("p", "q", 0.0094, 0.018, "medium", 8, null=0), **c, "kind": "p-value", "margin": 0.05})
    'same decision: both p below 0.05 with the same sign (ours 0.018, the paper 0.0094)'
    """
    if r.get("invalid"):
        return f"invalid test: {r['invalid']}"
    ours, paper = r.get("ours"), r.get("paper_value")
    kind = r.get("kind")
    if _finite(r.get("horizon")) and _finite(r.get("horizon_needed")) and r["horizon"] < r["horizon_needed"] \
            and not r.get("horizon_final"):
        return f"not run here (horizon): ours at {r['horizon']:,} epochs, the claim needs {r['horizon_needed']:,}"
    if ours is None and r.get("no_estimate") and int(r.get("n") or 0) > 0:
        return f"inconclusive: too few runs: {r['no_estimate']}"
    if ours is None or (isinstance(ours, float) and not math.isfinite(ours)):
        return f"not run here ({r['not_run']})" if r.get("not_run") else "not run here"
    if r.get("claim") and _finite(r.get("min_n")) and int(r.get("n") or 0) < r["min_n"]:
        why = f", {r['min_n_reason']}" if r.get("min_n_reason") else ""
        return f"inconclusive: too few runs: n = {int(r.get('n') or 0)} is below the {int(r['min_n'])} this estimate needs{why}"
    if kind == "identity":
        expected = paper if _finite(paper) else r.get("expected")
        gap = abs(float(ours) - float(expected))
        tol = r.get("margin") or 0.0
        against = "paper" if _finite(paper) else f"{_g(float(expected))} (expected)"
        return (f"identity holds: |ours - {against}| = {gap:.3g} <= {tol:.3g}" if gap <= tol
                else f"identity fails: |ours - {against}| = {gap:.3g} > {tol:.3g}")
    if not r.get("claim") or paper is None:
        return "-"
    if kind == "named":
        return ("matches the paper in number: the same" if ours == paper
                else f"not reproduced: {ours} against the paper's {paper}")
    if kind in ("p-value", "test"):
        return _decision(r, float(ours), paper)
    if kind == "excludes":
        return _excludes(r, float(paper))
    return _equivalence(r, float(ours), float(paper))


def _decision(r: dict, ours: float, paper) -> str:
    alpha = r.get("margin") or ALPHA
    same_sign = r.get("same_sign", True)
    ours_rejects = ours < alpha
    if r.get("kind") == "test":  # a test of us against the paper's counts: rejecting is a difference
        name = r.get("test_name", "test")
        if ours_rejects:
            return f"not reproduced: {name} p = {_g(ours)} < {alpha:g}"
        return f"inconclusive: too few runs: {name} p = {_g(ours)} >= {alpha:g}"
    paper_rejects = float(paper) < alpha
    if ours_rejects and not same_sign:
        return f"not reproduced: p {_g(ours)} < {alpha:g} with the opposite sign"
    if ours_rejects and paper_rejects:
        return f"same decision: both p below {alpha:g} with the same sign (ours {_g(ours)}, the paper {_g(float(paper))})"
    if ours_rejects:
        return f"not reproduced: ours p {_g(ours)} < {alpha:g}, the paper's {_g(float(paper))} is not"
    return (f"inconclusive: too few runs: our p {_g(ours)} is not below {alpha:g} (the paper's "
            f"{_g(float(paper))}); a p above alpha is no evidence of no effect")


def _excludes(r: dict, value: float) -> str:
    ci = _interval(r.get("ours_ci"))
    if ci is None:
        return "inconclusive: too few runs: no interval"
    weak = _undercovered(r)
    if (value < ci[0] or ci[1] < value) and not weak:
        return f"same decision: our {_level(r)} [{_g(ci[0])}, {_g(ci[1])}] excludes {_g(value)}"
    if weak:
        return f"inconclusive: too few runs: our {_level(r)} [{_g(ci[0])}, {_g(ci[1])}] {weak}"
    need = runs_to_decide(int(r.get("n") or 1), ci, float(r["ours"]), value, 0.0)
    more = f"; about {need} runs would exclude it at this spread" if need else ""
    return f"inconclusive: too few runs: our {_level(r)} [{_g(ci[0])}, {_g(ci[1])}] contains {_g(value)}{more}"


def _equivalence(r: dict, ours: float, paper: float) -> str:
    margin = r.get("margin")
    ci = _interval(r.get("ours_ci"))
    single = ci is None and int(r.get("n") or 0) <= 1 and r.get("paper_n") == 1
    if single and not (r.get("replay") or r.get("margin_from") == "seed spread"):
        return (f"inconclusive: too few runs: one run on each side ({_g(ours)} against {_g(paper)}), a margin "
                f"(+- {_g(margin)}) that measures precision, not run-to-run spread, and a run that does not replay "
                "the paper's: a gap cannot be told from seed noise, nor agreement from luck")
    if single:
        ci = [ours, ours]
    if ci is None or not _finite(margin):
        return f"inconclusive: too few runs: no interval from n = {r.get('n')}"
    one_run = "our replay of the paper's run" if r.get("replay") else "one run on each side"
    shown = f"{one_run} ({_g(ours)})" if single else f"our {_level(r)} [{_g(ci[0])}, {_g(ci[1])}]"
    outcome = equivalence(ci, paper, margin)
    weak = "" if single else _undercovered(r)
    test_p, name = r.get("test_p"), r.get("test_name", "test")
    if outcome == "equivalent" and not weak:
        return f"matches the paper in number: {shown} lies within {_g(paper)} +- {_g(margin)}"
    if _finite(test_p):
        against = "count" if r.get("kind") == "fraction" else "sample"
        differs, why = test_p < ALPHA, f"{name} against the paper's {against} p = {_g(test_p)}"
    else:
        differs, why = outcome == "different" and not weak, f"{shown} excludes {_g(paper)}"
        if ci[0] < paper + margin and paper - margin < ci[1]:  # said, so no reader takes it for more
            why += f" but reaches into {_g(paper)} +- {_g(margin)}: the gap may be smaller than the margin"
    if differs:
        null = r.get("null")
        same = _finite(null) and (ours - null) * (paper - null) > 0 and not ci[0] <= null <= ci[1] and not weak
        return f"{'same direction, different size' if same else 'not reproduced'}: {why}"
    if single:
        return f"inconclusive: too few runs: one run on each side, {_g(ours)} outside {_g(paper)} +- {_g(margin)}"
    if weak:
        tested = f" ({why})" if _finite(test_p) else ""
        return f"inconclusive: too few runs: {shown} {weak}{tested}"
    count = str(r.get("paper_text", ""))
    if r.get("kind") == "fraction" and "/" in count:  # lopsided intervals near 0 and 1: count, do not scale
        need = runs_to_decide_fraction(ours, *(int(v) for v in count.split("/")), margin)
        more = (f"; {need} runs at this fraction would decide it" if need else
                "; no number of runs at this fraction decides it against the paper's count")
    else:
        need = runs_to_decide(max(int(r.get("n") or 1), 1), ci, ours, paper, margin)
        more = "" if not need else (f"; about {need} runs would decide it at this spread" if need <= 1000 else
                                    "; more than 1,000 runs would be needed at this spread")
    tested = f" ({why})" if _finite(test_p) else ""
    # An interval narrower than the margin's band can still straddle its edge: say which case it is
    # (a row with its own test can be undecided by that test while its interval excludes the value).
    if ci[1] - ci[0] > 2 * margin:
        where = "is wider than"
    elif ci[0] <= paper <= ci[1]:
        where = f"does not exclude {_g(paper)} and reaches past"
    else:
        where = "reaches past"
    return (f"inconclusive: too few runs: {shown} {where} {_g(paper)} +- {_g(margin)}{tested}{more}")


def verdict_class(text: str) -> str:
    """The vocabulary word of a verdict: its text before the reason (``-`` for none).

    >>> verdict_class("not run here (horizon): ours at 1,000 epochs"), verdict_class("inconclusive: too few runs: n 3")
    ('not run here', 'inconclusive: too few runs')
    """
    for word in sorted(VERDICTS, key=len, reverse=True):
        if text.startswith(word):
            return word
    return "-"
