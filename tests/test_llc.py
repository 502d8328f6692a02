"""rLLC with devinterp (grok_lightning.stats.llc) and the sigma_H timing, on a tiny model trained in
a plain torch loop (seconds). The SGLD tests skip without the optional extra ``llc`` (devinterp);
the restriction, the sigma_H timing and the target's "not run" path need no extra."""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

from grok_lightning.data.modular import modular_table
from grok_lightning.metrics.functional import attention_statistics
from grok_lightning.models.transformer import DecoderTransformer
from grok_lightning.stats.llc import LLCEstimate, SGLDSettings, estimate_rllc, restricted_parameter_names, time_sigma_h
from reproduce.report.rows import paper_value

P = 11
needs_devinterp = pytest.mark.skipif(importlib.util.find_spec("devinterp") is None,
                                     reason="devinterp not installed (extra 'llc')")


@pytest.fixture(scope="module")
def trained():
    """A 1-layer, 2-head transformer fitted to half of the mod-11 addition table (about 2 s)."""
    torch.manual_seed(0)
    pairs, labels = modular_table(P, "add")
    tokens = torch.cat([pairs, torch.full((len(pairs), 1), P)], dim=1)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    train, test = order[:64], order[64:]
    model = DecoderTransformer(P + 1, P, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(300):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(tokens[train]), labels[train])
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    return model, tokens[train], labels[train], tokens[test]


def test_restriction_selects_attention_weights(trained):
    model = trained[0]
    names = restricted_parameter_names(model, "attention")
    assert names == ["blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.out.weight",
                     "blocks.0.attn.out.bias"]
    assert restricted_parameter_names(model, "attention:0") == names
    assert len(restricted_parameter_names(model, "all")) == len(list(model.parameters()))
    assert restricted_parameter_names(model, lambda n: n == "head.bias") == ["head.bias"]
    with pytest.raises(ValueError, match="selects no parameter"):
        restricted_parameter_names(model, "attention:5")
    with pytest.raises(ValueError, match="must be"):
        restricted_parameter_names(model, "mlp")


@needs_devinterp
def test_rllc_is_finite_positive_and_leaves_the_model_alone(trained):
    model, x, y, _ = trained
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = SGLDSettings(lr=1e-4, localization=1e3, num_chains=2, num_draws=30, num_burnin_steps=10, batch_size=32)
    estimate = estimate_rllc(model, x, y, settings)
    assert isinstance(estimate, LLCEstimate)
    assert math.isfinite(estimate.mean) and estimate.mean > 0, estimate.to_dict()
    assert len(estimate.per_chain) == 2 and estimate.std >= 0
    assert len(estimate.draw_loss) == 2 and len(estimate.draw_loss[0]) == 30
    assert estimate.n_parameters == sum(p.numel() for n, p in model.named_parameters() if ".attn." in n)
    assert estimate.wall_s > 0 and estimate.devinterp and estimate.devinterp.startswith("2.")
    assert estimate.settings["nbeta_resolved"] == pytest.approx(32 / math.log(32))
    assert estimate.init_loss == pytest.approx(torch.nn.functional.cross_entropy(model(x), y).item(), abs=0.02)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the same seed gives the same chains; the whole model moves more than its attention alone
    again = estimate_rllc(model, x, y, settings)
    assert again.per_chain == pytest.approx(estimate.per_chain, rel=1e-5)
    assert estimate_rllc(model, x, y, settings, restrict="all").mean > estimate.mean
    with pytest.raises(ValueError, match="batch_size"):
        estimate_rllc(model, x, y, SGLDSettings(batch_size=1000))


def test_sigma_h_timing_matches_the_diagnostic(trained):
    model, _, _, x_test = trained
    timing = time_sigma_h(model, x_test, repeats=2, eval_batch_size=16)  # chunked: same value as one shot
    with torch.no_grad():
        _, attentions = model(x_test, return_attention=True)
    assert timing["sigma_H"] == pytest.approx(float(attention_statistics(attentions)["entropy_std"]), rel=1e-6)
    assert 0 < timing["stats_only_s"] <= timing["forward_and_stats_s"]
    assert timing["repeats"] == 2 and model.training  # the mode is restored


@needs_devinterp
@pytest.mark.slow
def test_reproduce_rllc_on_a_tiny_checkpointed_run(tiny, tmp_path):
    """A real tiny run with CheckpointSchedule, then the rLLC target's analysis on its checkpoints (~15 s)."""
    from grok_lightning.run import run_config
    from reproduce.targets.rllc import analyse

    config = tiny(max_epochs=6)
    config["trainer"]["callbacks"] = [{"class_path": "grok_lightning.callbacks.CheckpointSchedule",
                                       "init_args": {"epochs": [1, 2, 3, 4, 5, 6]}}]
    record = run_config(config)
    assert len(record["weight_checkpoints"]) == 6
    settings = SGLDSettings(lr=1e-5, localization=1e3, num_chains=2, num_draws=10, num_burnin_steps=5, batch_size=32)
    summary = analyse([record], tmp_path / "runs", "smoke", tmp_path / "rllc", settings)
    assert len(summary["points"]) == 6
    assert {p["sigma_H_source"] for p in summary["points"]} == {"history", "recomputed from the checkpoint"}
    assert summary["max_sigma_H_history_vs_recomputed"] < 1e-6  # the rebuilt model and split are the run's
    assert "r" in summary["correlation"] or summary["correlation"]["undefined"].startswith("undefined")
    for name in ("rllc_sigma_h.png", "checkpoints.csv", "summary.json", "rows.json"):
        assert (tmp_path / "rllc" / name).is_file(), name
    rows = json.loads((tmp_path / "rllc" / "rows.json").read_text())
    assert paper_value(rows[0]) == 0.462 and rows[-1]["ours"] > 1  # rLLC costs more than sigma_H


def _lead_record(name: str = "wd1.0_seed42_abcdef12") -> dict:
    return {"status": "completed", "run_id": "abcdef12" + "0" * 56, "name": name,
            "config": {"wd": 1.0, "seed": 42, "max_epochs": 20000, "precision": "bf16-mixed",
                       "model": {"n_layers": 4, "n_heads": 8, "d_model": 128}, "data": {"p": 97}},
            "history": {"epoch": [100, 500], "entropy_std": [0.2, 0.3]}}


def test_reproduce_rllc_without_devinterp_or_checkpoints_writes_not_run_rows(tmp_path, monkeypatch):
    from reproduce.targets import rllc

    rllc.analyse([], tmp_path / "runs", "smoke", tmp_path / "a", SGLDSettings())
    rows = json.loads((tmp_path / "a" / "rows.json").read_text())
    assert rows[0]["ours"] is None and "no run of the long-horizon sweep has saved weights" in rows[0]["note"]
    monkeypatch.setattr(rllc, "devinterp_version", lambda: None)
    import reproduce.targets.weight_analysis

    monkeypatch.setattr(reproduce.targets.weight_analysis, "checkpoint_files", lambda record, root: {1: "x"})
    rllc.analyse([_lead_record()], tmp_path / "runs", "smoke", tmp_path / "b", SGLDSettings())
    assert "devinterp is not installed" in json.loads((tmp_path / "b" / "rows.json").read_text())[0]["note"]


def _point(epoch: int, rllc_mean: float, sigma_h: float) -> dict:
    return {"run_id": "abcdef12" + "0" * 56, "seed": 42, "wd": 1.0, "epoch": epoch, "rllc_mean": rllc_mean,
            "rllc_std": 0.1, "rllc_per_chain": [rllc_mean] * 3, "init_loss": 0.01, "devinterp_llc_mean": rllc_mean,
            "rllc_s": 20.0, "n_parameters": 66048, "sigma_H": sigma_h, "sigma_H_source": "history",
            "sigma_H_recomputed": sigma_h, "sigma_H_s": 0.05, "sigma_H_stats_only_s": 0.001, "notes": "",
            "trace_first_last": [0.01, 0.02]}


def test_reproduce_rllc_reads_stored_measurements_without_weights_or_devinterp(tmp_path, monkeypatch):
    """A clone ships each run's rLLC measurements beside its record, not its weights: the target
    rebuilds r from them; only an epoch that is not stored is measured (and then stored)."""
    from grok_lightning.stats import pearson_r
    from reproduce.targets import rllc

    monkeypatch.setattr(rllc, "devinterp_version", lambda: None)
    runs, record, settings = tmp_path / "runs", _lead_record(), rllc.PROFILE_SGLD["medium"]
    (runs / record["name"]).mkdir(parents=True)
    stored = [_point(e, v, s) for e, v, s in [(100, 5.0, 0.30), (500, 4.0, 0.25), (1000, 3.5, 0.20), (2500, 2.0, 0.10),
                                              (5000, 2.5, 0.12)]]
    other = SGLDSettings(num_chains=1)  # another setting's measurements are never read for this one
    (runs / record["name"] / rllc.RLLC_FILE).write_text(json.dumps({
        rllc.settings_key(settings, "attention"): {"devinterp": "2.0.1", "points": stored},
        rllc.settings_key(other, "attention"): {"devinterp": "2.0.1", "points": stored[:1]}}))
    summary = rllc.analyse([record], runs, "medium", tmp_path / "out", settings)
    written = (tmp_path / "out" / "summary.json").read_bytes()
    rllc.analyse([record], runs, "medium", tmp_path / "out", settings)  # a second reading writes the same bytes
    assert (tmp_path / "out" / "summary.json").read_bytes() == written
    assert summary["measured_s"] == pytest.approx(sum(p["rllc_s"] + p["sigma_H_s"] for p in stored))
    expected = pearson_r([p["sigma_H"] for p in stored], [p["rllc_mean"] for p in stored])
    assert summary["correlation"]["n"] == 5 and math.isclose(summary["correlation"]["r"], expected["r"], rel_tol=1e-12)
    assert summary["devinterp"] == "2.0.1"
    row = json.loads((tmp_path / "out" / "rows.json").read_text())[0]
    assert row["ours"] == pytest.approx(expected["r"]) and "5 checkpoints (paper 11)" in row["note"]
    assert "trained with bf16 autocast" in row["note"]
    # an epoch with weights but no stored measurement must be measured: without devinterp, "not run"
    import reproduce.targets.weight_analysis

    monkeypatch.setattr(reproduce.targets.weight_analysis, "checkpoint_files", lambda rec, root: {7500: "w.pt"})
    with pytest.raises(rllc.DevinterpMissing):
        rllc.measure_run(record, runs, settings)
    measured = {}

    def fake_measure(rec, root, epochs, s, restrict):
        measured[tuple(epochs)] = True
        return {e: _point(e, 1.0, 0.05) for e in epochs}

    monkeypatch.setattr(rllc, "devinterp_version", lambda: "2.0.1")
    monkeypatch.setattr(rllc, "_measure", fake_measure)
    points, _ = rllc.measure_run(record, runs, settings)
    assert [p["epoch"] for p in points] == [100, 500, 1000, 2500, 5000, 7500] and list(measured) == [(7500,)]
    assert [p["epoch"] for p in rllc.measure_run(record, runs, settings)[0]][-1] == 7500 and len(measured) == 1
    assert [p["epoch"] for p in rllc.measure_run(record, runs, settings, max_checkpoints=3)[0]] == [100, 1000, 7500]
    saved = json.loads((runs / record["name"] / rllc.RLLC_FILE).read_text())
    assert len(saved[rllc.settings_key(other, "attention")]["points"]) == 1  # other settings kept
