"""Theorem-6 repulsion check (Tian 2025, as tested by Xu 2026 §5): signs of B on similar pairs.

Notation: ``F`` is the ``(n, K)`` matrix of hidden activations on the training set, ``f_j`` its
j-th column centred over samples (``F~ = P_1^perp F``), ``B = (F~^T F~ + eta I_K)^{-1}``.

**Pairs.** Cosine matrix of the centred columns (float32, as published), diagonal excluded, each
unordered pair once; keep the ``n_pairs`` (200) pairs with the largest ``|cos|``.

**B entries** (Woodbury, correct prefactor): for ``j != l``,

    B_jl = -(1/eta) f_j^T (F~ F~^T + eta I_n)^{-1} f_l ,

from ONE float64 Cholesky factorisation of the n x n matrix ``A = F~ F~^T + eta I`` and a solve
for the (at most 2 * n_pairs) columns involved; no K x K matrix is formed.

**Modes** (see PAPER_SPECTRAL_LOCKIN.md §5.2 and §12):

* ``paper``: fraction of pairs with ``sgn B_jl = -sgn cos_jl``. This is the number Xu's code
  reports (0.865 -> 0.985): the published Woodbury has ``1/eta^2`` where ``1/eta`` is correct, so
  its "residual" ``f_j^T (f_l - F~ B F~^T f_l)`` is dominated by ``f_j^T F~ F~^T f_l / eta^2`` and
  takes the sign of the raw similarity, not of the projected one. Off-diagonal signs of the
  published B are right (it is ``B / eta`` off the diagonal), so B's sign is computed correctly here.
* ``exact``: fraction with ``sgn B_jl = -sgn(f_j^T P_{eta,-jl} f_l)``, the theorem as stated,
  with the exact leave-pair-out projector ``P_{eta,-jl} = eta (A - f_j f_j^T - f_l f_l^T)^{-1}``.
  With ``S = U^T A^{-1} U`` for ``U = [f_j, f_l]`` (a 2 x 2 block from the same solve), the
  rank-2 Woodbury downdate gives ``f_j^T P_{eta,-jl} f_l = eta S_jl / det(I - S)`` while
  ``B_jl = -S_jl / eta`` and ``det(I - S) > 0``: the rule is an algebraic identity, so this is
  1.000 for any features and any eta > 0 (a correctness check, not an empirical finding).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from grok_lightning.config import require, require_choice

__all__ = [
    "RepulsionSignAgreement",
    "repulsion_statistics",
    "top_cosine_pairs",
    "MODES",
]

MODES = ("paper", "exact")


def top_cosine_pairs(centred: Tensor, n_pairs: int = 200) -> tuple[Tensor, Tensor, Tensor]:
    """Indices ``(j, l)`` (j < l) and signed cosines of the ``n_pairs`` largest-|cos| column pairs.

    >>> import torch
    >>> f = torch.tensor([[1.0, 1.0, 0.0], [-1.0, -0.9, 1.0], [0.0, 0.1, -1.0]])
    >>> j, l, cos = top_cosine_pairs(f, n_pairs=1)
    >>> j.tolist(), l.tolist(), round(float(cos), 3)
    ([0], [1], 0.996)
    """
    f = centred.detach().to(torch.float32)
    k = f.shape[1]
    unit = f / torch.linalg.norm(f, dim=0, keepdim=True).clamp_min(1e-30)
    cos = unit.T @ unit
    # strict upper triangle: drops the diagonal and counts each unordered pair once
    score = torch.triu(cos.abs(), diagonal=1)
    score.masked_fill_(~torch.ones(k, k, dtype=torch.bool, device=f.device).triu(1), -1.0)
    top = torch.topk(score.reshape(-1), min(n_pairs, k * (k - 1) // 2)).indices
    j, l = top // k, top % k
    return j, l, cos[j, l]


def repulsion_statistics(features: Tensor, eta: float, n_pairs: int = 200) -> dict[str, Tensor]:
    """All Theorem-6 quantities on the top-``n_pairs`` |cos| pairs of the centred features.

    Args:
        features: ``(n, K)`` hidden activations on the training set, uncentred (centred here).
        eta: ridge constant (the run's weight decay), > 0.
        n_pairs: number of pairs (paper 200).

    Returns:
        dict of scalar tensors ``sign_match_paper``, ``sign_match_exact``,
        ``frac_neg_B_pos_cos`` (fraction of B_jl < 0 among pairs with cos > 0; NaN if none),
        ``median_abs_cos``, and the per-pair tensors ``j, l, cos, B, residual_exact``.
    """
    require(eta > 0, "eta", eta, "must be > 0 (B = (F~^T F~ + eta I)^-1 needs a ridge)")
    centred = features.detach() - features.detach().mean(dim=0, keepdim=True)
    j, l, cos = top_cosine_pairs(centred, n_pairs)
    f64 = centred.to(torch.float64)
    a = f64 @ f64.T
    a.diagonal().add_(eta)
    chol = torch.linalg.cholesky(a)
    cols, inverse = torch.unique(torch.cat([j, l]), return_inverse=True)
    u = f64[:, cols]
    z = torch.cholesky_solve(u, chol)  # A^{-1} u for every column involved
    s = u.T @ z  # S[c, c'] = f_c^T A^{-1} f_c'
    ij, il = inverse[: len(j)], inverse[len(j):]
    s_jl, s_jj, s_ll = s[ij, il], s[ij, ij], s[il, il]
    b = -s_jl / eta
    det = (1.0 - s_jj) * (1.0 - s_ll) - s_jl**2  # det(I - S_block) > 0 in exact arithmetic
    residual = eta * s_jl / det
    cos64 = cos.to(torch.float64)
    positive = cos64 > 0
    return {
        "sign_match_paper": (torch.sign(b) == -torch.sign(cos64)).double().mean(),
        "sign_match_exact": (torch.sign(b) == -torch.sign(residual)).double().mean(),
        "frac_neg_B_pos_cos": (b[positive] < 0).double().mean() if positive.any() else torch.tensor(float("nan")),
        "median_abs_cos": cos64.abs().quantile(0.5),  # numpy-style median (mean of the middle two)
        "j": j, "l": l, "cos": cos, "B": b, "residual_exact": residual,
    }


class RepulsionSignAgreement(Metric):
    """Theorem-6 sign agreement on the most similar feature pairs (see module docstring).

    ``update(features)`` takes hidden activations ``(n_batch, K)`` (uncentred); ``compute()``
    centres the columns over all samples, so the state is a ``cat`` list of rows (gathered across
    ranks): the metric needs the whole n x K matrix, not a running sum. Returns the fraction
    (scalar float64 tensor) of the top ``n_pairs`` |cos| pairs whose sign rule holds:

    * ``mode="paper"``: ``sgn B_jl = -sgn cos_jl`` (Xu's published number);
    * ``mode="exact"``: ``sgn B_jl = -sgn f_j^T P_{eta,-jl} f_l`` (always 1.0).

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> feats = torch.randn(40, 30) ** 2
    >>> metric = RepulsionSignAgreement(eta=2e-4, mode="exact", n_pairs=20)
    >>> metric.update(feats[:25]); metric.update(feats[25:])
    >>> float(metric.compute())
    1.0
    """

    full_state_update = False
    higher_is_better = True
    is_differentiable = False

    def __init__(self, eta: float, mode: str = "paper", n_pairs: int = 200, **kwargs) -> None:
        super().__init__(**kwargs)
        require(eta > 0, "eta", eta, "must be > 0")
        require_choice("mode", mode, MODES)
        require(isinstance(n_pairs, int) and n_pairs >= 1, "n_pairs", n_pairs, "must be an integer >= 1")
        self.eta, self.mode, self.n_pairs = float(eta), mode, n_pairs
        self.add_state("features", default=[], dist_reduce_fx="cat")

    def update(self, features: Tensor) -> None:
        self.features.append(features.detach())

    def compute(self) -> Tensor:
        feats = self.features if isinstance(self.features, Tensor) else torch.cat(self.features)
        return repulsion_statistics(feats, self.eta, self.n_pairs)[f"sign_match_{self.mode}"]
