"""When a run grokks and when it stops.

- :class:`GrokDetector`: t_grok = first evaluated epoch with test accuracy >= threshold (0.99 in
  the paper); optionally stops the run a fixed number of epochs later.
- :class:`StopState`: a run's stop is part of its checkpoints, so resuming a finished run (or one
  killed between its last checkpoint and its final record) changes nothing.
"""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import require

__all__ = ["GrokDetector", "StopState"]


class GrokDetector(Callback):
    """Detect grokking and optionally stop a fixed number of epochs after it.

    Args:
        threshold: test accuracy that counts as grokked (paper: 0.99).
        extra_epochs: stop this many epochs after grokking; ``None`` trains to the horizon
            (``trainer.max_epochs``), as the paper's fixed-horizon sweeps do.
        metric: the evaluation column compared with the threshold.
    """

    def __init__(self, threshold: float = 0.99, extra_epochs: int | None = None, metric: str = "test_acc"):
        require(0 < threshold <= 1, "grok.threshold", threshold, "must be in (0, 1]")
        require(extra_epochs is None or extra_epochs >= 0, "grok.extra_epochs", extra_epochs, "must be >= 0 or null")
        self.threshold, self.extra_epochs, self.metric = threshold, extra_epochs, metric
        self.grok_epoch: int | None = None
        self.stopped = False  # asked the trainer to stop (saved in checkpoints, see on_train_start)

    def contribute(self, trainer: Trainer, pl_module: LightningModule, epoch: int, row, captured) -> dict:
        """First in the evaluation pipeline: t_grok and the stop go to the record and the trainer;
        nothing is added to the row."""
        value = row.get(self.metric)
        if self.grok_epoch is None and value is not None and value >= self.threshold:
            self.grok_epoch = epoch
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras["grok_epoch"] = self.grok_epoch
            extras["grok_threshold"] = self.threshold
            if self.metric != "test_acc":  # the record's rules read the grok epoch against this column
                extras["grok_metric"] = self.metric
        if self.grok_epoch is not None and self.extra_epochs is not None:
            if epoch >= self.grok_epoch + self.extra_epochs:
                self.stopped = True
                trainer.should_stop = True
        return {}

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Lightning does not checkpoint ``trainer.should_stop``: a run resumed from the checkpoint
        # of the epoch it stopped at would train on to the next evaluation and end elsewhere.
        if self.stopped:
            trainer.should_stop = True

    def state_dict(self) -> dict:
        return {"grok_epoch": self.grok_epoch, "stopped": self.stopped}

    def load_state_dict(self, state_dict: dict) -> None:
        self.grok_epoch = state_dict.get("grok_epoch")
        self.stopped = bool(state_dict.get("stopped", False))


class StopState(Callback):
    """Saves in checkpoints what ends a run, and puts it back before a resumed run trains.

    Lightning checkpoints neither ``trainer.should_stop`` nor what a module sets when it stops a
    run (``diverged_epoch`` on a non-finite loss, ``excluded_reason`` from an intervention). A run
    resumed from the checkpoint of the epoch it stopped at would train on and end elsewhere, with
    other numbers (a diverged run would diverge again, one epoch later).
    """

    ATTRIBUTES = ("diverged_epoch", "excluded_reason")

    def __init__(self) -> None:
        self._trainer = self._module = None
        self._restored: dict | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._trainer, self._module = trainer, pl_module

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        saved, self._restored = self._restored, None
        if not saved:
            return
        for name in self.ATTRIBUTES:
            if saved.get(name) is not None:
                setattr(pl_module, name, saved[name])
        if saved.get("should_stop"):
            trainer.should_stop = True

    def state_dict(self) -> dict:
        if self._trainer is None:
            return {}
        state = {name: getattr(self._module, name, None) for name in self.ATTRIBUTES}
        state["should_stop"] = bool(self._trainer.should_stop)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self._restored = dict(state_dict)
