"""MLP probe for the cross-architecture comparison (docs/decisions.md, "Cross-architecture probes").

Input scheme: the ``=`` token is the same in every example, so it carries no information; the
probe embeds only the operands ``a`` and ``b`` with one shared ``p``-row embedding (the
vocabulary without ``=``) and concatenates the two vectors. A position-free, order-aware input:
``concat(E[a], E[b])`` differs from ``concat(E[b], E[a])``, so non-commutative operations stay
learnable. The LSTM and Mamba probes embed the operands the same way; for those two the paper's
parameter counts are only reached with a ``p``-row embedding (see their docstrings).

The paper states only "4 layers, hidden 512". Our choices [D]: embedding 128 (as the LSTM and
Mamba probes), four hidden ``Linear`` layers of width 512 with biases and GELU (the transformer's
MLP activation), then a bias-free head 512 -> p (as the LSTM probe's). "4 layers" counts the
hidden layers, as "4 layers" counts blocks for the transformer and Mamba and does not count
their heads. For p = 97:
``97*128 + (256*512 + 512) + 3*(512*512 + 512) + 512*97 = 981,632`` parameters.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MLP"]

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class MLP(nn.Module):
    """``tokens (B, 3) [a, b, =]`` (or ``(B, 2) [a, b]``) -> ``logits (B, n_classes)``.

    Args:
        vocab_size: p + 1 (the ``=`` token is id p and is not embedded).
        n_classes: p.
        d_embed: width of the shared operand embedding (the input is 2 * d_embed wide).
        hidden: width of each hidden layer.
        n_layers: hidden layers (each ``Linear`` + activation).
        activation: ``gelu`` or ``relu``.

    >>> model = MLP(98, 97)
    >>> sum(p.numel() for p in model.parameters())
    981632
    >>> model(torch.zeros(2, 3, dtype=torch.long)).shape
    torch.Size([2, 97])
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_embed: int = 128,
        hidden: int = 512,
        n_layers: int = 4,
        activation: str = "gelu",
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: must be one of {', '.join(ACTIVATIONS)}")
        if n_layers < 1:
            raise ValueError(f"n_layers={n_layers}: must be >= 1")
        self.embedding = nn.Embedding(vocab_size - 1, d_embed)  # operands only, not "="
        layers: list[nn.Module] = []
        width = 2 * d_embed
        for _ in range(n_layers):
            layers += [nn.Linear(width, hidden), ACTIVATIONS[activation]()]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(hidden, n_classes, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pair = self.embedding(tokens[:, :2])  # (B, 2, d_embed)
        return self.head(self.body(pair.flatten(1)))
