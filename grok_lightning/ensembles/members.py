"""Per-member views: what each ensemble member's callbacks see instead of the shared trainer.

An ensemble trains E runs in one Lightning ``Trainer``. Each member's own callbacks (evaluation,
grokking detection, diagnostics, interventions, records) are called by :class:`MemberCallbacks`
with a :class:`MemberTrainer` (the real trainer with the member's datamodule, logger, log_dir,
callbacks, stop flag and optimizer state) and the member module, so they behave and record as
in a separate run. Nothing here imports the ensemble module: the views only use its attributes.
"""

from __future__ import annotations

import torch
from lightning.pytorch import Callback

__all__ = ["MemberCallbacks", "MemberTrainer"]


class MemberTrainer:
    """The real trainer as member ``e`` should see it (everything else is delegated)."""

    def __init__(self, trainer, ensemble, e: int) -> None:
        self._trainer, self._ensemble, self._e = trainer, ensemble, e

    def __getattr__(self, name):
        return getattr(self._trainer, name)

    @property
    def _member(self):
        return self._ensemble.member_parts[self._e]

    @property
    def datamodule(self):
        return self._member["datamodule"]

    @property
    def callbacks(self) -> list:
        return self._member["callbacks"]

    @property
    def logger(self):
        return self._member["logger"]

    @property
    def loggers(self) -> list:
        return [] if self._member["logger"] is None else [self._member["logger"]]

    @property
    def log_dir(self):
        return self._member["log_dir"]

    @property
    def default_root_dir(self):
        return self._member["log_dir"]

    @property
    def should_stop(self) -> bool:
        return self._ensemble.finished[self._e]

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        if value:
            self._ensemble.finish(self._e)

    def prepared_evaluation(self, epoch: int):
        """This member's evaluation of ``epoch`` from the ensemble's batched forward (or ``None``)."""
        return self._ensemble.prepared_evaluation(self._e, epoch)

    def optimizer_state_of(self, param: torch.Tensor) -> dict:
        """The optimizer state of one of this member's parameters (its row of the stacked state)."""
        return self._ensemble.member_optimizer_state(self._e, param)


class MemberCallbacks(Callback):
    """Forwards the trainer's hooks to member ``e``'s own callbacks, with its trainer view.

    Epoch-level hooks reach only members still training at the epoch's start (a finished run
    gets no more epochs); ``on_fit_end`` and ``on_exception`` reach every member.
    """

    def __init__(self, e: int, callbacks: list, key: str) -> None:
        self.e, self.inner, self.key = e, callbacks, key  # the same list the trainer view returns
        self._training = True

    @property
    def state_key(self) -> str:
        return f"MemberCallbacks[{self.key}]"

    def _call(self, hook: str, trainer, pl_module, *args, every_member: bool = False) -> None:
        if not (every_member or self._training):
            return
        view, member = pl_module.member_trainers[self.e], pl_module.members[self.e]
        for callback in self.inner:
            getattr(callback, hook)(view, member, *args)

    def setup(self, trainer, pl_module, stage):
        self._call("setup", trainer, pl_module, stage, every_member=True)

    def on_fit_start(self, trainer, pl_module):
        self._training = not pl_module.finished[self.e]
        self._call("on_fit_start", trainer, pl_module, every_member=True)

    def on_train_start(self, trainer, pl_module):
        self._call("on_train_start", trainer, pl_module)

    def on_train_epoch_start(self, trainer, pl_module):
        self._training = not pl_module.finished[self.e]
        self._call("on_train_epoch_start", trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._call("on_train_batch_end", trainer, pl_module, outputs, batch[self.e], batch_idx)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self._call("on_before_optimizer_step", trainer, pl_module, optimizer)

    def on_train_epoch_end(self, trainer, pl_module):
        self._call("on_train_epoch_end", trainer, pl_module)

    def on_fit_end(self, trainer, pl_module):
        self._call("on_fit_end", trainer, pl_module, every_member=True)
        logger = pl_module.member_parts[self.e]["logger"]
        if logger is not None:
            logger.finalize("success")

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._call("on_save_checkpoint", trainer, pl_module, checkpoint, every_member=True)

    def on_exception(self, trainer, pl_module, exception):
        self._call("on_exception", trainer, pl_module, exception, every_member=True)

    def state_dict(self) -> dict:
        return {f"{i}:{c.state_key}": c.state_dict() for i, c in enumerate(self.inner)}

    def load_state_dict(self, state_dict: dict) -> None:
        for i, callback in enumerate(self.inner):
            if f"{i}:{callback.state_key}" in state_dict:
                callback.load_state_dict(state_dict[f"{i}:{callback.state_key}"])
