"""The E12 protocol's derived sweeps and the analysis halves of Fig. 8 and Fig. 4 (synthetic records)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grok_lightning.sweep.grid import load_sweep
from reproduce.report import verdict
from reproduce.report.rows import paper_value
from reproduce.targets import fig4, fig8
from tests.test_regimes import make_record


def test_derived_sweeps_start_from_the_controls_peak_and_intervene_there(tmp_path):
    peaks = {(7, 1.0): 150, (11, 1.0): 170}
    starts = {k: f"/somewhere/{k[0]}/peak.ckpt" for k in peaks}
    ids = {}
    for group, cls in (("B", "HeadReinit"), ("C", "WeightNormClip"), ("Cm", "WeightNormClip")):
        path = fig8.derived_sweep(group, "smoke", peaks, starts, tmp_path / group)
        runs = load_sweep(path, profile="smoke").expand()
        assert len(runs) == 2
        for spec in runs:
            source, callback = spec.config["trainer"]["callbacks"]
            seed = spec.config["seed_everything"]
            assert source["class_path"].endswith("InterventionSource") and source["init_args"]["save_peak"] is False
            assert callback["class_path"].endswith(cls)
            assert callback["init_args"]["epoch"] == peaks[(seed, 1.0)]
            assert spec.config["run"]["start_from"] == starts[(seed, 1.0)]
            assert spec.config["model"]["init_args"]["n_layers"] == 2  # the smoke profile still applies
        if group == "B":
            assert callback["init_args"]["n_heads"] == 1  # the smoke override of head_reinit.yaml
        if group.startswith("C"):
            assert callback["init_args"]["reference"] == ("matrices" if group == "Cm" else "trajectory")
        ids[group] = sorted(spec.run_id for spec in runs)
    # where the control's checkpoints live does not change what a run is
    moved = fig8.derived_sweep("B", "smoke", peaks, {k: "/elsewhere/peak.ckpt" for k in peaks}, tmp_path / "moved")
    moved_runs = load_sweep(moved, profile="smoke").expand()
    assert sorted(spec.run_id for spec in moved_runs) == ids["B"]
    # ... nor the run folders, so shipped records are found from any clone
    assert sorted(spec.name for spec in moved_runs) == sorted(
        spec.name for spec in load_sweep(tmp_path / "B" / "sweep_file.yaml", profile="smoke").expand())
    assert not any("somewhere" in spec.name or "startfrom" in spec.name for spec in moved_runs)


@pytest.mark.parametrize("profile, latest", [("smoke", 500), ("medium", 700)])
def test_every_group_keeps_a_300_epoch_window_after_e(profile, latest):
    spec = load_sweep(Path(fig8.SWEEPS) / "interventions.yaml", profile=profile).expand()[0]
    source = spec.config["trainer"]["callbacks"][0]["init_args"]
    assert source.get("before_epoch") == latest
    if latest is not None:
        assert spec.config["trainer"]["max_epochs"] - latest >= 300


def _history_record(wd, seed, values: dict, grok=150):
    """A run whose sigma_H is 0.02 except at the given {epoch: value} (two layers, each carrying
    half of it, so that the summed reading equals the given value); s_bar 0.9 but 0.8 at 160."""
    record = make_record(wd, seed, grok_epoch=grok, horizon=200)
    epochs = record["history"]["epoch"]
    record["history"]["entropy_std"] = [values.get(e, 0.02) / 2 for e in epochs]
    for layer in (0, 1):
        record["history"][f"layer_{layer}/entropy_std"] = [values.get(e, 0.02) / 2 for e in epochs]
    record["history"]["mean_similarity"] = [0.8 if e == 160 else 0.9 for e in epochs]
    record["final_test_acc"] = 1.0
    return record


def test_e12_derived_sweeps_add_the_placebo_and_the_replay(tmp_path):
    peaks = {(7, 0.05): 1500, (11, 0.05): 2290}
    starts = {k: f"/a/{k[0]}/peak.ckpt" for k in peaks}
    placebo = load_sweep(fig8.derived_sweep("P", "medium", peaks, starts, tmp_path / "P", control="e12.yaml"),
                         profile="medium").expand()
    assert sorted(s.config["data"]["init_args"]["order_seed"] for s in placebo) == [7 + fig8.PLACEBO_ORDER_OFFSET,
                                                                                     11 + fig8.PLACEBO_ORDER_OFFSET]
    assert all(len(s.config["trainer"]["callbacks"]) == 1 for s in placebo)  # no intervention
    assert all(s.config["trainer"]["max_epochs"] == 4000 and s.config["model"]["init_args"]["n_layers"] == 4 for s in placebo)
    (replay,) = load_sweep(fig8.derived_sweep("R", "medium", peaks, starts, tmp_path / "R", control="e12.yaml"),
                           profile="medium").expand()
    assert replay.config["seed_everything"] == 7 and replay.config["trainer"]["max_epochs"] == 1500 + fig8.REPLAY_EPOCHS
    assert replay.config["run"]["start_from"] == starts[(7, 0.05)] and "order_seed" not in replay.config["data"]["init_args"]
    (b, *_) = load_sweep(fig8.derived_sweep("B", "medium", peaks, starts, tmp_path / "B", control="e12.yaml"),
                         profile="medium").expand()
    assert b.config["trainer"]["callbacks"][1]["class_path"].endswith("HeadReinit")
    assert b.config["trainer"]["callbacks"][1]["init_args"]["n_heads"] == 2  # 2 of the paper model's 8 heads
    (shrunk, *_) = load_sweep(fig8.derived_sweep("B", "medium", peaks, starts, tmp_path / "Bs"), profile="medium").expand()
    assert shrunk.config["trainer"]["callbacks"][1]["init_args"]["n_heads"] == 1  # 1 of the shrunk model's 4


def test_e12_scores_every_group_on_the_same_window_and_reading(tmp_path):
    from reproduce.targets.e12_scoring import score_pairs

    seeds = range(6)
    rng = np.random.default_rng(0)
    # E = 150 is A's maximum (0.5, larger than anything after it); every group is read on (150, end]
    groups = {"A": [_history_record(1.0, s, {150: 0.5, 170: 0.10 + 0.01 * s}) for s in seeds],
              "B": [_history_record(1.0, s, {150: 0.5, 160: 0.06 + 0.01 * s + rng.normal(0, 0.002)}) for s in seeds],
              "C": [_history_record(1.0, s, {150: 0.5, 160: 0.10 + 0.01 * s + rng.normal(0, 0.01)}) for s in seeds],
              "P": [_history_record(1.0, s, {150: 0.5, 170: 0.09 + 0.01 * s + rng.normal(0, 0.002)}) for s in seeds],
              "R": [_history_record(1.0, 0, {150: 0.5, 170: 0.10})]}
    groups["C"][0]["status"], groups["C"][0]["excluded_reason"] = "excluded", "non-finite gradient"
    peaks = {(s, 1.0): 150 for s in seeds}
    scored = score_pairs(groups, peaks, n_bootstrap=200)

    def test(contrast, variant="headline", outcome="peak_ent"):
        return next(t for t in scored["tests"] if (t["contrast"], t["variant"], t["outcome"]) == (contrast, variant, outcome))

    ba = test("B-A")
    assert ba["n"] == 6 and ba["mean_diff"] == pytest.approx(-0.04, abs=0.005) and ba["cohen_d"] < -3
    assert ba["cohen_d_ci"][0] < ba["cohen_d"] < ba["cohen_d_ci"][1] and ba["reject_bonferroni"] is True
    assert test("B-A", "released")["cohen_d"] == pytest.approx(ba["cohen_d"])  # L times the same numbers
    assert test("B-A", "released")["mean_diff"] == pytest.approx(ba["mean_diff"] / 2)
    assert test("P-A")["mean_diff"] == pytest.approx(-0.01, abs=0.003)  # the placebo's regression to the mean
    assert test("B-P")["mean_diff"] == pytest.approx(-0.03, abs=0.005)
    # the placebo's contrasts are their own Bonferroni family: 3 contrasts x the outcomes tested
    placebo = [t for t in scored["tests"] if t["variant"] == "headline" and t.get("family") == "placebo"]
    assert {t["contrast"] for t in placebo} == {"P-A", "B-P", "C-P"} and ba["family"] == "paper"
    bp = test("B-P")
    assert bp["p_bonferroni"] == pytest.approx(min(1.0, bp["p_value_t"] * len(placebo)))
    ca = test("C-A")
    assert ca["n"] == 5 and ca["n_dropped"] == 1  # the excluded run drops its pair, never silently
    assert scored["excluded"]["C"] == ["non-finite gradient"]
    assert [c["E_before_grok"] for c in scored["controls"]] == [False] * 6  # E 150 is not before grokking at 150
    assert scored["controls"][0]["peak_sum_layers"] == pytest.approx(0.5)
    per_pair = scored["per_pair"]  # each pair's outcomes, which the contrasts are differences of
    assert set(per_pair) == {"A", "B", "C", "P"} and "0_1" not in per_pair["C"] and len(per_pair["C"]) == 5
    diffs = [per_pair["B"][k]["peak_ent"] - per_pair["A"][k]["peak_ent"] for k in per_pair["A"]]
    assert np.mean(diffs) == pytest.approx(ba["mean_diff"])
    (replay,) = scored["replay"]
    assert replay["identical"] and replay["epochs_compared"] > 0
    window = score_pairs(groups, peaks, n_bootstrap=200, window=15)  # (150, 165]
    ba15 = next(t for t in window["tests"] if (t["contrast"], t["variant"], t["outcome"]) == ("B-A", "headline", "peak_ent"))
    assert ba15["mean_diff"] == pytest.approx(0.065, abs=0.005)  # A: 0.02 (its 170 peak is outside); B: 0.06 + 0.01 s


def test_e12_untouched_heads_read_a_and_b_on_the_same_heads():
    from grok_lightning.stats.interventions import e12_outcomes, reinitialised_heads

    record = make_record(1.0, 7, grok_epoch=150, horizon=200)
    epochs = record["history"]["epoch"]
    for head, value in enumerate([0.1, 0.2, 0.3, 5.0]):  # head 3 is the re-initialised, diffuse one
        record["history"][f"head_entropy/layer_0/head_{head}"] = [value] * len(epochs)
    record["interventions"] = [{"type": "head_reinit", "heads": {"0": [3]}}]
    heads = reinitialised_heads(record)
    assert heads == {0: [3]}
    untouched = e12_outcomes(record, 100, reading="untouched", skip_heads=heads)["peak_ent"]
    assert untouched == pytest.approx(np.std([0.1, 0.2, 0.3]))
    assert e12_outcomes(record, 100, reading="untouched")["peak_ent"] > 2


def test_fig4_analyse_fits_and_tests_against_the_null(tmp_path):
    records = []
    for n_heads, value in ((16, 0.04), (8, 0.06), (4, 0.09), (2, 0.095)):  # d 64: d/H 4, 8, 16, 32
        for seed in (7, 11):
            r = _history_record(1.0, seed, {150: value + 0.002 * seed})
            r["config"]["model"].update(n_heads=n_heads)
            records.append(r)
    for seed in (7, 11, 31):
        r = _history_record(1.0, seed, {150: 0.05 + 0.001 * seed})
        r["config"]["data"]["random_labels"] = True
        records.append(r)
    summary = fig4.analyse(records, "smoke", tmp_path, n_permutations=500)
    assert sorted(set(summary["dh"])) == [4, 8, 16, 32] and len(summary["null"]) == 3
    assert summary["fit"]["best"] in ("saturating_exp", "log", "linear", "power")
    assert summary["cohens_d"] > 1 and summary["permutation"]["p"] < 0.5
    # the unbiased spread lifts small-H bins most: H = 16 by 1.05, H = 2 by 1.77
    ratio = np.asarray(summary["peak_unbiased"]) / np.asarray(summary["peak"])
    assert ratio[np.asarray(summary["dh"]) == 4] == pytest.approx(1.05, abs=0.005)
    assert ratio[np.asarray(summary["dh"]) == 32] == pytest.approx(1.772, abs=0.005)
    assert summary["fit_unbiased"] is not None
    assert (tmp_path / "fig4_head_width.png").exists()


def _width_run(n_heads: int, seed: int, shape, random_labels: bool = False) -> dict:
    """A lambda = 1, 3,000-epoch run of the paper's d128 x 4-layer model whose sigma_H follows ``shape(epoch)``."""
    record = make_record(1.0, seed, grok_epoch=None if random_labels else 130, horizon=3000)
    record["config"]["model"].update(d_model=128, n_layers=4, n_heads=n_heads)
    record["config"].update(max_epochs=3000, precision="bf16-mixed")
    record["config"]["data"]["random_labels"] = random_labels
    epochs = list(range(0, 3001, 10))
    record["history"] = {"epoch": epochs, "entropy_std": [shape(e) for e in epochs], "mean_similarity": [0.9] * len(epochs)}
    return record


def test_fig4_at_the_papers_width_reports_missing_bins_and_whether_maxima_are_peaks(tmp_path):
    bump = lambda e: 0.03 + (0.1 if 1000 <= e <= 1200 else 0.0) + 0.001 * (e % 30 == 0)  # noqa: E731
    records = [_width_run(4, 7, bump), _width_run(32, 7, lambda e: 0.02 + 0.00002 * e),  # rises to the end
               _width_run(8, 7, lambda e: 0.03 + 0.001 * (e % 30 == 0), random_labels=True)]
    h = records[0]["history"]  # per-layer columns: the max_layer reading takes the higher layer
    h["layer_0/entropy_std"], h["layer_1/entropy_std"] = [2 * v for v in h["entropy_std"]], [0.5 * v for v in h["entropy_std"]]
    h["layer_0/entropy_mean"], h["layer_1/entropy_mean"] = [1.0] * len(h["epoch"]), [1.0] * len(h["epoch"])
    planned = [(32, False), (32, False), (4, False), (16, False), (16, True), (16, True)]
    summary = fig4.analyse(records, "medium", tmp_path, n_permutations=200, planned=planned)
    assert summary["invalid"] is None  # the paper's model over the Phase-2 window: the paper's statistic
    assert summary["unrun_bins"] == [[16, False]]
    runs = {(r["n_heads"], r["random_labels"]): r for r in summary["runs"]}
    assert runs[(4, False)]["peak"]["stands_out"] and 1000 <= runs[(4, False)]["peak"]["peak_epoch"] <= 1200
    assert runs[(32, False)]["peak"]["on_edge"] and runs[(32, False)]["peak"]["peak_epoch"] == 3000
    assert not runs[(8, True)]["peak"]["stands_out"]
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    d16 = rows["peak sigma_H at d/H = 16 (bin mean, t 95% CI; unbiased spread in the note)"]
    assert d16["ours"] is None and d16["note"].startswith("0 of 1 planned runs finished")
    d32 = rows["peak sigma_H at d/H = 32 (bin mean, t 95% CI; unbiased spread in the note)"]
    assert d32["ours"] == pytest.approx(0.131, abs=0.002) and d32["note"].startswith("1 of 2 planned runs finished")
    assert "does not stand out" in d32["note"] and d32["invalid"] is None
    alt = rows["peak sigma_H at d/H = 32, max_layer reading (alternative; bin mean, t 95% CI)"]
    assert alt["ours"] == pytest.approx(0.262, abs=0.004) and alt["n"] == 1
    assert not any(q.startswith("peak sigma_H at d/H = 4, max_layer") for q in rows)  # no per-layer columns there
    # pooled over both layers' heads (equal layer means): sqrt((2^2 + 0.5^2) / 2) times the released value
    pooled = rows["peak sigma_H at d/H = 32, pooled reading (alternative; bin mean, t 95% CI)"]
    assert pooled["ours"] == pytest.approx(0.131 * np.sqrt(2.125), abs=0.003) and pooled["n"] == 1
    assert not any(q.startswith("random-label null peak sigma_H (mean), pooled") for q in rows)  # the null has none
    null_row = rows["random-label null peak sigma_H (mean)"]
    assert null_row["n"] == 1 and null_row["note"].startswith("1 of 2 planned runs finished")
    assert rows["AIC-preferred d/H model"]["note"].count("not run here yet: no finished run at d/H 16") == 1
    assert (tmp_path / "fig4_curves.png").stat().st_size > 10_000
    assert "| 4 | 32 | real | 7 | bf16-mixed | 3000 | 130 | 0.131 (" in (tmp_path / "fig4_runs.md").read_text()


def test_fig4_with_one_run_per_bin_says_why_the_null_test_is_blank(tmp_path):
    flat = lambda e: 0.03 + 0.001 * (e % 30 == 0)  # noqa: E731
    records = [_width_run(8, 7, flat), _width_run(4, 7, flat), _width_run(8, 7, flat, random_labels=True)]
    planned = [(16, False), (16, False), (32, False), (16, True), (16, True)]
    summary = fig4.analyse(records, "medium", tmp_path, n_permutations=200, planned=planned)
    assert summary["unrun_bins"] == [] and summary["permutation"] is None and summary["cohens_d"] is None
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    for quantity in ("real vs null: permutation p (mean difference)", "real vs null: Cohen's d (exact noncentral-t 95% CI)"):
        assert rows[quantity]["ours"] is None
        assert rows[quantity]["note"].startswith("needs >= 2 finished runs on each side (real task at d/H 16: 1, null: 1); "
                                                 "3 of 5 planned runs finished")
    assert "3 of 5 planned runs finished" in rows["AIC-preferred d/H model"]["note"]


def test_fig4_null_test_with_too_few_runs_to_reject_is_an_invalid_test(tmp_path):
    """2 real vs 2 null runs: no split gives p below 2/6, so the p row is an invalid test (never
    evidence either way); 3 vs 5 can reach 1/56 and is judged as usual. Cohen's d stays an estimate."""
    real = lambda e: 0.06 + 0.001 * (e % 30 == 0)  # noqa: E731
    null = lambda e: 0.03 + 0.001 * (e % 30 == 0)  # noqa: E731
    quantity = "real vs null: permutation p (mean difference)"
    for n_real, n_null, can_reject in ((2, 2, False), (3, 5, True)):
        records = [_width_run(8, s, lambda e, s=s: real(e) + 1e-4 * s) for s in range(n_real)]
        records += [_width_run(8, s, lambda e, s=s: null(e) + 1e-4 * s, random_labels=True) for s in range(n_null)]
        out = tmp_path / f"{n_real}v{n_null}"
        fig4.analyse(records, "medium", out, n_permutations=2000)
        rows = {r["quantity"]: r for r in json.loads((out / "rows.json").read_text())}
        assert rows[quantity]["ours"] is not None and rows[quantity]["note"].startswith("mean difference +0.0")
        assert (rows[quantity]["invalid"] is None) == can_reject
        assert verdict(rows[quantity]).startswith("invalid test") != can_reject
        d_row = rows["real vs null: Cohen's d (exact noncentral-t 95% CI)"]
        assert d_row["invalid"] is None and d_row["ours_ci"][0] < d_row["ours"] < d_row["ours_ci"][1]
    two = {r["quantity"]: r for r in json.loads((tmp_path / "2v2" / "rows.json").read_text())}
    assert "smallest attainable p is 0.333 > 0.05" in two[quantity]["invalid"]


@pytest.mark.parametrize("real_level, expected", [
    (0.06, "same decision: both p below 0.05"),  # real above null, as the paper
    (0.01, "not reproduced: p"),  # real below null: significant, but with the opposite sign
    (0.03, "inconclusive: our p"),  # real = null: no rejection, which is no evidence of no effect
])
def test_fig4_null_test_p_is_judged_by_its_decision_and_sign(tmp_path, real_level, expected):
    """A p's size follows the number of runs (ours 3 + 5, the paper's 12 + 15), so the p row compares
    whether each test rejects at 0.05 and in which direction, never the p values in number."""
    records = [_width_run(8, s, lambda e, s=s: real_level + 1e-3 * s + 1e-4 * (e % 30 == 0)) for s in range(3)]
    records += [_width_run(8, s, lambda e, s=s: 0.03 + 1e-3 * s + 1e-4 * (e % 30 == 0), random_labels=True)
                for s in range(5)]
    fig4.analyse(records, "medium", tmp_path, n_permutations=2000)
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    assert verdict(rows["real vs null: permutation p (mean difference)"]).startswith(expected)


def test_fig4_on_a_smaller_model_or_a_short_horizon_is_an_invalid_test(tmp_path):
    short = _width_run(8, 7, lambda e: 0.03)
    short["config"]["max_epochs"] = 600
    assert "end before Phase 2" in fig4.invalid_reason([short])
    small = _width_run(4, 7, lambda e: 0.03)
    small["config"]["model"].update(d_model=64, n_layers=2)
    reason = fig4.invalid_reason([small])
    assert "paper 128 x 4" in reason and "does not stand out" in reason


def test_fig4_medium_plans_the_papers_widths_and_the_null():
    assert sorted(set(fig4.planned_bins("medium"))) == [(4, False), (8, False), (16, False), (16, True), (32, False)]


def test_fig10_analyse_fits_each_architecture(tmp_path):
    from reproduce.targets import fig10

    records = []
    for arch, kwargs in (("mlp", {}), ("mamba", {"expand": 2})):
        for wd in (0.1, 0.3, 1.0, 3.0):
            for seed in range(3):
                grok = wd >= 1.0 or (wd == 0.3 and seed == 0)
                r = make_record(wd, seed, grok_epoch=150 if grok else None, n_params=1000)
                r["config"]["model"].update(arch=arch, arch_kwargs=kwargs)
                records.append(r)
    summary = fig10.analyse(records, "smoke", tmp_path)
    by_arch = {e["label"].split(" ")[0]: e for e in summary["entries"]}
    assert set(by_arch) == {"mlp", "mamba"}
    assert by_arch["mamba"]["fit"].startswith("Laplace") and 0.1 < by_arch["mamba"]["wd_c"] < 1.0
    assert by_arch["mlp"]["wd_c_ci"] is not None and by_arch["mlp"]["n"] == 12
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {paper_value(r) for r in rows} == {0.0511, None}  # mamba expand 2 has no paper value
    assert (tmp_path / "fig10_architectures.png").exists()


def test_fig10_medium_fits_the_mlp_and_gives_the_other_probes_their_measured_cost(tmp_path):
    from reproduce.report import verdict
    from reproduce.targets import fig10

    records = []
    for wd in (0.03, 0.05, 0.07, 0.1):
        for seed in range(3):
            r = make_record(wd, seed, grok_epoch=4000 if wd in (0.05, 0.07) and (wd == 0.07 or seed == 0) else None,
                            n_params=1000, horizon=10000)
            r["config"]["model"].update(arch="mlp", arch_kwargs={})
            records.append(r)
    summary = fig10.analyse(records, "medium", tmp_path)
    rows = {r["claim"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    # lambda 0.1 lies past the paper's grid (0.003-0.07): counted and named, not fitted, so the
    # row's n is the 9 runs its fit reads
    assert rows["fig10.mlp_4L_h512_mod_add"]["n"] == 9 and rows["fig10.mlp_4L_h512_mod_add"]["horizon"] == 10000
    assert "lambda 0.1 (past the paper's grid 0.003-0.07): 0/3 grokked, not fitted" in rows["fig10.mlp_4L_h512_mod_add"]["note"]
    assert "(per lambda: 0.03 0/3, 0.05 1/3, 0.07 3/3, 0.1 0/3)" in rows["fig10.mlp_4L_h512_mod_add"]["note"]
    # the paper's E10 cells: counts by Fisher's exact test, the grok epoch by its t interval
    assert rows["e10.mlp_grok.0.05"]["note"].startswith("ours 1/3, paper 3/10; Fisher exact p = 1")
    assert verdict(rows["e10.mlp_grok.0.03"]).startswith("consistent with the paper")  # 0/3 against 0/10
    assert verdict(rows["e10.mlp_grok_ep.0.07"]).startswith("not reproduced")  # 4,000 against 6,990 +- 790
    inside = [r for r in records if r["config"]["wd"] <= 0.07]
    assert summary["entries"][0]["wd_c"] == fig10.fit_group(inside, "mlp")[0].wd_c
    for cid in ("fig10.lstm_4L_h512_mod_add", "fig10.mamba_4L_d128_mod_add", "fig10.mamba_e2", "fig10.mamba_mul"):
        assert rows[cid]["ours"] is None and verdict(rows[cid]).startswith("not run here (")
    assert [e["status"] for e in summary["entries"]][1:] == ["not run here", "not run here"]
    grokked_only = [r for r in records if r["config"]["wd"] == 0.07]
    fig10.analyse(grokked_only + [r for r in records if r["config"]["wd"] == 0.05][:1], "medium", tmp_path / "one_side")
    one_side = {r["claim"]: r for r in json.loads((tmp_path / "one_side" / "rows.json").read_text())}
    assert verdict(one_side["fig10.mlp_4L_h512_mod_add"]) == (
        "inconclusive: every fitted run grokked (4/4 at lambda 0.05-0.07): no edge to fit")
    empty = fig10.analyse([], "medium", tmp_path / "empty", missing=["cross_arch.yaml (medium): 12 of 12 runs missing"])
    assert empty["horizon"] is None and len(empty["entries"]) == 2  # the LSTM and Mamba lines; no MLP yet
    assert (tmp_path / "empty" / "fig10_architectures.png").exists()


def test_a_derived_sweep_file_under_a_relative_output_dir_is_found(tmp_path, monkeypatch):
    """`make reproduce-all` passes --out reproduction (relative): fig8's derived sweep files live there."""
    from reproduce.targets.common import SWEEPS, sweep_path

    monkeypatch.chdir(tmp_path)
    path = fig8.derived_sweep("B", "smoke", {(7, 1.0): 120}, {(7, 1.0): "peak.ckpt"}, Path("reproduction") / "fig8" / "B")
    assert not path.is_absolute() and sweep_path(path).is_file() and sweep_path(path) == path
    assert sweep_path("interventions.yaml") == SWEEPS / "interventions.yaml"


def test_e12_rows_score_a_against_the_claims_and_name_missing_groups(tmp_path):
    """Without B, C and R records (reading shipped records only), A's rows are scored against the
    paper's lambda 0.05 stratum and every contrast that needs a missing group says so."""
    from reproduce.report import verdict

    seeds = range(4)
    groups = {"A": [_history_record(0.05, s, {150: 0.27 + 0.01 * s}) for s in seeds],
              "P": [_history_record(0.05, s, {150: 0.27 + 0.01 * s, 170: 0.1 + 0.01 * s}) for s in seeds],
              "B": [], "C": [], "R": []}
    peaks = {(s, 0.05): 150 for s in seeds}
    planned = {"A": 8, "B": 8, "C": 8, "P": 8, "R": 1}
    fig8.analyse(groups, peaks, "medium", tmp_path, n_bootstrap=200, planned=planned)
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    peak = rows["E12 control A: peak sigma_H summed over layers (the cohort's reading) at lambda 0.05"]
    assert peak["claim"] == "e12.A_peak.0.05" and paper_value(peak) == 0.2798 and peak["n"] == 4
    assert "4 of 8 planned control runs finished" in peak["note"] and "E before A's grokking in 0 of 4" in peak["note"]
    before = rows["sensitivity (maximum before A's grok epoch): E12 control A: peak sigma_H summed over layers "
                  "(the cohort's reading) at lambda 0.05"]
    assert before["claim"] == "e12.A_peak.0.05" and before["sensitivity"] and before["n"] == 4
    assert rows["E12 control A: grokked at lambda 0.05"]["claim"] == "e12.grok_A.0.05"
    ba = rows["E12 B-A: Cohen's d of peak_ent on (E, end of run] at lambda 0.05"]
    assert paper_value(ba) == -1.19 and verdict(ba) == "not run here" and "group B has 0 of 8 runs" in ba["note"]
    pa = rows["E12 P-A: Cohen's d of peak_ent on (E, end of run] at lambda 0.05"]
    assert paper_value(pa) is None and pa["ours"] is not None and verdict(pa) == "-"
    assert (tmp_path / "fig8_forest.png").exists()


def test_e12_pre_grokking_group_is_triggered_by_most_seeds_and_starts_there(tmp_path):
    """Bg: when E (A's whole-run argmax) falls after grokking in most seeds, B is also started at
    A's pre-grokking argmax, from that checkpoint, on the first PRE_GROK_SEEDS seeds."""
    peaks = {(7, 0.05): 2370, (11, 0.05): 3430, (31, 0.05): 1500, (42, 0.05): 2600}
    pre = {(7, 0.05): 2340, (11, 0.05): 2290, (31, 0.05): 1500, (42, 0.05): 2200}
    assert fig8.needs_pre_grok_group(peaks, pre)  # 3 of 4 differ
    assert not fig8.needs_pre_grok_group(peaks, {**pre, (7, 0.05): 2370, (11, 0.05): 3430})  # 2 of 4: not most
    assert fig8.pre_grok_group(peaks, pre) == {(7, 0.05): 2340, (11, 0.05): 2290, (42, 0.05): 2200}  # not 31: E there
    assert fig8.pre_grok_group(peaks, {**pre, (7, 0.05): 2370, (11, 0.05): 3430}) == {}
    starts = {k: f"/a/{k[0]}/peak_before_grok.ckpt" for k in pre}
    runs = load_sweep(fig8.derived_sweep("Bg", "medium", pre, starts, tmp_path / "Bg", control="e12.yaml"),
                      profile="medium").expand()
    assert len(runs) == fig8.PRE_GROK_SEEDS == 3
    for spec in runs:
        seed = spec.config["seed_everything"]
        callback = spec.config["trainer"]["callbacks"][1]
        assert callback["class_path"].endswith("HeadReinit") and callback["init_args"]["epoch"] == pre[(seed, 0.05)]
        assert callback["init_args"]["n_heads"] == 2
        assert spec.config["run"]["start_from"] == starts[(seed, 0.05)]
    assert sorted(s.config["seed_everything"] for s in runs) == [7, 11, 31]


def test_e12_pre_grokking_rows_are_sensitivity_rows_on_their_own_window(tmp_path):
    """Bg is scored against A on (E before grokking, end]: its rows are sensitivity rows of the
    B-A claim and say how many of the planned runs exist; the headline B-A rows are untouched."""
    from reproduce.report import verdict

    seeds = range(3)
    rng = np.random.default_rng(1)
    groups = {"A": [_history_record(0.05, s, {140: 0.2, 180: 0.27 + 0.01 * s}) for s in seeds],
              "B": [], "C": [], "P": [], "R": [],
              "Bg": [_history_record(0.05, s, {140: 0.2, 180: 0.2 + 0.01 * s + rng.normal(0, 0.003)}) for s in seeds[:2]]}
    peaks, pre = {(s, 0.05): 180 for s in seeds}, {(s, 0.05): 140 for s in seeds}
    planned = {"A": 3, "B": 3, "C": 3, "P": 3, "R": 1, "Bg": 3}
    summary = fig8.analyse(groups, peaks, "medium", tmp_path, n_bootstrap=200, planned=planned, pre_peaks=pre)
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    label = "sensitivity (B at A's argmax before grokking, 3 seeds): E12 B-A: {} of peak_ent on (E before grokking, end of run] at lambda 0.05"
    d = rows[label.format("Cohen's d")]
    assert d["claim"] == "e12.B-A.d.0.05" and d["sensitivity"] and d["n"] == 2
    assert "Bg has 2 of 3" in d["note"] and "[140, 140, 140]" in d["note"]
    assert rows[label.format("mean difference")]["ours"] == pytest.approx(-0.07, abs=0.01)
    headline = rows["E12 B-A: Cohen's d of peak_ent on (E, end of run] at lambda 0.05"]
    assert verdict(headline) == "not run here" and not headline.get("sensitivity")
    assert summary["before_grok"]["n_runs"] == {"A": 3, "B": 2}


def test_e12_rows_short_of_the_claims_horizon_are_not_scored_but_grok_rows_are(tmp_path):
    """The paper's E12 runs 10,000 epochs. Peaks and minima over (E, end] can still move after a
    shorter horizon: those rows read "not run here (horizon)". A grok epoch is a first crossing:
    when every control run grokked before the horizon, the grok rows are final and scored."""
    from reproduce.report import verdict

    seeds = range(4)
    groups = {"A": [_history_record(0.05, s, {150: 0.4, 170: 0.2 + 0.01 * s}) for s in seeds],
              "B": [_history_record(0.05, s, {150: 0.4, 170: 0.32 + 0.013 * s * s}) for s in seeds],
              "C": [], "P": [], "R": []}
    planned = {"A": 4, "B": 4, "C": 4, "P": 4, "R": 1}
    fig8.analyse(groups, {(s, 0.05): 150 for s in seeds}, "medium", tmp_path, n_bootstrap=200, planned=planned)
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    d = rows["E12 B-A: Cohen's d of peak_ent on (E, end of run] at lambda 0.05"]
    assert d["ours"] is not None and verdict(d) == "not run here (horizon): ours at 200 epochs, the claim needs 10,000"
    assert verdict(rows["E12 control A: min s_bar after epoch 100 at lambda 0.05"]).startswith("not run here (horizon)")
    grok_ep = rows["E12 control A: grok epoch (mean of the grokked runs) at lambda 0.05"]
    assert grok_ep["horizon_final"] == "every run grokked by epoch 150, before our 200"
    assert not verdict(grok_ep).startswith("not run here")
    assert not verdict(rows["E12 control A: grokked at lambda 0.05"]).startswith("not run here")


@pytest.mark.parametrize("n_pairs, scored", [(2, False), (3, False), (4, True)])
def test_e12_d_rows_are_scored_only_from_min_pairs(tmp_path, n_pairs, scored):
    """A paired Cohen's d below MIN_PAIRS_COHEN_D pairs is shown with its interval but reads
    inconclusive, even where that interval excludes the paper's d; the mean difference is scored."""
    from grok_lightning.stats import MIN_PAIRS_COHEN_D
    from reproduce.report import verdict, verdict_class

    seeds = range(n_pairs)
    # B raises the later peak by about 0.12 on every seed: d far above the paper's -1.19
    groups = {"A": [_history_record(0.05, s, {150: 0.4, 170: 0.2 + 0.01 * s}) for s in seeds],
              "B": [_history_record(0.05, s, {150: 0.4, 170: 0.32 + 0.013 * s * s}) for s in seeds],
              "C": [], "P": [], "R": []}
    for record in groups["A"] + groups["B"]:  # runs to the claim's horizon: only the pair count decides
        record["config"]["max_epochs"] = 10_000
    peaks = {(s, 0.05): 150 for s in seeds}
    planned = {"A": n_pairs, "B": n_pairs, "C": n_pairs, "P": n_pairs, "R": 1}
    fig8.analyse(groups, peaks, "medium", tmp_path, n_bootstrap=200, planned=planned)
    rows = {r["quantity"]: r for r in json.loads((tmp_path / "rows.json").read_text())}
    d = rows["E12 B-A: Cohen's d of peak_ent on (E, end of run] at lambda 0.05"]
    assert d["n"] == n_pairs and d["ours_ci"] is not None and d["ours_ci"][0] > paper_value(d)
    assert (n_pairs >= MIN_PAIRS_COHEN_D) == scored
    expected = "not reproduced" if scored else "inconclusive"
    assert verdict_class(verdict(d)) == expected
    assert f"below the {MIN_PAIRS_COHEN_D}" in verdict(d) or scored
