"""The "does it predict?" study (grok_lightning.stats.predict): features at epoch E from records,
grouped cross-validation, AUC with cluster-bootstrap CIs, and honest "undefined" answers.

Synthetic records only (fast): one where sigma_H at E carries the outcome and the baselines do not,
and degenerate sets (one class, one group, unobservable retention).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from grok_lightning.stats.predict import (  # noqa: E402
    BASELINE_FEATURES,
    FEATURE_SETS,
    auc_study,
    feature_row,
    feature_table,
    grouped_oof_predictions,
    is_undefined,
    mann_whitney_auc,
    retention_label,
    table_records,
)
from reproduce.report.rows import paper_value  # noqa: E402

EPOCHS = list(range(0, 101, 10))


def _record(run_id, wd, seed, sigma, grok_epoch=None, n_params=1000, final_epoch=100, max_epochs=100,
            retention=None, rng=None, status="completed"):
    rng = rng or np.random.default_rng(seed)
    n = len(EPOCHS)
    history = {
        "epoch": EPOCHS,
        "train_loss": list(rng.uniform(0.5, 1.0, n)), "train_acc": list(rng.uniform(0.5, 0.9, n)),
        "test_loss": list(rng.uniform(2, 3, n)), "test_acc": list(rng.uniform(0.0, 0.2, n)),
        "weight_norm": list(rng.uniform(20, 30, n)), "mean_similarity": list(rng.uniform(0.8, 0.9, n)),
        "entropy_std": list(sigma + 0.001 * rng.standard_normal(n)),
    }
    record = {"run_id": run_id, "status": status, "grok_epoch": grok_epoch, "final_epoch": final_epoch,
              "n_params": n_params, "config": {"wd": wd, "seed": seed, "max_epochs": max_epochs}, "history": history}
    if retention is not None:
        record["retention"] = retention
    return record


def _signal_records(n_wd=6, n_seeds=6, seed=0):
    """Outcome = sigma_H above the median (per-run latent); lambda, loss, norm are noise."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_wd):
        for s in range(n_seeds):
            sigma = rng.uniform(0.01, 0.05)
            grokked = sigma > 0.03
            records.append(_record(f"r{i}_{s}", wd=[0.1, 0.2, 0.5, 1.0, 2.0, 5.0][i % 6], seed=s, sigma=sigma,
                                   grok_epoch=200 if grokked else None, max_epochs=300, final_epoch=300,
                                   retention="retained" if grokked else "never grokked", rng=rng))
    return records


def test_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    for _ in range(50):
        y = rng.integers(0, 2, 20)
        if y.min() == y.max():
            continue
        p = rng.integers(0, 4, 20) / 3  # with ties
        assert mann_whitney_auc(y, p) == pytest.approx(roc_auc_score(y, p))


def test_feature_row_reads_the_row_at_or_before_e_and_its_slopes():
    record = _record("a", 1.0, 0, 0.02)
    record["history"]["entropy_std"] = [0.001 * e for e in EPOCHS]  # slope 0.001 per epoch
    record["history"]["train_acc"] = [0.0] * 5 + [1.0] * 6  # fitted from epoch 50
    row = feature_row(record, epoch=75, slope_window=30)
    assert row.features["epoch"] == 70  # the row just before 75
    assert row.features["sigma_H"] == pytest.approx(0.07)
    assert row.features["sigma_H_slope"] == pytest.approx(0.001)
    assert row.features["epochs_since_fit"] == 20
    assert row.features["log10_wd"] == 0.0 and row.features["log10_params"] == 3.0
    assert row.excluded is None and row.group == "1000|wd=1"
    assert "history ends" in feature_row(record, epoch=500)
    early = _record("b", 1.0, 0, 0.02, grok_epoch=40)
    assert "grokked at epoch 40" in feature_row(early, epoch=60).excluded


def test_retention_label_sources():
    assert retention_label({"retention": "retained"}) == (1, "record")
    assert retention_label({"retention": "collapsed"}) == (0, "record")
    stopped = _record("s", 1.0, 0, 0.02, grok_epoch=50, final_epoch=70, max_epochs=100)
    assert retention_label(stopped)[0] is None


def test_diagnostic_signal_beats_the_baselines():
    rows, skipped = feature_table(_signal_records(), epoch=60)
    assert skipped == [] and len(rows) == 36
    flat = table_records(rows)
    assert set(BASELINE_FEATURES) <= set(flat[0]) and flat[0]["grokked"] in (0, 1)
    study = auc_study(rows, "grokked", n_bootstrap=200, n_estimators=50)
    assert study["n"] == 36 and study["n_groups"] == 6
    for model in ("random_forest", "logistic"):
        with_diag = study["results"][model]["baseline+diagnostics"]["auc"]
        base = study["results"][model]["baseline"]["auc"]
        assert with_diag > 0.85, (model, with_diag)
        assert base < 0.75, (model, base)
        diff = study["differences"][model]
        assert diff["diff"] > 0.2 and diff["ci"][0] > 0, (model, diff)
        ci = study["results"][model]["baseline+diagnostics"]["auc_ci"]
        assert ci[0] <= with_diag <= ci[1]
    assert study["importances"] and max(study["importances"], key=study["importances"].get) in ("sigma_H", "sigma_H_slope")
    retained = auc_study(rows, "retained", n_bootstrap=100, n_estimators=50)
    assert retained["results"]["random_forest"]["diagnostics"]["auc"] > 0.85


def test_degenerate_cases_are_undefined_not_numbers():
    one_class = [_record(f"r{i}", [0.1, 1.0][i % 2], i, 0.02, grok_epoch=None) for i in range(8)]
    rows, _ = feature_table(one_class, epoch=50)
    study = auc_study(rows, "grokked", n_bootstrap=50, n_estimators=10)
    assert is_undefined(study["undefined"]) and "one class" in study["undefined"]
    assert all(is_undefined(v["auc"]) for m in study["results"].values() for v in m.values())
    assert is_undefined(study["differences"]["logistic"]["diff"])

    one_group = [_record(f"r{i}", 1.0, i, 0.02, grok_epoch=200 if i % 2 else None, final_epoch=300, max_epochs=300)
                 for i in range(6)]
    rows, _ = feature_table(one_group, epoch=50)
    assert "group" in auc_study(rows, "grokked", n_bootstrap=50, n_estimators=10)["undefined"]

    # grokked but stopped early: retention unobservable -> no run left for that target
    stopped = [_record(f"r{i}", [0.1, 1.0][i % 2], i, 0.02, grok_epoch=80, final_epoch=100, max_epochs=300)
               for i in range(6)]
    rows, _ = feature_table(stopped, epoch=50)
    retained = auc_study(rows, "retained", n_bootstrap=50, n_estimators=10)
    assert retained["n"] == 0 and "no run" in retained["undefined"]
    assert len(retained["dropped"]) == 6

    X, y = np.zeros((4, 1)), np.array([0, 1, 0, 1])
    proba, info = grouped_oof_predictions(X, y, ["a", "a", "b", "b"], n_splits=3)
    assert proba is None and "2 groups < 3 folds" in info


def test_bootstrap_with_too_few_two_class_resamples_gives_an_undefined_ci():
    # two groups, each of one class: most group resamples hold one class only
    records = [_record(f"a{i}", 0.1, i, 0.01) for i in range(3)] + \
              [_record(f"b{i}", 1.0, i, 0.05, grok_epoch=200, final_epoch=300, max_epochs=300) for i in range(3)]
    rows, _ = feature_table(records, epoch=50)
    study = auc_study(rows, "grokked", feature_sets={"diagnostics": FEATURE_SETS["diagnostics"]},
                      models=("logistic",), n_bootstrap=100, n_estimators=10, compare=("diagnostics", "diagnostics"),
                      min_valid_fraction=0.9)  # about half of the resamples draw the same group twice
    assert isinstance(study["results"]["logistic"]["diagnostics"]["auc"], float)
    assert study["bootstrap_valid"] < 100
    assert is_undefined(study["results"]["logistic"]["diagnostics"]["auc_ci"])


def test_reproduce_predict_writes_its_outputs(tmp_path):
    from reproduce.targets.predict import analyse

    records = _signal_records(n_wd=4, n_seeds=4)
    summary = analyse(records, "smoke", tmp_path, epoch=60, slope_window=30, n_bootstrap=50, n_estimators=20,
                      sources={"synthetic": len(records)})
    for name in ("predict_auc.png", "features.csv", "summary.json", "rows.json", "NOTES.md"):
        assert (tmp_path / name).is_file(), name
    assert summary["n_runs"] == 16 and "underpowered" in summary["underpowered"]
    import json

    rows = json.loads((tmp_path / "rows.json").read_text())
    from reproduce.report import claim

    assert [paper_value(r) for r in rows[:2]] == [claim("e11.rf_auc").value, claim("e11.logistic_auc").value]
    assert all(paper_value(r) is None and r["null"] == 0.0 for r in rows[2:]) and len(rows) == 6
    assert rows[0]["horizon"] == 300  # 300-epoch runs against the claim's horizon: the verdict says so


# --- the medium profile: E11's held-out test by weight decay on records already there -------------
def _medium_records(root, with_e12: bool):
    """Synthetic records for the medium grids' planned runs (so the current-grid filter keeps them):
    Fig. 5 never groks at lambda <= 0.03 and stops 20 epochs after grokking above; Fig. 4's real runs
    are retained unless sigma_H at epoch 1,000 is high; E12's control A likewise at lambda 0.05."""
    import json

    from grok_lightning.sweep.grid import load_sweep
    from reproduce.targets.common import SWEEPS
    from reproduce.targets.predict_medium import SOURCES

    rng = np.random.default_rng(3)
    for folder, sweep_file, _ in SOURCES:
        if folder == "fig8/A" and not with_e12:
            continue
        for i, spec in enumerate(load_sweep(SWEEPS / sweep_file, profile="medium").expand()):
            model, data = spec.config["model"]["init_args"], spec.config["data"]["init_args"]
            wd, horizon = float(model["weight_decay"]), int(spec.config["trainer"]["max_epochs"])
            collapses = folder != "fig5" and i % 3 == 0
            grok_epoch = None if wd <= 0.03 or data.get("random_labels") else 500
            final = horizon if folder != "fig5" or grok_epoch is None else grok_epoch + 20
            epochs = list(range(0, final + 1, 100)) + ([final] if final % 100 else [])  # its last is final_epoch
            n = len(epochs)
            sigma = 0.06 if collapses else 0.02
            history = {"epoch": epochs, "train_loss": list(rng.uniform(0, 1, n)), "train_acc": [1.0] * n,
                       "test_loss": list(rng.uniform(0, 1, n)), "test_acc": list(rng.uniform(0.5, 1, n)),
                       "weight_norm": list(rng.uniform(20, 30, n)), "mean_similarity": list(rng.uniform(0.8, 1, n)),
                       "entropy_std": list(sigma + 0.003 * rng.standard_normal(n))}
            if grok_epoch is not None:  # a grok epoch stands on a test accuracy >= 0.99 there
                history["test_acc"] = [1.0 if e >= grok_epoch else a for e, a in zip(epochs, history["test_acc"])]
            record = {"run_id": spec.run_id, "status": "completed", "grok_epoch": grok_epoch, "final_epoch": final,
                      "n_params": 818785, "history": history,
                      "config": {"wd": wd, "seed": spec.config["seed_everything"], "max_epochs": horizon,
                                 "model": {"n_heads": model.get("n_heads", 8)},
                                 "data": {"p": 97, "random_labels": bool(data.get("random_labels"))}}}
            if folder != "fig5":
                record["retention"] = "collapsed" if collapses else "retained"
            path = root / folder / "sweep" / "runs" / spec.name / "record.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(record))


def test_medium_without_a_split_gives_invalid_rows_and_a_figure(tmp_path):
    import json

    from reproduce.report import verdict, verdict_class
    from reproduce.targets.predict_medium import run

    _medium_records(tmp_path, with_e12=False)
    out = run(tmp_path, n_bootstrap=50, n_estimators=10)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["excluded"]) == 5 and all("random-label" in e["why"] for e in summary["excluded"])
    assert summary["split"]["held_out"] == [] and "holding out lambda 1" in summary["invalid"]
    assert any("fig8/A" in m for m in summary["missing"])
    rows = json.loads((out / "rows.json").read_text())
    assert [r["claim"] for r in rows] == ["e11.rf_auc", "e11.logistic_auc", "e11.rf_brier"]
    assert all(verdict_class(verdict(r)) == "invalid test" for r in rows)
    for name in ("predict_auc.png", "features.csv", "NOTES.md"):
        assert (out / name).is_file()


def test_medium_with_the_e12_runs_holds_out_lambda_005_and_is_inconclusive(tmp_path):
    import json

    from reproduce.report import claim, verdict, verdict_class
    from reproduce.targets.predict_medium import run

    _medium_records(tmp_path, with_e12=True)
    out = run(tmp_path, n_bootstrap=100, n_estimators=20)
    summary = json.loads((out / "summary.json").read_text())
    held = summary["holdout"]
    assert summary["split"]["held_out"] == [0.05] and summary["split"]["interior"]
    assert (held["test_pos"], held["test_neg"]) == (5, 3) and held["too_few"]
    rows = json.loads((out / "rows.json").read_text())
    assert paper_value(rows[0]) == claim("e11.rf_auc").value and rows[0]["n"] == 8
    assert held["results"]["random_forest"]["auc"] == rows[0]["ours"]
    for r in rows:  # labels at 3,000-4,000 epochs: before the claim's horizon
        assert r["horizon"] == 3000 and verdict(r).startswith("not run here (horizon)")
        # 3 runs of the rarer label: no interval, so never a match even at the claim's horizon
        assert r["ours_ci"] is None and "not used" in r["note"]
        assert verdict_class(verdict({**r, "horizon": None})) == "inconclusive"


def test_holdout_auc_interval_and_an_empty_pool(tmp_path):
    from grok_lightning.stats.holdout import holdout_auc
    from reproduce.targets.predict_medium import run

    rng = np.random.default_rng(0)
    records = [_record(f"r{i}", [0.01, 0.05, 1.0][i % 3], i, sigma, retention="retained" if sigma < 0.03 else "collapsed",
                       grok_epoch=20, rng=rng) for i, sigma in enumerate(rng.uniform(0.01, 0.05, 60))]
    rows, _ = feature_table(records, epoch=60)
    result = holdout_auc(rows, [0.05], n_bootstrap=200, n_estimators=30)
    assert result["too_few"] is None and result["n_test"] == 20
    for model in ("random_forest", "logistic"):
        entry = result["results"][model]
        assert entry["auc"] > 0.8 and entry["auc_ci"][0] <= entry["auc"] <= entry["auc_ci"][1]
    assert is_undefined(holdout_auc(rows, [0.01, 0.05, 1.0])["undefined"])
    with pytest.raises(SystemExit, match="no run with a retention label"):
        run(tmp_path)
