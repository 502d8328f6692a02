"""The plan of one profile: today's undecided claims, the campaigns' costs, the ranked order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from grok_lightning.config import ConfigError
from reproduce.plan.catalogue import CATALOGUE, Catalogue, load_catalogue
from reproduce.plan.costs import CampaignCost, campaign_cost, load_usages
from reproduce.plan.power import decided, field, row_n, rule_power
from reproduce.plan.ranking import Option, Step, greedy, n_after
from reproduce.report.oc import REPS
from reproduce.targets.common import REPO

__all__ = ["Plan", "build_plan", "default_power", "today"]


@dataclass
class Plan:
    profile: str
    catalogue: Catalogue
    undecided: dict  # claim id -> Claim, in the table's order
    base_n: dict[str, int]  # today's n of each claim (0 where our runs end before its horizon)
    costs: dict[str, CampaignCost]
    options: dict[str, Option]
    steps: list[Step]
    done: list[str]
    uncovered: list[str]
    power_name: str
    power: Callable  # (claim, n) -> P(decided) or None
    entries: list  # today's report entries (claim, row, verdict)

    def n_after_alone(self, name: str, claim_id: str) -> int:
        """The claim's n once campaign ``name`` alone has run (today's runs plus its own)."""
        return n_after([self.options[name]], claim_id, self.base_n)

    def n_at(self, name: str, claim_id: str) -> int:
        """The claim's n once the ranked campaigns up to ``name`` have run."""
        names = [s.name for s in self.steps]
        chosen = [self.options[n] for n in names[: names.index(name) + 1]]
        return n_after(chosen, claim_id, self.base_n)


def today(results: Path) -> list[dict]:
    """Every claim's verdict from the rows of the report in ``results`` (no training)."""
    from reproduce.report import claim_verdicts, read_rows

    return claim_verdicts(read_rows(Path(results)))


def default_power(entries: list[dict]):
    """The power function the shipped planner ranks with, and its name for the table."""
    return rule_power(entries), (f"the report's verdict rule, simulated from today's rows "
                                 f"(reproduce.report.oc.decided_at, {REPS} replicates per claim and n)")


def _check_adoption(catalogue: Catalogue) -> None:
    """``adopted`` must say whether the campaign's runs are in its sweep file's profile."""
    for c in catalogue.campaigns.values():
        if not c.by_sweep or not c.add:
            continue
        try:
            runs = c.runs()
        except ConfigError as err:
            if c.stored:  # a stored sweep holds its additions once run: nothing to adopt
                raise
            state = "adopted: true, but its additions are not all in" if c.adopted else \
                "adopted: false, but its additions are already in"
            raise ConfigError(f"campaign {c.name}: {state} {c.sweep} ({c.profile}): {err}") from None
        if not runs:
            raise ConfigError(f"campaign {c.name}: its additions add no run to {c.sweep} ({c.profile})")


def counted_today(campaign) -> bool:
    """Whether the report counts a campaign's final runs now: it trains a profile its target reads as
    it is (no additions, no stored sweep), or its additions are adopted into the profile."""
    return campaign.adopted or not (campaign.stored or campaign.add)


def build_plan(profile: str = "medium", results: str | Path | None = None, catalogue_path: str | Path = CATALOGUE,
               power=None, power_name: str = "", entries=None, usages=None) -> Plan:
    """Rank the profile's campaigns (module docstrings of :mod:`reproduce.plan`). ``power``,
    ``entries`` (today's verdicts) and ``usages`` (the records costs are read from) default to the
    shipped ones; tests pass their own."""
    from reproduce.report import load_claims

    claim_ids = load_claims() if entries is None else {field(e, "claim").id for e in entries}
    # the catalogue before the results: a profile without campaigns is one line
    catalogue = load_catalogue(profile, catalogue_path, claim_ids=claim_ids)
    _check_adoption(catalogue)
    results = Path(results) if results is not None else REPO / "results" / profile
    entries = today(results) if entries is None else entries
    claims = {field(e, "claim").id: field(e, "claim") for e in entries}
    undecided = {c.id: c for e in entries if not decided(field(e, "verdict")) for c in [field(e, "claim")]}
    base_n = {field(e, "claim").id: row_n(field(e, "row"), field(e, "claim")) for e in entries}
    if power is None:
        power, power_name = default_power(entries)
    usages = load_usages() if usages is None else usages
    costs = {name: campaign_cost(c, usages, claims) for name, c in catalogue.campaigns.items()}
    done = [name for name, cost in costs.items() if cost.runs == 0]
    options = {}
    for name, c in catalogue.campaigns.items():
        if name in done:
            continue
        # a campaign partly run adds only its pending runs where its final ones are in today's n already
        # (a profile its target reads, or adopted); a stored sweep's or unadopted additions' final runs
        # reach the report only when it switches to them, so they still count
        share = costs[name].runs / costs[name].runs_total if counted_today(c) else 1.0
        options[name] = Option(name=name, cpu_h=costs[name].cpu_h, replaces=c.replaces, after=c.after,
                               adds={k: max(1, round(v * share)) for k, v in c.feeds.items()})
    steps = greedy(list(options.values()), undecided, base_n, power, done=tuple(done))
    uncovered = [c for c in undecided if not catalogue.feeding(c) and c not in catalogue.undecidable]
    return Plan(profile=profile, catalogue=catalogue, undecided=undecided, base_n=base_n, costs=costs,
                options=options, steps=steps, done=done, uncovered=uncovered, power_name=power_name,
                power=power, entries=entries)
