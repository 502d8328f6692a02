"""Sweep files -> resolved run configurations with stable ids.

A sweep file (YAML, under ``configs/sweeps/``) names a base LightningCLI config and the axes to
vary::

    name: canonical_wd                 # optional (default: the file's stem)
    base: configs/canonical.yaml       # relative to the repo root / the sweep folder's parent
    overrides:                         # dotted keys applied to every run
      trainer.max_epochs: 5000
    grid:                              # cartesian product, first axis varies slowest
      wd: [0.1, 1.0]                   # alias of model.init_args.weight_decay
      seed: [7, 11]                    # alias of seed_everything
    zip:                               # optional: axes of equal length, varied together
      p: [23, 29]
      operation: [add, mul]
    checkpoint_min_epochs: 200         # checkpoints/last.ckpt only for horizons >= this
    checkpoint_every: 50               # (default: the base config's run.checkpoint_every)
    keep_checkpoints: true             # keep last.ckpt after a run finished
    profiles:                          # per-profile overrides, selected with --profile
      smoke: {overrides: {...}, grid: {...}, zip: {...}}
      paper: {...}

A profile's ``grid``/``zip`` axes replace the top-level axes of the same key (an axis set to
``null`` is removed); its ``overrides`` are applied after the top-level ones. ``run.profile`` is
set to the profile's name unless an override sets it.

Every run gets ``run_id`` = the first 12 hex digits of the SHA-1 of its resolved configuration
as canonical JSON, without the keys that only say *where* or *how fast* it runs (logger paths,
record path, threads, checkpoint cadence, progress bar). The same grid therefore always maps to
the same runs, and changing one value changes only the ids of the runs that value touches. The
human-readable ``name`` (``wd0.1_seed7_add_<hash8>``) is the run's directory in the store.

Every key is checked against the base config and the signature of the class that receives it
(``inspect``), so a typo fails with one line (:class:`~grok_lightning.config.ConfigError`) before
anything runs. :func:`validate_types` additionally parses every run with the GrokCLI parser
(types, without instantiating anything).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import inspect
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grok_lightning.config import ConfigError

__all__ = [
    "ALIASES", "RunSpec", "Sweep", "canonical_json", "expand", "load_sweep", "resolve_key",
    "run_id_of", "set_dotted", "get_dotted", "validate_types",
]

#: short axis names -> dotted config keys
ALIASES = {
    "wd": "model.init_args.weight_decay",
    "weight_decay": "model.init_args.weight_decay",
    "seed": "seed_everything",
    "operation": "data.init_args.operation",
    "op": "data.init_args.operation",
    "p": "data.init_args.p",
    "lr": "model.init_args.lr",
    "epochs": "trainer.max_epochs",
    "max_epochs": "trainer.max_epochs",
}
#: the short label used in run names for these keys (value only for operation)
NAME_LABELS = {
    "model.init_args.weight_decay": "wd",
    "seed_everything": "seed",
    "data.init_args.operation": "",
    "data.init_args.p": "p",
    "model.init_args.lr": "lr",
    "trainer.max_epochs": "ep",
}
#: keys that say where/how fast a run runs, not what it computes: excluded from the run id
PLACEMENT_KEYS = (
    "trainer.logger.init_args.save_dir",
    "trainer.logger.init_args.name",
    "trainer.logger.init_args.version",
    "trainer.enable_progress_bar",
    "run.record_path",
    "run.run_id",
    "run.threads",
    "run.checkpoint_every",
)
SWEEP_KEYS = {"name", "description", "base", "overrides", "grid", "zip", "profiles", "default_profile",
              "checkpoint_min_epochs", "checkpoint_every", "keep_checkpoints"}
PROFILE_KEYS = {"overrides", "grid", "zip", "description", "checkpoint_min_epochs", "checkpoint_every",
                "keep_checkpoints"}
REPO_ROOT = Path(__file__).resolve().parents[2]
_MISSING = object()  # "no default given"
_ABSENT = object()  # returned as a default to test for absence


# --- small helpers ------------------------------------------------------------------------------
def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces); the input of the run id.

    >>> canonical_json({"b": [1, 2.0], "a": None})
    '{"a":null,"b":[1,2.0]}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)


def _split(key: str) -> list[str]:
    return [part for part in str(key).split(".")]


def get_dotted(config: dict, key: str, default: Any = _MISSING) -> Any:
    """``get_dotted({"a": {"b": 1}}, "a.b") == 1``; list items by index (``callbacks.0``)."""
    node: Any = config
    for part in _split(key):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            if default is _MISSING:
                raise KeyError(key)
            return default
    return node


def set_dotted(config: dict, key: str, value: Any) -> None:
    """Set ``config[a][b][c] = value`` for ``key = "a.b.c"``, creating dicts on the way."""
    parts = _split(key)
    node: Any = config
    for part in parts[:-1]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"{key}: cannot set below a non-mapping value")
        if not isinstance(node.get(part), dict) and not isinstance(node.get(part), list):
            node[part] = {}
        node = node[part]
    last = parts[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(f"{key}: cannot set below a non-mapping value")


def _delete_dotted(config: dict, key: str) -> None:
    parts = _split(key)
    try:
        parent = get_dotted(config, ".".join(parts[:-1])) if len(parts) > 1 else config
    except KeyError:
        return
    if isinstance(parent, dict):
        parent.pop(parts[-1], None)


def _format_value(value: Any) -> str:
    """Short, filesystem-safe text for a value in a run name.

    >>> [_format_value(v) for v in (0.1, 1e-05, 10, True, "add", [0.9, 0.98])]
    ['0.1', '1e-05', '10', 'true', 'add', '0.9-0.98']
    """
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = "-".join(_format_value(v) for v in value)
    elif value is None:
        text = "none"
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.+\-]", "-", text)[:40]


def _label(key: str) -> str:
    if key in NAME_LABELS:
        return NAME_LABELS[key]
    parts = [p for p in _split(key) if p not in ("init_args", "class_path")]
    return re.sub(r"[^A-Za-z0-9]", "", parts[-1] if parts else key)[:16]


# --- key resolution and validation ----------------------------------------------------------------
def _import(path: str):
    module, _, name = str(path).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"class_path={path!r}: cannot import ({err})") from None


def _section_classes() -> dict[str, type]:
    """Top-level sections GrokCLI adds (``run``, ``grok``, ``diagnostics``...) -> their classes.

    Found by replaying ``GrokCLI.add_arguments_to_parser`` against a recorder, so sections added
    later are picked up without touching this module.
    """
    from lightning.pytorch import Trainer

    sections: dict[str, type] = {"trainer": Trainer}

    class _Recorder:
        def add_class_arguments(self, cls, nested_key=None, *args, **kwargs):
            if nested_key:
                sections[str(nested_key)] = cls

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    try:
        from grok_lightning.run import GrokCLI

        GrokCLI.add_arguments_to_parser(_Recorder(), _Recorder())
    except Exception:  # pragma: no cover - fall back to the known sections
        from grok_lightning.callbacks import GrokDetector
        from grok_lightning.run import RunSettings

        sections.update(run=RunSettings, grok=GrokDetector)
    return sections


def _parameters(cls) -> tuple[set[str], bool]:
    """Accepted init argument names of ``cls`` and whether it takes ``**kwargs``."""
    names: set[str] = set()
    var_kw = False
    try:
        signature = inspect.signature(cls.__init__ if inspect.isclass(cls) else cls)
    except (TypeError, ValueError):
        return names, True
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_kw = True
        elif param.name != "self" and param.kind is not param.VAR_POSITIONAL:
            names.add(param.name)
    return names, var_kw


def resolve_key(key: str) -> str:
    """Aliases -> dotted keys; ``model.lr`` -> ``model.init_args.lr`` (LightningCLI shorthand).

    >>> resolve_key("wd"), resolve_key("model.lr"), resolve_key("trainer.max_epochs")
    ('model.init_args.weight_decay', 'model.init_args.lr', 'trainer.max_epochs')
    """
    key = str(key).strip()
    key = ALIASES.get(key, key)
    parts = _split(key)
    if len(parts) >= 2 and parts[0] in ("model", "data") and parts[1] not in ("init_args", "class_path", "dict_kwargs"):
        parts.insert(1, "init_args")
    return ".".join(parts)


class _KeyChecker:
    """Checks that a dotted key exists in a config or is a valid init argument of its class."""

    def __init__(self, config: dict):
        self.config = config
        self._sections: dict[str, type] | None = None

    @property
    def sections(self) -> dict[str, type]:
        if self._sections is None:
            self._sections = _section_classes()
        return self._sections

    def check(self, key: str, where: str) -> None:
        if get_dotted(self.config, key, _ABSENT) is not _ABSENT:
            return
        parts = _split(key)
        top = parts[0]
        if top == "seed_everything" and len(parts) == 1:
            return
        node: Any = self.config.get(top, _ABSENT)
        cls = None
        rest = parts[1:]
        if top in ("model", "data") or (isinstance(node, dict) and "class_path" in node):
            if not isinstance(node, dict) or "class_path" not in node:
                raise ConfigError(f"{where}: unknown key {key!r} (the base config has no {top}.class_path)")
            cls = _import(node["class_path"])
            if not rest or rest[0] not in ("init_args", "dict_kwargs"):
                raise ConfigError(f"{where}: unknown key {key!r} (use {top}.init_args.<name>)")
            if rest[0] == "dict_kwargs":
                return
            rest = rest[1:]
        elif top in self.sections:
            cls = self.sections[top]
        else:
            known = sorted(set(self.config) | set(self.sections) | {"seed_everything"})
            raise ConfigError(f"{where}: unknown key {key!r} (top-level sections: {', '.join(known)})")
        self._check_in_class(cls, rest, key, where, node.get("init_args", {}) if isinstance(node, dict) and "class_path" in node else node)

    def _check_in_class(self, cls, rest: list[str], key: str, where: str, node: Any) -> None:
        if not rest:
            return
        names, var_kw = _parameters(cls)
        name = rest[0]
        if name not in names and not var_kw:
            close = sorted(n for n in names if n[:3] == name[:3] or name in n or n in name)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"{where}: unknown key {key!r}: {cls.__name__} has no argument {name!r}{hint}")
        if len(rest) == 1:
            return
        value = node.get(name, _ABSENT) if isinstance(node, dict) else _ABSENT
        if isinstance(value, dict) and "class_path" in value:  # e.g. trainer.logger.init_args.x
            sub = _import(value["class_path"])
            if rest[1] != "init_args":
                if rest[1] == "class_path" and len(rest) == 2:
                    return
                raise ConfigError(f"{where}: unknown key {key!r} (use {'.'.join(_split(key)[:-len(rest) + 1])}.init_args.<name>)")
            self._check_in_class(sub, rest[2:], key, where, value.get("init_args", {}))
        # deeper keys into plain dict/list arguments (arch_kwargs.x, betas.0) cannot be checked


# --- the sweep ------------------------------------------------------------------------------------
@dataclass
class RunSpec:
    """One run of a sweep: its stable id, readable name, axis values and resolved config."""

    run_id: str
    name: str
    axes: dict[str, Any]
    config: dict

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "name": self.name, "axes": self.axes, "config": self.config}


@dataclass
class Sweep:
    """A sweep file with one profile applied: everything needed to expand the runs.

    ``to_dict()`` is what the store writes as ``sweep.yaml``: the base config is inlined, so a
    stored sweep expands to the same runs even if ``configs/`` changes later.
    """

    name: str
    profile: str | None
    base: dict
    overrides: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)
    zips: list[dict[str, list]] = field(default_factory=list)
    checkpoint_min_epochs: int = 100
    checkpoint_every: int | None = None
    keep_checkpoints: bool = True
    source: str | None = None
    base_path: str | None = None

    def to_dict(self) -> dict:
        return {
            "name": self.name, "profile": self.profile, "source": self.source, "base_path": self.base_path,
            "checkpoint_min_epochs": self.checkpoint_min_epochs, "checkpoint_every": self.checkpoint_every,
            "keep_checkpoints": self.keep_checkpoints, "overrides": self.overrides, "grid": self.grid,
            "zip": self.zips, "base": self.base,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Sweep":
        return cls(
            name=data["name"], profile=data.get("profile"), base=data["base"],
            overrides=dict(data.get("overrides") or {}), grid=dict(data.get("grid") or {}),
            zips=[dict(z) for z in data.get("zip") or []],
            checkpoint_min_epochs=int(data.get("checkpoint_min_epochs", 100)),
            checkpoint_every=data.get("checkpoint_every"), keep_checkpoints=bool(data.get("keep_checkpoints", True)),
            source=data.get("source"), base_path=data.get("base_path"),
        )

    def expand(self) -> list[RunSpec]:
        return expand(self)


def _read_yaml(path: Path, what: str) -> Any:
    try:
        with open(path) as handle:
            return yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{what} {path}: not valid YAML{at}: {problem}") from None


def _find_base(base: str, sweep_path: Path) -> Path:
    base_path = Path(base)
    if base_path.is_absolute():
        candidates = [base_path]
    else:
        candidates = [sweep_path.parent.parent / base_path, sweep_path.parent / base_path,
                      Path.cwd() / base_path, REPO_ROOT / base_path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(f"{sweep_path}: base={base!r}: no such config (looked in "
                      f"{', '.join(str(c.parent) for c in candidates)})")


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping of dotted keys, got {type(value).__name__}")
    return dict(value)


def _axes(value: Any, where: str) -> dict[str, list | None]:
    axes = _mapping(value, where)
    for key, values in axes.items():
        if values is None:
            continue
        if not isinstance(values, list):
            raise ConfigError(f"{where}.{key}: must be a list of values, got {values!r}")
        if not values:
            raise ConfigError(f"{where}.{key}: empty list (an axis needs at least one value)")
    return axes


def _zips(value: Any, where: str) -> list[dict[str, list | None]]:
    if value is None:
        return []
    groups = value if isinstance(value, list) else [value]
    return [_axes(group, f"{where}[{i}]" if isinstance(value, list) else where) for i, group in enumerate(groups)]


def load_sweep(path: str | Path, profile: str | None = None) -> Sweep:
    """Read a sweep file and apply one profile; raise ``ConfigError`` (one line) if malformed.

    Without ``profile``: the file's ``default_profile``, else ``smoke`` when the file has one,
    else no profile.
    """
    path = Path(path)
    data = _read_yaml(path, "sweep file")
    if not isinstance(data, dict):
        raise ConfigError(f"sweep file {path}: must be a YAML mapping with base/grid, got {type(data).__name__}")
    unknown = sorted(set(data) - SWEEP_KEYS)
    if unknown:
        raise ConfigError(f"sweep file {path}: unknown top-level key(s) {', '.join(unknown)} "
                          f"(allowed: {', '.join(sorted(SWEEP_KEYS))})")
    if not data.get("base"):
        raise ConfigError(f"sweep file {path}: missing 'base' (a LightningCLI config under configs/)")
    base_path = _find_base(str(data["base"]), path)
    base = _read_yaml(base_path, "base config")
    if not isinstance(base, dict):
        raise ConfigError(f"base config {base_path}: must be a YAML mapping")
    profiles = _mapping(data.get("profiles"), f"{path}: profiles")
    if profile is None:
        profile = data.get("default_profile") or ("smoke" if "smoke" in profiles else None)
    if profile is not None and profiles and profile not in profiles:
        raise ConfigError(f"--profile={profile!r}: {path.name} has profiles {', '.join(profiles)}")
    if profile is not None and not profiles:
        raise ConfigError(f"--profile={profile!r}: {path.name} has no profiles (drop --profile)")
    prof = _mapping(profiles.get(profile) if profile else None, f"{path}: profiles.{profile}")
    bad = sorted(set(prof) - PROFILE_KEYS)
    if bad:
        raise ConfigError(f"{path}: profiles.{profile}: unknown key(s) {', '.join(bad)} "
                          f"(allowed: {', '.join(sorted(PROFILE_KEYS))})")

    overrides = {resolve_key(k): v for k, v in _mapping(data.get("overrides"), f"{path}: overrides").items()}
    overrides.update({resolve_key(k): v for k, v in _mapping(prof.get("overrides"), f"{path}: profiles.{profile}.overrides").items()})
    if profile is not None:
        overrides.setdefault("run.profile", profile)
    grid = {resolve_key(k): v for k, v in _axes(data.get("grid"), f"{path}: grid").items()}
    for key, values in _axes(prof.get("grid"), f"{path}: profiles.{profile}.grid").items():
        grid[resolve_key(key)] = values
    grid = {k: v for k, v in grid.items() if v is not None}
    zips = [{resolve_key(k): v for k, v in z.items()} for z in _zips(data.get("zip"), f"{path}: zip")]
    prof_zips = [{resolve_key(k): v for k, v in z.items()} for z in _zips(prof.get("zip"), f"{path}: profiles.{profile}.zip")]
    if prof_zips:
        zips = prof_zips
    zips = [{k: v for k, v in z.items() if v is not None} for z in zips]
    zips = [z for z in zips if z]

    def setting(name, default):
        return prof.get(name, data.get(name, default))

    sweep = Sweep(
        name=str(data.get("name") or path.stem), profile=profile, base=base, overrides=overrides,
        grid=grid, zips=zips, checkpoint_min_epochs=int(setting("checkpoint_min_epochs", 100)),
        checkpoint_every=setting("checkpoint_every", None), keep_checkpoints=bool(setting("keep_checkpoints", True)),
        source=str(path.resolve()), base_path=str(base_path),
    )
    check_sweep(sweep, where=str(path))
    return sweep


def check_sweep(sweep: Sweep, where: str = "sweep") -> None:
    """Structure and key checks (one ``ConfigError`` line each)."""
    if not sweep.grid and not sweep.zips:
        raise ConfigError(f"{where}: empty grid (give at least one axis under grid: or zip:)")
    seen: dict[str, str] = {}
    for i, group in enumerate(sweep.zips):
        lengths = {k: len(v) for k, v in group.items()}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise ConfigError(f"{where}: zip axes must have equal lengths, got {detail}")
        for key in group:
            if key in sweep.grid or key in seen:
                raise ConfigError(f"{where}: axis {key!r} appears twice (grid and zip)")
            seen[key] = "zip"
    # keys are checked against the base config (not the overridden one: an override must not
    # vouch for itself); a changed class_path is applied first so its init args are checked
    merged = copy.deepcopy(sweep.base)
    for key, value in sweep.overrides.items():
        if key.endswith("class_path") or (isinstance(value, dict) and "class_path" in value):
            set_dotted(merged, key, copy.deepcopy(value))
    for axes in [sweep.grid, *sweep.zips]:  # class_path changes on an axis: check the first value
        for key, values in axes.items():
            if key.endswith("class_path"):
                set_dotted(merged, key, values[0])
    checker = _KeyChecker(merged)
    for key in sweep.overrides:
        checker.check(key, f"{where}: overrides.{key}")
    for key in sweep.grid:
        checker.check(key, f"{where}: grid.{key}")
    for group in sweep.zips:
        for key in group:
            checker.check(key, f"{where}: zip.{key}")


def _coerce(base: dict, key: str, value: Any) -> Any:
    """An int given for a float field becomes a float (``wd: 1`` and ``wd: 1.0`` are one run)."""
    current = get_dotted(base, key, None)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _identity(config: dict) -> dict:
    identity = copy.deepcopy(config)
    for key in PLACEMENT_KEYS:
        _delete_dotted(identity, key)
    return identity


def run_id_of(config: dict) -> str:
    """12 hex digits of SHA-1 over the canonical JSON of the config without placement keys."""
    return hashlib.sha1(canonical_json(_identity(config)).encode()).hexdigest()[:12]


def expand(sweep: Sweep) -> list[RunSpec]:
    """All runs of a sweep, in grid order (first axis slowest, zip groups innermost)."""
    base = copy.deepcopy(sweep.base)
    for key, value in sweep.overrides.items():
        set_dotted(base, key, copy.deepcopy(value))
    factors: list[list[dict]] = []
    for key, values in sweep.grid.items():
        factors.append([{key: v} for v in values])
    for group in sweep.zips:
        keys = list(group)
        factors.append([dict(zip(keys, row)) for row in zip(*(group[k] for k in keys))])
    runs: list[RunSpec] = []
    seen: dict[str, str] = {}
    for combo in itertools.product(*factors):
        axes: dict[str, Any] = {}
        for part in combo:
            axes.update(part)
        config = copy.deepcopy(base)
        for key, value in axes.items():
            value = _coerce(base, key, copy.deepcopy(value))
            axes[key] = value
            set_dotted(config, key, value)
        run_id = run_id_of(config)
        label = "_".join(f"{_label(k)}{_format_value(v)}" for k, v in axes.items() if not k.endswith("class_path"))
        name = f"{label[:100]}_{run_id[:8]}" if label else run_id
        if run_id in seen:
            raise ConfigError(f"sweep {sweep.name}: runs {seen[run_id]} and {name} have the same config "
                              f"(duplicate axis values?)")
        seen[run_id] = name
        runs.append(RunSpec(run_id=run_id, name=name, axes=axes, config=config))
    return runs


def max_epochs_of(config: dict) -> int | None:
    value = get_dotted(config, "trainer.max_epochs", None)
    return int(value) if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)) else None


# --- full type validation through the GrokCLI parser (no instantiation) --------------------------
def _one_line(message: str) -> str:
    r"""The informative line of a (multi-line) jsonargparse error.

    >>> _one_line('Parser key "run.threads":\n  Does not validate\n  - Expected a <class \'int\'>\n  Given value: x')
    "run.threads: Expected a <class 'int'> (given value: x)"
    """
    lines = [line.strip().lstrip("- ").strip() for line in str(message).splitlines() if line.strip()]
    key = None
    for i, line in enumerate(lines):
        match = re.match(r'Parser key "([^"]+)"', line)
        if match:
            key = match.group(1)
            continue
        if line.startswith(("Option ", "Group ")) or (line.startswith("Expected") and "NoneType" not in line):
            given = next((l.split(":", 1)[1].strip() for l in lines[i:] if l.startswith("Given value:")), None)
            text = f"{key}: {line}" if key else line
            return f"{text} (given value: {given})" if given is not None and "Got value" not in line else text
    return lines[0] if lines else "invalid configuration"


def validate_types(runs: list[RunSpec]) -> None:
    """Parse every run's config with the GrokCLI parser without instantiating anything.

    Catches wrong types (``n_layers: abc``) and anything the key check could not see. Values that
    only the classes reject (``n_heads`` not dividing ``d_model``) surface when the run starts and
    are recorded as a ``failed`` run with the message.
    """
    if not runs:
        return
    import warnings

    from grok_lightning.run import GrokCLI

    class _ParseOnly(GrokCLI):
        def _set_seed(self):
            pass

        def _add_instantiators(self):
            pass

        def before_instantiate_classes(self):
            pass

        def instantiate_classes(self):
            pass

        def after_instantiate_classes(self):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cli = _ParseOnly(args=copy.deepcopy(runs[0].config), run=False, parser_kwargs={"exit_on_error": False})
        except ConfigError:
            raise
        except BaseException as err:  # ArgumentError / SystemExit from jsonargparse
            raise ConfigError(f"run {runs[0].name}: {_one_line(str(err))}") from None
        for run in runs[1:]:
            try:
                cli.parser.parse_object(copy.deepcopy(run.config))
            except BaseException as err:
                raise ConfigError(f"run {run.name}: {_one_line(str(err))}") from None
