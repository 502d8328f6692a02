"""The four spectral lock-in targets (reproduce/lockin_*.py) build their rows, figures and notes
from records alone: synthetic records here, so no training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from grok_lightning.stats.lockin import lockin_key
from reproduce.report.claims import claim
from reproduce.report.rows import paper_value
from reproduce.targets import lockin, lockin_activation, lockin_eta, lockin_main


def _record(eta: float, seed: int, activation: str = "x2", horizon: int = 400) -> dict:
    rng = np.random.default_rng(seed)
    epochs = list(range(horizon + 1))
    ratio = [None] * 3 + list(np.exp(rng.normal(0, 0.1, horizon - 2)) * (300 if eta else 1.3))
    history = {"epoch": epochs, "test_acc": [min(1.0, e / (150 + seed)) for e in epochs],
               "rho_tian": [0.06 + e / 1e4 for e in epochs]}
    for window in (5, 10, 20, 30):
        for name in ("ratio23", "ratio12", "sigma1", "sigma2", "sigma3", "sigma4", "sigma5"):
            history[lockin_key(window, name)] = ratio
    theorem6 = {str(e): {"sign_match_paper": 0.9 + 0.01 * seed, "sign_match_exact": 1.0, "frac_neg_B_pos_cos": 0.5,
                         "median_abs_cos": 0.3} for e in (50, 100, 175, 250, 300, 500) if e <= horizon}
    model = {"eta": eta, "activation": activation, "M": 71, "hidden": 2048, "lr": 1e-3, "rho_every": 1,
             "theorem6_epochs": [50, 100], "theorem6_pairs": 200}
    return {"config": {"wd": eta, "seed": seed, "max_epochs": horizon, "model": model,
                       "data": {"train_fraction": 0.4, "M": 71}},
            "history": history, "status": "completed", "grok_epoch": 150 + seed if eta else None,
            "final_epoch": horizon, "run_id": f"{eta}-{seed}-{activation}", "name": f"{eta}-{seed}-{activation}",
            "theorem6": theorem6 if eta else {}, "environment": {"device": "cpu"},
            **{f"lockin_fire_epoch_w{w}": (170 + seed if eta else None) for w in (5, 10, 20, 30)}}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # medians of empty windows
        yield


def test_the_four_targets_build_rows_figures_and_notes(tmp_path):
    main_runs = [_record(eta, seed) for eta in (2e-4, 0.0) for seed in range(4)]
    relu_runs = [_record(eta, seed, "relu", 600) for eta in (2e-4, 0.0) for seed in range(2)]
    eta_runs = [_record(eta, seed, horizon=300) for eta in (1e-5, 1e-4, 2e-4) for seed in range(2)]
    parts = {
        "main": lockin_main.target_main(main_runs, {}, "smoke", tmp_path),
        "window": lockin_main.target_window(main_runs, {}, "smoke", tmp_path),
        "activation": lockin_activation.target_activation(relu_runs, main_runs, {}, {}, "smoke", tmp_path),
        "eta": lockin_eta.target_eta(eta_runs, [_record(1e-5, 0, horizon=2000)], {}, {}, "smoke", tmp_path),
    }
    for name, (summary, rows, figures) in parts.items():
        assert rows and all(row["source"].startswith(lockin.PAPER) if not row["claim"] else
                            claim(row["claim"]).paper == "2605.08119" for row in rows), name
        assert all(row.get("claim") for row in rows if paper_value(row) is not None), name
        assert figures and all(path.stat().st_size > 10_000 for path in figures), name
    assert parts["main"][0]["fire_epochs_grok"] == [170, 171, 172, 173]
    assert parts["eta"][0]["extension"]["lockin"] == 170  # the 2,000-epoch extension is read when given
    notes = lockin.notes_text({"main": parts["main"][0], "activation": parts["activation"][0]}, "smoke")
    assert "The Woodbury factor" in notes and "| 175 |" in notes


def test_the_m_x_p_target_counts_rho_fires_in_every_run_grokking_or_not():
    """lock.mp_rho: a run counts as fired when rho_tian reaches the threshold at any epoch its
    record holds, a diverged run too; the note gives each (M, p) cell."""
    from reproduce.report import verdict
    from reproduce.targets import lockin_mp

    runs = []
    for M, p in ((41, 0.1), (127, 0.5)):
        for seed in range(2):
            record = _record(2e-4, seed, horizon=300)  # rho_tian reaches 0.075 at epoch 150
            record["config"]["data"] = {"M": M, "train_fraction": p}
            runs.append(record)
    runs[-1].update(status="diverged", grok_epoch=None)
    quiet = _record(2e-4, 5, horizon=300)
    quiet["config"]["data"] = {"M": 41, "train_fraction": 0.1}
    quiet["history"]["rho_tian"] = [0.01] * 301  # never reaches 0.075
    summary, (row,), figures = lockin_mp.target_mp(runs + [quiet], "medium")
    assert (row["claim"], row["n"], row["ours"]) == ("lock.mp_rho", 5, 0.8) and not figures
    assert "M 41, p 0.1: 2/3 fired (median epoch 150)" in row["note"] and "1 diverged" in row["note"]
    assert summary["cells"]["M127_p0.5"]["fired"] == [150, 150]
    assert verdict(row).startswith("not run here (horizon)")  # one never fired: a longer run might
    summary, (row,), _ = lockin_mp.target_mp(runs, "medium")
    assert row["horizon_final"] == "every run's rho_tian fired by epoch 150"
    assert not verdict(row).startswith("not run here")
