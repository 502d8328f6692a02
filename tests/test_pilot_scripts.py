"""The pilot scorers under reproduce/pilots/ on synthetic records with known answers."""

from __future__ import annotations

import json

import numpy as np

from grok_lightning.records import new_record
from reproduce.pilots import e12_pilot
from reproduce.report.rows import paper_value

MODEL = {"arch": "transformer", "d_model": 128, "n_layers": 4, "n_heads": 8, "d_ff": 512}


def a_run(tmp_path, seed: int, bump: bool, grok_epoch: int | None = 1500, horizon: int = 2000):
    """sigma_H flat at 0.03 (with a bump to 0.2 at epochs 800-900 when ``bump``), a loss spike at
    1,200 after memorising at 50; grokked at ``grok_epoch``."""
    epochs = list(range(0, horizon + 1, 10))
    sigma = [0.03 + (0.17 if bump and 800 <= e <= 900 else 0.0) + 0.001 * (e % 30 == 0) for e in epochs]
    loss = [4.5 if e < 50 or e == 1200 else 1e-3 for e in epochs]
    record = new_record({"wd": 0.05, "seed": seed, "max_epochs": horizon, "model": MODEL, "data": {"p": 97}},
                        run_id=f"a{seed}")
    record.update(status="completed", grok_epoch=grok_epoch, history={
        "epoch": epochs, "entropy_std": sigma, "mean_similarity": [0.9 - 0.1 * (e == 1210) for e in epochs],
        "train_loss": loss, "train_acc": [0.0 if e < 50 else 1.0 for e in epochs],
        "test_acc": [1.0 if grok_epoch and e >= grok_epoch else 0.4 for e in epochs]})
    folder = tmp_path / "runs" / f"a{seed}"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(record))
    return record


def test_a_peak_before_grokking_is_found_with_its_width_and_the_spikes(tmp_path):
    a_run(tmp_path, 7, bump=True)
    a_run(tmp_path, 11, bump=True)
    a_run(tmp_path, 31, bump=False, grok_epoch=None)
    summary = e12_pilot.main(["--root", str(tmp_path)])
    bumped, flat = summary["runs"][0], summary["runs"][2]
    assert bumped["released"]["stands_out"] and not bumped["released"]["on_edge"]
    assert 800 <= bumped["released"]["peak_epoch"] <= 900 and bumped["released"]["width"] == 100
    assert bumped["spikes_before_grok"] == [1200]  # the first epochs (before memorising) are not spikes
    assert bumped["min_s_bar_before_grok"] == np.float64(0.8) and bumped["min_s_bar_epoch"] == 1210
    assert not flat["released"]["stands_out"] and flat["released"]["range"] == [100, 2000]
    assert summary["verdicts"]["0.05"].startswith("A peak before grokking in 2/3 runs: E12 can be tested")
    assert (tmp_path / "e12_pilot.png").stat().st_size > 20_000 and "| 0.05 | 31 | none by 2000 |" in (
        tmp_path / "e12_pilot.md").read_text()


def test_no_peak_in_the_majority_means_no_test(tmp_path):
    a_run(tmp_path, 7, bump=True)
    a_run(tmp_path, 11, bump=False)
    summary = e12_pilot.main(["--root", str(tmp_path)])
    assert summary["verdicts"]["0.05"].endswith("1/2 runs: no peak to intervene at")


def test_fig2_report_rows_name_the_best_lasting_choice_and_how_many_were_tried(tmp_path):
    from reproduce.report import verdict
    from reproduce.targets import fig2

    def arm(s_bar, sigma):
        return {"score": s_bar + sigma, "distance": {"s_bar": s_bar, "sigma_H": sigma}, "horizon": 2000, "seeds": [7, 11]}

    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"arms": {"default": arm(0.05, 0.03), "default bf16": arm(0.054, 0.032),
                                         "eps1e-6 bf16": arm(0.05, 0.029), "relu bf16": arm(0.058, 0.042)}}))
    rows = fig2.search_rows("medium", path)
    assert [r["ours"] for r in rows] == [0.05, 0.029]  # eps1e-6: the smallest sum
    assert "best of 2 lasting training choices tested (eps1e-6 bf16)" in rows[0]["quantity"]
    assert "the default scores 0.054" in rows[0]["note"]
    # the distances to a read-off curve are context, not claims of the paper: no paper value, no verdict
    assert all(verdict(r) == "-" and paper_value(r) is None for r in rows)
    assert fig2.search_rows("smoke", path) == [] and fig2.search_rows("medium", tmp_path / "none.json") == []


def test_low_lambda_arms_are_compared_on_the_shortest_horizon_with_their_first_loss_spike(tmp_path):
    from reproduce.pilots import fig2_search

    short = a_run(tmp_path / "short", 7, bump=False, grok_epoch=None, horizon=1000)
    long = a_run(tmp_path / "long", 11, bump=True, grok_epoch=None, horizon=2000)
    long["history"]["entropy_std"][-1] = 0.9  # after the short run's horizon: must not count
    text = fig2_search.low_lambda_markdown({"a": [short], "b": [long]})
    assert "epochs 100-1000" in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| a ") or line.startswith("| b ")]
    assert rows[0][3].startswith("0.031") and rows[1][3] == "0.201 (810)"  # the bump, not the late 0.9
    assert rows[0][6] == "-" and rows[1][6] == "-"  # the spike at 1,200 is past the common horizon
    assert fig2_search.low_lambda_markdown({"b": [long]}).splitlines()[4].split(" | ")[6] == "1200"
