"""Fig. 2 report rows: each claim is scored on the same object as the paper's, the median curve over
runs (its start at epoch 1, where the paper's log-axis curve starts, the Phase-1 peak and rise,
the Phase-2 dip); the memorisation
minimum and the early transient are context rows; a window the runs do not reach is not run here."""

from __future__ import annotations

import json

import pytest
from test_regimes import make_record

from reproduce.report import verdict
from reproduce.report.rows import paper_value
from reproduce.targets import fig2


def _run(seed: int, dip: float, memorised_min: float) -> dict:
    record = make_record(1.0, seed, grok_epoch=150, horizon=400)
    epochs = [0, 1, 5, 10, 20, 50, 100, 140, 150, 200, 300, 400]
    s_bar = [0.95, 0.94, dip, 0.90, 0.96, memorised_min, 0.955, 0.96, 0.985, 0.995, 0.97, 0.96]
    train = [0.01, 0.02, 0.2, 0.6, 0.995, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # memorised from epoch 20
    record["history"] = {"epoch": epochs, "mean_similarity": s_bar, "train_acc": train,
                         "test_acc": [0.01] * 8 + [0.995] * 4, "entropy_std": [0.03] * 12}
    return record


def test_rows_report_the_phase1_rise_from_the_memorisation_minimum(tmp_path, monkeypatch):
    records = [_run(7, 0.80, 0.93), _run(11, 0.82, 0.94), _run(31, 0.81, 0.92)]
    monkeypatch.setattr(fig2, "sweep_records", lambda *args, **kwargs: (records, []))
    (tmp_path / "fig2").mkdir()  # sweep_records makes it in a real run
    fig2.main(["--profile", "smoke", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "fig2" / "rows.json").read_text())
    by_claim = {r["claim"]: r for r in rows if r.get("claim")}
    assert by_claim["fig2.s_bar_init"]["ours"] == pytest.approx(0.94)  # epoch 1, where the paper's curve starts
    assert "(epoch 0) the median curve is 0.950" in by_claim["fig2.s_bar_init"]["note"]
    assert by_claim["fig2.s_bar_peak"]["ours"] == pytest.approx(0.995)  # the median curve's peak in (100, 500]
    assert by_claim["fig2.phase1_rise"]["ours"] == pytest.approx(0.055)  # one definition: peak minus epoch 1
    assert paper_value(by_claim["fig2.phase1_rise"]) == pytest.approx(0.065)
    assert by_claim["fig2.s_bar_dip"]["ours"] is None  # 400-epoch runs do not reach Phase 2
    assert verdict(by_claim["fig2.s_bar_dip"]).startswith("not run here (horizon)")
    assert by_claim["wd.t_grok_1"]["ours"] == 150 and by_claim["wd.t_grok_1"]["test_p"] < 0.05
    context = {r["quantity"]: r for r in rows if not r.get("claim")}
    assert context["s_bar minimum while memorised (median over runs)"]["ours"] == pytest.approx(0.93)  # not the dip
    assert context["s_bar minimum before t_grok, early transient included (median over runs)"]["ours"] == pytest.approx(0.81)
    assert all(paper_value(r) is None for r in context.values())
    per_seed = json.loads((tmp_path / "fig2" / "summary.json").read_text())["per_seed"]
    assert per_seed["7"]["memorised_epoch"] == 20


def test_the_tanh_fit_to_each_runs_rise_gives_the_median_r2():
    """fig2.tanh_r2: s_bar that follows the paper's tanh exactly over its Phase-1 rise fits with
    R^2 = 1; noise lowers it; a run without a memorisation minimum is counted out."""
    import numpy as np

    rng = np.random.default_rng(0)

    def run(seed, noise):
        record = make_record(1.0, seed, grok_epoch=200, horizon=400)
        epochs = np.arange(0, 401, 10)
        s_bar = 0.85 + 0.07 * np.tanh((epochs - 180) / 40.0) + rng.normal(0, noise, len(epochs))
        record["history"] = {"epoch": epochs.tolist(), "mean_similarity": s_bar.tolist(),
                             "train_acc": [0.5] + [1.0] * (len(epochs) - 1), "test_acc": [0.01] * len(epochs),
                             "entropy_std": [0.03] * len(epochs)}
        return record

    rows = fig2.tanh_rows([run(7, 0.0), run(11, 0.0), run(31, 0.0)], 400, "medium")
    assert rows[0]["claim"] == "fig2.tanh_r2" and rows[0]["ours"] == pytest.approx(1.0, abs=1e-6) and rows[0]["n"] == 3
    assert rows[1]["sensitivity"] and "to t_grok" in rows[1]["note"]
    noisy = fig2.tanh_rows([run(7, 0.01), run(11, 0.01)], 400, "medium")[0]
    assert 0.5 < noisy["ours"] < 1.0
    never = run(42, 0.0)
    never["grok_epoch"] = None
    assert fig2.tanh_rows([never, run(7, 0.0)], 400, "medium")[0]["n"] == 1
