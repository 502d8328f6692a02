"""Real (tiny) Lightning training: determinism, resume, divergence, records, CLI errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback

from conftest import InterruptAfter
from grok_lightning.records import load_record
from grok_lightning.run import GrokCLI, run_config


def _fit(config, ckpt_path=None, extra_callbacks=()):
    cli = GrokCLI(args=config, run=False)
    cli.trainer.callbacks[2:2] = list(extra_callbacks)  # after evaluation and grok detector
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    except (KeyboardInterrupt, SystemExit):  # Lightning turns Ctrl-C into SystemExit(1)
        pass
    return cli


def _record(cli):
    return load_record(Path(cli.trainer.log_dir) / "record.json")


def test_same_seed_gives_identical_history(tiny):
    first, second = run_config(tiny()), run_config(tiny())
    assert first["history"] == second["history"]
    other = tiny()
    other["seed_everything"] = 1
    assert run_config(other)["history"]["test_loss"] != first["history"]["test_loss"]


def test_record_schema_and_tensorboard_files(tiny):
    config = tiny()
    cli = _fit(config)
    record = _record(cli)
    assert record["status"] == "completed" and record["final_epoch"] == 4
    assert record["config"]["wd"] == 1.0 and record["config"]["seed"] == 0
    assert record["config"]["profile"] == "test" and record["config"]["max_epochs"] == 4
    history = record["history"]
    assert history["epoch"] == [0, 1, 2, 4]  # dense to 2, then every 2
    assert {"train_acc", "test_acc", "train_loss", "test_loss", "weight_norm"} <= set(history)
    assert record["final_test_acc"] == history["test_acc"][-1]
    log_dir = Path(cli.trainer.log_dir)
    assert list(log_dir.glob("events.out.tfevents.*")) and (log_dir / "config.yaml").exists()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir)).Reload()
    tags = events.Tags()["scalars"]
    assert {"accuracy/test", "loss/train", "weights/norm_total", "hp/final_test_acc"} <= set(tags)
    assert [e.step for e in events.Scalars("accuracy/test")] == [0, 1, 2, 4], "x axis is epochs"


def test_resume_after_interrupt_equals_uninterrupted(tiny, tmp_path):
    reference = _fit(tiny(max_epochs=6))
    ref_record = _record(reference)
    config = tiny(max_epochs=6)
    config["trainer"]["logger"]["init_args"]["version"] = "interrupted"
    killed = _fit(config, extra_callbacks=[InterruptAfter(4)])
    assert _record(killed)["status"] == "interrupted"
    last = Path(killed.trainer.log_dir) / "checkpoints" / "last.ckpt"
    assert last.exists()
    resumed = _fit(config, ckpt_path=str(last))
    record = _record(resumed)
    assert record["status"] == "completed"
    assert record["history"] == ref_record["history"]
    for a, b in zip(reference.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


class _PoisonWeights(Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == 2:
            with torch.no_grad():
                next(pl_module.parameters()).fill_(float("nan"))


def test_nan_loss_is_recorded_as_diverged(tiny):
    cli = _fit(tiny(max_epochs=6), extra_callbacks=[_PoisonWeights()])
    record = _record(cli)
    assert record["status"] == "diverged" and record["diverged_epoch"] == 3
    assert cli.trainer.current_epoch < 5, "a diverged run stops"


def test_grok_detector_and_stop_after_extra_epochs(tiny):
    config = tiny(max_epochs=8)
    config["grok"].update(threshold=0.001, extra_epochs=2)  # any accuracy "groks" at epoch 0
    record = run_config(config)
    assert record["grok_epoch"] == 0 and record["final_epoch"] == 2


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--model.n_heads=7", "error: model.n_heads=7: must divide model.d_model=128"),
        ("--data.p=1", "error: data.p=1: must be an integer >= 2"),
        ("--data.train_fraction=1.5", "error: data.train_fraction=1.5: must be in the open interval (0, 1)"),
        ("--model.weight_decay=-1", "error: model.weight_decay=-1.0: must be >= 0"),
        ("--data.operation=pow", "error: data.operation='pow': must be one of add, sub, mul, div"),
    ],
)
def test_cli_bad_config_is_one_line_before_training(flag, message, tmp_path):
    config = Path(__file__).resolve().parents[1] / "configs" / "canonical.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "grok_lightning.cli", "fit", "--config", str(config), flag],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert lines == [message] and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists(), "nothing trained or logged"


@pytest.mark.slow
def test_canonical_model_groks_on_cpu(tmp_path):
    """The paper's canonical run (818,785 parameters, lambda = 1) groks within 400 epochs."""
    from conftest import load_yaml

    config = load_yaml("canonical.yaml")
    config["trainer"].update(max_epochs=400, enable_progress_bar=False)
    config["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path))
    config["grok"]["extra_epochs"] = 0
    record = run_config(config)
    assert record["grok_epoch"] is not None and record["grok_epoch"] <= 400
    assert record["final_test_acc"] >= 0.99
    print(json.dumps({k: record[k] for k in ("grok_epoch", "final_test_acc", "wall_time_s")}))
