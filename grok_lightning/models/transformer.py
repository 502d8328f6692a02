"""Decoder-only pre-LayerNorm transformer for ``[a, b, =]`` sequences (no Lightning import).

Choices (docs/decisions.md, "Model"): causal mask, learned positional embedding, untied input
embedding and output head, biases everywhere, dropout 0, GELU MLP. With vocab 98, p = 97 this
gives exactly 818,785 parameters at 4L x 8H x d128 x d_ff 512 (the paper's 0.82M), 19.02M at
6 x 8 x 512 (d_ff 2048) and 85.21M at 12 x 12 x 768 (d_ff 3072).

Attention is written out (not ``scaled_dot_product_attention``) because the diagnostics need the
softmax probabilities; with T = 3 the explicit form costs nothing extra, and it keeps the logits
bit-identical whether or not attention is returned.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ACTIVATIONS", "ATTENTION_SCALES", "DecoderTransformer", "INITS", "NORM_POSITIONS", "SCALES",
           "transformer_size"]

#: the paper's named scales (layers, heads, d_model, d_ff)
SCALES = {
    "small": dict(n_layers=4, n_heads=8, d_model=128, d_ff=512),
    "medium": dict(n_layers=6, n_heads=8, d_model=512, d_ff=2048),
    "large": dict(n_layers=12, n_heads=12, d_model=768, d_ff=3072),
}


#: weight initialisations: module defaults, GPT-2's normal(0, 0.02), nn.MultiheadAttention's
#: (xavier over the fused q/k/v matrix), xavier per q/k/v projection (variance 1/d_model)
INITS = ("pytorch", "gpt", "mha", "xavier")
#: attention-logit scales: 1/sqrt(d_head) (Vaswani et al.) or none
ATTENTION_SCALES = ("inv_sqrt_d_head", "none")
#: LayerNorm placement: before each sub-block (GPT-2) or after the residual sum (Vaswani et al.)
NORM_POSITIONS = ("pre", "post")
#: MLP non-linearities (the paper does not state its own; GELU is the default)
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, attention_scale: str = "inv_sqrt_d_head", causal: bool = True):
        super().__init__()
        self.n_heads, self.d_head, self.causal = n_heads, d_model // n_heads, causal
        self.scale = 1.0 / math.sqrt(self.d_head) if attention_scale == "inv_sqrt_d_head" else 1.0
        # one fused projection; head h owns rows [h*d_head, (h+1)*d_head) of each of q, k, v
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(output, attention (B, H, T, T), y)``; ``y`` (B, T, D) is the output projection's input,
        the heads' ``A_h V_h`` side by side (what the head-output statistics read)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, self.d_head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if self.causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        attention = scores.softmax(dim=-1)  # (B, H, T, T)
        y = (attention @ v).transpose(1, 2).reshape(B, T, D)
        return self.out(y), attention, y


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, attention_scale: str, norm_position: str,
                 activation: str = "gelu", causal: bool = True):
        super().__init__()
        self.pre_norm = norm_position == "pre"
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, attention_scale, causal)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), ACTIVATIONS[activation](), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.pre_norm:
            attended, attention, y = self.attn(self.ln1(x))
            x = x + attended
            return x + self.mlp(self.ln2(x)), attention, y
        attended, attention, y = self.attn(x)
        x = self.ln1(x + attended)
        return self.ln2(x + self.mlp(x)), attention, y


class DecoderTransformer(nn.Module):
    """``tokens (B, T) -> logits (B, n_classes)`` read at the last position.

    Args:
        vocab_size: input vocabulary (p + 1 with the ``=`` token).
        n_classes: output classes (p).
        d_model, n_layers, n_heads, d_ff: width, depth, heads (must divide d_model), MLP width.
        max_len: positions in the learned positional embedding (3 for ``[a, b, =]``).
        init: ``pytorch`` (module defaults: kaiming-uniform linears, normal(0, 1) embeddings),
            ``gpt`` (normal(0, 0.02) weights and embeddings, zero biases) or ``mha``
            (``nn.MultiheadAttention``'s: xavier-uniform over the fused q/k/v projection, zero
            attention biases, module defaults elsewhere) or ``xavier`` (xavier-uniform on each
            d x d q/k/v projection, i.e. variance 1/d_model as in Vaswani et al.; zero
            attention biases). ``mha`` and ``xavier`` differ only in the q/k/v scale (2x
            variance for ``xavier``), which sets the spread of the attention logits at init.
        embedding_std: when set, token and positional embeddings are drawn from
            normal(0, embedding_std) after ``init``; ``None`` keeps what ``init`` gave
            (normal(0, 1) for ``pytorch``/``mha``/``xavier``, 0.02 for ``gpt``).
        attention_scale: ``inv_sqrt_d_head`` (scores / sqrt(d_head)) or ``none``.
        norm_position: ``pre`` (LayerNorm before each sub-block) or ``post`` (after each residual
            sum); ``ln_f`` is kept in both, so the parameter count does not change.
        activation: the MLP non-linearity, ``gelu`` or ``relu`` (same parameters either way).
        causal: mask each query row to the keys at or before it (the decoder the paper names); off,
            every row attends to all ``T`` tokens (an alternative reading of the paper's inputs,
            docs/sigma_h_readings.md).

    >>> model = DecoderTransformer(98, 97)
    >>> sum(p.numel() for p in model.parameters())
    818785
    >>> logits, attention = model(torch.zeros(2, 3, dtype=torch.long), return_attention=True)
    >>> logits.shape, len(attention), attention[0].shape
    (torch.Size([2, 97]), 4, torch.Size([2, 8, 3, 3]))
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 8,
        d_ff: int = 512,
        max_len: int = 3,
        init: str = "pytorch",
        attention_scale: str = "inv_sqrt_d_head",
        norm_position: str = "pre",
        embedding_std: float | None = None,
        activation: str = "gelu",
        causal: bool = True,
    ):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        for name, value, allowed in (
            ("init", init, INITS),
            ("attention_scale", attention_scale, ATTENTION_SCALES),
            ("norm_position", norm_position, NORM_POSITIONS),
            ("activation", activation, tuple(ACTIVATIONS)),
        ):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}: must be one of {', '.join(allowed)}")
        self.n_layers, self.n_heads = n_layers, n_heads
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff, attention_scale, norm_position, activation, causal) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)
        if init == "gpt":
            self.apply(_gpt_init)
        elif init in ("mha", "xavier"):
            self.apply(_mha_init if init == "mha" else _xavier_init)
        if embedding_std is not None:
            for embedding in (self.token_embedding, self.position_embedding):
                nn.init.normal_(embedding.weight, mean=0.0, std=embedding_std)

    def forward(self, tokens: torch.Tensor, return_attention: bool = False, return_projection_inputs: bool = False):
        """``logits``; with ``return_attention`` also the per-layer attention, with
        ``return_projection_inputs`` also each layer's output-projection input ``y`` (B, T, D):
        outputs rather than hooks, so that a vmapped forward over ensemble members returns them."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        attentions, projection_inputs = [], []
        for block in self.blocks:
            x, attention, y = block(x)
            attentions.append(attention)
            projection_inputs.append(y)
        logits = self.head(self.ln_f(x[:, -1]))
        extra = ([attentions] if return_attention else []) + ([projection_inputs] if return_projection_inputs else [])
        return (logits, *extra) if extra else logits


def transformer_size(vocab_size: int, n_classes: int, d_model: int, n_layers: int, d_ff: int, max_len: int = 3,
                     batch_size: int = 512) -> tuple[int, int]:
    """``(parameters, bytes to train)`` of :class:`DecoderTransformer` without building it.

    Bytes: weights, gradients and AdamW's two moments (4 float32 copies) plus one training batch's
    activations (about 16 values of width d_model and 3 of d_ff per token and layer). An estimate
    for refusing what cannot fit, not a profile.

    >>> transformer_size(98, 97, 128, 4, 512)[0]
    818785
    """
    per_layer = 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model
    params = (vocab_size + max_len) * d_model + n_layers * per_layer + 2 * d_model + d_model * n_classes + n_classes
    activations = batch_size * max_len * n_layers * (16 * d_model + 3 * d_ff)
    return params, 4 * (4 * params + activations)


def _gpt_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def _mha_init(module: nn.Module) -> None:
    # what nn.MultiheadAttention.reset_parameters does to its packed in_proj and out_proj
    if isinstance(module, CausalSelfAttention):
        nn.init.xavier_uniform_(module.qkv.weight)
        nn.init.zeros_(module.qkv.bias)
        nn.init.zeros_(module.out.bias)


def _xavier_init(module: nn.Module) -> None:
    if isinstance(module, CausalSelfAttention):
        for projection in module.qkv.weight.data.chunk(3, dim=0):  # q, k, v: each d x d
            nn.init.xavier_uniform_(projection)
        nn.init.zeros_(module.qkv.bias)
        nn.init.zeros_(module.out.bias)
