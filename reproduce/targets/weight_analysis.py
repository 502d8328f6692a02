"""Post-hoc analysis of the weights a run saved with ``CheckpointSchedule`` (``weights/epoch_XXXXX.pt``).

Used by the long-horizon target (reproduce/targets/long_horizon.py: Fig. 6, Table 3, Fig. 7) and open to any
other post-hoc analysis of the same runs: find a run's checkpoint files, rebuild its model and its
train/test split from the record's resolved config, load the weights, and measure one checkpoint
(test accuracy, the head covariance eigenvalues behind PR_norm under a named construction, ESD
alpha). Nothing here trains; everything is read from records and checkpoint files.

Head outputs (the ``output_`` PR constructions) are each head's write into the residual stream,
read with pre-hooks on the attention blocks' output projections (:mod:`grok_lightning.metrics.head_outputs`).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from grok_lightning.metrics.head_outputs import head_output_pr_update, projection_input_hooks
from grok_lightning.metrics.participation import (
    DIAGNOSTICS_PR_CONSTRUCTION,
    PRState,
    parse_pr_construction,
    pr_compute,
    pr_covariance_eigenvalues,
    pr_state_update,
)
from grok_lightning.models import ATTENTION_ARCHS
from grok_lightning.modules.grokking import build_from_config
from grok_lightning.stats.spectra import model_esd_alpha

__all__ = ["analyse_checkpoint", "build_model_from_record", "checkpoint_files", "eval_split", "head_pr_states",
           "load_checkpoint", "run_folder", "weights_dir"]

_EPOCH_FILE = re.compile(r"^epoch_(\d+)\.pt$")


def weights_dir(record: dict, runs_root: str | Path | None = None) -> Path | None:
    """The run's ``weights/`` folder: in the sweep store ``runs_root`` (wherever it now lies; the run's
    folder is its name, ending in the first 8 digits of its run id), else the absolute
    ``weight_checkpoint_dir`` the record saved; ``None`` if none exists."""
    candidates = []
    if runs_root is not None and record.get("name"):
        candidates.append(Path(runs_root) / record["name"] / "weights")
    if runs_root is not None and record.get("run_id") and Path(runs_root).is_dir():  # store dirs end in the id's 8 digits
        candidates += sorted(d / "weights" for d in Path(runs_root).glob(f"*{record['run_id'][:8]}"))
    if record.get("weight_checkpoint_dir"):
        candidates.append(Path(record["weight_checkpoint_dir"]))
    return next((c for c in candidates if c.is_dir()), None)


def run_folder(record: dict, runs_root: str | Path) -> Path | None:
    """The run's folder, where measurements stored beside its record live: its weights' parent, else
    its folder in the store ``runs_root`` (named by its name, or ending in its run id's first 8
    digits); ``None`` when neither exists."""
    weights = weights_dir(record, runs_root)
    if weights is not None:
        return weights.parent
    runs_root = Path(runs_root)
    if record.get("name") and (runs_root / record["name"]).is_dir():
        return runs_root / record["name"]
    found = sorted(runs_root.glob(f"*{record.get('run_id', '')[:8]}")) if runs_root.is_dir() else []
    return found[0] if found else None


def checkpoint_files(record: dict, runs_root: str | Path | None = None) -> dict[int, Path]:
    """``{epoch: path}`` of the run's saved weights, sorted by epoch (empty when there are none)."""
    directory = weights_dir(record, runs_root)
    if directory is None:
        return {}
    found = {int(m.group(1)): p for p in directory.iterdir() if (m := _EPOCH_FILE.match(p.name))}
    return dict(sorted(found.items()))


def build_model_from_record(record: dict) -> torch.nn.Module:
    """A fresh model of the run's architecture (the same construction as ``GrokkingModule``)."""
    return build_from_config(record["config"]["model"], record["config"]["data"])


def load_checkpoint(record: dict, path: str | Path) -> tuple[torch.nn.Module, dict]:
    """``(model in eval mode with the checkpoint's weights, payload)``; the payload is
    ``{"epoch", "state_dict", "metrics"}`` as ``CheckpointSchedule`` wrote it."""
    payload = torch.load(path, weights_only=True, map_location="cpu")
    model = build_model_from_record(record)
    model.load_state_dict(payload["state_dict"], strict=True)
    return model.eval(), payload


def eval_split(record: dict, split: str = "test") -> tuple[torch.Tensor, torch.Tensor]:
    """The run's evaluation split ``(tokens, labels)``, rebuilt from its data config and seed
    (``split_seed`` null = the run seed, as ``ModularArithmeticDataModule`` does)."""
    from grok_lightning.data import ModularArithmeticDataModule

    d = record["config"]["data"]
    split_seed = d.get("split_seed")
    data = ModularArithmeticDataModule(
        p=d["p"], operation=d["operation"], train_fraction=d["train_fraction"],
        split_seed=int(record["config"]["seed"] if split_seed is None else split_seed),
        random_labels=bool(d.get("random_labels", False)), label_seed=int(d.get("label_seed", 0)))
    data.setup()
    return data.eval_splits()[split]


@torch.no_grad()
def head_pr_states(model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor,
                   sources=("pattern",), per_example: bool = False,
                   batch_size: int = 1024) -> tuple[int, dict[str, PRState]]:
    """``(correct predictions, {source: PRState})`` over ``tokens`` in chunks of ``batch_size``.

    ``source`` ``pattern``: the layers' attention probabilities; ``output``: the heads' residual
    writes (module docstring). The states are sum-reduced, so chunking gives the one-shot value.
    """
    captured: list = []
    hooks = projection_input_hooks(model, captured) if "output" in sources else []
    correct, states = 0, {}
    try:
        for start in range(0, len(labels), batch_size):
            captured.clear()
            logits, layers = model(tokens[start:start + batch_size], return_attention=True)
            correct += int((logits.argmax(-1) == labels[start:start + batch_size]).sum())
            for source in sources:
                new = (pr_state_update(layers, per_example) if source == "pattern"
                       else head_output_pr_update(captured, per_example))
                old = states.get(source)
                states[source] = new if old is None else PRState(*(a + b for a, b in zip(old, new)))
    finally:
        for handle in hooks:
            handle.remove()
    return correct, states


@torch.no_grad()
def analyse_checkpoint(record: dict, path: str | Path, split: tuple[torch.Tensor, torch.Tensor] | None = None,
                       batch_size: int = 1024, pr_construction: str = DIAGNOSTICS_PR_CONSTRUCTION) -> dict:
    """One checkpoint measured on the run's test split (the diagnostics' evaluation batch).

    Returns ``epoch``; ``test_acc`` recomputed from the weights and ``logged_test_acc`` (the
    training-time evaluation, ``None`` when that epoch was not evaluated): equal when the model
    and split were rebuilt correctly; ``esd_alpha`` (median over matrices) and
    ``esd_n_matrices``; for attention models ``eigenvalues``, the ``(L, H)`` head covariance
    spectrum per layer under ``pr_construction`` (``pr_norm_checkpoint_table``'s input; ``None``
    for ``per_example``, which has no single spectrum), ``pr_norm_layers`` (``(L,)`` affine
    PR_norm) and ``logged_pr_norm`` (the training-time diagnostic; comparable when the run
    logged the same construction, ``logged_pr_construction``).
    """
    model, payload = load_checkpoint(record, path)
    tokens, labels = split if split is not None else eval_split(record, "test")
    metrics = payload.get("metrics") or {}
    esd = model_esd_alpha(payload["state_dict"])
    result = {"epoch": int(payload["epoch"]), "test_acc": None, "logged_test_acc": metrics.get("test_acc"),
              "esd_alpha": esd.alpha, "esd_n_matrices": len(esd.per_matrix), "eigenvalues": None,
              "pr_norm_layers": None, "pr_construction": pr_construction, "logged_pr_norm": metrics.get("pr_norm"),
              "logged_pr_construction": record.get("pr_construction", "coordinates")}
    if record["config"]["model"]["arch"] not in ATTENTION_ARCHS:
        correct = sum(int((model(tokens[i:i + batch_size]).argmax(-1) == labels[i:i + batch_size]).sum())
                      for i in range(0, len(labels), batch_size))
        result["test_acc"] = correct / len(labels)
        return result
    source, centring = parse_pr_construction(pr_construction)
    correct, states = head_pr_states(model, tokens, labels, (source,), centring == "per_example", batch_size)
    result["test_acc"] = correct / len(labels)
    result["pr_norm_layers"] = pr_compute(states[source], pr_construction)
    if centring != "per_example":
        result["eigenvalues"] = pr_covariance_eigenvalues(states[source], pr_construction)
    return result
