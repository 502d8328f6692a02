"""Refined local learning coefficient (rLLC) of a checkpoint with devinterp's SGLD, and the cost of sigma_H.

The paper (arXiv 2605.20441) compares sigma_H with the rLLC on the 11 checkpoints of its long run
(Pearson r = 0.46, 95% CI [-0.20, 0.82], n = 11), using devinterp 1.0.0 with 3 chains x 200 draws;
every other SGLD setting and the restriction of the "refined" LLC are [NF]. Our choices:

* **Restriction: the attention weights** (``restrict="attention"``): the SGLD chain moves only the
  parameters of every block's attention (fused QKV projection and output projection, weights and
  biases); embeddings, MLPs, LayerNorms and the head stay at the checkpoint. This is the weight-
  refined LLC of Wang et al. (2024) for the subnetwork that sigma_H describes. ``"attention:<i>"``
  restricts to one layer, ``"all"`` gives the plain LLC, a callable ``name -> bool`` anything else.
* **Data: the run's own training split** (the loss whose local geometry the LLC measures), the
  per-example cross-entropy of the answer token, as in training.
* **Estimator (devinterp 1.x definition):** ``LLC = nbeta * (mean loss over the post-burn-in draws
  - loss at the checkpoint)`` per chain, mean and population std (ddof 0) over chains.
  devinterp 2.x's own ``compute_llc`` also averages the burn-in steps; it is returned as
  ``devinterp_llc_mean`` for reference.

SGLD settings (:class:`SGLDSettings`, all explicit): step size ``lr`` (epsilon), localization
``gamma``, inverse temperature ``nbeta`` (default ``batch_size / ln(batch_size)``, devinterp's
``default_nbeta``), ``num_chains``, ``num_draws``, ``num_burnin_steps``, ``num_steps_bw_draws``,
``batch_size``, ``seed``. The defaults (lr 3e-6, gamma 3e4, nbeta = 256 / ln 256 = 46.2, batch 256,
3 chains x 200 draws after 100 burn-in steps) were calibrated on the smoke model (2L x 4H, d 64,
lambda = 1; docs/predict_and_llc.md): the top Hessian eigenvalue of the training loss in the
attention weights grows from 0.27 (epoch 10) to 382 (epoch 100) to 3,055 (epoch 300, grokked), so
plain SGLD is stable only for ``lr * nbeta * lambda_max / 2 < 2``; with the devinterp-style
gamma = 100 or nbeta >= 500 the chains left the basin (loss at chance, "LLC" = nbeta x 4.5). With
the defaults the post-burn-in trace is flat at every checkpoint and the estimate moves < 15% between
lr = 1e-6 and 3e-6. The estimate depends on gamma (localization-dominated, as usual for
transformers): compare rLLC values only at fixed settings.

Uses devinterp >= 2, < 3 (optional extra ``llc``; its sampler API changed across versions; this
module uses ``devinterp.slt.sampling.sample`` with a custom ``loss_fn``, whose signature is
``(model, input_ids) -> per-token loss (batch, seq - 1)``). Our models read ``[a, b, =]`` and
predict the answer at the last position, so the sampler's ``input_ids`` are ``[a, b, =, c]`` and
the loss is the answer's cross-entropy repeated over the 3 "token positions" (the means are the
per-example loss).
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import nn

__all__ = ["SGLDSettings", "LLCEstimate", "estimate_rllc", "restricted_parameter_names", "time_sigma_h",
           "devinterp_version"]


@dataclass(frozen=True)
class SGLDSettings:
    """SGLD sampler settings (devinterp names in brackets).

    Args:
        lr: SGLD step size epsilon [lr].
        localization: gamma, pull towards the checkpoint [localization].
        nbeta: inverse temperature n*beta [n_beta]; ``None``: ``batch_size / ln(batch_size)``.
        num_chains, num_draws: the paper's 3 x 200.
        num_burnin_steps: steps before the first draw (not in the estimate).
        num_steps_bw_draws: SGLD steps per draw.
        batch_size: minibatch of training examples per SGLD step.
        seed: chain ``k`` uses ``seed + k`` for its noise; the data order is shared by the chains.
        sampling_method: devinterp's ``"sgmcmc_sgld"`` (plain SGLD, Lau et al.) or ``"rmsprop_sgld"``
            (RMSprop-preconditioned) [sampling_method].
    """

    lr: float = 3e-6
    localization: float = 3e4
    nbeta: float | None = None
    num_chains: int = 3
    num_draws: int = 200
    num_burnin_steps: int = 100
    num_steps_bw_draws: int = 1
    batch_size: int = 256
    seed: int = 100
    sampling_method: str = "sgmcmc_sgld"

    def resolved_nbeta(self) -> float:
        """``nbeta``, or devinterp's default ``batch_size / ln(batch_size)``.

        >>> round(SGLDSettings(batch_size=256).resolved_nbeta(), 3)
        46.166
        """
        return float(self.nbeta) if self.nbeta is not None else float(self.batch_size / np.log(self.batch_size))

    def to_dict(self) -> dict:
        return {**asdict(self), "nbeta_resolved": self.resolved_nbeta()}


@dataclass
class LLCEstimate:
    """One rLLC estimate: ``mean`` and ``std`` over chains, the traces and the wall time."""

    mean: float
    std: float
    per_chain: list[float]
    init_loss: float
    draw_loss: list[list[float]]  # (chain, draw) mean minibatch loss of the post-burn-in draws
    wall_s: float
    n_parameters: int  # parameters the chains move
    restrict: str
    settings: dict
    devinterp_llc_mean: float | None = None  # devinterp 2.x compute_llc (burn-in included)
    devinterp: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self, traces: bool = False) -> dict:
        out = asdict(self)
        if not traces:
            out.pop("draw_loss")
        return out


def devinterp_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("devinterp")
    except Exception:  # not installed
        return None


def restricted_parameter_names(model: nn.Module, restrict: str | Callable[[str], bool] = "attention") -> list[str]:
    """Names of the parameters an rLLC chain may move.

    ``"attention"``: every block's attention (``blocks.<i>.attn.*``); ``"attention:<i>"``: layer
    ``i`` only; ``"all"``: every parameter; a callable: the names it accepts.

    >>> from grok_lightning.models.transformer import DecoderTransformer
    >>> restricted_parameter_names(DecoderTransformer(24, 23, d_model=8, n_layers=2, n_heads=2, d_ff=16), "attention:1")
    ['blocks.1.attn.qkv.weight', 'blocks.1.attn.qkv.bias', 'blocks.1.attn.out.weight', 'blocks.1.attn.out.bias']
    """
    names = [name for name, _ in model.named_parameters()]
    if callable(restrict):
        chosen = [n for n in names if restrict(n)]
    elif restrict == "all":
        chosen = names
    elif restrict == "attention":
        chosen = [n for n in names if ".attn." in n]
    elif isinstance(restrict, str) and restrict.startswith("attention:"):
        layer = restrict.split(":", 1)[1]
        chosen = [n for n in names if n.startswith(f"blocks.{layer}.attn.")]
    else:
        raise ValueError(f"restrict={restrict!r}: must be 'attention', 'attention:<layer>', 'all' or a callable")
    if not chosen:
        raise ValueError(f"restrict={restrict!r} selects no parameter of this model (names like {names[:3]})")
    return chosen


def _answer_loss(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """devinterp ``loss_fn``: ``[a, b, =, c]`` -> the answer's cross-entropy, shape (batch, 3)."""
    logits = model(input_ids[:, :-1])
    loss = nn.functional.cross_entropy(logits.float(), input_ids[:, -1], reduction="none")
    return loss[:, None].expand(-1, input_ids.shape[1] - 1)


@contextmanager
def _quiet_progress():
    """devinterp draws a tqdm bar per chain (``devinterp.slt.sampler.trange``); silence it for this call."""
    import functools

    from devinterp.slt import sampler

    original = sampler.trange
    sampler.trange = functools.partial(original, disable=True)
    try:
        yield
    finally:
        sampler.trange = original


def estimate_rllc(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor,
                  settings: SGLDSettings | None = None, restrict: str | Callable[[str], bool] = "attention",
                  device: str = "cpu") -> LLCEstimate:
    """rLLC of ``model`` at its current weights on the training split ``(x_train, y_train)``.

    ``x_train`` are the ``(n, 3)`` token rows ``[a, b, =]``, ``y_train`` the ``(n,)`` answers (the
    run's own split; the DataModule's ``x_train, y_train``). The model is not modified (devinterp
    samples on a copy). Raises ``ImportError`` naming the extra when devinterp is missing.
    """
    try:
        from datasets import Dataset
        from devinterp.slt.llc import compute_llc
        from devinterp.slt.sampling import sample
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("rLLC needs devinterp: pip install -e '.[llc]' (devinterp>=2,<3)") from err
    settings = settings or SGLDSettings()
    if len(y_train) < settings.batch_size:
        raise ValueError(f"batch_size={settings.batch_size} exceeds the {len(y_train)} training examples")
    names = restricted_parameter_names(model, restrict)
    n_moving = sum(p.numel() for n, p in model.named_parameters() if n in names)
    rows = torch.cat([x_train.long(), y_train.long()[:, None]], dim=1)
    dataset = Dataset.from_dict({"input_ids": rows.tolist()}).with_format("torch")
    nbeta = settings.resolved_nbeta()
    notes = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rllc_") as tmp, _quiet_progress():
        tree = sample(
            model=model, dataset=dataset, observables={}, lr=settings.lr, n_beta=nbeta,
            param_masks={n: None for n in names}, num_chains=settings.num_chains, num_draws=settings.num_draws,
            batch_size=settings.batch_size, num_burnin_steps=settings.num_burnin_steps,
            num_steps_bw_draws=settings.num_steps_bw_draws, init_seed=settings.seed,
            localization=settings.localization, sampling_method=settings.sampling_method, device=device, output_path=os.path.join(tmp, "samples.zarr"),
            loss_fn=_answer_loss)
        data = tree.dataset
        draws = np.asarray(data.sampling_loss.mean(dim=["batch", "token_pos"]).values, dtype=float)  # (chain, draw)
        init = np.asarray(data.init_loss.mean(dim="token_pos").values, dtype=float)  # (chain,)
        try:
            reference = float(compute_llc(tree).llc_mean.values)
        except Exception as err:  # reference only; never fail the estimate for it
            reference, notes = None, [f"devinterp compute_llc failed: {err!r}"]
    wall = time.perf_counter() - start
    # a failed chain (NaN loss) stops early and leaves its later draws unwritten (zarr fill value)
    finite = np.isfinite(draws).all(axis=1) & np.isfinite(init)
    if not finite.all():
        notes.append(f"{int((~finite).sum())} chain(s) with non-finite losses dropped")
    per_chain = nbeta * (draws.mean(axis=1) - init)
    kept = per_chain[finite]
    return LLCEstimate(
        mean=float(kept.mean()) if len(kept) else float("nan"), std=float(kept.std()) if len(kept) else float("nan"),
        per_chain=[float(v) for v in per_chain], init_loss=float(init.mean()), draw_loss=draws.tolist(),
        wall_s=wall, n_parameters=int(n_moving), restrict=restrict if isinstance(restrict, str) else "custom",
        settings={**settings.to_dict(), "device": device}, devinterp_llc_mean=reference,
        devinterp=devinterp_version(), notes=notes)


def time_sigma_h(model: nn.Module, x_eval: torch.Tensor, repeats: int = 5, eval_batch_size: int = 8192) -> dict:
    """Wall time of sigma_H on ``x_eval`` (the diagnostics' batch: the full test split), median of ``repeats``.

    Returns ``{"sigma_H", "s_bar", "forward_and_stats_s", "stats_only_s", "repeats"}``:
    ``forward_and_stats_s`` includes the forward pass that returns attention (what a standalone
    computation on a checkpoint costs); ``stats_only_s`` is the marginal cost during training,
    where the evaluation forward is paid anyway and the diagnostics reuse its attention.
    """
    from grok_lightning.metrics.functional import attention_statistics

    was_training = model.training
    model.eval()
    full, stats_only, value = [], [], None
    try:
        with torch.no_grad():
            for _ in range(max(1, repeats)):
                t0 = time.perf_counter()
                attentions = None
                for chunk in torch.split(x_eval, eval_batch_size):
                    _, att = model(chunk, return_attention=True)
                    attentions = att if attentions is None else [torch.cat([a, b]) for a, b in zip(attentions, att)]
                t1 = time.perf_counter()
                value = attention_statistics(attentions)
                t2 = time.perf_counter()
                full.append(t2 - t0)
                stats_only.append(t2 - t1)
    finally:
        model.train(was_training)
    return {"sigma_H": float(value["entropy_std"]), "s_bar": float(value["mean_similarity"]),
            "forward_and_stats_s": float(np.median(full)), "stats_only_s": float(np.median(stats_only)),
            "repeats": max(1, repeats)}
