"""E12's pre-grokking arm (B_pre and its placebo P_pre), the per-seed head draw, the paper's pooled
E12 claims, the groups' grok rows, and the author's a7 one-factor contrasts (synthetic records)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grok_lightning.sweep.grid import load_sweep
from reproduce.targets import fig8
from tests.test_fig8_fig4 import _history_record


def test_head_draws_are_per_seed_except_in_the_shipped_groups_that_shared_one(tmp_path):
    """Every B draws its heads from its run's seed; the shipped medium B and Bg keep the one draw
    (seed 0) their records used, so their stored plans still match what the runs compute."""
    peaks = {(7, 0.05): 1500, (11, 0.05): 2290}
    starts = {k: f"/a/{k[0]}/peak.ckpt" for k in peaks}

    def draw(group, profile, control="e12.yaml"):
        path = fig8.derived_sweep(group, profile, peaks, starts, tmp_path / f"{group}_{profile}_{control}", control=control)
        return {s.config["trainer"]["callbacks"][1]["init_args"]["seed"] for s in load_sweep(path, profile=profile).expand()}

    assert draw("B", "medium") == draw("Bg", "medium") == {0}
    assert draw("B", "paper") == draw("Bg", "paper") == draw("B", "smoke", "interventions.yaml") == {"run"}


def test_the_pre_grokking_arm_starts_every_seed_at_the_pre_grokking_argmax(tmp_path):
    """B_pre (heads drawn per seed) and its placebo P_pre start from peak_before_grok.ckpt on every
    seed and keep last.ckpt. The checkpoint a run starts from is a placement key, not part of its
    identity: P_pre has P's run ids (another store; its records' started_from gives the epoch)."""
    peaks = {(7, 0.05): 2370, (31, 0.05): 2310}
    pre = {(7, 0.05): 2340, (31, 0.05): 2310}
    starts = {k: f"/a/{k[0]}/peak_before_grok.ckpt" for k in pre}
    sweeps = {g: load_sweep(fig8.derived_sweep(g, "medium", pre if g.endswith("_pre") else peaks, starts,
                                               tmp_path / g, control="e12.yaml"), profile="medium")
              for g in ("B_pre", "P_pre", "P")}
    assert sweeps["B_pre"].keep_checkpoints and sweeps["P_pre"].keep_checkpoints and not sweeps["P"].keep_checkpoints
    for spec in sweeps["B_pre"].expand():
        callback = spec.config["trainer"]["callbacks"][1]["init_args"]
        seed = spec.config["seed_everything"]
        assert (callback["epoch"], callback["seed"], callback["n_heads"]) == (pre[(seed, 0.05)], "run", 2)
        assert spec.config["run"]["start_from"] == starts[(seed, 0.05)]
    placebo = {s.config["seed_everything"]: s for s in sweeps["P_pre"].expand()}
    assert all(len(s.config["trainer"]["callbacks"]) == 1 and s.config["data"]["init_args"]["order_seed"] == seed
               + fig8.PLACEBO_ORDER_OFFSET for seed, s in placebo.items())
    shipped_p = {s.config["seed_everything"]: s.run_id for s in sweeps["P"].expand()}
    assert {seed: s.run_id for seed, s in placebo.items()} == shipped_p


def _arm_record(seed, values, grok=150, started=None, cpu=None):
    record = _history_record(0.05, seed, values, grok=grok)
    if started is not None:
        record.update(started_from={"epoch": started}, cpu_time_s=cpu, final_epoch=200)
    return record


def test_the_pre_grokking_arm_scores_partial_groups_and_costs_missing_ones(tmp_path):
    """Scored on the pairs present (skipping k evaluations moves the window), a group without runs
    reads "not run here" with its epochs and CPU-hours at the rate measured in B, C and P."""
    from reproduce.report import verdict
    from reproduce.targets.e12_pre import measured_rate, missing_cost, pre_arm_rows, score_pre_arm

    seeds = range(6)
    rng = np.random.default_rng(2)
    e_pre = {(s, 0.05): 140 for s in seeds}
    # A's later peak at 190; B_pre jumps at the first evaluation after E_pre (150) only, then sits below A
    groups = {"A": [_arm_record(s, {140: 0.3, 190: 0.25 + 0.01 * s}) for s in seeds],
              "B_pre": [_arm_record(s, {140: 0.3, 150: 0.6, 190: 0.20 + 0.01 * s + rng.normal(0, 0.004)}, grok=160)
                        for s in seeds[:5]],
              "P_pre": []}
    scored = score_pre_arm(groups, e_pre, n_bootstrap=200)
    test = {(t["contrast"], t["skip"], t["outcome"]): t for t in scored["tests"]}
    assert test[("B_pre-A", 0, "peak_ent")]["mean_diff"] == pytest.approx(0.6 - np.mean([0.25 + 0.01 * s for s in seeds[:5]]))
    assert test[("B_pre-A", 1, "peak_ent")]["mean_diff"] == pytest.approx(-0.05, abs=0.01)  # the jump skipped
    assert test[("B_pre-A", 0, "grok_ep")]["mean_diff"] == pytest.approx(10) and test[("B_pre-A", 0, "grok_ep")]["n"] == 5
    rate = measured_rate({"B": [_arm_record(s, {}, started=100, cpu=120.0) for s in seeds], "C": [], "P": []})
    assert rate["cpu_s_per_epoch"] == pytest.approx(1.2)
    missing = {g: missing_cost(g, groups[g], e_pre, 200, rate) for g in ("B_pre", "P_pre")}
    assert (missing["B_pre"]["runs_missing"], missing["B_pre"]["epochs"]) == (1, 60)
    assert missing["P_pre"]["cpu_h"] == pytest.approx(6 * 60 * 1.2 / 3600)
    rows = {r["quantity"]: r for r in pre_arm_rows(scored, "medium", missing)}
    d = rows["E12 B_pre-A: Cohen's d of peak sigma_H (summed over layers) on (E_pre, end of run] at lambda 0.05"]
    assert d["claim"] == "e12.B-A.d.0.05" and d["sensitivity"] and d["n"] == 5 and "B_pre has 5 of 6" in d["note"]
    skipped = rows["sensitivity (first 1 evaluation after E_pre skipped): E12 B_pre-A: mean difference of peak sigma_H "
                   "(summed over layers) on (E_pre, end of run] at lambda 0.05"]
    assert skipped["ours"] == pytest.approx(-0.05, abs=0.01)
    shift = rows["E12 B_pre-A: mean difference of the grok epoch at lambda 0.05"]
    assert shift["claim"] == "e12.B-A.grok_epoch.0.05" and not shift.get("sensitivity") and shift["horizon_final"]
    assert not verdict(shift).startswith("not run here")
    placebo = rows["E12 P_pre-A: Cohen's d of peak sigma_H (summed over layers) on (E_pre, end of run] at lambda 0.05"]
    assert not placebo.get("claim")  # a contrast the paper does not report: context, no verdict
    assert placebo["not_run"].startswith("group P_pre has 0 of 6 runs; the 6 missing are 360 epochs")
    assert "CPU-h at the 1.20 CPU-s per epoch" in placebo["not_run"]
    count = rows["E12 B_pre (B before grokking): grokked at lambda 0.05"]
    assert count["claim"] == "e12.grok_B.0.05" and count["ours"] == 1.0 and count["n"] == 5


def test_e12_pooled_claims_are_scored_over_both_lambdas_or_say_what_is_missing(tmp_path):
    """The paper pools lambda 0.015 and 0.05 (A's peak, min s_bar, grok epoch, every group's grok
    count, B - A's grok epoch, the contrasts): with both strata the pooled rows are computed over
    every pair; with one, they read "not run here" with the other stratum's cost."""
    from reproduce.report import verdict

    seeds = range(4)

    def groups(wds):
        return {"A": [_history_record(w, s, {140: 0.4, 170: 0.2 + 0.01 * s}) for w in wds for s in seeds],
                "B": [_history_record(w, s, {140: 0.4, 170: 0.3 + 0.01 * s * s}, grok=170) for w in wds for s in seeds],
                "C": [], "P": [], "R": []}

    both = groups((0.015, 0.05))
    for r in both["A"]:
        r.update(cpu_time_s=200.0, final_epoch=200)
    fig8.analyse(both, {(s, w): 140 for w in (0.015, 0.05) for s in seeds}, "medium", tmp_path / "both", n_bootstrap=200,
                 planned={"A": 8, "B": 8, "C": 8, "P": 8, "R": 1})
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "both" / "rows.json").read_text())}
    assert rows["E12 control A: grokked at lambda pooled"]["claim"] == "e12.grok_A"
    assert rows["E12 control A: grokked at lambda pooled"]["n"] == 8
    assert rows["E12 control A: peak sigma_H summed over layers (the cohort's reading) at lambda pooled"]["claim"] == \
        "e12.A_peak.pooled"
    assert rows["E12 B-A: Cohen's d of peak_ent on (E, end of run] at lambda pooled"]["n"] == 8
    shift = rows["E12 B-A: mean difference of the grok epoch at lambda pooled"]
    assert shift["claim"] == "e12.B-A.grok_epoch" and shift["ours"] == pytest.approx(20) and shift["sensitivity"]
    assert not shift.get("invalid")  # E (140) precedes A's grok epoch (150)
    one = groups((0.05,))
    for r in one["A"]:
        r.update(cpu_time_s=200.0, final_epoch=200)
    fig8.analyse(one, {(s, 0.05): 140 for s in seeds}, "medium", tmp_path / "one", n_bootstrap=200,
                 planned={"A": 4, "B": 4, "C": 4, "P": 4, "R": 1})
    rows = {r.get("claim"): r for r in json.loads((tmp_path / "one" / "rows.json").read_text()) if r.get("claim")}
    for claim in ("e12.grok_A", "e12.grok_C", "e12.A_peak.pooled", "e12.B-A.d.pooled", "e12.B-A.grok_epoch"):
        assert verdict(rows[claim]).startswith("not run here (the paper pools lambda 0.015 and 0.05; these runs have "
                                               "lambda 0.05 only; its control group alone (4 seeds x 10,000 epochs) is "
                                               "about 11 CPU-h at the 1.00 CPU-s per epoch"), claim


def test_e12_group_grok_rows_are_invalid_where_e_follows_grokking(tmp_path):
    """A group that starts after A grokked keeps A's grok epoch: its grok count and B - A's grok
    epoch are invalid tests there (and B's are sensitivity rows: B_pre scores those claims)."""
    from reproduce.report import verdict

    seeds = range(4)
    groups = {"A": [_history_record(0.05, s, {170: 0.4}) for s in seeds],
              "B": [_history_record(0.05, s, {180: 0.5}) for s in seeds],
              "C": [_history_record(0.05, s, {180: 0.3}) for s in seeds], "P": [], "R": []}
    fig8.analyse(groups, {(s, 0.05): 170 for s in seeds}, "medium", tmp_path, n_bootstrap=200,
                 planned={"A": 4, "B": 4, "C": 4, "P": 4, "R": 1})
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    for quantity, sensitivity in (("E12 group B: grokked at lambda 0.05", True), ("E12 group C: grokked at lambda 0.05", False),
                                  ("E12 B-A: mean difference of the grok epoch at lambda 0.05", True)):
        assert verdict(rows[quantity]) == ("invalid test: E follows A's grokking in 4 of 4 seeds: a group's grok epoch "
                                           "there is A's by construction"), quantity
        assert bool(rows[quantity].get("sensitivity")) == sensitivity


def test_e12_pools_another_targets_runs_of_as_model_into_the_grok_rows():
    """Fig. 5's bin at A's lambda trains A's own runs on its seeds (the same configuration but the
    horizon): pooled, only the other seeds are added."""
    from reproduce.targets.e12_scoring import same_model_runs

    control = [_history_record(0.05, s, {}, grok=150) for s in (7, 11)]
    twin = json.loads(json.dumps(control[0]))
    twin["config"]["max_epochs"] = 5000
    other_seed = json.loads(json.dumps(control[1]))
    other_seed["config"].update(seed=31, max_epochs=5000)
    other_model = json.loads(json.dumps(control[1]))
    other_model["config"].update(seed=42)
    other_model["config"]["model"]["n_heads"] = 2
    pooled = same_model_runs(control, [twin, other_seed, other_model], "Fig. 5")
    assert pooled["same"] == [(7, 0.05)] and pooled["grok_differs"] == []
    assert [r["config"]["seed"] for r in pooled["added"]] == [31]


def test_a7_contrasts_compare_runs_that_differ_in_one_factor_alone():
    """Cohen's d of peak sigma_H, add vs mul (and high vs low d_model) on runs equal in all else;
    where no two groups differ in the factor alone, the row says what it needs."""
    from reproduce.report import verdict
    from reproduce.targets.a7 import a7_rows
    from tests.test_regimes import make_record

    def run(seed, peak, operation="add", d_model=128):
        record = make_record(1.0, seed, grok_epoch=150, operation=operation)
        record["config"]["model"]["d_model"] = d_model
        record["history"]["entropy_std"] = [0.01 if e <= 100 else peak for e in record["history"]["epoch"]]
        return record

    add = [run(s, 0.10 + 0.01 * s) for s in range(3)]
    mul = [run(s, 0.05 + 0.01 * s, operation="mul") for s in range(3)]
    wide = [run(s, 0.20 + 0.02 * s, d_model=256) for s in range(2)]
    rows = {r["claim"]: r for r in a7_rows(add + mul + wide, "medium", "Fig. 4")}
    expected = 0.05 / np.std([0.10, 0.11, 0.12], ddof=1)
    assert rows["a7.add_vs_mul"]["ours"] == pytest.approx(expected) and rows["a7.add_vs_mul"]["n"] == 6
    assert "add (3) vs mul (3)" in rows["a7.add_vs_mul"]["note"]
    high_low = rows["a7.dmodel_high_vs_low"]
    assert high_low["n"] == 5 and high_low["ours"] > 0 and "256 (2) vs 128 (3)" in high_low["note"]
    assert verdict(rows["a7.lnpre_vs_lnpost"]) == (
        "not run here (no two groups of the runs of Fig. 4 differ in the LayerNorm position alone: needs post-LN runs; "
        "python -m reproduce.plan run a7_post_ln --profile medium trains them (configs/sweeps/a7_contrasts.yaml, "
        "profile post_ln))")
