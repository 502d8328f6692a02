r"""Functional kernels for the attention-head diagnostics of arXiv 2605.20441 (section 4).

Every attention kernel takes ``attentions``: a list/tuple over layers of softmax attention
probabilities of shape ``(B, H, T_q, T_k)``, or one stacked ``(L, B, H, T_q, T_k)`` tensor
(a single ``(B, H, T_q, T_k)`` tensor is read as one layer). Work is done in float64.

The kernels are split torchmetrics-style into an *update* step, which turns a chunk of
attention into additive sufficient statistics, and a *compute* step, which turns the summed
statistics into the published numbers. Per layer ``l`` with flattened head patterns
``x_h in R^N`` (``N = B * T_q * T_k``: whole batch, **all** query rows, as in the released
``grokking_diag/metrics.py``) the statistics are

* ``gram[l, i, j] = sum_k x_ik x_jk`` (H x H),
* ``head_sum[l, h] = sum_k x_hk`` and ``n_coords = N`` (for the covariance centring),
* ``entropy_sum[l, h] = sum over (b, q) of -sum_k a log(a + 1e-12)`` and ``n_rows = B * T_q``.

From them (``eps = 1e-12``, ``n_h = sqrt(gram[h, h])``):

* cosine matrix ``S_ij = gram_ij / ((n_i + eps)(n_j + eps))`` - exactly the cosine of the
  published ``x / (||x|| + eps)`` normalisation;
* ``mean_similarity`` (s_bar) = mean of the off-diagonal ``S_ij``;
* ``spectral_gap`` = ``lambda_1 - lambda_2`` of ``S`` (``eigvalsh``);
* per-head entropy ``H_h = entropy_sum / n_rows``; ``entropy_std`` (sigma_H, population
  std, ddof 0), ``entropy_mean`` and ``entropy_range`` (max - min) over heads;
* the H x H head covariance of the chosen PR construction (default ``examples``: each head's
  pattern minus its own mean over the evaluation examples, per coordinate; the alternatives and
  their formulas are in :mod:`grok_lightning.metrics.participation`), eigenvalues ``a_k``
  clipped at 0, ``R = (sum a)^2 / sum a^2``; ``pr_norm = (R - 1)/(H - 1)`` (paper text, Eq. 3)
  and ``pr_norm_ratio = R / H`` (the paper's Lean file). Identity: ``R = H / (1 + CV^2)`` with
  the population CV of the eigenvalues. The constructions need two more sums, also additive:
  ``coord_sum[l, h, c] = sum_b a[b, h, c]`` over examples (``c`` = a ``(q, k)`` pair) with
  ``coord_count[c]``, and, for ``per_example`` only, ``example_r_sum[l] = sum_b R_b``.

Each per-layer value is averaged over layers. Undefined cases (``H < 2`` for the pairwise
quantities, an all-zero covariance for PR) give NaN, the paper's "rank-collapse marker".
"""
from __future__ import annotations

import warnings
from typing import Dict, Iterable, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from grok_lightning.metrics.participation import (
    DEFAULT_PR_CONSTRUCTION,
    PRState,
    normalize_participation_ratio,
    parse_pr_construction,
    participation_ratio,
    pr_compute,
    pr_state_update,
)

Attentions = Union[Tensor, Sequence[Tensor]]

EPS = 1e-12
STAT_KEYS = (
    "mean_similarity",
    "entropy_std",
    "entropy_mean",
    "entropy_range",
    "spectral_gap",
    "pr_norm",
    "pr_norm_ratio",
)


class AttentionState(NamedTuple):
    """Additive sufficient statistics of one chunk (all float64)."""

    gram: Tensor  # (L, H, H)
    head_sum: Tensor  # (L, H)
    n_coords: Tensor  # scalar: B * T_q * T_k
    entropy_sum: Tensor  # (L, H)
    n_rows: Tensor  # scalar: B * T_q
    # for the PR constructions that centre per coordinate or per example; None in a state built
    # without them, which then supports only the constructions that need the Gram alone
    coord_sum: Optional[Tensor] = None  # (L, H, T_q * T_k)
    coord_count: Optional[Tensor] = None  # (T_q * T_k,)
    example_r_sum: Optional[Tensor] = None  # (L,)
    n_examples: Optional[Tensor] = None  # scalar: B


def as_layer_tensor(attentions: Attentions) -> Tensor:
    """Return attention as one detached float64 ``(L, B, H, T_q, T_k)`` tensor."""
    if isinstance(attentions, Tensor):
        a = attentions.unsqueeze(0) if attentions.dim() == 4 else attentions
        if a.dim() != 5:
            raise ValueError(f"expected (L, B, H, T, T) or (B, H, T, T), got {tuple(attentions.shape)}")
    else:
        layers = list(attentions)
        if not layers:
            raise ValueError("empty list of attention tensors")
        shapes = {tuple(x.shape) for x in layers}
        if len(shapes) != 1 or len(next(iter(shapes))) != 4:
            raise ValueError(f"every layer must be (B, H, T, T) with one common shape, got {shapes}")
        a = torch.stack([x.detach() for x in layers])
    return a.detach().to(torch.float64)


def attention_state_update(attentions: Attentions, eps: float = EPS, per_example: bool = False) -> AttentionState:
    """Sufficient statistics of one chunk of attention (see the module docstring).

    ``per_example`` also sums the per-example participation ratios (one H x H eigenproblem per
    example and layer), which only the ``per_example`` PR construction reads.
    """
    a = as_layer_tensor(attentions)
    check_probabilities(a)
    n_layers, batch, n_heads, t_q, t_k = a.shape
    pr = pr_state_update(a, per_example)  # the Gram of the flattened head patterns, and the PR sums
    row_entropy = -(a * torch.log(a + eps)).sum(-1)  # (L, B, H, T_q), nats
    return AttentionState(
        gram=pr.gram,
        head_sum=pr.coord_sum.sum(-1),
        n_coords=torch.tensor(float(batch * t_q * t_k), dtype=torch.float64, device=a.device),
        entropy_sum=row_entropy.sum(dim=(1, 3)),
        n_rows=torch.tensor(float(batch * t_q), dtype=torch.float64, device=a.device),
        coord_sum=pr.coord_sum,
        coord_count=pr.coord_count,
        example_r_sum=pr.example_r_sum,
        n_examples=pr.n_examples,
    )


def check_probabilities(a: Tensor) -> None:
    """Attention the diagnostics can measure, or one clear ``ValueError``: at least one example and
    one token, finite (NaN would surface later as an eigensolver that fails to converge) and
    non-negative (softmax probabilities)."""
    if a.numel() == 0:
        raise ValueError(f"attention of shape {tuple(a.shape)} (L, B, H, T, T) holds no value (an empty batch?): "
                         "nothing to measure")
    if not bool(torch.isfinite(a).all()):
        raise ValueError("attention holds NaN or inf (a diverged model, or padding that no mask covers): the "
                         "diagnostics measure probabilities")
    if bool((a < 0).any()):
        raise ValueError(f"attention has negative entries (min {float(a.min()):.3g}): not softmax probabilities")


#: diagnostics that compare heads with each other: undefined for one head per layer
NEEDS_TWO_HEADS = ("mean_similarity", "spectral_gap", "pr_norm")


def attention_pr_state(state: AttentionState, construction: str = DEFAULT_PR_CONSTRUCTION) -> Optional[PRState]:
    """The PR statistics inside an attention state, or ``None`` when it lacks what ``construction``
    needs (a state built without ``coord_sum`` supports only ``coordinates``, ``uncentred`` and
    ``heads``, which need the Gram and the head sums alone)."""
    centring = parse_pr_construction(construction)[1]
    if state.coord_sum is not None and state.coord_count is not None:
        r_sum = state.example_r_sum if state.example_r_sum is not None else torch.zeros_like(state.head_sum[..., 0])
        n_examples = state.n_examples if state.n_examples is not None else torch.zeros_like(state.n_rows)
        if centring == "per_example" and not bool(n_examples > 0):
            return None
        return PRState(state.gram, state.coord_sum, state.coord_count, r_sum, n_examples)
    if centring in ("examples", "per_example"):
        return None
    # one pseudo-coordinate carrying the head sums: exact for the constructions that need no more
    return PRState(state.gram, state.head_sum.unsqueeze(-1), state.n_coords.reshape(1),
                   torch.zeros_like(state.head_sum[..., 0]), torch.zeros_like(state.n_rows))


def cosine_from_gram(gram: Tensor, eps: float = EPS) -> Tensor:
    """``S_ij = G_ij / ((sqrt(G_ii) + eps)(sqrt(G_jj) + eps))`` over the last two dims."""
    norms = torch.diagonal(gram, dim1=-2, dim2=-1).clamp_min(0).sqrt() + eps
    return gram / (norms.unsqueeze(-1) * norms.unsqueeze(-2))


def attention_statistics_compute(
    state: AttentionState,
    eps: float = EPS,
    keys: Optional[Iterable[str]] = None,
    per_layer: bool = False,
    pr_construction: str = DEFAULT_PR_CONSTRUCTION,
) -> Dict[str, Tensor]:
    """Turn summed statistics into the diagnostics: ``(L,)`` tensors or their layer means.

    ``pr_construction`` names the head covariance behind ``pr_norm``/``pr_norm_ratio``; a state
    that lacks its statistics (:func:`attention_pr_state`) gives NaN for both, with a warning.
    """
    keys = tuple(STAT_KEYS if keys is None else keys)
    unknown = set(keys) - set(STAT_KEYS)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {STAT_KEYS}")
    gram, entropy_sum, n_rows = state.gram, state.entropy_sum, state.n_rows
    if gram.dim() != 3:
        raise RuntimeError("no attention has been accumulated yet")
    n_layers, n_heads = gram.shape[0], gram.shape[-1]
    if n_heads < 2 and set(NEEDS_TWO_HEADS) & set(keys):
        raise ValueError(f"{', '.join(k for k in NEEDS_TWO_HEADS if k in keys)} compare heads: they need at least 2 "
                         f"heads per layer, got {n_heads}")
    nan = torch.full((n_layers,), float("nan"), dtype=gram.dtype, device=gram.device)
    out: Dict[str, Tensor] = {}
    if {"mean_similarity", "spectral_gap"} & set(keys):
        cos = cosine_from_gram(gram, eps)
        off_diag = cos.sum(dim=(-2, -1)) - torch.diagonal(cos, dim1=-2, dim2=-1).sum(-1)
        out["mean_similarity"] = off_diag / (n_heads * (n_heads - 1))
        eig = torch.linalg.eigvalsh(0.5 * (cos + cos.transpose(-2, -1)))
        out["spectral_gap"] = eig[..., -1] - eig[..., -2]
    if {"entropy_std", "entropy_mean", "entropy_range"} & set(keys):
        ent = entropy_sum / n_rows  # (L, H): one entropy per head
        out["entropy_std"] = ent.std(dim=-1, correction=0)
        out["entropy_mean"] = ent.mean(dim=-1)
        out["entropy_range"] = ent.amax(dim=-1) - ent.amin(dim=-1)
    if {"pr_norm", "pr_norm_ratio"} & set(keys):
        pr_state = attention_pr_state(state, pr_construction)
        if pr_state is None:
            warnings.warn(f"PR construction {pr_construction!r} needs per-coordinate sums that this attention "
                          "state lacks; pr_norm is NaN", RuntimeWarning, stacklevel=2)
            out["pr_norm"] = out["pr_norm_ratio"] = nan
        else:
            pr = pr_compute(pr_state, pr_construction, "none")
            out["pr_norm"] = normalize_participation_ratio(pr, n_heads, "affine")
            out["pr_norm_ratio"] = normalize_participation_ratio(pr, n_heads, "ratio")
    return {k: (out[k] if per_layer else out[k].mean()) for k in keys}


def attention_statistics(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Dict[str, Tensor]:
    """All diagnostics of ``attentions`` at once, keyed by :data:`STAT_KEYS`.

    Example:
        >>> import torch
        >>> a = torch.full((2, 4, 3, 3), 1 / 3)  # (B, H, T, T): 4 identical uniform heads
        >>> stats = attention_statistics([a, a])  # two layers
        >>> round(stats["mean_similarity"].item(), 6), round(stats["entropy_std"].item(), 6)
        (1.0, 0.0)
    """
    return attention_statistics_compute(attention_state_update(attentions, eps), eps, None, per_layer)


def _one(key: str, attentions: Attentions, per_layer: bool, eps: float) -> Tensor:
    return attention_statistics_compute(attention_state_update(attentions, eps), eps, (key,), per_layer)[key]


def mean_similarity(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Tensor:
    """s_bar: mean off-diagonal cosine between flattened head patterns, layer-averaged."""
    return _one("mean_similarity", attentions, per_layer, eps)


def entropy_std(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Tensor:
    """sigma_H: population std over heads of the mean row entropy (nats), layer-averaged."""
    return _one("entropy_std", attentions, per_layer, eps)


def entropy_mean(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Tensor:
    """Mean over heads of the mean row entropy (nats), layer-averaged."""
    return _one("entropy_mean", attentions, per_layer, eps)


def entropy_range(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Tensor:
    """Max minus min over heads of the mean row entropy (nats), layer-averaged."""
    return _one("entropy_range", attentions, per_layer, eps)


def spectral_gap(attentions: Attentions, per_layer: bool = False, eps: float = EPS) -> Tensor:
    """lambda_1 - lambda_2 of the H x H head cosine matrix, layer-averaged."""
    return _one("spectral_gap", attentions, per_layer, eps)


def head_participation_ratio(
    attentions: Attentions,
    normalization: str = "affine",
    per_layer: bool = False,
    eps: float = EPS,
    construction: str = DEFAULT_PR_CONSTRUCTION,
) -> Tensor:
    """PR of the head-pattern covariance eigenvalues, ``(R-1)/(H-1)`` or ``R/H``, layer-averaged.

    ``construction``: which covariance (:data:`~grok_lightning.metrics.participation.PR_CONSTRUCTIONS`
    without the ``output_`` ones, which need head outputs: use
    :func:`~grok_lightning.metrics.participation.head_participation` for those).
    """
    if normalization not in ("affine", "ratio"):
        raise ValueError(f"normalization must be 'affine' or 'ratio', got {normalization!r}")
    check_attention_construction(construction)
    key = "pr_norm" if normalization == "affine" else "pr_norm_ratio"
    state = attention_state_update(attentions, eps, per_example=construction == "per_example")
    return attention_statistics_compute(state, eps, (key,), per_layer, construction)[key]


def check_attention_construction(construction: str) -> None:
    """Raise ``ValueError`` unless ``construction`` can be computed from attention probabilities."""
    if parse_pr_construction(construction)[0] != "pattern":
        raise ValueError(f"PR construction {construction!r} needs head outputs, not attention probabilities")


def head_cosine_matrix(attentions: Attentions, eps: float = EPS) -> Tensor:
    """The ``(L, H, H)`` cosine matrices behind s_bar and the spectral gap."""
    return cosine_from_gram(attention_state_update(attentions, eps).gram, eps)


def head_entropies(attentions: Attentions, eps: float = EPS) -> Tensor:
    """The ``(L, H)`` per-head mean row entropies (nats) behind sigma_H."""
    state = attention_state_update(attentions, eps)
    return state.entropy_sum / state.n_rows


def coefficient_of_variation(x: Tensor, ddof: int = 0) -> Tensor:
    """``std(x, ddof) / mean(x)`` over the last dim (``ddof=0``: population, as in the identity)."""
    return x.std(dim=-1, correction=ddof) / x.mean(dim=-1)


def participation_ratio_from_cv(cv: Union[Tensor, float], n: int, normalization: str = "affine", ddof: int = 0) -> Tensor:
    """PR from the eigenvalue CV: ``R = n / (1 + CV_pop^2)``, then normalised.

    ``ddof=1`` converts a sample CV first (``var_pop = var_sample * (n - 1) / n``), which is
    how the published Table 3 values (sample CV, torch ``unbiased=True``) map to PR_norm.

    Example:
        >>> round(participation_ratio_from_cv(0.392, 8, "affine", ddof=1).item(), 3)
        0.865
    """
    cv = torch.as_tensor(cv, dtype=torch.float64)
    cv2_pop = cv**2 * (n - ddof) / n
    return normalize_participation_ratio(n / (1 + cv2_pop), n, normalization)


def participation_identity_error(eigenvalues: Tensor) -> Tensor:
    """``|R/n - 1/(1 + CV^2)|`` (population CV) over the last dim; ~1e-16 when the identity holds."""
    a = eigenvalues.to(torch.float64)
    n = a.shape[-1]
    direct = participation_ratio(a) / n
    via_cv = 1 / (1 + coefficient_of_variation(a, ddof=0) ** 2)
    return (direct - via_cv).abs()


def check_participation_identity(eigenvalues: Tensor, atol: float = 1e-9) -> bool:
    """True when ``R = n / (1 + CV^2)`` holds for every row of non-negative ``eigenvalues``.

    Example:
        >>> check_participation_identity(torch.tensor([3.0, 1.0, 0.5, 0.0]))
        True
    """
    if (eigenvalues < 0).any():
        raise ValueError("the identity is stated for non-negative eigenvalues")
    return bool((participation_identity_error(eigenvalues) <= atol).all())


def qk_rank(q: Tensor, k: Tensor, tol: Optional[float] = None) -> int:
    """Numerical rank of the score kernel ``Q K^T`` for ``Q, K`` of shape ``(T, d_head)``.

    It never exceeds ``d_head`` (Lean: ``GrokDiagnostics.qk_rank_le``).

    Example:
        >>> qk_rank(torch.ones(5, 2), torch.arange(10.0).reshape(5, 2))
        1
    """
    return int(torch.linalg.matrix_rank((q @ k.transpose(-2, -1)).to(torch.float64), atol=tol))
