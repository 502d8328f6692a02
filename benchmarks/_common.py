"""Shared helpers for the benchmarks: the canonical config as a dict, the plain-loop canonical
training (what the package's runs are compared with), epoch timing."""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

import yaml
from lightning.pytorch import Callback

REPO = Path(__file__).resolve().parents[1]


def canonical_config(save_dir: str, **trainer) -> dict:
    with open(REPO / "configs" / "canonical.yaml") as handle:
        config = copy.deepcopy(yaml.safe_load(handle))
    # default_root_dir keeps outputs in save_dir when a variant turns the logger off
    config["trainer"].update(enable_progress_bar=False, default_root_dir=save_dir, **trainer)
    config["trainer"]["logger"]["init_args"]["save_dir"] = save_dir
    config["grok"]["extra_epochs"] = None
    config["run"]["profile"] = "benchmark"
    return config


class EpochTimer(Callback):
    """Wall-clock seconds of each training epoch (excludes setup and the epoch-0 evaluation)."""

    def __init__(self):
        self.times: list[float] = []

    def on_train_epoch_start(self, trainer, pl_module):
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        self.times.append(time.perf_counter() - self._start)


def median(values) -> float:
    return statistics.median(values)


class PlainCanonical:
    """The canonical run as a plain PyTorch loop: the same model, initialisation, AdamW settings
    and data order as ``configs/canonical.yaml``, no Lightning."""

    def __init__(self, seed: int = 0, compile_mode: str | None = None):
        import torch

        from grok_lightning.data import ModularArithmeticDataModule
        from grok_lightning.models import build_model
        from grok_lightning.modules import parameter_groups

        torch.manual_seed(seed)
        self.data = ModularArithmeticDataModule(p=97)
        self.data.setup()
        self.model = build_model("transformer", 98, 97, d_model=128, n_layers=4, n_heads=8, d_ff=512, init="mha")
        self.optimizer = torch.optim.AdamW(parameter_groups(self.model, 1.0, "all"), lr=1e-3, betas=(0.9, 0.999))
        self.forward = torch.compile(self.model, mode=compile_mode, dynamic=True) if compile_mode else self.model
        self.loader = self.data.train_dataloader()

    def train_epoch(self, epoch: int, bf16: bool = False) -> None:
        import torch
        from torch.nn import functional as F

        self.loader.sampler.set_epoch(epoch)
        for tokens, labels in self.loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(self.forward(tokens), labels)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
