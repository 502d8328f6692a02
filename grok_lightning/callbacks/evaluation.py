"""ScheduledEvaluation: one evaluation per scheduled epoch, broadcast to the other callbacks.

Epoch numbering: epoch ``t`` is the state after ``t`` passes over the training split; epoch 0 is
the initialisation (evaluated in ``on_train_start``). A module decides which epochs are evaluated
(``is_eval_epoch``; default: every epoch), and returns a flat ``dict[str, float]`` from
``evaluate(epoch)``.

After evaluating, this callback calls ``on_evaluation_end(trainer, pl_module, epoch, metrics)``
on every callback that defines it, in trainer order. Those callbacks may add keys to ``metrics``
(diagnostics, detectors); the recorder, which runs last, writes the complete row. Only then are
the values logged to TensorBoard with ``step = epoch``, so every curve's x axis is in epochs.
"""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer

__all__ = ["ScheduledEvaluation", "tensorboard_tag"]

_TAGS = {
    "train_loss": "loss/train",
    "test_loss": "loss/test",
    "train_acc": "accuracy/train",
    "test_acc": "accuracy/test",
    "weight_norm": "weights/norm_total",
}


def tensorboard_tag(key: str) -> str:
    """Record column -> TensorBoard tag; train and test share a section so they overlay.

    TensorBoard groups tags into sections by their first path component, so layer means go to
    ``diag/`` and each layer gets its own section ``diag_layer_<k>/`` (read side by side, not
    35 charts in one section).

    >>> tensorboard_tag("test_acc"), tensorboard_tag("mean_similarity"), tensorboard_tag("layer_0/entropy_std")
    ('accuracy/test', 'diag/mean_similarity', 'diag_layer_0/entropy_std')
    """
    if key in _TAGS:
        return _TAGS[key]
    if key.startswith("layer_"):
        return f"diag_{key}"
    if "/" in key:
        return key
    return f"diag/{key}"


class ScheduledEvaluation(Callback):
    """Calls ``pl_module.evaluate(epoch)`` at epoch 0 and at every epoch the module schedules."""

    def __init__(self) -> None:
        self.last_epoch: int | None = None

    def _run(self, trainer: Trainer, pl_module: LightningModule, epoch: int) -> None:
        metrics = pl_module.evaluate(epoch)
        # the recorder (evaluation_hook_last) sees the row after every other callback added to it
        ordered = sorted(trainer.callbacks, key=lambda c: getattr(c, "evaluation_hook_last", False))
        for callback in ordered:
            hook = getattr(callback, "on_evaluation_end", None)
            if hook is not None and callback is not self:
                hook(trainer, pl_module, epoch, metrics)
        self.last_epoch = epoch
        if trainer.logger is not None:
            scalars = {tensorboard_tag(k): v for k, v in metrics.items() if v is not None}
            for logger in trainer.loggers:
                logger.log_metrics(scalars, step=epoch)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.current_epoch == 0 and self.last_epoch is None:
            self._run(trainer, pl_module, 0)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        epoch = trainer.current_epoch + 1
        diverged = getattr(pl_module, "diverged_epoch", None) is not None
        is_due = getattr(pl_module, "is_eval_epoch", lambda e: True)(epoch)
        last = trainer.max_epochs is not None and epoch >= trainer.max_epochs
        if not diverged and (is_due or last or trainer.should_stop):
            self._run(trainer, pl_module, epoch)

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch}

    def load_state_dict(self, state_dict: dict) -> None:
        self.last_epoch = state_dict.get("last_epoch")
