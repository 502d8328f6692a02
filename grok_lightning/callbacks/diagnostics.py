"""AttentionDiagnostics: the paper's cheap online order parameters, at every evaluation.

From the attention probabilities of a fixed evaluation batch (default: the full test split,
collected by the module's own evaluation forward, so no extra forward pass is paid) it computes
s_bar (``mean_similarity``), sigma_H (``entropy_std``), entropy mean and range, the spectral gap
and PR_norm (both normalisations) with :class:`~grok_lightning.metrics.AttentionStatistics`.
Layer means go to the record's history and to TensorBoard as ``diag/<name>``; per-layer values
as ``diag_layer_<k>/<name>`` (one TensorBoard section per layer). Every
``image_every`` evaluations it logs each layer's H x H head-cosine matrix as an image.

On architectures without attention (MLP, LSTM, Mamba), or any module without ``has_attention``,
it computes nothing: it records that attention metrics are undefined for that architecture
(``record_extras["attention_metrics"]``, when the module keeps extras) and says so once in the
log; loss, accuracy and weight norm are still logged by the evaluation itself.
"""

from __future__ import annotations

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info

from grok_lightning.metrics import AttentionStatistics, head_cosine_matrix

__all__ = ["AttentionDiagnostics", "cosine_image"]


def cosine_image(matrix: torch.Tensor, pixels_per_head: int = 16, vmin: float = 0.5) -> torch.Tensor:
    """(H, H) cosine matrix -> (3, H*px, H*px) viridis image for TensorBoard.

    The colour scale is fixed at [vmin, 1] (default [0.5, 1]) so images compare across epochs
    and runs: head cosines of attention probabilities live in about [0.7, 1] here, and a [0, 1]
    scale painted every matrix the same yellow-green. Values below ``vmin`` saturate dark.

    >>> cosine_image(torch.eye(2), pixels_per_head=4).shape
    torch.Size([3, 8, 8])
    """
    from matplotlib import colormaps

    values = ((matrix.detach().double() - vmin) / (1 - vmin)).clamp(0, 1).cpu().numpy()
    rgb = torch.from_numpy(colormaps["viridis"](values)[..., :3]).float()  # (H, H, 3)
    rgb = rgb.repeat_interleave(pixels_per_head, 0).repeat_interleave(pixels_per_head, 1)
    return rgb.permute(2, 0, 1)


class AttentionDiagnostics(Callback):
    """Order parameters from attention alone, at every evaluation (or every ``every`` evaluations).

    Args:
        every: compute at every ``every``-th evaluation (1 = the paper's cadence).
        per_layer: also log and record ``layer_<k>/<name>`` values.
        image_every: log the head-cosine matrices every this many evaluations (0 disables).
    """

    def __init__(self, every: int = 1, per_layer: bool = True, image_every: int = 10):
        self.every, self.per_layer, self.image_every = every, per_layer, image_every
        self.n_evaluations = 0
        self._noted = False  # the "no attention" note is logged once

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        has_attention = bool(getattr(pl_module, "has_attention", False))
        pl_module.collect_attention = has_attention
        if not has_attention:
            arch = getattr(pl_module.hparams, "arch", type(pl_module).__name__)
            note = f"undefined for arch={arch}"
            extras = getattr(pl_module, "record_extras", None)
            if isinstance(extras, dict):
                extras.setdefault("attention_metrics", note)
            if not self._noted:
                rank_zero_info(f"AttentionDiagnostics: attention metrics {note}; nothing to compute")
                self._noted = True

    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        self.n_evaluations += 1
        if not getattr(pl_module, "has_attention", False):
            return
        attentions = getattr(pl_module, "last_attentions", None)
        if attentions is None or (self.n_evaluations - 1) % self.every:
            return
        statistics = AttentionStatistics(per_layer=True)
        statistics.update(attentions)
        for name, per_layer in statistics.compute().items():
            metrics[name] = float(per_layer.mean())
            if self.per_layer:
                for layer, value in enumerate(per_layer.reshape(-1).tolist()):
                    metrics[f"layer_{layer}/{name}"] = value
        if self.image_every and (self.n_evaluations - 1) % self.image_every == 0:
            self._log_images(trainer, attentions, epoch)
        pl_module.last_attentions = None

    def _log_images(self, trainer: Trainer, attentions: list[torch.Tensor], epoch: int) -> None:
        experiment = getattr(trainer.logger, "experiment", None)
        if experiment is None or not hasattr(experiment, "add_image"):
            return
        for layer, matrix in enumerate(head_cosine_matrix(attentions)):
            experiment.add_image(f"head_cosine/layer_{layer}", cosine_image(matrix), global_step=epoch)

    def state_dict(self) -> dict:
        return {"n_evaluations": self.n_evaluations}

    def load_state_dict(self, state_dict: dict) -> None:
        self.n_evaluations = state_dict.get("n_evaluations", 0)
