"""The progress bar of a run: the training loss of the last step and the last test accuracy.

Lightning's default bar shows what a module logs with ``prog_bar=True`` plus ``v_num`` (the
logger's version, which says nothing while training). This one shows ``train_loss`` (the last
optimizer step's, read from the module's ``train_step_losses``: no per-step ``self.log``, whose
machinery would cost every run CPU time whether or not a bar is shown) and ``test_acc`` (the
last scheduled evaluation's, from the run's record row), so a newcomer sees grokking happen:
train loss near 0 long before test accuracy rises.
"""

from __future__ import annotations

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import TQDMProgressBar

from grok_lightning.callbacks.dashboard import TENSORBOARD_URL, tensorboard_command

__all__ = ["RunProgressBar"]


class RunProgressBar(TQDMProgressBar):
    def __init__(self, refresh_rate: int = 1):
        super().__init__(refresh_rate=refresh_rate)
        self.test_acc: float | None = None
        self.train_loss: float | None = None

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        losses = getattr(pl_module, "train_step_losses", None)
        if losses:  # before the bar refreshes (the epoch's end clears the list)
            self.train_loss = float(losses[-1])
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        if metrics.get("test_acc") is not None:
            self.test_acc = float(metrics["test_acc"])

    def get_metrics(self, trainer: Trainer, pl_module: LightningModule) -> dict:
        shown = {k: v for k, v in super().get_metrics(trainer, pl_module).items() if k != "v_num"}
        if self.train_loss is not None:
            shown["train_loss"] = f"{self.train_loss:.3g}"
        if self.test_acc is not None:
            shown["test_acc"] = f"{self.test_acc:.3f}"
        return shown


def summary_lines(record: dict, log_dir: str | None, record_path: str | None) -> list[str]:
    """What a run ended with, for the terminal: t_grok (or that it did not grok), final train and
    test accuracy, the order parameters at the last evaluation, and where to look."""
    history = record.get("history") or {}
    last = lambda key: (history.get(key) or [None])[-1]
    epoch = record.get("final_epoch")
    grok = (f"grokked at epoch {record['grok_epoch']}" if record.get("grok_epoch") is not None
            else f"did not grok by epoch {epoch}")
    lines = [f"run {record.get('status')}: {grok}; final train accuracy {_fmt(record.get('final_train_acc'))}, "
             f"test accuracy {_fmt(record.get('final_test_acc'))}"]
    if last("mean_similarity") is not None:
        lines.append(f"at epoch {epoch}: s_bar {_fmt(last('mean_similarity'))}, sigma_H {_fmt(last('entropy_std'))}")
    if record_path:
        lines.append(f"record: {record_path}")
    if log_dir:
        lines.append(f"TensorBoard: {tensorboard_command(log_dir)}")
        lines.append(f"  then open {TENSORBOARD_URL}  (train and test accuracy, s_bar and sigma_H; smoothing 0)")
    return lines


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"
