"""The run planner (reproduce/plan): catalogue, cost model, ranking, outputs, a campaign's command.

Synthetic claims, records and power functions, so each number is known; the shipped catalogue is
checked against the claims table, the sweep files and today's report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from grok_lightning.config import ConfigError
from reproduce.plan.catalogue import Campaign, Group, load_catalogue
from reproduce.plan.costs import campaign_cost, load_usages, rate_of
from reproduce.plan.planner import _check_adoption, build_plan
from reproduce.plan.ranking import Option, band, greedy, n_after
from reproduce.plan.table import BEGIN, END, figure, markdown, write_block
from reproduce.report import Claim

REPO = Path(__file__).resolve().parents[1]


def make_claim(claim_id: str, kind: str = "fraction", text: str = "10/10", n: int = 10, horizon: int | None = None) -> Claim:
    """A claim of a synthetic table (fields this planner does not read are None)."""
    values = dict(id=claim_id, paper="p", where="w", claim=f"synthetic {claim_id}", text=text, ci=None, ci_text="", n=n,
                  kind=kind, statistic="", reading="-", horizon=horizon, margin=0.28, margin_why="", margin_from="",
                  source="synthetic", keys="", target="t", needs="")
    return Claim(**{f.name: values.get(f.name) for f in dataclasses.fields(Claim)})


def write_record(store: Path, name: str, final_epoch: int, cpu: float | None, wall: float = 0.0, threads: int = 1,
                 started_at: int | None = None, **extra) -> None:
    record = {"status": "completed", "final_epoch": final_epoch, "cpu_time_s": cpu, "wall_time_s": wall,
              "environment": {"torch_threads": threads}, "config": {}, "history": {"epoch": [final_epoch]}, **extra}
    if started_at is not None:
        record["started_from"] = {"run_id": "x", "name": None, "epoch": started_at}
    path = store / "runs" / name / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


# --- the cost model ---------------------------------------------------------------------------------
def test_cost_per_epoch_is_read_from_records_and_counts_only_the_epochs_each_record_trained(tmp_path):
    store = tmp_path / "results" / "A"
    write_record(store, "r1", 1000, 500.0)                     # 0.5 CPU-s/epoch
    write_record(store, "r2", 1000, 700.0)                     # 0.7
    write_record(store, "r3", 4000, 600.0, started_at=3000)    # from another run's checkpoint: 1,000 epochs, 0.6
    write_record(store, "r4", 1000, 9000.0, threads=2)         # two threads: not used
    usages = load_usages(tmp_path / "results")
    assert len(usages) == 3
    rate = rate_of(usages)
    assert rate.cpu_s_per_epoch == pytest.approx(0.6) and rate.n_records == 3 and "median of 3" in rate.how


def test_short_records_give_the_slope_and_wall_time_is_the_fallback_said_so(tmp_path):
    pilot = tmp_path / "results" / "pilot"
    write_record(pilot, "e1", 1, 13.0)
    write_record(pilot, "e11", 11, 53.0)                       # setup 9 s cancels: 4 CPU-s/epoch
    assert rate_of(load_usages(tmp_path / "results")).cpu_s_per_epoch == pytest.approx(4.0)
    old = tmp_path / "old" / "s"
    write_record(old, "w", 400, None, wall=120.0)
    rate = rate_of(load_usages(tmp_path / "old"))
    assert rate.cpu_s_per_epoch == pytest.approx(0.3) and "wall_time_s" in rate.how


def test_a_group_costs_runs_times_epochs_from_its_start_times_the_rate(tmp_path):
    store = tmp_path / "results" / "A"
    write_record(store, "r1", 1000, 600.0, peak={"epoch": 300})
    write_record(store, "r2", 1000, 600.0, peak={"epoch": 500})
    usages = load_usages(tmp_path / "results")
    campaign = Campaign(name="c", feeds={}, proposed="synthetic", command="echo",
                        groups=(Group(runs=4, horizon=1000, cost_like=str(store),
                                      start={"store": str(store), "field": "peak.epoch"}),))
    cost = campaign_cost(campaign, usages, {})
    assert cost.runs == 4 and cost.cpu_h == pytest.approx(4 * (1000 - 400) * 0.6 / 3600)
    assert "from the median epoch 400" in cost.lines[0]


# --- the catalogue ----------------------------------------------------------------------------------
def _catalogue(tmp_path: Path, store: Path, extra: dict | None = None) -> Path:
    group = lambda runs, horizon: [{"runs": runs, "horizon": horizon, "cost_like": str(store)}]
    campaigns = {
        "cheap": {"proposed": "synthetic", "command": "echo cheap", "groups": group(2, 360), "feeds": {"c.a": 2}},
        "dear": {"proposed": "synthetic", "command": "echo dear", "groups": group(4, 3600), "feeds": {"c.a": 4, "c.b": 4}},
        "second": {"proposed": "synthetic", "command": "echo second", "after": ["dear"], "groups": group(1, 360),
                   "feeds": {"c.b": 1}},
        **(extra or {}),
    }
    path = tmp_path / "campaigns.yaml"
    path.write_text(yaml.safe_dump({"test": {"campaigns": campaigns, "undecidable": {"c.z": "no scorer"}}}))
    return path


def test_an_unknown_claim_id_is_one_error_line_naming_it(tmp_path):
    path = _catalogue(tmp_path, tmp_path, {"typo": {"proposed": "x", "command": "echo", "feeds": {"c.nope": 1},
                                                      "groups": [{"runs": 1, "horizon": 1, "cost_like": "s"}]}})
    with pytest.raises(ConfigError, match="unknown claim id 'c.nope'"):
        load_catalogue("test", path, claim_ids={"c.a", "c.b", "c.z"})
    with pytest.raises(ConfigError, match="no campaigns for profile 'smoke'"):
        load_catalogue("smoke", path, claim_ids={"c.a", "c.b", "c.z"})


def test_a_claim_cannot_be_both_fed_and_undecidable(tmp_path):
    path = _catalogue(tmp_path, tmp_path, {"z": {"proposed": "x", "command": "echo", "feeds": {"c.z": 1},
                                                 "groups": [{"runs": 1, "horizon": 1, "cost_like": "s"}]}})
    with pytest.raises(ConfigError, match="c.z is listed as undecidable but z feeds it"):
        load_catalogue("test", path, claim_ids={"c.a", "c.b", "c.z"})


# --- the ranking ------------------------------------------------------------------------------------
def step_power(thresholds: dict[str, int]):
    """A synthetic power: decided for certain from the claim's threshold n on, else never."""
    return lambda claim, n: 1.0 if n >= thresholds[claim.id] else 0.0


def test_greedy_takes_the_most_claims_per_cpu_hour_first_and_waits_for_after():
    claims = {c: make_claim(c) for c in ("x", "y", "z")}
    options = [Option("big", 10.0, {"x": 5, "y": 5}), Option("small", 1.0, {"x": 5}),
               Option("follow", 0.5, {"z": 2}, after=("big",))]
    steps = greedy(options, claims, {"x": 0, "y": 0, "z": 0}, step_power({"x": 5, "y": 5, "z": 2}))
    assert [s.name for s in steps] == ["small", "big", "follow"]   # follow is cheapest, but waits for big
    assert [s.gain for s in steps] == [1.0, 1.0, 1.0]              # big adds only y once small decided x
    assert steps[1].alone == 2.0 and steps[-1].cum_cpu_h == pytest.approx(11.5) and steps[-1].cum_expected == 3.0
    assert steps[-1].cum_sd == 0.0 and band(steps[-1]) == (3.0, 3.0)


def test_n_accumulates_over_campaigns_and_restarts_where_one_replaces_the_runs():
    a, b = Option("a", 1.0, {"x": 2}), Option("b", 1.0, {"x": 3}, replaces=True)
    assert n_after([a], "x", {"x": 4}) == 6 and n_after([a, b], "x", {"x": 4}) == 5 and n_after([], "x", {}) == 0


def test_the_band_is_the_bernoulli_variance_of_the_claims_decided():
    claims = {c: make_claim(c) for c in "wxyz"}
    steps = greedy([Option("o", 2.0, dict.fromkeys("wxyz", 1))], claims, {}, lambda claim, n: 0.5)
    assert steps[0].cum_expected == 2.0 and steps[0].cum_sd == pytest.approx(1.0)   # 4 x 0.5 x 0.5
    assert band(steps[0]) == pytest.approx((2 - 1.959964, 2 + 1.959964))
    one = greedy([Option("o", 2.0, {"x": 1})], claims, {}, lambda claim, n: 0.5)
    assert band(one[0])[0] == 0.0                               # never below no claim decided


def test_a_claim_without_a_power_model_counts_zero_and_is_counted_as_such():
    claims = {"x": make_claim("x")}
    steps = greedy([Option("o", 1.0, {"x": 3})], claims, {}, lambda claim, n: None)
    assert steps[0].gain == 0.0 and steps[0].unmodelled == 1 and steps[0].fed == 1


# --- the plan end to end on synthetic claims and records ------------------------------------------------
def test_the_plan_ranks_tables_and_draws_from_synthetic_claims_records_and_power(tmp_path):
    store = tmp_path / "results" / "A"
    write_record(store, "r1", 1000, 1000.0)                    # 1 CPU-s/epoch
    claims = [make_claim("c.a"), make_claim("c.b"), make_claim("c.z"), make_claim("c.done")]
    entries = [{"claim": c, "row": None, "verdict": "not run here"} for c in claims[:3]]
    entries.append({"claim": claims[3], "row": {"n": 3, "ours": 1.0}, "verdict": "matches the paper in number: yes"})
    plan = build_plan("test", results=tmp_path, catalogue_path=_catalogue(tmp_path, store),
                      power=step_power({"c.a": 2, "c.b": 5}), power_name="a step function", entries=entries,
                      usages=load_usages(tmp_path / "results"))
    assert list(plan.undecided) == ["c.a", "c.b", "c.z"] and plan.uncovered == []
    assert [s.name for s in plan.steps] == ["cheap", "dear", "second"]
    cheap, dear, second = plan.steps
    assert cheap.cpu_h == pytest.approx(2 * 360 / 3600) and cheap.gain == 1.0
    assert dear.cpu_h == pytest.approx(4.0) and dear.gain == 0.0        # c.b reaches 4 of the 5 it needs
    assert second.gain == 1.0 and plan.n_at("second", "c.b") == 5
    text = markdown(plan)
    assert ("| 1 | cheap | 2 | 0.20 | 1 | 1.00 | 1.00 +- 0.00 | 5 | 0.20 | 1.0 [1.0, 1.0] | `echo cheap` (to build first: "
            "synthetic) |") in text
    assert "- c.z: no scorer" in text and "Power: a step function." in text
    image = figure(plan, tmp_path / "plan.png")
    assert image.stat().st_size > 10_000
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{BEGIN}\nold\n{END}\noutro\n")
    write_block(doc, text)
    assert doc.read_text().startswith(f"intro\n{BEGIN}\n") and "old" not in doc.read_text() and doc.read_text().endswith("outro\n")


# --- a sweep campaign: its runs and its one command -----------------------------------------------------
def _sweep(tmp_path: Path, extra_epochs: int | None = None) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "plan_test", "base": str(REPO / "configs" / "canonical.yaml"),
        "overrides": {"model.init_args.d_model": 16, "model.init_args.n_layers": 1, "model.init_args.n_heads": 2,
                      "model.init_args.d_ff": 32, "data.init_args.p": 23, "trainer.max_epochs": 6},
        "grid": {"wd": [0.1, 1.0], "seed": [0, 1]},
        "profiles": {"test": {"overrides": {"grok.extra_epochs": extra_epochs}}}}, sort_keys=False))
    return path


def test_a_run_that_stops_after_grokking_trains_its_cells_median_epochs_else_the_campaigns_rule(tmp_path):
    sweep, store = _sweep(tmp_path, extra_epochs=20), tmp_path / "store"
    for seed, final in ((0, 300), (1, 500)):                  # lambda 0.1: median 400 epochs, 1 CPU-s each
        write_record(store, f"wd0.1_seed{seed}", final, float(final),
                     config={"model": {"weight_decay": 0.1}, "seed": seed, "precision": "32-true"})
    usages = load_usages(store)
    campaign = Campaign(name="c", feeds={}, sweep=str(sweep), profile="test", store=str(store),
                        add={"grid": {"seed": [2]}}, epochs={"like": {"wd": 0.1}})
    cost = campaign_cost(campaign, usages, {})                # lambda 1 has no record: as at 0.1 (the rule)
    assert cost.runs == 2 and cost.cpu_h == pytest.approx(2 * 400 * 1.0 / 3600)
    assert any("median final epoch of 2 records" in line for line in cost.lines)
    assert any("as at wd 0.1 (2 records)" in line for line in cost.lines)
    with pytest.raises(ConfigError, match="give the campaign an epochs rule"):
        campaign_cost(dataclasses.replace(campaign, epochs=None), usages, {})


def test_a_sweep_campaign_adds_runs_to_its_profile_and_names_the_command_that_runs_it(tmp_path, capsys):
    from reproduce.plan.__main__ import main

    sweep, store = _sweep(tmp_path), tmp_path / "store"
    catalogue = tmp_path / "campaigns.yaml"
    entry = {"sweep": str(sweep), "profile": "test", "store": str(store), "add": {"grid": {"seed": [2]}},
             "feeds": {"wd.bin_0.5": 2}}   # the command line reads the real claims table
    catalogue.write_text(yaml.safe_dump({"test": {"campaigns": {"more_seeds": entry}}}))
    campaign = load_catalogue("test", catalogue, claim_ids={"wd.bin_0.5"}).campaigns["more_seeds"]
    runs = campaign.runs()
    assert sorted(r.name.rsplit("_", 1)[0] for r in runs) == ["wd0.1_seed2", "wd1.0_seed2"]
    assert campaign.run_command("test") == "python -m reproduce.plan run more_seeds --profile test"
    with pytest.raises(SystemExit) as stop:
        main(["run", "more_seeds", "--profile", "test", "--catalogue", str(catalogue), "--dry-run"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and "2 to train" in out and "plan_test (profile test): 6 runs" in out
    assert not store.exists()                                  # a dry run writes nothing
    adopted = load_catalogue("test", catalogue, claim_ids={"wd.bin_0.5"})
    adopted.campaigns["more_seeds"] = dataclasses.replace(campaign, adopted=True)
    with pytest.raises(ConfigError, match="adopted: true, but its additions are not all in"):
        _check_adoption(adopted)


# --- the shipped catalogue --------------------------------------------------------------------------
def test_the_shipped_catalogue_covers_every_undecided_claim_and_its_adopted_flags_tell_the_truth():
    from reproduce.plan.planner import today
    from reproduce.plan.power import decided, field

    catalogue = load_catalogue("medium")
    _check_adoption(catalogue)  # every addition extends its profile, and `adopted` says whether it is there
    undecided = [field(e, "claim").id for e in today(REPO / "results" / "medium") if not decided(field(e, "verdict"))]
    uncovered = [c for c in undecided if not catalogue.feeding(c) and c not in catalogue.undecidable]
    assert uncovered == [], f"undecided claims no campaign feeds and none lists as undecidable: {uncovered}"
    for c in catalogue.campaigns.values():
        assert c.feeds or c.proposed, f"{c.name} feeds no claim"


# --- a stored sweep and a target as campaigns -----------------------------------------------------------
def _stored(tmp_path: Path) -> Path:
    """A store as `grok-lightning sweep run` leaves it (sweep.yaml, plan.json), no run trained."""
    from grok_lightning.sweep.grid import expand, load_sweep
    from grok_lightning.sweep.store import SweepStore

    sweep = load_sweep(_sweep(tmp_path), "test")
    store = tmp_path / "stored"
    SweepStore(store).initialize(sweep, expand(sweep))
    return store


def test_a_stored_campaign_models_the_stored_sweep_and_extends_it_run_for_run(tmp_path, capsys):
    from grok_lightning.sweep.grid import expand, load_sweep
    from reproduce.plan.__main__ import main
    from reproduce.plan.catalogue import stored_sweep_files

    store = _stored(tmp_path)
    (tmp_path / "sweep.yaml").write_text("name: edited\n")    # the sweep file changed since: the store still says
    catalogue = tmp_path / "campaigns.yaml"
    catalogue.write_text(yaml.safe_dump({"test": {"campaigns": {
        "running": {"stored": True, "store": str(store), "feeds": {"wd.bin_0.5": 4}},
        "more": {"stored": True, "store": str(store), "add": {"grid": {"seed": [2]}}, "after": ["running"],
                 "feeds": {"wd.bin_0.5": 2}}}}}))
    campaigns = load_catalogue("test", catalogue, claim_ids={"wd.bin_0.5"}).campaigns
    stored_ids = {e["run_id"] for e in json.loads((store / "plan.json").read_text())["runs"]}
    assert {r.run_id for r in campaigns["running"].runs()} == stored_ids and not campaigns["running"].add
    more = campaigns["more"].runs()
    assert sorted(r.name.rsplit("_", 1)[0] for r in more) == ["wd0.1_seed2", "wd1.0_seed2"]
    path, profile = stored_sweep_files(campaigns["more"], tmp_path / "derived")   # what `run` extends the store with
    assert {r.run_id for r in expand(load_sweep(path, profile))} == stored_ids | {r.run_id for r in more}
    assert campaigns["more"].run_command("test") == "python -m reproduce.plan run more --profile test"
    with pytest.raises(SystemExit) as stop:
        main(["run", "more", "--profile", "test", "--catalogue", str(catalogue), "--dry-run"])
    assert stop.value.code == 0 and "2 to train" in capsys.readouterr().out
    assert {e["run_id"] for e in json.loads((store / "plan.json").read_text())["runs"]} == stored_ids  # untouched
    with pytest.raises(ConfigError, match="profile come.s. from the stored sweep"):
        load_catalogue("test", _write(tmp_path, {"bad": {"stored": True, "store": str(store), "profile": "test",
                                                           "feeds": {"wd.bin_0.5": 1}}}), claim_ids={"wd.bin_0.5"})
    gone = Campaign(name="gone", feeds={}, stored=True, store=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="has no sweep.yaml"):
        gone.runs()


def _write(tmp_path: Path, campaigns: dict) -> Path:
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump({"test": {"campaigns": campaigns}}))
    return path


def test_a_target_campaign_is_costed_from_its_groups_and_trained_by_its_command(tmp_path):
    store = tmp_path / "results" / "A"
    write_record(store, "r1", 1000, 600.0)
    path = _write(tmp_path, {"fig": {"command": "make reproduce-fig8", "feeds": {"wd.bin_0.5": 2},
                                     "groups": [{"runs": 2, "horizon": 500, "cost_like": str(store)}]}})
    campaign = load_catalogue("test", path, claim_ids={"wd.bin_0.5"}).campaigns["fig"]
    assert campaign.runnable and not campaign.by_sweep and campaign.run_command("test") == "make reproduce-fig8"
    assert campaign_cost(campaign, load_usages(tmp_path / "results"), {}).cpu_h == pytest.approx(2 * 500 * 0.6 / 3600)


# --- the shipped power: the report's verdict rule, simulated by reproduce.report.oc ------------------------
def test_the_shipped_power_is_the_rules_simulated_probability():
    from reproduce.plan.power import rule_power
    from reproduce.report import Row, claim, decide_probability
    from reproduce.report.oc import REPS, model, our_spread, reject_probability

    level, one_run = claim("fig2.s_bar_init"), claim("fig6.pr_norm_20000")
    peak, entropy_p = claim("e12.A_peak.0.05"), claim("fig4.entropy_std_p")
    ours = Row("peak", 0.361, "medium", 8, claim=peak.id, ours_ci=(0.31, 0.412), horizon=10000)
    short = Row("peak", 0.361, "medium", 8, claim=peak.id, ours_ci=(0.31, 0.412), horizon=4000)
    p_row = Row("p", 0.052, "medium", 8, claim=entropy_p.id)
    power = rule_power([{"claim": level, "row": None}, {"claim": peak, "row": ours}, {"claim": entropy_p, "row": p_row}])
    # no row of ours: a faithful replicate of the paper, exactly decide_probability's default
    assert 0.0 < power(level, 3) == decide_probability(level.id, 3, reps=REPS) < 1.0
    # a value of one paper run: our runs' prediction interval needs 3
    assert power(one_run, 2) == 0.0 and power(one_run, 3) == 1.0
    # our estimate and measured spread at the claim's horizon are what is simulated; a shorter run is not
    sd = our_spread(ours, model(peak.id))
    assert power(peak, 4) == decide_probability(peak.id, 4, truth=0.361, sd=sd, reps=REPS)
    assert rule_power([{"claim": peak, "row": short}])(peak, 4) == decide_probability(peak.id, 4, reps=REPS)
    # a p-value the paper rejects: decided when ours rejects too, the power of its test at our effect
    assert 0.5 < power(entropy_p, 12) == reject_probability(entropy_p, 12, p_row) < 1.0
    assert power(level, 0) == 0.0 and power(level, 3) == rule_power([{"claim": level, "row": None}])(level, 3)


def test_the_report_and_the_planner_agree_on_how_many_runs_decide_a_claim():
    import re

    from reproduce.plan.power import rule_power
    from reproduce.report import Row, claim, judge
    from reproduce.report.oc import POWER, more_runs

    # Fig. 2's peak from 3 runs: an order statistic's 75% interval, too weak to decide
    peak = claim("fig2.s_bar_peak")
    r = Row("peak", 0.9784, "medium", 3, claim=peak.id, ours_ci=(0.9784, 0.9847), ci_level=0.75, horizon=2000)
    said = more_runs(r, peak, judge(r))
    n = int(re.match(r"about (\d+) runs would decide it", said)[1])
    power = rule_power([{"claim": peak, "row": r}])
    assert power(peak, n) >= POWER > power(peak, n - 1)
    assert n == 5      # 4 runs' range covers 88%, 5 runs' 94%



def test_a_backup_copy_of_a_run_folder_never_counts_as_its_final_run(tmp_path):
    from grok_lightning.sweep.grid import run_id_of
    from reproduce.plan.costs import final_run_ids

    config = {"seed_everything": 7, "trainer": {"max_epochs": 100}}
    entry = {"name": "r1", "run_id": run_id_of(config), "config": config}
    store = tmp_path / "results" / "A"
    stated = {"seed": 7, "max_epochs": 100}
    write_record(store, "r1", 40, 40.0, run_id=entry["run_id"], status="running", config=stated)
    write_record(store, "r1.bak", 100, 100.0, run_id=entry["run_id"], config=stated)   # a final copy beside it
    assert final_run_ids(str(store), [entry]) == set()
    write_record(store, "r1", 100, 100.0, run_id=entry["run_id"], config=stated)
    assert final_run_ids(str(store), [entry]) == {entry["run_id"]}
    write_record(store, "r1", 100, 100.0, run_id=entry["run_id"], config={"seed": 8})
    with pytest.raises(ConfigError, match=r"r1/record.json: not the run its folder plans \(config.seed=8"):
        final_run_ids(str(store), [entry])


def test_an_interrupted_run_with_its_last_ckpt_costs_only_the_rest_of_its_horizon(tmp_path):
    sweep, store = _sweep(tmp_path), tmp_path / "store"
    campaign = Campaign(name="c", feeds={}, sweep=str(sweep), profile="test", store=str(store),
                        add={"grid": {"seed": [2]}})
    for seed in (0, 1):                                       # 6 epochs at 1 CPU-s each
        write_record(store, f"wd0.1_seed{seed}", 6, 6.0,
                     config={"model": {"weight_decay": 0.1}, "seed": seed, "precision": "32-true"})
    pending = [r for r in campaign.runs() if r.config["seed_everything"] == 2]
    assert len(pending) == 2
    assert campaign_cost(campaign, load_usages(store), {}).cpu_h == pytest.approx(2 * 6 * 1.0 / 3600)
    stopped = pending[0]
    write_record(store, stopped.name, 4, 4.0, run_id=stopped.run_id, status="interrupted",
                 config={"seed": 2, "max_epochs": 6}, history={"epoch": [2, 4]})
    # no last.ckpt: a resume starts from epoch 0, so the whole horizon is still to pay
    assert campaign_cost(campaign, load_usages(store), {}).cpu_h == pytest.approx(2 * 6 * 1.0 / 3600)
    (store / "runs" / stopped.name / "checkpoints").mkdir()
    (store / "runs" / stopped.name / "checkpoints" / "last.ckpt").write_bytes(b"")
    cost = campaign_cost(campaign, load_usages(store), {})
    assert cost.runs == 2 and cost.cpu_h == pytest.approx((6 + 2) * 1.0 / 3600)
    assert any("resumed from epoch 4" in line for line in cost.lines)


def test_cost_like_is_an_assumption_the_campaigns_own_finished_runs_replace(tmp_path):
    sweep, store, other = _sweep(tmp_path), tmp_path / "store", tmp_path / "other"
    model = {"arch": "transformer", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "eval_every": 10}
    full = {"module": "GrokkingModule", "model": model, "precision": "32-true",
            "data": {"p": 23, "batch_size": 512, "full_batch": False, "train_fraction": 0.5}}
    write_record(other, "like", 6, 60.0, config={**full, "model": {**model, "d_model": 64}})   # 10 CPU-s/epoch
    write_record(other, "same_model", 6, 600.0, config=full)   # elsewhere: the stated assumption still rules
    campaign = Campaign(name="c", feeds={}, sweep=str(sweep), profile="test", store=str(store),
                        add={"grid": {"seed": [2]}}, cost_like={"model.init_args.d_model": 64})
    assert campaign_cost(campaign, load_usages(tmp_path), {}).cpu_h == pytest.approx(2 * 6 * 10.0 / 3600)
    write_record(store, "wd0.1_seed0", 6, 6.0, config={**full, "seed": 0})   # its own finished run: 1 CPU-s/epoch
    load_usages.cache_clear()
    cost = campaign_cost(campaign, load_usages(tmp_path), {})
    assert cost.cpu_h == pytest.approx(2 * 6 * 1.0 / 3600)


def test_a_partly_run_campaign_adds_the_runs_the_report_does_not_read_yet():
    """Final runs count in today's n only where the report reads them: a profile its target reads as it
    is, or adopted additions. A stored sweep (read once the profile switches to it) or additions not yet
    adopted still add every run, finished or not, to the n the campaign reaches."""
    from reproduce.plan.planner import counted_today

    base = Campaign(name="x", feeds={"fig3.final_test": 3}, sweep="a7_contrasts.yaml", profile="post_ln")
    assert counted_today(base)
    assert not counted_today(dataclasses.replace(base, stored=True, replaces=True, sweep=None, profile=None))
    assert not counted_today(dataclasses.replace(base, add={"grid": {"seed": [1]}}))
    assert counted_today(dataclasses.replace(base, add={"grid": {"seed": [1]}}, adopted=True))
    campaigns = load_catalogue("medium").campaigns
    assert not counted_today(campaigns["long_horizon_20k"]) and counted_today(campaigns["a7_post_ln"])
