"""Run E compatible configurations as one vectorised ensemble, each writing its own run.

``run_ensemble(configs)`` builds every member exactly as ``run_config`` would (``GrokCLI``: the
same datamodule, module, callbacks, logger and record path), then trains them together in one
:class:`~grok_lightning.ensembles.module.EnsembleModule`. Each member's callbacks see a
:class:`MemberTrainer` (the real trainer with the member's datamodule, logger, log_dir, callbacks
and stop flag) and the member module, so evaluation, grokking detection, diagnostics,
interventions, retention, weight checkpoints and records work per member unchanged: a member's
``record.json`` and TensorBoard events look like those of a separate run.

Compatible = same module class and every setting equal except ``seed_everything``, the weight
decay, the initialisation and the run's name/id/record path (:func:`compatibility_key`); the
sweep runner packs runs by that key (``--ensemble-size``).
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import lightning as L
from lightning.pytorch import Callback
from lightning.pytorch.callbacks import ModelCheckpoint, ModelSummary, ProgressBar

from grok_lightning.callbacks.resume import ResumeCheckpoint
from grok_lightning.checkpoint_io import trainer_call
from grok_lightning.config import ConfigError
from grok_lightning.ensembles.members import MemberCallbacks
from grok_lightning.ensembles.module import EnsembleModule

__all__ = ["build_ensemble", "build_member", "compatibility_key", "run_ensemble"]

#: config entries members may differ in (dotted paths). The transformer's ``init`` and
#: ``embedding_std`` only change the starting weights (same parameter shapes, same forward), so
#: initialisation variants of one shape can share an ensemble.
MEMBER_KEYS = ("seed_everything", "model.init_args.weight_decay", "model.init_args.eta", "model.init_args.init_seed",
               "model.init_args.init", "model.init_args.embedding_std",
               "run.name", "run.run_id", "run.record_path", "trainer.logger.init_args.version",
               "trainer.logger.init_args.name", "trainer.logger.init_args.save_dir", "data.init_args.seed")


def compatibility_key(config: dict) -> str:
    """Everything but the per-member settings, as canonical JSON: equal keys can share an ensemble."""
    shared = copy.deepcopy(config)
    for dotted in MEMBER_KEYS:
        *parents, leaf = dotted.split(".")
        node = shared
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return json.dumps(shared, sort_keys=True, default=str)


#: the ensemble has one resume checkpoint and no progress bar; its members none of their own
_NOT_PER_MEMBER = (ModelCheckpoint, ResumeCheckpoint, ProgressBar, ModelSummary)


def build_member(config: dict) -> dict:
    """One member exactly as ``run_config`` builds a run: module (model built under the run's
    seed, as ``configure_model`` would at fit start), set-up datamodule, callbacks, logger."""
    from grok_lightning.run import GrokCLI

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
        cli = GrokCLI(args=config, run=False, parser_kwargs={"exit_on_error": False})
    module, datamodule, trainer = cli.model, cli.datamodule, cli.trainer
    datamodule.prepare_data()
    datamodule.setup("fit")
    if getattr(module, "model", None) is None:
        L.seed_everything(config.get("seed_everything"), verbose=False)
        module._build(datamodule.p)
    callbacks = [c for c in trainer.callbacks if not isinstance(c, _NOT_PER_MEMBER)]
    return {"module": module, "datamodule": datamodule, "callbacks": callbacks, "logger": trainer.logger,
            "log_dir": trainer.log_dir, "trainer_config": config.get("trainer", {}), "config": config}


def build_ensemble(configs: list[dict], root: str | Path, checkpoint_every: int = 50,
                   vectorize: bool | str = "auto", callbacks: list[Callback] | None = None):
    """``(trainer, ensemble, train_loaders)`` for ``configs``; see :func:`run_ensemble`."""
    keys = {compatibility_key(c) for c in configs}
    if len(keys) != 1:
        raise ConfigError("ensemble members differ in more than seed, weight decay and initialisation: "
                          "run them separately")
    parts = [build_member(c) for c in configs]
    ensemble = EnsembleModule([p["module"] for p in parts], vectorize=vectorize)
    ensemble.member_parts = parts
    settings = {k: v for k, v in parts[0]["trainer_config"].items() if k not in ("logger", "callbacks")}
    # the ensemble steps by hand (manual optimisation): it clips each member's gradients itself
    clip_norm, algorithm = settings.pop("gradient_clip_val", None), settings.pop("gradient_clip_algorithm", None)
    if clip_norm and algorithm not in (None, "norm"):
        raise ConfigError(f"trainer.gradient_clip_algorithm={algorithm!r}: ensembles clip by norm only")
    ensemble.clip_norm = float(clip_norm) if clip_norm else None
    ensemble.compile_mode = parts[0]["config"].get("run", {}).get("compile")
    members = [MemberCallbacks(e, p["callbacks"], key=str(p["config"].get("run", {}).get("run_id") or e))
               for e, p in enumerate(parts)]
    minutes = float(parts[0]["config"].get("run", {}).get("checkpoint_minutes", 5.0)) if checkpoint_every > 0 else 0.0
    extra: list[Callback] = list(callbacks or []) + [
        ResumeCheckpoint(every_n_epochs=checkpoint_every, every_minutes=minutes, dirpath=str(Path(root) / "checkpoints"))]
    settings.update(logger=False, callbacks=members + extra, default_root_dir=str(root),
                    enable_checkpointing=True, enable_progress_bar=False, enable_model_summary=False)
    return L.Trainer(**settings), ensemble, [p["datamodule"].train_dataloader() for p in parts]


def run_ensemble(configs: list[dict], root: str | Path, ckpt_path: str | None = None,
                 checkpoint_every: int = 50, vectorize: bool | str = "auto") -> list[dict]:
    """Train ``configs`` (compatible, see :func:`compatibility_key`) as one ensemble.

    Checkpoints (``root/checkpoints/last.ckpt``, every ``checkpoint_every`` epochs) hold every
    member's weights, optimizer state and callback states; pass one as ``ckpt_path`` to resume.
    Returns the members' records (also written to each member's record path).
    """
    trainer, ensemble, loaders = build_ensemble(configs, root, checkpoint_every, vectorize)
    try:
        trainer_call(trainer.fit, ensemble, train_dataloaders=loaders, ckpt_path=ckpt_path)  # weights_only=True
    finally:
        import torch

        torch.set_flush_denormal(False)  # process-global state (run settings): do not leak it
        torch.set_float32_matmul_precision("highest")
    return [next(c for c in p["callbacks"] if hasattr(c, "record")).record for p in ensemble.member_parts]
