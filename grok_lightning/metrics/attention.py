r"""torchmetrics wrappers of the attention-head diagnostics (arXiv 2605.20441, section 4).

All classes share one set of sum-reduced float64 states (per-layer Gram of the flattened
head patterns, per-head coordinate sums, per-head entropy sums, the per-coordinate sums over
examples and the counts that the PR constructions need), so
feeding an evaluation set in chunks gives the one-shot value up to float64 round-off, and
DDP (``dist_reduce_fx="sum"``) gives the single-process value. Formulas: see
:mod:`grok_lightning.metrics.functional`.

* :class:`AttentionStatistics` accumulates once; ``compute()`` returns a dict with all of
  ``mean_similarity, entropy_std, entropy_mean, entropy_range, spectral_gap, pr_norm,
  pr_norm_ratio`` (use this one in callbacks: one Gram, seven numbers).
* :class:`MeanSimilarity`, :class:`EntropyStd`, :class:`EntropyMean`,
  :class:`EntropyRange`, :class:`SpectralGap`, :class:`HeadParticipationRatio`
  return one scalar each.

Per-layer values: pass ``per_layer=True``; ``compute()`` then returns ``(L,)`` tensors
instead of the layer mean (the layer mean is exactly ``values.mean()``).

``pr_construction`` (every class) names the head covariance behind PR_norm: the default
``examples`` or one of the alternatives in :mod:`grok_lightning.metrics.participation`.
:class:`ParticipationRatio` takes any per-head features (e.g. head outputs) instead of attention.

``higher_is_better`` is ``None`` everywhere: these are order parameters of the training
dynamics, not scores. A high s_bar is the synchronised phase near grokking *and* the
collapse regime (s_bar = 1), so neither direction is "better".

States are lazily shaped by the first ``update`` unless ``num_layers`` and ``num_heads``
are given; give them under DDP so that a rank that saw no batch still has
correctly shaped states to reduce.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection

from grok_lightning.metrics.functional import (
    EPS,
    STAT_KEYS,
    Attentions,
    AttentionState,
    attention_state_update,
    attention_statistics_compute,
    check_attention_construction,
)
from grok_lightning.metrics.participation import (
    DEFAULT_PR_CONSTRUCTION,
    PRState,
    parse_pr_construction,
    pr_compute,
    pr_state_update,
)

__all__ = [
    "AttentionStatistics",
    "MeanSimilarity",
    "EntropyStd",
    "EntropyMean",
    "EntropyRange",
    "SpectralGap",
    "HeadParticipationRatio",
    "ParticipationRatio",
    "attention_metric_collection",
]


class _AttentionStateMetric(Metric):
    """Shared states and ``update`` for every attention diagnostic (not for direct use)."""

    is_differentiable = False
    higher_is_better: Optional[bool] = None
    full_state_update = False

    gram: Tensor
    head_sum: Tensor
    n_coords: Tensor
    entropy_sum: Tensor
    n_rows: Tensor
    coord_sum: Tensor
    coord_count: Tensor
    example_r_sum: Tensor
    n_examples: Tensor

    def __init__(
        self,
        per_layer: bool = False,
        num_layers: Optional[int] = None,
        num_heads: Optional[int] = None,
        eps: float = EPS,
        pr_construction: str = DEFAULT_PR_CONSTRUCTION,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (num_layers is None) != (num_heads is None):
            raise ValueError("give both num_layers and num_heads, or neither")
        check_attention_construction(pr_construction)
        self.per_layer = per_layer
        self.eps = eps
        self.pr_construction = pr_construction
        f64 = torch.float64
        if num_layers is None:  # lazily broadcast to (L, H, H) / (L, H) by the first update
            gram, per_head = torch.zeros((), dtype=f64), torch.zeros((), dtype=f64)
        else:
            gram = torch.zeros(num_layers, num_heads, num_heads, dtype=f64)
            per_head = torch.zeros(num_layers, num_heads, dtype=f64)
        self.add_state("gram", default=gram, dist_reduce_fx="sum")
        self.add_state("head_sum", default=per_head.clone(), dist_reduce_fx="sum")
        self.add_state("entropy_sum", default=per_head.clone(), dist_reduce_fx="sum")
        self.add_state("n_coords", default=torch.zeros((), dtype=f64), dist_reduce_fx="sum")
        self.add_state("n_rows", default=torch.zeros((), dtype=f64), dist_reduce_fx="sum")
        # the PR constructions' sums; the coordinate axis (T*T) is shaped by the first update
        self.add_state("coord_sum", default=torch.zeros((), dtype=f64), dist_reduce_fx="sum")
        self.add_state("coord_count", default=torch.zeros((), dtype=f64), dist_reduce_fx="sum")
        self.add_state("example_r_sum", default=torch.zeros(() if num_layers is None else (num_layers,), dtype=f64),
                       dist_reduce_fx="sum")
        self.add_state("n_examples", default=torch.zeros((), dtype=f64), dist_reduce_fx="sum")

    def update(self, attentions: Attentions) -> None:  # type: ignore[override]
        """Add a chunk: list over layers of ``(B, H, T, T)`` or a stacked ``(L, B, H, T, T)``."""
        per_example = parse_pr_construction(self.pr_construction)[1] == "per_example"
        new = attention_state_update(attentions, self.eps, per_example=per_example)
        if self.gram.dim() and self.gram.shape != new.gram.shape:
            raise ValueError(
                f"(layers, heads) changed between updates: {tuple(self.gram.shape[:2])} "
                f"accumulated, got {tuple(new.gram.shape[:2])}"
            )
        if self.coord_count.dim() and self.coord_count.shape != new.coord_count.shape:
            raise ValueError(f"attention shape (T_q * T_k = {new.coord_count.numel()}) changed between updates: "
                             f"{self.coord_count.numel()} accumulated")
        self.gram = self.gram + new.gram
        self.head_sum = self.head_sum + new.head_sum
        self.entropy_sum = self.entropy_sum + new.entropy_sum
        self.n_coords = self.n_coords + new.n_coords
        self.n_rows = self.n_rows + new.n_rows
        self.coord_sum = self.coord_sum + new.coord_sum
        self.coord_count = self.coord_count + new.coord_count
        self.example_r_sum = self.example_r_sum + new.example_r_sum
        self.n_examples = self.n_examples + new.n_examples

    def _state(self) -> AttentionState:
        return AttentionState(self.gram, self.head_sum, self.n_coords, self.entropy_sum, self.n_rows,
                              self.coord_sum, self.coord_count, self.example_r_sum, self.n_examples)

    def _compute_keys(self, *keys: str) -> Dict[str, Tensor]:
        return attention_statistics_compute(self._state(), self.eps, keys or None, self.per_layer,
                                             self.pr_construction)


class AttentionStatistics(_AttentionStateMetric):
    r"""All attention-head diagnostics from one accumulation.

    Args:
        per_layer: if True, ``compute()`` values are ``(L,)`` tensors, else layer means.
        num_layers, num_heads: pre-shape the states (recommended under DDP).
        eps: the published ``1e-12`` used in ``x / (||x|| + eps)`` and ``log(a + eps)``.
        kwargs: forwarded to :class:`torchmetrics.Metric`.

    ``update(attentions)``: list over layers of ``(B, H, T, T)`` probabilities or a stacked
    ``(L, B, H, T, T)`` tensor. ``compute()`` returns ``Dict[str, Tensor]`` with keys
    ``mean_similarity`` (s_bar), ``entropy_std`` (sigma_H), ``entropy_mean``,
    ``entropy_range``, ``spectral_gap``, ``pr_norm`` ((R-1)/(H-1)), ``pr_norm_ratio`` (R/H).

    Example:
        >>> import torch
        >>> logits = torch.linspace(-2, 2, 2 * 4 * 3 * 3).reshape(2, 4, 3, 3)  # (B, H, T, T)
        >>> causal = torch.ones(3, 3, dtype=torch.bool).triu(1)
        >>> attn = logits.masked_fill(causal, float("-inf")).softmax(-1)
        >>> layers = [attn, attn.flip(1)]  # two layers (the second with heads reversed)
        >>> metric = AttentionStatistics()
        >>> metric.update([x[:1] for x in layers])  # the evaluation set in two chunks
        >>> metric.update([x[1:] for x in layers])
        >>> out = metric.compute()
        >>> sorted(out)
        ['entropy_mean', 'entropy_range', 'entropy_std', 'mean_similarity', 'pr_norm', 'pr_norm_ratio', 'spectral_gap']
        >>> from grok_lightning.metrics.functional import attention_statistics
        >>> torch.allclose(out["entropy_std"], attention_statistics(layers)["entropy_std"])
        True
        >>> 0.9 < out["mean_similarity"].item() <= 1.0
        True
    """

    def compute(self) -> Dict[str, Tensor]:  # type: ignore[override]
        """Dict of scalar tensors (or ``(L,)`` tensors with ``per_layer=True``)."""
        return self._compute_keys()


class _SingleAttentionStatistic(_AttentionStateMetric):
    """One value of :class:`AttentionStatistics`; ``compute()`` returns a tensor."""

    _key: str = ""

    def compute(self) -> Tensor:  # type: ignore[override]
        """Scalar layer mean, or ``(L,)`` per-layer values with ``per_layer=True``."""
        return self._compute_keys(self._key)[self._key]

    def plot(self, val: Any = None, ax: Any = None) -> Any:
        """Plot a single or multiple values (torchmetrics' standard plot; needs matplotlib)."""
        return self._plot(val, ax)


class MeanSimilarity(_SingleAttentionStatistic):
    r"""s_bar: mean pairwise cosine between heads' flattened attention patterns.

    .. math:: \bar s = \frac{1}{L}\sum_l \frac{1}{H(H-1)}\sum_{i\ne j}
              \frac{\langle x_{li}, x_{lj}\rangle}{(\|x_{li}\|+\epsilon)(\|x_{lj}\|+\epsilon)}

    with ``x_lh`` head ``h``'s ``(B, T, T)`` pattern flattened over the whole evaluation set.
    In ``[0, 1]`` for attention probabilities; ``1`` means all heads attend identically (the
    collapse signature). ``higher_is_better = None``: it is an order parameter, high both in
    the healthy synchronised phase and in collapse.

    Example:
        >>> import torch
        >>> a = torch.full((5, 8, 3, 3), 1 / 3)  # 8 identical heads
        >>> metric = MeanSimilarity()
        >>> metric.update([a, a])
        >>> round(metric.compute().item(), 6)
        1.0
    """

    _key = "mean_similarity"
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0


class EntropyStd(_SingleAttentionStatistic):
    r"""sigma_H: population std (ddof 0) over heads of the mean row entropy, layer-averaged.

    Row entropy ``-sum_k a_k log(a_k + 1e-12)`` in nats over the key axis, averaged over the
    batch and all query rows to one entropy per head. ``0`` when all heads are identical.

    Example:
        >>> import torch
        >>> sharp = torch.eye(3).expand(2, 1, 3, 3)  # one-hot rows: entropy 0
        >>> flat = torch.full((2, 1, 3, 3), 1 / 3)  # uniform rows: entropy log 3
        >>> metric = EntropyStd()
        >>> metric.update(torch.cat([sharp, flat], dim=1).unsqueeze(0))  # (L=1, B, H=2, T, T)
        >>> round(metric.compute().item(), 4)  # log(3) / 2
        0.5493
    """

    _key = "entropy_std"
    plot_lower_bound = 0.0


class EntropyMean(_SingleAttentionStatistic):
    r"""Mean over heads of the per-head mean row entropy (nats), layer-averaged.

    Example:
        >>> import torch
        >>> metric = EntropyMean()
        >>> metric.update([torch.full((2, 4, 3, 3), 1 / 3)])
        >>> round(metric.compute().item(), 4)  # log 3
        1.0986
    """

    _key = "entropy_mean"
    plot_lower_bound = 0.0


class EntropyRange(_SingleAttentionStatistic):
    r"""Max minus min over heads of the per-head mean row entropy (nats), layer-averaged.

    Example:
        >>> import torch
        >>> sharp, flat = torch.eye(3).expand(2, 1, 3, 3), torch.full((2, 1, 3, 3), 1 / 3)
        >>> metric = EntropyRange()
        >>> metric.update([torch.cat([sharp, flat], dim=1)])
        >>> round(metric.compute().item(), 4)
        1.0986
    """

    _key = "entropy_range"
    plot_lower_bound = 0.0


class SpectralGap(_SingleAttentionStatistic):
    r"""lambda_1 - lambda_2 of the H x H head cosine matrix (``eigvalsh``), layer-averaged.

    Equals ``H`` when all heads are identical (a rank-one all-ones matrix).

    Example:
        >>> import torch
        >>> metric = SpectralGap()
        >>> metric.update([torch.full((2, 4, 3, 3), 1 / 3)])
        >>> round(metric.compute().item(), 6)
        4.0
    """

    _key = "spectral_gap"
    plot_lower_bound = 0.0


class HeadParticipationRatio(_SingleAttentionStatistic):
    r"""Normalised participation ratio of the head-pattern covariance eigenvalues.

    Covariance of the ``H`` head patterns under ``pr_construction`` (default ``examples``:
    ``Cov = (G - sum_c s_c s_c^T / n_c) / N``, each head's pattern minus its own mean over the
    evaluation examples at every ``(q, k)``; the others in
    :mod:`grok_lightning.metrics.participation`), eigenvalues ``a_k >= 0``,
    ``R = (sum a)^2 / sum a^2``.

    Args:
        normalization: ``"affine"`` -> ``(R - 1)/(H - 1)``, in ``[0, 1]`` (paper text, Eq. 3,
            and Table 3); ``"ratio"`` -> ``R / H``, in ``[1/H, 1]`` (the paper's Lean file and
            the ``1/H`` floor drawn in its Fig. 6).
        kwargs: as :class:`AttentionStatistics` (``pr_construction`` among them).

    Example:
        >>> import torch
        >>> varied = torch.rand(4, 1, 3, 3, generator=torch.Generator().manual_seed(0)).softmax(-1)
        >>> fixed = torch.full((4, 1, 3, 3), 1 / 3)  # the same pattern on every example
        >>> metric = HeadParticipationRatio(normalization="ratio")
        >>> metric.update([torch.cat([varied, fixed], dim=1)])  # only head 0 varies: rank 1
        >>> round(metric.compute().item(), 6)  # 1 / H
        0.5
    """

    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(self, normalization: str = "affine", **kwargs: Any) -> None:
        if normalization not in ("affine", "ratio"):
            raise ValueError(f"normalization must be 'affine' or 'ratio', got {normalization!r}")
        super().__init__(**kwargs)
        self.normalization = normalization
        self._key = "pr_norm" if normalization == "affine" else "pr_norm_ratio"


class ParticipationRatio(Metric):
    r"""PR_norm of any per-head features (head outputs, for instance) under a named construction.

    ``update(features)``: a list over layers of ``(B, H, *coords)`` tensors or one stacked
    ``(L, B, H, *coords)`` (a single 4-D tensor is one layer). States: the sum-reduced
    :class:`~grok_lightning.metrics.participation.PRState` (Gram ``(L, H, H)``, per-coordinate
    sums ``(L, H, C)`` and counts ``(C,)``, per-example ``R`` sums ``(L,)``, examples), so chunks
    and DDP ranks add up to the one-shot value.

    Args:
        construction: one of ``examples, heads, coordinates, uncentred, per_example``; an
            ``output_`` prefix is accepted and ignored (it only says what the features are).
        normalization: ``"affine"`` ``(R - 1)/(H - 1)`` or ``"ratio"`` ``R / H``.
        per_layer: ``compute()`` returns ``(L,)`` values instead of their mean.

    Example:
        >>> import torch
        >>> outputs = torch.randn(6, 4, 3, 16, generator=torch.Generator().manual_seed(0))  # (B, H, T, d)
        >>> metric = ParticipationRatio("output_examples")
        >>> metric.update([outputs[:2]]); metric.update([outputs[2:]])
        >>> from grok_lightning.metrics.participation import head_participation
        >>> torch.allclose(metric.compute(), head_participation([outputs], "examples"))
        True
    """

    is_differentiable = False
    higher_is_better: Optional[bool] = None
    full_state_update = False
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(self, construction: str = DEFAULT_PR_CONSTRUCTION, normalization: str = "affine",
                 per_layer: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.centring = parse_pr_construction(construction)[1]
        if normalization not in ("affine", "ratio"):
            raise ValueError(f"normalization must be 'affine' or 'ratio', got {normalization!r}")
        self.normalization, self.per_layer = normalization, per_layer
        for name in PRState._fields:  # lazily shaped by the first update
            self.add_state(name, default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, features: Any) -> None:  # type: ignore[override]
        new = pr_state_update(features, self.centring == "per_example")
        for name in PRState._fields:
            old = getattr(self, name)
            if old.dim() and old.shape != getattr(new, name).shape:
                raise ValueError(f"feature shape changed between updates ({name}: {tuple(old.shape)} accumulated, "
                                 f"got {tuple(getattr(new, name).shape)})")
            setattr(self, name, old + getattr(new, name))

    def compute(self) -> Tensor:  # type: ignore[override]
        if not self.gram.dim():
            raise RuntimeError("no features have been accumulated yet")
        state = PRState(*(getattr(self, name) for name in PRState._fields))
        values = pr_compute(state, self.centring, self.normalization)
        return values if self.per_layer else values.mean()


def attention_metric_collection(
    prefix: Optional[str] = None, postfix: Optional[str] = None, **kwargs: Any
) -> MetricCollection:
    """A :class:`~torchmetrics.MetricCollection` of all single-value diagnostics.

    Keyed by the record names ``mean_similarity, entropy_std, entropy_mean, entropy_range,
    spectral_gap, pr_norm, pr_norm_ratio``; ``kwargs`` go to every metric. The collection's
    compute groups share one copy of the states, so ``update`` builds the Gram once.

    Example:
        >>> import torch
        >>> coll = attention_metric_collection(prefix="val/")
        >>> coll.update([torch.full((2, 4, 3, 3), 1 / 3)])
        >>> sorted(coll.compute())[:3]
        ['val/entropy_mean', 'val/entropy_range', 'val/entropy_std']
    """
    metrics = {
        "mean_similarity": MeanSimilarity(**kwargs),
        "entropy_std": EntropyStd(**kwargs),
        "entropy_mean": EntropyMean(**kwargs),
        "entropy_range": EntropyRange(**kwargs),
        "spectral_gap": SpectralGap(**kwargs),
        "pr_norm": HeadParticipationRatio(normalization="affine", **kwargs),
        "pr_norm_ratio": HeadParticipationRatio(normalization="ratio", **kwargs),
    }
    assert tuple(metrics) == STAT_KEYS
    return MetricCollection(metrics, prefix=prefix, postfix=postfix)
