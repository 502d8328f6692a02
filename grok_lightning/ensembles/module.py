"""EnsembleModule: E independent runs trained in one process, one batched step per iteration.

Each member is an ordinary :class:`~grok_lightning.modules.GrokkingModule` or
:class:`~grok_lightning.modules.TianModule` with its own seed, initialisation, data order and
weight decay. The ensemble only changes *how* a step is computed:

- **stacked weights**: at the start of training every parameter name gets one leaf tensor of
  shape ``(E, *shape)`` holding all members' values, and each member's own parameter becomes a
  view of its row. Evaluation, diagnostics, interventions and checkpoints read and write the
  members' parameters as before; the step touches only the stacked leaves, so its cost in
  kernels and Python does not grow with E.
- **forward/backward**: ``torch.func.vmap`` over ``functional_call`` of one member's model on the
  stacked leaves; the total loss is the sum of the member losses, so row e of a gradient is
  member e's own gradient. Members never interact.
- **optimizer**: one optimizer of the members' class over the stacked leaves with the members'
  shared lr, betas and eps, and weight decay applied per member row before the update:
  decoupled ``p <- p (1 - lr lambda_e)`` for AdamW (exactly what ``torch.optim.AdamW`` does
  first), ``g <- g + lambda_e p`` for coupled L2 (TianModule's Adam). Adam's moments are
  elementwise and the step count is shared by members that start together, so every member
  takes exactly the step it would take alone.
- **stopping and divergence**: a member that diverges (non-finite loss) or finishes (its grok
  detector or an intervention set ``should_stop`` through its trainer view) leaves the forward,
  and its rows are restored after each update, so its weights stay where a separate run would
  have stopped. The trainer stops when every member has.
- **capability and memory**: before the first step a two-example probe checks that vmap can
  trace the architecture; where it cannot (``nn.LSTM``), the members train in a loop on their
  own parameters with the members' merged param groups (correct, no speed-up), a warning says
  so and each record gets ``vectorized: false``. A CUDA out-of-memory error halves the number
  of members per forward/backward (gradients of the chunks add up exactly) and retries.
"""

from __future__ import annotations

import warnings

import lightning as L
import torch
from torch.func import functional_call, vmap

from grok_lightning.config import ConfigError

__all__ = ["EnsembleModule"]

_PER_MEMBER_HYPERPARAMETERS = ("weight_decay", "params")


class EnsembleModule(L.LightningModule):
    """Wraps E compatible member modules (same class, architecture and shape).

    Args:
        members: built member modules (``model`` already constructed).
        vectorize: ``True`` (vmap; error if it cannot trace), ``False`` (loop), ``"auto"``
            (vmap when the probe passes, else the loop).
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
        self.automatic_optimization = False  # the step is ours: chunked backward, per-row decay, frozen rows
        self.finished = [False] * len(members)  # finished or diverged: out of the forward
        self.vectorized: bool | None = None  # decided by the probe in configure_optimizers
        self.member_chunks = 1  # forward/backward in this many member chunks (doubles on OOM)
        self.member_trainers: list = []
        self.member_parts: list[dict] = []  # per member: datamodule, callbacks, logger, log_dir (set by the runner)
        self._stacked: dict[str, torch.Tensor] = {}
        self._decay: dict[str, torch.Tensor] = {}  # per name: (E, 1, ...) member weight decay
        self._decoupled = True
        self._lr = 0.0
        self._frozen: dict[str, torch.Tensor] = {}  # per name: the finished members' rows
        self._frozen_index: torch.Tensor | None = None
        self.batch_evaluation = True  # one vmapped evaluation forward for all members (transformers)
        # "auto": check every step's losses on the host on a CPU (free there); on a GPU keep the
        # check on the device and look once per epoch (a host sync per step stalls the GPU)
        self.sync_every_step: bool | str = "auto"
        self._alive: torch.Tensor | None = None  # (E,) no non-finite loss yet, on the device
        self._prepared: dict = {}
        self._prepared_key = None
        self._schedule = None  # the members' learning-rate schedule, stepped with the optimizer
        self.clip_norm: float | None = None  # the members' gradient-norm clip (trainer.gradient_clip_val)
        self.compile_mode: str | None = None  # torch.compile mode of the vmapped member losses (run.compile)
        self._member_losses = None  # vmap(member loss), compiled when compile_mode is set; built once

    # Lightning propagates ``trainer`` to child LightningModules; members get their own views
    @property
    def trainer(self):
        return L.LightningModule.trainer.fget(self)

    @trainer.setter
    def trainer(self, trainer) -> None:
        from grok_lightning.ensembles.members import MemberTrainer

        self._trainer = trainer
        self.member_trainers = [None if trainer is None else MemberTrainer(trainer, self, e) for e in range(len(self.members))]
        for member, view in zip(self.members, self.member_trainers):
            member._trainer = view

    def prepared_evaluation(self, e: int, epoch: int):
        """Member e's ``(row, captured)`` of this epoch from the batched forward over the members
        (:mod:`grok_lightning.ensembles.evaluation`), or ``None`` where members evaluate alone.
        The first member to ask computes every member still training."""
        from grok_lightning.ensembles.evaluation import batched_evaluations, can_batch

        if not self.batch_evaluation or not can_batch(self):
            return None
        key = (epoch, self._trainer.global_step if self._trainer is not None else None)
        if self._prepared_key != key:
            due = sorted({e, *(m for m, done in enumerate(self.finished) if not done)})
            self._prepared, self._prepared_key = batched_evaluations(self, due), key
        return self._prepared.pop(e, None)

    def active(self) -> list[int]:
        return [e for e, done in enumerate(self.finished) if not done]

    def finish(self, e: int) -> None:
        if not self.finished[e]:
            self.finished[e] = True
            self._freeze()
        if all(self.finished) and self._trainer is not None:
            self._trainer.should_stop = True

    # --- set-up ---------------------------------------------------------------------------
    def configure_optimizers(self):
        configured = [m.configure_optimizers() for m in self.members]
        # a member may return {"optimizer", "lr_scheduler"} (a warmup): the members share the
        # schedule (their hyperparameters agree), so the ensemble's optimizer gets the first's
        optimizers = [c["optimizer"] if isinstance(c, dict) else c for c in configured]
        schedule = configured[0].get("lr_scheduler") if isinstance(configured[0], dict) else None
        kinds = {type(o) for o in optimizers}
        if len(kinds) != 1:
            raise ValueError(f"ensemble members must use one optimizer class, got {sorted(k.__name__ for k in kinds)}")
        kind = kinds.pop()
        self.vectorized = self._probe()
        for member in self.members:
            member.record_extras["vectorized"] = self.vectorized
        if not self.vectorized:  # the loop: the members' own parameters in their own param groups
            optimizer = kind([group for optimizer in optimizers for group in optimizer.param_groups])
        else:
            optimizer = kind(self._stack(optimizers))
        if schedule is None:
            return optimizer
        member_schedule = schedule["scheduler"]
        if not isinstance(member_schedule, torch.optim.lr_scheduler.LambdaLR) or schedule.get("interval") != "step":
            raise ConfigError("ensembles follow a per-step LambdaLR schedule only (a warmup); run the others separately")
        self._schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, member_schedule.lr_lambdas[0])
        return optimizer

    def _probe(self) -> bool:
        if self.vectorize is False:
            return False
        batches = []
        for e, part in enumerate(self.member_parts or [{}] * len(self.members)):
            datamodule = part.get("datamodule")
            if datamodule is None or not hasattr(datamodule, "x_train"):
                return self.vectorize is True or self.vectorize == "auto"  # nothing to probe with
            batches.append((datamodule.x_train[:2].to(self.device), datamodule.y_train[:2].to(self.device)))
        params = {n: torch.stack([p.detach() for p in ps]) for n, ps in self._named_rows().items()}
        try:
            with torch.no_grad():
                self._vmapped_losses(params, list(range(len(self.members))), batches, eager=True)
            return True
        except (RuntimeError, NotImplementedError) as err:
            if self.vectorize is True or _is_out_of_memory(err):
                raise
            warnings.warn(f"ensemble: vmap cannot trace {type(self.members[0].model).__name__} "
                          f"({type(err).__name__}: {str(err).splitlines()[0]}); training the members in a loop")
            return False

    def _named_rows(self) -> dict[str, list[torch.Tensor]]:
        named = [dict(m.model.named_parameters()) for m in self.members]
        return {name: [n[name] for n in named] for name in named[0]}

    def _stack(self, optimizers) -> list[dict]:
        """Stacked leaves, members' parameters as views of their rows, per-row weight decay; returns
        the param groups (one per set of shared hyperparameters) of the stacked optimizer."""
        group_of = [{id(p): g for g in o.param_groups for p in g["params"]} for o in optimizers]
        groups: dict[tuple, dict] = {}
        first = optimizers[0].param_groups[0]
        self._decoupled = bool(first.get("decoupled_weight_decay", isinstance(optimizers[0], torch.optim.AdamW)))
        for name, rows in self._named_rows().items():
            member_groups = [group_of[e][id(p)] for e, p in enumerate(rows)]
            shared = {k: v for k, v in member_groups[0].items() if k not in _PER_MEMBER_HYPERPARAMETERS}
            for e, group in enumerate(member_groups):
                if {k: v for k, v in group.items() if k not in _PER_MEMBER_HYPERPARAMETERS} != shared:
                    raise ConfigError(f"ensemble member {e}: optimizer settings of {name} differ from member 0's "
                                      "(only weight decay may differ): run them separately")
            stacked = torch.stack([p.detach() for p in rows]).requires_grad_()
            for e, param in enumerate(rows):
                param.data = stacked.data[e]  # the member's parameter now reads and writes row e
            self._stacked[name] = stacked
            decay = torch.tensor([float(g.get("weight_decay", 0.0)) for g in member_groups], dtype=stacked.dtype,
                                 device=stacked.device)
            self._decay[name] = decay.view(-1, *([1] * (stacked.ndim - 1)))
            self._lr = float(shared["lr"])
            key = tuple(sorted((k, str(v)) for k, v in shared.items()))
            groups.setdefault(key, {**shared, "params": []})["params"].append(stacked)
        for group in groups.values():
            group["weight_decay"] = 0.0  # applied per row in _apply_weight_decay
        self._freeze()  # members already finished (a resumed ensemble) keep their rows
        return list(groups.values())

    # --- the step -------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        self.train_step(batch, self.optimizers())
        if self._trainer is not None and batch_idx == self._trainer.num_training_batches - 1:
            self.sync_divergence()  # the epoch's last step: one look at the device-side check

    def _deferred(self) -> bool:
        auto = self.sync_every_step == "auto"
        return bool(self.vectorized) and (self.device.type != "cpu" if auto else not self.sync_every_step)

    def sync_divergence(self) -> None:
        """Members whose loss went non-finite since the last look: recorded as diverged in the
        epoch they diverged, as a separate run would be (one host synchronisation)."""
        if self._alive is None:
            return
        for e, alive in enumerate(self._alive.tolist()):
            if not alive and not self.finished[e]:
                self.members[e].diverged_epoch = self.current_epoch + 1
                self.finish(e)

    def train_step(self, batch: list, optimizer) -> None:
        """One step of every active member: ``batch[e]`` is member e's ``(inputs, targets)``.
        Also usable without a Trainer (benchmarks), with the optimizer ``configure_optimizers`` built."""
        active = self.active()
        if not active:
            return
        if self._deferred():
            return self._train_step_on_device(batch, optimizer, active)
        while True:
            try:
                losses = self._losses_and_gradients(active, [batch[e] for e in active])
                break
            except RuntimeError as err:
                if not _is_out_of_memory(err) or self.member_chunks >= len(active):
                    raise
                optimizer.zero_grad(set_to_none=True)
                self.member_chunks *= 2
                warnings.warn(f"ensemble: out of memory with {len(active)} members per step; "
                              f"retrying in {self.member_chunks} member chunks")
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
        finite = torch.isfinite(losses).tolist()  # one synchronisation per step
        for e, loss, ok in zip(active, losses, finite):
            if not ok:  # recorded as diverged, like a separate run; its update is undone below
                self.members[e].diverged_epoch = self.current_epoch + 1
                self.finish(e)
            elif hasattr(self.members[e], "train_step_losses"):  # logged per epoch by its evaluation callback
                self.members[e].train_step_losses.append(loss.detach())
        if any(finite):
            if self.vectorized:
                self._apply_weight_decay()
                self._expose_member_gradients()
            else:  # the loop: members that just diverged take no step (their gradients may be NaN)
                for e in active:
                    if self.finished[e]:
                        for param in self.members[e].parameters():
                            param.grad = None
            self._clip_gradients(active)
            optimizer.step()
            self._step_schedule()
            self._restore_frozen()
        optimizer.zero_grad(set_to_none=True)

    def _train_step_on_device(self, batch: list, optimizer, active: list[int]) -> None:
        """The step without a host synchronisation: a member whose loss is not finite keeps the
        weights it had before the step (rows put back from a copy, on the device) and takes no
        step again; :meth:`sync_divergence` records it at the epoch's end."""
        if self._alive is None:
            self._alive = torch.ones(len(self.members), dtype=torch.bool, device=self.device)
        index = torch.tensor(active, device=self.device)
        losses = self._losses_and_gradients(active, [batch[e] for e in active])
        alive = self._alive.index_select(0, index) & torch.isfinite(losses)
        self._alive.index_copy_(0, index, alive)
        logged = torch.where(alive, losses, torch.full_like(losses, float("nan"))).detach()
        for i, e in enumerate(active):  # views of one tensor; a diverged member's NaN are left out of its log
            if hasattr(self.members[e], "train_step_losses"):
                self.members[e].train_step_losses.append(logged[i])
        before = {name: p.detach().clone() for name, p in self._stacked.items()}
        self._apply_weight_decay()
        self._expose_member_gradients()
        self._clip_gradients(active)
        optimizer.step()
        self._step_schedule()
        self._restore_frozen()
        with torch.no_grad():
            for name, stacked in self._stacked.items():
                keep = self._alive.view(-1, *([1] * (stacked.ndim - 1)))
                stacked.copy_(torch.where(keep, stacked, before[name]))
        optimizer.zero_grad(set_to_none=True)

    def _losses_and_gradients(self, active: list[int], batches: list) -> torch.Tensor:
        """Member losses of this step, with their gradients accumulated (in member chunks)."""
        size = -(-len(active) // self.member_chunks)
        losses = []
        for start in range(0, len(active), size):
            chunk, chunk_batches = active[start : start + size], batches[start : start + size]
            if self.vectorized:
                index = torch.tensor(chunk, device=self.device)
                params = {n: (p if len(chunk) == len(self.members) else p.index_select(0, index))
                          for n, p in self._stacked.items()}
                chunk_losses = self._vmapped_losses(params, chunk, chunk_batches)
            else:
                chunk_losses = torch.stack([self.members[e].compute_loss(self.members[e].model(b[0]), b[1])
                                            for e, b in zip(chunk, chunk_batches)])
            finite = torch.where(torch.isfinite(chunk_losses), chunk_losses, torch.zeros_like(chunk_losses))
            total = finite.sum()  # a diverged member contributes no gradient
            self.manual_backward(total) if self._trainer is not None else total.backward()
            losses.append(chunk_losses.detach())
        return torch.cat(losses)

    def _vmapped_losses(self, params: dict, members: list[int], batches: list, eager: bool = False) -> torch.Tensor:
        inputs = torch.stack([b[0] for b in batches])
        targets = torch.stack([b[1] for b in batches])
        lead = self.members[0]  # any member serves as the template (same architecture): its weights are not read

        def member_loss(p, x, y):
            return lead.compute_loss(functional_call(lead.model, p, (x,)), y)

        if eager or not self.compile_mode:
            return vmap(member_loss)(params, inputs, targets)
        if self._member_losses is None:  # compiled once; the probe stays eager (no compile for its shape)
            self._member_losses = torch.compile(vmap(member_loss), mode=self.compile_mode, dynamic=False)
        return self._member_losses(params, inputs, targets)

    def _step_schedule(self) -> None:
        if self._schedule is not None:
            self._schedule.step()

    @torch.no_grad()
    def _clip_gradients(self, active: list[int]) -> None:
        """Each member's gradient scaled to norm <= ``clip_norm``, as Lightning's
        ``gradient_clip_val`` (``clip_grad_norm_``: coefficient ``max_norm / (norm + 1e-6)``,
        at most 1) would do to its own run."""
        if not self.clip_norm:
            return
        if self.vectorized:
            grads = [p.grad for p in self._stacked.values() if p.grad is not None]
            norm = torch.sqrt(sum(g.flatten(1).double().pow(2).sum(1) for g in grads))  # (E,)
            scale = (self.clip_norm / (norm + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(scale.to(g.dtype).view(-1, *([1] * (g.ndim - 1))))
            return
        for e in active:
            torch.nn.utils.clip_grad_norm_([p for p in self.members[e].parameters() if p.grad is not None],
                                           self.clip_norm)

    @torch.no_grad()
    def _apply_weight_decay(self) -> None:
        optimizer = self.optimizers() if self._trainer is not None else None
        if optimizer is not None:  # the learning rate of this step (a warmup changes it)
            self._lr = float(optimizer.param_groups[0]["lr"])
        for name, stacked in self._stacked.items():
            if stacked.grad is None:
                continue
            if self._decoupled:  # torch.optim.AdamW: p <- p (1 - lr lambda) before the Adam update
                stacked.mul_(1.0 - self._lr * self._decay[name])
            else:  # coupled L2 (torch.optim.Adam's weight_decay): g <- g + lambda p
                stacked.grad.add_(stacked * self._decay[name])

    def _expose_member_gradients(self) -> None:
        """Members' callbacks that inspect gradients (interventions) see their rows."""
        if not getattr(self, "_gradient_hooks", None):
            return
        for e, member in enumerate(self.members):
            for name, param in member.model.named_parameters():
                grad = self._stacked[name].grad
                param.grad = None if grad is None else grad[e]

    def on_train_start(self) -> None:
        from lightning.pytorch import Callback

        overridden = lambda c: type(c).on_before_optimizer_step is not Callback.on_before_optimizer_step
        self._gradient_hooks = any(overridden(c) for part in self.member_parts for c in part.get("callbacks", []))

    @torch.no_grad()
    def _freeze(self) -> None:
        done = [e for e, f in enumerate(self.finished) if f]
        if not self._stacked or not done:
            return
        self._frozen_index = torch.tensor(done, device=next(iter(self._stacked.values())).device)
        self._frozen = {n: p.index_select(0, self._frozen_index).clone() for n, p in self._stacked.items()}

    @torch.no_grad()
    def _restore_frozen(self) -> None:
        if self._frozen_index is None:  # nobody finished (or the loop: finished members get no gradient)
            return
        for name, stacked in self._stacked.items():
            stacked.index_copy_(0, self._frozen_index, self._frozen[name])

    def member_optimizer_state(self, e: int, param: torch.Tensor) -> dict:
        """Member e's optimizer state of ``param`` (views of its row of the stacked state)."""
        optimizer = self.trainer.optimizers[0] if self.trainer is not None else None
        if optimizer is None:
            return {}
        if not self.vectorized:
            return optimizer.state.get(param, {})
        for name, own in self.members[e].model.named_parameters():
            if own is param:
                state = optimizer.state.get(self._stacked[name], {})
                return {k: (v[e] if torch.is_tensor(v) and v.ndim > 0 else v) for k, v in state.items()}
        return {}

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


def _is_out_of_memory(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower()
