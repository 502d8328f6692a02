"""EnsembleModule: E independent runs trained in one process, one batched step per iteration.

Each member is an ordinary :class:`~grok_lightning.modules.GrokkingModule` or
:class:`~grok_lightning.modules.TianModule` with its own seed, initialisation, data order and
weight decay. The ensemble only changes *how* a step is computed:

- **forward/backward**: the active members' parameters are stacked along a leading member
  dimension and the loss is ``torch.func.vmap`` over ``functional_call`` of one member's model
  (batched matmuls instead of E small ones). The total loss is the sum of the member losses, so
  member e's gradient is the gradient of its own loss: the members never interact. Stacking is
  differentiable, so the gradients land on each member's own parameters. Architectures vmap
  cannot trace (e.g. ``nn.LSTM``) fall back to a loop over members (correct, no speed-up).
- **optimizer**: one optimizer of the members' own class whose param groups are the members'
  own groups (their lr, betas and weight decay). torch's AdamW applies decoupled decay per group,
  ``p <- p (1 - lr lambda_e)`` then the Adam update, so each member takes exactly the step it
  would take alone; TianModule's coupled L2 likewise.
- **stopping and divergence**: a member that diverges (non-finite loss) or finishes (its grok
  detector or an intervention set ``should_stop`` through its trainer view) leaves the stacked
  forward and its gradients are set to None, which the optimizer skips: it stops costing
  compute and its weights stay where a separate run would have stopped. The trainer stops when
  every member has.

Per-member evaluation, diagnostics, detectors, interventions and records are the members' own
callbacks, run against a per-member trainer view (:mod:`grok_lightning.ensemble`).
"""

from __future__ import annotations

import lightning as L
import torch
from torch.func import functional_call, vmap

__all__ = ["EnsembleModule"]


class EnsembleModule(L.LightningModule):
    """Wraps E compatible member modules (same class, architecture and shape).

    Args:
        members: built member modules (``model`` already constructed).
        vectorize: ``True`` (vmap; error if it cannot trace), ``False`` (loop), ``"auto"``
            (vmap, falling back to the loop the first time it fails).
    """

    def __init__(self, members: list[L.LightningModule], vectorize: bool | str = "auto") -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        if len({type(m) for m in members}) != 1:
            raise ValueError(f"ensemble members must share a class, got {sorted({type(m).__name__ for m in members})}")
        if any(m.model is None for m in members):
            raise ValueError("ensemble members must have their model built (pass model.modulus or build it first)")
        self.members = torch.nn.ModuleList(members)
        self.vectorize = vectorize
        self.finished = [False] * len(members)  # finished or diverged: out of the stacked step
        self.vectorized: bool | None = None  # what the first step used
        self.member_trainers: list = []
        self.member_parts: list[dict] = []  # per member: datamodule, callbacks, logger, log_dir (set by run_ensemble)

    # Lightning propagates ``trainer`` to child LightningModules; members get their own views
    @property
    def trainer(self):
        return L.LightningModule.trainer.fget(self)

    @trainer.setter
    def trainer(self, trainer) -> None:
        from grok_lightning.ensemble import MemberTrainer

        self._trainer = trainer
        self.member_trainers = [None if trainer is None else MemberTrainer(trainer, self, e) for e in range(len(self.members))]
        for member, view in zip(self.members, self.member_trainers):
            member._trainer = view

    def active(self) -> list[int]:
        return [e for e, done in enumerate(self.finished) if not done]

    def finish(self, e: int) -> None:
        self.finished[e] = True
        if all(self.finished) and self._trainer is not None:
            self._trainer.should_stop = True

    # --- training -----------------------------------------------------------------------
    def configure_optimizers(self):
        optimizers = [m.configure_optimizers() for m in self.members]
        kinds = {type(o) for o in optimizers}
        if len(kinds) != 1:
            raise ValueError(f"ensemble members must use one optimizer class, got {sorted(k.__name__ for k in kinds)}")
        groups = [group for optimizer in optimizers for group in optimizer.param_groups]
        return kinds.pop()(groups)  # every group keeps its own lr, betas, eps and weight decay

    def training_step(self, batch, batch_idx):
        active = self.active()
        if not active:
            return None
        losses = self._member_losses(active, [batch[e] for e in active])
        total = losses.new_zeros(())
        for e, loss in zip(active, losses):
            member = self.members[e]
            if not torch.isfinite(loss):  # masked; recorded as diverged like a separate run
                member.diverged_epoch = self.current_epoch + 1
                self.finish(e)
                continue
            total = total + loss
            self.member_trainers[e].log_step_loss(float(loss.detach()))
        return total if total.requires_grad else None

    def _member_losses(self, active: list[int], batches: list) -> torch.Tensor:
        members = [self.members[e] for e in active]
        if self.vectorize is not False and self.vectorized is not False:
            try:
                losses = self._vmapped_losses(members, batches)
                self.vectorized = True
                return losses
            except (RuntimeError, NotImplementedError):
                if self.vectorize is True:
                    raise
                self.vectorized = False
        return torch.stack([m.compute_loss(m.model(b[0]), b[1]) for m, b in zip(members, batches)])

    def _vmapped_losses(self, members, batches) -> torch.Tensor:
        params, buffers = _stack_state([m.model for m in members])
        inputs = torch.stack([b[0] for b in batches])
        targets = torch.stack([b[1] for b in batches])
        base, lead = members[0].model, members[0]

        def member_loss(p, b, x, y):
            return lead.compute_loss(functional_call(base, (p, b), (x,)), y)

        return vmap(member_loss)(params, buffers, inputs, targets)

    def on_after_backward(self) -> None:
        # finished members (this step's divergences included) take no optimizer step at all
        for e, done in enumerate(self.finished):
            if done:
                for param in self.members[e].parameters():
                    param.grad = None

    # --- checkpoints ----------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["ensemble"] = {
            "finished": list(self.finished),
            "members": [{"diverged_epoch": m.diverged_epoch, "excluded_reason": getattr(m, "excluded_reason", None),
                         "record_extras": m.record_extras} for m in self.members],
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("ensemble", {})
        self.finished = list(state.get("finished", self.finished))
        for member, saved in zip(self.members, state.get("members", [])):
            member.diverged_epoch = saved["diverged_epoch"]
            if saved.get("excluded_reason") is not None:
                member.excluded_reason = saved["excluded_reason"]
            member.record_extras.update(saved.get("record_extras") or {})


def _stack_state(models: list[torch.nn.Module]) -> tuple[dict, dict]:
    """Parameters and buffers stacked along a new leading member dimension.

    Unlike ``torch.func.stack_module_state`` (which returns detached copies), ``torch.stack`` keeps
    the graph: backward sends each slice's gradient to that member's own parameter.
    """
    named = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return ({name: torch.stack([n[name] for n in named]) for name in named[0]},
            {name: torch.stack([b[name] for b in buffers]) for name in buffers[0]})
