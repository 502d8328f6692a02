r"""Checkpoint spectra for the long-horizon figures (arXiv 2605.20441 section 4.5: Fig. 6, Table 3, Fig. 7).

**ESD alpha** (Fig. 7). The paper reports WeightWatcher's power-law exponent of each weight
matrix's empirical spectral density, median over layers. WeightWatcher delegates the fit to the
``powerlaw`` package, i.e. the Clauset-Shalizi-Newman (2009) continuous estimator. This module
implements that estimator in numpy (neither package is a runtime dependency);
``tests/test_esd_powerlaw.py`` checks it against ``powerlaw`` (dev extra):

* eigenvalues ``lambda_i = s_i^2``: squared singular values of ``W`` (the non-zero spectrum of
  ``W^T W``; ``min(M, N)`` values), numerical zeros (``<= 1e-12 * max``) dropped;
* for a lower cut-off ``xmin`` the continuous power-law MLE on the tail ``x >= xmin``,
  ``alpha = 1 + n / sum_i ln(x_i / xmin)`` (no finite-size correction, as ``powerlaw``), with
  standard error ``(alpha - 1) / sqrt(n)``;
* ``xmin`` = the candidate (each distinct eigenvalue leaving at least ``min_tail`` = 10 points in
  the tail) that minimises the Kolmogorov-Smirnov distance
  ``D = sup_x |S(x) - P(x)|`` between the tail's empirical CDF ``S`` and the fitted
  ``P(x) = 1 - (x / xmin)^(1 - alpha)``; ties go to the smaller ``xmin`` (longer tail).

At the same ``xmin`` the alpha equals ``powerlaw``'s to round-off. ``powerlaw`` evaluates the KS
distance at the data points only (one side of each step), so it can pick another ``xmin``; the
alphas then differ by less than their standard error. Results can also differ from WeightWatcher
where its defaults differ (its ``fix_fingers``/``xmax`` options, its layer selection).

**C1 identity table** (Table 3). For each checkpoint and layer, the eigenvalues ``a_k`` of the
H x H head-pattern covariance (default construction ``examples``; any construction with one
spectrum per layer, :mod:`grok_lightning.metrics.participation`) give ``R = (sum a)^2 / sum a^2`` and, exactly,
``R = H / (1 + CV^2)`` with the population CV of the ``a_k``; the paper's table uses the sample CV
(torch ``unbiased=True``) converted by ``var_pop = var_sample (H - 1) / H``. The per-row error of
the identity is at round-off level; the reference JSON reports 2.6e-7 for PR_norm (float32
checkpoints).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Mapping

import numpy as np
import torch

from grok_lightning.metrics.functional import (
    coefficient_of_variation,
    normalize_participation_ratio,
    participation_identity_error,
    participation_ratio,
    participation_ratio_from_cv,
)
from grok_lightning.metrics.participation import (
    DEFAULT_PR_CONSTRUCTION,
    parse_pr_construction,
    pr_covariance_eigenvalues,
    pr_state_update,
)

__all__ = ["ESDFit", "ModelESD", "TABLE3_PHASES", "esd_alpha", "esd_eigenvalues", "fit_power_law",
           "head_covariance_eigenvalues", "model_esd_alpha", "pr_identity_rows", "pr_norm_checkpoint_table"]

ZERO_TOL = 1e-12

#: Phase labels the reference c1_empirical_validation.json gives the paper's 11 checkpoint epochs.
TABLE3_PHASES = {100: "P0_init", 500: "P1_sync", 1000: "P1_sync", 2500: "P2_diff", 5000: "P3_resync",
                 7500: "P3_resync", 10000: "P4_2nd_diff", 12500: "P4_2nd_diff", 15000: "P5_collapse",
                 17500: "P5_collapse", 20000: "P5_collapse"}


# --- ESD alpha ------------------------------------------------------------------------------
@dataclass
class ESDFit:
    alpha: float
    xmin: float
    ks_distance: float
    n_tail: int
    n_eigs: int
    sigma: float  # standard error of alpha, (alpha - 1) / sqrt(n_tail)

    def to_dict(self) -> dict:
        return asdict(self)


def fit_power_law(values, min_tail: int = 10, xmin: float | None = None) -> ESDFit:
    """Clauset-Shalizi-Newman continuous power-law fit of positive ``values`` (module docstring).

    >>> rng = np.random.default_rng(0)
    >>> fit = fit_power_law((1 - rng.random(5000)) ** (-1 / 1.5))  # Pareto, alpha = 2.5
    >>> abs(fit.alpha - 2.5) < 0.1
    True
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"fit_power_law: need finite values, got {x.size} values with non-finite entries or none")
    if (x <= 0).any():
        raise ValueError("fit_power_law: values must be > 0 (drop zero eigenvalues first)")
    if min_tail < 2:
        raise ValueError(f"fit_power_law: min_tail must be >= 2, got {min_tail}")
    x = np.sort(x)
    n_all = x.size
    if n_all < min_tail:
        raise ValueError(f"fit_power_law: {n_all} values, fewer than min_tail={min_tail}")
    logs = np.log(x)
    suffix = np.cumsum(logs[::-1])[::-1]  # suffix[k] = sum(logs[k:])
    if xmin is None:
        first = np.flatnonzero(np.r_[True, x[1:] > x[:-1]])  # first index of each distinct value
        candidates = first[n_all - first >= min_tail]
    else:
        candidates = np.array([int(np.searchsorted(x, xmin, side="left"))])
        if n_all - candidates[0] < min_tail:
            raise ValueError(f"fit_power_law: xmin={xmin} leaves fewer than min_tail={min_tail} values")
    best = None
    for k in candidates:
        n = n_all - k
        denom = suffix[k] - n * logs[k]
        if denom <= 0:  # the tail is one repeated value: no exponent
            continue
        alpha = 1 + n / denom
        cdf = 1 - np.exp((1 - alpha) * (logs[k:] - logs[k]))
        steps = np.arange(1, n + 1) / n
        ks = max(float(np.max(steps - cdf)), float(np.max(cdf - (steps - 1 / n))))
        if best is None or ks < best[0]:
            best = (ks, alpha, float(x[k]), n)
    if best is None:
        raise ValueError("fit_power_law: all candidate tails are constant; the exponent is undefined")
    ks, alpha, x0, n = best
    return ESDFit(float(alpha), x0, ks, int(n), int(n_all), float((alpha - 1) / math.sqrt(n)))


def esd_eigenvalues(matrix) -> np.ndarray:
    """Non-zero eigenvalues of ``W^T W`` (= squared singular values of the 2-D ``W``), ascending."""
    w = torch.as_tensor(matrix).detach()
    if w.dim() != 2:
        raise ValueError(f"esd_eigenvalues: need a 2-D weight matrix, got shape {tuple(w.shape)}")
    if w.numel() == 0 or not torch.isfinite(w).all():
        raise ValueError(f"esd_eigenvalues: matrix of shape {tuple(w.shape)} is empty or has non-finite entries")
    eig = (torch.linalg.svdvals(w.to(torch.float64)) ** 2).cpu().numpy()
    eig = np.sort(eig)
    return eig[eig > ZERO_TOL * eig[-1]] if eig[-1] > 0 else eig[:0]


def esd_alpha(matrix, min_tail: int = 10) -> ESDFit:
    """Power-law exponent of the ESD of one weight matrix (WeightWatcher's ``alpha``)."""
    eig = esd_eigenvalues(matrix)
    if eig.size < min_tail:
        raise ValueError(f"esd_alpha: matrix of shape {tuple(np.shape(matrix))} has {eig.size} non-zero "
                         f"eigenvalues, fewer than min_tail={min_tail}")
    return fit_power_law(eig, min_tail=min_tail)


@dataclass
class ModelESD:
    alpha: float  # median over the fitted matrices (NaN if none)
    per_matrix: dict = field(default_factory=dict)  # name -> ESDFit
    skipped: dict = field(default_factory=dict)  # name -> reason

    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "per_matrix": {k: v.to_dict() for k, v in self.per_matrix.items()},
                "skipped": dict(self.skipped)}


def model_esd_alpha(state_dict: Mapping, min_eigs: int = 10, min_tail: int = 10,
                    include: str | None = None) -> ModelESD:
    """Median ESD alpha over the 2-D floating-point weights of a state dict (Fig. 7's "layer median").

    Accepts a ``CheckpointSchedule`` file's payload too (its ``"state_dict"`` is used). Matrices with
    fewer than ``min_eigs`` (10, WeightWatcher's current ``min_evals``) non-zero eigenvalues, e.g.
    the 3 x d positional embedding, are skipped with the reason; ``include`` is an optional regex
    on parameter names.
    """
    if isinstance(state_dict.get("state_dict"), Mapping):
        state_dict = state_dict["state_dict"]
    result = ModelESD(alpha=math.nan)
    for name, tensor in state_dict.items():
        if not (torch.is_tensor(tensor) and tensor.dim() == 2 and tensor.is_floating_point()):
            continue
        if include is not None and not re.search(include, name):
            continue
        if min(tensor.shape) < min_eigs:
            result.skipped[name] = f"shape {tuple(tensor.shape)}: fewer than min_eigs={min_eigs} eigenvalues"
            continue
        try:
            result.per_matrix[name] = esd_alpha(tensor, min_tail=min_tail)
        except ValueError as err:
            result.skipped[name] = str(err)
    if result.per_matrix:
        result.alpha = float(np.median([fit.alpha for fit in result.per_matrix.values()]))
    return result


# --- C1 identity table ----------------------------------------------------------------------
def head_covariance_eigenvalues(features, construction: str = DEFAULT_PR_CONSTRUCTION) -> torch.Tensor:
    """``(L, H)`` eigenvalues (ascending, clipped at 0) of each layer's head covariance.

    ``features``: the layers' attention probabilities (a list of ``(B, H, T, T)`` or one
    ``(L, B, H, T, T)``), or head outputs for an ``output_`` construction; the covariance is the
    one behind ``pr_norm`` (:func:`grok_lightning.metrics.participation.pr_covariance`).
    ``per_example`` has no single spectrum per layer and is refused.
    """
    if parse_pr_construction(construction)[1] == "per_example":
        raise ValueError("the per_example construction has one spectrum per example, not one per layer: "
                         "no C1 row")
    return pr_covariance_eigenvalues(pr_state_update(features), construction)


def pr_identity_rows(eigenvalues, epoch: int | None = None) -> list[dict]:
    """One C1 row per layer of ``(L, H)`` (or ``(H,)``) non-negative eigenvalues.

    Row keys: ``pr``, ``pr_norm`` ((R-1)/(H-1), paper text), ``pr_norm_ratio`` (R/H, Lean),
    ``cv`` (population) and ``cv_sample`` (ddof 1), ``cv2`` (population), ``pr_c1 = H/(1+CV^2)``,
    ``pr_norm_c1`` (from the sample CV with the var_pop correction, as the paper's table),
    ``identity_error = |R/H - 1/(1+CV^2)|``, ``pr_error``, ``pr_norm_error``. A layer whose
    eigenvalues are all 0 (rank collapse: PR undefined) is ``valid: False`` and has NaN values.

    >>> row = pr_identity_rows(torch.tensor([3.0, 1.0, 0.5, 0.0]))[0]
    >>> round(row["pr"], 6), row["identity_error"] < 1e-12
    (1.97561, True)
    """
    a = torch.as_tensor(eigenvalues, dtype=torch.float64)
    a = a.unsqueeze(0) if a.dim() == 1 else a
    if a.dim() != 2 or a.shape[-1] < 2:
        raise ValueError(f"pr_identity_rows: need (L, H) or (H,) eigenvalues with H >= 2, got {tuple(a.shape)}")
    if (a < -1e-12 * a.abs().amax().clamp_min(1e-300)).any():
        raise ValueError("pr_identity_rows: eigenvalues must be non-negative (a covariance spectrum)")
    a = a.clamp_min(0)
    n = a.shape[-1]
    pr = participation_ratio(a)
    cv = coefficient_of_variation(a, ddof=0)
    cv_sample = coefficient_of_variation(a, ddof=1)
    pr_c1 = n / (1 + cv**2)
    values = {
        "pr": pr,
        "pr_norm": normalize_participation_ratio(pr, n, "affine"),
        "pr_norm_ratio": normalize_participation_ratio(pr, n, "ratio"),
        "cv": cv, "cv_sample": cv_sample, "cv2": cv**2, "pr_c1": pr_c1,
        "pr_norm_c1": participation_ratio_from_cv(cv_sample, n, "affine", ddof=1),
        "identity_error": participation_identity_error(a),
    }
    values["pr_error"] = (pr - pr_c1).abs()
    values["pr_norm_error"] = (values["pr_norm"] - values["pr_norm_c1"]).abs()
    rows = []
    for layer in range(a.shape[0]):
        valid = bool(a[layer].sum() > 0)
        row = {"epoch": epoch, "layer": layer, "n": n, "valid": valid}
        row.update({k: float(v[layer]) if valid else math.nan for k, v in values.items()})
        rows.append(row)
    return rows


def pr_norm_checkpoint_table(checkpoints: Mapping[int, object], source: str = "eigenvalues",
                             phases: Mapping[int, str] | None = None) -> dict:
    """Table 3: the C1 identity per checkpoint, per layer and layer-averaged.

    Args:
        checkpoints: ``{epoch: x}`` with ``x`` the ``(L, H)`` covariance eigenvalues
            (``source="eigenvalues"``) or the layers' attention probabilities
            (``source="attention"``: a list of ``(B, H, T, T)`` or one ``(L, B, H, T, T)``,
            under the default PR construction).
        phases: epoch -> phase label; default :data:`TABLE3_PHASES` (None for other epochs).

    Returns ``{"rows": [...], "table": [...], "max_identity_error": ..., "max_pr_error": ...,
    "max_pr_norm_error": ..., "n_valid_rows": ..., "n_skipped": ...}``. ``rows`` are
    :func:`pr_identity_rows`; each ``table`` entry averages the valid layers of one epoch under the
    reference JSON's names (``mean_CV_lambda`` = mean sample CV, ``mean_PR_norm_measured``,
    ``mean_PR_norm_predicted_C1_corrected``, ``phase_label``) plus ``mean_PR_norm_ratio`` and
    ``n_layers``. Layers with undefined PR are skipped, as the paper's "rank-collapse markers".
    """
    if source not in ("eigenvalues", "attention"):
        raise ValueError(f"source must be 'eigenvalues' or 'attention', got {source!r}")
    phases = TABLE3_PHASES if phases is None else phases
    rows, table = [], []
    for epoch in sorted(checkpoints):
        data = checkpoints[epoch]
        eig = head_covariance_eigenvalues(data) if source == "attention" else data
        layer_rows = pr_identity_rows(eig, epoch=int(epoch))
        rows += layer_rows
        valid = [r for r in layer_rows if r["valid"]]
        mean = (lambda key: float(np.mean([r[key] for r in valid])) if valid else math.nan)
        table.append({"epoch": int(epoch), "n_layers": len(valid), "mean_CV_lambda": mean("cv_sample"),
                      "mean_PR_norm_measured": mean("pr_norm"),
                      "mean_PR_norm_predicted_C1_corrected": mean("pr_norm_c1"),
                      "mean_PR_norm_ratio": mean("pr_norm_ratio"), "phase_label": phases.get(int(epoch))})
    valid = [r for r in rows if r["valid"]]
    worst = (lambda key: max((r[key] for r in valid), default=math.nan))
    return {"rows": rows, "table": table, "max_identity_error": worst("identity_error"),
            "max_pr_error": worst("pr_error"), "max_pr_norm_error": worst("pr_norm_error"),
            "n_valid_rows": len(valid), "n_skipped": len(rows) - len(valid)}
