"""The planner's outputs: the ranked table, each campaign's detail, the docs block and the figure."""

from __future__ import annotations

import math
from pathlib import Path

from reproduce.plan.ranking import band
from reproduce.report.prose import replace_block

__all__ = ["BEGIN", "END", "detail", "figure", "markdown", "probabilities_cell", "write_block"]

BEGIN, END = "<!-- plan:begin -->", "<!-- plan:end -->"


def _hours(h: float) -> str:
    return f"{h:,.2f}" if h < 10 else f"{h:,.0f}"


def _rate(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3g}"


def probabilities_cell(probabilities: dict) -> str:
    """The P(decided) of a campaign's claims, most likely first, equal ones counted.

    >>> probabilities_cell({"a": 1.0, "b": 0.999, "c": 0.5, "d": None})
    '1.00 x2, 0.50, no model x1'
    """
    known = sorted((p for p in probabilities.values() if p is not None), reverse=True)
    shown = [f"{p:.2f}" for p in known]
    parts = [f"{p} x{shown.count(p)}" if shown.count(p) > 1 else p for p in dict.fromkeys(shown)]
    missing = sum(p is None for p in probabilities.values())
    return ", ".join(parts + ([f"no model x{missing}"] if missing else [])) or "-"


def markdown(plan) -> str:
    """The ranked table and the lists under it (one markdown block)."""
    lines = [f"Profile **{plan.profile}**: {len(plan.undecided)} claims undecided today (inconclusive or not run "
             f"here); {sum(1 for c in plan.undecided if plan.catalogue.feeding(c))} of them fed by a campaign, "
             f"{sum(1 for c in plan.undecided if c in plan.catalogue.undecidable)} without a campaign yet. "
             f"Power: {plan.power_name}.", "",
             "P(decided) of each: every undecided claim the campaign feeds, at the n it has once the campaigns up "
             "to this one have run; expected decided: what the campaign adds in this order (+- one standard "
             "deviation).", "",
             "| # | campaign | runs | CPU-h | claims fed | P(decided) of each | expected decided | per CPU-h | "
             "cumulative CPU-h | cumulative expected (95% band) | command |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, step in enumerate(plan.steps, 1):
        c = plan.catalogue.campaigns[step.name]
        cost = plan.costs[step.name]
        fed = f"{step.fed}" + (f" ({step.unmodelled} without a power model)" if step.unmodelled else "")
        lo, hi = band(step)
        command = f"`{c.run_command(plan.profile)}`" + ("" if c.runnable else f" (to build first: {c.proposed})")
        lines.append(f"| {i} | {step.name} | {cost.runs} | {_hours(step.cpu_h)} | {fed} | "
                     f"{probabilities_cell(step.probabilities)} | {step.gain:.2f} +- {step.gain_sd:.2f} | "
                     f"{_rate(step.per_cpu_h)} | {_hours(step.cum_cpu_h)} | {step.cum_expected:.1f} "
                     f"[{lo:.1f}, {hi:.1f}] | {command} |")
    if plan.done:
        names = [name + ("" if plan.catalogue.campaigns[name].adopted else
                         f" (not adopted yet: `python -m reproduce.plan adopt {name}`)") for name in plan.done]
        lines += ["", "Run already (every run has a final record in its store; adopted ones are in today's n): "
                  + ", ".join(names) + "."]
    if plan.catalogue.undecidable:
        lines += ["", "Without a campaign yet (what they need):", ""]
        lines += [f"- {claim_id}: {why}" for claim_id, why in plan.catalogue.undecidable.items()
                  if claim_id in plan.undecided]
    if plan.uncovered:
        lines += ["", "Undecided, and neither fed by a campaign nor listed as undecidable: " + ", ".join(plan.uncovered)]
    return "\n".join(lines)


def detail(plan) -> str:
    """Per campaign in the ranked order: where its CPU-hours come from and each claim it feeds,
    today's n -> the n after it, and P(decided) there."""
    lines = []
    for step in plan.steps:
        c = plan.catalogue.campaigns[step.name]
        if c.stored:
            where = f"the sweep stored in {c.store}" + (" with its additions" if c.add else "")
        elif c.by_sweep:
            where = f"{c.sweep} ({c.profile}) -> {c.store}" + (", adopted" if c.adopted else ", additions not adopted yet")
        else:
            where = f"trained by `{c.command}`" if c.runnable else f"proposed: {c.proposed}"
        lines += [f"**{step.name}**: {where}; {_hours(step.cpu_h)} CPU-h; alone {step.alone:.2f} expected decided.", ""]
        lines += [f"- {text}" for text in plan.costs[step.name].lines]
        fed = []
        for claim_id, added in sorted(c.feeds.items()):
            if claim_id not in plan.undecided:
                fed.append(f"{claim_id} (decided already)")
                continue
            p = step.probabilities.get(claim_id)
            n_then = plan.n_at(step.name, claim_id)
            fed.append(f"{claim_id} n {plan.base_n.get(claim_id, 0)} -> {n_then}: "
                       + ("no power model" if p is None else f"P {p:.2f}"))
        lines += ["- claims: " + ("; ".join(fed) or "none of the table's"), ""]
    return "\n".join(lines).rstrip()


def write_block(path: Path, text: str) -> None:
    """Replace the text between the plan markers of ``path``."""
    replace_block(Path(path), "plan", text)


def figure(plan, path: Path) -> Path:
    """The cumulative curve: expected claims decided against CPU-hours spent, in the ranked order,
    with its 95% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = plan.steps
    x = [s.cum_cpu_h for s in steps]
    y = [s.cum_expected for s in steps]
    lo, hi = zip(*(band(s) for s in steps)) if steps else ((), ())
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.step(x, y, where="post", color="C0", label="expected claims decided (ranked order)")
    ax.fill_between(x, lo, hi, step="post", color="C0", alpha=0.2, label="95% band (claims as independent trials)")
    ax.plot(x, y, "o", color="C0", ms=4)
    for i, s in enumerate(steps, 1):  # the table's rank; alternately above and below, so neighbours stay legible
        ax.annotate(str(i), (s.cum_cpu_h, s.cum_expected), textcoords="offset points",
                    xytext=(-3, 6 if i % 2 else -12), fontsize=7, color="0.3")
    ax.set_xscale("log")
    ax.set_xlabel("cumulative CPU-hours (log scale; one thread, the shipped records' measured cost)")
    ax.set_ylabel(f"expected claims decided (of {len(plan.undecided)} undecided today)")
    ax.set_title(f"Run planner, profile {plan.profile}: campaigns in order of expected claims decided per CPU-hour "
                 f"(numbers: the table's ranks)\npower: {plan.power_name}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
