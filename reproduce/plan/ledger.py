"""The planner's predictions, registered before a campaign trains, and what the report decided after.

``python -m reproduce.plan run NAME`` writes ``results/<profile>/campaigns/<NAME>.prediction.json``
before its first run starts (never overwritten: a prediction made after the results would be no
test of the planner): the claims the campaign feeds that were undecided then, the probability
that each is decided at the n the campaign alone brings it to (today's runs plus its own), their
sum (the expected number decided) with its standard deviation (the claims as independent
Bernoulli trials, ``sum p (1 - p)``), the predicted CPU-hours and the runs it trains.

:func:`outcomes` compares each registered prediction with today's report: a campaign is
*scored* once every run it trains has a final record and its runs count in the report (adopted
into its sweep file, or a stored sweep), or, for a campaign its reproduce target trains (whose runs
the target derives, so the prediction names none), once the report's n of every claim it feeds
reaches the n it was predicted at; its claims decided now against the prediction's 95%
band, and the CPU-hours its records measured against the predicted ones. ``make plan`` prints the
comparison under the ranked table (docs/medium.md).
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grok_lightning.config import ConfigError, open_regular
from grok_lightning.records import FINAL_STATUSES, write_text_atomic
from grok_lightning.sweep.planned import planned_records
from reproduce.plan.power import decided, field
from reproduce.plan.ranking import Z95, Option, probabilities
from reproduce.targets.common import REPO

__all__ = ["Outcome", "Prediction", "outcome_table", "outcomes", "predict", "prediction_path", "register"]

SCHEMA = 1


@dataclass(frozen=True)
class Prediction:
    """A campaign's registered prediction (module docstring)."""

    campaign: str
    profile: str
    registered: str  # UTC time, ISO 8601
    commit: str  # the repository's HEAD when it was registered
    store: str | None
    runs: dict[str, str]  # run name -> run id, the runs it trains
    cpu_h: float
    claims: dict[str, float | None]  # claim id -> P(decided); None: no power model
    n: dict[str, tuple[int, int]]  # claim id -> (n then, n after)

    @property
    def expected(self) -> float:
        return float(sum(p for p in self.claims.values() if p is not None))

    @property
    def sd(self) -> float:
        return math.sqrt(sum(p * (1 - p) for p in self.claims.values() if p is not None))

    def band(self) -> tuple[float, float]:
        """The 95% band of the number decided (never below 0)."""
        return max(0.0, self.expected - Z95 * self.sd), self.expected + Z95 * self.sd


def prediction_path(profile: str, name: str, root: Path = REPO) -> Path:
    return Path(root) / "results" / profile / "campaigns" / f"{name}.prediction.json"


def predict(plan, name: str, commit: str = "", now: str = "") -> Prediction:
    """The prediction for campaign ``name`` of ``plan`` (:func:`reproduce.plan.planner.build_plan`):
    the campaign alone, from today's runs."""
    if name not in plan.options:
        raise ConfigError(f"campaign {name}: every run it trains has a final record already; nothing to predict")
    option: Option = plan.options[name]
    campaign = plan.catalogue.campaigns[name]
    probs = probabilities([option], plan.undecided, plan.base_n, plan.power)
    runs = {r.name: r.run_id for r in campaign.runs()} if campaign.by_sweep else {}
    n = {c: (plan.base_n.get(c, 0), plan.n_after_alone(name, c)) for c in probs}
    return Prediction(campaign=name, profile=plan.profile, registered=now, commit=commit, store=campaign.store,
                      runs=runs, cpu_h=float(plan.costs[name].cpu_h), claims=dict(probs), n=n)


def _head(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown (not a git checkout)"


def register(plan, name: str, root: Path = REPO) -> tuple[Path, bool]:
    """Write the campaign's prediction unless one is registered already; ``(path, written)``."""
    path = prediction_path(plan.profile, name, root)
    if path.exists() or path.is_symlink():
        return path, False
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    prediction = predict(plan, name, commit=_head(root), now=now)
    data = {"schema": SCHEMA, **{k: getattr(prediction, k) for k in Prediction.__dataclass_fields__},
            "n": {c: list(v) for c, v in prediction.n.items()}, "expected": prediction.expected, "sd": prediction.sd}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path, True


def load_prediction(path: Path) -> Prediction:
    """A registered prediction; a file that is not one is one ``ConfigError`` line naming it."""
    try:
        with open_regular(path, "r") as handle:
            data = json.load(handle)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA}")
        return Prediction(campaign=str(data["campaign"]), profile=str(data["profile"]), registered=str(data["registered"]),
                          commit=str(data["commit"]), store=data["store"], runs={str(k): str(v) for k, v in data["runs"].items()},
                          cpu_h=float(data["cpu_h"]),
                          claims={str(k): (None if v is None else float(v)) for k, v in data["claims"].items()},
                          n={str(k): (int(v[0]), int(v[1])) for k, v in data["n"].items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ConfigError(f"{path}: not a registered campaign prediction ({err})") from None


@dataclass(frozen=True)
class Outcome:
    prediction: Prediction
    state: str  # "scored", or why not yet
    decided: list[str]  # its claims decided in today's report
    cpu_h: float | None  # CPU-hours its final records measured

    @property
    def agrees(self) -> bool | None:
        """Whether the claims decided lie inside the prediction's 95% band (``None`` until scored)."""
        if self.state != "scored":
            return None
        lo, hi = self.prediction.band()
        return lo <= len(self.decided) <= hi


def _measured(prediction: Prediction, campaign, root: Path) -> tuple[int, int, float]:
    """``(runs started, runs with a final record, their CPU-hours)`` among the runs the prediction trains,
    each read from its own folder by :func:`~grok_lightning.sweep.planned.planned_records` (with the
    config the catalogue plans for it, where the campaign still plans it)."""
    planned = {r.run_id: r.to_dict() for r in campaign.runs()} if campaign is not None and campaign.by_sweep else {}
    entries = [planned.get(run_id) or {"name": name, "run_id": run_id, "config": None}
               for name, run_id in prediction.runs.items()]
    runs_dir = Path(root) / str(prediction.store) / "runs"
    records = [r for _, r in planned_records(runs_dir, entries) if r is not None] if entries else []
    final = [r for r in records if r.get("status") in FINAL_STATUSES]
    return len(records), len(final), sum(float(r.get("cpu_time_s") or 0.0) for r in final) / 3600


def _short_of(prediction: Prediction, base_n: dict[str, int]) -> str:
    """A campaign its target trains names no runs: it is run once the report's n of every claim it
    feeds reaches the n it was predicted at; ``""`` when it has, else which claims are short.

    >>> p = Prediction("c", "medium", "", "", None, {}, 1.0, {"x": 1.0, "y": 1.0}, {"x": (0, 8), "y": (2, 3)})
    >>> _short_of(p, {"x": 0, "y": 3})
    'x at n 0 of 8'
    """
    return ", ".join(f"{c} at n {base_n.get(c, 0)} of {after}" for c, (_, after) in sorted(prediction.n.items())
                     if base_n.get(c, 0) < after)


def outcomes(plan, entries=None, root: Path = REPO) -> list[Outcome]:
    """Every registered prediction of ``plan``'s profile against today's verdicts (``entries``,
    default the plan's)."""
    verdicts = {field(e, "claim").id: field(e, "verdict") for e in (plan.entries if entries is None else entries)}
    found = []
    for path in sorted(prediction_path(plan.profile, "x", root).parent.glob("*.prediction.json")):
        prediction = load_prediction(path)
        campaign = plan.catalogue.campaigns.get(prediction.campaign)
        started, final, cpu_h = _measured(prediction, campaign, root)
        if campaign is None:
            state = "no longer in the catalogue"
        elif not prediction.runs and (short := _short_of(prediction, plan.base_n)):
            state = f"registered, its target has not run them yet ({short})"
        elif prediction.runs and not started:
            state = "registered, not trained yet"
        elif prediction.runs and final < len(prediction.runs):
            state = f"training: {final} of {len(prediction.runs)} runs final"
        elif campaign.by_sweep and campaign.add and not campaign.stored and not campaign.adopted:
            state = f"run, not adopted yet (python -m reproduce.plan adopt {prediction.campaign})"
        else:
            state = "scored"
        won = [c for c in prediction.claims if c in verdicts and decided(verdicts[c])]
        found.append(Outcome(prediction, state, won, cpu_h if final else None))
    return found


def outcome_table(found: list[Outcome]) -> str:
    """The registered predictions against the report (markdown); empty without any."""
    if not found:
        return ""
    lines = ["| campaign | registered (commit) | state | CPU-h predicted / measured | claims fed | expected decided "
             "(95% band) | decided now | inside the band |", "|---|---|---|---|---|---|---|---|"]
    for o in found:
        p = o.prediction
        lo, hi = p.band()
        measured = "-" if o.cpu_h is None else f"{o.cpu_h:.2f}"
        inside = {None: "-", True: "yes", False: "no"}[o.agrees]
        lines.append(f"| {p.campaign} | {p.registered[:10]} ({p.commit[:7]}) | {o.state} | {p.cpu_h:.2f} / {measured} | "
                     f"{len(p.claims)} | {p.expected:.2f} +- {p.sd:.2f} [{lo:.1f}, {hi:.1f}] | "
                     f"{len(o.decided)}{': ' + ', '.join(o.decided) if o.decided else ''} | {inside} |")
    return "\n".join(lines)
