"""Equivalence against a published value: is our interval inside the value -+ a margin stated in
advance (two one-sided tests, TOST), does it exclude the value, or neither?

For a value v, a margin m and our interval [lo, hi] (a 95% interval: TOST at alpha = 0.025 per
side, conservative against the usual 90% interval of alpha = 0.05):

* ``equivalent``: ``v - m <= lo`` and ``hi <= v + m``: the data rule out any difference larger
  than the margin (TOST at the interval's level);
* ``different``: ``v < lo`` or ``hi < v``: the data rule out the published value itself;
* ``undecided``: neither; our interval is too wide for the margin.

Equivalence is checked first: a difference smaller than the margin is, by the margin's
definition, no difference that matters. :func:`runs_to_decide` says how many runs would settle an
undecided comparison, assuming the interval shrinks as 1/sqrt(n) around the same estimate.
"""

from __future__ import annotations

import math

__all__ = ["OUTCOMES", "equivalence", "runs_to_decide", "runs_to_decide_fraction"]

OUTCOMES = ("equivalent", "different", "undecided")


def _check(ci, margin: float) -> tuple[float, float]:
    lo, hi = (float(v) for v in ci)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"interval {ci!r} is not a finite [lo, hi] with lo <= hi")
    if not math.isfinite(margin) or margin < 0:
        raise ValueError(f"margin {margin!r} must be finite and >= 0")
    return lo, hi


def equivalence(ci, value: float, margin: float) -> str:
    """``equivalent`` | ``different`` | ``undecided`` (module docstring).

    >>> equivalence([0.10, 0.12], 0.113, 0.017), equivalence([0.047, 0.070], 0.113, 0.017)
    ('equivalent', 'different')
    >>> equivalence([0.0, 0.56], 0.067, 0.15)
    'undecided'
    """
    lo, hi = _check(ci, margin)
    if value - margin <= lo and hi <= value + margin:
        return "equivalent"
    if value < lo or hi < value:
        return "different"
    return "undecided"


def runs_to_decide(n: int, ci, estimate: float, value: float, margin: float) -> int | None:
    """The number of runs at which an interval of today's shape, shrunk by sqrt(n / n') about the
    same estimate, would decide the comparison: inside the margin when ``|estimate - value| <
    margin`` (the wider side h must shrink to m - |d|: n' = n (h / (m - |d|))^2), else excluding the
    value (the side facing it must shrink below |d|). At least n + 1 when today's n does not decide;
    ``None`` when no n does (the estimate sits exactly on the value with no margin).

    >>> runs_to_decide(3, [0.0, 0.56], 0.0, 0.067, 0.15)  # 0/3 against 2/30, margin 0.15
    137
    >>> runs_to_decide(5, [0.9, 1.1], 1.0, 1.0, 0.05)
    20
    >>> runs_to_decide(3, [0.0375, 0.0534], 0.0515, 0.039, 0.005)  # the side facing 0.039 is 0.014 wide
    4
    """
    lo, hi = _check(ci, margin)
    if n < 1:
        raise ValueError("n must be >= 1")
    gap = abs(estimate - value)
    if gap < margin:
        side, room = max(estimate - lo, hi - estimate), margin - gap
    else:
        side, room = (estimate - lo) if value < estimate else (hi - estimate), gap
    if room <= 0:
        return None
    return max(n + 1, math.ceil(n * (side / room) ** 2 - 1e-9))


def runs_to_decide_fraction(fraction: float, paper_k: int, paper_n: int, margin: float, alpha: float = 0.05,
                            limit: int = 2000) -> int | None:
    """The smallest number of runs n' at which our observed grok fraction, kept (k' = round(fraction
    n')), would decide the comparison with the paper's count: its Wilson 95% interval inside
    paper -+ margin, or Fisher's exact test against the paper's k/n rejecting at ``alpha``. A
    fraction near 0 or 1 has a lopsided interval, so this counts rather than scales. ``None`` when
    no n' up to ``limit`` decides it (the paper's own count may be too small to tell them apart).

    >>> runs_to_decide_fraction(1.0, 25, 30, 0.17), runs_to_decide_fraction(1 / 3, 8, 10, 0.31)
    (8, 12)
    """
    from .intervals import wilson
    from .samples import fisher_counts

    value = paper_k / paper_n
    for n in range(1, limit + 1):
        k = int(round(fraction * n))
        interval = wilson(k, n)
        if value - margin <= interval.lo and interval.hi <= value + margin:
            return n
        if fisher_counts(k, n, paper_k, paper_n) < alpha:
            return n
    return None
