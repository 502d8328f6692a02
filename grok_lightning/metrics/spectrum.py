"""Spectral lock-in (Xu 2026, §6) and Tian's level metric rho_tian (§7).

**Rolling update Gram.** Stack the last ``W`` flattened first-layer updates
``Delta W_t = W_t - W_{t-1}`` (each of length P) as rows of ``D`` (shape ``(W, P)``) and take the
eigenvalues of the ``W x W`` Gram ``G = D D^T`` in descending order:

    sigma_1 >= sigma_2 >= ... ,   sigma_k = s_k(D)^2   (squared singular values of D)

so the paper's "sigma_k" are Gram eigenvalues, not singular values. Lock-in ratio
``r = sigma_2 / sigma_3``; also ``sigma_1 / sigma_2``. Cost O(P W^2 + W^3) from scratch and
O(P W) per update in :class:`UpdateGramSpectrum` (the Gram is updated incrementally); a P x P
matrix is never formed. Everything is float64: at lock-in sigma_3 / sigma_1 ~ 1e-5.

**rho_tian** (the code version, ``fft_dist_from_ideal``): on the raw n x n kernel ``K = F F^T``
of the training activations, with d = mean diagonal and o = mean off-diagonal,

    rho = || (d - o) I + o 11^T - K ||_F / || K ||_F .

The centred variant replaces K by ``P_1^perp K`` (each column minus its mean over samples)
and in the fit of d and o, keeping ``||K||_F`` as denominator (the formula as printed).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torchmetrics import Metric

__all__ = [
    "UpdateGramSpectrum", "RhoTian", "update_gram_spectrum", "spectrum_summary", "rho_tian",
    "rho_tian_from_kernel", "rho_tian_blocked", "activation_kernel",
]


def spectrum_summary(eigenvalues: Tensor, k: int = 5) -> dict[str, float]:
    """``{"sigma1".."sigma{k}", "ratio23", "ratio12"}`` from descending Gram eigenvalues.

    Missing eigenvalues (fewer than k deltas) and ratios with a non-positive denominator are NaN,
    as in Xu's tracker (``W_gap23`` is NaN unless sigma_3 > 0).
    """
    vals = [float(v) for v in eigenvalues[:k]] + [math.nan] * max(0, k - len(eigenvalues))
    out = {f"sigma{i + 1}": v for i, v in enumerate(vals)}
    s1, s2, s3 = (vals + [math.nan] * 3)[:3]
    out["ratio23"] = s2 / s3 if s3 > 0 else math.nan
    out["ratio12"] = s1 / s2 if s2 > 0 else math.nan
    return out


def update_gram_spectrum(deltas: Tensor | list[Tensor]) -> Tensor:
    """Eigenvalues (descending, float64) of the Gram ``D D^T`` of the stacked updates.

    Args:
        deltas: ``(W, P)`` tensor or list of W tensors of any shape (flattened), oldest first.

    Returns:
        ``(W,)`` float64 tensor, ``sigma_1 >= ... >= sigma_W`` (squared singular values of D).

    >>> import torch
    >>> D = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    >>> update_gram_spectrum(D).tolist()
    [9.0, 4.0]
    """
    if isinstance(deltas, (list, tuple)):
        deltas = torch.stack([d.reshape(-1) for d in deltas])
    d = deltas.reshape(deltas.shape[0], -1).to(torch.float64)
    gram = d @ d.T
    return torch.linalg.eigvalsh(gram).flip(0).clamp_min(0.0)  # PSD: tiny negative = rounding


def _gram_matrix(deltas: list[Tensor]) -> Tensor:
    """The float64 ``W x W`` Gram of a list of flattened updates (oldest first)."""
    d = torch.stack([x.reshape(-1).to(torch.float64) for x in deltas])
    return d @ d.T


class UpdateGramSpectrum(Metric):
    """Top eigenvalues of the Gram of the last ``window`` parameter updates (Xu's detector input).

    ``update(delta)`` pushes one update (any shape, flattened); the oldest is dropped beyond
    ``window``. ``compute()`` returns the float64 tensor of the top ``k`` eigenvalues, padded
    with NaN while fewer than ``k`` updates are held; :func:`spectrum_summary` turns it into the
    named values (sigma1..sigma5, ratio23 = sigma2/sigma3, ratio12 = sigma1/sigma2).

    State: ``deltas`` (list, oldest first) with ``dist_reduce_fx=None`` and no sync on compute:
    under DDP the weights, hence the updates, are identical on every rank, so gathering them
    would only duplicate rows. The W x W Gram is a cache updated in O(P W) per push.

    >>> import torch
    >>> m = UpdateGramSpectrum(window=2, k=3)
    >>> for d in ([1.0, 0.0], [0.0, 2.0], [0.0, 3.0]):
    ...     m.update(torch.tensor(d))
    >>> m.compute().tolist()[:2]  # holds [0, 2] and [0, 3] -> Gram [[4, 6], [6, 9]]
    [13.0, 0.0]
    """

    full_state_update = False
    higher_is_better = None
    is_differentiable = False

    def __init__(self, window: int = 20, k: int = 5, **kwargs) -> None:
        kwargs.setdefault("sync_on_compute", False)
        super().__init__(**kwargs)
        if not (isinstance(window, int) and window >= 2):
            raise ValueError(f"window={window!r}: must be an integer >= 2")
        self.window, self.k = window, k
        self.add_state("deltas", default=[], dist_reduce_fx=None)
        self._gram: Tensor | None = None

    def update(self, delta: Tensor) -> None:
        d = delta.detach().reshape(-1).to(torch.float64)
        if len(self.deltas) == self.window:
            self.deltas.pop(0)
            if self._gram is not None:
                self._gram = self._gram[1:, 1:]
        self.deltas.append(d)
        if self._gram is None or self._gram.shape[0] != len(self.deltas) - 1:
            self._gram = _gram_matrix(self.deltas)  # (re)build after load/reset
            return
        # new Gram row, O(P W); dot by dot so the (W, P) window is never copied
        row = torch.stack([torch.dot(x, d) for x in self.deltas])
        n = len(self.deltas)
        gram = torch.empty(n, n, dtype=torch.float64, device=d.device)
        gram[:-1, :-1] = self._gram
        gram[-1, :] = row
        gram[:, -1] = row
        self._gram = gram

    def compute(self) -> Tensor:
        out = torch.full((self.k,), math.nan, dtype=torch.float64)
        if len(self.deltas) < 2:
            return out
        if self._gram is None or self._gram.shape[0] != len(self.deltas):
            self._gram = _gram_matrix(self.deltas)
        eig = torch.linalg.eigvalsh(self._gram).flip(0).clamp_min(0.0)[: self.k]
        out[: len(eig)] = eig.cpu()
        return out

    def reset(self) -> None:
        super().reset()
        self._gram = None


def activation_kernel(features: Tensor) -> Tensor:
    """``F F^T`` (n x n) as float64; the product itself runs in the features' dtype (float32, as
    the authors on device): it is the O(n^2 K) part, the reductions after it are O(n^2)."""
    f = features.detach()
    return (f @ f.T).to(torch.float64)


def rho_tian(features: Tensor, centred: bool = False) -> Tensor:
    """Distance of the activation kernel ``F F^T`` from its best ``aI + b11^T`` fit (code version).

    Args:
        features: ``(n, K)`` hidden activations on the training set (uncentred).
        centred: use ``P_1^perp F F^T`` in the numerator (the formula as printed) instead of the
            raw kernel (the published code; default).

    Returns:
        scalar float64 tensor.

    >>> import torch
    >>> float(rho_tian(torch.eye(4)))  # K = I is exactly of the form aI + b11^T
    0.0
    """
    return rho_tian_from_kernel(activation_kernel(features), centred)


def rho_tian_from_kernel(kernel: Tensor, centred: bool = False) -> Tensor:
    """:func:`rho_tian` from a precomputed raw kernel ``F F^T`` (shared by both variants)."""
    denominator = torch.linalg.norm(kernel)
    if centred:
        kernel = kernel - kernel.mean(dim=0, keepdim=True)
    diag = kernel.diagonal()
    return _rho_from_sums(diag, kernel.sum(), (kernel**2).sum(), denominator)


def rho_tian_blocked(features: Tensor, block_rows: int = 512) -> Tensor:
    """Raw-kernel :func:`rho_tian` from the upper block triangle of ``F F^T`` only.

    rho needs only sums over the kernel (its total, its squared total, its diagonal), and the
    kernel is symmetric, so each off-diagonal block ``F_a F_b^T`` is formed once and counted
    twice: b(b + 1)/2 of the b^2 blocks, ~0.6x the O(n^2 K) product at n = 2016 (b = 4). No n x n
    matrix is held. Equal to :func:`rho_tian` up to float32 rounding of the blocked product
    (tested to 1e-6 relative).

    >>> import torch
    >>> f = torch.rand(10, 3)
    >>> abs(float(rho_tian_blocked(f, block_rows=3)) - float(rho_tian(f))) < 1e-6
    True
    """
    f = features.detach()
    starts = range(0, f.shape[0], block_rows)
    total = squares = torch.zeros((), dtype=torch.float64, device=f.device)
    diag = []
    for i in starts:
        rows = f[i : i + block_rows]
        for j in starts:
            if j < i:
                continue
            block = (rows @ f[j : j + block_rows].T).to(torch.float64)
            weight = 1.0 if i == j else 2.0  # the mirrored block below the diagonal
            total = total + weight * block.sum()
            squares = squares + weight * (block**2).sum()
            if i == j:
                diag.append(block.diagonal())
    return _rho_from_sums(torch.cat(diag), total, squares, torch.sqrt(squares))


def _rho_from_sums(diag: Tensor, total: Tensor, squares: Tensor, denominator: Tensor) -> Tensor:
    """||ideal - K||_F / denominator from the kernel's diagonal, sum and sum of squares, without
    forming the ideal ``(d - o) I + o 11^T``: diagonal residuals plus off-diagonal residuals."""
    n = diag.shape[0]
    d = diag.mean()
    off_sum = total - diag.sum()
    o = off_sum / (n * (n - 1))
    off_res = squares - (diag**2).sum() - 2 * o * off_sum + n * (n - 1) * o**2
    num = ((diag - d) ** 2).sum() + off_res
    return torch.sqrt(num.clamp_min(0.0)) / denominator


class RhoTian(Metric):
    """rho_tian of the hidden-activation kernel on the training set (see :func:`rho_tian`).

    ``update(features)`` takes ``(n_batch, K)`` activations; rows of all updates are
    concatenated (``cat`` state, gathered across ranks) because rho needs the whole n x n kernel.
    Lower means closer to ``aI + b11^T``; Xu's fire rule is the first epoch with rho >= 0.075.

    >>> import torch
    >>> m = RhoTian()
    >>> m.update(torch.eye(4)[:2]); m.update(torch.eye(4)[2:])
    >>> float(m.compute())
    0.0
    """

    full_state_update = False
    higher_is_better = None
    is_differentiable = False

    def __init__(self, centred: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.centred = centred
        self.add_state("features", default=[], dist_reduce_fx="cat")

    def update(self, features: Tensor) -> None:
        self.features.append(features.detach())

    def compute(self) -> Tensor:
        feats = self.features if isinstance(self.features, Tensor) else torch.cat(self.features)
        return rho_tian(feats, centred=self.centred)
