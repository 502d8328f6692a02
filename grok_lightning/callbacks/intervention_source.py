"""What the E12 control run (group A) leaves for the interventions: a checkpoint at its peak
differentiation and each weight matrix's norm trajectory.

Groups B and C start from the control run's checkpoint at the intervention epoch E (the control
run's epoch of peak sigma_H in (``after_epoch``, ``before_epoch``]), so all three are identical up to E and B and
C cost only the epochs after E. E is only known when the control run ends, so
:class:`InterventionSource` keeps one rolling checkpoint, ``<log_dir>/checkpoints/peak.ckpt``,
rewritten whenever sigma_H reaches a new maximum inside that range: when the run ends it is the
checkpoint at E (strictly greater, so ties keep the first epoch, as ``argmax`` does).
``before_epoch`` bounds E so that every group keeps a post-intervention window of
``max_epochs - before_epoch`` epochs: a shortened horizon would otherwise let a late,
post-grokking maximum leave B and C almost nothing to be scored on.

It keeps a second rolling checkpoint, ``peak_before_grok.ckpt``, at the maximum over the
evaluations before the first with test accuracy >= ``grok_threshold``: the paper describes its E
as falling before grokking, and where the whole-run argmax falls after it, a group can start from
the pre-grokking argmax instead (a sensitivity variant), with no replay from scratch.

It also records, at every evaluation, the norm of each weight matrix group C may clip; C's
``reference: trajectory`` clips each matrix to the median of its own norm over the run up to E.
The trajectory is part of the callback state, so it travels inside the peak checkpoint to B and C.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import ConfigError, require

__all__ = ["InterventionSource", "chosen_matrices", "matrix_norm", "NORMS", "MATRIX_SETS"]

NORMS = ("spectral", "frobenius")
MATRIX_SETS = ("blocks", "attention", "all")


def chosen_matrices(model: torch.nn.Module, matrices: str) -> dict[str, torch.nn.Parameter]:
    """The 2-D weights an intervention acts on: ``blocks`` (qkv, out and both MLP layers of every
    block), ``attention`` (qkv and out only) or ``all`` (embeddings and head too)."""
    keep = {n: p for n, p in model.named_parameters() if p.ndim == 2}
    if matrices == "blocks":
        keep = {n: p for n, p in keep.items() if n.startswith("blocks.")}
    elif matrices == "attention":
        keep = {n: p for n, p in keep.items() if n.startswith("blocks.") and ".attn." in n}
    if not keep:
        raise ConfigError(f"matrices={matrices!r}: no such weight matrices in this model")
    return keep


def matrix_norm(w: torch.Tensor, norm: str) -> float:
    w = w.detach().double()
    return float(torch.linalg.matrix_norm(w, ord=2) if norm == "spectral" else torch.linalg.matrix_norm(w))


class InterventionSource(Callback):
    """Attach to the control run: peak checkpoint and per-matrix norm trajectory.

    Args:
        after_epoch: the peak is taken over epochs > this (the paper skips the first 100).
        before_epoch: ... and <= this (None: to the end of the run, the paper's reading).
        metric: the history key whose maximum is the peak (sigma_H).
        save_peak: write ``peak.ckpt`` and ``peak_before_grok.ckpt`` (groups started from
            them turn this off).
        norm, matrices: which norms to record (those group C clips).
        grok_threshold: test accuracy that ends "before grokking" for the second checkpoint.
    """

    def __init__(self, after_epoch: int = 100, metric: str = "entropy_std", save_peak: bool = True,
                 norm: str = "spectral", matrices: str = "blocks", before_epoch: int | None = None,
                 grok_threshold: float = 0.99):
        require(norm in NORMS, "intervention_source.norm", norm, "spectral or frobenius")
        require(before_epoch is None or before_epoch > after_epoch, "intervention_source.before_epoch", before_epoch,
                f"None or an epoch after after_epoch ({after_epoch})")
        require(matrices in MATRIX_SETS, "intervention_source.matrices", matrices, "blocks, attention or all")
        self.after_epoch, self.before_epoch, self.metric, self.save_peak = after_epoch, before_epoch, metric, save_peak
        self.norm, self.matrices = norm, matrices
        self.peak_value, self.peak_epoch = -math.inf, None
        self.grok_threshold, self.grokked = grok_threshold, False
        self.pre_grok_value, self.pre_grok_epoch = -math.inf, None
        self.norm_epochs: list[int] = []
        self.norms: dict[str, list[float]] = {}
        self._save_now: list[str] = []  # checkpoint names to write at this epoch's end

    def state_dict(self) -> dict:
        return {"peak_value": self.peak_value, "peak_epoch": self.peak_epoch, "norm_epochs": self.norm_epochs,
                "norms": self.norms, "norm": self.norm, "matrices": self.matrices, "grokked": self.grokked,
                "pre_grok_value": self.pre_grok_value, "pre_grok_epoch": self.pre_grok_epoch}

    def load_state_dict(self, state_dict: dict) -> None:
        self.peak_value, self.peak_epoch = state_dict["peak_value"], state_dict["peak_epoch"]
        # absent from checkpoints written before the pre-grokking checkpoint existed: start it here
        self.grokked = state_dict.get("grokked", False)
        self.pre_grok_value = state_dict.get("pre_grok_value", -math.inf)
        self.pre_grok_epoch = state_dict.get("pre_grok_epoch")
        self.norm_epochs, self.norms = list(state_dict["norm_epochs"]), dict(state_dict["norms"])

    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        if not self.norm_epochs or epoch > self.norm_epochs[-1]:
            self.norm_epochs.append(int(epoch))
            for name, weight in chosen_matrices(pl_module.model, self.matrices).items():
                self.norms.setdefault(name, []).append(matrix_norm(weight, self.norm))
        value = metrics.get(self.metric)
        accuracy = metrics.get("test_acc")
        self.grokked = self.grokked or (accuracy is not None and accuracy >= self.grok_threshold)
        in_range = self.after_epoch < epoch and (self.before_epoch is None or epoch <= self.before_epoch)
        if not (in_range and value is not None and math.isfinite(value)):
            return
        if value > self.peak_value:
            self.peak_value, self.peak_epoch = float(value), int(epoch)
            self._save_now += ["peak.ckpt"] if self.save_peak else []
        if not self.grokked and value > self.pre_grok_value:
            self.pre_grok_value, self.pre_grok_epoch = float(value), int(epoch)
            self._save_now += ["peak_before_grok.ckpt"] if self.save_peak else []
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras["intervention_source"] = {
                "peak_epoch": self.peak_epoch, "peak_value": self.peak_value,
                "checkpoint": str(self.peak_path(trainer)) if self.save_peak else None,
                "range": [self.after_epoch, self.before_epoch],
                "before_grok": {"peak_epoch": self.pre_grok_epoch, "peak_value": self.pre_grok_value
                                if self.pre_grok_epoch is not None else None, "grok_threshold": self.grok_threshold}}

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # after the evaluation chain (the recorder has appended this epoch's row), so the
        # checkpoint holds the history up to and including the peak epoch
        names, self._save_now = self._save_now, []
        for name in names:
            path = self.peak_path(trainer, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            trainer.save_checkpoint(path, weights_only=False)  # the full state, as ResumeCheckpoint.save

    @staticmethod
    def peak_path(trainer: Trainer, name: str = "peak.ckpt") -> Path:
        return Path(trainer.log_dir or ".") / "checkpoints" / name

    def median_norms(self, up_to_epoch: int) -> dict[str, float]:
        """Each matrix's median norm over the evaluations at epochs <= ``up_to_epoch``."""
        keep = [i for i, e in enumerate(self.norm_epochs) if e <= up_to_epoch]
        if not keep:
            raise ConfigError(f"no recorded weight norms up to epoch {up_to_epoch}")
        return {name: statistics.median(values[i] for i in keep) for name, values in self.norms.items()}

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.save_peak and hasattr(trainer, "optimizer_state_of"):  # an ensemble member's trainer view
            raise ConfigError("intervention_source.save_peak: a peak checkpoint is one run's; "
                              "train the control runs without --ensemble-size")
