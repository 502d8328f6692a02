"""Head outputs for the ``output_`` PR_norm constructions: each head's write into the residual stream.

For an attention block with ``n_heads`` heads of width ``d_head`` and output projection ``out``
(``W_O``, ``d_model x d_model``), head ``h``'s output at a position is ``o_h = y_h W_h^T`` with
``y_h`` its ``A_h V_h`` slice of the projection's input and ``W_h = W_O[:, h]`` (the output bias is
shared, so left out). These vectors live in one space for all heads, which the raw ``A_h V_h``
(each head in its own basis) do not, so a covariance across heads means something. The
projection's input ``y`` is read with a forward pre-hook on ``out``; any block with the attributes
``n_heads``, ``d_head`` and ``out`` (this package's attention) is found.

The PR statistics (:class:`~grok_lightning.metrics.participation.PRState`, coordinates ``c = (t, d)``)
come from ``y`` without forming the ``(B, H, T, d_model)`` outputs:
``gram[h, g] = sum_{a, e} S[h, g, a, e] M[h, g, a, e]`` with ``S = sum_{b, t} y_h^T y_g`` (one
``D x D`` product) and ``M = W_h^T W_g``, and ``coord_sum[h, t] = (sum_b y_h[b, t]) W_h^T``, all in
float64. Only ``per_example`` (one covariance per example) forms the outputs, chunk by chunk.
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch import Tensor, nn

from grok_lightning.metrics.participation import PRState, parse_pr_construction, pr_compute, pr_state_update

__all__ = ["attention_blocks", "head_output_participation", "head_output_pr_update", "head_output_state",
           "head_output_values", "head_outputs", "projection_input_hooks"]


def attention_blocks(model: nn.Module) -> List[nn.Module]:
    """The attention blocks of ``model``, in forward order (modules with ``n_heads``, ``d_head``, ``out``)."""
    blocks = [m for m in model.modules() if all(hasattr(m, a) for a in ("n_heads", "d_head", "out"))]
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no attention block with n_heads, d_head and out")
    return blocks


def projection_input_hooks(model: nn.Module, sink: list) -> list:
    """Register pre-hooks that append ``(y, block)`` per attention block to ``sink`` (``y`` the output
    projection's ``(B, T, D)`` input); returns the handles (remove them when done)."""
    def capture(attn):
        return lambda projection, inputs: sink.append((inputs[0].detach(), attn))
    return [attn.out.register_forward_pre_hook(capture(attn)) for attn in attention_blocks(model)]


def _split(y: Tensor, attn: nn.Module) -> tuple[Tensor, Tensor]:
    """``(y as (B, T, H, d_head), W_O as (D, H, d_head))``, float64."""
    w = attn.out.weight.detach().to(torch.float64)
    return (y.to(torch.float64).view(*y.shape[:2], attn.n_heads, attn.d_head),
            w.view(w.shape[0], attn.n_heads, attn.d_head))


def head_outputs(captured: list) -> List[Tensor]:
    """The ``(B, H, T, D)`` head outputs (float64) of each captured block."""
    return [torch.einsum("btha,dha->bhtd", *_split(y, attn)) for y, attn in captured]


def head_output_pr_update(captured: list, per_example: bool = False) -> PRState:
    """PR statistics of the captured blocks' head outputs (module docstring)."""
    if per_example:
        return pr_state_update(head_outputs(captured), per_example=True)
    grams, sums = [], []
    for y, attn in captured:
        yh, w = _split(y, attn)
        batch, t, h, a = yh.shape
        flat = yh.reshape(batch * t, h * a)
        s = (flat.T @ flat).view(h, a, h, a).permute(0, 2, 1, 3)  # (H, H, d_head, d_head)
        grams.append((s * torch.einsum("dha,dgb->hgab", w, w)).sum((-1, -2)))
        sums.append(torch.einsum("tha,dha->htd", yh.sum(0), w).reshape(h, -1))
    batch = captured[0][0].shape[0]
    f64 = dict(dtype=torch.float64, device=grams[0].device)
    return PRState(gram=torch.stack(grams), coord_sum=torch.stack(sums),
                   coord_count=torch.full((sums[0].shape[-1],), float(batch), **f64),
                   example_r_sum=torch.zeros(len(grams), **f64), n_examples=torch.tensor(float(batch), **f64))


@torch.no_grad()
def head_output_state(model: nn.Module, tokens: Tensor, per_example: bool = False, batch_size: int = 1024) -> PRState:
    """Sum-reduced PR statistics of the head outputs on ``tokens``, in chunks of ``batch_size``."""
    captured: list = []
    handles = projection_input_hooks(model, captured)
    was_training = model.training
    model.eval()
    state = None
    try:
        for start in range(0, len(tokens), batch_size):
            captured.clear()
            model(tokens[start:start + batch_size])
            new = head_output_pr_update(captured, per_example)
            state = new if state is None else PRState(*(a + b for a, b in zip(state, new)))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return state


def head_output_values(forwards: list[list], construction: str = "output_examples") -> Dict[str, Tensor]:
    """``{"pr_norm": (L,), "pr_norm_ratio": (L,)}`` from the projection inputs of one or more
    forwards (``[[(y, block), ...] per forward]``, :func:`projection_input_hooks`)."""
    centring = parse_pr_construction(construction)[1]
    states = [head_output_pr_update(captured, centring == "per_example") for captured in forwards]
    state = states[0] if len(states) == 1 else PRState(*(sum(parts) for parts in zip(*states)))
    return {"pr_norm": pr_compute(state, centring, "affine"), "pr_norm_ratio": pr_compute(state, centring, "ratio")}


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
    return {"pr_norm": pr_compute(state, centring, "affine"), "pr_norm_ratio": pr_compute(state, centring, "ratio")}
