"""RunRecorder: writes the per-run JSON record (see :mod:`grok_lightning.records`).

The record is written atomically at fit start (status ``running``), after every ``write_every``
evaluations, and at the end with the final status: ``completed``, ``diverged`` (NaN/Inf loss,
with its epoch), ``excluded`` (non-finite after an intervention, with the reason), ``interrupted`` (Ctrl-C / SIGTERM) or ``failed`` (any other exception, with the
traceback). Its state (the record so far and the elapsed wall time) is saved in checkpoints, so a
resumed run continues the same history instead of starting a second one.

It also fills TensorBoard's HPARAMS tab: a short curated set of settings at fit start
(:func:`~grok_lightning.callbacks.dashboard.curated_hparams`; the full configuration is in
``config.yaml`` and the record) and the run's outcome (``hp/grok_epoch``, ``hp/final_test_acc``,
...) once, when the run ends, at the last evaluated epoch. No placeholder is written before
that, so no chart draws a ramp from a fake value.
"""

from __future__ import annotations

import platform
import time
import traceback
from pathlib import Path

import lightning
import torch
from lightning.pytorch import Callback, LightningModule, Trainer

import grok_lightning
from grok_lightning.callbacks.dashboard import curated_hparams, log_hparams, log_layout, log_scalars
from grok_lightning.records import (
    RECORD_NAME,
    append_history,
    last_epoch,
    load_record,
    new_record,
    record_config,
    write_json_atomic,
)

__all__ = ["RunRecorder"]

HP_METRICS = ("grok_epoch", "final_test_acc", "final_train_acc", "final_test_loss")


def _plain(hparams) -> dict:
    """Hyperparameters as JSON-friendly values; LightningCLI's ``_instantiator`` is dropped and
    ``_class_path`` kept as ``class_path`` (it names the module/datamodule class)."""
    plain = {}
    for key, value in dict(hparams).items():
        if key == "_instantiator":
            continue
        plain[key.lstrip("_")] = list(value) if isinstance(value, tuple) else value
    return plain


def _final_epoch_on_disk(path: Path) -> int | None:
    """``final_epoch`` of the record at ``path`` if it is one of an ended run, else None."""
    try:
        record = load_record(path)
    except (OSError, ValueError):
        return None
    return record.get("final_epoch") if record["status"] in ("completed", "diverged", "excluded") else None


class RunRecorder(Callback):
    """Owns the run record.

    Args:
        record_path: where to write; default ``<trainer.log_dir>/record.json``.
        run_info: extra top-level config entries (profile, sweep, run id, name...).
        write_every: write the record every this many evaluations (and always at the end).
        min_interval_s: ...but not more often than this many seconds (fit start, fit end,
            exceptions and checkpoint saves always write). Why: the record is rewritten whole, so
            a run evaluated every epoch (the lock-in runs: 400 evaluations) would spend O(n^2)
            time serialising its growing history (measured 9-18 ms per epoch, ~15% of a
            400-epoch lock-in run); a resumed run restores the record from its checkpoint anyway.
        max_write_share: ...and not more often than keeps the writes to this share of the run's
            time: the next write waits ``duration of the last write / max_write_share``. Why: a
            20,000-epoch run's record grows to 2,001 rows, and each write encodes all of them
            (JSON with indentation is encoded in Python; measured in docs/performance.md).
    """

    def __init__(self, record_path: str | None = None, run_info: dict | None = None, write_every: int = 1,
                 min_interval_s: float = 2.0, max_write_share: float = 0.01):
        self.record_path = record_path
        self.run_info = dict(run_info or {})
        self.write_every = write_every
        self.min_interval_s = min_interval_s
        self.max_write_share = max_write_share
        self._last_write = float("-inf")
        self._write_seconds = 0.0  # how long the last write took
        self.record: dict | None = None
        self._elapsed_before = self._cpu_before = 0.0
        self._t0, self._c0 = time.time(), time.process_time()
        self._evals = 0
        self._outcome_logged_at: int | None = None  # final epoch whose hp/* points TensorBoard has
        #: hyperparameters this run changes from the checkpoint it continues (--run.override_hparams):
        #: field -> {"checkpoint": value, "now": value}; the record takes the new config and says so
        self.overridden: dict = {}

    # --- helpers --------------------------------------------------------------------------
    def _config(self, trainer: Trainer, pl_module: LightningModule) -> dict:
        model = _plain(pl_module.hparams)
        datamodule = getattr(trainer, "datamodule", None)
        data = _plain(datamodule.hparams) if datamodule is not None else {}
        info = dict(self.run_info)
        seed = info.pop("seed", None)  # the seed the run was given (GrokCLI); None: nothing was seeded
        # numerics: FP32 unless a run opted into TF32 matmuls or bf16 autocast
        return record_config(model, data, seed, trainer.max_epochs, type(pl_module).__name__,
                             precision=str(getattr(trainer, "precision", "32-true")),
                             matmul_precision=torch.get_float32_matmul_precision(), **info)

    def path(self, trainer: Trainer) -> Path:
        if self.record_path is not None:
            return Path(self.record_path)
        return Path(trainer.log_dir or ".") / RECORD_NAME

    def write(self, trainer: Trainer) -> None:
        self.record["wall_time_s"] = self._elapsed_before + (time.time() - self._t0)
        # this process's CPU seconds (all its threads), summed over resumed segments
        self.record["cpu_time_s"] = self._cpu_before + (time.process_time() - self._c0)
        start = time.monotonic()
        write_json_atomic(self.path(trainer), self.record)
        self._last_write = time.monotonic()
        self._write_seconds = self._last_write - start

    # --- hooks ----------------------------------------------------------------------------
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._t0, self._c0 = time.time(), time.process_time()
        started_from = None
        if self.record is not None and self.run_info.get("run_id") not in (None, self.record.get("run_id")):
            # this run starts from another run's checkpoint (E12's groups B and C start from the
            # control run's at the intervention epoch): it keeps that run's history up to there and
            # takes its own identity and configuration
            started_from, self.record, self._elapsed_before, self._cpu_before = self.record, None, 0.0, 0.0
        if self.record is None:
            config = self._config(trainer, pl_module)
            self.record = new_record(config, run_id=self.run_info.get("run_id"), name=self.run_info.get("name"))
            self.record["environment"] = {
                "grok_lightning": grok_lightning.__version__,
                "torch": str(torch.__version__),
                "lightning": str(lightning.__version__),
                "python": platform.python_version(),
                "device": str(pl_module.device),
                "torch_threads": torch.get_num_threads(),
            }
            log_hparams(trainer, curated_hparams(config), tuple(f"hp/{k}" for k in HP_METRICS))
            log_layout(trainer)
            if started_from is not None:
                self.record["history"] = started_from["history"]
                self.record["events"] = list(started_from.get("events") or [])
                self.record["started_from"] = {"run_id": started_from.get("run_id"), "name": started_from.get("name"),
                                               "epoch": (started_from["history"].get("epoch") or [None])[-1]}
        else:  # resumed: a run whose record already says it ended has its hp/* points
            self._outcome_logged_at = _final_epoch_on_disk(self.path(trainer))
            if self.overridden:
                config = self._config(trainer, pl_module)
                self.record["config"], self.record["seed"] = config, config.get("seed")
                self.record.setdefault("overrides", []).append({"epoch": last_epoch(self.record),
                                                                "fields": dict(self.overridden)})
        self.record["status"] = "running"
        self.write(trainer)

    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        append_history(self.record, epoch, metrics)
        self.record.update(getattr(pl_module, "record_extras", {}))
        self._evals += 1
        wait = max(self.min_interval_s, self._write_seconds / self.max_write_share)
        if self._evals % self.write_every == 0 and time.monotonic() - self._last_write >= wait:
            self.write(trainer)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        record = self.record
        record.update(getattr(pl_module, "record_extras", {}))
        history = record["history"]
        if history["epoch"]:
            record["final_epoch"] = history["epoch"][-1]
            for key in ("train_acc", "test_acc", "train_loss", "test_loss"):
                if key in history:
                    record[f"final_{key}"] = history[key][-1]
        diverged = getattr(pl_module, "diverged_epoch", None)
        excluded = getattr(pl_module, "excluded_reason", None)
        if excluded is not None:  # set by an intervention callback (non-finite after intervening)
            record["status"], record["excluded_reason"] = "excluded", excluded
            record["diverged_epoch"] = diverged
        elif diverged is not None:
            record["status"], record["diverged_epoch"] = "diverged", diverged
        elif record["status"] == "running":
            record["status"] = "completed"
        self.write(trainer)
        # once, at the last evaluated epoch; a run that never grokked has no hp/grok_epoch point
        if record.get("final_epoch") != self._outcome_logged_at:
            values = {f"hp/{k}": float(record[k]) for k in HP_METRICS if record.get(k) is not None}
            log_scalars(trainer, values, record.get("final_epoch") or 0)
            self._outcome_logged_at = record.get("final_epoch")

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if self.record is None:
            return
        interrupted = isinstance(exception, KeyboardInterrupt) or type(exception).__name__ == "SIGTERMException"
        self.record["status"] = "interrupted" if interrupted else "failed"
        self.record["error"] = "".join(traceback.format_exception(exception))[-4000:]
        self.write(trainer)

    # --- checkpointing --------------------------------------------------------------------
    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict) -> None:
        if self.record is not None:  # the record on disk is never behind the last checkpoint
            self.write(trainer)

    def state_dict(self) -> dict:
        elapsed = self._elapsed_before + (time.time() - self._t0)
        cpu = self._cpu_before + (time.process_time() - self._c0)
        return {"record": self.record, "elapsed": elapsed, "cpu": cpu}

    def load_state_dict(self, state_dict: dict) -> None:
        self.record = state_dict.get("record")
        self._elapsed_before = float(state_dict.get("elapsed", 0.0))
        self._cpu_before = float(state_dict.get("cpu", 0.0))
