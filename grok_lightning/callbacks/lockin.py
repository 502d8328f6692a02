"""LockInDetector: Xu's (2026) spectral lock-in detector on the rolling first-layer update Gram.

After every optimizer step t it pushes ``Delta W_t = W_t - W_{t-1}`` (float64 difference of the
float32 weights, so it is exact) into a window of the last ``window`` updates, takes the Gram
eigenvalues sigma_1 >= sigma_2 >= ... (:class:`~grok_lightning.metrics.spectrum.UpdateGramSpectrum`)
and ``r(t) = sigma_2 / sigma_3``, and feeds r(t) to the slope rule
(:class:`~grok_lightning.stats.lockin.LockInRule`: fires at the first ``t >= min_epoch`` with
``d ln r / dt > threshold`` over ``span`` steps; the same rule runs offline on records as
:func:`~grok_lightning.stats.lockin.slope_fire_epoch`).

Steps are counted by ``trainer.global_step``; in the paper's full-batch setup one step is one
epoch, so step t is the evaluation row "W after t steps". Values computed after step t are
returned by ``contribute`` at epoch t under ``lockin_w{window}_*`` keys, so detectors
with different windows (Xu's sweep 5/10/20/30) coexist on one run; each also has its own
``state_key``. The fire epoch goes to ``pl_module.record_extras["lockin_fire_epoch_w{window}"]``
and, for the headline detector (window 20 unless ``headline`` says otherwise), to
``record_extras["lockin_fire_epoch"]``.

Checkpointing: the window of updates, the ln r history, the persistence counter and the fire
epoch are in ``state_dict``; ``W_{t-1}`` is not needed because on resume ``on_train_start`` reads
the restored weights, which are exactly ``W_t`` of the last completed step.
"""

from __future__ import annotations

import math

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.config import ConfigError, require
from grok_lightning.metrics.spectrum import UpdateGramSpectrum, spectrum_summary
from grok_lightning.stats.lockin import LockInRule, lockin_key, slope_fire_epoch

# lockin_key and slope_fire_epoch live with the rule; importable from here as well
__all__ = ["LockInDetector", "lockin_key", "slope_fire_epoch"]


class LockInDetector(Callback):
    """Online slope-of-ln(sigma2/sigma3) detector (see module docstring).

    Args:
        window: number of updates in the Gram (paper 20; sweep 5, 10, 20, 30).
        slope_span: epochs between the two ln r values of the slope (25).
        threshold: slope threshold (0.04 per epoch).
        min_epoch: earliest epoch that may fire (100).
        persistence: extra consecutive epochs the condition must hold (0 = paper).
        parameter: name of the tracked parameter in ``pl_module.named_parameters()``.
        headline: also write ``record_extras["lockin_fire_epoch"]``; default: ``window == 20``.
        clip: lower clip of r before the log (1e-6, as Xu).
    """

    def __init__(self, window: int = 20, slope_span: int = 25, threshold: float = 0.04, min_epoch: int = 100,
                 persistence: int = 0, parameter: str = "model.W.weight", headline: bool | None = None,
                 clip: float = 1e-6) -> None:
        require(isinstance(window, int) and window >= 3, "lockin.window", window, "must be an integer >= 3")
        self.rule = LockInRule(slope_span, threshold, min_epoch, persistence, clip)
        self.window, self.slope_span, self.threshold = window, slope_span, float(threshold)
        self.min_epoch, self.persistence, self.parameter, self.clip = min_epoch, persistence, parameter, clip
        self.headline = (window == 20) if headline is None else headline
        self.spectrum = UpdateGramSpectrum(window=window)
        self._last_step: int | None = None
        self._latest: dict[str, float] = {}
        self._prev: torch.Tensor | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(window=self.window, parameter=self.parameter)

    @property
    def fire_epoch(self) -> int | None:
        return self.rule.fire_epoch

    @property
    def ln_r(self) -> dict[int, float]:
        return self.rule.ln_r

    def _param(self, pl_module: LightningModule) -> torch.Tensor:
        params = dict(pl_module.named_parameters())
        if self.parameter not in params:
            raise ConfigError(f"lockin.parameter={self.parameter!r}: must be one of {', '.join(params)}")
        return params[self.parameter]

    def _publish_extras(self, pl_module: LightningModule) -> None:
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras[f"lockin_fire_epoch_w{self.window}"] = self.fire_epoch
            if self.headline:
                extras["lockin_fire_epoch"] = self.fire_epoch

    # --- hooks --------------------------------------------------------------------------
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._prev = self._param(pl_module).detach().clone()
        if self._last_step is None:
            self._last_step = trainer.global_step
        self._publish_extras(pl_module)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        if step == self._last_step:  # no optimizer step (accumulation / skipped): nothing moved
            return
        weight = self._param(pl_module).detach()
        self.spectrum.update(weight.double() - self._prev.double())
        self._prev = weight.clone()
        self._last_step = step
        self._observe(step, spectrum_summary(self.spectrum.compute()))
        self._publish_extras(pl_module)

    def _observe(self, step: int, summary: dict[str, float]) -> None:
        slope = self.rule.observe(step, summary["ratio23"])
        self._latest = {**summary, "slope": slope, "step": step}

    def contribute(self, trainer: Trainer, pl_module: LightningModule, epoch: int, row, captured) -> dict:
        """This window's spectrum at the evaluated epoch and whether it has fired, as row keys."""
        added = {}
        if self._latest.get("step") == epoch:
            for name, value in self._latest.items():
                if name != "step" and math.isfinite(value):
                    added[lockin_key(self.window, name)] = float(value)
        added[lockin_key(self.window, "fired")] = float(self.fire_epoch is not None and self.fire_epoch <= epoch)
        return added

    # --- checkpointing ------------------------------------------------------------------
    def state_dict(self) -> dict:
        deltas = self.spectrum.deltas
        return {
            "window": self.window,
            "deltas": torch.stack(deltas).cpu() if deltas else None,
            **self.rule.state_dict(),  # ln_r, fire_epoch, run
            "last_step": self._last_step,
            "latest": dict(self._latest),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        require(state_dict.get("window") == self.window, "lockin.window", self.window,
                f"checkpoint holds window {state_dict.get('window')}")
        self.spectrum.reset()
        if state_dict.get("deltas") is not None:
            for delta in state_dict["deltas"]:
                self.spectrum.update(delta)
        self.rule.load_state_dict(state_dict)
        self._last_step = state_dict.get("last_step")
        self._latest = dict(state_dict.get("latest", {}))
