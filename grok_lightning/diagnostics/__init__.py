"""The attention order parameters of arXiv 2605.20441 on any transformer.

* :func:`attention_probabilities` / :class:`AttentionCapture`: per-layer ``(B, H, T, T)``
  softmax probabilities from this package's models, ``torch.nn.MultiheadAttention`` (also in
  ``nn.TransformerEncoder`` / ``nn.TransformerDecoder``) and Hugging Face ``transformers`` models.
* :func:`masked_attention_statistics` / :class:`MaskedAttentionStatistics`: s_bar, sigma_H,
  spectral gap, PR_norm over valid (non-padding) tokens only.
* :class:`AnyModelAttentionDiagnostics`: a Lightning callback that logs them for any
  LightningModule on a schedule.

Usage: docs/diagnostics_any_model.md.
"""

from grok_lightning.diagnostics.any_model import AnyModelAttentionDiagnostics, default_inputs, default_mask
from grok_lightning.diagnostics.capture import AttentionCapture, UnsupportedModelError, attention_probabilities
from grok_lightning.diagnostics.masked import MaskedAttentionStatistics, masked_attention_statistics

__all__ = [
    "AnyModelAttentionDiagnostics",
    "AttentionCapture",
    "MaskedAttentionStatistics",
    "UnsupportedModelError",
    "attention_probabilities",
    "default_inputs",
    "default_mask",
    "masked_attention_statistics",
]
