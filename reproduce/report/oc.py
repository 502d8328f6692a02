"""Operating characteristics of the verdict rule: how often each verdict comes out when the truth is
known, simulated with the package's own interval and verdict functions.

    python -m reproduce.report.oc                                  # print the table
    python -m reproduce.report.oc --reps 1000 --write docs/statistics.md

For a claim, :class:`Model` draws replicates of our row as its target would build it: a count
(Binomial, Wilson, Fisher), a mean of runs (normal runs, Student t), a median of runs (normal runs,
the order-statistic interval with its real coverage), runs against a published sample (log-normal
runs fitted to the sample on the 10-epoch grid, Mann-Whitney, Hodges-Lehmann), a Cohen's d (normal
samples, the exact noncentral-t interval), another estimate (normal on the family's scale, a 95%
interval of the paper's precision at the paper's n), or runs against a value the paper reports
from one run (a prediction interval). The paper's per-run spread comes from its own interval, sd,
IQR, count or sample; a claim whose paper gives no spread (a printed value, one run) is simulated
with a run-to-run sd of Delta and says so. Then :func:`judge` gives the verdict.

Scenarios, at 1, 2, 4 and 10 times the paper's n (:data:`MULTIPLES`): ``exact`` (the truth is the
paper's value), ``drawn`` (the truth drawn from the paper's own uncertainty: a faithful replicate
of a study whose number is itself an estimate), ``delta`` and ``2delta`` (the truth one and two
Deltas away). :func:`decide_probability` asks the same of a claim and a number of our runs: how
likely the verdict is decided. :func:`decided_at` asks it from what our row knows (our estimate and
spread where it has them, :func:`replicate`): the run planner ranks campaigns by it, and
:func:`more_runs` tells a report row how many runs would decide (or settle) it from the same call,
so the two agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from grok_lightning.stats.equivalence import Count
from grok_lightning.stats.intervals import mean_interval, median_interval
from grok_lightning.stats.significance import MIN_PAIRS_COHEN_D, cohens_d, cohens_d_ci, paired_d_ci
from reproduce.report.claims import Claim, claim
from reproduce.report.rows import Row
from reproduce.report.sources import claim_sample
from reproduce.report.verdict import ALPHA, DECIDED, MIN_RUNS, Verdict, Word, judge

__all__ = ["MULTIPLES", "REPS", "SCENARIOS", "Model", "Replicate", "characteristics", "decide_probability", "decided_at",
           "model", "more_runs", "our_spread", "reject_probability", "replicate"]

MULTIPLES = (1, 2, 4, 10)
SCENARIOS = ("exact", "drawn", "delta", "2delta")
#: the outcomes tallied: a verdict word's class in the simulation
OUTCOMES = ("equivalent", "consistent", "not reproduced", "inconclusive")
#: the power at which more runs "would decide" or "would settle" a comparison
POWER = 0.8
#: replicates per (claim, n) when a planner or a report row asks how many runs decide a claim: a
#: probability to about +-0.03 (one standard error at 0.5), cheap enough to ask for every claim
REPS = 200
GRID = 10.0  # grok epochs are evaluated every 10 epochs


def _outcome(v: Verdict) -> str:
    return {Word.EQUIVALENT: "equivalent", Word.CONSISTENT: "consistent", Word.NOT_REPRODUCED: "not reproduced",
            Word.SAME_DIRECTION: "not reproduced"}.get(v.word, "inconclusive")


def _half(c: Claim, log: bool) -> float | None:
    """The paper's 95% half-width, on the log scale with ``log`` (None: it publishes no spread)."""
    value = float(c.value)
    if c.ci:
        lo, hi = c.ci
        return (math.log(hi) - math.log(lo)) / 2 if log else (hi - lo) / 2
    if c.margin_from != "sampling" or c.margin is None:
        return None
    return math.log1p(c.margin / value) if log else c.margin


@dataclass(frozen=True)
class Model:
    """How one replicate of our row for claim ``claim`` is drawn (module docstring).

    ``kind``: count | mean | median | sample | d | paired d | normal | one run; ``sd``: the per-run sd
    (natural units; on the log scale for a ``normal`` model of a factor family; for a d, 1);
    ``se``: the paper's standard error of its value on the same scale; ``assumed``: why the spread
    is not the paper's, when it is not."""

    claim: Claim
    kind: str
    sd: float
    se: float
    assumed: str = ""

    @property
    def n(self) -> int:
        return 3 if self.kind == "one run" else int(self.claim.n or 1)

    @property
    def multiplicative(self) -> bool:
        """Whether the model's spread is on the log scale (a factor family's normal, sample or
        one-run model)."""
        return self.claim.factor and self.kind in ("normal", "sample", "one run")

    def truth(self, scenario: str, rng: np.random.Generator) -> float:
        c, value = self.claim, float(self.claim.value)
        if scenario == "exact":
            return value
        if scenario == "drawn":
            if self.kind == "count":
                k, n = c.count
                return float(rng.beta(k + 0.5, n - k + 0.5))
            e = rng.normal(0.0, self.se)
            return value * math.exp(e) if self.multiplicative else value + e
        steps = {"delta": 1, "2delta": 2}[scenario]
        if c.factor:
            return value * c.delta ** steps
        up = value + steps * c.delta
        return up if self.kind != "count" or up <= 1.0 else value - steps * c.delta

    def draw(self, truth: float, n: int, rng: np.random.Generator) -> Row:
        """One replicate of our row with ``n`` runs at ``truth``."""
        c = self.claim
        q = dict(quantity="simulated", profile="sim", claim=c.id)
        if self.kind == "count":
            return self.draw_count(int(rng.binomial(n, min(max(truth, 0.0), 1.0))), n)
        if self.kind in ("mean", "median"):
            x = rng.normal(truth, self.sd, n)
            interval = mean_interval(x) if self.kind == "mean" else median_interval(x)
            return Row(ours=interval.estimate, n=n, ours_ci=interval.ci, ci_level=interval.coverage, **q)
        if self.kind == "sample":  # log-normal runs fitted to the published sample, moved by truth / value
            logs = np.log(np.asarray(claim_sample(c.id), float))
            x = np.exp(rng.normal(logs.mean(), self.sd, n)) * truth / float(c.value)
            x = np.maximum(GRID, np.round(x / GRID) * GRID)
            return Row(ours=float(np.median(x)), n=n, runs=tuple(x), **q)
        if self.kind == "d":
            n1, n2 = _two_groups(c, n)
            x, y = rng.normal(truth, 1.0, n1), rng.normal(0.0, 1.0, n2)
            d = cohens_d(x, y)
            return Row(ours=d, n=n1 + n2, ours_ci=cohens_d_ci(d, n1, n2), **q)
        if self.kind == "paired d":
            diff = rng.normal(truth, 1.0, n)
            d = float(diff.mean() / diff.std(ddof=1))
            return Row(ours=d, n=n, ours_ci=paired_d_ci(d, n), min_n=MIN_PAIRS_COHEN_D, **q)
        if self.kind == "one run":
            x = rng.normal(math.log(truth) if c.factor else truth, self.sd, n)
            x = np.exp(x) if c.factor else x
            return Row(ours=float(x[0]), n=n, runs=tuple(x), **q)
        se = self.sd / math.sqrt(n)  # normal: an estimate whose standard error shrinks as 1/sqrt(n)
        if c.factor:
            est = truth * math.exp(rng.normal(0.0, se))
            return Row(ours=est, n=n, ours_ci=(est * math.exp(-1.96 * se), est * math.exp(1.96 * se)), **q)
        est = truth + rng.normal(0.0, se)
        return Row(ours=est, n=n, ours_ci=(est - 1.96 * se, est + 1.96 * se), **q)

    def draw_count(self, k: int, n: int) -> Row:
        """Our row of k of n runs (a count model)."""
        return Row(quantity="simulated", profile="sim", claim=self.claim.id, ours=k / n, n=n)

    def our_n(self, multiple: float) -> int:
        return max(2, int(math.ceil(multiple * self.n)))


def _two_groups(c: Claim, n: int) -> tuple[int, int]:
    """A two-sample d's groups at ``n`` runs in all, split as the paper's (its margin names them)."""
    match = re.search(r"n = (\d+) \+ (\d+)", c.margin_why)
    a, b = (int(match[1]), int(match[2])) if match else (c.n // 2, c.n - c.n // 2)
    first = max(2, round(n * a / (a + b)))
    return first, max(2, n - first)


@lru_cache(maxsize=None)
def model(claim_id: str) -> Model | None:
    """The replicate model of a claim (None for a decision, an identity, a name or a replay)."""
    c = claim(claim_id)
    if c.kind not in ("estimate", "fraction", "sample"):
        return None
    delta = math.log(c.delta) if c.factor else c.delta
    if c.count:
        k, n = c.count
        return Model(c, "count", 0.0, math.sqrt((k + 0.5) * (n - k + 0.5) / (n + 1) ** 2 / (n + 2)))
    if c.kind == "sample":
        logs = np.log([float(v) for v in claim_sample(c.id)])
        sd = float(logs.std(ddof=1)) if logs.size > 1 else delta
        return Model(c, "sample", max(sd, 1e-3), sd / math.sqrt(logs.size))
    if c.one_run:
        return Model(c, "one run", delta, 0.0, "no run-to-run spread published: a run-to-run sd of Delta")
    statistic, n = c.statistic.lower(), c.n or 1
    estimator = ("paired d" if "paired" in statistic else "d") if "cohen's d" in statistic \
        else "median" if statistic.startswith("median") and n > 1 \
        else "mean" if statistic.startswith("mean") and n > 1 and not c.ci else "normal"
    half = _half(c, log=c.factor and estimator == "normal")
    assumed = ""
    if half is None:  # a printed value without spread: simulated at a standard error of Delta/2 at its n
        half, assumed = 1.96 * delta / 2, "no spread published: a standard error of Delta/2 at the paper's n"
    if estimator in ("d", "paired d"):
        return Model(c, estimator, 1.0, half / 1.96, assumed)
    se = half / (float(sps.t.ppf(0.975, n - 1)) if estimator == "mean" and not assumed else 1.96)
    sd = se * math.sqrt(n) / (1.2533 if estimator == "median" else 1.0)
    return Model(c, estimator, sd, se, assumed)


def characteristics(claim_id: str, multiple: float, scenario: str, reps: int = 400, seed: int = 0,
                    n: int | None = None) -> dict[str, float]:
    """The share of each outcome (:data:`OUTCOMES`) over ``reps`` replicates of ``claim_id`` under
    ``scenario`` with ``multiple`` times the paper's n of our runs (or exactly ``n``)."""
    m = model(claim_id)
    if m is None:
        raise ValueError(f"claim {claim_id} is a decision, an identity or a name: no replicate model")
    rng = np.random.default_rng([seed, _stable(claim_id), int(multiple * 100), SCENARIOS.index(scenario)])
    runs = n or m.our_n(multiple)
    if m.kind == "count":
        return _count_characteristics(m, runs, scenario)
    counts = dict.fromkeys(OUTCOMES, 0)
    for _ in range(reps):
        counts[_outcome(judge(m.draw(m.truth(scenario, rng), runs, rng), m.claim))] += 1
    return {k: v / reps for k, v in counts.items()}


def _count_characteristics(m: Model, n: int, scenario: str) -> dict[str, float]:
    """A count's outcome shares exactly: the verdict of every k = 0..n weighed by its probability,
    binomial at the truth (beta-binomial for a truth drawn from the paper's Jeffreys posterior)."""
    if scenario == "drawn":
        k, n_paper = m.claim.count
        pmf = sps.betabinom.pmf(np.arange(n + 1), n, k + 0.5, n_paper - k + 0.5)
    else:
        pmf = sps.binom.pmf(np.arange(n + 1), n, min(max(m.truth(scenario, None), 0.0), 1.0))
    out = dict.fromkeys(OUTCOMES, 0.0)
    for k, weight in enumerate(pmf):
        out[_outcome(judge(m.draw_count(k, n), m.claim))] += float(weight)
    return out


def _stable(text: str) -> int:
    return sum((i + 1) * ord(ch) for i, ch in enumerate(text))


def _probability(m: Model, n: int, truth: float | None, settled: bool, reps: int, seed: int) -> float:
    """The share of ``reps`` replicates of ``n`` runs drawn by ``m`` whose verdict is decided
    (with ``settled``: equivalent or not reproduced); ``truth`` None draws it per replicate as a
    faithful replicate does (the paper's value where its spread is assumed). One generator per
    (seed, claim, n): the same question gets the same answer wherever it is asked."""
    rng = np.random.default_rng([seed, _stable(m.claim.id), n])
    wanted = {Word.EQUIVALENT, Word.NOT_REPRODUCED, Word.SAME_DIRECTION} if settled else DECIDED
    hits = 0
    for _ in range(reps):
        t = m.truth("exact" if m.assumed else "drawn", rng) if truth is None else truth
        hits += judge(m.draw(t, n, rng), m.claim).word in wanted
    return hits / reps


def decide_probability(claim_id: str, n: int, *, settled: bool = False, truth: float | None = None,
                       sd: float | None = None, reps: int = 400, seed: int = 0) -> float:
    """The simulated probability that ``n`` runs of ours give claim ``claim_id`` a decided verdict
    (not inconclusive; with ``settled``, equivalent or not reproduced: a verdict on the size).
    ``truth``: the true value (default: drawn from the paper's own uncertainty, a faithful
    replicate; the paper's value where it publishes no spread); ``sd``: our per-run sd, where our
    runs have measured it (default: the paper's, or Delta's stand-in where it gives none).
    A decision, identity or name is decided by any run: 1.0 from one run on (a planner asks
    :func:`decided_at`, which gives a p-value the power of its test).

    >>> decide_probability("lock.fire_grok", 15, reps=100)
    1.0
    >>> decide_probability("fig4.perm_p", 8)  # a decision
    1.0
    """
    m = model(claim_id)
    if m is None:
        return 1.0 if n >= 1 else 0.0
    if sd is not None:
        m = Model(m.claim, m.kind, sd, m.se, "our measured spread")
    return _probability(m, n, truth, settled, reps, seed)


def our_spread(r: Row, m: Model) -> float | None:
    """Our per-run sd from the row, on the model's scale (None when the row has no interval, or
    fewer than 3 runs of a one-run or sample claim)."""
    if len(r.runs) >= 3 and m.kind in ("one run", "sample"):
        x = np.log(r.runs) if m.multiplicative else np.asarray(r.runs)
        return float(np.std(x, ddof=1))
    if r.ours_ci is None or r.n < 2 or m.kind in ("count", "d", "paired d", "one run", "sample"):
        return None
    lo, hi = r.ours_ci
    q = float(sps.norm.ppf((1 + r.ci_level) / 2))
    if m.multiplicative:
        return None if lo <= 0 else (math.log(hi) - math.log(lo)) / 2 / q * math.sqrt(r.n)
    return (hi - lo) / 2 / q * math.sqrt(r.n) / (1.2533 if m.kind == "median" else 1.0)


@dataclass(frozen=True)
class Replicate:
    """How more runs of a claim's configuration are simulated (:func:`replicate`): the replicate
    model, the true value (None: drawn per replicate, a faithful replicate of the paper) and the
    words that say which, for a report row."""

    model: Model
    truth: float | None
    basis: str


def replicate(c: Claim, r: Row | None = None) -> Replicate | None:
    """More runs of claim ``c`` as a planner and a report row simulate them, from what our row
    knows: around our estimate with our per-run spread where the row has both at the claim's
    horizon (a count: binomial at our fraction; a one-run claim: the centre of our runs), else a
    faithful replicate of the paper (:func:`decide_probability`'s default). Where our row's interval
    has an order statistic's coverage rather than a nominal 95%, our estimator is a median of runs
    and is drawn as one, so the rule sees the coverage it will see (75% from 3 runs, 94% from 5).
    None for a claim without a replicate model (a decision, identity or name)."""
    m = model(c.id)
    if m is None:
        return None
    usable = (r is not None and r.ours is not None and not r.invalid
              and (r.horizon is None or c.horizon is None or r.horizon >= c.horizon or bool(r.horizon_final)))
    if usable and m.kind in ("mean", "normal") and r.ours_ci is not None and abs(r.ci_level - 0.95) > 1e-9:
        m = Model(m.claim, "median", m.sd, m.se, m.assumed)
    faithful = Replicate(m, None, "for a faithful replicate of the paper")
    if not usable or m.kind in ("d", "paired d"):  # a run shorter than the claim's horizon measures another quantity
        return faithful
    if m.kind == "count":
        return Replicate(m, float(r.ours), "at our estimate and spread")
    sd = our_spread(r, m)
    if not sd:
        return faithful
    truth = float(r.ours)
    if m.kind == "one run" and r.runs:  # the centre of our runs, not the lead run alone
        truth = float(np.exp(np.mean(np.log(r.runs))) if m.multiplicative else np.mean(r.runs))
    return Replicate(Model(m.claim, m.kind, sd, m.se, "our estimate and spread"), truth, "at our estimate and spread")


def reject_probability(c: Claim, n: int, r: Row | None = None) -> float:
    """P(``n`` runs of ours decide p-value claim ``c``): any verdict decides where the paper's p is
    not below alpha; where it is, ours must reject too (a p above alpha is no evidence of no
    effect). The power of a two-sided one-sample t test at the per-run standardised effect that a
    p at its n implies: our row's where it is at the claim's horizon, else the paper's. Exact for
    the paired t tests; for a permutation or rank test of two groups, their n pooled, an
    approximation.

    >>> from reproduce.report.claims import claim
    >>> reject_probability(claim("fig4.tail_drift_p"), 8)  # the paper's p is 0.164: any run decides
    1.0
    >>> round(reject_probability(claim("e12.B-A.p.0.05"), 10), 2)  # at the paper's own p and n
    0.92
    """
    alpha = c.margin or ALPHA
    if float(c.value) >= alpha:
        return 1.0 if n >= 1 else 0.0
    if n < 2:
        return 0.0
    at_horizon = r is not None and (r.horizon is None or c.horizon is None or r.horizon >= c.horizon)
    p, runs = (r.ours, r.n) if at_horizon and isinstance(r.ours, float) and r.n >= 2 else (float(c.value), c.n or 2)
    effect = float(sps.t.isf(min(max(p, 1e-300), 1.0) / 2, runs - 1)) / math.sqrt(runs)
    critical, shift = float(sps.t.isf(alpha / 2, n - 1)), effect * math.sqrt(n)
    return float(sps.nct.sf(critical, n - 1, shift) + sps.nct.cdf(-critical, n - 1, shift))


def decided_at(c: Claim, n: int, r: Row | None = None, *, settled: bool = False, reps: int = REPS,
               seed: int = 0) -> float:
    """The simulated probability that ``n`` runs of ours decide claim ``c`` (with ``settled``:
    equivalent or not reproduced), from what our row ``r`` knows (:func:`replicate`); a p-value by
    :func:`reject_probability`, another decision, identity or name 1.0 from one run on. The
    planner's power and a report row's "runs would decide it" are both this function."""
    if c.kind == "p-value":
        return reject_probability(c, n, r)
    rep = replicate(c, r)
    if rep is None:
        return 1.0 if n >= 1 else 0.0
    return _probability(rep.model, n, rep.truth, settled, reps, seed)


def more_runs(r: Row, c: Claim, v: Verdict, reps: int = REPS, seed: int = 0) -> str:
    """How many runs would decide an inconclusive row, or settle (equivalent or not reproduced) a
    consistent one, with :data:`POWER`: the first n (each up to 10, then 1.5 times apart) at which
    :func:`decided_at` reaches it (what a planner asks at that n), or why no number does. Settling
    depends on our gap, so a consistent row needs our estimate and spread; '' otherwise."""
    if v.word not in (Word.CONSISTENT, Word.INCONCLUSIVE) or r.ours is None or r.invalid or r.min_n:
        return ""
    rep = replicate(c, r)
    if rep is None or rep.model.kind in ("d", "paired d"):
        return ""
    settle = v.word is Word.CONSISTENT
    if settle and rep.truth is None:
        return ""
    limit = _limit(rep.model, rep.truth) if settle else ""
    if limit:
        return f"not decidable by more runs: {limit}"
    verb = "settle" if settle else "decide"
    cap = max(100, 10 * (c.n or 1))
    n = max(r.n + 1, MIN_RUNS if rep.model.kind == "one run" else 2)
    while n <= cap:  # every n up to 10, then candidates 1.5 times apart: "about" n
        if _probability(rep.model, n, rep.truth, settle, reps, seed) >= POWER:
            return f"about {n} runs would {verb} it ({POWER:.0%} simulated power {rep.basis})"
        n = n + 1 if n < 10 else int(n * 1.5)
    return f"not {verb}d by {cap} runs {rep.basis} (simulated)"


def _limit(m: Model, ours: float) -> str:
    """Why no number of our runs can settle the comparison at our estimate: with our side exact,
    D's intervals are the paper's own; if its 90% one still reaches past Delta and its 95% one
    contains 0, nothing we run decides it."""
    c = m.claim
    if m.kind == "count":
        paper = Count(*c.count, exact=True)
        (lo95, hi95), (lo90, hi90) = paper.interval(0.95), paper.interval(0.90)
        if lo95 <= ours <= hi95 and not (ours - hi90 >= -c.delta and ours - lo90 <= c.delta):
            return (f"the paper's own count ({c.text}) leaves D's 90% interval wider than Delta (-+{c.delta:g}) "
                    f"while ours ({ours:.3g}) lies inside its 95% interval")
        return ""
    if m.kind == "one run":
        return ""  # a one-run claim's spread is our runs': the simulation says
    half = 1.96 * m.se if m.kind == "sample" else _half(c, log=c.factor)
    value = float(c.value)
    if half is None or (c.factor and (ours <= 0 or value <= 0)):
        return ""
    d = math.log(ours / value) if c.factor else ours - value
    delta = math.log(c.delta) if c.factor else c.delta
    half90 = half * 1.6449 / 1.96
    if abs(d) > half or abs(d) + half90 < delta:
        return ""
    shown = (lambda x: f"x{math.exp(x):.3g}") if c.factor else (lambda x: f"{x:+.3g}")
    return (f"the paper's own uncertainty alone (90%: -+{half90:.3g}{' in log' if c.factor else ''}) around our gap "
            f"({shown(d)}) reaches past Delta ({c.tolerance}) while its 95% interval contains our value")
