"""The planner's ledger (reproduce/plan/ledger.py): a campaign's prediction is registered once,
before it trains, and scored against the report once its runs are final and counted."""

from __future__ import annotations

import json

import pytest
from test_plan import _catalogue, make_claim, write_record

from grok_lightning.config import ConfigError
from reproduce.plan.costs import load_usages
from reproduce.plan.ledger import load_prediction, outcome_table, outcomes, prediction_path, register
from reproduce.plan.planner import build_plan

UNDECIDED = "not run here"
DECIDED = "consistent with the paper"


def _plan(tmp_path, power, verdicts: dict[str, str] | None = None):
    store = tmp_path / "results" / "A"
    write_record(store, "r1", 1000, 1000.0)                    # 1 CPU-s/epoch
    verdicts = verdicts or {}
    entries = [{"claim": make_claim(c), "row": None, "verdict": verdicts.get(c, UNDECIDED)} for c in ("c.a", "c.b", "c.z")]
    return build_plan("test", results=tmp_path, catalogue_path=_catalogue(tmp_path, store), power=power,
                      power_name="synthetic", entries=entries, usages=load_usages(tmp_path / "results"))


def test_a_prediction_is_registered_once_from_the_campaign_alone(tmp_path):
    plan = _plan(tmp_path, lambda claim, n: 0.5 if n >= 4 else 0.0)
    path, written = register(plan, "dear", root=tmp_path)
    assert written and path == prediction_path("test", "dear", tmp_path)
    first = path.read_bytes()
    p = load_prediction(path)
    assert p.claims == {"c.a": 0.5, "c.b": 0.5} and p.n == {"c.a": (0, 4), "c.b": (0, 4)}
    assert p.expected == 1.0 and p.sd == pytest.approx(0.5 ** 0.5) and p.cpu_h == pytest.approx(4.0)
    [o] = outcomes(plan, root=tmp_path)                       # its target trains it: no runs named, n still short
    assert o.state == "registered, its target has not run them yet (c.a at n 0 of 4, c.b at n 0 of 4)"
    again = _plan(tmp_path, lambda claim, n: 1.0)             # a later plan, with other odds
    assert register(again, "dear", root=tmp_path) == (path, False) and path.read_bytes() == first


def test_a_campaign_is_scored_against_the_band_once_its_runs_are_final(tmp_path):
    plan = _plan(tmp_path, lambda claim, n: 1.0 if n >= 2 else 0.0)
    path, _ = register(plan, "cheap", root=tmp_path)
    data = json.loads(path.read_text())
    data.update(store="results/B", runs={"run1": "abc123"})    # the run it trains, not trained yet
    path.write_text(json.dumps(data))
    [o] = outcomes(plan, root=tmp_path)
    assert o.state == "registered, not trained yet" and o.agrees is None and o.cpu_h is None
    write_record(tmp_path / "results" / "B", "run1", 100, 200.0, run_id="abc123", status="running")
    assert outcomes(plan, root=tmp_path)[0].state == "training: 0 of 1 runs final"
    write_record(tmp_path / "results" / "B", "run1", 360, 720.0, run_id="abc123")
    [o] = outcomes(plan, root=tmp_path)                       # final, and c.a still undecided: outside [1, 1]
    assert o.state == "scored" and o.decided == [] and o.agrees is False and o.cpu_h == pytest.approx(0.2)
    decided = _plan(tmp_path, lambda claim, n: 1.0 if n >= 2 else 0.0, {"c.a": DECIDED})
    [o] = outcomes(decided, root=tmp_path)
    assert o.decided == ["c.a"] and o.agrees is True
    table = outcome_table([o])
    assert "| cheap |" in table and "| 0.20 / 0.20 |" in table and "1.00 +- 0.00 [1.0, 1.0] | 1: c.a | yes |" in table


def test_a_file_that_is_not_a_prediction_is_one_line_naming_it(tmp_path):
    plan = _plan(tmp_path, lambda claim, n: 1.0)
    path = prediction_path("test", "cheap", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "campaign": "cheap"}')
    with pytest.raises(ConfigError, match=r"cheap.prediction.json: not a registered campaign prediction \('profile'\)"):
        outcomes(plan, root=tmp_path)
