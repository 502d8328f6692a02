"""ResumeCheckpoint: ``last.ckpt`` for resuming a run, by epochs, by wall time and on a stop signal.

A run resumes only from the end of an epoch: the data order is a function of the epoch alone, so
a run resumed from an epoch boundary trains exactly as one that never stopped (a checkpoint
taken mid-epoch would repeat that epoch's first batches). ``last.ckpt`` is therefore written at
an epoch end (after the evaluation and the record of that epoch) when any of these holds:

* the epoch is a multiple of ``every_n_epochs`` (0: never by epochs);
* ``every_minutes`` of wall time have passed since the last write (0: never by time), so that a
  long epoch schedule does not put hours of training at risk;
* a stop signal arrived (SIGINT or SIGTERM) during the epoch.

On the first SIGINT/SIGTERM the run finishes its epoch, writes ``last.ckpt``, records status
``interrupted`` and stops; the caller exits non-zero (``stopped_by``). A second signal stops at
once (``KeyboardInterrupt``): the run then resumes from the previous ``last.ckpt``. Writes are
atomic (a temporary file and ``os.replace``), so a kill during a write leaves the last one intact.

``ConfiguredOptimizer`` is attached where a run continues a checkpoint with other settings
(``--run.override_hparams``, ``run.start_from``): it trains with the run's own optimizer values.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, Checkpoint
from lightning.pytorch.utilities import rank_zero_info

from grok_lightning.records import FILE_MODE

__all__ = ["ConfiguredOptimizer", "ResumeCheckpoint", "run_folder_lock"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ResumeCheckpoint(Checkpoint):
    """Writes ``<dirpath or log_dir/checkpoints>/last.ckpt`` (module docstring). A Lightning
    ``Checkpoint``: Lightning runs it after every other callback, so the checkpoint holds the
    state they reached at that epoch's end.

    Args:
        every_n_epochs: write at every epoch that is a multiple of this (0: not by epochs).
        every_minutes: write when this much wall time passed since the last write (0: not by time).
        dirpath: the checkpoint folder (default: ``<trainer.log_dir>/checkpoints``).
        handle_signals: stop gracefully on SIGINT/SIGTERM (only in the main thread).
    """

    def __init__(self, every_n_epochs: int = 50, every_minutes: float = 5.0, dirpath: str | None = None,
                 handle_signals: bool = True):
        self.every_n_epochs, self.every_minutes = int(every_n_epochs), float(every_minutes)
        self.dirpath, self.handle_signals = dirpath, handle_signals
        self.stopped_by: int | None = None  # the signal that stopped the run
        self._signal: int | None = None
        self._previous: dict = {}
        self._last_write = time.monotonic()

    def path(self, trainer: Trainer) -> Path:
        return Path(self.dirpath or Path(trainer.log_dir or ".") / "checkpoints") / "last.ckpt"

    # --- signals ------------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        if self._signal is not None:  # the second one: stop now
            self._restore_handlers()
            raise KeyboardInterrupt
        self._signal = signum
        rank_zero_info(f"{signal.Signals(signum).name} received: finishing this epoch, writing last.ckpt, "
                       "then stopping (send it again to stop at once)")

    def _restore_handlers(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._last_write = time.monotonic()
        # after Lightning registered its own SIGTERM handler (whose exception would end the run
        # mid-epoch, without a checkpoint): ours replaces it for the run's duration
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in SIGNALS}

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # before Lightning's teardown puts back the handlers it found (on_fit_end comes after it)
        self._restore_handlers()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._restore_handlers()

    # --- writes -------------------------------------------------------------------------------
    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        epoch = trainer.current_epoch + 1
        by_epoch = self.every_n_epochs > 0 and epoch % self.every_n_epochs == 0
        by_time = self.every_minutes > 0 and time.monotonic() - self._last_write >= 60 * self.every_minutes
        if by_epoch or by_time or self._signal is not None:
            self.save(trainer)
        if self._signal is not None and not trainer.should_stop:
            # after the write: the checkpoint resumes a run that goes on
            self.stopped_by = self._signal
            for module in getattr(pl_module, "members", [pl_module]):  # an ensemble: each member's record
                extras = getattr(module, "record_extras", None)
                if isinstance(extras, dict):
                    extras["status"] = "interrupted"
                    extras["error"] = (f"stopped by {signal.Signals(self._signal).name} after epoch {epoch}; "
                                       "resumes from last.ckpt")
            trainer.should_stop = True

    def save(self, trainer: Trainer) -> None:
        path = self.path(trainer)
        path.parent.mkdir(parents=True, exist_ok=True)
        for partial in path.parent.glob(f".{path.name}.*.tmp"):  # a write killed before its rename
            partial.unlink(missing_ok=True)
        # a new file of its own (created, not opened through a link planted under a known name)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, FILE_MODE)
        os.close(fd)
        try:
            # the full state (optimizer, loops, callbacks): a resume needs it. Saying so also keeps
            # Lightning >= 2.6 from logging "`weights_only` was not set, defaulting to `False`", which
            # reads like a load setting; loads are always weights_only=True (checkpoint_io)
            trainer.save_checkpoint(tmp, weights_only=False)
            if trainer.is_global_zero:
                os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._last_write = time.monotonic()


@contextlib.contextmanager
def run_folder_lock(trainer):
    """Hold ``<log_dir>/.fit.lock`` (an OS file lock, released however the process ends) while
    ``fit`` trains: a second ``fit`` on the same run folder (``--resume`` twice) is one line, not
    a second writer of its checkpoint and record. Without a log folder there is nothing to hold."""
    from filelock import FileLock, Timeout

    from grok_lightning.config import ConfigError

    if trainer.log_dir is None:
        yield
        return
    path = Path(trainer.log_dir) / ".fit.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():  # filelock opens what a link points to
        raise ConfigError(f"{path}: a symbolic link; remove it (a run folder's lock is a file of its own)")
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(f"{trainer.log_dir}: another process is training this run folder now; wait for it to end "
                          "or stop it") from None
    try:
        yield
    finally:
        lock.release()


class ConfiguredOptimizer(Callback):
    """Trains a run that continues a checkpoint with its own optimizer settings, not the checkpoint's.

    Lightning restores the optimizer's state from the checkpoint whole, per-group ``lr``,
    ``weight_decay``, ``betas`` and ``eps`` included, and the schedulers' base learning rates: a run
    resumed with ``--run.override_hparams`` (or started from another run's checkpoint) would
    otherwise keep training with the old values while its record showed the new ones. The values
    the module configured are taken at fit start (before the restore) and set back at train start
    (after it); the moments (``exp_avg``...) stay the checkpoint's.
    """

    def __init__(self):
        self._configured: list[list[dict]] = []

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._configured = [[{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
                            for optimizer in trainer.optimizers]

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        for optimizer, groups in zip(trainer.optimizers, self._configured):
            for group, configured in zip(optimizer.param_groups, groups):
                restored_lr, restored_initial = group["lr"], group.get("initial_lr")
                group.update(configured)
                if restored_initial:  # a scheduler drives lr: its place in the schedule, at the configured scale
                    group["lr"] = restored_lr * configured.get("initial_lr", restored_initial) / restored_initial
        for config in trainer.lr_scheduler_configs:  # a scheduler scales its base lrs from here on
            scheduler = config.scheduler
            if hasattr(scheduler, "base_lrs"):
                scheduler.base_lrs = [group.get("initial_lr", group["lr"]) for group in scheduler.optimizer.param_groups]
