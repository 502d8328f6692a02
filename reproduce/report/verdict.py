"""The verdict of a row against its claim: one vocabulary (:class:`Word`), each verdict with its reason.

A claim compared as a number (an estimate, a count, a published sample) is judged in two steps on
the difference D = ours - paper (log(ours / paper) in a family compared as a factor), counting both
sides' uncertainty (:mod:`grok_lightning.stats.equivalence`):

1. **consistent with the paper**: D's 95% interval contains 0. For a count, Fisher's exact test of
   ours against the paper's count does not reject at 5%; for a published sample, the rank test
   against it does not; for a replay of the paper's own deterministic run, the two agree within the
   printed precision; for a value the paper reports from one run, it lies inside the 95%
   prediction interval of our runs of the same configuration (at least :data:`MIN_RUNS`).
2. **equivalent within Delta**: D's 90% interval lies inside -+Delta, the claim family's tolerance
   (two one-sided tests at 5%; for a sample, the Hodges-Lehmann interval of the shift). The
   strongest verdict.

Otherwise **not reproduced** (the 95% interval excludes 0; the test rejects), said to be *beyond
Delta* when that interval lies wholly outside -+Delta and *smaller than Delta* when the 90% interval
lies inside it; **same direction, different size** instead when the row has a no-effect value
(``null``) and ours and the paper's lie on the same side of it, ours excluding it.

The paper's side: its printed interval; else its count (Clopper-Pearson at each level); else its
value -+ the claim's margin (``sampling``: the half-width of its 95% interval; ``precision``: a
bound at every level). Our side: the row's interval rescaled to each level, or our count.

**Inconclusive** only where our side gives no interval of the coverage a verdict needs: an interval
below :data:`MIN_COVERAGE` (the range of 3 runs covers 75% of their median), one run without a
replay, fewer runs than the row's ``min_n``, runs that give no estimate yet. A weak interval still
speaks one way: when it, with the paper's 95% uncertainty, already holds the paper's value, a 95%
interval would too, and the row is consistent (never equivalent or different).

Decisions keep their own words: a **p-value** (``same decision`` when both reject with the same sign
or neither rejects, ``not reproduced`` when ours rejects and the paper's does not, or with the
opposite sign; inconclusive when only the paper's rejects: absence of evidence), an **excluded
value** (``same decision`` when ours excludes it too), a **test** of ours against the paper's counts
(``not reproduced`` when it rejects, else consistent), a **name** (``same decision`` when the same),
an **identity** (``identity holds`` / ``fails`` within the claim's tolerance). Before any of these:
``invalid test`` (the design cannot show the effect) and ``not run here`` (no number of ours, or
runs shorter than the horizon the claim needs). A row without a claim has no verdict (``-``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np

from grok_lightning.stats.equivalence import (
    Count,
    Estimate,
    difference,
    exact,
    inside,
    mean_of_runs,
    one_run,
    shift_interval,
)
from grok_lightning.stats.samples import fisher_counts, rank_test
from reproduce.report.claims import Claim, claim
from reproduce.report.rows import Row
from reproduce.report.sources import claim_sample

__all__ = ["ALPHA", "MIN_COVERAGE", "MIN_RUNS", "VERDICTS", "Verdict", "Word", "judge", "paper_side", "verdict",
           "verdict_class"]

ALPHA = 0.05
#: the least coverage our interval needs to decide anything: equivalence is a 90% interval of D
MIN_COVERAGE = 0.90
#: the fewest runs of ours whose prediction interval judges a value the paper reports from one run
MIN_RUNS = 3


class Word(Enum):
    """The verdict words, strongest agreement first."""

    EQUIVALENT = "equivalent within Delta"
    CONSISTENT = "consistent with the paper"
    SAME_DECISION = "same decision"
    SAME_DIRECTION = "same direction, different size"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    IDENTITY_HOLDS = "identity holds"
    IDENTITY_FAILS = "identity fails"
    INVALID = "invalid test"
    NOT_RUN = "not run here"
    NONE = "-"


VERDICTS = tuple(w.value for w in Word if w is not Word.NONE)
#: the words of a decided comparison (a verdict on the number, not on the runs we have)
DECIDED = frozenset(Word) - {Word.INCONCLUSIVE, Word.NOT_RUN, Word.NONE, Word.INVALID}


@dataclass(frozen=True)
class Verdict:
    word: Word
    reason: str = ""
    qualifier: str = ""  # beyond Delta | smaller than Delta | horizon

    @property
    def label(self) -> str:
        """The word with its qualifier, e.g. 'not reproduced (beyond Delta)'."""
        return self.word.value + (f" ({self.qualifier})" if self.qualifier else "")

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}" if self.reason else self.label


def _g(x: float) -> str:
    return f"{x:.4g}"


def _signed(x: float) -> str:
    return f"{x:+.4g}"


def judge(r: Row, c: Claim | None = None) -> Verdict:
    """The verdict of row ``r`` (module docstring); ``c``: its claim (default: the row's, from the
    table).

    >>> from reproduce.report.rows import Row
    >>> judge(Row("q", 15 / 15, "medium", 15, claim="lock.fire_grok")).label
    'equivalent within Delta'
    >>> judge(Row("q", 0.0, "medium", 5, claim="lock.eta1e-05.test")).label
    'consistent with the paper'
    >>> print(judge(Row("q", 0.0586, "medium", 3, claim="fig4.true", ours_ci=(0.0474, 0.0698))))
    not reproduced (beyond Delta): D = ours - paper = -0.0534, 95% interval [-0.06858, -0.03822] excludes 0; Delta -+0.012
    >>> print(judge(Row("q", 140.0, "medium", 3, claim="fig2.s_bar_init", ours_ci=(130, 150), ci_level=0.75)))
    inconclusive: our 75% interval [130, 150] has less than the 90% coverage a verdict needs
    """
    if r.invalid:
        return Verdict(Word.INVALID, r.invalid)
    if not r.claim:
        return _identity(r.ours, r.expected, r.tolerance, "expected") if r.expected is not None and r.ours is not None \
            else Verdict(Word.NONE)
    c = c or claim(r.claim)
    if r.horizon is not None and c.horizon is not None and r.horizon < c.horizon and not r.horizon_final:
        return Verdict(Word.NOT_RUN, f"ours at {r.horizon:,} epochs, the claim needs {c.horizon:,}", "horizon")
    if r.ours is None:
        if r.no_estimate and r.n > 0:
            return Verdict(Word.INCONCLUSIVE, r.no_estimate)
        return Verdict(Word.NOT_RUN, qualifier=r.not_run)  # "not run here (what it needs)"
    if r.min_n is not None and r.n < r.min_n:
        why = f", {r.min_n_reason}" if r.min_n_reason else ""
        return Verdict(Word.INCONCLUSIVE, f"n = {r.n} is below the {r.min_n} this estimate needs{why}")
    if c.kind == "identity":
        return _identity(r.ours, c.value, c.margin or 0.0, "paper")
    if c.kind == "named":
        return (Verdict(Word.SAME_DECISION, f"the same: {r.ours}") if r.ours == c.text
                else Verdict(Word.NOT_REPRODUCED, f"{r.ours} against the paper's {c.text}"))
    if c.kind == "p-value":
        return _p_value(r, c)
    if c.kind == "test":
        name = r.test_name or "test"
        return (Verdict(Word.NOT_REPRODUCED, f"{name} p = {_g(r.ours)} < {ALPHA:g}") if r.ours < ALPHA
                else Verdict(Word.CONSISTENT, f"{name} against the paper's counts p = {_g(r.ours)} >= {ALPHA:g}"))
    if c.kind == "excludes":
        return _excludes(r, c)
    if c.kind == "sample":
        return _sample(r, c)
    if c.one_run:
        return _one_run(r, c)
    return _difference(r, c)


def verdict(r: dict | Row) -> str:
    """The verdict of a row (a :class:`Row` or its dict) as text: 'word (qualifier): reason'."""
    return str(judge(r if isinstance(r, Row) else Row.from_dict(r)))


def verdict_class(text: str) -> str:
    """The vocabulary word of a verdict's text (``-`` for none).

    >>> verdict_class("not run here (horizon): ours at 1,000 epochs"), verdict_class("inconclusive: n = 3")
    ('not run here', 'inconclusive')
    """
    return next((w for w in sorted(VERDICTS, key=len, reverse=True) if text.startswith(w)), "-")


def _identity(ours, expected, tolerance: float, against: str) -> Verdict:
    gap = abs(float(ours) - float(expected))
    shown = "paper" if against == "paper" else f"{_g(float(expected))} (expected)"
    return (Verdict(Word.IDENTITY_HOLDS, f"|ours - {shown}| = {gap:.3g} <= {tolerance:.3g}") if gap <= tolerance
            else Verdict(Word.IDENTITY_FAILS, f"|ours - {shown}| = {gap:.3g} > {tolerance:.3g}"))


def _p_value(r: Row, c: Claim) -> Verdict:
    alpha = c.margin or ALPHA
    ours, paper = float(r.ours), float(c.value)
    if ours < alpha and not r.same_sign:
        return Verdict(Word.NOT_REPRODUCED, f"p {_g(ours)} < {alpha:g} with the opposite sign")
    if ours < alpha and paper < alpha:
        return Verdict(Word.SAME_DECISION, f"both p below {alpha:g} with the same sign (ours {_g(ours)}, the paper "
                                           f"{_g(paper)})")
    if ours < alpha:
        return Verdict(Word.NOT_REPRODUCED, f"ours p {_g(ours)} < {alpha:g}, the paper's {_g(paper)} is not")
    if paper >= alpha:
        return Verdict(Word.SAME_DECISION, f"neither p below {alpha:g} (ours {_g(ours)}, the paper {_g(paper)})")
    return Verdict(Word.INCONCLUSIVE, f"our p {_g(ours)} is not below {alpha:g} (the paper's {_g(paper)}); a p above "
                                      "alpha is no evidence of no effect")


def _our_interval(r: Row) -> tuple[Estimate | None, str, bool]:
    """Our side from the row's interval, what to call it, and whether it covers less than
    :data:`MIN_COVERAGE` (then it is a bound at its own coverage, never rescaled up)."""
    if r.ours_ci is None:
        return None, f"no interval from n = {r.n}", False
    lo, hi = r.ours_ci
    shown = f"our {r.ci_level:.0%} interval [{_g(lo)}, {_g(hi)}]"
    # a percentile interval may miss its own estimate: widen it to hold it rather than move it
    lo, hi = min(lo, float(r.ours)), max(hi, float(r.ours))
    if r.ci_level < MIN_COVERAGE:
        return Estimate(float(r.ours), lo, hi, 1.0), shown, True
    return Estimate(float(r.ours), lo, hi, r.ci_level), shown, False


def _excludes(r: Row, c: Claim) -> Verdict:
    ours, why, weak = _our_interval(r)
    if ours is None or weak:
        return Verdict(Word.INCONCLUSIVE, why if ours is None else f"{why} has less than the {MIN_COVERAGE:.0%} "
                                                                   "coverage a verdict needs")
    lo, hi = ours.interval(0.95)
    value = float(c.value)
    shown = f"our 95% interval [{_g(lo)}, {_g(hi)}]"
    if value < lo or hi < value:
        return Verdict(Word.SAME_DECISION, f"{shown} excludes {_g(value)}")
    return Verdict(Word.INCONCLUSIVE, f"{shown} contains {_g(value)}")


def paper_side(c: Claim, replay: bool = False) -> Estimate | Count:
    """The paper's value with its uncertainty (module docstring); against a ``replay`` of its own
    run, the printed value up to its precision (the claim's margin when that is a precision)."""
    if replay:
        return exact(float(c.value), c.margin if c.margin_from == "precision" else c.rounding)
    if c.count:
        return Count(*c.count, exact=True)
    value = float(c.value)
    if c.ci:
        return Estimate(value, min(c.ci[0], value), max(c.ci[1], value), 0.95)
    if c.margin_from == "precision":
        return exact(value, c.margin or 0.0)
    return Estimate(value, value - (c.margin or 0.0), value + (c.margin or 0.0), 0.95)


def _our_side(r: Row, c: Claim) -> tuple[Estimate | Count | None, str, bool]:
    if c.kind == "fraction":
        k = float(r.ours) * r.n
        if r.n < 1 or abs(k - round(k)) > 1e-6:
            raise ValueError(f"row {r.quantity!r}: a fraction claim ({c.id}) needs a count k/n, got {r.ours} of {r.n}")
        return Count(int(round(k)), r.n, exact=True), f"ours {int(round(k))}/{r.n}", False
    if r.replay:
        return exact(float(r.ours)), f"our replay ({_g(float(r.ours))})", False
    return _our_interval(r)


def _scale(d: float, c: Claim) -> str:
    return f"ours / paper = x{math.exp(d):.4g}" if c.factor else f"ours - paper = {_signed(d)}"


def _bounds(lo: float, hi: float, c: Claim) -> str:
    return f"[{_g(math.exp(lo))}, {_g(math.exp(hi))}]" if c.factor else f"[{_g(lo)}, {_g(hi)}]"


def _tolerance(c: Claim) -> str:
    return f"Delta x{c.delta:g}" if c.factor else f"Delta -+{c.delta:g}"


def _decide(c: Claim, d: float, d95: tuple[float, float], d90: tuple[float, float], rejects: bool | None,
            test: str, null_side: bool) -> Verdict:
    """Steps 1 and 2 on D (module docstring); ``rejects``: a test's decision, when the row has one
    (else D's 95% interval decides); ``null_side``: a difference keeps the paper's direction."""
    delta = math.log(c.delta) if c.factor else c.delta
    shown = f"D = {_scale(d, c)}, 95% interval {_bounds(*d95, c)}"
    differs = (d95[0] > 0 or d95[1] < 0) if rejects is None else rejects
    if differs:
        qualifier = ("beyond Delta" if d95[0] > delta or d95[1] < -delta
                     else "smaller than Delta" if inside(d90, delta) else "")
        why = f"{test}; {shown}" if test else f"{shown} excludes {'1' if c.factor else '0'}"
        return Verdict(Word.SAME_DIRECTION if null_side else Word.NOT_REPRODUCED, f"{why}; {_tolerance(c)}", qualifier)
    head = f"{test}; " if test else ""
    if inside(d90, delta):
        return Verdict(Word.EQUIVALENT, f"{head}D = {_scale(d, c)}, 90% interval {_bounds(*d90, c)} within {_tolerance(c)}")
    return Verdict(Word.CONSISTENT, f"{head}{shown}{'' if test else ' contains ' + ('1' if c.factor else '0')}; its "
                                    f"90% interval {_bounds(*d90, c)} reaches past {_tolerance(c)}: equivalence not "
                                    "shown at this n")


def _difference(r: Row, c: Claim) -> Verdict:
    ours, why, weak = _our_side(r, c)
    if ours is None:
        return Verdict(Word.INCONCLUSIVE, why)
    paper = paper_side(c, replay=bool(r.replay) and c.one_run)
    if c.factor and (ours.estimate <= 0 or paper.estimate <= 0):
        raise ValueError(f"claim {c.id}: family {c.family} is compared as a factor, but ours is {ours.estimate}")
    if weak:  # too weak to decide a size; but if it already holds the paper's value, a 95% interval would too
        d, *d_weak = difference(ours, paper, 0.95, log=c.factor)
        if d_weak[0] <= 0 <= d_weak[1]:
            return Verdict(Word.CONSISTENT, f"{why} with the paper's 95% uncertainty already holds the paper's value "
                                            f"(D = {_scale(d, c)}, {_bounds(*d_weak, c)}), so a 95% interval would "
                                            f"too; equivalence or a difference needs a {MIN_COVERAGE:.0%} interval")
        return Verdict(Word.INCONCLUSIVE, f"{why} has less than the {MIN_COVERAGE:.0%} coverage a verdict needs")
    d, *d95 = difference(ours, paper, 0.95, log=c.factor)
    _, *d90 = difference(ours, paper, 0.90, log=c.factor)
    rejects, test = None, ""
    if isinstance(ours, Count) and isinstance(paper, Count):
        p = _fisher(ours.k, ours.n, paper.k, paper.n)
        rejects, test = p < ALPHA, f"{why}, the paper {paper.k}/{paper.n}: Fisher exact p = {_g(p)}"
    null_side = False
    if r.null is not None:
        lo, hi = ours.interval(0.95)
        null_side = (ours.estimate - r.null) * (float(c.value) - r.null) > 0 and not lo <= r.null <= hi
    return _decide(c, d, tuple(d95), tuple(d90), rejects, test, null_side)


@lru_cache(maxsize=65536)
def _fisher(k: int, n: int, paper_k: int, paper_n: int) -> float:
    return fisher_counts(k, n, paper_k, paper_n)


def _sample(r: Row, c: Claim) -> Verdict:
    """Ours against the paper's published sample: the rank test decides a difference, the
    Hodges-Lehmann interval of the shift equivalence."""
    sample = [float(v) for v in claim_sample(c.id)]
    p = r.test_p
    if p is None and len(r.runs) >= 1:
        p = rank_test(r.runs, sample).p
    if p is None:
        return Verdict(Word.INCONCLUSIVE, f"no test of our {r.n} run(s) against the paper's sample")
    test = f"{r.test_name or 'rank test'} against the paper's sample p = {_g(p)}"
    shift95 = shift_interval(r.runs, sample, 0.95, log=c.factor) if r.runs else None
    shift90 = shift_interval(r.runs, sample, 0.90, log=c.factor) if r.runs else None
    if shift95 is None or shift90 is None:  # too few runs for a shift interval: the test alone decides
        if p < ALPHA:
            return Verdict(Word.NOT_REPRODUCED, test)
        return Verdict(Word.CONSISTENT, f"{test}; too few runs for an interval of the shift: equivalence not shown")
    return _decide(c, shift95[0], shift95[1:3], shift90[1:3], p < ALPHA, test, False)


def _one_run(r: Row, c: Claim) -> Verdict:
    """A value the paper reports from one run: a replay decides by equality within the printed
    precision, else the prediction interval of at least :data:`MIN_RUNS` runs of ours."""
    if r.replay:
        return _difference(r, c)
    runs = np.asarray(r.runs, float)
    if runs.size < MIN_RUNS:
        return Verdict(Word.INCONCLUSIVE, f"the paper's value is one run; {runs.size or 'no'} run(s) of ours of the same "
                                          f"configuration, and a prediction interval needs {MIN_RUNS}")
    value, bound = float(c.value), c.rounding
    if c.factor:  # compare logs: the spread of a ratio is multiplicative
        if (runs <= 0).any() or value <= 0:
            raise ValueError(f"claim {c.id}: family {c.family} is compared as a factor, but a run is <= 0")
        runs, bound, value = np.log(runs), math.log1p(bound / value), math.log(value)
    ours, paper = mean_of_runs(runs), one_run(value, runs, bound)
    d, *d95 = difference(ours, paper, 0.95)
    _, *d90 = difference(ours, paper, 0.90)
    verdict_ = _decide(c, d, tuple(d95), tuple(d90), None, "", False)
    inside95 = d95[0] <= 0 <= d95[1]
    where = (f"the paper's {c.text} lies {'inside' if inside95 else 'outside'} the 95% prediction interval of our "
             f"{runs.size} runs")
    return Verdict(verdict_.word, f"{where}; {verdict_.reason}", verdict_.qualifier)
