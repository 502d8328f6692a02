"""Adam state of re-initialised parameter slices: keep it, or emulate a fresh one per slice.

A head re-initialised at step t0 can keep the optimizer state it had (``keep``: the moments of
the old weights, which decay within ~10 steps for beta1 = 0.9 and ~1,000 for beta2 = 0.999), or
start from a fresh state as a new parameter would (``fresh``). Zeroing the moments alone is
neither: the shared step count stays at t0, so bias correction (1 - beta^t ~ 1) no longer
applies and the first update of a zeroed slice is (1 - beta1) / sqrt(1 - beta2) = 3.2 lr for the
default betas, against lr for a fresh Adam step. ``fresh`` zeroes the moments and corrects every
later update of the slices to use the slices' own step count s = t - t0:

    torch:  delta_t = lr * (m_t / (1 - beta1^t)) / (sqrt(v_t / (1 - beta2^t)) + eps)
    fresh:  delta_s = lr * (m_t / (1 - beta1^s)) / (sqrt(v_t / (1 - beta2^s)) + eps)

After each optimizer step the slice gets ``delta_t - delta_s`` added back (the moments m_t, v_t are
the same in both, and decoupled weight decay acts before either), until beta2^s < 1e-8.
"""

from __future__ import annotations

import torch

__all__ = ["OPTIMIZER_STATE_MODES", "FreshAdamSlices", "optimizer_state_of"]

OPTIMIZER_STATE_MODES = ("keep", "fresh")
_NEGLIGIBLE = 1e-8


def optimizer_state_of(trainer, param: torch.Tensor) -> dict:
    """The optimizer state of ``param``: an ensemble member's trainer view answers with its row of
    the stacked state; otherwise the state of whichever optimizer holds ``param``."""
    lookup = getattr(trainer, "optimizer_state_of", None)
    if lookup is not None:
        return lookup(param)
    for optimizer in trainer.optimizers:
        if param in optimizer.state:
            return optimizer.state[param]
    return {}


def _hyperparameters(trainer) -> dict:
    group = trainer.optimizers[0].param_groups[0]
    beta1, beta2 = group["betas"]
    return {"lr": float(group["lr"]), "beta1": float(beta1), "beta2": float(beta2), "eps": float(group["eps"])}


class FreshAdamSlices:
    """Fresh Adam state for ``slices`` (``(parameter, index)`` pairs) from the current step on."""

    def __init__(self, slices: list[tuple[torch.Tensor, tuple]]) -> None:
        self.slices = slices
        self.t0: int | None = None

    @torch.no_grad()
    def start(self, trainer) -> None:
        """Zero the slices' moments; remember the step count they start from."""
        for param, index in self.slices:
            state = optimizer_state_of(trainer, param)
            for key in ("exp_avg", "exp_avg_sq"):
                if key in state:
                    state[key][index] = 0.0
            if self.t0 is None and "step" in state:
                self.t0 = int(state["step"])
        if self.t0 is None:  # no step taken yet: a fresh state is what the optimizer already has
            self.t0 = 0

    @torch.no_grad()
    def correct(self, trainer) -> bool:
        """After an optimizer step: re-do the slices' update with their own bias correction.
        Returns False once the two corrections agree (nothing left to do)."""
        hp = _hyperparameters(trainer)
        for param, index in self.slices:
            state = optimizer_state_of(trainer, param)
            if "exp_avg" not in state:
                continue
            t = int(state["step"])
            s = t - self.t0
            if s < 1:
                continue
            if hp["beta2"] ** s < _NEGLIGIBLE:
                return False
            m, v = state["exp_avg"][index], state["exp_avg_sq"][index]
            torch_delta = _adam_delta(m, v, t, hp)
            fresh_delta = _adam_delta(m, v, s, hp)
            param[index] += torch_delta - fresh_delta
        return True


def _adam_delta(m: torch.Tensor, v: torch.Tensor, step: int, hp: dict) -> torch.Tensor:
    # torch.optim.Adam's single-tensor arithmetic: (sqrt(v) / sqrt(bc2) + eps), step = lr / bc1
    bias1 = 1 - hp["beta1"] ** step
    bias2_sqrt = (1 - hp["beta2"] ** step) ** 0.5
    return (hp["lr"] / bias1) * m / (v.sqrt() / bias2_sqrt + hp["eps"])
