"""Shared helpers for the benchmarks: the canonical config as a dict, epoch timing."""

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
    config["trainer"].update(enable_progress_bar=False, **trainer)
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
