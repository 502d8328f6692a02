"""P(a claim is decided at n runs): the power the ranking needs, as an injected function.

The ranking takes any :class:`Power`, ``power(claim, n_after) -> probability`` (``None``: no model
for that claim, counted as 0 and said so), so it is tested with a synthetic one. The shipped one,
:func:`current_rule_power`, simulates the report's own verdict rule (:func:`reproduce.verdict.verdict`
on rows built as the targets build them, with the package's interval and test functions) at
``n_after`` runs:

* a **count** (``fraction``): our grok count at ``n_after`` is Beta-binomial around what our runs
  show (Jeffreys prior; without runs of ours, around the paper's count), enumerated exactly;
  each outcome is scored by Wilson's interval and Fisher's test against the paper's count;
* an **estimate, published sample or excluded value**: ``n_after`` runs are drawn from a normal
  with our row's centre and the per-run spread its interval implies (without a row of ours at the
  claim's horizon: the paper's value and the spread its interval and n imply, or its margin where
  that is the paper's own 95% half-width; a published sample: that sample's median and spread);
  the row is our median with its order-statistic interval where the target reports a median (the
  row has a coverage), else the mean with its t interval, and Mann-Whitney's U against the paper's sample for a ``sample`` claim (scipy's, exact or normal by
  size: the targets' permutation version is too slow to repeat). A fit (lambda_c, nu) is treated
  as a mean: its interval shrinks as 1/sqrt(n);
* a **p-value or test**: decided when ours rejects; its power at ``n_after`` is that of a z test
  with the per-run effect today's p implies (the paper's p and n without a row of ours).

A claim with neither a row of ours nor a paper spread (one printed number of one run) has no
spread to simulate: ``None``. Deterministic: each (claim, n) draws from its own seeded generator.
"""

from __future__ import annotations

import math
import zlib
from typing import Callable, Protocol

import numpy as np
from scipy import stats as sps

from reproduce.claims import Claim

__all__ = ["DRAWS", "UNDECIDED", "Power", "current_rule_power", "decided", "field", "row_n", "usable_row"]

#: simulated replicates per (claim, n): enough for a probability to +-0.025 (one standard error)
DRAWS = 400
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


def usable_row(row, claim: Claim) -> bool:
    """A row of ours with a number at the claim's horizon: the centre and spread to draw from."""
    return row is not None and field(row, "ours") is not None and row_n(row, claim) >= 1


def _row(claim: Claim, ours, n: int, ours_ci=None, **extra) -> dict:
    """A row scored against ``claim`` as :func:`reproduce.claims.claim_row` builds one."""
    from reproduce.report import row

    r = row(claim.label, claim.claim, claim.text if claim.kind == "named" else claim.value, ours, "plan", n,
            paper_ci=list(claim.ci) if claim.ci else None, ours_ci=ours_ci, **extra)
    # no paper_text: it only words how many runs would decide (a slow count for fractions), not the verdict
    r.update(claim=claim.id, kind=claim.kind, margin=claim.margin, margin_from=claim.margin_from, paper_n=claim.n,
             reading=claim.reading)
    return r


def _verdict_decides(r: dict) -> bool:
    from reproduce.verdict import verdict

    return decided(verdict(r))


def _fraction(claim: Claim, row: dict | None, n_after: int) -> float | None:
    from grok_lightning.stats.intervals import wilson
    from grok_lightning.stats.samples import fisher_counts

    if claim.count is None:
        return None
    paper_k, paper_n = claim.count
    k_now, n_now = (int(round(field(row, "ours") * field(row, "n"))), int(field(row, "n"))) if row else (0, 0)
    a, b = (k_now + 0.5, n_now - k_now + 0.5) if n_now else (paper_k + 0.5, paper_n - paper_k + 0.5)
    added = max(n_after - n_now, 0)
    total = 0.0
    for j, p in enumerate(sps.betabinom.pmf(np.arange(added + 1), added, a, b)):
        k = k_now + j
        interval = wilson(k, n_after)
        r = _row(claim, k / n_after, n_after, ours_ci=interval.ci, test_p=fisher_counts(k, n_after, paper_k, paper_n),
                 test_name="Fisher exact")
        total += float(p) * _verdict_decides(r)
    return total


def _spread(claim: Claim, row: dict | None) -> tuple[float, float] | None:
    """``(centre, per-run sd)`` of the runs to draw (module docstring)."""
    if row and field(row, "ours_ci") and int(field(row, "n")) >= 2 and all(np.isfinite(field(row, "ours_ci"))):
        lo, hi = field(row, "ours_ci")
        z = sps.norm.ppf((1 + (field(row, "ci_level") or 0.95)) / 2)
        sd = (hi - lo) / (2 * z) * math.sqrt(field(row, "n"))
        if sd > 0:
            return float(field(row, "ours")), float(sd)
    if claim.kind == "sample":
        from reproduce.claims import claim_sample

        sample = np.asarray(claim_sample(claim.id), dtype=float)
        return float(np.median(sample)), float(np.std(sample, ddof=1))
    if claim.ci and claim.n and claim.n > 1:
        return float(claim.value), (claim.ci[1] - claim.ci[0]) / (2 * 1.959964) * math.sqrt(claim.n)
    if claim.margin and claim.n and claim.n > 1 and "95%" in claim.margin_why:
        # the margin is the paper's own 95% half-width (its margin_why says so): the paper's spread
        return float(claim.value), claim.margin / 1.959964 * math.sqrt(claim.n)
    return None


def _estimate(claim: Claim, row: dict | None, n_after: int, rng) -> float | None:
    from grok_lightning.stats.intervals import mean_interval, median_interval

    spread = _spread(claim, row)
    if spread is None or n_after < 2:
        return None
    centre, sd = spread
    median = claim.kind == "sample" or bool(row and field(row, "ci_level"))
    sample = None
    if claim.kind == "sample":
        from reproduce.claims import claim_sample

        sample = claim_sample(claim.id)
    keep = {k: field(row, k) for k in ("null", "min_n", "min_n_reason", "same_sign") if row and field(row, k) is not None}
    hits, draws = 0, DRAWS
    for _ in range(draws):
        x = rng.normal(centre, sd, n_after)
        interval = median_interval(x) if median else mean_interval(x)
        extra = dict(keep, ci_level=interval.coverage) if median else dict(keep)
        if sample is not None:
            # scipy's Mann-Whitney U (exact or normal, by size): the targets' permutation version of
            # the same test is too slow to repeat DRAWS times
            extra.update(test_p=float(sps.mannwhitneyu(x, sample, alternative="two-sided").pvalue),
                         test_name="Mann-Whitney U")
        hits += _verdict_decides(_row(claim, interval.estimate, n_after, ours_ci=interval.ci, **extra))
    return hits / draws


def _p_value(claim: Claim, row: dict | None, n_after: int) -> float | None:
    alpha = claim.margin or 0.05
    p, n = (field(row, "ours"), field(row, "n")) if row else (claim.value, claim.n)
    if not (isinstance(p, (int, float)) and 0 < p <= 1 and n):
        return None
    effect = sps.norm.isf(p / 2) / math.sqrt(n)  # per-run standardised effect today's p implies
    z = sps.norm.isf(alpha / 2)
    shift = effect * math.sqrt(n_after)
    return float(sps.norm.sf(z - shift) + sps.norm.cdf(-z - shift))


def current_rule_power(entries: list[dict]) -> Callable[[Claim, int], float | None]:
    """The report's present verdict rule, simulated (module docstring); ``entries`` are
    :func:`reproduce.report.claim_verdicts`' (today's row of each claim)."""
    rows = {field(e, "claim").id: field(e, "row") for e in entries if usable_row(field(e, "row"), field(e, "claim"))}
    cache: dict[tuple[str, int], float | None] = {}

    def power(claim: Claim, n_after: int) -> float | None:
        key = (claim.id, int(n_after))
        if key not in cache:
            row = rows.get(claim.id)
            rng = np.random.default_rng(zlib.crc32(f"{claim.id}:{n_after}".encode()))
            if n_after < 1:
                cache[key] = 0.0
            elif claim.kind == "fraction":
                cache[key] = _fraction(claim, row, int(n_after))
            elif claim.kind in ("estimate", "sample", "excludes"):
                cache[key] = _estimate(claim, row, int(n_after), rng)
            elif claim.kind in ("p-value", "test"):
                cache[key] = _p_value(claim, row, int(n_after))
            else:
                cache[key] = None
        return cache[key]

    return power
