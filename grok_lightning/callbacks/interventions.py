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
import os
import statistics
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.callbacks.intervention_source import (
    MATRIX_SETS,
    NORMS,
    InterventionSource,
    chosen_matrices,
    matrix_norm,
)
from grok_lightning.callbacks.optimizer_state import OPTIMIZER_STATE_MODES, FreshAdamSlices
from grok_lightning.config import ConfigError, require
from grok_lightning.records import load_record
from grok_lightning.stats.phases import peak_entropy_std

__all__ = ["RUN_SEED", "HeadReinit", "WeightNormClip", "draw_seed", "fresh_values", "head_slices"]

#: ``HeadReinit(seed=RUN_SEED)``: draw the heads and their fresh weights from the run's own seed
RUN_SEED = "run"


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
        optimizer_state: ``keep`` (default: the slices keep their Adam moments, what re-assigning
            the weights in place does) or ``fresh`` (moments zeroed and later updates
            bias-corrected with the slices' own step count, as for a new parameter); see
            :mod:`grok_lightning.callbacks.optimizer_state` and docs/decisions.md.
        seed: seed of the random head choice and of the fresh weights: an integer (the same heads
            and weights in every run that gives it), or ``"run"``: the run's own ``seed_everything``,
            so that each seed of a paired design draws its own heads and weights (read when the
            callback is built, after the run's seed is set, so an ensemble member gets its own).
    """

    name = "head_reinit"

    def __init__(self, epoch: int | None = None, control_record: str | None = None, n_heads: int = 2,
                 layers: str | list[int] = "all", heads: str | list[int] = "random",
                 weights: list[str] = ("q", "k", "v", "out"), optimizer_state: str = "keep", seed: int | str = 0,
                 after_epoch: int = 100, exclude_nonfinite: bool = True):
        super().__init__(epoch, control_record, after_epoch, exclude_nonfinite)
        require(n_heads >= 1, "head_reinit.n_heads", n_heads, "an integer >= 1")
        require(set(weights) <= {"q", "k", "v", "out"} and len(weights) > 0, "head_reinit.weights", weights,
                "a non-empty subset of q, k, v, out")
        require(heads in ("random", "most_similar") or isinstance(heads, (list, tuple)), "head_reinit.heads", heads,
                "random, most_similar or a list of head indices")
        require(optimizer_state in OPTIMIZER_STATE_MODES, "head_reinit.optimizer_state", optimizer_state,
                "keep or fresh")
        self.n_heads, self.layers, self.heads, self.weights = n_heads, layers, heads, list(weights)
        self.optimizer_state, self.draw, self.seed = optimizer_state, seed, draw_seed(seed)
        self.fresh: FreshAdamSlices | None = None

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
            slices = head_slices(attn, heads, self.weights)
            for param, index, kind in slices:
                region = param[index]
                before += float(region.double().pow(2).sum())
                fresh = fresh_values(region.shape, kind, attn.out.weight.shape[0], init, generator=g).to(region)
                param[index] = fresh
                after += float(fresh.double().pow(2).sum())
                params.append((param, index))
        if self.optimizer_state == "fresh":
            self.fresh = FreshAdamSlices(params)
            self.fresh.start(trainer)
        return {"layers": list(layers), "heads": chosen_all, "selection": self.heads if isinstance(self.heads, str) else "index",
                "weights": self.weights, "init": init, "optimizer_state": self.optimizer_state,
                "seed": self.seed, "draw": "per run" if self.draw == RUN_SEED else "fixed",
                "norm_before": math.sqrt(before), "norm_after": math.sqrt(after)}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.fresh is not None and not self.fresh.correct(trainer):
            self.fresh = None  # both bias corrections are 1 to 1e-8 from here on

    def state_dict(self) -> dict:
        fresh = None if self.fresh is None else self.fresh.t0
        return {**super().state_dict(), "fresh_t0": fresh}

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._fresh_t0 = state_dict.get("fresh_t0")

    def on_train_start(self, trainer, pl_module) -> None:
        # resumed after a fresh-state re-initialisation: rebuild the slices and keep correcting
        t0 = getattr(self, "_fresh_t0", None)
        if t0 is not None and self.done and self.fresh is None:
            self.fresh = FreshAdamSlices(self._slices_of(pl_module))
            self.fresh.t0 = int(t0)

    def _slices_of(self, pl_module) -> list[tuple]:
        attns = _attention_layers(pl_module)
        return [(param, index) for layer, heads in self.applied["heads"].items()
                for param, index, _ in head_slices(attns[int(layer)], heads, self.weights)]


def draw_seed(seed: int | str) -> int:
    """The seed of the head draw: an integer as given, or, for ``"run"``, the run's
    ``seed_everything`` (``PL_GLOBAL_SEED``, set before any callback is built)."""
    if seed == RUN_SEED:
        run_seed = os.environ.get("PL_GLOBAL_SEED")
        if run_seed is None:
            raise ConfigError("head_reinit.seed='run': the run has no seed (seed_everything); give one, or an "
                              "integer seed for the head draw")
        return int(run_seed)
    require(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0, "head_reinit.seed", seed,
            "an integer >= 0, or 'run' (the run's own seed)")
    return int(seed)


def head_slices(attn, heads: list[int], weights: list[str]) -> list[tuple]:
    """``(parameter, index, kind)`` of everything that belongs to ``heads`` alone: their q/k/v rows
    of the fused projection with their biases, and their input columns of the output projection
    (the output bias is shared by all heads)."""
    d, dh = attn.out.weight.shape[0], attn.d_head
    slices = []
    for h in heads:
        for part, name in enumerate("qkv"):
            if name in weights:
                rows = slice(part * d + h * dh, part * d + (h + 1) * dh)
                slices += [(attn.qkv.weight, (rows, slice(None)), "qkv_weight"), (attn.qkv.bias, (rows,), "qkv_bias")]
        if "out" in weights:
            slices.append((attn.out.weight, (slice(None), slice(h * dh, (h + 1) * dh)), "out_weight"))
    return slices


def fresh_values(shape, kind: str, d_model: int, init: str, generator) -> torch.Tensor:
    """New values for a head's slice with the model's own initialisation
    (:class:`~grok_lightning.models.transformer.DecoderTransformer`'s ``init``)."""
    if init == "gpt":
        return torch.zeros(shape) if kind == "qkv_bias" else torch.randn(shape, generator=generator) * 0.02
    if kind == "qkv_bias" and init in ("mha", "xavier"):
        return torch.zeros(shape)
    if kind == "qkv_weight" and init in ("mha", "xavier"):
        # xavier-uniform over the fused (3d x d) matrix (mha) or one (d x d) projection (xavier)
        fan_out = 3 * d_model if init == "mha" else d_model
        bound = math.sqrt(6.0 / (fan_out + d_model))
    else:  # nn.Linear's default: kaiming_uniform(a=sqrt(5)) weights, biases U(+-1/sqrt(fan_in)) alike
        bound = 1.0 / math.sqrt(d_model)
    return (torch.rand(shape, generator=generator) * 2 - 1) * bound


class WeightNormClip(_Intervention):
    """Group C: scale weight matrices whose norm is above a per-seed median down to it.

    Args:
        norm: ``spectral`` (the largest singular value; the paper writes ||W||_2) or ``frobenius``.
        matrices: ``blocks`` (every 2-D weight inside the transformer blocks: qkv, out, both MLP
            layers), ``attention`` (qkv and out only) or ``all`` (every 2-D parameter, embeddings
            and head included).
        reference: what "the per-seed median" is. ``trajectory`` (default): each matrix's own
            median norm over this run's evaluations up to the intervention epoch, recorded by
            :class:`~grok_lightning.callbacks.InterventionSource` (which must be attached, with
            the same ``norm`` and ``matrices``); a matrix above its usual size is brought back to
            it. ``matrices``: the median over all chosen matrices at the intervention epoch, one
            number for every matrix.

    Matrices at or below their reference are untouched. Adam's state is kept (the paper's one
    excluded run came from the post-clip optimiser state, which only exists if it is kept).
    """

    name = "weight_norm_clip"

    def __init__(self, epoch: int | None = None, control_record: str | None = None, norm: str = "spectral",
                 matrices: str = "blocks", reference: str = "trajectory", after_epoch: int = 100,
                 exclude_nonfinite: bool = True):
        super().__init__(epoch, control_record, after_epoch, exclude_nonfinite)
        require(norm in NORMS, "weight_norm_clip.norm", norm, "spectral or frobenius")
        require(matrices in MATRIX_SETS, "weight_norm_clip.matrices", matrices, "blocks, attention or all")
        require(reference in ("trajectory", "matrices"), "weight_norm_clip.reference", reference,
                "trajectory or matrices")
        self.norm, self.matrices, self.reference = norm, matrices, reference

    def _references(self, trainer, pl_module, norms: dict[str, float]) -> dict[str, float]:
        if self.reference == "matrices":
            median = statistics.median(norms.values())
            return {name: median for name in norms}
        source = next((c for c in trainer.callbacks if isinstance(c, InterventionSource)), None)
        if source is None or (source.norm, source.matrices) != (self.norm, self.matrices):
            raise ConfigError("weight_norm_clip.reference='trajectory' needs an InterventionSource callback "
                              f"with norm={self.norm!r} and matrices={self.matrices!r} (it records each matrix's norm)")
        return source.median_norms(trainer.current_epoch)

    @torch.no_grad()
    def apply(self, trainer, pl_module) -> dict:
        chosen = chosen_matrices(pl_module.model, self.matrices)
        norms = {n: matrix_norm(p, self.norm) for n, p in chosen.items()}
        references = self._references(trainer, pl_module, norms)
        total = lambda: math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in chosen.values()))
        before = total()
        clipped = {}
        for n, p in chosen.items():
            if norms[n] > references[n]:
                p.mul_(references[n] / norms[n])
                clipped[n] = [norms[n], references[n]]
        return {"norm": self.norm, "matrices": self.matrices, "reference": self.reference,
                "references": references, "n_matrices": len(chosen), "clipped": clipped,
                "norm_before": before, "norm_after": total()}
