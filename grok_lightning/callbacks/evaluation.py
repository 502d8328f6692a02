"""ScheduledEvaluation: one evaluation per scheduled epoch, broadcast to the other callbacks.

Epoch numbering: epoch ``t`` is the state after ``t`` passes over the training split; epoch 0 is
the initialisation (evaluated in ``on_train_start``). A module decides which epochs are evaluated
(``is_eval_epoch``; default: every epoch), and returns a flat ``dict[str, float]`` from
``evaluate(epoch)``.

After evaluating, this callback calls ``on_evaluation_end(trainer, pl_module, epoch, metrics)``
on every callback that defines it, in trainer order. Those callbacks may add keys to ``metrics``
(diagnostics, detectors); the recorder, which runs last, writes the complete row. Only then are
the values logged to TensorBoard with ``step = epoch``, so every curve's x axis is in epochs.

The training loss is logged per epoch too: the mean and the max of the losses of that epoch's
optimizer steps (``loss/train_step_mean``, ``loss/train_step_max``; the max keeps slingshot
spikes visible). Modules append each step's loss to ``pl_module.train_step_losses``. Per-step
values are opt-in (:class:`StepLossLogger`), in a section named for their unit.
"""

from __future__ import annotations

import re

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.callbacks.dashboard import log_scalars

__all__ = ["ScheduledEvaluation", "StepLossLogger", "tensorboard_tag"]

_TAGS = {
    "train_loss": "loss/train",
    "test_loss": "loss/test",
    "train_acc": "accuracy/train",
    "test_acc": "accuracy/test",
    "weight_norm": "weights/norm_total",
    "rho_tian": "spectrum/rho_tian",
    "rho_tian_centred": "spectrum/rho_tian_centred",
    "sign_match_paper": "theorem6/sign_match_paper",
    "sign_match_exact": "theorem6/sign_match_exact",
    "frac_neg_B_pos_cos": "theorem6/frac_neg_B_pos_cos",
    "median_abs_cos": "theorem6/median_abs_cos",
}


def tensorboard_tag(key: str) -> str:
    """Record column -> TensorBoard tag; train and test share a section so they overlay.

    TensorBoard groups tags into sections by their first path component, so layer means go to
    ``diag/`` and each layer gets its own section ``diag_layer_<k>/`` (read side by side, not
    35 charts in one section); each lock-in detector window gets ``lockin_w<W>/``.

    >>> tensorboard_tag("test_acc"), tensorboard_tag("mean_similarity"), tensorboard_tag("layer_0/entropy_std")
    ('accuracy/test', 'diag/mean_similarity', 'diag_layer_0/entropy_std')
    >>> tensorboard_tag("lockin_w20_ratio23")
    'lockin_w20/ratio23'
    """
    if key in _TAGS:
        return _TAGS[key]
    lockin = re.fullmatch(r"(lockin_w\d+)_(\w+)", key)
    if lockin:
        return f"{lockin[1]}/{lockin[2]}"
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
        log_scalars(trainer, {tensorboard_tag(k): v for k, v in metrics.items() if v is not None}, epoch)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.current_epoch == 0 and self.last_epoch is None:
            self._run(trainer, pl_module, 0)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        pl_module.train_step_losses = []  # ensemble members get no module hooks: reset here

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        epoch = trainer.current_epoch + 1
        losses = getattr(pl_module, "train_step_losses", None)
        if losses:  # one host sync per epoch, not per step
            losses = torch.stack([torch.as_tensor(loss, dtype=torch.float32) for loss in losses]).cpu()
            log_scalars(trainer, {"loss/train_step_mean": float(losses.mean()),
                                  "loss/train_step_max": float(losses.max())}, epoch)
            pl_module.train_step_losses = []
        diverged = getattr(pl_module, "diverged_epoch", None) is not None
        is_due = getattr(pl_module, "is_eval_epoch", lambda e: True)(epoch)
        last = trainer.max_epochs is not None and epoch >= trainer.max_epochs
        if not diverged and (is_due or last or trainer.should_stop):
            self._run(trainer, pl_module, epoch)

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch}

    def load_state_dict(self, state_dict: dict) -> None:
        self.last_epoch = state_dict.get("last_epoch")


class StepLossLogger(Callback):
    """Opt-in: the mini-batch training loss at every ``every_n_steps``-th optimizer step, under
    ``train_per_step/loss`` with ``step = optimizer step`` (the section name says the x axis is
    not epochs). Add it with ``--trainer.callbacks+=grok_lightning.callbacks.evaluation.StepLossLogger``.
    """

    def __init__(self, every_n_steps: int = 1) -> None:
        self.every_n_steps = max(1, int(every_n_steps))
        self._seen = 0  # losses of this epoch already looked at

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._seen = 0

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        losses = getattr(pl_module, "train_step_losses", None) or []
        if len(losses) > self._seen and trainer.global_step % self.every_n_steps == 0:  # a step was taken
            log_scalars(trainer, {"train_per_step/loss": float(losses[-1])}, trainer.global_step)
        self._seen = len(losses)
