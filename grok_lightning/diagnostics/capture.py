"""Read softmax attention probabilities out of a model without changing what it computes.

Three families are recognised, anywhere inside the module tree that is called:

* **Hugging Face** ``transformers`` models (any ``PreTrainedModel``): the outermost call gets
  ``output_attentions=True`` and its ``attentions`` output is kept. Only the *eager* attention
  implementation returns weights (SDPA and flash attention return none, silently), so while a
  capture is open every model that is not eager is switched to ``"eager"`` with
  ``set_attn_implementation`` and switched back on exit. The captured forward is therefore the
  eager forward: its outputs match the SDPA ones to float round-off, not bit for bit.
* ``torch.nn.MultiheadAttention``, alone or inside ``nn.TransformerEncoderLayer`` /
  ``nn.TransformerDecoderLayer`` (``batch_first`` either way). A forward hook re-issues the same
  call with ``need_weights=True, average_attn_weights=False`` under ``no_grad`` and with dropout
  off, and keeps only the weights: the original call, its output, its autograd graph and the
  random-number stream are untouched, in training and in evaluation mode. PyTorch's fused
  "fast path" (evaluation mode under ``no_grad``) runs whole encoder layers in C++ without
  calling the attention module, so a capture turns ``torch.backends.mha`` fast path off while it
  is open; the captured forward then equals the regular (slow-path) forward bit for bit.
* this package's :class:`~grok_lightning.models.transformer.DecoderTransformer`: its attention
  blocks already return their probabilities (``forward(..., return_attention=True)``), and a
  forward hook reads them.

Cross-attention (a ``key`` other than the ``query``, by value, e.g.
``TransformerDecoderLayer.multihead_attn``) is skipped unless ``cross_attention=True``: its ``(T_q, T_k)`` patterns do not stack with the
self-attention layers, and the published order parameters are defined on self-attention.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, List

import torch
from torch import Tensor, nn

__all__ = ["AttentionCapture", "UnsupportedModelError", "attention_probabilities"]

LOOKED_FOR = (
    "a Hugging Face transformers PreTrainedModel (read through output_attentions=True), "
    "torch.nn.MultiheadAttention (alone or in nn.TransformerEncoderLayer / nn.TransformerDecoderLayer), "
    "or grok_lightning's DecoderTransformer attention blocks"
)


class UnsupportedModelError(TypeError):
    """The model holds no attention module this package knows how to read."""


def _hf_base():
    # transformers is optional and slow to import: if it is not imported yet, no model is one of its
    transformers = sys.modules.get("transformers")
    return getattr(transformers, "PreTrainedModel", None) if transformers is not None else None


def _find_attention(model: nn.Module):
    """Walk the tree once: Hugging Face models (not their insides), MHA and our attention blocks."""
    from grok_lightning.models.transformer import CausalSelfAttention

    hf_base = _hf_base()
    hf, mha, ours = [], [], []

    def visit(module: nn.Module) -> None:
        if hf_base is not None and isinstance(module, hf_base):
            hf.append(module)  # its submodels are reached through its own output_attentions
            return
        if isinstance(module, nn.MultiheadAttention):
            mha.append(module)
            return
        if isinstance(module, CausalSelfAttention):
            ours.append(module)
            return
        for child in module.children():
            visit(child)

    visit(model)
    return hf, mha, ours


_MHA_SIGNATURE = inspect.signature(nn.MultiheadAttention.forward)


def _same(query: Tensor, key: Tensor) -> bool:
    """Self-attention: the key is the query, the same object or equal values (``x`` and
    ``x.clone()``); cross-attention attends to another sequence, whatever its length."""
    return query is key or (query.shape == key.shape and bool(torch.equal(query, key)))


class AttentionCapture:
    """Context manager: while open, every forward of ``model`` records its attention.

    ``take()`` returns the layers recorded since the last ``take()`` (a list of
    ``(B, H, T, T)`` tensors, detached, in execution order) and clears them. Opening the capture
    raises :class:`UnsupportedModelError` when the model holds no known attention module.

    Example:
        >>> import torch
        >>> layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        >>> encoder = torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
        >>> x = torch.randn(4, 5, 8)
        >>> with AttentionCapture(encoder) as capture:
        ...     y = encoder(x)
        ...     layers = capture.take()
        >>> len(layers), tuple(layers[0].shape), torch.equal(y, encoder(x))
        (3, (4, 2, 5, 5), True)
    """

    def __init__(self, model: nn.Module, cross_attention: bool = False):
        self.model, self.cross_attention = model, cross_attention
        self._layers: List[Tensor] = []
        self._handles: list = []
        self._restore: list = []
        self._hf_depth = 0

    # -- recording hooks -------------------------------------------------------------------
    def _record(self, weights: Tensor) -> None:
        weights = weights.detach()
        self._layers.append(weights.unsqueeze(0) if weights.dim() == 3 else weights)  # unbatched input

    def _ours_hook(self, module, args, output) -> None:
        self._record(output[1])

    def _mha_hook(self, module, args, kwargs, output) -> None:
        call = _MHA_SIGNATURE.bind(module, *args, **kwargs).arguments
        call.pop("self")
        if not self.cross_attention and not _same(call["query"], call["key"]):
            return
        call.update(need_weights=True, average_attn_weights=False)
        # dropout off for the re-issued call: we want the softmax probabilities, and dropout
        # would also draw from the random stream the training step is using
        was_training, module.training = module.training, False
        try:
            with torch.no_grad():
                _, weights = module.forward(**call)  # .forward: no hooks, no recursion
        finally:
            module.training = was_training
        self._record(weights)

    def _hf_pre_hook(self, module, args, kwargs):
        self._hf_depth += 1
        if self._hf_depth == 1:  # the outermost call passes the flag down to its submodels
            kwargs = {**kwargs, "output_attentions": True}
        return args, kwargs

    def _hf_hook(self, module, args, kwargs, output) -> None:
        self._hf_depth -= 1
        if self._hf_depth:
            return
        attentions = getattr(output, "attentions", None)
        if attentions is None:  # encoder-decoder models name them per stack
            attentions = tuple(getattr(output, "encoder_attentions", None) or ()) + tuple(
                getattr(output, "decoder_attentions", None) or ()
            )
            if self.cross_attention:
                attentions += tuple(getattr(output, "cross_attentions", None) or ())
        if isinstance(output, tuple) and not attentions:
            raise RuntimeError(
                f"{type(module).__name__} returned a plain tuple: call it with return_dict=True "
                "(the default) so that its attentions can be read by name"
            )
        if not attentions or any(a is None for a in attentions):
            raise RuntimeError(
                f"{type(module).__name__} returned no attention weights with output_attentions=True "
                f"(attn_implementation={module.config._attn_implementation!r}); load it with "
                "attn_implementation='eager'"
            )
        for weights in attentions:
            self._record(weights)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> "AttentionCapture":
        hf, mha, ours = _find_attention(self.model)
        if not (hf or mha or ours):
            raise UnsupportedModelError(
                f"no attention to capture in {type(self.model).__name__}: looked for {LOOKED_FOR}"
            )
        try:
            for module in hf:
                self._to_eager(module)
                self._handles.append(module.register_forward_pre_hook(self._hf_pre_hook, with_kwargs=True))
                self._handles.append(module.register_forward_hook(self._hf_hook, with_kwargs=True))
            for module in mha:
                self._handles.append(module.register_forward_hook(self._mha_hook, with_kwargs=True))
            for module in ours:
                self._handles.append(module.register_forward_hook(self._ours_hook))
            if mha:
                fastpath = torch.backends.mha.get_fastpath_enabled()
                torch.backends.mha.set_fastpath_enabled(False)
                self._restore.append(lambda: torch.backends.mha.set_fastpath_enabled(fastpath))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _to_eager(self, module: nn.Module) -> None:
        original = module.config._attn_implementation
        if original == "eager":
            return
        if hasattr(module, "set_attn_implementation"):
            module.set_attn_implementation("eager")
            self._restore.append(lambda: module.set_attn_implementation(original))
        else:  # older transformers read the config at forward time
            module.config._attn_implementation = "eager"
            self._restore.append(lambda: setattr(module.config, "_attn_implementation", original))

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        for restore in reversed(self._restore):
            restore()
        self._handles, self._restore, self._hf_depth = [], [], 0

    def take(self) -> List[Tensor]:
        layers, self._layers = self._layers, []
        return layers


def attention_probabilities(model: nn.Module, inputs: Any, cross_attention: bool = False, capture_fn=None,
                            **forward_kwargs) -> List[Tensor]:
    """Per-layer softmax attention probabilities of one forward, each ``(B, H, T, T)``.

    Runs ``model(**inputs, **forward_kwargs)`` when ``inputs`` is a dict (Hugging Face style),
    else ``model(inputs, **forward_kwargs)``, with an :class:`AttentionCapture` open. The model's
    training mode and autograd are left as they are: call it under ``torch.no_grad()`` and in
    ``eval()`` mode for diagnostics. Raises :class:`UnsupportedModelError` (naming what was
    looked for) when the model holds no recognised attention. ``capture_fn(model, inputs,
    forward_kwargs) -> layers`` replaces the capture for attention no hook can read
    (``F.scaled_dot_product_attention``; docs/diagnostics_any_model.md).

    Example:
        >>> import torch
        >>> from grok_lightning.models.transformer import DecoderTransformer
        >>> model = DecoderTransformer(8, 7, d_model=16, n_layers=2, n_heads=4, d_ff=32)
        >>> layers = attention_probabilities(model, torch.zeros(3, 3, dtype=torch.long))
        >>> len(layers), tuple(layers[0].shape)
        (2, (3, 4, 3, 3))
    """
    if capture_fn is not None:
        return list(capture_fn(model, inputs, forward_kwargs))
    with AttentionCapture(model, cross_attention=cross_attention) as capture:
        if isinstance(inputs, dict):
            model(**inputs, **forward_kwargs)
        else:
            model(inputs, **forward_kwargs)
        layers = capture.take()
    if not layers:
        raise RuntimeError(
            f"{type(model).__name__} holds attention modules but none ran in this forward "
            "(or all were cross-attention; pass cross_attention=True to keep those)"
        )
    return layers
