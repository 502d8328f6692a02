"""Diagnostics on any model: layouts, self-attention by value, a capture function for attention no
hook can read (nanoGPT-style ``F.scaled_dot_product_attention``), and one clear error for inputs
that cannot be read."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from grok_lightning.diagnostics import (
    AnyModelAttentionDiagnostics,
    attention_probabilities,
    masked_attention_statistics,
)
from grok_lightning.diagnostics.any_model import check_layers

FLOAT32_REL = 1e-5


def seq_first_encoder() -> nn.TransformerEncoder:
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=False)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def test_sequence_first_inputs_are_chunked_along_the_batch():
    """nn.TransformerEncoder(batch_first=False) takes (T, B, E): chunking dim 0 would cut
    sequences short; the callback chunks the batch axis and equals the one-shot value."""
    model = seq_first_encoder()
    x = torch.randn(6, 10, 16, generator=torch.Generator().manual_seed(4))  # T = 6, B = 10
    with torch.no_grad():
        whole = masked_attention_statistics(attention_probabilities(model, x))
    callback = AnyModelAttentionDiagnostics(x, chunk_size=4)
    chunked = callback.compute(model, torch.device("cpu"))
    for key in ("mean_similarity", "entropy_std"):
        assert float(chunked[key].mean()) == pytest.approx(float(whole[key]), rel=FLOAT32_REL)
    wrong = AnyModelAttentionDiagnostics(x, chunk_size=4, batch_axis=0)  # told the wrong axis: refused
    with pytest.raises(ValueError, match="batch axis is not the one chunked"):
        wrong.compute(model, torch.device("cpu"))


def test_self_attention_is_recognised_by_value_not_identity():
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(3, 5, 8)

    class Clone(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x.clone(), x.clone())[0]

    layers = attention_probabilities(Clone(), x)
    expected = mha(x, x, x, need_weights=True, average_attn_weights=False)[1]
    assert len(layers) == 1 and torch.allclose(layers[0], expected, rtol=FLOAT32_REL, atol=1e-7)

    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x + 1, x + 1)[0]

    with pytest.raises(RuntimeError, match="none ran in this forward"):
        attention_probabilities(Cross(), x)


# -- a nanoGPT-style block: attention through F.scaled_dot_product_attention --------------------
class SdpaBlock(nn.Module):
    def __init__(self, d: int = 16, heads: int = 4):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def split(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        return [z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v)]

    def forward(self, x):
        q, k, v = self.split(x)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(x.shape))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.blocks = nn.ModuleList([SdpaBlock(), SdpaBlock()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def sdpa_capture(model, inputs, forward_kwargs):
    """The docs' capture function: a pre-hook on each block recomputes softmax(q k^T / sqrt(d))
    with the causal mask from the block's own input; the forward itself is unchanged."""
    layers = []

    def hook(block, args):
        q, k, _ = block.split(args[0])
        t = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        layers.append(scores.masked_fill(mask, float("-inf")).softmax(-1))

    handles = [block.register_forward_pre_hook(hook) for block in model.blocks]
    try:
        model(inputs, **forward_kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return layers


def test_capture_fn_reads_attention_that_no_hook_can():
    model = TinyGPT().eval()
    x = torch.randn(5, 7, 16)
    with pytest.raises(Exception, match="no attention to capture"):
        attention_probabilities(model, x)
    layers = attention_probabilities(model, x, capture_fn=sdpa_capture)
    assert len(layers) == 2 and layers[0].shape == (5, 4, 7, 7)
    q, k, v = model.blocks[0].split(x)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(layers[0] @ v, y, rtol=1e-4, atol=1e-6)  # the probabilities SDPA used
    callback = AnyModelAttentionDiagnostics(x, capture_fn=sdpa_capture, chunk_size=2)
    values = callback.compute(model, torch.device("cpu"))
    direct = masked_attention_statistics(layers, per_layer=True)
    assert torch.allclose(values["entropy_std"], direct["entropy_std"], rtol=FLOAT32_REL)


@pytest.mark.parametrize("make, message", [
    (lambda a: [a[:, :1]], "one head"),
    (lambda a: [], "no attention layer ran"),
    (lambda a: [a[:1]], "attention for 1 examples from a chunk of 2"),
])
def test_unreadable_attention_is_one_clear_error(make, message):
    a = torch.rand(2, 3, 4, 4).softmax(-1)
    with pytest.raises((ValueError, RuntimeError), match=message):
        check_layers(make(a), 2, "model")


def test_non_finite_or_negative_attention_at_valid_tokens_is_refused():
    a = torch.rand(2, 3, 4, 4).softmax(-1)
    with pytest.raises(ValueError, match="NaN or inf"):
        masked_attention_statistics([a.index_fill(2, torch.tensor([1]), float("nan"))])
    with pytest.raises(ValueError, match="negative entries"):
        masked_attention_statistics([a - 0.5])
    padded_nan = a.index_fill(2, torch.tensor([3]), float("nan"))  # a fully padded query row: dropped
    mask = torch.tensor([[True, True, True, False]] * 2)
    assert torch.isfinite(masked_attention_statistics([padded_nan], mask)["entropy_std"])


@pytest.mark.parametrize("make, message", [
    (lambda a: a[:, :1], "need at least 2 heads per layer, got 1"),
    (lambda a: a[:0], "holds no value"),
    (lambda a: a.index_fill(2, torch.tensor([1]), float("nan")), "NaN or inf"),
    (lambda a: a - 0.5, "negative entries"),
], ids=["one head", "empty batch", "NaN", "negative probabilities"])
def test_the_raw_metric_refuses_what_it_cannot_measure(make, message):
    """AttentionStatistics (and the functional form): one clear error, never a NaN, a 0.0 or a
    _LinAlgError from the eigensolver."""
    from grok_lightning.metrics import AttentionStatistics
    from grok_lightning.metrics.functional import attention_statistics

    a = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).softmax(-1)
    metric = AttentionStatistics()
    with pytest.raises(ValueError, match=message):
        metric.update([make(a)])
        metric.compute()
    with pytest.raises(ValueError, match=message):
        attention_statistics([make(a)])


def test_empty_data_and_no_valid_token_are_clear_errors():
    model = seq_first_encoder()
    with pytest.raises(ValueError, match="eval_data is empty"):
        AnyModelAttentionDiagnostics([], batch_axis=1).compute(model, torch.device("cpu"))
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), 1,
                                    enable_nested_tensor=False).eval()
    batch = {"src": torch.randn(3, 5, 16), "src_key_padding_mask": torch.ones(3, 5, dtype=torch.bool)}
    with pytest.raises(ValueError, match="no valid token"):
        AnyModelAttentionDiagnostics(batch).compute(encoder, torch.device("cpu"))
