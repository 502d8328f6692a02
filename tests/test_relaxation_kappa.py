"""Fig. 11: the paper's kappa is set by its Omega_0 cap; the paper's estimator beside the dense fit; the
bound uses the horizon of the lambda_c sweep it is compared with."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_regimes import make_record

from grok_lightning.stats.relaxation import (
    PAPER_FIT_EPOCHS,
    fit_relaxation_paper,
    kappa_two_point,
)
from reproduce.report import claim
from reproduce.targets import fig11


def test_the_papers_kappa_is_the_cap_through_its_first_checkpoint():
    check = fig11.paper_kappa_check()
    assert check["kappa_capped"] == pytest.approx(18.568, abs=1e-3)
    lo, hi = check["rounding_range"]
    assert lo <= 18.583 <= hi  # the published value, within the rounding of 28.4 and 55.2
    start, omega_inf = claim("fig11.omega_start").value, claim("fig11.omega_inf").value
    assert kappa_two_point(start, omega_inf, 126.0, 100, 1e-3, 1.0) == pytest.approx(12.93, abs=0.01)
    with pytest.raises(ValueError):
        kappa_two_point(20.0, 28.4, 200.0, 100, 1e-3, 1.0)


def _canonical_like(t):
    """A start at 126 relaxing with kappa 12.9 that reaches its plateau by epoch 400 (as a real norm
    that relaxes faster than one exponential late on): the paper's checkpoints see one point on the
    decay, epoch 100, and a flat rest."""
    t = np.asarray(t, float)
    return np.where(t < 400, 28.4 + 97.6 * np.exp(-0.0129 * t), 28.4)


def test_paper_estimator_hits_the_cap_where_the_dense_fit_sees_the_start():
    t = np.arange(0, 20001, 10.0)
    omega = _canonical_like(t)
    paper = fit_relaxation_paper(t, omega)
    assert paper.at_bound == ["omega_0"] and paper.kappa(1e-3, 1.0) == pytest.approx(18.57, abs=0.05)
    from grok_lightning.stats import fit_exponential_relaxation

    dense = fit_exponential_relaxation(t, omega)
    assert dense.omega_0 == pytest.approx(126, abs=2) and 11.5 < dense.kappa(1e-3, 1.0) < 14
    with pytest.raises(ValueError, match="at least 4"):
        fit_relaxation_paper(t[t <= 600], omega[t <= 600])


def _records(horizon=20000, seeds=(42, 7)):
    records = []
    for seed in seeds:
        r = make_record(1.0, seed, grok_epoch=150, omega=_canonical_like, horizon=horizon)
        r["weight_checkpoints"] = [f"weights/epoch_{e:05d}.pt" for e in PAPER_FIT_EPOCHS if e <= horizon]
        records.append(r)
    return records


def test_fig11_reports_both_estimators_and_the_sweep_horizon(tmp_path):
    summary = fig11.analyse(_records(), {"wd_c": 0.0158, "wd_c_ci": [0.0109, 0.02]}, 5000.0, "paper", tmp_path)
    assert summary["kappa_paper_estimator"] == pytest.approx(18.57, abs=0.05)
    assert 11.5 < summary["kappa"] < 14
    at_099 = next(r for r in summary["bound_table_paper_estimator"] if r["p_relax"] == 0.99)
    assert at_099["wd_c_bound"] == pytest.approx(-math.log(0.01) / (1e-3 * summary["kappa_paper_estimator"] * 5000))
    rows = json.loads((tmp_path / "rows.json").read_text())
    quantities = [r["quantity"] for r in rows]
    assert any("paper's estimator" in q and q.startswith("kappa") for q in quantities)
    assert any("dense fit" in q and q.startswith("kappa") for q in quantities)
    bound = next(r for r in rows if r["quantity"].startswith("AdamW bound") and "paper's estimator kappa" in r["quantity"])
    assert "T_max = 5000 (the lambda_c sweep's horizon" in bound["note"]
    check = next(r for r in rows if "paper's own numbers" in r["quantity"])
    assert check["ours"] == pytest.approx(18.568, abs=1e-3) and "12.9" in check["note"]


def test_the_paper_profile_bound_uses_the_canonical_sweeps_horizon(tmp_path, monkeypatch):
    assert fig11.wd_sweep_horizon("paper") == 5000.0
    assert fig11.wd_sweep_horizon("smoke") == 250.0
    (tmp_path / "fig5").mkdir()
    (tmp_path / "fig5" / "fits.json").write_text(json.dumps({"profile": "paper", "main": {"wd_c": 0.0158,
                                                                                           "wd_c_ci": [0.0109, 0.02]}}))
    seen = {}
    monkeypatch.setattr(fig11, "sweep_records", lambda name, profile, out, launch: (seen.setdefault(name, _records()), []))
    fig11.main(["--profile", "paper", "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "fig11" / "summary.json").read_text())
    # the lambda_c comes from fig5's fits; its sweep's records are read (one model here: no own-model rows)
    assert summary["t_max"] == 5000.0 and list(seen) == ["long_horizon.yaml", "canonical_wd.yaml"]
    assert summary["empirical"]["wd_c"] == 0.0158 and summary["own_model"] == {}


def test_smoke_checkpoints_are_the_runs_saved_weights():
    record = make_record(1.0, 42, horizon=300)
    record["weight_checkpoints"] = [f"weights/epoch_{e:05d}.pt" for e in range(25, 301, 25)]
    assert fig11.checkpoint_epochs(record)[:3] == [25, 50, 75]
    assert fig11.checkpoint_epochs(make_record(1.0, 42)) == list(PAPER_FIT_EPOCHS)
