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

__all__ = ["RESUME_KEYS", "UnusableCheckpoint", "check_checkpoint_shape", "check_ckpt_path", "check_ensemble_members",
           "checkpoint_differences", "checkpoint_problem", "checkpoint_run_id", "contents_problem", "load_checkpoint",
           "model_problem", "safe_globals", "trainer_call"]

class UnusableCheckpoint(ConfigError):
    """A checkpoint that cannot resume its run (unloadable, or its contents fail
    :func:`contents_problem` / :func:`model_problem`): a sweep sets it aside and restarts the run
    from scratch; ``fit`` refuses it in one line."""


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
        raise UnusableCheckpoint(f"{path}: no such checkpoint file")
    try:
        with safe_globals():
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure to load means: not a usable checkpoint
        raise UnusableCheckpoint(f"{path}: not a usable checkpoint ({_reason(err)})") from None
    if not isinstance(checkpoint, dict):
        raise UnusableCheckpoint(f"{path}: not a usable checkpoint (holds a {type(checkpoint).__name__}, not a dict)")
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
    problem = contents_problem(checkpoint, resume)
    return None if problem is None else f"{path}: not a usable checkpoint ({problem})"


def _tensors(tree, where: str):
    """``(where, tensor)`` for every tensor in a nested dict/list (a state dict, optimizer state)."""
    import torch

    if isinstance(tree, torch.Tensor):
        yield where, tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _tensors(value, f"{where}.{key}" if where else str(key))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _tensors(value, f"{where}[{i}]")


def _records_in(callbacks) -> list[tuple[str, dict]]:
    """``(callback state key, record)`` of every run recorder state in a checkpoint's callback
    states (a single run's ``RunRecorder``; an ensemble's, one inside each member's state)."""
    found = []
    for key, state in (callbacks.items() if isinstance(callbacks, dict) else ()):
        states = state if MEMBER_STATE.match(str(key)) else {key: state}
        for inner_key, inner in (states.items() if isinstance(states, dict) else enumerate(states or ())):
            if isinstance(inner, dict) and isinstance(inner.get("record"), dict):
                found.append((f"{key}" + (f"/{inner_key}" if inner is not state else ""), inner["record"]))
    return found


def _group_problem(i: int, group: dict, hparams: dict) -> str | None:
    """Why optimizer param group ``i`` disagrees with the module hyperparameters stored beside it
    (``lr`` before any schedule, ``betas``, ``eps``; weight decay is the run's or 0, the groups
    it is not applied to), or ``None``."""
    from grok_lightning.records import weight_decay_of

    lr = group.get("initial_lr", group.get("lr"))
    if "lr" in hparams and lr != hparams["lr"]:
        return f"optimizer param group {i}: lr {lr!r}, the run's lr is {hparams['lr']!r}"
    if "betas" in hparams and "betas" in group and list(group["betas"]) != list(hparams["betas"]):
        return f"optimizer param group {i}: betas {list(group['betas'])}, the run's betas are {list(hparams['betas'])}"
    if "eps" in hparams and "eps" in group and group["eps"] != hparams["eps"]:
        return f"optimizer param group {i}: eps {group['eps']!r}, the run's eps is {hparams['eps']!r}"
    decay = weight_decay_of(hparams)
    if decay is not None and group.get("weight_decay", 0.0) not in (decay, 0.0):
        return f"optimizer param group {i}: weight decay {group['weight_decay']!r}, the run's is {decay!r}"
    return None


def contents_problem(checkpoint: dict, resume: bool = True) -> str | None:
    """Why a loaded checkpoint's contents cannot be trusted, checked as a whole without the model
    (``None`` when they can): every tensor finite (NaN weights would end the run ``diverged``, a
    final status); the optimizer's param groups equal the module hyperparameters stored beside
    them; an optimizer state wherever the step count says the optimizer stepped; the run records
    in the callback states pass the record rules (:func:`grok_lightning.records.record_problem`).
    What needs the model (tensor names, shapes, dtypes) is :func:`model_problem`."""
    import torch

    from grok_lightning.records import record_problem

    for where, tensor in _tensors({"state_dict": checkpoint.get("state_dict"),
                                   "optimizer_states": checkpoint.get("optimizer_states")}, ""):
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all()):
            return f"{where} holds NaN or infinite values"
    if resume:
        optimizers = checkpoint.get("optimizer_states")
        if not isinstance(optimizers, list) or not all(isinstance(o, dict) and isinstance(o.get("state"), dict)
                                                       and isinstance(o.get("param_groups"), list) for o in optimizers):
            return "optimizer_states: not a list of optimizer states with state and param_groups"
        steps = checkpoint.get("global_step")
        if isinstance(steps, int) and steps > 0 and any(not o["state"] for o in optimizers):
            return f"global_step {steps} but an empty optimizer state (a resumed run would restart its moments)"
        hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint.get("hyper_parameters"), dict) else {}
        for optimizer in optimizers:
            for i, group in enumerate(optimizer["param_groups"]):
                problem = _group_problem(i, group, hparams) if isinstance(group, dict) else f"param group {i}: not a mapping"
                if problem is not None:
                    return problem
    for key, record in _records_in(checkpoint.get("callbacks")):
        problem = record_problem(record)
        if problem is not None:
            return f"the run record in its {key} state: {problem}"
    return None


#: Lightning's true-precision settings -> the dtype it casts a module's floating tensors to
_TRUE_PRECISIONS = {"16-true": "torch.float16", "bf16-true": "torch.bfloat16", "64-true": "torch.float64"}


def model_problem(checkpoint: dict, module) -> str | None:
    """Why ``checkpoint`` cannot load into ``module`` (built, as it is when Lightning restores
    it): a tensor missing or extra, or of another shape or dtype; for a module whose optimizer can
    be configured without side effects (not an ensemble), another number or size of param
    groups. ``None`` when it fits."""
    saved, expected = checkpoint.get("state_dict") or {}, module.state_dict()
    missing = [name for name in expected if name not in saved]
    extra = [name for name in saved if name not in expected]
    if missing or extra:
        which = f"{missing[0]!r} missing" if missing else f"{extra[0]!r} not in the model"
        more = len(missing) + len(extra) - 1
        return f"state_dict: tensor {which}" + (f" (and {more} more)" if more else "")
    # a module built before Lightning casts it (``--trainer.precision bf16-true``) saves the cast dtype
    cast = _TRUE_PRECISIONS.get(str(getattr(getattr(module, "_trainer", None), "precision", "")))
    for name, tensor in expected.items():
        other = saved[name]
        if not hasattr(other, "shape") or tuple(other.shape) != tuple(tensor.shape):
            return f"state_dict: {name} has shape {tuple(getattr(other, 'shape', ()))}, the model's is {tuple(tensor.shape)}"
        if other.dtype != tensor.dtype and not (cast is not None and tensor.is_floating_point() and
                                                str(other.dtype) == cast):
            return f"state_dict: {name} is {other.dtype}, the model's is {tensor.dtype}"
    if hasattr(module, "members") or not callable(getattr(module, "configure_optimizers", None)):
        return None
    configured = module.configure_optimizers()
    optimizer = configured.get("optimizer") if isinstance(configured, dict) else configured
    stored = (checkpoint.get("optimizer_states") or [None])[0]
    if optimizer is None or not isinstance(stored, dict):
        return None
    sizes = [len(group["params"]) for group in optimizer.param_groups]
    saved_sizes = [len(group.get("params") or []) for group in stored.get("param_groups") or []]
    if sizes != saved_sizes:
        return f"optimizer param groups of {saved_sizes} tensors, the model's optimizer has {sizes}"
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


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    recorded = _recorded(checkpoint).get("config") or {}
    model_args = (config.get("model") or {}).get("init_args") or {}
    saved_wd, wd = recorded.get("wd"), model_args.get("weight_decay", model_args.get("eta"))
    if _number(saved_wd) and _number(wd) and saved_wd != wd and not any(f[0].endswith((".weight_decay", ".eta"))
                                                                       for f in differences):
        differences.append(("model.weight_decay", saved_wd, wd))  # the weight decay its record states
    saved_seed, seed = recorded.get("seed"), config.get("seed_everything")
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
            raise UnusableCheckpoint(f"ckpt_path={problem}")


def trainer_call(method, *args, ckpt_path: str | None = None, weights_only: bool | None = None, hold=None, **kwargs):
    """``method(*args, ckpt_path=..., **kwargs)`` for a Trainer method (``trainer.fit``,
    ``validate``, ``test``, ``predict``): a checkpoint file that cannot be used is a one-line
    ``ConfigError`` before anything starts, and Lightning loads it with ``weights_only=True`` too.
    Lightning's symbolic paths (``last``, ``best``, ...) are refused (:func:`check_ckpt_path`).
    ``hold``: a context manager factory held while the method runs, after those checks (a lock)."""
    if weights_only is False:
        raise ConfigError("weights_only=False: refused (checkpoints are loaded as data only, with weights_only=True)")
    module = args[0] if args else kwargs.get("model")
    if ckpt_path is not None:
        check_ckpt_path(ckpt_path, resume=getattr(method, "__name__", "") == "fit")
        if module is not None and hasattr(module, "hparams"):
            check_checkpoint_shape(ckpt_path, module.hparams)
        if "weights_only" in inspect.signature(method).parameters:  # Lightning >= 2.5
            kwargs["weights_only"] = True
    with safe_globals(), (hold() if hold is not None else contextlib.nullcontext()), _checked_on_load(module, ckpt_path):
        return method(*args, ckpt_path=ckpt_path, **kwargs)


@contextlib.contextmanager
def _checked_on_load(module, ckpt_path):
    """While Lightning restores ``ckpt_path``: the checkpoint is checked against the built module
    (:func:`model_problem`) in the module's ``on_load_checkpoint`` hook, which Lightning calls with
    the loaded checkpoint after the model is built and before any tensor is copied into it (a
    model built at setup has no tensors before)."""
    if ckpt_path is None or module is None or not callable(getattr(module, "on_load_checkpoint", None)):
        yield
        return
    original = module.on_load_checkpoint

    def checked(checkpoint):
        problem = model_problem(checkpoint, module)
        if problem is not None:
            raise UnusableCheckpoint(f"ckpt_path={ckpt_path}: not a usable checkpoint for this run ({problem})")
        return original(checkpoint)

    module.on_load_checkpoint = checked
    try:
        yield
    finally:
        del module.on_load_checkpoint  # the class's hook again

