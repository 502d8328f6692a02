"""GrokDetector: t_grok = first evaluated epoch with test accuracy >= threshold (0.99 in the paper)."""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import require

__all__ = ["GrokDetector"]


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

    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        value = metrics.get(self.metric)
        if self.grok_epoch is None and value is not None and value >= self.threshold:
            self.grok_epoch = epoch
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras["grok_epoch"] = self.grok_epoch
            extras["grok_threshold"] = self.threshold
        if self.grok_epoch is not None and self.extra_epochs is not None:
            if epoch >= self.grok_epoch + self.extra_epochs:
                trainer.should_stop = True

    def state_dict(self) -> dict:
        return {"grok_epoch": self.grok_epoch}

    def load_state_dict(self, state_dict: dict) -> None:
        self.grok_epoch = state_dict.get("grok_epoch")
