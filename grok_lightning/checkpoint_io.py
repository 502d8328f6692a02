"""Checkpoints are data, not code: every checkpoint this package reads is unpickled with
``torch.load(weights_only=True)``.

A ``last.ckpt`` found in a results folder may come from anywhere (a shared filesystem, a
downloaded archive). ``weights_only=False`` runs whatever a crafted pickle asks for, on every
load. ``weights_only=True`` builds only tensors, containers and primitive values, plus the few
classes in :data:`safe_globals`; a Lightning checkpoint of this package needs nothing else.

- :func:`checkpoint_problem` says why a file cannot resume a run (``None`` when it can);
- :func:`load_checkpoint` loads one or raises a one-line :class:`~grok_lightning.config.ConfigError`;
- :func:`trainer_call` runs ``trainer.fit`` (or validate/test/predict) with the checkpoint
  checked first and Lightning's own load restricted the same way.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from pathlib import Path

from grok_lightning.config import ConfigError

__all__ = ["RESUME_KEYS", "check_checkpoint_shape", "check_ckpt_path", "check_ensemble_members", "checkpoint_differences",
           "checkpoint_problem", "checkpoint_run_id", "load_checkpoint", "safe_globals", "trainer_call"]

#: ``ckpt_path`` values that Lightning resolves itself
SYMBOLIC_PATHS = ("last", "best", "hpc", "registry")
#: what Lightning reads to resume training (a weights-only file cannot resume a run)
RESUME_KEYS = ("state_dict", "optimizer_states", "loops")


def _allowed_types() -> list:
    """Classes a checkpoint may contain beyond torch's defaults: numpy numbers (a callback may keep
    an ``np.float64`` in its state or a record extra). Rebuilding a number runs no code."""
    import numpy as np

    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import scalar
    kinds = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
    return [scalar, np.dtype, *(type(np.dtype(kind)) for kind in kinds)]


@contextlib.contextmanager
def safe_globals():
    """``weights_only`` loads inside this block also accept :func:`_allowed_types`."""
    import torch

    scoped = getattr(torch.serialization, "safe_globals", None)  # torch >= 2.5
    with scoped(_allowed_types()) if scoped is not None else contextlib.nullcontext():
        yield


def _reason(err: BaseException) -> str:
    """One line for a failed load (torch's message for a refused pickle is a page of advice)."""
    text = str(err)
    # torch < 2.10: "Unsupported global: GLOBAL os.system"; torch 2.13: "Trying to load unsupported
    # GLOBAL posix.system whose module posix is blocked"
    refused = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", text)
    if refused:
        return f"it asks the unpickler to call {refused.group(1)}, refused by weights_only=True"
    if "WeightsUnpickler error" in text:
        detail = text.split("WeightsUnpickler error:", 1)[1].strip().splitlines()[0].strip()
        return f"not a torch checkpoint: cannot be unpickled as data ({detail})"
    if "Weights only load failed" in text:  # torch's advice to retry with weights_only=False is not ours
        return "it holds objects other than tensors and plain data, refused by weights_only=True"
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> dict:
    """The checkpoint at ``path`` as a dict; ``ConfigError`` (one line) when it is missing,
    unreadable, or asks the unpickler for anything but data."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such checkpoint file")
    try:
        with safe_globals():
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure to load means: not a usable checkpoint
        raise ConfigError(f"{path}: not a usable checkpoint ({_reason(err)})") from None
    if not isinstance(checkpoint, dict):
        raise ConfigError(f"{path}: not a usable checkpoint (holds a {type(checkpoint).__name__}, not a dict)")
    return checkpoint


def checkpoint_problem(path: str | Path, resume: bool = True) -> str | None:
    """Why the checkpoint at ``path`` cannot be used (to resume training, with ``resume``), or
    ``None`` when it can."""
    try:
        checkpoint = load_checkpoint(path)
    except ConfigError as err:
        return str(err)
    missing = [key for key in RESUME_KEYS if key not in checkpoint] if resume else []
    if missing:
        return f"{path}: not a usable checkpoint (no {', '.join(missing)}: it cannot resume training)"
    return None


def _recorded(checkpoint: dict) -> dict:
    """The record in a checkpoint's run-recorder state (empty when it carries none)."""
    for key, state in (checkpoint.get("callbacks") or {}).items():
        if str(key).startswith("RunRecorder") and isinstance(state, dict) and isinstance(state.get("record"), dict):
            return state["record"]
    return {}


#: an ensemble checkpoint keeps each member's callback state under this key, with the member's run id
MEMBER_STATE = re.compile(r"^MemberCallbacks\[(.+)\]$")


def check_ensemble_members(path: str | Path, run_ids: list[str]) -> None:
    """An ensemble's ``last.ckpt`` resumes only the members that wrote it: a one-line
    ``ConfigError`` when the run ids its member states carry are not ``run_ids`` (another
    ensemble's checkpoint, or one written outside a sweep).

    >>> import tempfile, torch
    >>> with tempfile.TemporaryDirectory() as d:
    ...     torch.save({"callbacks": {"MemberCallbacks[a1]": {}, "MemberCallbacks[b2]": {}}}, f"{d}/last.ckpt")
    ...     check_ensemble_members(f"{d}/last.ckpt", ["b2", "a1"])  # the same members: nothing to say
    """
    states = load_checkpoint(path).get("callbacks") or {}
    found = sorted(m.group(1) for m in map(MEMBER_STATE.match, map(str, states)) if m)
    if found != sorted(run_ids):
        whose = f"the checkpoint of members {found}" if found else "a checkpoint without member run ids"
        raise ConfigError(f"{path}: {whose}, not this ensemble's {sorted(run_ids)}; remove it to restart these runs "
                          "from scratch")


def checkpoint_run_id(path: str | Path) -> str | None:
    """The run id in a checkpoint's run-recorder state: whose checkpoint it is (``None`` when it
    carries no recorder state, e.g. a checkpoint written outside this package)."""
    return _recorded(load_checkpoint(path)).get("run_id")


#: hyperparameters that change nothing a run trains or records (the evaluation's batch size, a
#: memory setting): a resumed run may give another value
NOT_COMPARED = ("eval_batch_size",)
#: module hyperparameters the datamodule sets at setup: compared in the data section instead
#: (``modulus`` is ``data.p``, ``reads_operator_token`` is ``data.operator_token``)
FROM_DATA = ("modulus", "reads_operator_token")


def _comparable(value):
    return [_comparable(v) for v in value] if isinstance(value, (list, tuple)) else value


def checkpoint_differences(checkpoint: dict, config: dict) -> list[tuple[str, object, object]]:
    """``(field, the checkpoint's value, this run's)`` for every hyperparameter that ``checkpoint``
    stores with another value than the resolved run ``config`` (sections ``model``, ``data``,
    ``seed_everything``): the module's and datamodule's classes and arguments, and the seed in its
    record.

    >>> saved = {"hyper_parameters": {"_class_path": "m.M", "lr": 0.001, "betas": [0.9, 0.98]},
    ...          "datamodule_hyper_parameters": {"p": 23}}
    >>> checkpoint_differences(saved, {"model": {"class_path": "m.M", "init_args": {"lr": 0.01, "betas": (0.9, 0.98)}},
    ...                                "data": {"init_args": {"p": 23}}, "seed_everything": 0})
    [('model.lr', 0.001, 0.01)]
    """
    differences = []
    for section, stored in (("model", checkpoint.get("hyper_parameters")),
                            ("data", checkpoint.get("datamodule_hyper_parameters"))):
        stored = dict(stored or {})
        given = config.get(section) or {}
        now = given.get("init_args") or {}
        saved_class, class_path = stored.get("_class_path"), given.get("class_path")
        if saved_class and class_path and saved_class != class_path:
            differences.append((f"{section}.class_path", saved_class, class_path))
        for key, value in stored.items():
            if key.startswith("_") or key in NOT_COMPARED or key not in now:
                continue
            if section == "model" and key in FROM_DATA and (key != "modulus" or now[key] is None):
                continue
            if _comparable(value) != _comparable(now[key]):
                differences.append((f"{section}.{key}", value, now[key]))
    saved_seed, seed = _recorded(checkpoint).get("config", {}).get("seed"), config.get("seed_everything")
    if isinstance(saved_seed, int) and isinstance(seed, int) and not isinstance(seed, bool) and saved_seed != seed:
        differences.append(("seed_everything", saved_seed, seed))
    return differences


#: hyperparameters that set the shapes of a model's parameters: a checkpoint must agree on them
SHAPE_KEYS = ("arch", "d_model", "n_layers", "n_heads", "d_ff", "arch_kwargs", "modulus", "M", "K", "hidden")


def check_checkpoint_shape(path: str | Path, hparams) -> None:
    """One ``ConfigError`` line, before training, when the checkpoint holds another model shape than
    ``hparams`` describes (Lightning would fail later, in ``load_state_dict``, with a page)."""
    saved = load_checkpoint(path).get("hyper_parameters") or {}
    get = hparams.get if isinstance(hparams, dict) else lambda k, d=None: getattr(hparams, k, d)
    for key in SHAPE_KEYS:
        if key in saved and get(key, None) is not None and saved[key] != get(key, None) and \
                not (key == "modulus" and saved[key] is None):
            raise ConfigError(f"ckpt_path={path}: a checkpoint of another model ({key} {saved[key]!r}, this run "
                              f"{get(key, None)!r})")


def check_ckpt_path(ckpt_path, resume: bool) -> None:
    """A ``ckpt_path`` argument must name a usable checkpoint file (one line if not). Lightning's
    symbolic values (``last``, ``best``, ``hpc``, ``registry``) name checkpoints that Lightning's
    own ModelCheckpoint, SLURM or its model registry keep; runs here keep ``last.ckpt`` in their
    folder, so these are refused with the way that works."""
    if ckpt_path is not None and str(ckpt_path) in SYMBOLIC_PATHS:
        raise ConfigError(f"ckpt_path={ckpt_path}: Lightning's symbolic checkpoints are not kept here; give a file "
                          "(<run folder>/checkpoints/last.ckpt) or resume the latest run with --resume")
    if ckpt_path is not None:
        problem = checkpoint_problem(ckpt_path, resume=resume)
        if problem is not None:
            raise ConfigError(f"ckpt_path={problem}")


def trainer_call(method, *args, ckpt_path: str | None = None, weights_only: bool | None = None, **kwargs):
    """``method(*args, ckpt_path=..., **kwargs)`` for a Trainer method (``trainer.fit``,
    ``validate``, ``test``, ``predict``): a checkpoint file that cannot be used is a one-line
    ``ConfigError`` before anything starts, and Lightning loads it with ``weights_only=True`` too.
    Lightning's symbolic paths (``last``, ``best``, ...) are refused (:func:`check_ckpt_path`)."""
    if weights_only is False:
        raise ConfigError("weights_only=False: refused (checkpoints are loaded as data only, with weights_only=True)")
    if ckpt_path is not None:
        check_ckpt_path(ckpt_path, resume=getattr(method, "__name__", "") == "fit")
        module = args[0] if args else kwargs.get("model")
        if module is not None and hasattr(module, "hparams"):
            check_checkpoint_shape(ckpt_path, module.hparams)
        if "weights_only" in inspect.signature(method).parameters:  # Lightning >= 2.5
            kwargs["weights_only"] = True
    with safe_globals():
        return method(*args, ckpt_path=ckpt_path, **kwargs)

