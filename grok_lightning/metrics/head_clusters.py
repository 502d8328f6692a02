r"""Head-role clusters (arXiv 2605.20441, section 5): single-linkage clusters of the heads' output vectors.

A head's **output vector** is its write into the residual stream, ``o_h = y_h W_h^T``
(:mod:`grok_lightning.metrics.head_outputs`), on a fixed probe set, flattened: one vector of
length ``B T' D`` per head (``B`` probe examples, ``T'`` positions kept, ``D = d_model``). All
``N = L H`` heads of the model are pooled (the paper clusters "32 heads per model", 4L x 8H), which
their common residual-stream basis allows.

Shapes and formulas (float64 throughout):

* input of an update: the head outputs of one chunk, a list over layers of ``(B, H, T, D)`` (what
  :func:`~grok_lightning.metrics.head_outputs.head_outputs` returns) or one ``(L, B, H, T, D)``;
* state: the ``(N, N)`` Gram ``G[i, j] = sum_b sum_t <o_i[b, t], o_j[b, t]>`` (head ``i = l H + h``),
  a sum over examples, so chunks and DDP ranks add;
* cosine distance ``d_ij = 1 - G_ij / sqrt(G_ii G_jj)``, clipped to ``[0, 2]`` (round-off);
* clusters: :func:`scipy.cluster.hierarchy.linkage` with ``method="single"`` on the condensed
  ``d``, cut by :func:`~scipy.cluster.hierarchy.fcluster` with ``criterion="distance"`` at
  ``t = threshold`` (0.5, the paper's): two heads share a cluster when a chain of heads joins them
  with every step at distance ``<= threshold``. The count is the number of clusters.

Degenerate cases: a head with ``G_ii = 0`` (no output on the probe set: its cosine is undefined)
is a cluster of its own; with fewer than 2 heads the count is the number of heads (0 before any
update).

``vectors``: ``"examples"`` (the default) flattens a head's outputs over the probe examples, as
above; ``"mean"`` takes one vector per head, its output summed (so averaged, up to a scale the
cosine ignores) over the examples, ``S[i] = sum_b o_i[b]`` of length ``T' D``, and ``G = S S^T``.
The summed vectors, not their Gram, add over chunks.

``positions``: which sequence positions a head's vector holds. ``"answer"`` (the default) keeps the
last position, where the logits are read: a head's role is what it writes there for the answer.
``"all"`` keeps every position (``T = 3`` for ``a b =``); under the causal mask position 0 attends
only to itself, so every head there writes a function of the first operand alone, which the
answer position does not share (docs/decisions.md, "Head-role clusters").
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from torch import Tensor, nn
from torchmetrics import Metric

from grok_lightning.metrics.head_outputs import head_outputs, projection_input_hooks

__all__ = ["HEAD_CLUSTER_POSITIONS", "HEAD_CLUSTER_THRESHOLD", "HEAD_CLUSTER_VECTORS", "HeadClusterCount", "head_cluster_count",
           "head_cluster_labels", "head_cosine_distance", "head_output_gram", "head_output_gram_update", "head_output_grams",
           "head_output_sum_update"]

HeadOutputs = Union[Tensor, Sequence[Tensor]]

#: the paper's cut: cosine distance 0.5 (section 5)
HEAD_CLUSTER_THRESHOLD = 0.5
#: which positions a head's output vector holds (module docstring); the first is the default
HEAD_CLUSTER_POSITIONS = ("answer", "all")
#: what one head's vector is made of (module docstring); the first is the default
HEAD_CLUSTER_VECTORS = ("examples", "mean")


def _check_positions(positions: str) -> str:
    if positions not in HEAD_CLUSTER_POSITIONS:
        raise ValueError(f"positions={positions!r}: one of {HEAD_CLUSTER_POSITIONS}")
    return positions


def _check_threshold(threshold: float) -> float:
    if not (isinstance(threshold, (int, float)) and np.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold={threshold!r}: a cosine distance >= 0")
    return float(threshold)


def head_output_gram_update(outputs: HeadOutputs, positions: str = "answer") -> Tensor:
    """The ``(N, N)`` float64 Gram of one chunk's head outputs, heads of all layers pooled in layer order.

    >>> o = torch.zeros(1, 2, 3, 2, 4)                        # L=1, B=2, H=3, T=2, D=4
    >>> o[0, :, 0, -1, 0], o[0, :, 1, -1, 0], o[0, :, 2, 0, 1] = 1.0, 2.0, 5.0
    >>> head_output_gram_update(o)                            # head 2 writes only at position 0
    tensor([[2., 4., 0.],
            [4., 8., 0.],
            [0., 0., 0.]], dtype=torch.float64)
    >>> head_output_gram_update(o, "all")[2, 2].item()
    50.0
    """
    pooled = _pooled(outputs, positions)
    flat = pooled.transpose(0, 1).reshape(pooled.shape[1], -1)  # (N, B T' D)
    return flat @ flat.T


def head_output_sum_update(outputs: HeadOutputs, positions: str = "answer") -> Tensor:
    """The ``(N, T' D)`` float64 sums over one chunk's examples of each head's outputs (the ``mean``
    vectors' state; heads of all layers pooled in layer order).

    >>> o = torch.zeros(1, 2, 2, 1, 3)                        # L=1, B=2, H=2, T=1, D=3
    >>> o[0, 0, 0, 0, 0], o[0, 1, 0, 0, 1], o[0, :, 1, 0, 2] = 1.0, 3.0, 2.0
    >>> head_output_sum_update(o)
    tensor([[1., 3., 0.],
            [0., 0., 4.]], dtype=torch.float64)
    """
    pooled = _pooled(outputs, positions)
    return pooled.sum(0).reshape(pooled.shape[1], -1)


def _pooled(outputs: HeadOutputs, positions: str) -> Tensor:
    """``(B, N, T', D)`` float64: the layers' heads side by side, the kept positions only."""
    _check_positions(positions)
    layers = list(outputs.unbind(0)) if isinstance(outputs, Tensor) and outputs.dim() == 5 else list(outputs)
    if not layers or any(o.dim() != 4 for o in layers):
        raise ValueError("head outputs: a list over layers of (B, H, T, D) tensors or one (L, B, H, T, D) tensor")
    pooled = torch.cat([o.to(torch.float64) for o in layers], dim=1)  # (B, N, T, D)
    return pooled[:, :, -1:] if positions == "answer" else pooled


def head_cosine_distance(gram: Tensor) -> Tensor:
    """``(N, N)`` cosine distances ``1 - G_ij / sqrt(G_ii G_jj)`` in ``[0, 2]``, zero diagonal; NaN in
    the rows and columns of heads with ``G_ii = 0`` (undefined)."""
    g = _square(gram)
    norms = torch.sqrt(torch.clamp(torch.diagonal(g), min=0.0))
    cosine = g / torch.outer(norms, norms)  # 0/0 = NaN for a silent head (G_ii = 0 makes its row 0)
    distance = (1.0 - cosine).clamp(0.0, 2.0)
    distance = (distance + distance.T) / 2
    distance.fill_diagonal_(0.0)
    silent = norms == 0
    distance[silent, :] = float("nan")
    distance[:, silent] = float("nan")
    return distance


def head_cluster_labels(gram: Tensor, threshold: float = HEAD_CLUSTER_THRESHOLD) -> np.ndarray:
    """``(N,)`` cluster labels ``1..k`` (module docstring); a silent head (``G_ii = 0``) gets its own.

    >>> g = torch.tensor([[1.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    >>> head_cluster_labels(g).tolist()                    # heads 0 and 1 at distance 0.1, head 2 at 1
    [1, 1, 2]
    """
    threshold = _check_threshold(threshold)
    g = _square(gram)
    distance = head_cosine_distance(g).cpu().numpy()
    n = distance.shape[0]
    labels = np.zeros(n, dtype=np.int64)
    alive = np.flatnonzero(torch.diagonal(g).cpu().numpy() > 0)
    if alive.size >= 2:
        tree = linkage(squareform(distance[np.ix_(alive, alive)], checks=False), method="single")
        labels[alive] = fcluster(tree, t=threshold, criterion="distance")
    elif alive.size == 1:
        labels[alive] = 1
    silent = np.setdiff1d(np.arange(n), alive)
    labels[silent] = labels.max(initial=0) + 1 + np.arange(silent.size)
    return labels


def head_cluster_count(gram: Tensor, threshold: float = HEAD_CLUSTER_THRESHOLD) -> int:
    """The number of head-role clusters of the Gram ``gram`` at cosine distance ``threshold``.

    >>> g = torch.eye(4, dtype=torch.float64)               # four orthogonal heads
    >>> head_cluster_count(g), head_cluster_count(g, threshold=1.0), head_cluster_count(torch.zeros(0, 0))
    (4, 1, 0)
    """
    return int(np.unique(head_cluster_labels(gram, threshold)).size)


@torch.no_grad()
def head_output_gram(model: nn.Module, tokens: Tensor, positions: str = "answer", batch_size: int = 1024,
                     vectors: str = "examples") -> Tensor:
    """The ``(N, N)`` Gram of ``model``'s head output vectors (``vectors``: module docstring) on the probe
    ``tokens``, in chunks of ``batch_size`` (eval mode for the pass; the model's mode is restored)."""
    return head_output_grams(model, tokens, [(positions, vectors)], batch_size)[(positions, vectors)]


@torch.no_grad()
def head_output_grams(model: nn.Module, tokens: Tensor, readings: Sequence[tuple[str, str]],
                      batch_size: int = 1024) -> dict[tuple[str, str], Tensor]:
    """``{(positions, vectors): (N, N) Gram}`` for each reading, from one forward pass over the probe
    ``tokens`` (the readings share the captured head outputs), in chunks of ``batch_size``."""
    readings = list(dict.fromkeys(readings))
    for positions, vectors in readings:
        _check_positions(positions)
        if vectors not in HEAD_CLUSTER_VECTORS:
            raise ValueError(f"vectors={vectors!r}: one of {HEAD_CLUSTER_VECTORS}")
    captured: list = []
    handles = projection_input_hooks(model, captured)
    was_training = model.training
    model.eval()
    states: dict = {}  # per reading: the Gram, or the summed vectors (vectors="mean")
    try:
        for start in range(0, len(tokens), batch_size):
            captured.clear()
            model(tokens[start:start + batch_size])
            outputs = head_outputs(captured)
            for positions, vectors in readings:
                update = head_output_gram_update if vectors == "examples" else head_output_sum_update
                new = update(outputs, positions)
                key = (positions, vectors)
                states[key] = new if key not in states else states[key] + new
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    if not states:
        raise ValueError("head_output_gram: no probe tokens")
    return {key: state if key[1] == "examples" else state @ state.T for key, state in states.items()}


def _square(gram: Tensor) -> Tensor:
    g = torch.as_tensor(gram, dtype=torch.float64)
    if g.dim() == 0 and g.item() == 0:  # a lazily shaped state before any update: no heads
        return g.new_zeros(0, 0)
    if g.dim() != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"gram: a square (N, N) matrix, got shape {tuple(g.shape)}")
    return g


class HeadClusterCount(Metric):
    """The number of head-role clusters (module docstring), accumulated over chunks of probe examples.

    ``update(outputs)`` adds a chunk's head outputs (a list over layers of ``(B, H, T, D)`` or one
    ``(L, B, H, T, D)``); the state is the ``(N, N)`` float64 Gram, sum-reduced, so feeding the probe
    set in chunks, or over DDP ranks, gives the one-shot count. ``compute()`` returns the count as a
    0-dim int64 tensor. ``num_heads`` (``L H``) shapes the state up front (give it under DDP, so a
    rank that saw no chunk still reduces a correctly shaped state); otherwise the first update does.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> outputs = torch.randn(2, 16, 4, 3, 8)          # L=2, B=16, H=4, T=3, D=8: 8 heads
        >>> outputs[1, :, 3] = 2 * outputs[0, :, 1]          # layer 1's head 3 writes what layer 0's head 1 does
        >>> metric = HeadClusterCount()
        >>> metric.update(outputs[:, :10]); metric.update(outputs[:, 10:])
        >>> int(metric.compute())
        7
    """

    is_differentiable = False
    higher_is_better: Optional[bool] = None
    full_state_update = False

    gram: Tensor

    def __init__(self, threshold: float = HEAD_CLUSTER_THRESHOLD, positions: str = "answer",
                 num_heads: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threshold = _check_threshold(threshold)
        self.positions = _check_positions(positions)
        shape = () if num_heads is None else (num_heads, num_heads)
        self.add_state("gram", default=torch.zeros(shape, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, outputs: HeadOutputs) -> None:  # type: ignore[override]
        new = head_output_gram_update(outputs, self.positions).to(self.gram.device)
        if self.gram.dim() and self.gram.shape != new.shape:
            raise ValueError(f"heads changed between updates: {self.gram.shape[0]} accumulated, got {new.shape[0]}")
        self.gram = self.gram + new

    def compute(self) -> Tensor:
        return torch.tensor(head_cluster_count(self.gram, self.threshold), dtype=torch.int64)
