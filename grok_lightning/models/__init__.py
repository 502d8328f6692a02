from grok_lightning.models.lstm import LSTMClassifier
from grok_lightning.models.mamba import MambaClassifier
from grok_lightning.models.mlp import MLP
from grok_lightning.models.registry import ATTENTION_ARCHS, available, build_model, register
from grok_lightning.models.transformer import SCALES, DecoderTransformer

__all__ = [
    "ATTENTION_ARCHS",
    "MLP",
    "SCALES",
    "DecoderTransformer",
    "LSTMClassifier",
    "MambaClassifier",
    "available",
    "build_model",
    "register",
]
