"""AttentionDiagnostics: the paper's cheap online order parameters, at every evaluation.

A contributor of the evaluation pipeline (:class:`~grok_lightning.callbacks.ScheduledEvaluation`):
from the attention probabilities of the full test split, read from the evaluation's own forward
(so no extra forward pass is paid), it returns
s_bar (``mean_similarity``), sigma_H (``entropy_std``), entropy mean and range, the spectral gap
and PR_norm (both normalisations) with :class:`~grok_lightning.metrics.AttentionStatistics`.
Layer means go to the record's history and to TensorBoard as ``diag/<name>``; per-layer values
as ``diag_layer_<k>/<name>`` (one TensorBoard section per layer). It logs each layer's H x H
head-cosine matrix as an image (``head_cosine/layer_<k>``, a labelled heat map with a colour bar
on a fixed scale) every ``image_every`` evaluations, and always at the last evaluated epoch and,
given the run's :class:`~grok_lightning.callbacks.GrokDetector` (``grok``), at t_grok: the matrix
after grokking is the one the paper is about, and a cadence alone can miss it.

With ``readings`` on it also records s_bar and sigma_H under every reading of
:mod:`grok_lightning.metrics.readings` on four input sets: the test split, the train split, all
``p^2`` pairs (train + test) and a fixed batch (the first ``readings_batch`` examples of the
train split, itself a seeded random subset), as ``reading/<input set>/<reading>/<name>``, and every
head's mean row entropy on the test split as ``head_entropy/layer_<l>/head_<h>``. The
train split's attention comes from the same evaluation forward, so no forward is added.

On architectures without attention (MLP, LSTM, Mamba), or any module without ``has_attention``,
it computes nothing: it records that attention metrics are undefined for that architecture
(``record_extras["attention_metrics"]``, when the module keeps extras) and says so once in the
log; loss, accuracy and weight norm are still logged by the evaluation itself.
"""

from __future__ import annotations

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info

from grok_lightning.callbacks.dashboard import head_cosine_png, log_image
from grok_lightning.config import require_choice
from grok_lightning.metrics import AttentionStatistics
from grok_lightning.metrics.functional import cosine_from_gram
from grok_lightning.metrics.head_outputs import head_output_values
from grok_lightning.metrics.participation import DIAGNOSTICS_PR_CONSTRUCTION, PR_CONSTRUCTIONS, parse_pr_construction
from grok_lightning.metrics.readings import head_entropies, merge_reading_states, reading_state, reading_values

__all__ = ["AttentionDiagnostics"]


class AttentionDiagnostics(Callback):
    """Order parameters from attention alone, at every evaluation (or every ``every`` evaluations).

    Args:
        every: compute at every ``every``-th evaluation (1 = the paper's cadence).
        per_layer: also log and record ``layer_<k>/<name>`` values.
        image_every: log the head-cosine matrices every this many evaluations, and at t_grok
            and the last evaluated epoch (0 disables all images).
        pr_construction: the head covariance behind ``pr_norm``: any of
            :mod:`grok_lightning.metrics.participation`; default ``output_examples``, the one
            nearest the paper's Table 3, whose head outputs are read from the same forward
            (``examples`` needs the attention alone); the record says which one.
        readings: also record every reading of s_bar and sigma_H on the four input sets
            and every head's mean entropy (module docstring); off by default (56 readings and
            ``L H`` head entropies per evaluation).
        readings_batch: the size of the fixed training batch among those input sets.
        grok: the run's grokking detector (earlier in the pipeline), whose t_grok gets images.
    """

    def __init__(self, every: int = 1, per_layer: bool = True, image_every: int = 10,
                 pr_construction: str = DIAGNOSTICS_PR_CONSTRUCTION, readings: bool = False,
                 readings_batch: int = 512, grok=None):
        require_choice("diagnostics.pr_construction", pr_construction, PR_CONSTRUCTIONS)
        self.every, self.per_layer, self.image_every = every, per_layer, image_every
        self.pr_construction = pr_construction
        self.readings, self.readings_batch = readings, readings_batch
        self.grok = grok
        # what the pipeline captures for this contributor from the evaluation forward
        self.attention_splits = ("test", "train") if readings else ("test",)
        self.head_output_splits = ("test",) if parse_pr_construction(pr_construction)[0] == "output" else ()
        self.n_evaluations = 0
        self.imaged_epochs: list[int] = []  # epochs that already have images
        self._noted = False  # the "no attention" note is logged once
        self._latest: tuple[int, torch.Tensor] | None = None  # (epoch, (L, H, H) cosines) not yet imaged

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        has_attention = bool(getattr(pl_module, "has_attention", False))
        if has_attention and isinstance(getattr(pl_module, "record_extras", None), dict):
            pl_module.record_extras["pr_construction"] = self.pr_construction
        if not has_attention:
            arch = getattr(pl_module.hparams, "arch", type(pl_module).__name__)
            note = f"undefined for arch={arch}"
            extras = getattr(pl_module, "record_extras", None)
            if isinstance(extras, dict):
                extras.setdefault("attention_metrics", note)
            if not self._noted:
                rank_zero_info(f"AttentionDiagnostics: attention metrics {note}; nothing to compute")
                self._noted = True

    def contribute(self, trainer: Trainer, pl_module: LightningModule, epoch: int, row, captured) -> dict:
        """The diagnostics of this evaluation's attention (``captured.attention[split]``: per-layer
        ``(N, H, T, T)``), as ``{name: value}`` (layer means and ``layer_<k>/<name>``)."""
        self.n_evaluations += 1
        attentions = captured.attention.get("test")
        if not getattr(pl_module, "has_attention", False) or attentions is None or (self.n_evaluations - 1) % self.every:
            return {}
        metrics: dict[str, float] = {}
        source, centring = parse_pr_construction(self.pr_construction)
        statistics = AttentionStatistics(per_layer=True, pr_construction=centring)
        statistics.update(attentions)
        values = statistics.compute()
        if source == "output":  # head outputs, from the projection inputs of the same forward
            values.update(head_output_values(captured.projection_inputs["test"], self.pr_construction))
        for name, per_layer in values.items():
            metrics[name] = float(per_layer.mean())
            if self.per_layer:
                for layer, value in enumerate(per_layer.reshape(-1).tolist()):
                    metrics[f"layer_{layer}/{name}"] = value
        if self.readings:
            metrics.update(self._readings(captured.attention))
        if self.image_every:
            # the cosines behind s_bar, from the Gram the statistics already hold (no second pass)
            cosines = cosine_from_gram(statistics.gram, statistics.eps).cpu()
            at_grok = self.grok is not None and self.grok.grok_epoch == epoch
            if (self.n_evaluations - 1) % self.image_every == 0 or at_grok:
                self._log_images(trainer, cosines, epoch, " (t_grok)" if at_grok else "")
            else:
                self._latest = (epoch, cosines)  # imaged at fit end if it turns out to be the last
        return metrics

    def _readings(self, by_split: dict) -> dict[str, float]:
        train = reading_state(by_split["train"])
        test = reading_state(by_split["test"])
        states = {"test": test, "train": train, "all": merge_reading_states(train, test),
                  "batch": reading_state([layer[: self.readings_batch] for layer in by_split["train"]])}
        values = {f"reading/{inputs}/{reading}/{name}": value
                  for inputs, state in states.items()
                  for reading, values in reading_values(state).items() for name, value in values.items()}
        # every head's own mean entropy on the test split, so a subset of heads (those an
        # intervention left untouched) can be re-read from the record alone
        for layer, row in enumerate(head_entropies(test).tolist()):
            values.update({f"head_entropy/layer_{layer}/head_{head}": value for head, value in enumerate(row)})
        return values

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._latest is not None:  # whatever stopped the run (horizon, extra_epochs, a callback)
            self._log_images(trainer, self._latest[1], self._latest[0], " (final)")

    def _log_images(self, trainer: Trainer, cosines: torch.Tensor, epoch: int, note: str) -> None:
        self._latest = None
        if epoch in self.imaged_epochs:
            return
        self.imaged_epochs.append(epoch)
        for layer, matrix in enumerate(cosines):
            png, size = head_cosine_png(matrix, layer, epoch, note)
            log_image(trainer, f"head_cosine/layer_{layer}", png, size, epoch)

    def state_dict(self) -> dict:
        return {"n_evaluations": self.n_evaluations, "imaged_epochs": list(self.imaged_epochs)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.n_evaluations = state_dict.get("n_evaluations", 0)
        self.imaged_epochs = list(state_dict.get("imaged_epochs", []))
