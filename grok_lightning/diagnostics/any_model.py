"""AnyModelAttentionDiagnostics: the paper's attention order parameters on any LightningModule.

Give it a fixed evaluation batch (a tensor, a dict of tensors, an ``(inputs, labels)`` tuple) or
any iterable of such batches (a ``DataLoader``), and optionally where the attention model sits
inside the LightningModule (``module_path="model"``). On its schedule it runs one forward over
the evaluation data in chunks, in evaluation mode under ``no_grad``, with an
:class:`~grok_lightning.diagnostics.capture.AttentionCapture` open; each chunk's probabilities go
straight into :class:`~grok_lightning.diagnostics.masked.MaskedAttentionStatistics` (sum-reduced
states), so memory is one chunk's attention whatever the evaluation size.

Logged to every logger of the Trainer at ``trainer.global_step``: ``<prefix>/<name>`` (layer
mean) and ``<prefix>_layer_<k>/<name>`` (layer ``k``), for ``name`` in ``mean_similarity``
(s_bar), ``entropy_std`` (sigma_H), ``spectral_gap`` and ``pr_norm`` by default. Padding: see
:mod:`grok_lightning.diagnostics.masked`; the mask is read from the inputs (``attention_mask``,
1 = token, or ``src_key_padding_mask`` / ``key_padding_mask``, True = padding) unless
``mask_fn`` says otherwise.

Only global rank 0 computes and logs (the other ranks go on training); the values do not enter
``trainer.callback_metrics``, the last ones are kept in ``callback.last``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Sequence

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.utilities import move_data_to_device
from torch import Tensor, nn

from grok_lightning.diagnostics.capture import AttentionCapture
from grok_lightning.diagnostics.masked import MaskedAttentionStatistics
from grok_lightning.metrics.functional import STAT_KEYS, check_attention_construction
from grok_lightning.metrics.participation import DEFAULT_PR_CONSTRUCTION

__all__ = ["AnyModelAttentionDiagnostics", "batch_axis", "check_layers", "default_inputs", "default_mask"]

DEFAULT_STATISTICS = ("mean_similarity", "entropy_std", "spectral_gap", "pr_norm")
_LABEL_KEYS = ("labels", "label")
#: padding masks, (B, T) in torch and Hugging Face whatever the layout of the other inputs
MASK_KEYS = ("attention_mask", "src_key_padding_mask", "key_padding_mask")


def default_inputs(batch: Any) -> Any:
    """A batch -> the model's input: tensors and dicts as they are (minus ``labels``: no loss is
    needed to read attention), the first element of a tuple or list (``(inputs, labels)``)."""
    if isinstance(batch, Mapping):
        return {k: v for k, v in batch.items() if k not in _LABEL_KEYS}
    if isinstance(batch, (tuple, list)):
        return batch[0]
    return batch


def default_mask(inputs: Any) -> Optional[Tensor]:
    """``(B, T)`` validity mask (True = real token) from a dict input, or ``None`` (no padding)."""
    if not isinstance(inputs, Mapping):
        return None
    if inputs.get("attention_mask") is not None:  # Hugging Face: 1 = attend, 0 = padding
        return inputs["attention_mask"].bool()
    for key in MASK_KEYS[1:]:  # torch.nn: True / -inf = padding
        padding = inputs.get(key)
        if padding is not None:
            return ~padding if padding.dtype == torch.bool else padding == 0
    return None


def _batch_size(inputs: Any, axis: int = 0) -> int:
    if isinstance(inputs, Tensor):
        return inputs.shape[axis]
    for value in inputs.values():
        if isinstance(value, Tensor) and value.dim() > axis:
            return value.shape[axis]
    raise ValueError("cannot find the batch size: no tensor among the inputs")


def _chunks(inputs: Any, size: int, axis: int = 0) -> Iterator[Any]:
    """Split along the batch axis; dict entries without that size there pass through whole, and
    padding masks (:data:`MASK_KEYS`) are split along their first axis, where their batch is."""
    n = _batch_size(inputs, axis)
    for start in range(0, n, size):
        if isinstance(inputs, Tensor):
            yield inputs.narrow(axis, start, min(size, n - start))
        else:
            yield {k: _cut(v, start, size, n, 0 if k in MASK_KEYS else axis) for k, v in inputs.items()}


def _cut(value: Any, start: int, size: int, n: int, axis: int) -> Any:
    if isinstance(value, Tensor) and value.dim() > axis and value.shape[axis] == n:
        return value.narrow(axis, start, min(size, n - start))
    return value


def batch_axis(model: nn.Module) -> int:
    """Where the batch is in a tensor input: 1 for torch's sequence-first attention
    (``nn.MultiheadAttention(batch_first=False)``, the default of ``nn.TransformerEncoderLayer``),
    else 0. Mixed layouts cannot be told apart and are refused."""
    firsts = {m.batch_first for m in model.modules() if isinstance(m, nn.MultiheadAttention)}
    if len(firsts) > 1:
        raise ValueError(f"{type(model).__name__} mixes batch_first=True and False attention: pass batch_axis=0 or 1")
    return 1 if firsts == {False} else 0


def check_layers(layers: Sequence[Tensor], batch: int, name: str) -> None:
    """What a forward gave is attention this package can read (one clear error if not): at least
    one layer of ``(batch, H, T, T)`` with ``H >= 2``. Finite, non-negative values are checked
    after the padding is masked (:mod:`grok_lightning.diagnostics.masked`): a fully padded row may
    be NaN."""
    if not layers:
        raise RuntimeError(f"no attention layer ran in the forward of {name}")
    for index, a in enumerate(layers):
        if a.dim() != 4 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"layer {index}: attention of shape {tuple(a.shape)}, expected (B, H, T, T)")
        if a.shape[0] != batch:
            raise ValueError(f"layer {index}: attention for {a.shape[0]} examples from a chunk of {batch}: the inputs' "
                             "batch axis is not the one chunked; pass batch_axis=0 or 1")
        if a.shape[1] < 2:
            raise ValueError(f"layer {index}: one head (H = 1): s_bar, sigma_H, the spectral gap and PR_norm compare heads")


class AnyModelAttentionDiagnostics(Callback):
    """s_bar, sigma_H, spectral gap and PR_norm of a fixed evaluation set, on a schedule.

    Args:
        eval_data: one batch (tensor, dict of tensors, or tuple whose first element is the
            input) or an iterable of batches (e.g. a ``DataLoader``), re-read at every
            evaluation. A single batch is moved to the module's device once and kept there.
        module_path: dotted path of the attention model inside the LightningModule (e.g.
            ``"model"`` or ``"net.encoder"``); ``None`` calls the LightningModule itself.
        every_n_epochs: evaluate after every ``n``-th training epoch (0 disables).
        every_n_steps: evaluate every ``n`` optimizer steps instead / as well (0 disables).
        at_start: also evaluate when training starts (step 0), the reference point.
        chunk_size: rows per forward; bounds memory, not the result.
        statistics: which of :data:`~grok_lightning.metrics.functional.STAT_KEYS` to log.
        per_layer: also log every layer's values.
        prefix: logged names are ``<prefix>/<name>`` and ``<prefix>_layer_<k>/<name>``.
        inputs_fn: batch -> model input (default :func:`default_inputs`); a dict is passed as
            keyword arguments.
        mask_fn: model input -> ``(B, T)`` validity mask or ``None`` (default :func:`default_mask`).
        forward_kwargs: fixed extra keyword arguments of every forward.
        cross_attention: also include cross-attention layers (their shapes must match).
        pr_construction: the head covariance behind ``pr_norm`` (default ``examples``; see
            :mod:`grok_lightning.metrics.participation`).
        batch_axis: the batch axis of a tensor input, for chunking: ``"auto"`` (1 for torch's
            sequence-first ``nn.MultiheadAttention``, else 0; :func:`batch_axis`), 0 or 1.
        capture_fn: ``capture_fn(model, inputs, forward_kwargs) -> [(B, H, T, T), ...]``: runs the
            forward and returns its attention probabilities, for models whose attention no hook
            can read (``F.scaled_dot_product_attention``); docs/diagnostics_any_model.md has one
            for a nanoGPT-style block. Default: :class:`AttentionCapture`.
    """

    def __init__(
        self,
        eval_data: Any,
        module_path: Optional[str] = None,
        every_n_epochs: int = 10,
        every_n_steps: int = 0,
        at_start: bool = True,
        chunk_size: int = 512,
        statistics: Sequence[str] = DEFAULT_STATISTICS,
        per_layer: bool = True,
        prefix: str = "diag",
        inputs_fn: Callable[[Any], Any] = default_inputs,
        mask_fn: Callable[[Any], Optional[Tensor]] = default_mask,
        forward_kwargs: Optional[Dict[str, Any]] = None,
        cross_attention: bool = False,
        pr_construction: str = DEFAULT_PR_CONSTRUCTION,
        batch_axis: int | str = "auto",
        capture_fn: Optional[Callable[[nn.Module, Any, Dict[str, Any]], Sequence[Tensor]]] = None,
    ):
        unknown = set(statistics) - set(STAT_KEYS)
        if unknown:
            raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {STAT_KEYS}")
        if chunk_size < 1 or every_n_epochs < 0 or every_n_steps < 0:
            raise ValueError("chunk_size must be >= 1 and every_n_epochs / every_n_steps >= 0")
        self.eval_data, self.module_path = eval_data, module_path
        self.every_n_epochs, self.every_n_steps, self.at_start = every_n_epochs, every_n_steps, at_start
        self.chunk_size, self.statistics, self.per_layer = chunk_size, tuple(statistics), per_layer
        self.prefix, self.inputs_fn, self.mask_fn = prefix, inputs_fn, mask_fn
        self.forward_kwargs = dict(forward_kwargs or {})
        self.cross_attention = cross_attention
        if batch_axis not in ("auto", 0, 1):
            raise ValueError(f"batch_axis must be 'auto', 0 or 1, got {batch_axis!r}")
        self.batch_axis, self.capture_fn = batch_axis, capture_fn
        check_attention_construction(pr_construction)
        self.pr_construction = pr_construction
        self.last: Dict[str, float] = {}
        self._device_batch: Any = None  # (device, batch) of a single fixed batch
        self._last_step: Optional[int] = None

    # -- schedule --------------------------------------------------------------------------
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.at_start:
            self._evaluate(trainer, pl_module)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._evaluate(trainer, pl_module)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args: Any) -> None:
        if self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            self._evaluate(trainer, pl_module)

    # -- one evaluation --------------------------------------------------------------------
    def _batches(self, device: torch.device, convert: Callable[[Any], Any]) -> Iterable[Any]:
        data = self.eval_data
        if isinstance(data, (tuple, list)) and not data:
            return []
        if isinstance(data, (Tensor, Mapping, tuple, list)):  # one fixed batch
            if self._device_batch is None or self._device_batch[0] != device:
                self._device_batch = (device, convert(move_data_to_device(data, device)))
            return [self._device_batch[1]]
        return (convert(move_data_to_device(batch, device)) for batch in data)

    def compute(self, model: nn.Module, device: torch.device, precision: Optional[Precision] = None) -> Dict[str, Tensor]:
        """Per-layer ``(L,)`` tensors of every statistic over the evaluation data.

        ``precision``: the Trainer's precision plugin, so that the forward runs under the same
        autocast / dtype conversion as the module's own validation steps.
        """
        precision = precision or Precision()
        metric = MaskedAttentionStatistics(per_layer=True, pr_construction=self.pr_construction, sync_on_compute=False)
        metric = metric.to(device)
        axis = batch_axis(model) if self.batch_axis == "auto" else self.batch_axis
        modes = {module: module.training for module in model.modules()}  # restored one by one:
        model.eval()  # a blanket .train() would wake modules the user keeps frozen in eval mode
        chunks = 0
        try:
            with torch.no_grad(), precision.val_step_context(), self._capture(model) as capture:
                for batch in self._batches(device, precision.convert_input):
                    for inputs in _chunks(self.inputs_fn(batch), self.chunk_size, axis):
                        layers = capture(inputs)
                        check_layers(layers, _batch_size(inputs, axis), type(model).__name__)
                        metric.update(layers, self.mask_fn(inputs))
                        chunks += 1
        finally:
            for module, training in modes.items():
                module.training = training
        if not chunks:
            raise ValueError("eval_data is empty: no batch to read attention from")
        if not float(metric.n_rows):
            raise ValueError("eval_data has no valid token: the mask marks every token as padding")
        return metric.compute()

    @contextlib.contextmanager
    def _capture(self, model: nn.Module):
        """A function ``inputs -> layers`` that runs one forward and returns its attention."""
        if self.capture_fn is not None:
            yield lambda inputs: list(self.capture_fn(model, inputs, self.forward_kwargs))
            return
        with AttentionCapture(model, self.cross_attention) as capture:
            def run(inputs):
                if isinstance(inputs, Mapping):
                    model(**inputs, **self.forward_kwargs)
                else:
                    model(inputs, **self.forward_kwargs)
                return capture.take()

            yield run

    def _evaluate(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # one evaluation per optimizer step, whichever schedule asks (gradient accumulation
        # repeats on_train_batch_end at one global step)
        if not trainer.is_global_zero or trainer.global_step == self._last_step:
            return
        self._last_step = trainer.global_step
        model = pl_module.get_submodule(self.module_path) if self.module_path else pl_module
        values = self.compute(model, pl_module.device, trainer.precision_plugin)
        metrics: Dict[str, float] = {}
        for name in self.statistics:
            per_layer = values[name].reshape(-1)
            metrics[f"{self.prefix}/{name}"] = float(per_layer.mean())
            if self.per_layer:
                for layer, value in enumerate(per_layer.tolist()):
                    metrics[f"{self.prefix}_layer_{layer}/{name}"] = value
        self.last = metrics
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
