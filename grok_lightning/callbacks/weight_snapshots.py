"""CheckpointSchedule: model weights at fixed epochs, for the post-hoc spectra (Fig. 6/7, Table 3).

The paper computes PR_norm, ESD alpha and rLLC on 11 saved checkpoints of the 20,000-epoch run
(epochs 100, 500, 1 K, 2.5 K, 5 K, 7.5 K, 10 K, 12.5 K, 15 K, 17.5 K, 20 K). Lightning's
``last.ckpt`` is a rolling resume file; this callback keeps the weights themselves, small and
loadable without Lightning: ``torch.load(path, weights_only=True)`` gives
``{"epoch", "state_dict", "metrics"}`` where ``state_dict`` is ``pl_module.model.state_dict()``
(CPU tensors) and ``metrics`` the evaluation row of that epoch (``None`` if it was not evaluated).

Clock: epoch ``t`` = the weights after ``t`` passes over the training split, the same clock as the
history. So epoch ``t`` is written at ``on_train_epoch_end`` when ``trainer.current_epoch + 1 == t``
and epoch 0 (the initialisation) at ``on_train_start``. When the epoch is also evaluated, the file
is written from ``on_evaluation_end`` instead, with the complete metrics row (the weights are the
same); that needs this callback after ``ScheduledEvaluation``, which is how GrokCLI orders
``trainer.callbacks``.

Files: ``<dirpath or trainer.log_dir>/weights/epoch_XXXXX.pt``, written atomically (temporary file
+ ``os.replace``); a file that already exists is never rewritten, so a resumed run does not
duplicate or alter earlier checkpoints. ``record_extras["weight_checkpoints"]`` lists the files
(relative to ``trainer.log_dir`` when inside it), ``record_extras["weight_checkpoint_dir"]`` the
directory. Diverged runs (NaN loss) are not saved, as they are not evaluated.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import require

__all__ = ["CheckpointSchedule", "PAPER_CHECKPOINT_EPOCHS", "checkpoint_epochs"]

PAPER_CHECKPOINT_EPOCHS = (100, 500, 1000, 2500, 5000, 7500, 10000, 12500, 15000, 17500, 20000)


def checkpoint_epochs(epochs=None, every: int | None = None, dense_until: int = 0, dense_every: int = 1,
                      max_epochs: int | None = None) -> list[int]:
    """The sorted save epochs: ``epochs`` (paper list when neither ``epochs`` nor ``every`` is given)
    + every multiple of ``every`` + every multiple of ``dense_every`` up to ``dense_until``.
    Epoch 0 is saved only when listed. ``max_epochs`` bounds the generated multiples.

    >>> checkpoint_epochs(every=500, dense_until=100, dense_every=25, max_epochs=1500)
    [25, 50, 75, 100, 500, 1000, 1500]
    >>> checkpoint_epochs()[:3], checkpoint_epochs([0, 3])
    ([100, 500, 1000], [0, 3])
    """
    chosen = set(PAPER_CHECKPOINT_EPOCHS if epochs is None and every is None else (epochs or ()))
    horizon = max_epochs if max_epochs is not None else max(chosen | {dense_until, 20000})
    if every:
        chosen.update(range(every, horizon + 1, every))
    if dense_until:
        chosen.update(range(dense_every, min(dense_until, horizon) + 1, dense_every))
    return sorted(int(e) for e in chosen)


def _plain_metrics(metrics: dict) -> dict:
    """Scalars as Python floats (loadable with ``weights_only=True``); anything else is dropped."""
    out = {}
    for key, value in metrics.items():
        if value is None or isinstance(value, (bool, int, float)):
            out[key] = value
        elif getattr(value, "ndim", None) == 0:
            out[key] = float(value)
    return out


class CheckpointSchedule(Callback):
    """Save ``pl_module.model`` weights at scheduled epochs (see the module docstring).

    Args:
        epochs: explicit save epochs; default (``None`` and no ``every``): the paper's 11 epochs.
        every: also save every this many epochs (an alternative to a list).
        dense_until, dense_every: also save every ``dense_every`` epochs up to ``dense_until``.
        dirpath: parent of ``weights/``; default ``trainer.log_dir``.
    """

    def __init__(self, epochs: list[int] | None = None, every: int | None = None, dense_until: int = 0,
                 dense_every: int = 1, dirpath: str | None = None) -> None:
        require(epochs is None or all(int(e) >= 0 for e in epochs), "checkpoints.epochs", epochs,
                "must be a list of epochs >= 0")
        require(every is None or every >= 1, "checkpoints.every", every, "must be >= 1 or null")
        require(dense_until >= 0 and dense_every >= 1, "checkpoints.dense_every", (dense_until, dense_every),
                "need dense_until >= 0 and dense_every >= 1")
        self.epochs, self.every, self.dense_until, self.dense_every = epochs, every, dense_until, dense_every
        self.dirpath = dirpath
        self.saved: list[str] = []
        self._schedule: set[int] = set()
        self._root: Path | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(epochs=self.epochs, every=self.every, dense_until=self.dense_until,
                                        dense_every=self.dense_every)

    def directory(self, trainer: Trainer) -> Path:
        return Path(self.dirpath or trainer.log_dir or trainer.default_root_dir) / "weights"

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._schedule = set(checkpoint_epochs(self.epochs, self.every, self.dense_until, self.dense_every,
                                               trainer.max_epochs if trainer.max_epochs not in (None, -1) else None))
        self._root = Path(trainer.log_dir or trainer.default_root_dir)

    # --- saving -----------------------------------------------------------------------------
    def _save(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict | None) -> None:
        if epoch not in self._schedule or getattr(pl_module, "diverged_epoch", None) is not None:
            return
        path = self.directory(trainer) / f"epoch_{epoch:05d}.pt"
        if trainer.is_global_zero and not path.exists():  # idempotent: a resume never rewrites
            path.parent.mkdir(parents=True, exist_ok=True)
            payload = {
                "epoch": epoch,
                "state_dict": {k: v.detach().cpu().clone() for k, v in pl_module.model.state_dict().items()},
                "metrics": None if metrics is None else _plain_metrics(metrics),
            }
            tmp = path.with_name(f".{path.name}.tmp")
            torch.save(payload, tmp)
            os.replace(tmp, path)
        name = str(path.relative_to(self._root)) if path.is_relative_to(self._root) else str(path)
        if name not in self.saved:
            self.saved.append(name)
        self._publish(trainer, pl_module)

    def _publish(self, trainer: Trainer, pl_module: LightningModule) -> None:
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras["weight_checkpoints"] = sorted(self.saved)
            extras["weight_checkpoint_dir"] = str(self.directory(trainer))

    # --- hooks ------------------------------------------------------------------------------
    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        self._save(trainer, pl_module, epoch, metrics)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._publish(trainer, pl_module)  # a resumed run lists what it saved before
        if trainer.current_epoch == 0:
            self._save(trainer, pl_module, 0, None)  # no-op if the evaluation already saved it

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._save(trainer, pl_module, trainer.current_epoch + 1, None)

    def state_dict(self) -> dict:
        return {"saved": list(self.saved)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.saved = list(state_dict.get("saved", []))
