"""Long-horizon building blocks: retention, scheduled weight checkpoints, checkpoint spectra.

All fast and on CPU: the retention monitor is driven by scripted evaluations, the checkpoint
schedule by a tiny real run (seconds), the spectra by synthetic data and the reference JSON.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback

from conftest import InterruptAfter, read_reference
from grok_lightning.callbacks import CheckpointSchedule, RetentionMonitor
from grok_lightning.config import ConfigError
from grok_lightning.metrics.functional import head_participation_ratio, participation_ratio_from_cv
from grok_lightning.records import load_record
from grok_lightning.run import GrokCLI
from grok_lightning.stats import (
    esd_alpha,
    fit_power_law,
    head_covariance_eigenvalues,
    model_esd_alpha,
    pr_norm_checkpoint_table,
)


# --- RetentionMonitor -------------------------------------------------------------------------
def _drive(monitor, evaluations):
    """evaluations: (epoch, test_acc, train_acc)."""
    for epoch, test, train in evaluations:
        monitor.observe(epoch, test, train)
    return monitor


GROK = [(0, 0.01, 0.01), (50, 0.5, 1.0), (100, 0.995, 1.0)]


def test_slingshot_spikes_are_not_anti_grokking():
    spikes = [(110, 0.30, 0.35),  # slingshot: both accuracies fall for one evaluation
              (120, 1.0, 1.0), (130, 0.40, 1.0),  # a one-evaluation test-only dip
              (140, 1.0, 1.0), (150, 0.5, 1.0), (160, 0.5, 1.0), (170, 0.95, 1.0), (180, 0.5, 1.0),  # broken window
              (190, 1.0, 1.0)]
    monitor = _drive(RetentionMonitor(), GROK + spikes)
    assert monitor.tag == "retained" and monitor.anti_grok_epoch is None and monitor.episodes == []
    assert monitor.grok_epoch == 100


def test_persistent_drop_is_anti_grokking_dated_by_its_first_epoch():
    drop = [(200, 1.0, 1.0), (210, 0.6, 1.0), (220, 0.5, 0.999), (230, 0.46, 1.0), (240, 0.45, 1.0)]
    monitor = _drive(RetentionMonitor(), GROK + drop)
    assert monitor.tag == "anti-grokked" and monitor.anti_grok_epoch == 210
    assert monitor.episodes == [{"kind": "anti-grokked", "epoch": 210, "recovered_epoch": None}]
    summary = monitor.summary()
    assert summary["retention"] == "anti-grokked" and summary["retention_final_test_acc"] == 0.45


def test_recovery_needs_persistence_and_keeps_the_episode():
    events = GROK + [(210, 0.5, 1.0), (220, 0.5, 1.0), (230, 0.5, 1.0), (240, 1.0, 1.0), (250, 0.5, 1.0),
                     (260, 0.995, 1.0), (270, 1.0, 1.0), (280, 1.0, 1.0)]
    monitor = _drive(RetentionMonitor(), events)
    assert monitor.tag == "retained" and monitor.anti_grok_epoch == 210
    assert monitor.episodes == [{"kind": "anti-grokked", "epoch": 210, "recovered_epoch": 260}]


def test_never_grokked_and_collapse_are_distinct_tags():
    assert _drive(RetentionMonitor(), [(0, 0.01, 0.01), (10, 0.95, 1.0), (20, 0.98, 1.0)]).tag == "never grokked"
    collapse = _drive(RetentionMonitor(), GROK + [(110, 0.2, 0.3), (120, 0.2, 0.25), (130, 0.1, 0.2)])
    assert collapse.tag == "collapsed" and collapse.anti_grok_epoch is None
    # thresholds are configurable: a 2-evaluation window confirms what 3 would not
    short = GROK + [(110, 0.5, 1.0), (120, 0.5, 1.0)]
    assert _drive(RetentionMonitor(), short).tag == "retained"
    assert _drive(RetentionMonitor(persistence=2), short).tag == "anti-grokked"
    with pytest.raises(ConfigError, match="retention.drop_below"):
        RetentionMonitor(drop_below=0.995)


def test_state_round_trip_mid_window_continues_the_window(tmp_path):
    first = _drive(RetentionMonitor(), GROK + [(210, 0.5, 1.0), (220, 0.5, 1.0)])
    assert first.tag == "retained"  # 2 of 3
    torch.save(first.state_dict(), tmp_path / "state.pt")
    resumed = RetentionMonitor()
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    _drive(resumed, [(230, 0.5, 1.0)])
    assert resumed.tag == "anti-grokked" and resumed.anti_grok_epoch == 210
    assert resumed.state_key == RetentionMonitor().state_key != RetentionMonitor(persistence=5).state_key


# --- CheckpointSchedule in a tiny real run ---------------------------------------------------------
def _fit(config, ckpt_path=None, append=()):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
        cli = GrokCLI(args=config, run=False)
    cli.trainer.callbacks.extend(append)
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        torch.set_flush_denormal(False)
    return cli


def _with_callbacks(config, epochs):
    """The documented YAML way: trainer.callbacks with class_path / init_args."""
    config["trainer"]["callbacks"] = [
        {"class_path": "grok_lightning.callbacks.CheckpointSchedule", "init_args": {"epochs": epochs}},
        {"class_path": "grok_lightning.callbacks.RetentionMonitor", "init_args": {"persistence": 3}},
    ]
    return config


class _Epochs(Callback):
    def __init__(self):
        self.trained = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.trained.append(trainer.current_epoch + 1)


@pytest.mark.filterwarnings("ignore:Checkpoint directory")
def test_checkpoint_schedule_saves_loads_and_resumes_without_duplicates(tiny):
    # reference: uninterrupted, epochs 0, 2, 3, 4 (evaluated: 0, 1, 2, 4)
    reference = _fit(_with_callbacks(tiny(max_epochs=4), [0, 2, 3, 4]))
    log_dir = Path(reference.trainer.log_dir)
    files = sorted(p.name for p in (log_dir / "weights").iterdir())
    assert files == ["epoch_00000.pt", "epoch_00002.pt", "epoch_00003.pt", "epoch_00004.pt"]
    record = load_record(log_dir / "record.json")
    assert record["weight_checkpoints"] == [f"weights/{f}" for f in files]
    assert record["retention"] in ("never grokked", "retained")  # the monitor ran and tagged the run
    last = torch.load(log_dir / "weights" / "epoch_00004.pt", weights_only=True)
    assert last["epoch"] == 4
    for name, tensor in reference.model.model.state_dict().items():  # same clock as the history
        assert torch.equal(last["state_dict"][name], tensor)
    two = torch.load(log_dir / "weights" / "epoch_00002.pt", weights_only=True)
    row = record["history"]["epoch"].index(2)
    assert two["metrics"]["test_acc"] == record["history"]["test_acc"][row]
    assert torch.load(log_dir / "weights" / "epoch_00003.pt", weights_only=True)["metrics"] is None  # not evaluated
    copy.deepcopy(reference.model.model).load_state_dict(last["state_dict"], strict=True)  # loadable as is

    # interrupted after epoch 3 (last.ckpt is from epoch 2), then resumed to 4
    config = _with_callbacks(tiny(max_epochs=4), [0, 2, 3])
    config["trainer"]["logger"]["init_args"]["version"] = "interrupted"
    killed = _fit(config, append=[InterruptAfter(3)])
    weights = Path(killed.trainer.log_dir) / "weights"
    before = {p.name: p.stat().st_mtime_ns for p in weights.iterdir()}
    assert sorted(before) == ["epoch_00000.pt", "epoch_00002.pt", "epoch_00003.pt"]
    spy = _Epochs()
    resumed = _fit(config, ckpt_path=str(Path(killed.trainer.log_dir) / "checkpoints" / "last.ckpt"), append=[spy])
    assert spy.trained == [3, 4], "epoch 3 is trained again, so its existing file is what the resume skips"
    after = {p.name: p.stat().st_mtime_ns for p in weights.iterdir()}
    assert after == before, "a resume neither rewrites nor duplicates checkpoints"
    assert not list(weights.glob(".*.tmp"))
    record = load_record(Path(resumed.trainer.log_dir) / "record.json")
    assert record["status"] == "completed"
    assert record["weight_checkpoints"] == [f"weights/epoch_{e:05d}.pt" for e in (0, 2, 3)]
    three_ref = torch.load(log_dir / "weights" / "epoch_00003.pt", weights_only=True)["state_dict"]
    three = torch.load(weights / "epoch_00003.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(three[k], three_ref[k]) for k in three_ref)


def test_checkpoint_schedule_options():
    from grok_lightning.callbacks.weight_snapshots import PAPER_CHECKPOINT_EPOCHS, checkpoint_epochs

    assert tuple(checkpoint_epochs()) == PAPER_CHECKPOINT_EPOCHS
    dense = checkpoint_epochs(every=1000, dense_until=30, dense_every=10, max_epochs=3000)
    assert dense == [10, 20, 30, 1000, 2000, 3000]
    with pytest.raises(ConfigError, match="checkpoints.every"):
        CheckpointSchedule(every=0)


# --- ESD alpha ---------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [2.0, 3.0])
def test_esd_alpha_recovers_a_pareto_exponent(alpha):
    rng = np.random.default_rng(12345)
    tail = (1 - rng.random(3000)) ** (-1 / (alpha - 1))  # Pareto(xmin = 1, alpha)
    bulk = rng.uniform(0.05, 1.0, 1000)  # below the tail: the KS xmin search must cut it off
    fit = fit_power_law(np.concatenate([tail, bulk]))
    assert abs(fit.alpha - alpha) < 0.1
    assert 0.5 < fit.xmin < 2.0 and fit.n_tail >= 1000 and fit.ks_distance < 0.05
    assert fit.sigma == pytest.approx((fit.alpha - 1) / math.sqrt(fit.n_tail))


def test_esd_alpha_of_matrices_and_models():
    torch.manual_seed(0)
    fit = esd_alpha(torch.randn(256, 64))
    assert fit.n_eigs == 64 and math.isfinite(fit.alpha) and fit.alpha > 1
    # W = U diag(s) V^T with eigenvalues s^2 Pareto-distributed: alpha is a property of the spectrum
    rng = np.random.default_rng(1)
    s2 = (1 - rng.random(400)) ** (-1 / 1.5)
    u, _ = np.linalg.qr(rng.standard_normal((600, 400)))
    v, _ = np.linalg.qr(rng.standard_normal((400, 400)))
    assert esd_alpha(torch.tensor(u * np.sqrt(s2) @ v.T)).alpha == pytest.approx(fit_power_law(s2).alpha, abs=1e-6)
    state = {"a.weight": torch.randn(64, 32), "b.weight": torch.randn(32, 32), "pos": torch.randn(3, 32),
             "a.bias": torch.randn(64)}
    model = model_esd_alpha({"epoch": 5, "state_dict": state})
    assert set(model.per_matrix) == {"a.weight", "b.weight"} and set(model.skipped) == {"pos"}
    assert model.alpha == pytest.approx(np.median([f.alpha for f in model.per_matrix.values()]))
    json.dumps(model.to_dict())


@pytest.mark.parametrize("bad, message", [
    (torch.randn(4, 5, 6), "2-D"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "non-finite"),
    (torch.randn(3, 40), "fewer than min_tail"),
    (torch.zeros(20, 20), "fewer than min_tail"),
])
def test_esd_alpha_rejects_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        esd_alpha(bad)


def test_fit_power_law_rejects_bad_values():
    for values, message in [([], "finite"), ([1.0, -2.0] * 10, "> 0"), ([2.0] * 20, "constant")]:
        with pytest.raises(ValueError, match=message):
            fit_power_law(values)


# --- the C1 identity table (Table 3) -------------------------------------------------------------
def test_c1_identity_holds_on_random_eigenvalues():
    rng = np.random.default_rng(0)
    checkpoints = {epoch: torch.tensor(rng.gamma(0.5, 1.0, size=(4, 8))) for epoch in (100, 500, 1000)}
    checkpoints[100][2] = 0.0  # a rank-collapsed layer: skipped, as the paper's NaN markers
    table = pr_norm_checkpoint_table(checkpoints)
    assert table["n_valid_rows"] == 11 and table["n_skipped"] == 1
    assert table["max_identity_error"] < 1e-9 and table["max_pr_error"] < 1e-9 and table["max_pr_norm_error"] < 1e-9
    for row in (r for r in table["rows"] if r["valid"]):
        assert row["pr"] == pytest.approx(row["n"] / (1 + row["cv2"]), abs=1e-9)
        assert row["pr_norm"] == pytest.approx((row["pr"] - 1) / 7, abs=1e-12)
        assert row["pr_norm_ratio"] == pytest.approx(row["pr"] / 8, abs=1e-12)
    assert [t["phase_label"] for t in table["table"]] == ["P0_init", "P1_sync", "P1_sync"]
    assert table["table"][0]["n_layers"] == 3


def test_c1_table_from_attention_matches_the_diagnostic():
    torch.manual_seed(0)
    layers = [torch.softmax(torch.randn(16, 8, 3, 3), dim=-1) for _ in range(2)]
    table = pr_norm_checkpoint_table({100: layers}, source="attention")
    per_layer = head_participation_ratio(layers, per_layer=True)
    assert [r["pr_norm"] for r in table["rows"]] == pytest.approx(per_layer.tolist(), abs=1e-12)
    assert head_covariance_eigenvalues(layers).shape == (2, 8)


def _layers_with_sample_cv(cv: float, n_layers: int = 4, heads: int = 8) -> torch.Tensor:
    """``(L, H)`` identical layers of non-negative eigenvalues ``1 + t z`` with sample CV ``cv``."""
    z = torch.full((heads,), -1.0, dtype=torch.float64)
    z[0] = heads - 1  # mean 0, min -1: non-negative for t <= 1, i.e. cv <= sqrt(H)
    t = cv / z.std(correction=1).item()
    return (1 + t * z).expand(n_layers, heads).clone()


def test_c1_table_against_the_reference_json():
    """The JSON stores layer means only (mean sample CV, mean PR_norm measured and C1-predicted), so
    its rows cannot be recomputed exactly. What can be: our table carries its columns and phase
    labels; for layers alike, our table turns the mean sample CV into PR_norm with the
    sample->population correction and the affine form, which reproduces the epoch-100 row (init,
    layers nearly alike) to the layer-mean gap (< 5e-4); the R/H form and an uncorrected CV miss."""
    reference = read_reference("c1_empirical_validation.json")
    rows = reference["cv_trajectory_canonical_s42"]
    table = pr_norm_checkpoint_table({r["epoch"]: _layers_with_sample_cv(r["mean_CV_lambda"]) for r in rows})
    assert table["max_pr_norm_error"] < 1e-9 and table["n_valid_rows"] == 4 * len(rows)
    tolerance = reference["identity_error_bias_corrected"]["PR_norm_max_err"]  # 2.6e-7, float32 checkpoints
    for theirs, ours in zip(rows, table["table"]):
        assert set(theirs) <= set(ours), "our rows carry the reference JSON's columns"
        assert ours["epoch"] == theirs["epoch"] and ours["phase_label"] == theirs["phase_label"]
        assert ours["mean_CV_lambda"] == pytest.approx(theirs["mean_CV_lambda"], rel=1e-12)
        assert abs(ours["mean_PR_norm_measured"] - ours["mean_PR_norm_predicted_C1_corrected"]) < 1e-12
        # the JSON's own rows satisfy the identity within its stated max error
        assert abs(theirs["mean_PR_norm_measured"] - theirs["mean_PR_norm_predicted_C1_corrected"]) <= tolerance
    first, ours = rows[0], table["table"][0]
    assert ours["mean_PR_norm_measured"] == pytest.approx(first["mean_PR_norm_measured"], abs=5e-4)
    assert abs(ours["mean_PR_norm_ratio"] - first["mean_PR_norm_measured"]) > 2e-3
    uncorrected = participation_ratio_from_cv(first["mean_CV_lambda"], 8, "affine", ddof=0).item()
    assert abs(uncorrected - first["mean_PR_norm_measured"]) > 1e-2
