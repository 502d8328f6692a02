r"""Readings of s_bar and sigma_H: how heads, layers, query rows and examples are pooled.

The released ``compute_metrics`` (reproduced exactly by :mod:`grok_lightning.metrics.functional`)
fixes the formulas of s_bar and sigma_H for one batch of attention, but the paper says neither
which inputs its training-time diagnostics saw nor how heads of different layers were pooled.
Each *reading* below is one answer; all of them come from one evaluation forward, from additive
sufficient statistics, so input sets can be merged (train + test = all ``p^2`` pairs) or cut
(a fixed subset of the training split) without another forward.

Input: ``attentions``, a list over ``L`` layers of ``(B, H, T, T)`` probabilities (or one
``(L, B, H, T, T)`` tensor). Per layer ``l`` and head ``h``, ``a[b, q, :]`` is the attention row
of example ``b`` at query ``q``; its entropy is ``e[b, h, q] = -sum_k a log(a + 1e-12)`` (nats).

==============  =========================================  ===========================================
reading         s_bar                                      sigma_H
==============  =========================================  ===========================================
``released``    per layer, cosine of the head patterns     per layer, population std over heads of the
                flattened over (examples, rows, keys);     mean row entropy; mean over layers
                mean off-diagonal; mean over layers        (the paper's released code)
``max_layer``   the lowest per-layer s_bar                 the highest per-layer sigma_H
``sum_layers``  ``released`` (a sum of cosines is no       per layer as ``released``; summed over
                cosine)                                    layers (``L`` times ``released``)
``pooled``      the ``LH x LH`` cosine matrix of all       std over all ``L H`` per-head entropies
                heads of all layers, mean off-diagonal
``per_row``     per example, cosine of the ``T x T``       per (example, row), std over heads of the
                head patterns; mean over examples, layers  row entropy; mean over rows, examples, layers
``no_row0``     ``released`` without query row 0           ``released`` without query row 0
``last_row``    ``released`` on the last query row only    ``released`` on the last query row only
==============  =========================================  ===========================================

Why ``sum_layers``: some of the paper's published sigma_H values exceed what any per-layer or
pooled reading can reach on ``[a, b, =]`` under a causal mask (:func:`sigma_h_bound`), and they
grow with depth in proportion to the layer count; docs/sigma_h_readings.md has the evidence. As
``L`` times ``released``, it has the same argmax epoch, Cohen's d and p-values as ``released``;
only absolute values differ.

Why ``no_row0`` and ``last_row``: under a causal mask row 0 attends to itself alone, so it is the
same in every head; it pulls s_bar towards 1 and every head's mean entropy towards 0 (sigma_H
scales by ``(T-1)/T`` when row 0 has zero entropy). The last row is where the prediction is read.

Sufficient statistics (float64, additive over chunks and input sets), per row set ``R`` in
(all rows, rows >= 1, last row): the ``LH x LH`` Gram of the head patterns restricted to ``R``,
the ``(L, H)`` entropy sums over examples and rows in ``R`` and the row count; plus, for
``per_row``, the sums over examples of the per-example mean cosine and over (example, row) of the
per-row entropy std, with their counts.

One function per sigma_H reading that pools layers (:data:`SIGMA_H_FROM_LAYERS`) takes the
per-layer values, layers on axis 0: the same function reads one evaluation of attention (``(L,)``
here) and a run record's per-layer columns (``(L, epochs)``, :func:`grok_lightning.stats.phases.sigma_h_curve`).
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, Dict, NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric

from grok_lightning.metrics.functional import EPS, Attentions, as_layer_tensor, cosine_from_gram

__all__ = ["READINGS", "SIGMA_H_FROM_LAYERS", "AttentionReadings", "ReadingState", "attention_readings",
           "head_entropies", "merge_reading_states", "sigma_h_bound", "sigma_h_from_layers"]

READINGS = ("released", "max_layer", "pooled", "sum_layers", "per_row", "no_row0", "last_row")
#: the row sets behind the readings: every query row, rows 1.. (row 0 dropped), the last row
ROW_SETS = ("all", "no_row0", "last_row")


class ReadingState(NamedTuple):
    """Additive statistics of one chunk (module docstring); every field float64."""

    gram: Tensor  # (R, L*H, L*H): per row set, the cross-layer Gram of head patterns
    entropy_sum: Tensor  # (R, L, H): per row set, sum of row entropies
    n_rows: Tensor  # (R,): example-rows summed per row set
    example_cosine_sum: Tensor  # (L,): sum over examples of the per-example mean off-diagonal cosine
    row_std_sum: Tensor  # (L,): sum over (example, row) of the std over heads of the row entropy
    n_examples: Tensor  # scalar
    n_layers: int
    n_heads: int


def _sigma_released(layer_std, layer_mean=None):
    """Mean over layers (NaN where a layer's value is missing)."""
    return np.mean(layer_std, axis=0)


def _sigma_max_layer(layer_std, layer_mean=None):
    """The highest layer; a layer's missing value is skipped (NaN only where every layer's is)."""
    with warnings.catch_warnings():  # an all-NaN column is NaN, said here rather than warned
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(layer_std, axis=0)


def _sigma_sum_layers(layer_std, layer_mean=None):
    """Sum over layers (NaN where a layer's value is missing)."""
    return np.sum(layer_std, axis=0)


def _sigma_pooled(layer_std, layer_mean):
    """The population std over all ``L H`` heads, from the per-layer std and mean of the head
    entropies: with the same H in every layer, the variance over all heads is the mean of the
    per-layer variances plus the variance of the per-layer means (NaN where a value is missing)."""
    if layer_mean is None:
        raise ValueError("the pooled reading needs the per-layer mean entropies (entropy_mean)")
    return np.sqrt(np.mean(np.square(layer_std), axis=0) + np.var(layer_mean, axis=0))


#: the readings that pool per-layer values: reading -> f(layer_std, layer_mean)
SIGMA_H_FROM_LAYERS: Dict[str, Callable] = {"released": _sigma_released, "max_layer": _sigma_max_layer,
                                            "sum_layers": _sigma_sum_layers, "pooled": _sigma_pooled}


def sigma_h_from_layers(reading: str, layer_std, layer_mean=None) -> np.ndarray:
    """sigma_H under ``reading`` from per-layer values, layers on axis 0 (float64 numpy out).

    ``layer_std``: each layer's population std over heads of the heads' mean row entropy;
    ``layer_mean``: each layer's mean of them (the ``pooled`` reading needs it).

    >>> std, mean = np.array([0.0, 0.0]), np.array([1.0, 2.0])  # two layers of identical heads
    >>> float(sigma_h_from_layers("pooled", std, mean)), float(sigma_h_from_layers("sum_layers", [0.1, 0.3]))
    (0.5, 0.4)
    >>> sigma_h_from_layers("max_layer", np.array([[0.1, 0.3], [0.2, np.nan]]))  # (L=2, epochs=2)
    array([0.2, 0.3])
    """
    if reading not in SIGMA_H_FROM_LAYERS:
        raise ValueError(f"reading={reading!r}: expected one of {', '.join(SIGMA_H_FROM_LAYERS)} (the readings "
                         "that pool per-layer values)")
    as_array = lambda values: None if values is None else np.asarray(values, dtype=np.float64)
    return np.asarray(SIGMA_H_FROM_LAYERS[reading](as_array(layer_std), as_array(layer_mean)))


def _row_slices(t_q: int) -> tuple[slice, slice, slice]:
    return slice(0, t_q), slice(1, t_q), slice(t_q - 1, t_q)


def reading_state(attentions: Attentions, eps: float = EPS) -> ReadingState:
    """Sufficient statistics of one chunk of attention (shapes in the module docstring)."""
    a = as_layer_tensor(attentions)  # (L, B, H, T, T)
    n_layers, batch, n_heads, t_q, _ = a.shape
    entropy = -(a * torch.log(a + eps)).sum(-1)  # (L, B, H, T)
    grams, entropy_sums, n_rows = [], [], []
    for rows in _row_slices(t_q):
        x = a[:, :, :, rows].permute(0, 2, 1, 3, 4).reshape(n_layers * n_heads, -1)  # (L*H, B*|R|*T)
        grams.append(x @ x.T)
        entropy_sums.append(entropy[..., rows].sum(dim=(1, 3)))
        n_rows.append(float(batch * len(range(t_q)[rows])))
    patterns = a.flatten(3)  # (L, B, H, T*T)
    norms = patterns.norm(dim=-1, keepdim=True) + eps
    cosine = (patterns / norms) @ (patterns / norms).transpose(-2, -1)  # (L, B, H, H)
    off_diagonal = cosine.sum((-2, -1)) - torch.diagonal(cosine, dim1=-2, dim2=-1).sum(-1)
    example_cosine = off_diagonal / (n_heads * (n_heads - 1)) if n_heads > 1 else torch.full_like(off_diagonal, float("nan"))
    f64 = dict(dtype=torch.float64, device=a.device)
    return ReadingState(
        gram=torch.stack(grams), entropy_sum=torch.stack(entropy_sums), n_rows=torch.tensor(n_rows, **f64),
        example_cosine_sum=example_cosine.sum(1), row_std_sum=entropy.std(dim=2, correction=0).sum(dim=(1, 2)),
        n_examples=torch.tensor(float(batch), **f64), n_layers=n_layers, n_heads=n_heads,
    )


def merge_reading_states(*states: ReadingState) -> ReadingState:
    """The state of the union of the chunks' examples (all sums add)."""
    first = states[0]
    if any((s.n_layers, s.n_heads) != (first.n_layers, first.n_heads) for s in states):
        raise ValueError("reading states of different shapes (layers, heads) cannot be merged")
    summed = {name: sum(getattr(s, name) for s in states) for name in ReadingState._fields[:6]}
    return ReadingState(**summed, n_layers=first.n_layers, n_heads=first.n_heads)


def _mean_off_diagonal(cosine: Tensor) -> Tensor:
    n = cosine.shape[-1]
    if n < 2:
        return torch.full(cosine.shape[:-2], float("nan"), dtype=cosine.dtype, device=cosine.device)
    return (cosine.sum((-2, -1)) - torch.diagonal(cosine, dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))


def _layer_blocks(gram: Tensor, n_layers: int, n_heads: int) -> Tensor:
    """The ``(L, H, H)`` per-layer diagonal blocks of an ``(L*H, L*H)`` Gram."""
    blocks = gram.view(n_layers, n_heads, n_layers, n_heads)
    return torch.stack([blocks[layer, :, layer] for layer in range(n_layers)])


def reading_values(state: ReadingState, eps: float = EPS) -> Dict[str, Dict[str, float]]:
    """``{reading: {"mean_similarity": s_bar, "entropy_std": sigma_H}}`` for every reading."""
    n_layers, n_heads = state.n_layers, state.n_heads
    out: Dict[str, Dict[str, float]] = {}
    per_layer = {}
    for index, rows in enumerate(ROW_SETS):
        gram = state.gram[index]
        s_bar = _mean_off_diagonal(cosine_from_gram(_layer_blocks(gram, n_layers, n_heads), eps))  # (L,)
        entropies = state.entropy_sum[index] / state.n_rows[index]  # (L, H)
        per_layer[rows] = (s_bar, entropies.std(dim=-1, correction=0).cpu().numpy(), entropies.mean(dim=-1).cpu().numpy())
        if rows == "all":
            out["pooled"] = {"mean_similarity": float(_mean_off_diagonal(cosine_from_gram(gram, eps)))}
    sigma = lambda reading, rows="all": float(sigma_h_from_layers(reading, *per_layer[rows][1:]))
    s_bar = per_layer["all"][0]
    out["pooled"]["entropy_std"] = sigma("pooled")
    out["released"] = {"mean_similarity": float(s_bar.mean()), "entropy_std": sigma("released")}
    out["max_layer"] = {"mean_similarity": float(s_bar.min()), "entropy_std": sigma("max_layer")}
    out["sum_layers"] = {"mean_similarity": float(s_bar.mean()), "entropy_std": sigma("sum_layers")}
    n_all_rows = state.n_rows[0]
    out["per_row"] = {"mean_similarity": float((state.example_cosine_sum / state.n_examples).mean()),
                      "entropy_std": float((state.row_std_sum / n_all_rows).mean())}
    for rows in ("no_row0", "last_row"):  # the released reading on another set of query rows
        out[rows] = {"mean_similarity": float(per_layer[rows][0].mean()), "entropy_std": sigma("released", rows)}
    return {name: out[name] for name in READINGS}


def head_entropies(state: ReadingState) -> Tensor:
    """The ``(L, H)`` mean row entropy of every head over all query rows and examples (nats): the
    numbers whose spread sigma_H is, kept per head so that any subset of heads can be re-read."""
    return state.entropy_sum[0] / state.n_rows[0]


def _max_population_std(n: int, upper: float) -> float:
    """The largest population std of ``n`` numbers in ``[0, upper]``: half of them at each end,
    ``upper / 2`` for even ``n`` and ``upper / 2 * sqrt(1 - 1 / n^2)`` for odd ``n``."""
    return 0.0 if n < 2 else upper / 2 * math.sqrt(1 - (n % 2) / n**2)


def sigma_h_bound(reading: str, seq_len: int = 3, causal: bool = True, n_layers: int = 4, n_heads: int = 8) -> float:
    r"""The largest sigma_H (nats) a reading can take on sequences of ``seq_len`` tokens.

    A query row that sees ``k`` keys has entropy at most ``ln k``: under a causal mask row ``q``
    sees ``q + 1`` keys, without one every row sees ``T``. A head's mean row entropy is then at
    most ``M = mean_q ln(keys_q)`` over the rows the reading uses (``(0 + ln 2 + ln 3) / 3 =
    0.597`` for ``[a, b, =]`` with a causal mask), and a population std of ``n`` numbers in
    ``[0, M]`` is at most ``M / 2`` (:func:`_max_population_std`). Per reading: ``released``,
    ``max_layer`` and ``per_row`` over ``H`` heads; ``pooled`` over ``L H``; ``sum_layers`` ``L``
    times the per-layer bound; ``no_row0`` and ``last_row`` on their rows. A published value above
    a reading's bound cannot have come from that reading on those inputs.

    >>> round(sigma_h_bound("released"), 4), round(sigma_h_bound("sum_layers"), 4)
    (0.2986, 1.1945)
    >>> round(sigma_h_bound("released", seq_len=4), 4), round(sigma_h_bound("released", causal=False), 4)
    (0.3973, 0.5493)
    """
    if reading not in READINGS:
        raise ValueError(f"reading={reading!r}: expected one of {', '.join(READINGS)}")
    if seq_len < 1 or n_layers < 1 or n_heads < 1:
        raise ValueError(f"seq_len, n_layers and n_heads must be >= 1, got {seq_len}, {n_layers}, {n_heads}")
    keys = [q + 1 if causal else seq_len for q in range(seq_len)]
    rows = {"no_row0": keys[1:] or keys, "last_row": keys[-1:]}.get(reading, keys)
    upper = sum(math.log(k) for k in rows) / len(rows)
    per_layer = _max_population_std(n_heads, upper)
    if reading == "pooled":
        return _max_population_std(n_layers * n_heads, upper)
    return n_layers * per_layer if reading == "sum_layers" else per_layer


def attention_readings(attentions: Attentions, eps: float = EPS) -> Dict[str, Dict[str, float]]:
    """s_bar and sigma_H of ``attentions`` under every reading (module docstring).

    ``released`` equals :func:`~grok_lightning.metrics.attention_statistics`'s layer means.

    Example (two layers, 4 heads: two uniform, two attending to the first key):
        >>> import torch
        >>> uniform = torch.full((3, 3), 1 / 3)
        >>> first = torch.zeros(3, 3); first[:, 0] = 1
        >>> layer = torch.stack([uniform, uniform, first, first]).expand(5, 4, 3, 3)  # (B, H, T, T)
        >>> values = attention_readings([layer, layer])
        >>> round(values["released"]["entropy_std"], 4), round(values["last_row"]["entropy_std"], 4)
        (0.5493, 0.5493)
        >>> round(values["per_row"]["entropy_std"], 4), round(values["pooled"]["mean_similarity"], 4)
        (0.5493, 0.7585)
    """
    return reading_values(reading_state(attentions, eps), eps)


class AttentionReadings(Metric):
    """torchmetrics wrapper: ``update(attentions)`` per chunk, ``compute()`` -> every reading.

    States are the sum-reduced :class:`ReadingState` fields, so chunks and DDP ranks add up to the
    one-shot value. ``compute()`` returns ``{reading: {"mean_similarity", "entropy_std"}}``.

    Example:
        >>> import torch
        >>> a = torch.rand(6, 4, 3, 3).softmax(-1)
        >>> metric = AttentionReadings()
        >>> metric.update([a[:2]]); metric.update([a[2:]])
        >>> whole = attention_readings([a])
        >>> all(abs(metric.compute()[r]["entropy_std"] - whole[r]["entropy_std"]) < 1e-12 for r in whole)
        True
    """

    full_state_update = False
    higher_is_better = None

    def __init__(self, eps: float = EPS, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps
        self.shape: Optional[tuple[int, int]] = None
        for name in ReadingState._fields[:6]:
            self.add_state(name, default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, attentions: Attentions) -> None:
        new = reading_state(attentions, self.eps)
        if self.shape not in (None, (new.n_layers, new.n_heads)):
            raise ValueError(f"attention shape changed between updates: {self.shape} then {(new.n_layers, new.n_heads)}")
        self.shape = (new.n_layers, new.n_heads)
        for name in ReadingState._fields[:6]:
            setattr(self, name, getattr(self, name) + getattr(new, name))

    def state(self) -> ReadingState:
        if self.shape is None:
            raise RuntimeError("no attention has been accumulated yet")
        return ReadingState(*(getattr(self, name) for name in ReadingState._fields[:6]), *self.shape)

    def compute(self) -> Dict[str, Dict[str, float]]:
        return reading_values(self.state(), self.eps)
