"""TensorBoard as a reader sees it: read back a short run's event files with TensorBoard's own
event reader and check that the dashboards cannot mislead (one x axis, no placeholder points,
the head-cosine images that matter, a short hparams table, descriptions)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.custom_scalar import metadata as layout_metadata
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util

from conftest import InterruptAfter, tiny_config
from grok_lightning.callbacks import GrokDetector
from grok_lightning.callbacks.dashboard import TENSORBOARD_URL, curated_hparams, describe, tensorboard_command
from grok_lightning.callbacks.evaluation import ScheduledEvaluation, StepLossLogger
from grok_lightning.callbacks.progress import summary_lines
from grok_lightning.ensembles import build_ensemble
from grok_lightning.run import GrokCLI

EPOCHS, GROK = 6, 2  # evaluations at 0, 1, 2, 4, 6; images every 10th evaluation -> only epoch 0 by cadence
CURATED = {"arch", "shape", "weight decay", "lr", "betas", "seed", "operation", "p", "train fraction", "profile",
           "horizon"}
HP = {"hp/grok_epoch", "hp/final_test_acc", "hp/final_train_acc", "hp/final_test_loss"}


class GrokAt:
    """Makes the run 'grok' at a fixed epoch (a tiny model does not in seconds): a contributor
    between the grok detector and the diagnostics, as a real grok would look to those after it."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def contribute(self, trainer, pl_module, epoch, row, captured) -> dict:
        detector = next(c for c in trainer.callbacks if isinstance(c, GrokDetector))
        if epoch == self.epoch:
            detector.grok_epoch = epoch
        pl_module.record_extras["grok_epoch"] = detector.grok_epoch
        return {}


def config(tmp_path: Path, version: str = "v0", seed: int = 0) -> dict:
    c = tiny_config(tmp_path, max_epochs=EPOCHS)
    c["seed_everything"] = seed
    c["diagnostics"] = {"every": 1, "per_layer": True, "image_every": 10}
    c["trainer"]["logger"]["init_args"]["version"] = version
    c["run"].update(checkpoint_every=0, run_id=version)
    return c


def events(log_dir) -> EventAccumulator:
    return EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0}).Reload()


def check_dashboard(ev: EventAccumulator, grok_epoch: int | None, final_epoch: int) -> None:
    scalars = ev.Tags()["scalars"]
    assert "epoch" not in scalars and not any(t.startswith("train/") for t in scalars)
    for tag in scalars:
        steps = [e.step for e in ev.Scalars(tag)]
        if tag.startswith("train_per_step/"):  # the opt-in per-step section, named for its unit
            continue
        assert max(steps) <= EPOCHS, f"{tag}: steps {steps} are not epochs"
        metadata = ev.SummaryMetadata(tag)  # with a data class, TensorBoard's fast loader keeps the description
        assert describe(tag) and metadata.summary_description == describe(tag), tag
        assert metadata.data_class == summary_pb2.DATA_CLASS_SCALAR, tag
    # the epoch-level training loss: one point per epoch, mean <= max
    assert [e.step for e in ev.Scalars("loss/train_step_mean")] == list(range(1, final_epoch + 1))
    means, maxima = ev.Scalars("loss/train_step_mean"), ev.Scalars("loss/train_step_max")
    assert all(m.value <= x.value for m, x in zip(means, maxima))
    # outcomes: exactly one point each, at the last evaluated epoch; no placeholder
    expected = HP if grok_epoch is not None else HP - {"hp/grok_epoch"}
    assert {t for t in scalars if t.startswith("hp/")} == expected
    for tag in expected:
        assert [e.step for e in ev.Scalars(tag)] == [final_epoch], tag
    if grok_epoch is not None:
        assert ev.Scalars("hp/grok_epoch")[0].value == grok_epoch
    # head-cosine images: the cadence (epoch 0), t_grok and the final epoch, each with a description
    assert ev.Tags()["images"] == ["head_cosine/layer_0"]
    image_steps = [e.step for e in ev.Images("head_cosine/layer_0")]
    assert image_steps == sorted({0, final_epoch} | ({grok_epoch} if grok_epoch is not None else set()))
    first = ev.Images("head_cosine/layer_0")[0]
    assert first.encoded_image_string.startswith(b"\x89PNG") and first.width > 200 and first.height > 200
    assert "colour scale" in ev.SummaryMetadata("head_cosine/layer_0").summary_description
    check_layout(ev)


def check_layout(ev: EventAccumulator) -> None:
    """The CUSTOM SCALARS tab: accuracy (train and test on one chart), then s_bar and sigma_H; every
    chart draws tags the run wrote."""
    (point,) = ev.Tensors(layout_metadata.CONFIG_SUMMARY_TAG)
    layout = layout_pb2.Layout.FromString(tensor_util.make_ndarray(point.tensor_proto).item())
    first = layout.category[0]
    scalars = ev.Tags()["scalars"]
    drawn = [[t for t in scalars if any(re.match(r, t) for r in chart.multiline.tag)] for chart in first.chart]
    assert sorted(drawn[0]) == ["accuracy/test", "accuracy/train"]
    assert drawn[1:3] == [["diag/mean_similarity"], ["diag/entropy_std"]]
    assert all(drawn) and all(any(re.match(r, t) for t in scalars) for c in layout.category[1].chart for r in c.multiline.tag)


def hparams_of(ev: EventAccumulator):
    content = ev.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    start = hparams_metadata.parse_session_start_info_plugin_data(content[hparams_metadata.SESSION_START_INFO_TAG])
    experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
    values = {k: v.string_value if v.HasField("string_value") else v.number_value for k, v in start.hparams.items()}
    return values, experiment


def test_single_run_reads_at_a_glance(tmp_path):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*args parameter.*")
        cli = GrokCLI(args=config(tmp_path), run=False)
    evaluation = next(c for c in cli.trainer.callbacks if isinstance(c, ScheduledEvaluation))
    evaluation.contributors.insert(1, GrokAt(GROK))  # right after the GrokDetector
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    torch.set_flush_denormal(False)
    record = next(c for c in cli.trainer.callbacks if hasattr(c, "record")).record
    assert record["grok_epoch"] == GROK and record["final_epoch"] == EPOCHS
    ev = events(cli.trainer.log_dir)
    check_dashboard(ev, GROK, EPOCHS)
    values, experiment = hparams_of(ev)
    assert set(values) == CURATED and {m.name.tag for m in experiment.metric_infos} == HP
    assert values["arch"] == "transformer" and values["shape"] == "1L 2H d16 ff32"
    assert values["betas"] == "0.9, 0.999" and values["weight decay"] == 1.0 and values["horizon"] == str(EPOCHS)
    assert values["profile"] == "test" and values["operation"] == "add" and values["p"] == "23"
    assert [i.name for i in experiment.hparam_infos if i.differs] == ["arch", "shape", "weight decay", "lr", "seed"]


def test_interrupted_resumed_and_finished_run_still_has_one_outcome_point(tmp_path):
    """Ctrl-C at epoch 4, resume to the end, then resume the finished run once more: the outcome
    points and the final image are still written exactly once."""
    c = config(tmp_path)
    c["run"]["checkpoint_every"] = 1

    def fit(ckpt_path=None, callbacks=()):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*args parameter.*")
            cli = GrokCLI(args=c, run=False)
        cli.trainer.callbacks[2:2] = list(callbacks)
        try:
            cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
        except SystemExit:  # Lightning's graceful shutdown after Ctrl-C
            pass
        torch.set_flush_denormal(False)
        return Path(cli.trainer.log_dir)

    log_dir = fit(callbacks=[InterruptAfter(4)])
    last = str(log_dir / "checkpoints" / "last.ckpt")
    fit(last)
    fit(last)  # the checkpoint of the last epoch: nothing left to train
    ev = events(log_dir)
    assert "epoch" not in ev.Tags()["scalars"]
    for tag in HP - {"hp/grok_epoch"}:
        assert [e.step for e in ev.Scalars(tag)] == [EPOCHS], tag
    assert [e.step for e in ev.Images("head_cosine/layer_0")] == [0, EPOCHS]
    assert all(e.step <= EPOCHS for tag in ev.Tags()["scalars"] for e in ev.Scalars(tag))


def test_ensemble_members_log_like_separate_runs(tmp_path):
    configs = [config(tmp_path / f"m{seed}", version=f"s{seed}", seed=seed) for seed in (3, 4)]
    trainer, ensemble, loaders = build_ensemble(configs, tmp_path / "root", checkpoint_every=0)
    for part in ensemble.member_parts:  # the opt-in per-step loss, before each member's recorder
        part["callbacks"].insert(-1, StepLossLogger())
    trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    steps_per_epoch = len(loaders[0])
    for part in ensemble.member_parts:
        ev = events(part["log_dir"])
        check_dashboard(ev, None, EPOCHS)
        per_step = [e.step for e in ev.Scalars("train_per_step/loss")]
        assert per_step == list(range(1, EPOCHS * steps_per_epoch + 1))  # optimizer steps, not epochs
        means = [e.value for e in ev.Scalars("loss/train_step_mean")]
        first_epoch = [e.value for e in ev.Scalars("train_per_step/loss")][:steps_per_epoch]
        assert means[0] == pytest.approx(sum(first_epoch) / steps_per_epoch, rel=1e-5)
        values, _ = hparams_of(ev)
        assert set(values) == CURATED and values["seed"] == str(part["config"]["seed_everything"])


def test_the_run_says_how_to_open_tensorboard_without_the_venv_on_path(tmp_path, monkeypatch):
    """The summary's TensorBoard command runs from any shell: the script beside the run's Python,
    else that Python's ``-m tensorboard.main``; then the URL of the layout at smoothing 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    python = tmp_path / "venv" / "bin" / "python"
    assert tensorboard_command("runs/demo/version_0", str(python)) == \
        "venv/bin/python -m tensorboard.main --logdir runs/demo/version_0"
    (tmp_path / "venv" / "bin" / "tensorboard").write_text("#!/bin/sh\n")
    assert tensorboard_command("runs/x", str(python)) == "venv/bin/tensorboard --logdir runs/x"
    assert tensorboard_command("runs/x", "/elsewhere/bin/python") == "/elsewhere/bin/python -m tensorboard.main --logdir runs/x"
    record = {"status": "completed", "grok_epoch": 10, "final_epoch": 30, "final_train_acc": 1.0, "final_test_acc": 1.0,
              "history": {"epoch": [30], "mean_similarity": [0.9], "entropy_std": [0.02]}}
    lines = summary_lines(record, "runs/demo/version_0", "runs/demo/version_0/record.json")
    assert lines[-2] == "TensorBoard: " + tensorboard_command("runs/demo/version_0")
    assert TENSORBOARD_URL in lines[-1] and "_smoothingWeight=0" in TENSORBOARD_URL and "#custom_scalars" in TENSORBOARD_URL


def test_curated_hparams_names_tian_and_probes():
    tian = curated_hparams({"module": "TianModule", "seed": 3, "max_epochs": 400, "profile": "paper",
                            "model": {"M": 71, "hidden": 2048, "activation": "x2", "lr": 1e-3, "eta": 2e-4},
                            "data": {"M": 71, "train_fraction": 0.4}})
    assert tian["arch"] == "two-layer x2" and tian["shape"] == "K=2048" and tian["weight decay"] == 2e-4
    assert tian["p"] == "71" and tian["operation"] == "add" and tian["seed"] == "3" and set(tian) == CURATED
    probe = curated_hparams({"module": "GrokkingModule", "model": {"arch": "mamba", "arch_kwargs": {"expand": 2,
                             "use_conv": True}, "betas": [0.9, 0.98]}, "data": {"p": 97}})
    assert probe["shape"] == "expand=2, use_conv=true" and probe["betas"] == "0.9, 0.98"
    assert all(not isinstance(v, bool) for v in probe.values())
