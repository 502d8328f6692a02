"""The long-horizon reproduction target (Fig. 3, Fig. 6 + Table 3, Fig. 7, E8).

Fast tests drive the post-hoc analysis with a tiny transformer whose weights are saved in the
``CheckpointSchedule`` layout, and the table/figure code with synthetic records; one slow test runs
``reproduce.targets.long_horizon`` end to end on a tiny sweep (p = 23, 2 layers x 2 heads, 30 epochs).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from conftest import REPO
from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.metrics.functional import head_participation_ratio
from grok_lightning.metrics.head_outputs import head_output_participation
from grok_lightning.plots.long_horizon import figure_five_stage
from grok_lightning.stats.spectra import head_covariance_eigenvalues, model_esd_alpha
from grok_lightning.sweep.grid import load_sweep
from reproduce.targets import long_horizon
from reproduce.targets.weight_analysis import analyse_checkpoint, build_model_from_record, checkpoint_files, eval_split


def _record(wd=1.0, seed=42, name=None, status="completed", **extra) -> dict:
    config = {"wd": wd, "seed": seed, "max_epochs": 300,
              "model": {"arch": "transformer", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 32,
                        "arch_kwargs": None, "init": "pytorch"},
              "data": {"p": 23, "operation": "add", "train_fraction": 0.5, "split_seed": None,
                       "random_labels": False, "label_seed": 0}}
    record = {"run_id": f"{abs(hash((wd, seed))):012x}"[:12], "name": name, "status": status, "config": config,
              "grok_epoch": None, "final_test_acc": 1.0, "history": {"epoch": [0, 100, 200, 300]}}
    record.update(extra)
    return record


def _save_run(root: Path, record: dict, epochs=(10, 20), logged=True) -> Path:
    """A run folder of a sweep store (``<label>_<run_id[:8]>/weights/epoch_XXXXX.pt``) with a tiny model."""
    weights = root / f"wd{record['config']['wd']}_seed{record['config']['seed']}_{record['run_id'][:8]}" / "weights"
    weights.mkdir(parents=True)
    tokens, labels = eval_split(record)
    for i, epoch in enumerate(epochs):
        torch.manual_seed(100 * record["config"]["seed"] + i)
        model = build_model_from_record(record).eval()
        with torch.no_grad():
            acc = float((model(tokens).argmax(-1) == labels).float().mean())
        metrics = {"test_acc": acc, "pr_norm": None} if logged and i == 0 else None
        torch.save({"epoch": epoch, "state_dict": model.state_dict(), "metrics": metrics}, weights / f"epoch_{epoch:05d}.pt")
    (weights / ".epoch_00099.pt.tmp").write_bytes(b"")  # an interrupted write: never a checkpoint
    return weights


def test_eval_split_is_the_training_split(monkeypatch):
    record = _record(seed=7)
    monkeypatch.setenv("PL_GLOBAL_SEED", "7")  # what seed_everything sets for the training run
    data = ModularArithmeticDataModule(p=23, operation="add", train_fraction=0.5)
    data.setup()
    for split in ("train", "test"):
        ours, theirs = eval_split(record, split), data.eval_splits()[split]
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
    record["config"]["data"]["split_seed"] = 3  # an explicit split seed wins over the run seed
    assert not torch.equal(eval_split(record)[0], theirs[0])


def test_checkpoint_files_and_analysis_match_a_direct_computation(tmp_path):
    record = _record(seed=42)
    weights = _save_run(tmp_path / "runs", record)
    files = checkpoint_files(record, tmp_path / "runs")  # record has no name: found by its run id
    assert list(files) == [10, 20] and files[10] == weights / "epoch_00010.pt"
    assert checkpoint_files({**record, "weight_checkpoint_dir": str(weights)}) == files  # moved-store fallback
    assert checkpoint_files(_record(seed=1)) == {}
    payload = torch.load(files[20], weights_only=True)
    model = build_model_from_record(record)
    model.load_state_dict(payload["state_dict"])
    tokens, labels = eval_split(record)
    with torch.no_grad():
        logits, layers = model.eval()(tokens, return_attention=True)
    result = analyse_checkpoint(record, files[20], batch_size=100, pr_construction="examples")  # chunked forward
    assert result["epoch"] == 20 and result["logged_test_acc"] is None
    assert result["test_acc"] == pytest.approx(float((logits.argmax(-1) == labels).float().mean()))
    assert torch.allclose(result["eigenvalues"], head_covariance_eigenvalues(layers), atol=1e-10)
    assert result["esd_alpha"] == pytest.approx(model_esd_alpha(payload["state_dict"]).alpha)
    default = analyse_checkpoint(record, files[20], batch_size=100)  # head outputs: output_examples
    direct = head_output_participation(model, tokens, "output_examples")["pr_norm"]
    assert default["pr_construction"] == "output_examples"
    assert torch.allclose(default["pr_norm_layers"], direct, atol=1e-10)
    first = analyse_checkpoint(record, files[10])
    assert first["logged_test_acc"] == pytest.approx(first["test_acc"])  # rebuilt model = the logged one


def test_checkpoint_analysis_series_and_c1_table(tmp_path):
    lead, other = _record(seed=42), _record(seed=7)
    for record in (lead, other):
        _save_run(tmp_path, record)
    series, rows, tables = long_horizon.checkpoint_analysis([lead, other], tmp_path, lead)
    assert [s["lead"] for s in series] == [True, False] and len(rows) == 4
    for s in series:
        assert s["epoch"] == [10, 20] and all(np.isfinite(s["esd_alpha"]))
    table = tables[lead["run_id"]]
    assert table["max_pr_norm_error"] < 1e-9 and table["n_valid_rows"] == 4  # 2 checkpoints x 2 layers
    at_20 = [r["pr_norm"] for r in table["rows"] if r["epoch"] == 20]
    assert series[0]["pr_norm"][1] == pytest.approx(float(np.median(at_20)))
    row = rows[1]
    model = build_model_from_record(lead)
    model.load_state_dict(torch.load(checkpoint_files(lead, tmp_path)[20], weights_only=True)["state_dict"])
    with torch.no_grad():
        _, layers = model.eval()(eval_split(lead)[0], return_attention=True)
    direct = head_output_participation(model.eval(), eval_split(lead)[0], "output_examples")["pr_norm"]
    assert row["pr_norm_mean_layers"] == pytest.approx(float(direct.mean()), abs=1e-9)
    assert row["pr_construction"] == "output_examples"
    examples = long_horizon.checkpoint_analysis([lead], tmp_path, lead, "examples")[1][1]
    assert examples["pr_norm_mean_layers"] == pytest.approx(float(head_participation_ratio(layers)), abs=1e-9)
    assert row["run"].startswith("wd1.0_seed42_") and row["paper_phase"] is None


def test_without_weights_the_analysis_reads_the_stored_measurements(tmp_path):
    """A clone ships records and checkpoint_points.json, not weights: the analysis from the stored
    measurements equals the one from the weights, and a construction never measured is one line."""
    lead = _record(seed=42)
    weights = _save_run(tmp_path, lead)
    measured = long_horizon.checkpoint_analysis([lead], tmp_path, lead)
    shutil.rmtree(weights)
    assert checkpoint_files(lead, tmp_path) == {}
    stored = long_horizon.checkpoint_analysis([lead], tmp_path, lead)
    assert stored[0] == measured[0] and stored[1] == measured[1]
    assert stored[2][lead["run_id"]]["table"] == measured[2][lead["run_id"]]["table"]
    with pytest.raises(SystemExit, match="no checkpoint measurements for --pr-construction examples"):
        long_horizon.checkpoint_analysis([lead], tmp_path, lead, "examples")
    assert long_horizon.checkpoint_analysis([_record(seed=7)], tmp_path, lead)[1] == []  # nothing stored: no rows


def test_retention_table_counts_tags_against_the_paper():
    records = [_record(1.0, 42, retention="anti-grokked", anti_grok_epoch=14000),
               _record(1.0, 7, retention="retained"), _record(1.0, 11, retention="retained"),
               _record(1.0, 31, status="failed", retention=None),
               _record(3.0, 42, retention="never grokked")]
    table = {t["wd"]: t for t in long_horizon.retention_table(records)}
    one = table[1.0]
    assert (one["n"], one["retained"], one["anti-grokked"], one["collapsed"]) == (4, 2, 1, 0)
    assert one["other"] == {"run failed": 1} and one["anti_grok_epochs"] == {42: 14000}
    assert (one["paper_retained"], one["paper_n"]) == (3, 5)
    assert table[3.0]["never grokked"] == 1 and table[3.0]["paper_retained"] is None


def test_pick_lead_prefers_seed_42_at_lambda_1():
    records = [_record(2.0, 42), _record(1.0, 7), _record(1.0, 42), _record(1.0, 11)]
    lead, underlay = long_horizon.pick_lead(records)
    assert lead is records[2] and [r["config"]["seed"] for r in underlay] == [7, 11]
    lead, underlay = long_horizon.pick_lead([_record(0.5, 7), _record(0.5, 11), _record(0.1, 42)])
    assert lead["config"]["seed"] == 7 and len(underlay) == 1  # lambda closest to 1; first seed in order


def test_five_stage_figure_draws_only_the_bands_inside_the_horizon():
    history = {"epoch": [0, 50, 100, 150, 200, 250, 300], "test_acc": [0.0, 0.1, 0.5, 1.0, 1.0, 1.0, 1.0],
               "mean_similarity": [0.9] * 7, "entropy_std": [0.02, 0.03, 0.02, 0.05, 0.04, 0.03, 0.02]}
    lead = _record(1.0, 42, grok_epoch=150, anti_grok_epoch=None, history=history)
    fig = figure_five_stage(lead, [_record(1.0, 7, history=history)], long_horizon.FIG3_BANDS, "paper note", "caption")
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert "P1" in labels and not labels & {"P2", "P3", "P4", "P5"}
    assert fig.axes[0].get_xlim() == (0, 300)
    legend = [t.get_text() for t in fig.axes[2].get_legend().get_texts()]
    assert "lead peak 0.050 at 150" in legend  # the raw sigma_H peak after epoch 100


def test_only_runs_merge_their_rows(tmp_path):
    summary = {"profile": "smoke", "lead": {"wd": 1.0, "seed": 42}}
    row = lambda q: {"paper": "p", "quantity": q, "paper_value": 1, "ours": 1, "profile": "smoke", "n": 1}
    long_horizon._write(tmp_path, "smoke", ["fig3"], dict(summary), {"fig3": [row("a")]})
    long_horizon._write(tmp_path, "smoke", ["e8"], dict(summary), {"e8": [row("b")]})
    long_horizon._write(tmp_path, "smoke", ["fig3"], dict(summary), {"fig3": [row("c")]})
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["part"], r["quantity"]) for r in rows] == [("fig3", "c"), ("e8", "b")]
    assert json.loads((tmp_path / "summary.json").read_text())["parts"] == ["e8", "fig3"]
    long_horizon._write(tmp_path, "paper", ["e8"], {**summary, "profile": "paper"}, {"e8": [row("d")]})
    assert [r["quantity"] for r in json.loads((tmp_path / "rows.json").read_text())] == ["d"]  # profile changed


def test_sweep_file_attaches_the_callbacks_and_sizes_the_profiles():
    paper = load_sweep(REPO / "configs" / "sweeps" / "long_horizon.yaml", profile="paper").expand()
    assert len(paper) == 20 and {r.config["seed_everything"] for r in paper} == {42, 7, 11, 31, 123}
    assert {r.config["model"]["init_args"]["weight_decay"] for r in paper} == {0.1, 0.5, 1.0, 2.0}
    run = paper[0].config
    assert run["trainer"]["max_epochs"] == 20000 and run["grok"]["extra_epochs"] is None
    schedule, monitor = run["trainer"]["callbacks"]
    assert schedule["class_path"].endswith("CheckpointSchedule") and monitor["class_path"].endswith("RetentionMonitor")
    assert schedule["init_args"]["epochs"] == [100, 500, 1000, 2500, 5000, 7500, 10000, 12500, 15000, 17500, 20000]
    smoke = load_sweep(REPO / "configs" / "sweeps" / "long_horizon.yaml", profile="smoke").expand()
    assert len(smoke) * smoke[0].config["trainer"]["max_epochs"] <= 1500  # ~6 min on 2 cores at ~0.5 s/epoch
    assert smoke[0].config["seed_everything"] == 42  # the lead seed comes first


@pytest.mark.slow
def test_long_horizon_target_end_to_end(tmp_path, monkeypatch):
    base = yaml.safe_load((REPO / "configs" / "sweeps" / "long_horizon.yaml").read_text())
    tiny = yaml.safe_load((REPO / "configs" / "sweeps" / "tiny_test.yaml").read_text())["overrides"]
    tiny.update({"trainer.max_epochs": 30, "trainer.enable_progress_bar": False,
                 "trainer.callbacks": [{"class_path": "grok_lightning.callbacks.CheckpointSchedule",
                                        "init_args": {"epochs": [], "every": 10}},
                                       base["overrides"]["trainer.callbacks"][1]]})
    sweep = {"name": "long_horizon_tiny", "base": str(REPO / "configs" / "canonical.yaml"), "checkpoint_every": 0,
             "overrides": {"grok.extra_epochs": None}, "grid": {"wd": [1.0, 2.0], "seed": [42, 7]},
             "profiles": {"smoke": {"overrides": tiny}}}
    (tmp_path / "lh_tiny.yaml").write_text(yaml.safe_dump(sweep))
    monkeypatch.setattr(long_horizon, "SWEEP", str(tmp_path / "lh_tiny.yaml"))
    out = long_horizon.main(["--profile", "smoke", "--out", str(tmp_path / "out"), "--workers", "0"])
    for png in ("fig3_five_stage.png", "fig6_pr_norm.png", "fig7_esd_alpha.png"):
        assert (out / png).stat().st_size > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lead"]["seed"] == 42 and summary["lead"]["wd"] == 1.0
    assert summary["checkpoints"]["epochs"] == [10, 20, 30]
    assert summary["checkpoints"]["max_test_acc_mismatch"] < 1e-9  # weights reload into the same model
    assert summary["checkpoints"]["max_pr_norm_vs_logged_diagnostic"] < 1e-6  # same covariance as the diagnostic
    assert summary["fig6"]["max_pr_norm_identity_error"] < 1e-9
    assert sum(t["n"] for t in summary["e8"]) == 4
    with open(out / "checkpoints.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 4 * 3
    rows = json.loads((out / "rows.json").read_text())
    assert {r["part"] for r in rows} == set(long_horizon.PARTS)
    assert "E8 retention" in (out / "NOTES.md").read_text()
    long_horizon.main(["--profile", "smoke", "--out", str(tmp_path / "out"), "--workers", "0", "--only", "fig3"])
    assert {r["part"] for r in json.loads((out / "rows.json").read_text())} == set(long_horizon.PARTS)
