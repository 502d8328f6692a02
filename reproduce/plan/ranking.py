"""Campaigns ranked by expected claims decided per CPU-hour, and the cumulative curve.

Pure functions of the campaigns' costs and additions, today's n of each undecided claim and a power
function ``power(claim, n_after) -> P(decided)`` (``None``: no model, counted as 0):

* the value of a set S of campaigns is the expected number of today's undecided claims it decides,
  ``sum over claims fed by S of P(claim, n_S)``, where ``n_S`` is today's n (0 where a campaign of
  S replaces the runs it was read from) plus the runs every campaign of S adds to it;
* the greedy order takes, at each step, the campaign whose value added per CPU-hour is largest
  (a campaign waits for those it comes ``after``); a campaign's "expected decided" is what it adds
  in that order (a second campaign on the same claims adds less than it would alone), with the
  standard deviation of that number: each claim is decided by this step and not before with
  probability ``q = P_after - P_before`` (more runs never undo a decision), variance ``sum q (1 - q)``;
* the curve is the value against the CPU-hours spent, with a band of +-1.96 standard deviations of
  the number decided, the claims taken as independent Bernoulli trials (variance ``sum P (1 - P)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Option", "Step", "band", "greedy", "n_after", "probabilities"]

Z95 = 1.959964


@dataclass(frozen=True)
class Option:
    """A campaign as the ranking sees it."""

    name: str
    cpu_h: float
    adds: dict[str, int]  # claim id -> runs added to its n
    replaces: bool = False
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    name: str
    cpu_h: float
    gain: float  # expected claims decided that this campaign adds, in the greedy order
    gain_sd: float  # ... its standard deviation (module docstring)
    alone: float  # ... and on its own, from today's runs
    fed: int  # undecided claims it feeds
    unmodelled: int  # of those, claims the power function has no model for
    cum_cpu_h: float
    cum_expected: float
    cum_sd: float
    probabilities: dict[str, float] = field(default_factory=dict)  # its claims at the n after this step

    @property
    def per_cpu_h(self) -> float:
        return self.gain / self.cpu_h if self.cpu_h > 0 else (math.inf if self.gain > 0 else 0.0)


def n_after(chosen: list[Option], claim_id: str, base_n: dict[str, int]) -> int:
    """The claim's n once ``chosen`` have run.

    >>> a, b = Option("a", 1.0, {"x": 2}), Option("b", 1.0, {"x": 3}, replaces=True)
    >>> n_after([a], "x", {"x": 5}), n_after([a, b], "x", {"x": 5})
    (7, 5)
    """
    replaced = any(o.replaces and claim_id in o.adds for o in chosen)
    return (0 if replaced else base_n.get(claim_id, 0)) + sum(o.adds.get(claim_id, 0) for o in chosen)


def probabilities(chosen: list[Option], undecided: dict, base_n: dict[str, int],
                  power: Callable) -> dict[str, float | None]:
    """P(decided) of every undecided claim ``chosen`` feed, at the n they reach together."""
    fed = sorted({c for o in chosen for c in o.adds if c in undecided})
    return {c: power(undecided[c], n_after(chosen, c, base_n)) for c in fed}


def _value(probs: dict[str, float | None]) -> tuple[float, float]:
    known = [p for p in probs.values() if p is not None]
    return float(sum(known)), float(sum(p * (1 - p) for p in known))


def greedy(options: list[Option], undecided: dict, base_n: dict[str, int], power: Callable,
           done: tuple[str, ...] = ()) -> list[Step]:
    """Every option in the greedy order (module docstring); ``done``: campaigns already run (their
    runs are in today's n), which count as run for ``after``."""
    chosen: list[Option] = []
    steps: list[Step] = []
    value = 0.0
    spent = 0.0
    remaining = sorted(options, key=lambda o: o.name)
    while remaining:
        ready = set(done) | {o.name for o in chosen}
        eligible = [o for o in remaining if set(o.after) <= ready]
        if not eligible:
            names = ", ".join(f"{o.name} (after {', '.join(o.after)})" for o in remaining)
            raise ValueError(f"campaigns that can never run: {names}")
        best, best_key = None, None
        for option in eligible:
            gain = _value(probabilities(chosen + [option], undecided, base_n, power))[0] - value
            ratio = gain / option.cpu_h if option.cpu_h > 0 else (math.inf if gain > 0 else 0.0)
            key = (round(ratio, 12), round(gain, 12), -option.cpu_h)
            if best_key is None or key > best_key:
                best, best_key = option, key
        before = probabilities(chosen, undecided, base_n, power)
        chosen.append(best)
        remaining.remove(best)
        probs = probabilities(chosen, undecided, base_n, power)
        new_value, variance = _value(probs)
        own = probabilities([best], undecided, base_n, power)
        added = [min(max((probs[c] or 0.0) - (before.get(c) or 0.0), 0.0), 1.0) for c in own]
        spent += best.cpu_h
        steps.append(Step(name=best.name, cpu_h=best.cpu_h, gain=new_value - value,
                          gain_sd=math.sqrt(sum(q * (1 - q) for q in added)), alone=_value(own)[0],
                          fed=len(own), unmodelled=sum(p is None for p in own.values()), cum_cpu_h=spent,
                          cum_expected=new_value, cum_sd=math.sqrt(variance),
                          probabilities={c: probs[c] for c in own}))
        value = new_value
    return steps


def band(step: Step) -> tuple[float, float]:
    """The cumulative curve's 95% band at a step (never below 0).

    >>> s = Step("a", 1.0, 1.0, 0.0, 1.0, 2, 0, 1.0, 1.0, 0.5)
    >>> tuple(round(v, 3) for v in band(s))
    (0.02, 1.98)
    """
    return max(0.0, step.cum_expected - Z95 * step.cum_sd), step.cum_expected + Z95 * step.cum_sd
