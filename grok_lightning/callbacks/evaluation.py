"""ScheduledEvaluation: the evaluation pipeline, one explicit sequence per scheduled epoch.

Epoch numbering: epoch ``t`` is the state after ``t`` passes over the training split; epoch 0 is
the initialisation (evaluated in ``on_train_start``). A module decides which epochs are evaluated
(``is_eval_epoch``; default: every epoch).

At each scheduled epoch, in this order:

1. **forward**: ``pl_module.evaluate(epoch, after_forward)`` returns the base row (losses,
   accuracies, weight norm). When a contributor asks for attention (``attention_splits``), an
   :class:`~grok_lightning.diagnostics.capture.AttentionCapture` is open around that forward and
   ``after_forward(split)`` files each forward's layers under its split: one attention stack for
   this package's models and any other, read from the evaluation's own forward (no second pass).
   Head outputs (``head_output_splits``) are read from the same forward too.
2. **contributors**, in their list's order (``run.py``: the grokking detector, the attention
   diagnostics, then detectors from the config): ``contribute(trainer, pl_module, epoch, row,
   captured) -> dict`` sees the row so far (read-only) and what the forward captured
   (:class:`Captured`), and *returns* its keys; a key already in the row is refused.
3. **consumers**, in their list's order, the recorder last: ``on_evaluation_end(trainer, pl_module,
   epoch, row)`` read the finished row (weight snapshots, retention, interventions, the progress
   bar, the record).
4. **TensorBoard**: the row with ``step = epoch``, so every curve's x axis is in epochs.

Without explicit lists (a ``ScheduledEvaluation()`` in a hand-built Trainer) the callbacks that
define ``contribute`` and ``on_evaluation_end`` are found in trainer order, the recorder last.

The training loss is logged per epoch too: the mean and the max of the losses of that epoch's
optimizer steps (``loss/train_step_mean``, ``loss/train_step_max``; the max keeps slingshot
spikes visible). Modules append each step's loss to ``pl_module.train_step_losses``. Per-step
values are opt-in (:class:`StepLossLogger`), in a section named for their unit.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Sequence

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.callbacks.dashboard import log_scalars
from grok_lightning.diagnostics.capture import AttentionCapture
from grok_lightning.metrics.head_outputs import projection_input_hooks

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


@dataclass
class Captured:
    """What one evaluation's forwards left for the contributors, per split: each layer's attention
    probabilities ``attention[split]`` (``(N, H, T, T)`` per layer) and, for the head-output
    statistics, the attention blocks' output-projection inputs ``projection_inputs[split]`` (one
    ``[(y, block), ...]`` list per forward; :mod:`grok_lightning.metrics.head_outputs`)."""

    attention: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    projection_inputs: dict[str, list[list]] = field(default_factory=dict)


class _Filer:
    """Files what each evaluation forward captured under the split it evaluated."""

    def __init__(self, capture, sink: list, attention_splits, output_splits):
        self.capture, self.sink = capture, sink
        self.attention_splits, self.output_splits = set(attention_splits), set(output_splits)
        self.chunks: dict[str, list[list[torch.Tensor]]] = {}
        self.captured = Captured()

    def __call__(self, split: str) -> None:
        layers = self.capture.take() if self.capture is not None else []
        if split in self.attention_splits and layers:
            self.chunks.setdefault(split, []).append(layers)
        if split in self.output_splits and self.sink:
            self.captured.projection_inputs.setdefault(split, []).append(list(self.sink))
        self.sink.clear()

    def result(self) -> Captured:
        """The chunks of each split concatenated per layer."""
        self.captured.attention = {split: [torch.cat(layer) for layer in zip(*chunks)]
                                   for split, chunks in self.chunks.items()}
        return self.captured


class ScheduledEvaluation(Callback):
    """Evaluates at epoch 0 and at every epoch the module schedules (module docstring).

    Args:
        contributors: objects with ``contribute(...)`` (and optionally ``attention_splits``), in
            the order they add to the row; ``None``: found among the trainer's callbacks.
        consumers: objects with ``on_evaluation_end(...)``, in order (the recorder last);
            ``None``: found among the trainer's callbacks.
    """

    def __init__(self, contributors: Sequence | None = None, consumers: Sequence | None = None) -> None:
        self.contributors = None if contributors is None else list(contributors)
        self.consumers = None if consumers is None else list(consumers)
        self.last_epoch: int | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        others = [c for c in trainer.callbacks if c is not self]
        if self.contributors is None:
            self.contributors = [c for c in others if callable(getattr(c, "contribute", None))]
        if self.consumers is None:
            found = [c for c in others if callable(getattr(c, "on_evaluation_end", None))]
            last = [c for c in found if type(c).__name__ == "RunRecorder"]
            self.consumers = [c for c in found if c not in last] + last

    def _forward(self, pl_module: LightningModule, epoch: int) -> tuple[dict, Captured]:
        wanted = lambda name: sorted({s for c in self.contributors for s in getattr(c, name, ())})  # noqa: E731
        attention_splits, output_splits = wanted("attention_splits"), wanted("head_output_splits")
        if not (attention_splits or output_splits) or not getattr(pl_module, "has_attention", False):
            return pl_module.evaluate(epoch), Captured()
        sink: list = []
        with contextlib.ExitStack() as stack:
            capture = stack.enter_context(AttentionCapture(pl_module.model)) if attention_splits else None
            if output_splits:  # the head outputs of the same forward (no second pass)
                handles = projection_input_hooks(pl_module.model, sink)
                stack.callback(lambda: [handle.remove() for handle in handles])
            filed = _Filer(capture, sink, attention_splits, output_splits)
            row = pl_module.evaluate(epoch, after_forward=filed)
        return row, filed.result()

    def _run(self, trainer: Trainer, pl_module: LightningModule, epoch: int) -> None:
        # an ensemble member gets its forward's results from one batched forward over the members
        prepared = trainer.prepared_evaluation(epoch) if callable(getattr(trainer, "prepared_evaluation", None)) else None
        row, captured = prepared if prepared is not None else self._forward(pl_module, epoch)
        for contributor in self.contributors:
            added = contributor.contribute(trainer, pl_module, epoch, MappingProxyType(row), captured) or {}
            clash = sorted(set(added) & set(row))
            if clash:
                raise ValueError(f"{type(contributor).__name__} returned keys already in the row: {clash}")
            row.update(added)
        finished = MappingProxyType(row)
        for consumer in self.consumers:
            consumer.on_evaluation_end(trainer, pl_module, epoch, finished)
        self.last_epoch = epoch
        log_scalars(trainer, {tensorboard_tag(k): v for k, v in row.items() if v is not None}, epoch)

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
            losses = losses[torch.isfinite(losses)]  # an ensemble member's steps after it diverged are NaN
            if len(losses):
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
