"""Head outputs for the ``output_`` PR_norm constructions: each head's write into the residual stream.

For an attention block with ``n_heads`` heads of width ``d_head`` and output projection ``out``
(``W_O``, ``d_model x d_model``), head ``h``'s output at a position is ``y_h W_O[:, h]^T``, with
``y_h`` its ``A_h V_h`` slice of the projection's input (the output bias is shared, so left out):
one ``(B, H, T, d_model)`` tensor per block. These vectors live in one space for all heads, which
the raw ``A_h V_h`` (each head in its own basis) do not, so a covariance across heads means
something. They are read with a forward pre-hook on ``out``; any block with the attributes
``n_heads``, ``d_head`` and ``out`` (this package's attention) is found.
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch import Tensor, nn

from grok_lightning.metrics.participation import PRState, _pr_compute, _pr_state_update, parse_pr_construction

__all__ = ["attention_blocks", "head_output_hooks", "head_output_participation", "head_output_state"]


def attention_blocks(model: nn.Module) -> List[nn.Module]:
    """The attention blocks of ``model``, in forward order (modules with ``n_heads``, ``d_head``, ``out``)."""
    blocks = [m for m in model.modules() if all(hasattr(m, a) for a in ("n_heads", "d_head", "out"))]
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no attention block with n_heads, d_head and out")
    return blocks


def head_output_hooks(model: nn.Module, sink: list) -> list:
    """Register pre-hooks that append each block's ``(B, H, T, d_model)`` head outputs to ``sink``;
    returns the handles (remove them when done)."""
    def hook(attn):
        def capture(projection, inputs):
            y = inputs[0]  # (B, T, D): the heads' A_h V_h side by side
            w = projection.weight.view(projection.weight.shape[0], attn.n_heads, attn.d_head)  # (D, H, d_head)
            sink.append(torch.einsum("bthe,dhe->bhtd", y.view(*y.shape[:2], attn.n_heads, attn.d_head), w))
        return capture
    return [attn.out.register_forward_pre_hook(hook(attn)) for attn in attention_blocks(model)]


@torch.no_grad()
def head_output_state(model: nn.Module, tokens: Tensor, per_example: bool = False, batch_size: int = 1024) -> PRState:
    """Sum-reduced PR statistics of the head outputs on ``tokens``, in chunks of ``batch_size``."""
    outputs: list = []
    handles = head_output_hooks(model, outputs)
    was_training = model.training
    model.eval()
    state = None
    try:
        for start in range(0, len(tokens), batch_size):
            outputs.clear()
            model(tokens[start:start + batch_size])
            new = _pr_state_update(outputs, per_example)
            state = new if state is None else PRState(*(a + b for a, b in zip(state, new)))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return state


def head_output_participation(model: nn.Module, tokens: Tensor, construction: str = "output_examples",
                              batch_size: int = 1024) -> Dict[str, Tensor]:
    """``{"pr_norm": (L,), "pr_norm_ratio": (L,)}`` of the head outputs under ``construction``.

    Example:
        >>> from grok_lightning.models.transformer import DecoderTransformer
        >>> _ = torch.manual_seed(0)
        >>> model = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32)
        >>> out = head_output_participation(model, torch.randint(0, 23, (50, 3)), "output_examples")
        >>> out["pr_norm"].shape, bool(((out["pr_norm"] > 0) & (out["pr_norm"] <= 1)).all())
        (torch.Size([2]), True)
    """
    centring = parse_pr_construction(construction)[1]
    state = head_output_state(model, tokens, centring == "per_example", batch_size)
    return {"pr_norm": _pr_compute(state, centring, "affine"), "pr_norm_ratio": _pr_compute(state, centring, "ratio")}
