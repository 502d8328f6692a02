from grok_lightning.models.registry import ATTENTION_ARCHS, available, build_model, register
from grok_lightning.models.transformer import SCALES, DecoderTransformer

__all__ = ["ATTENTION_ARCHS", "SCALES", "DecoderTransformer", "available", "build_model", "register"]
