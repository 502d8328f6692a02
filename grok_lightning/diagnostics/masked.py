r"""Attention statistics restricted to valid (non-padding) tokens.

Same sufficient statistics and the same compute step as
:mod:`grok_lightning.metrics.functional`, with one extra input: ``mask``, a ``(B, T)`` tensor
that is true (or non-zero) at real tokens, as Hugging Face's ``attention_mask``.

The padding rule. Per layer, head ``h``'s pattern ``x_h`` is the vector of ``a[b, h, q, k]``
over every sequence ``b`` and every pair with **both** ``q`` and ``k`` valid, so ``N = sum_b
n_b^2`` coordinates for sequences of ``n_b`` real tokens (``B T^2`` without padding). Padded
query rows are dropped whole; padded key columns of valid rows are dropped without
renormalising the row (a model that masks its padding gives them probability 0 already, so
nothing is lost; one that does not has its leak left visible rather than hidden). Row
entropies ``-sum_k a log(a + 1e-12)`` run over valid keys and are averaged over the ``sum_b
n_b`` valid rows. For PR_norm's ``examples`` construction a coordinate ``(q, k)`` is centred by
its mean over the sequences in which it is valid; ``per_example`` centres each sequence over
its own valid coordinates.

Implementation: invalid entries are set to 0 (``torch.where``, so the NaN rows that some models
produce for fully padded queries vanish too), which leaves every sum of the unmasked kernel
exact (Gram, head and coordinate sums, entropy sums); only the counts change: valid
coordinates, valid rows, and per coordinate the sequences in which it is valid. Without a mask
the kernel is the unmasked one, unchanged.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import torch
from torch import Tensor
from torch.nn import functional as F

from grok_lightning.metrics.attention import AttentionStatistics
from grok_lightning.metrics.functional import (
    EPS,
    Attentions,
    AttentionState,
    as_layer_tensor,
    attention_state_update,
    attention_statistics_compute,
)
from grok_lightning.metrics.participation import (
    DEFAULT_PR_CONSTRUCTION,
    parse_pr_construction,
    participation_ratio,
    symmetric_eigenvalues,
)

__all__ = ["MaskedAttentionStatistics", "masked_attention_statistics"]


def _masked_attention_state_update(
    attentions: Attentions, mask: Optional[Tensor] = None, eps: float = EPS, per_example: bool = False
) -> AttentionState:
    """Sufficient statistics of one chunk, counting only valid query rows and keys."""
    if mask is None:
        return attention_state_update(attentions, eps, per_example=per_example)
    a = as_layer_tensor(attentions)  # (L, B, H, T, T) float64
    n_layers, batch, n_heads, t_q, t_k = a.shape
    valid = mask.to(device=a.device).bool()
    if valid.shape != (batch, t_q) or t_q != t_k:
        raise ValueError(f"mask must be (B, T) = {(batch, t_q)} for square (B, H, T, T) attention, got {tuple(valid.shape)}")
    pair = valid[:, :, None] & valid[:, None, :]  # (B, T, T): query and key both valid
    a = torch.where(pair[None, :, None], a, torch.zeros((), dtype=a.dtype, device=a.device))
    # checked (finite, non-negative) after masking: a fully padded row may be NaN, and is dropped
    state = attention_state_update(a, eps)  # sums over zeros are the sums over valid entries
    f64 = dict(dtype=torch.float64, device=a.device)
    counts = dict(
        n_coords=pair.sum().to(**f64),
        n_rows=valid.sum().to(**f64),
        coord_count=pair.flatten(1).sum(0).to(**f64),  # (T*T,): sequences in which (q, k) is valid
    )
    if per_example:  # each sequence's pattern centred over its own valid coordinates
        x, keep = a.flatten(3), pair.flatten(1)[None, :, None]  # (L, B, H, C), (1, B, 1, C)
        n_b = keep.sum(-1, keepdim=True).clamp_min(1)
        centred = torch.where(keep, x - x.sum(-1, keepdim=True) / n_b, torch.zeros((), **f64))
        cov = centred @ centred.transpose(-2, -1) / n_b  # (L, B, H, H)
        has_tokens = valid.any(-1)  # a sequence of padding alone is not an example
        counts["example_r_sum"] = participation_ratio(symmetric_eigenvalues(cov))[:, has_tokens].sum(-1)
        counts["n_examples"] = has_tokens.sum().to(**f64)
    return state._replace(**counts)


def _per_example(construction: str) -> bool:
    return parse_pr_construction(construction)[1] == "per_example"


def masked_attention_statistics(
    attentions: Attentions,
    mask: Optional[Tensor] = None,
    per_layer: bool = False,
    eps: float = EPS,
    pr_construction: str = DEFAULT_PR_CONSTRUCTION,
) -> Dict[str, Tensor]:
    """All attention diagnostics over valid tokens only (see the module docstring for the rule).

    Args:
        attentions: list over layers of ``(B, H, T, T)`` probabilities, or ``(L, B, H, T, T)``.
        mask: ``(B, T)``, true/non-zero at real tokens; ``None`` = every token is valid.
        per_layer: ``(L,)`` tensors instead of layer means.
        pr_construction: the head covariance behind ``pr_norm`` (see
            :mod:`grok_lightning.metrics.participation`).

    Returns the dict of :data:`~grok_lightning.metrics.functional.STAT_KEYS`.

    Example:
        >>> import torch
        >>> a = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])  # T = 3
        >>> heads = torch.stack([a, torch.eye(3)]).unsqueeze(0)  # (B=1, H=2, T, T)
        >>> padded = masked_attention_statistics([heads], torch.tensor([[1, 1, 0]]))
        >>> trimmed = masked_attention_statistics([heads[..., :2, :2]])  # the padding cut off
        >>> all(torch.allclose(padded[k], trimmed[k]) for k in ("mean_similarity", "entropy_std", "spectral_gap"))
        True
    """
    state = _masked_attention_state_update(attentions, mask, eps, _per_example(pr_construction))
    return attention_statistics_compute(state, eps, None, per_layer, pr_construction)


class MaskedAttentionStatistics(AttentionStatistics):
    r""":class:`~grok_lightning.metrics.AttentionStatistics` whose ``update`` takes a padding mask.

    ``update(attentions, mask=None)``: ``attentions`` as for the parent (list over layers of
    ``(B, H, T, T)`` or ``(L, B, H, T, T)``), ``mask`` ``(B, T)`` true at real tokens. The states
    are the parent's sum-reduced float64 states (Gram ``(L, H, H)``, head and entropy sums
    ``(L, H)``, coordinate sums ``(L, H, T*T)`` and the counts), so chunks add up exactly and
    ``compute()`` returns the same dict of s_bar (``mean_similarity``), sigma_H
    (``entropy_std``), ``spectral_gap``, ``pr_norm`` and the rest. Chunks may differ in ``T``
    (dynamic padding): the per-``(q, k)`` coordinate sums grow to the longest ``T`` seen, and a
    shorter chunk counts as padded to it, which adds exactly nothing.

    Example:
        >>> import torch
        >>> a = torch.rand(4, 2, 5, 5).softmax(-1)  # (B, H, T, T)
        >>> mask = torch.tensor([[1] * 5, [1] * 3 + [0] * 2, [1] * 4 + [0], [1] * 5])
        >>> metric = MaskedAttentionStatistics()
        >>> metric.update([a[:2]], mask[:2])
        >>> metric.update([a[2:]], mask[2:])
        >>> chunked, whole = metric.compute(), masked_attention_statistics([a], mask)
        >>> all(torch.allclose(chunked[k], whole[k]) for k in whole)
        True
    """

    def update(self, attentions: Attentions, mask: Optional[Tensor] = None) -> None:  # type: ignore[override]
        attentions, mask = self._common_length(attentions, mask)
        new = _masked_attention_state_update(attentions, mask, self.eps, _per_example(self.pr_construction))
        for name in new._fields:  # every state is the sum of its chunks
            old, add = getattr(self, name), getattr(new, name)
            if old.dim() and old.shape != add.shape:
                raise ValueError(f"state {name!r} changed shape between updates: {tuple(old.shape)} accumulated, "
                                 f"got {tuple(add.shape)} (layers, heads or T differ)")
            setattr(self, name, old + add)

    def _common_length(self, attentions: Attentions, mask: Optional[Tensor]):
        """Bring a chunk and the accumulated coordinate states to one ``T`` (the longer)."""
        if not self.coord_count.dim():  # nothing accumulated yet
            return attentions, mask
        a = as_layer_tensor(attentions)
        t, t_seen = a.shape[-1], math.isqrt(self.coord_count.numel())
        if a.shape[-2] != t or t == t_seen:
            return attentions, mask
        if t > t_seen:  # grow the states: coordinate (q, k) keeps its meaning, new ones start at 0
            grow = (0, t - t_seen, 0, t - t_seen)
            self.coord_sum = F.pad(self.coord_sum.unflatten(-1, (t_seen, t_seen)), grow).flatten(-2)
            self.coord_count = F.pad(self.coord_count.view(t_seen, t_seen), grow).flatten()
            return a, mask
        valid = torch.ones(a.shape[1], t, dtype=torch.bool, device=a.device) if mask is None else mask.bool()
        return F.pad(a, (0, t_seen - t, 0, t_seen - t)), F.pad(valid, (0, t_seen - t))  # padding is invalid
