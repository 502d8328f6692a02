"""The operating-characteristics tables of docs/statistics.md, and which claims cannot meet the
rule's targets and why.

    python -m reproduce.report.oc_table                                   # print
    nice python -m reproduce.report.oc_table --reps 400 --write docs/statistics.md

The targets (:data:`TARGETS`): a faithful replicate at the paper's n reads consistent or equivalent
at least 93% of the time; a truth 2 Delta away reads not reproduced at least 80% of the time with 4
times the paper's n; a truth Delta away reads equivalent at most 5% of the time at every n.
:func:`shortfall` says, from the claim alone, why a claim cannot meet one (the paper's own precision
or a design that gives no interval of the coverage a verdict needs); every other claim is held to
the targets by the simulation (tests/test_verdict_oc.py).
"""

from __future__ import annotations

import argparse
import math
from collections import OrderedDict

from scipy import stats as sps

from grok_lightning.stats.equivalence import Count
from reproduce.report.claims import load_claims
from reproduce.report.oc import MULTIPLES, SCENARIOS, Model, characteristics, model
from reproduce.report.prose import print_or_write

__all__ = ["BEGIN", "END", "TARGETS", "families", "shortfall", "table"]

BEGIN, END = "<!-- oc:begin -->", "<!-- oc:end -->"
TARGETS = {"faithful": 0.93, "power": 0.80, "size": 0.05}
#: the analytic power below which a claim is said not to reach the power target (the simulation of
#: the rule itself has the last word on every other claim)
POWER_FLOOR = 0.85


def families() -> OrderedDict[str, list[str]]:
    """``{family: [claim ids with a replicate model]}`` in table order; a family's claims of one run
    form a group of their own, ``<family> (one run)``: the paper's value carries a run's spread."""
    out: OrderedDict[str, list[str]] = OrderedDict()
    for c in load_claims().values():
        m = model(c.id)
        if m is not None:
            out.setdefault(c.family + (" (one run)" if m.kind == "one run" else ""), []).append(c.id)
    return out


def shortfalls(ids: list[str]) -> list[str]:
    """'target, k of n claims: why' for each target some claims of a group cannot meet (the reason
    of the claim that falls furthest short)."""
    out = []
    for target in ("faithful", "power"):
        short = [cid for cid in ids if target in shortfall(cid)]
        if short:
            worst = min(short, key=lambda cid: _power(model(cid)))
            out.append(f"{target}, {len(short)} of {len(ids)} claims: {shortfall(worst)[target]}")
    return out


def _power(m: Model) -> float:
    """The normal-approximation power of a 95% test of D against a truth 2 Delta away, 4 times the
    paper's n of ours, the paper's standard error as it is."""
    c = m.claim
    if m.kind == "count":
        k, n = c.count
        lo, hi = Count(k, n, exact=True).interval(0.95)
        p2 = min(max(k / n + (2 * c.delta if k / n + 2 * c.delta <= 1 else -2 * c.delta), 0.0), 1.0)
        se = math.hypot((hi - lo) / 2 / 1.96, math.sqrt(p2 * (1 - p2) / (4 * n)))
        return float(sps.norm.cdf(2 * c.delta / se - 1.96)) if se > 0 else 1.0
    delta = math.log(c.delta) if c.factor else c.delta
    if m.kind == "one run":  # the paper's run carries a whole run's spread (here Delta), which no n of ours removes
        return float(sps.norm.cdf(2 / math.sqrt(1 + 1 / (4 * m.n)) - 1.96))
    se = m.se / float(c.value) if c.factor and not m.multiplicative else m.se
    return float(sps.norm.cdf(2 * delta / (se * math.sqrt(1.25)) - 1.96)) if se > 0 else 1.0


def shortfall(claim_id: str) -> dict[str, str]:
    """``{target: why this claim cannot meet it}`` from the claim alone ({} when it can)."""
    m = model(claim_id)
    c = m.claim
    out = {}
    if m.kind == "median" and (c.n or 1) < 5:
        out["faithful"] = (f"a median of {c.n} runs, the paper's n, has no 90% interval (the range of {c.n} covers "
                           f"{1 - 2 ** (1 - (c.n or 1)):.0%}): inconclusive by design")
    power = _power(m)
    if power < POWER_FLOOR:
        why = ("one run of the paper carries a whole run's spread (simulated at Delta), which no number of our "
               "runs removes" if m.kind == "one run" else
               f"the paper's own uncertainty ({_se_text(m)}) leaves D's standard error at 4x its n too large for "
               f"2 Delta ({c.tolerance})")
        out["power"] = f"{why}: normal-approximation power {power:.0%}"
    return out


def _se_text(m: Model) -> str:
    c = m.claim
    if m.kind == "count":
        return f"its count {c.text}"
    return f"standard error {m.se:.3g}{' (log)' if m.multiplicative else ''}"


def _mean_worst(values: list[float], worst=min) -> str:
    """'96% (93%)': the mean over a group's claims and its worst claim ('n/a' where the paper gives
    no spread to draw a truth from)."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "n/a"
    return f"{sum(values) / len(values):.0%}" + (f" ({worst(values):.0%})" if len(values) > 1 else "")


def _cell(share: dict[str, float]) -> str:
    """'E 93 / C 5 / N 2' (percent equivalent / consistent / not reproduced, inconclusive when any)."""
    text = " / ".join(f"{k[0].upper()} {round(100 * share[k])}" for k in ("equivalent", "consistent", "not reproduced"))
    return text + (f" / I {round(100 * share['inconclusive'])}" if share["inconclusive"] else "")


def criteria(claim_id: str, reps: int) -> dict[str, float]:
    """The three targets' simulated values for one claim."""
    sim = lambda mult, scen: characteristics(claim_id, mult, scen, reps)
    faithful = [sim(1, s) for s in ("exact", "drawn")]
    drawn = math.nan if model(claim_id).assumed else faithful[1]["equivalent"] + faithful[1]["consistent"]
    return {"faithful_exact": faithful[0]["equivalent"] + faithful[0]["consistent"], "faithful_drawn": drawn,
            "power": sim(4, "2delta")["not reproduced"],
            "size": max(sim(mult, "delta")["equivalent"] for mult in MULTIPLES)}


def table(reps: int = 400, reps_all: int = 150) -> str:
    """Table 1: every family against the targets (the worst of its claims, ``reps_all`` replicates
    each); table 2: each family's first claim under every scenario at 1-10x (``reps``)."""
    fams = families()
    se = 100 * math.sqrt(0.05 * 0.95 / reps_all)
    lines = [f"**Against the targets**: each cell the mean over the group's claims and, in brackets, its worst claim; "
             f"{reps_all} replicates per claim and cell (a Monte Carlo standard error of about {se:.1f} points at 95%, "
             "so the worst of many claims reads low by chance), a count's shares exact. Faithful: consistent or "
             "equivalent at the paper's n, the truth at the paper's value (exact) or drawn from its uncertainty "
             "(drawn); power: not reproduced with the truth 2 Delta away at 4x the paper's n; size: equivalent with "
             "the truth Delta away, the largest over 1-10x.", "",
             "| family | Delta | claims | model | faithful, exact | faithful, drawn | power | size | cannot meet, and why |",
             "|---|---|---|---|---|---|---|---|---|"]
    for family, ids in fams.items():
        values = {cid: criteria(cid, reps_all) for cid in ids}
        reasons = shortfalls(ids)
        first = model(ids[0])
        assumed = f" ({first.assumed})" if first.assumed else ""
        cell = lambda key, worst=min: _mean_worst([v[key] for v in values.values()], worst)
        lines.append(f"| {family} | {first.claim.tolerance} | {len(ids)} | {first.kind}{assumed} | "
                     f"{cell('faithful_exact')} | {cell('faithful_drawn')} | {cell('power')} | {cell('size', max)} | "
                     f"{'; '.join(reasons) or '-'} |")
    lines += ["", f"**Every scenario** (each family's first claim, {reps} replicates per cell; E / C / N / I: percent "
              "equivalent, consistent, not reproduced, inconclusive).", "",
              "| family (claim) | truth | " + " | ".join(f"{m}x the paper's n" for m in MULTIPLES) + " |",
              "|---|---|" + "---|" * len(MULTIPLES)]
    for family, ids in fams.items():
        for scenario in SCENARIOS:
            cells = [_cell(characteristics(ids[0], mult, scenario, reps)) for mult in MULTIPLES]
            lines.append(f"| {family} ({ids[0]}) | {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--reps-all", type=int, default=150)
    parser.add_argument("--write", default=None, help="a markdown file whose OC block to replace")
    args = parser.parse_args(argv)
    print_or_write(table(args.reps, args.reps_all), args.write, "oc")


if __name__ == "__main__":
    main()
