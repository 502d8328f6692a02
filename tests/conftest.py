"""Shared fixtures: tiny configurations that train in seconds on CPU."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from lightning.pytorch import Callback

REPO = Path(__file__).resolve().parents[1]
#: the paper's published aggregates (CC-BY-4.0, shipped in the repository: reference/README.md)
REFERENCE = REPO / "reference"


def read_reference(name: str) -> dict:
    """One published aggregate file. A missing file fails the test (never a skip): the golden
    values are what the statistics are checked against."""
    import json

    path = REFERENCE / name
    if not path.is_file():
        pytest.fail(f"{path}: the paper's published aggregate is missing (reference/ ships with the repository)")
    return json.loads(path.read_text())


def load_yaml(name: str) -> dict:
    with open(REPO / "configs" / name) as handle:
        return yaml.safe_load(handle)


def tiny_config(tmp_path: Path, max_epochs: int = 4, **model_overrides) -> dict:
    """The canonical config shrunk: p = 23, 1 layer x 2 heads x d16 (seconds on CPU)."""
    config = copy.deepcopy(load_yaml("canonical.yaml"))
    config["seed_everything"] = 0
    config["model"]["init_args"].update(d_model=16, n_layers=1, n_heads=2, d_ff=32, eval_every=2, eval_dense_until=2)
    config["model"]["init_args"].update(model_overrides)
    config["data"]["init_args"].update(p=23, batch_size=64)
    config["trainer"].update(max_epochs=max_epochs, enable_progress_bar=False, log_every_n_steps=1)
    config["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path), name="tiny", version="v0")
    config["run"].update(profile="test", checkpoint_every=1)
    config["grok"]["extra_epochs"] = None
    return config


@pytest.fixture(autouse=True)
def _no_flush_denormal_leak():
    """Runs set torch.set_flush_denormal(True) (process-global); hypothesis refuses to draw floats
    in that state, so every test starts and ends with IEEE subnormals enabled."""
    import torch

    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """Runs and sweeps run in this process with run.threads = 1 (process-global); restore it."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny(tmp_path):
    return lambda **kw: tiny_config(tmp_path, **kw)


class InterruptAfter(Callback):
    """Simulates Ctrl-C at the end of training epoch ``epoch`` (1-based), for resume tests."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch + 1 == self.epoch:
            raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def _no_trusted_code_leak():
    """``--trust-code`` (``run_config(trusted_code=...)``) is process-global; no test inherits it."""
    yield
    from grok_lightning.config import trust_code

    trust_code(())
