"""Tian's two-layer network ``Y_hat = sigma(X W) V`` (no biases), as ported by Xu (2026).

Both layers are ``nn.Linear(bias=False)`` with PyTorch's default init, U(-1/sqrt(fan_in),
+1/sqrt(fan_in)), and W is constructed before V: calling ``torch.manual_seed(seed)`` and then
building the network draws the same initial weights as Xu's ``TianMLP`` (which also builds W
first). ``W.weight`` has shape ``(hidden, d_in)``: it is the flattened first layer whose updates
the spectral lock-in detector tracks (P = hidden * d_in = 290,816 at M = 71, K = 2048).

>>> import torch
>>> _ = torch.manual_seed(0)
>>> net = TwoLayerNet(6, d_out=3, hidden=4)
>>> x = torch.eye(6)[:2]
>>> net.features(x).shape, net(x).shape
(torch.Size([2, 4]), torch.Size([2, 3]))
>>> bool(torch.equal(net.features(x), (x @ net.W.weight.T) ** 2))
True
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from grok_lightning.config import require, require_choice


def _square(x: torch.Tensor) -> torch.Tensor:
    return x * x


#: "x2" is the activation Tian's theorems are proven for; the others are Xu's comparisons.
ACTIVATIONS = {"x2": _square, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}


def _gather_rows(weight: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """``W^T[first] + W^T[second]`` with one embedding_bag (2.2x faster than two strided gathers)."""
    return F.embedding_bag(torch.stack((first, second), dim=1), weight.t().contiguous(), mode="sum")


class _OneHotLinear(torch.autograd.Function):
    """``x @ W^T`` for a one-hot pair batch: gathered forward, the dense ``grad^T @ x`` backward."""

    @staticmethod
    def forward(ctx, x, first, second, weight):
        ctx.save_for_backward(x)
        return _gather_rows(weight, first, second)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # the product autograd forms for F.linear's weight: same op, same operands, same bits
        return None, None, None, grad.t().mm(x)


class TwoLayerNet(nn.Module):
    """``sigma(x W^T) V^T`` without biases.

    Args:
        d_in: input width (``2M`` for concatenated one-hot operands).
        d_out: number of outputs (``M`` classes). Keyword-only, like ``hidden``, so that the
            ``(d_in, hidden, d_out)`` reading order cannot silently swap widths.
        hidden: number of hidden units K (paper 2048).
        activation: ``x2`` (headline), ``relu``, ``gelu`` or ``silu``.
    """

    def __init__(self, d_in: int, *, d_out: int, hidden: int = 2048, activation: str = "x2") -> None:
        super().__init__()
        for name, value in (("d_in", d_in), ("d_out", d_out), ("hidden", hidden)):
            require(isinstance(value, int) and value >= 1, f"model.{name}", value, "must be an integer >= 1")
        require_choice("model.activation", activation, ACTIVATIONS)
        self.activation = activation
        self._sigma = ACTIVATIONS[activation]
        # order matters: W's draw comes first from the global RNG, as in Xu's TianMLP
        self.W = nn.Linear(d_in, hidden, bias=False)
        self.V = nn.Linear(hidden, d_out, bias=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden activations ``F = sigma(x W^T)``, shape ``(n, hidden)``."""
        return self._sigma(self.W(x))

    def features_one_hot(self, first: torch.Tensor, second: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """``features(x)`` for one-hot ``x`` with ones at columns ``first`` and ``second``.

        Forward: a two-row ``embedding_bag`` sum over a contiguous copy of W^T instead of an
        (n x d_in) x (d_in x hidden) product. Bit-identical to :meth:`features`: every other
        product in the dense dot product is an exact zero, so both compute the single rounding
        fl(W[:, first] + W[:, second]) (tested). When ``x`` (the dense one-hot batch) is given, the
        backward is the dense path's own ``grad^T @ x`` product, so training through this path
        follows the dense trajectory bit for bit (tested); without ``x`` it is evaluation only.
        """
        if x is None or not torch.is_grad_enabled():
            return self._sigma(_gather_rows(self.W.weight, first, second))
        return self._sigma(_OneHotLinear.apply(x, first, second, self.W.weight))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.V(self.features(x))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"
