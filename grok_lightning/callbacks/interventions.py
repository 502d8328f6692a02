"""Causal interventions at peak differentiation (E12 of arXiv 2605.20441).

``HeadReinit`` (group B) re-initialises some attention heads; ``WeightNormClip`` (group C) clips
weight-matrix norms to their median. Both act once, at the start of training epoch ``epoch``
(i.e. after ``epoch`` epochs, the same clock as the record's history), where ``epoch`` is given
or read from a control run's record (the epoch of peak sigma_H after ``after_epoch``, which is
how the paper chose it). The defaults and why they were chosen are in docs/decisions.md
("Interventions").

Both are stateful: whether the intervention happened is saved in checkpoints, so a run resumed
after it never repeats it, and a run resumed before it still performs it. After the
intervention a non-finite gradient or loss marks the run ``excluded`` (with the reason), as the
paper did with one clipped run, instead of ``diverged``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import ConfigError, require
from grok_lightning.records import load_record
from grok_lightning.stats.phases import peak_entropy_std

__all__ = ["HeadReinit", "WeightNormClip"]


class _Intervention(Callback):
    name = "intervention"

    def __init__(self, epoch: int | None = None, control_record: str | None = None, after_epoch: int = 100,
                 exclude_nonfinite: bool = True):
        require(epoch is None or epoch >= 1, f"{self.name}.epoch", epoch, "an integer >= 1, or null with control_record")
        require(epoch is not None or bool(control_record), f"{self.name}.control_record", control_record,
                "a record.json path when epoch is null")
        self.epoch, self.control_record, self.after_epoch = epoch, control_record, after_epoch
        self.exclude_nonfinite = exclude_nonfinite
        self.done = False
        self.applied: dict = {}

    @property
    def state_key(self) -> str:
        return f"{type(self).__name__}[epoch={self.epoch}]"

    def state_dict(self) -> dict:
        return {"done": self.done, "epoch": self.epoch, "log": self.applied}

    def load_state_dict(self, state_dict: dict) -> None:
        self.done, self.epoch, self.applied = state_dict["done"], state_dict["epoch"], state_dict["log"]

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.epoch is None:
            path = Path(self.control_record)
            if not path.is_file():
                raise ConfigError(f"{self.name}.control_record={self.control_record!r}: no such record")
            _, peak_epoch = peak_entropy_std(load_record(path)["history"], after_epoch=self.after_epoch)
            if peak_epoch is None:
                raise ConfigError(f"{self.name}.control_record={self.control_record!r}: no sigma_H after epoch "
                                  f"{self.after_epoch} to take the peak of")
            self.epoch = int(peak_epoch)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.done or trainer.current_epoch < self.epoch:
            return
        with torch.no_grad():  # subclasses' apply may forget it
            details = self.apply(trainer, pl_module)
        self.done = True
        self.applied = {"type": self.name, "epoch": int(trainer.current_epoch), **details}
        pl_module.record_extras.setdefault("interventions", []).append(self.applied)
        if trainer.logger is not None and hasattr(trainer.logger, "experiment"):
            trainer.logger.experiment.add_text(f"intervention/{self.name}", f"```\n{json.dumps(self.applied, indent=1)}\n```",
                                               trainer.current_epoch)
            for key in ("norm_before", "norm_after"):
                if key in details:
                    trainer.logger.experiment.add_scalar(f"intervention/{self.name}_{key}", details[key], trainer.current_epoch)

    def apply(self, trainer: Trainer, pl_module: LightningModule) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _exclude(self, trainer: Trainer, pl_module: LightningModule, reason: str) -> None:
        if getattr(pl_module, "excluded_reason", None) is None:
            pl_module.excluded_reason = f"{reason} after {self.name} at epoch {self.epoch}"
        trainer.should_stop = True

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if not (self.done and self.exclude_nonfinite):
            return
        for param in pl_module.parameters():
            if param.grad is not None and not torch.isfinite(param.grad).all():
                self._exclude(trainer, pl_module, f"non-finite gradient at epoch {trainer.current_epoch}")
                param.grad.zero_()  # the step still runs; the run stops right after and is excluded

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self.done and self.exclude_nonfinite and getattr(pl_module, "diverged_epoch", None) is not None:
            self._exclude(trainer, pl_module, f"non-finite loss at epoch {pl_module.diverged_epoch}")


def _attention_layers(pl_module: LightningModule):
    model = getattr(pl_module, "model", None)
    blocks = getattr(model, "blocks", None)
    if blocks is None or not all(hasattr(b, "attn") for b in blocks):
        raise ConfigError(f"head re-initialisation needs a transformer (model.arch), got {type(model).__name__}")
    return [b.attn for b in blocks]


class HeadReinit(_Intervention):
    """Group B: re-initialise ``n_heads`` heads in each chosen layer.

    Args:
        n_heads: heads per layer (paper: 2 of 8).
        layers: ``"all"`` or a list of layer indices.
        heads: ``"random"`` (seeded by ``seed`` and the layer), ``"most_similar"`` (the heads with
            the highest mean cosine to the other heads on the test split, i.e. the most redundant
            ones) or a list of head indices.
        weights: which slices: ``q``, ``k``, ``v`` (rows of the fused projection and their biases)
            and ``out`` (the head's input columns of the output projection).
        reset_optimizer_state: zero Adam's moments of the re-initialised slices, so the new
            weights are not pushed along the old ones' momentum.
        seed: seed of the random head choice and of the fresh weights.
    """

    name = "head_reinit"

    def __init__(self, epoch: int | None = None, control_record: str | None = None, n_heads: int = 2,
                 layers: str | list[int] = "all", heads: str | list[int] = "random",
                 weights: list[str] = ("q", "k", "v", "out"), reset_optimizer_state: bool = True, seed: int = 0,
                 after_epoch: int = 100, exclude_nonfinite: bool = True):
        super().__init__(epoch, control_record, after_epoch, exclude_nonfinite)
        require(n_heads >= 1, "head_reinit.n_heads", n_heads, "an integer >= 1")
        require(set(weights) <= {"q", "k", "v", "out"} and len(weights) > 0, "head_reinit.weights", weights,
                "a non-empty subset of q, k, v, out")
        require(heads in ("random", "most_similar") or isinstance(heads, (list, tuple)), "head_reinit.heads", heads,
                "random, most_similar or a list of head indices")
        self.n_heads, self.layers, self.heads, self.weights = n_heads, layers, heads, list(weights)
        self.reset_optimizer_state, self.seed = reset_optimizer_state, seed

    def _choose(self, layer: int, attn, scores: torch.Tensor | None) -> list[int]:
        if isinstance(self.heads, (list, tuple)):
            chosen = [int(h) for h in self.heads]
        elif self.heads == "random":
            g = torch.Generator().manual_seed(self.seed * 1000 + layer)
            chosen = torch.randperm(attn.n_heads, generator=g)[: self.n_heads].tolist()
        else:
            chosen = torch.argsort(scores[layer], descending=True)[: self.n_heads].tolist()
        if any(h < 0 or h >= attn.n_heads for h in chosen) or len(chosen) > attn.n_heads:
            raise ConfigError(f"head_reinit.heads={self.heads!r}: the model has {attn.n_heads} heads per layer")
        return sorted(chosen)

    def _redundancy(self, pl_module) -> torch.Tensor:
        """Per layer and head: mean cosine to the other heads on the test split (for most_similar)."""
        from grok_lightning.metrics.functional import head_cosine_matrix

        tokens = pl_module.trainer.datamodule.eval_splits()["test"][0][: pl_module.hparams.eval_batch_size]
        _, attentions = pl_module.model(tokens.to(pl_module.device), return_attention=True)
        cos = head_cosine_matrix(attentions).double()  # (L, H, H)
        n = cos.shape[-1]
        return (cos.sum(-1) - cos.diagonal(dim1=-2, dim2=-1)) / (n - 1)

    @torch.no_grad()
    def apply(self, trainer, pl_module) -> dict:
        attns = _attention_layers(pl_module)
        layers = range(len(attns)) if self.layers == "all" else [int(i) for i in self.layers]
        scores = self._redundancy(pl_module) if self.heads == "most_similar" else None
        init = getattr(pl_module.hparams, "init", "pytorch")
        g = torch.Generator().manual_seed(self.seed)
        params = []
        chosen_all, before, after = {}, 0.0, 0.0
        for layer in layers:
            attn = attns[layer]
            heads = self._choose(layer, attn, scores)
            chosen_all[str(layer)] = heads
            d, dh = attn.out.weight.shape[0], attn.d_head
            slices = []  # (parameter, index tuple)
            for h in heads:
                rows = [slice(part * d + h * dh, part * d + (h + 1) * dh) for part, name in enumerate("qkv") if name in self.weights]
                for r in rows:
                    slices += [(attn.qkv.weight, (r, slice(None))), (attn.qkv.bias, (r,))]
                if "out" in self.weights:
                    slices.append((attn.out.weight, (slice(None), slice(h * dh, (h + 1) * dh))))
            for param, index in slices:
                fan_in = param.shape[1] if param.ndim == 2 else attn.qkv.weight.shape[1]
                region = param[index]
                before += float(region.double().pow(2).sum())
                fresh = _fresh_like(region, fan_in, init, is_bias=param.ndim == 1, generator=g)
                param[index] = fresh
                after += float(fresh.double().pow(2).sum())
                params.append((param, index))
        if self.reset_optimizer_state:
            _zero_adam_state(trainer, params)
        return {"layers": list(layers), "heads": chosen_all, "selection": self.heads if isinstance(self.heads, str) else "index",
                "weights": self.weights, "init": init, "reset_optimizer_state": self.reset_optimizer_state,
                "norm_before": math.sqrt(before), "norm_after": math.sqrt(after)}


def _fresh_like(region: torch.Tensor, fan_in: int, init: str, is_bias: bool, generator) -> torch.Tensor:
    """New values with the model's own initialisation (nn.Linear's default, or GPT's)."""
    if init == "gpt":
        values = torch.zeros(region.shape) if is_bias else torch.randn(region.shape, generator=generator) * 0.02
    else:  # kaiming_uniform(a=sqrt(5)) for weights and U(+-1/sqrt(fan_in)) for biases: both U(+-1/sqrt(fan_in))
        bound = 1.0 / math.sqrt(fan_in)
        values = (torch.rand(region.shape, generator=generator) * 2 - 1) * bound
    return values.to(device=region.device, dtype=region.dtype)


def _zero_adam_state(trainer, params) -> None:
    for optimizer in trainer.optimizers:
        for param, index in params:
            state = optimizer.state.get(param, {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key in state:
                    state[key][index] = 0.0


def _matrix_norm(w: torch.Tensor, norm: str) -> float:
    w = w.detach().double()
    return float(torch.linalg.matrix_norm(w, ord=2) if norm == "spectral" else torch.linalg.matrix_norm(w))


class WeightNormClip(_Intervention):
    """Group C: clip each chosen weight matrix's norm to the median of those matrices' norms.

    Args:
        norm: ``spectral`` (the largest singular value; the paper writes ||W||_2) or ``frobenius``.
        matrices: ``blocks`` (every 2-D weight inside the transformer blocks: qkv, out, both MLP
            layers), ``attention`` (qkv and out only) or ``all`` (every 2-D parameter, embeddings
            and head included).

    "Per-seed median": the median over the chosen matrices of this run at the intervention
    epoch. Matrices above it are scaled down to it; the others are untouched. Adam's state is
    kept (the paper's one excluded run came from the post-clip optimiser state).
    """

    name = "weight_norm_clip"

    def __init__(self, epoch: int | None = None, control_record: str | None = None, norm: str = "spectral",
                 matrices: str = "blocks", after_epoch: int = 100, exclude_nonfinite: bool = True):
        super().__init__(epoch, control_record, after_epoch, exclude_nonfinite)
        require(norm in ("spectral", "frobenius"), "weight_norm_clip.norm", norm, "spectral or frobenius")
        require(matrices in ("blocks", "attention", "all"), "weight_norm_clip.matrices", matrices,
                "blocks, attention or all")
        self.norm, self.matrices = norm, matrices

    def _chosen(self, pl_module) -> dict[str, torch.nn.Parameter]:
        named = dict(pl_module.model.named_parameters())
        keep = {n: p for n, p in named.items() if p.ndim == 2}
        if self.matrices == "blocks":
            keep = {n: p for n, p in keep.items() if n.startswith("blocks.")}
        elif self.matrices == "attention":
            keep = {n: p for n, p in keep.items() if n.startswith("blocks.") and ".attn." in n}
        if not keep:
            raise ConfigError(f"weight_norm_clip.matrices={self.matrices!r}: no such weight matrices in this model")
        return keep

    @torch.no_grad()
    def apply(self, trainer, pl_module) -> dict:
        chosen = self._chosen(pl_module)
        norms = {n: _matrix_norm(p, self.norm) for n, p in chosen.items()}
        values = sorted(norms.values())
        mid = len(values) // 2
        median = values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])
        total = lambda: math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in chosen.values()))
        before = total()
        clipped = {}
        for n, p in chosen.items():
            if norms[n] > median:
                p.mul_(median / norms[n])
                clipped[n] = [norms[n], median]
        return {"norm": self.norm, "matrices": self.matrices, "median": median, "n_matrices": len(chosen),
                "clipped": clipped, "norm_before": before, "norm_after": total()}
