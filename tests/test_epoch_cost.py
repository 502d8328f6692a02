"""What a run spends per epoch besides its arithmetic: no per-step logging machinery, record writes
bounded to a share of the run's time, and neither changes a recorded number."""

from __future__ import annotations

import json
import time

import torch

from grok_lightning.callbacks import RunRecorder
from grok_lightning.callbacks.progress import RunProgressBar
from grok_lightning.run import GrokCLI, run_config


def _fit(config):
    cli = GrokCLI(args=config, run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli


def test_the_progress_bar_shows_the_last_step_loss_without_per_step_logging(tiny):
    config = tiny(max_epochs=2)
    config["trainer"]["enable_progress_bar"] = True
    cli = _fit(config)
    bar = next(c for c in cli.trainer.callbacks if isinstance(c, RunProgressBar))
    module = cli.model
    # the last optimizer step's loss, kept by the bar (the epoch's end cleared the module's list)
    assert isinstance(bar.train_loss, float) and torch.isfinite(torch.tensor(bar.train_loss))
    shown = bar.get_metrics(cli.trainer, module)
    assert shown["train_loss"] == f"{bar.train_loss:.3g}" and "test_acc" in shown
    assert "train_loss" not in cli.trainer.callback_metrics  # nothing went through self.log


def test_a_shown_progress_bar_changes_no_recorded_number(tiny, tmp_path):
    records = []
    for shown in (False, True):
        config = tiny(max_epochs=3)
        config["trainer"]["enable_progress_bar"] = shown
        config["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / str(shown))
        records.append(run_config(config)["history"])
    assert json.dumps(records[0]) == json.dumps(records[1])


class _Trainer:
    log_dir = None


def test_record_writes_take_at_most_their_share_of_the_run(tmp_path):
    recorder = RunRecorder(record_path=str(tmp_path / "record.json"), min_interval_s=0.0, max_write_share=0.01)
    recorder.record = {"history": {"epoch": []}}
    writes = []
    recorder.write = lambda trainer: writes.append(time.monotonic())
    module = type("Module", (), {"record_extras": {}})()
    recorder._write_seconds = 0.5  # the last write took 0.5 s: the next waits 50 s
    recorder._last_write = time.monotonic() - 10.0
    recorder.on_evaluation_end(_Trainer(), module, 10, {"test_acc": 0.5})
    assert writes == [] and recorder.record["history"]["epoch"] == [10]  # the row is kept, not yet written
    recorder._last_write = time.monotonic() - 60.0
    recorder.on_evaluation_end(_Trainer(), module, 20, {"test_acc": 0.6})
    assert len(writes) == 1


def test_a_write_measures_its_own_duration(tmp_path):
    recorder = RunRecorder(record_path=str(tmp_path / "record.json"))
    recorder.record = {"history": {"epoch": [0]}}
    recorder.write(_Trainer())
    assert json.loads((tmp_path / "record.json").read_text())["history"]["epoch"] == [0]
    assert 0.0 < recorder._write_seconds < 5.0
