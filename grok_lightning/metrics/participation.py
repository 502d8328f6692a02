r"""PR_norm: the participation ratio of an H x H head covariance, under a named construction.

The paper (arXiv 2605.20441, section 4.5, Eq. 3) defines PR_norm from the eigenvalues ``a_k >= 0``
of each layer's "head-pattern covariance", ``R = (sum a)^2 / sum a^2``, ``PR_norm = (R - 1)/(H - 1)``
averaged over layers, without saying which vectors form the covariance or how they are centred.
This module implements the candidate readings, selectable by name; docs/decisions.md ("PR_norm")
compares them with the paper's Table 3. The nearest, ``output_examples``, is the default of the run
diagnostics and the checkpoint analysis; where only attention probabilities exist, ``examples``.

Input: ``features``, a list over layers of per-head tensors ``(B, H, *coords)`` or one stacked
``(L, B, H, *coords)`` tensor (a single 4-D tensor is one layer). For attention probabilities
``coords = (T_q, T_k)``; for head outputs (each head's write into the residual stream,
``(A_h V_h) W_O[:, h]^T``) ``coords = (T, d_model)``. Per layer, ``x[b, h, c]`` is head ``h`` on
evaluation example ``b`` at flattened coordinate ``c`` (``C`` coordinates, ``N = B C``).

Sum-reduced statistics of a chunk (:class:`PRState`, all float64; chunks and DDP ranks add):
``gram[l, i, j] = sum_{b,c} x_bic x_bjc`` (L, H, H); ``coord_sum[l, h, c] = sum_b x_bhc``
(L, H, C); ``coord_count[c]`` = examples seen (C,); ``example_r_sum[l] = sum_b R_b`` (L,), only
for ``per_example``; ``n_examples``.

Constructions (covariance ``Cov``, H x H per layer):

* ``examples``: each head's pattern minus its own mean over the evaluation examples, per
  coordinate: ``Cov = (gram - sum_c s_c s_c^T / n_c) / N`` with ``s_c = coord_sum[:, c]``. How
  heads co-vary across inputs. The per-coordinate mean comes from the summed ``coord_sum``, so
  one pass suffices (no second pass over the data); the subtraction is done in float64, where its
  cancellation costs ~1e-16 relative to ``gram``, far below any reported digit.
* ``heads``: deviations from the mean head pattern (centred across heads, per coordinate):
  ``Cov = P gram P / N`` with ``P = I - 11^T/H``. ``P`` has the null vector ``1``, so one
  eigenvalue is 0 and ``PR_norm <= (H - 2)/(H - 1)``.
* ``coordinates``: each head's flattened vector centred over its own ``N`` coordinates:
  ``Cov = gram / N - mu mu^T``, ``mu_h = sum_c coord_sum[h, c] / N``. For
  attention every head's mean is exactly ``1/T_k`` (rows sum to 1), so this only removes a
  constant and the covariance is dominated by the pattern all heads share.
* ``uncentred``: the Gram itself, ``Cov = gram / N``.
* ``per_example``: one ``coordinates`` covariance per example (``C`` coordinates each), its ``R_b``,
  and the mean of ``R_b`` over examples (PR_norm is affine in R, so this is the mean per-example
  PR_norm). No single spectrum per layer, so no C1 row.

A name may carry the prefix ``output_`` (e.g. ``output_examples``): the same construction on head
outputs instead of attention patterns. The kernels here are source-agnostic; the prefix tells the
caller what to feed them (only post-hoc checkpoint analysis has head outputs).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Union

import torch
from torch import Tensor

__all__ = ["CENTRINGS", "DEFAULT_PR_CONSTRUCTION", "DIAGNOSTICS_PR_CONSTRUCTION", "PR_CONSTRUCTIONS", "PRState", "head_participation",
           "normalize_participation_ratio", "parse_pr_construction", "participation_ratio", "pr_covariance",
           "pr_compute", "pr_covariance_eigenvalues", "pr_state_update", "symmetric_eigenvalues"]

Features = Union[Tensor, Sequence[Tensor]]

CENTRINGS = ("examples", "heads", "coordinates", "uncentred", "per_example")
PR_CONSTRUCTIONS = CENTRINGS + tuple(f"output_{c}" for c in CENTRINGS)
#: nearest the paper's Table 3 on the canonical seed-42 run (docs/decisions.md, "PR_norm"): the
#: default of the run diagnostics (AttentionDiagnostics) and of the checkpoint analysis (Fig. 6)
DIAGNOSTICS_PR_CONSTRUCTION = "output_examples"
#: the nearest among the attention-pattern constructions: the default wherever only attention
#: probabilities are at hand (the attention metrics, diagnostics of arbitrary models)
DEFAULT_PR_CONSTRUCTION = "examples"
NORMALIZATIONS = ("affine", "ratio", "none")


class PRState(NamedTuple):
    """Sum-reduced statistics of one chunk (module docstring)."""

    gram: Tensor  # (L, H, H)
    coord_sum: Tensor  # (L, H, C)
    coord_count: Tensor  # (C,)
    example_r_sum: Tensor  # (L,): zeros unless per_example was asked for
    n_examples: Tensor  # scalar


def parse_pr_construction(name: str) -> tuple[str, str]:
    """``(source, centring)`` of a construction name: ``"output_examples" -> ("output", "examples")``.

    >>> parse_pr_construction("examples"), parse_pr_construction("output_heads")
    (('pattern', 'examples'), ('output', 'heads'))
    """
    if name not in PR_CONSTRUCTIONS:
        raise ValueError(f"PR construction must be one of {', '.join(PR_CONSTRUCTIONS)}, got {name!r}")
    return ("output", name[len("output_"):]) if name.startswith("output_") else ("pattern", name)


def participation_ratio(eigenvalues: Tensor) -> Tensor:
    """``R = (sum a)^2 / sum a^2`` over the last dim (``a`` clipped at 0; 0/0 gives NaN)."""
    a = eigenvalues.clamp_min(0)
    return a.sum(-1) ** 2 / (a**2).sum(-1)


def normalize_participation_ratio(pr: Tensor, n: int, normalization: str = "affine") -> Tensor:
    """``"affine"``: ``(R - 1)/(n - 1)`` (paper text); ``"ratio"``: ``R/n`` (Lean); ``"none"``: ``R``."""
    if normalization == "affine":
        return (pr - 1) / (n - 1) if n > 1 else torch.full_like(pr, float("nan"))
    if normalization == "ratio":
        return pr / n
    if normalization == "none":
        return pr
    raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")


def symmetric_eigenvalues(matrix: Tensor) -> Tensor:
    """Ascending eigenvalues of the symmetrised matrix, clipped at 0 (a covariance spectrum)."""
    return torch.linalg.eigvalsh(0.5 * (matrix + matrix.transpose(-2, -1))).clamp_min(0)


def _as_head_features(features: Features) -> Tensor:
    """Detached float64 ``(L, B, H, C)``: per-head coordinates flattened."""
    if isinstance(features, Tensor):
        x = features.unsqueeze(0) if features.dim() == 4 else features
        if x.dim() != 5:
            raise ValueError(f"expected (L, B, H, *coords) with 2 coordinate dims or (B, H, *coords), "
                             f"got {tuple(features.shape)}")
    else:
        layers = list(features)
        if not layers:
            raise ValueError("empty list of per-head features")
        shapes = {tuple(x.shape) for x in layers}
        if len(shapes) != 1 or len(next(iter(shapes))) < 3:
            raise ValueError(f"every layer must be (B, H, *coords) with one common shape, got {shapes}")
        x = torch.stack([t.detach() for t in layers])
    return x.detach().to(torch.float64).flatten(3)


def pr_state_update(features: Features, per_example: bool = False) -> PRState:
    """Sufficient statistics of one chunk; ``per_example`` also sums the per-example ``R_b``."""
    x = _as_head_features(features)  # (L, B, H, C)
    n_layers, batch, _, n_coords = x.shape
    f64 = dict(dtype=torch.float64, device=x.device)
    example_r_sum = torch.zeros(n_layers, **f64)
    if per_example:
        centred = x - x.mean(-1, keepdim=True)  # each example's vector centred over its own C coordinates
        cov = centred @ centred.transpose(-2, -1) / n_coords  # (L, B, H, H)
        example_r_sum = participation_ratio(symmetric_eigenvalues(cov)).sum(-1)
    flat = x.transpose(1, 2).reshape(n_layers, x.shape[2], -1)  # (L, H, B*C)
    return PRState(gram=flat @ flat.transpose(1, 2), coord_sum=x.sum(1),
                   coord_count=torch.full((n_coords,), float(batch), **f64),
                   example_r_sum=example_r_sum, n_examples=torch.tensor(float(batch), **f64))


def pr_covariance(state: PRState, construction: str = DEFAULT_PR_CONSTRUCTION) -> Tensor:
    """The ``(L, H, H)`` covariance of a construction (module docstring) from summed statistics."""
    centring = parse_pr_construction(construction)[1]
    if centring == "per_example":
        raise ValueError("per_example has one covariance per example, not one per layer")
    gram, coord_sum, coord_count = state.gram, state.coord_sum, state.coord_count
    n = coord_count.sum()
    if centring == "uncentred":
        return gram / n
    if centring == "coordinates":
        mu = coord_sum.sum(-1) / n
        return gram / n - mu.unsqueeze(-1) * mu.unsqueeze(-2)
    if centring == "heads":
        h = gram.shape[-1]
        p = torch.eye(h, dtype=gram.dtype, device=gram.device) - 1.0 / h
        return p @ gram @ p / n
    if not bool((coord_count >= 2).any()):
        # every coordinate was seen in at most one example: no variation across examples, so the
        # covariance is exactly zero (PR NaN, the rank-collapse marker), not a rounding residue
        return torch.zeros_like(gram)
    seen = coord_count > 0  # coordinates no example reached (a masked caller) carry no mean
    s = coord_sum[..., seen]
    return (gram - (s / coord_count[seen]) @ s.transpose(-2, -1)) / n


def pr_covariance_eigenvalues(state: PRState, construction: str = DEFAULT_PR_CONSTRUCTION) -> Tensor:
    """``(L, H)`` eigenvalues (ascending, clipped at 0) of :func:`pr_covariance`: the C1 input."""
    return symmetric_eigenvalues(pr_covariance(state, construction))


def pr_compute(state: PRState, construction: str = DEFAULT_PR_CONSTRUCTION,
                normalization: str = "affine") -> Tensor:
    """``(L,)`` normalised PR per layer; NaN for a layer whose covariance is all zero."""
    n_heads = state.gram.shape[-1]
    if parse_pr_construction(construction)[1] == "per_example":
        pr = state.example_r_sum / state.n_examples
    else:
        pr = participation_ratio(pr_covariance_eigenvalues(state, construction))
    return normalize_participation_ratio(pr, n_heads, normalization)


def head_participation(features: Features, construction: str = DEFAULT_PR_CONSTRUCTION,
                       normalization: str = "affine", per_layer: bool = False) -> Tensor:
    """PR_norm of per-head features under ``construction``: the layer mean, or ``(L,)`` values.

    Example (3 heads at 2 coordinates over 4 examples; heads 0 and 1 move together across
    examples, head 2 is constant, so the ``examples`` covariance has rank 1):
        >>> x = torch.tensor([[1., 2.], [2., 1.], [3., 0.], [0., 3.]])  # (B, C)
        >>> heads = torch.stack([x, x, torch.ones(4, 2)], dim=1)  # (B, H=3, C)
        >>> head_participation([heads], "examples").item()  # rank 1: R = 1
        0.0
        >>> round(head_participation([heads], "uncentred").item(), 4)
        0.0424
    """
    centring = parse_pr_construction(construction)[1]
    values = pr_compute(pr_state_update(features, centring == "per_example"), construction, normalization)
    return values if per_layer else values.mean()
