"""``grok-lightning analyze`` on directories of synthetic run records (no training)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grok_lightning.records import new_record, write_json_atomic
from grok_lightning.stats import fit_critical_weight_decay, fit_time_to_grok_power_law
from grok_lightning.stats.cli import main

WDS = (0.001, 0.01, 0.1, 1.0, 10.0)
SEEDS = tuple(range(10))
P_GROK = {0.001: 0.0, 0.01: 0.3, 0.1: 0.8, 1.0: 1.0, 10.0: 0.0}


def _t_grok(wd: float, seed: int) -> float:
    return round(120 * (wd - 0.005) ** -0.8 * (1 + 0.03 * seed))


def write_runs(root, wds=WDS, seeds=SEEDS, status="completed", metric_shift=0.0):
    """One record.json per (wd, seed) below ``root``; the first P_GROK * n seeds grok."""
    truth = []
    for wd in wds:
        for seed in seeds:
            grokked = seed < round(P_GROK.get(wd, 1.0) * len(seeds))
            record = new_record({"wd": wd, "seed": seed, "data": {"operation": "add", "p": 97}},
                                run_id=f"r{wd}_{seed}")
            record["status"] = status
            record["grok_epoch"] = _t_grok(wd, seed) if grokked else None
            if grokked:  # a grok epoch stands on the history's test accuracy at that epoch
                record["history"] = {"epoch": [_t_grok(wd, seed)], "test_acc": [1.0]}
            record["final_test_acc"] = (1.0 if grokked else 0.3) - metric_shift * (seed % 3)
            record["peak_entropy_std"] = 0.05 + 0.001 * seed + metric_shift * (1 + 0.2 * (seed % 2))
            write_json_atomic(root / f"wd{wd}_seed{seed}" / "record.json", record)
            truth.append((wd, grokked, _t_grok(wd, seed) if grokked else math.nan))
    return truth


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_critical_wd_paper_and_glm_match_the_library(tmp_path, capsys):
    truth = write_runs(tmp_path / "runs")
    wd = [t[0] for t in truth]
    grokked = [t[1] for t in truth]
    for method in ("paper", "glm"):
        out = tmp_path / f"fit_{method}.json"
        assert main(["critical-wd", str(tmp_path / "runs"), "--method", method, "--n-bootstrap", "50",
                     "--out", str(out)]) == 0
        fit = json.loads(out.read_text())
        expected = fit_critical_weight_decay(wd, grokked, method=method, n_bootstrap=50)
        assert fit["method"] == method and fit["n_records"] == 50 and fit["n_excluded"] == 10  # wd 10 > 5
        assert fit["wd_c"] == pytest.approx(expected.wd_c, rel=1e-9)
        assert fit["source"]["n_record_files"] == 50
    assert "lambda_c =" in capsys.readouterr().out


def test_critical_wd_smoothing_and_where_filter(tmp_path):
    write_runs(tmp_path / "runs")
    out = tmp_path / "fit.json"
    assert main(["critical-wd", str(tmp_path / "runs"), "--smoothing", "0.5", "--n-bootstrap", "0",
                 "--where", "config.data.operation=add", "--out", str(out)]) == 0
    fit = json.loads(out.read_text())
    assert fit["smoothing"] == 0.5 and fit["bins"][0]["p_fit"] == pytest.approx(0.5 / 11)


def test_power_law_from_fit_file_and_four_bin_variant(tmp_path, capsys):
    truth = write_runs(tmp_path / "runs", wds=(0.01, 0.05, 0.1, 0.5, 1.0, 2.0))
    fit_file = tmp_path / "fit.json"
    write_json_atomic(fit_file, {"wd_c": 0.005})
    out = tmp_path / "nu.json"
    assert main(["power-law", str(tmp_path / "runs"), "--fit", str(fit_file), "--n-bootstrap", "100",
                 "--out", str(out)]) == 0
    nu = json.loads(out.read_text())
    wd = np.array([t[0] for t in truth])
    t_grok = np.array([t[2] for t in truth])
    expected = fit_time_to_grok_power_law(wd, t_grok, lambda_c=0.005, n_bootstrap=100)
    assert nu["nu"] == pytest.approx(expected.nu) and nu["n_points"] == expected.n_points
    assert nu["nu"] == pytest.approx(0.8, abs=0.05) and nu["source"]["wd_c_from"] == str(fit_file)
    assert main(["power-law", str(tmp_path / "runs"), "--wd-c", "0.005", "--lambdas", "0.1,0.5,1,2",
                 "--n-bootstrap", "0", "--out", str(out)]) == 0
    four = json.loads(out.read_text())
    assert four["lambdas"] == [0.1, 0.5, 1.0, 2.0] and four["n_points"] < nu["n_points"]
    assert "nu =" in capsys.readouterr().out


def test_paired_by_seed(tmp_path, capsys):
    write_runs(tmp_path / "a", wds=(1.0,))
    write_runs(tmp_path / "b", wds=(1.0,), seeds=SEEDS[:8], metric_shift=0.01)  # two seeds missing in b
    out = tmp_path / "paired.json"
    assert main(["paired", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "peak_entropy_std",
                 "--n-bootstrap", "200", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["n"] == 8 and result["seeds"] == list(range(8))
    assert result["mean_diff"] == pytest.approx(0.011)
    assert any("only one directory" in w for w in result["warnings"])
    # grok_epoch: pairs where either side did not grok are dropped (None -> NaN -> omitted)
    assert main(["paired", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "final_test_acc",
                 "--n-bootstrap", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["mean_diff"] == pytest.approx(-0.01 * np.mean([s % 3 for s in range(8)]))


@pytest.mark.parametrize("argv, message", [
    (["critical-wd", "{tmp}/nothing", "--out", "{tmp}/f.json"], "no such directory"),
    (["critical-wd", "{tmp}/empty", "--out", "{tmp}/f.json"], "no record.json"),
    (["critical-wd", "{tmp}/runs", "--where", "config.wd=0.01", "--out", "{tmp}/f.json"], "need at least 2 distinct lambda bins"),
    (["power-law", "{tmp}/runs", "--fit", "{tmp}/missing.json", "--out", "{tmp}/n.json"], "cannot read wd_c"),
    (["paired", "{tmp}/runs", "{tmp}/runs", "--metric", "grok_epoch", "--out", "{tmp}/p.json"], "two records with seed"),
    (["paired", "{tmp}/one", "{tmp}/one", "--metric", "no_such_field", "--out", "{tmp}/p.json"], "no record has the field"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    write_runs(tmp_path / "runs")
    write_runs(tmp_path / "one", wds=(1.0,))
    (tmp_path / "empty").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    assert message in _one_error_line(capsys)


def test_top_level_cli_dispatches_analyze(tmp_path, capsys):
    from grok_lightning.cli import main as top

    write_runs(tmp_path / "runs")
    out = tmp_path / "fit.json"
    assert top(["analyze", "critical-wd", str(tmp_path / "runs"), "--method", "glm", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["method"] == "glm"


def _separable_runs(root):
    """Every run below lambda 0.1 fails, every run from 0.1 on groks: lambda_c is only bracketed."""
    for wd in (0.001, 0.01, 0.1, 1.0):
        for seed in range(4):
            record = new_record({"wd": wd, "seed": seed}, run_id=f"r{wd}_{seed}")
            record["status"] = "completed"
            record["grok_epoch"] = _t_grok(wd, seed) if wd >= 0.1 else None
            if wd >= 0.1:
                record["history"] = {"epoch": [_t_grok(wd, seed)], "test_acc": [1.0]}
            write_json_atomic(root / f"wd{wd}_seed{seed}" / "record.json", record)


def test_separable_outcomes_print_the_bracket_not_a_point(tmp_path, capsys):
    _separable_runs(tmp_path / "runs")
    out = tmp_path / "fit.json"
    assert main(["critical-wd", str(tmp_path / "runs"), "--method", "paper", "--n-bootstrap", "20",
                 "--out", str(out)]) == 0
    fit = json.loads(out.read_text())
    assert fit["status"] == "separable" and fit["wd_c_bracket"] == [0.01, 0.1]
    printed = capsys.readouterr().out
    assert "lambda_c in [0.01, 0.1]" in printed and "lambda_c =" not in printed
    assert f"{fit['wd_c']:.4g}" not in printed, "the optimiser's stopping point is not shown as lambda_c"


@pytest.mark.parametrize("method", ["paper", "glm"])
def test_power_law_refuses_a_separable_fit(tmp_path, capsys, method):
    _separable_runs(tmp_path / "runs")
    fit_file, out = tmp_path / "fit.json", tmp_path / "nu.json"
    assert main(["critical-wd", str(tmp_path / "runs"), "--method", method, "--n-bootstrap", "0",
                 "--out", str(fit_file)]) == 0
    capsys.readouterr()
    assert main(["power-law", str(tmp_path / "runs"), "--fit", str(fit_file), "--n-bootstrap", "0",
                 "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "status 'separable'" in line and "[0.01, 0.1]" in line and "--wd-c" in line
    assert not out.exists()
