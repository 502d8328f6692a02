"""AttentionDiagnostics on a real (tiny) run, the cosine images, and the phase helpers."""

from __future__ import annotations

import numpy as np
import torch

from grok_lightning.metrics import attention_statistics
from grok_lightning.run import GrokCLI, run_config
from grok_lightning.stats import peak_entropy_std, phase_summary


def test_diagnostics_recorded_logged_and_match_a_direct_computation(tiny):
    config = tiny(max_epochs=2, n_layers=2)
    config["diagnostics"] = {"every": 1, "per_layer": True, "image_every": 1}
    cli = GrokCLI(args=config, run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    record = next(c for c in cli.trainer.callbacks if type(c).__name__ == "RunRecorder").record
    history = record["history"]
    for key in ("mean_similarity", "entropy_std", "entropy_mean", "entropy_range", "spectral_gap", "pr_norm", "pr_norm_ratio"):
        assert len(history[key]) == len(history["epoch"]) and None not in history[key]
        assert history[f"layer_1/{key}"][-1] is not None
    # the last row equals the formulas applied to the trained model's test-split attention
    module = cli.model
    x_test = cli.datamodule.x_test
    with torch.no_grad():
        _, attention = module.model(x_test, return_attention=True)
    direct = attention_statistics(attention)
    assert abs(history["mean_similarity"][-1] - float(direct["mean_similarity"])) < 1e-6
    assert abs(history["entropy_std"][-1] - float(direct["entropy_std"])) < 1e-6
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(cli.trainer.log_dir, size_guidance={"images": 0}).Reload()
    assert "diag/mean_similarity" in events.Tags()["scalars"]
    assert "diag_layer_0/entropy_std" in events.Tags()["scalars"]
    assert {"head_cosine/layer_0", "head_cosine/layer_1"} <= set(events.Tags()["images"])


def test_diagnostics_can_be_disabled(tiny):
    config = tiny(max_epochs=1)
    config["run"]["diagnostics"] = False
    record = run_config(config)
    assert "mean_similarity" not in record["history"]


def test_peak_entropy_std_skips_initial_transient():
    history = {"epoch": [0, 10, 100, 110, 500], "entropy_std": [0.9, 0.8, 0.7, 0.1, 0.2]}
    assert peak_entropy_std(history) == (0.2, 500)
    assert np.isnan(peak_entropy_std({"epoch": [0, 50], "entropy_std": [0.1, 0.2]})[0])


def test_phase_summary_landmarks():
    epochs = [0, 10, 50, 100, 150, 200, 300, 600]
    s_bar = [0.95, 0.84, 0.88, 0.90, 0.97, 0.99, 0.93, 0.91]
    sigma = [0.02, 0.02, 0.02, 0.03, 0.04, 0.05, 0.09, 0.06]
    train_acc = [0.01, 0.6, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # memorised from epoch 50
    history = {"epoch": epochs, "mean_similarity": s_bar, "entropy_std": sigma, "train_acc": train_acc}
    summary = phase_summary(history, grok_epoch=150)
    assert summary.s_bar_start == 0.95 and summary.memorised_epoch == 50
    # the Phase-1 rise starts at the minimum while memorised (0.88), not at the early dip (0.84)
    assert summary.s_bar_memorised == 0.88 and summary.s_bar_min_before_grok == 0.84
    assert summary.s_bar_peak == 0.99 and summary.s_bar_peak_epoch == 200
    assert abs(summary.phase1_rise - 0.11) < 1e-12 and summary.s_bar_min_after_grok == 0.91
    assert summary.peak_entropy_std == 0.09 and summary.peak_entropy_std_epoch == 300
    none = phase_summary({"epoch": epochs, "mean_similarity": s_bar, "entropy_std": sigma}, grok_epoch=None)
    assert none.to_dict()["s_bar_peak"] is None
