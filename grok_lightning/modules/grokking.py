"""GrokkingModule: any registered sequence model on a modular-arithmetic task, trained with AdamW.

The training recipe lives here (loss, optimiser, evaluation); everything optional (grokking
detection, diagnostics, interventions, records) lives in callbacks.

Evaluation is not Lightning's validation loop: the paper evaluates on a dense-early schedule
(every epoch up to 10, then every 10) on the *full* train and test splits, which fit in one
tensor each. :meth:`evaluate` is called by :class:`~grok_lightning.callbacks.ScheduledEvaluation`
at epoch 0 and on that schedule; it returns plain floats that become one history row.
"""

from __future__ import annotations

import math
from typing import Callable

import lightning as L
import torch
from torch.nn import functional as F

from grok_lightning.config import ConfigError, require, require_choice, validate_optimizer
from grok_lightning.data.modular import token_layout
from grok_lightning.models import ATTENTION_ARCHS, available, build_model
from grok_lightning.models.mamba import resolve_backend
from grok_lightning.models.transformer import ACTIVATIONS, ATTENTION_SCALES, INITS, NORM_POSITIONS

__all__ = ["GrokkingModule", "model_kwargs", "parameter_groups"]

WEIGHT_DECAY_SCOPES = ("all", "matrices")


def parameter_groups(model: torch.nn.Module, weight_decay: float, scope: str) -> list[dict]:
    """AdamW parameter groups.

    Why ``all`` is the default: the grokking literature (and this paper's AdamW bound, which
    treats the whole weight norm) decays every parameter, embeddings, biases and LayerNorm gains
    included. ``matrices`` is the nanoGPT convention (only tensors with ndim >= 2). Parameters an
    architecture marks ``_no_weight_decay = True`` (Mamba's ``A_log`` and ``D``) never decay.
    """
    decay, no_decay = [], []
    for param in model.parameters():
        if getattr(param, "_no_weight_decay", False):
            no_decay.append(param)
        elif scope == "all" or param.ndim >= 2:
            decay.append(param)
        else:
            no_decay.append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def model_kwargs(hparams) -> dict:
    """Builder keyword arguments from a GrokkingModule's hparams (a mapping or namespace): the
    transformer's shape and initialisation, or a probe's ``arch_kwargs``. Checkpoint readers
    rebuild the same model from a record's ``config.model`` with it."""
    get = hparams.get if isinstance(hparams, dict) else lambda key, default=None: getattr(hparams, key, default)
    kwargs = dict(get("arch_kwargs") or {})
    if get("arch") == "transformer":
        kwargs.update({key: get(key) for key in ("d_model", "n_layers", "n_heads", "d_ff")})
        # older records lack the initialisation keys: they were trained with these defaults
        kwargs.update(
            init=get("init", "pytorch") or "pytorch",
            attention_scale=get("attention_scale", "inv_sqrt_d_head") or "inv_sqrt_d_head",
            norm_position=get("norm_position", "pre") or "pre",
            embedding_std=get("embedding_std"),
            activation=get("activation", "gelu") or "gelu",
            causal=get("causal", True) is not False,
            max_len=4 if get("operator_token") else 3,  # [a, op, b, =] or [a, b, =]
        )
    return kwargs


def build_from_config(model: dict, data: dict) -> torch.nn.Module:
    """The model a run's ``config.model`` and ``config.data`` describe, built as ``GrokkingModule``
    builds it (record readers rebuild checkpoints with it)."""
    operator_token = bool(data.get("operator_token", False))
    if operator_token and model.get("arch", "transformer") != "transformer":
        raise ConfigError(f"data.operator_token=True: only the transformer reads [a, op, b, =] "
                          f"(model.arch={model.get('arch')!r} reads [a, b])")
    vocab_size, _ = token_layout(data["p"], operator_token)
    return build_model(model.get("arch", "transformer"), vocab_size=vocab_size, n_classes=data["p"],
                       **model_kwargs({**model, "operator_token": operator_token}))


class GrokkingModule(L.LightningModule):
    """One sequence model x one modular-arithmetic task.

    Args:
        arch: registered architecture: ``transformer``, or a cross-architecture probe ``mlp``,
            ``lstm``, ``mamba`` (no attention; they ignore the transformer shape and ``init``).
        d_model, n_layers, n_heads, d_ff: transformer shape (paper canonical 128 / 4 / 8 / 512).
        arch_kwargs: extra keyword arguments for the architecture's builder (the probes' shapes,
            e.g. ``{"expand": 2, "backend": "auto"}`` for Mamba).
        lr: AdamW learning rate (1e-3, constant after ``warmup_steps``; no clipping unless
            ``trainer.gradient_clip_val`` is set).
        weight_decay: decoupled AdamW weight decay lambda (the swept quantity).
        betas, eps: AdamW moments (default betas chosen by measurement, see docs/decisions.md).
        weight_decay_scope: ``all`` (default) or ``matrices``; see :func:`parameter_groups`.
        init: transformer weight initialisation: ``pytorch`` (module defaults), ``gpt``
            (normal 0.02, zero bias), ``mha`` (nn.MultiheadAttention's fused xavier q/k/v) or
            ``xavier`` (xavier per q/k/v projection); see docs/decisions.md "Model at
            initialisation" for what each gives.
        attention_scale: ``inv_sqrt_d_head`` or ``none`` (attention-logit scale).
        norm_position: ``pre`` (the paper's pre-LayerNorm) or ``post``.
        embedding_std: redraw token and positional embeddings from normal(0, std) (``None``:
            keep ``init``'s).
        activation: the transformer MLP's non-linearity, ``gelu`` (default) or ``relu``.
        causal: the transformer's causal mask (default on, the paper's decoder); off lets every
            query row see every token (docs/sigma_h_readings.md).
        warmup_steps: linear learning-rate warmup from 0 over this many optimizer steps (0: none,
            the paper's stated protocol).
        eval_every: evaluate every this many epochs after the dense phase.
        eval_dense_until: evaluate every epoch up to and including this epoch.
        eval_batch_size: chunk size for evaluation forwards.
        modulus: p; normally taken from the datamodule at setup (checkpoints store it so that
            ``load_from_checkpoint`` can rebuild the model without a datamodule).
        reads_operator_token: whether the inputs are ``[a, op, b, =]``; taken from the
            datamodule's ``data.operator_token`` at setup and stored in checkpoints, as ``modulus``
            is (another name than the data's: Lightning refuses one hparam name with two values).
    """

    def __init__(
        self,
        arch: str = "transformer",
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 8,
        d_ff: int = 512,
        arch_kwargs: dict | None = None,
        lr: float = 1e-3,
        weight_decay: float = 1.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay_scope: str = "all",
        init: str = "pytorch",
        attention_scale: str = "inv_sqrt_d_head",
        norm_position: str = "pre",
        embedding_std: float | None = None,
        activation: str = "gelu",
        causal: bool = True,
        warmup_steps: int = 0,
        eval_every: int = 10,
        eval_dense_until: int = 10,
        eval_batch_size: int = 8192,
        modulus: int | None = None,
        reads_operator_token: bool = False,
    ):
        super().__init__()
        require_choice("model.arch", arch, available())
        validate_optimizer(lr, weight_decay)
        require_choice("model.weight_decay_scope", weight_decay_scope, WEIGHT_DECAY_SCOPES)
        require_choice("model.init", init, INITS)
        require_choice("model.attention_scale", attention_scale, ATTENTION_SCALES)
        require_choice("model.norm_position", norm_position, NORM_POSITIONS)
        require_choice("model.activation", activation, tuple(ACTIVATIONS))
        require(isinstance(warmup_steps, int) and warmup_steps >= 0, "model.warmup_steps", warmup_steps,
                "must be an integer >= 0")
        require(
            embedding_std is None or (math.isfinite(embedding_std) and embedding_std > 0),
            "model.embedding_std", embedding_std, "must be a finite number > 0 or null",
        )
        if arch == "transformer":
            for name, value in dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff).items():
                require(isinstance(value, int) and value >= 1, f"model.{name}", value, "must be an integer >= 1")
            require(d_model % n_heads == 0, "model.n_heads", n_heads, f"must divide model.d_model={d_model}")
        backend = (arch_kwargs or {}).get("backend", "torch")
        if arch == "mamba" and backend != "auto":  # fail before training, not at configure_model
            resolve_backend(backend)
        require(eval_every >= 1, "model.eval_every", eval_every, "must be an integer >= 1")
        require(all(0 <= b < 1 for b in betas), "model.betas", betas, "each must be in [0, 1)")
        self.save_hyperparameters()
        self.model: torch.nn.Module | None = None
        self.diverged_epoch: int | None = None
        self.excluded_reason: str | None = None  # set by intervention callbacks (status 'excluded')
        self.record_extras: dict = {}
        self.train_step_losses: list[torch.Tensor] = []  # this epoch's step losses (see training_step)
        if modulus is not None:
            self._build(modulus)

    # --- construction -------------------------------------------------------------------
    @property
    def has_attention(self) -> bool:
        return self.hparams.arch in ATTENTION_ARCHS

    def _build(self, p: int) -> None:
        hp = self.hparams
        self.model = build_from_config(dict(hp), {"p": p, "operator_token": bool(hp.get("reads_operator_token", False))})
        self.modulus = p
        # the regime map (Fig. 1) places runs by model size
        self.record_extras["n_params"] = sum(t.numel() for t in self.model.parameters())
        if hasattr(self.model, "backend"):  # Mamba: which kernels ran (not an hparam: it is resolved)
            self.record_extras["backend"] = self.model.backend
        if not self.has_attention:  # the record says so even when the diagnostics are off
            self.record_extras["attention_metrics"] = f"undefined for arch={hp.arch}"

    def configure_model(self) -> None:
        if self.model is not None:
            return
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "p"):
            raise ConfigError("model.modulus=None: pass a modular-arithmetic datamodule or set model.modulus")
        self.hparams.reads_operator_token = bool(getattr(datamodule, "operator_token", False))  # the data decides
        self._build(datamodule.p)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        reads_operator_token = bool(self.hparams.get("reads_operator_token", False))
        checkpoint.setdefault("hyper_parameters", {}).update(modulus=self.modulus, reads_operator_token=reads_operator_token)

    def configure_optimizers(self):
        hp = self.hparams
        groups = parameter_groups(self.model, hp.weight_decay, hp.weight_decay_scope)
        optimizer = torch.optim.AdamW(groups, lr=hp.lr, betas=tuple(hp.betas), eps=hp.eps)
        warmup = hp.get("warmup_steps", 0)
        if not warmup:
            return optimizer
        # step s (0-based) trains at lr * (s + 1) / warmup until the warmup is over
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # --- training -----------------------------------------------------------------------
    def on_train_epoch_start(self) -> None:
        self.train_step_losses = []

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        if return_attention and not self.has_attention:
            raise ValueError(f"return_attention=True: model.arch={self.hparams.arch!r} has no attention")
        return self.model(tokens, return_attention=return_attention) if return_attention else self.model(tokens)

    def compute_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The training loss of a forward's output (also what an ensemble vmaps per member)."""
        return F.cross_entropy(logits, labels)

    def training_loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.compute_loss(self.model(tokens), labels)

    def compile_training(self, mode: str) -> None:
        """Compile the training step's forward and loss (``run.compile``); evaluation stays eager
        (its attention hooks would break the graph)."""
        self._training_loss = torch.compile(self.training_loss, mode=mode, dynamic=False)

    def training_step(self, batch, batch_idx):
        tokens, labels = batch
        loss = (getattr(self, "_training_loss", None) or self.training_loss)(tokens, labels)
        if not torch.isfinite(loss):
            # diverged: skip this update (returning None skips backward/step) and stop the run;
            # the recorder writes status "diverged" with this epoch.
            self.diverged_epoch = self.current_epoch + 1
            self.trainer.should_stop = True
            return None
        # kept for ScheduledEvaluation's per-epoch mean/max and read by the progress bar (its last
        # entry). Not self.log: Lightning's per-step logging machinery costs more CPU than the
        # rest of the framework's step, and the logger would plot it against steps anyway
        self.train_step_losses.append(loss.detach())
        return loss

    # --- evaluation ---------------------------------------------------------------------
    def is_eval_epoch(self, epoch: int) -> bool:
        hp = self.hparams
        return epoch <= hp.eval_dense_until or epoch % hp.eval_every == 0

    def weight_norm(self) -> float:
        """Omega_total: L2 norm of all parameters concatenated."""
        return float(torch.sqrt(sum((p.detach().double() ** 2).sum() for p in self.model.parameters())))

    @torch.no_grad()
    def evaluate(self, epoch: int, after_forward: Callable[[str], None] | None = None) -> dict[str, float]:
        """Loss and accuracy on the full train and test splits, plus the weight norm.

        ``after_forward(split)`` is called after each forward of a split's examples: the
        evaluation pipeline reads that forward's attention there (``ScheduledEvaluation``),
        so the diagnostics cost no forward of their own.
        """
        was_training = self.training
        self.eval()
        out: dict[str, float] = {}
        for split, (tokens, labels) in self.trainer.datamodule.eval_splits().items():
            tokens, labels = tokens.to(self.device), labels.to(self.device)
            loss_sum, correct = 0.0, 0
            for start in range(0, len(labels), self.hparams.eval_batch_size):
                x = tokens[start : start + self.hparams.eval_batch_size]
                y = labels[start : start + self.hparams.eval_batch_size]
                logits = self.model(x)
                if after_forward is not None:
                    after_forward(split)
                loss_sum += float(F.cross_entropy(logits.double(), y, reduction="sum"))
                correct += int((logits.argmax(-1) == y).sum())
            out[f"{split}_loss"] = loss_sum / len(labels)
            out[f"{split}_acc"] = correct / len(labels)
        out["weight_norm"] = self.weight_norm()
        self.train(was_training)
        return out
