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


def test_reproduce_rllc_without_devinterp_or_checkpoints_writes_not_run_rows(tmp_path, monkeypatch):
    from reproduce.targets import rllc

    rllc.analyse([], tmp_path / "runs", "smoke", tmp_path / "a", SGLDSettings())
    rows = json.loads((tmp_path / "a" / "rows.json").read_text())
    assert rows[0]["ours"] is None and "no run of the long-horizon sweep has saved weights" in rows[0]["note"]
    monkeypatch.setattr(rllc, "devinterp_version", lambda: None)
    import reproduce.targets.weight_analysis

    monkeypatch.setattr(reproduce.targets.weight_analysis, "checkpoint_files", lambda record, root: {1: "x"})
    rllc.analyse([{"status": "completed"}], tmp_path / "runs", "smoke", tmp_path / "b", SGLDSettings())
    assert "devinterp is not installed" in json.loads((tmp_path / "b" / "rows.json").read_text())[0]["note"]
