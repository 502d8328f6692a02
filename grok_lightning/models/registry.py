"""Sequence models by name, so the LightningModule and the CLI pick an architecture by string.

Every builder takes ``(vocab_size, n_classes, **kwargs)`` and returns a plain ``nn.Module`` mapping
``tokens (B, T) -> logits (B, n_classes)``; attention models also accept
``return_attention=True`` and then return ``(logits, [attention (B, H, T, T) per layer])``.
The cross-architecture probes (``mlp``, ``lstm``, ``mamba``) have no attention: they are not in
:data:`ATTENTION_ARCHS`, so nothing asks them for it.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from grok_lightning.config import ConfigError
from grok_lightning.models.lstm import LSTMClassifier
from grok_lightning.models.mamba import MambaClassifier
from grok_lightning.models.mlp import MLP
from grok_lightning.models.transformer import DecoderTransformer

ModelBuilder = Callable[..., nn.Module]
_REGISTRY: dict[str, ModelBuilder] = {
    "transformer": DecoderTransformer,
    "mlp": MLP,
    "lstm": LSTMClassifier,
    "mamba": MambaClassifier,
}
#: architectures whose forward can return attention probabilities
ATTENTION_ARCHS = {"transformer"}


def register(name: str, builder: ModelBuilder, has_attention: bool = False) -> None:
    _REGISTRY[name] = builder
    if has_attention:
        ATTENTION_ARCHS.add(name)


def available() -> list[str]:
    return sorted(_REGISTRY)


def build_model(arch: str, vocab_size: int, n_classes: int, **kwargs) -> nn.Module:
    if arch not in _REGISTRY:
        raise ConfigError(f"model.arch={arch!r}: must be one of {', '.join(available())}")
    try:
        return _REGISTRY[arch](vocab_size=vocab_size, n_classes=n_classes, **kwargs)
    except TypeError as err:  # a misspelt arch_kwargs key: one line, not a traceback
        if "unexpected keyword argument" not in str(err):
            raise
        raise ConfigError(f"model.arch_kwargs for arch={arch!r}: {err}") from None
