"""P(a claim is decided at n runs): the power the ranking needs, as an injected function.

The ranking takes any :class:`Power`, ``power(claim, n_after) -> probability`` (``None``: no model
for that claim, counted as 0 and said so), so it is tested with a synthetic one. The shipped one,
:func:`rule_power`, is the report's verdict rule simulated by :func:`reproduce.report.oc.decided_at`
on replicates of the row each target builds, at ``n_after`` runs:

* where our row has an estimate and a per-run spread at the claim's horizon, the runs are drawn
  around our estimate with our spread (a count: binomial at our fraction); elsewhere (no row, a
  row of runs shorter than the claim's horizon, one run of ours) as a faithful replicate of the
  paper, the truth drawn from the paper's own uncertainty;
* a value the paper reports from one run is judged by the prediction interval of our runs, which
  needs at least 3 (fewer decide nothing);
* a p-value is decided when ours rejects wherever the paper's does: the power of its test.

The same call gives a report row its "about N runs would decide it", so the planner and the report
agree on every claim. Deterministic (one seeded generator per claim and n) and cached per
(claim, n): the greedy order asks the same question many times.
"""

from __future__ import annotations

from typing import Callable, Protocol

from reproduce.report import Claim, Row
from reproduce.report.oc import REPS, decided_at

__all__ = ["UNDECIDED", "Power", "decided", "field", "row_n", "rule_power"]

#: the verdict words that leave a claim undecided
UNDECIDED = ("inconclusive", "not run here")


class Power(Protocol):
    def __call__(self, claim: Claim, n_after: int) -> float | None: ...


def decided(verdict) -> bool:
    """Whether a verdict (its text) decides its claim: anything but inconclusive and not run here."""
    return not str(verdict).startswith(UNDECIDED)


def field(obj, name: str):
    """A field of a report entry or row, a mapping or an object with attributes."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def row_n(row, claim: Claim) -> int:
    """Today's n of a claim: the runs of its row, 0 where they end before the claim's horizon (a
    shorter run says nothing about it)."""
    if row is None:
        return 0
    horizon, needed = field(row, "horizon"), claim.horizon
    at_horizon = horizon is None or needed is None or horizon >= needed or bool(field(row, "horizon_final"))
    return int(field(row, "n") or 0) if at_horizon else 0


def rule_power(entries, reps: int | None = None) -> Callable[[Claim, int], float]:
    """The report's verdict rule, simulated from what today's rows know (module docstring);
    ``entries`` are :func:`reproduce.report.claim_verdicts`' (today's row of each claim), ``reps``
    the replicates per (claim, n) (default: the report's, :data:`reproduce.report.oc.REPS`)."""
    reps = REPS if reps is None else reps
    rows = {field(e, "claim").id: field(e, "row") for e in entries if isinstance(field(e, "row"), Row)}
    cache: dict[tuple[str, int], float] = {}

    def power(claim: Claim, n_after: int) -> float:
        key = (claim.id, int(n_after))
        if key not in cache:
            cache[key] = decided_at(claim, int(n_after), rows.get(claim.id), reps=reps) if n_after >= 1 else 0.0
        return cache[key]

    return power
