"""Sweep files -> resolved run configurations with stable ids.

A sweep file (YAML, under ``configs/sweeps/``) names a base LightningCLI config and the axes to
vary::

    name: canonical_wd                 # optional (default: the file's stem)
    base: configs/canonical.yaml       # relative to the repo root / the sweep folder's parent;
                                       # or a list, merged in order like repeated --config files
    overrides:                         # dotted keys applied to every run
      trainer.max_epochs: 5000
    grid:                              # cartesian product, first axis varies slowest
      wd: [0.1, 1.0]                   # alias of model.init_args.weight_decay
      seed: [7, 11]                    # alias of seed_everything
    zip:                               # optional: axes of equal length, varied together
      p: [23, 29]
      operation: [add, mul]
      label: [p23add, p29mul]          # optional: names the runs (folder name only, not the config)
    checkpoint_min_epochs: 200         # checkpoints/last.ckpt only for horizons >= this
    checkpoint_every: 50               # (default: the base config's run.checkpoint_every)
    keep_checkpoints: true             # keep last.ckpt after a run finished
    profiles:                          # per-profile overrides, selected with --profile
      smoke: {base: configs/smoke_model.yaml, overrides: {...}, grid: {...}, zip: {...}}
      paper: {...}

A profile's ``base`` (a file or a list) is merged after the top-level ``base``, so profiles can
share a model through one config file instead of repeating its keys. A profile's ``grid``/``zip``
axes replace the top-level axes of the same key (an axis set to ``null`` is removed); its
``overrides`` are applied after the top-level ones. ``run.profile`` is
set to the profile's name unless an override sets it.

Every run gets ``run_id`` = the first 12 hex digits of the SHA-1 of its resolved configuration
as canonical JSON, without the keys that only say *where* or *how fast* it runs (logger paths,
record path, threads, checkpoint cadence, progress bar). The same grid therefore always maps to
the same runs, and changing one value changes only the ids of the runs that value touches. The
human-readable ``name`` (``wd0.1_seed7_add_<hash8>``) is the run's directory in the store.

Every key is checked by the GrokCLI parser (jsonargparse, the same one ``grok-lightning fit``
uses), so a typo fails with one line (:class:`~grok_lightning.config.ConfigError`) naming the
sweep entry before anything runs. :func:`validate_types` additionally parses every run (types,
without instantiating anything).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grok_lightning.config import ConfigError, check_class_paths, read_yaml
from grok_lightning.package_data import package_root
from grok_lightning.sweep.keys import (  # noqa: F401 (get_dotted, set_dotted, validate_types: public here too)
    ALIASES,
    LABELS,
    check_keys,
    delete_dotted,
    get_dotted,
    resolve_key,
    set_dotted,
    split_dotted,
    validate_types,
)

__all__ = [
    "ALIASES", "RunSpec", "Sweep", "canonical_json", "checked_axes", "expand", "load_sweep", "resolve_key",
    "run_id_of", "identity_of", "set_dotted", "get_dotted", "validate_types",
]

#: an axis that only names runs (e.g. the arms of a zip): it goes into the run's folder name,
#: never into its config or run id
LABEL_AXIS = "label"
#: keys that say where/how fast a run runs, not what it computes: excluded from the run id
PLACEMENT_KEYS = (
    "trainer.logger.init_args.save_dir",
    "trainer.logger.init_args.name",
    "trainer.logger.init_args.version",
    "trainer.enable_progress_bar",
    "run.record_path",
    "run.run_id",
    "run.threads",
    "run.compile",
    "run.checkpoint_every",
    "run.checkpoint_minutes",
    "run.resume",
    # a checkpoint of another run that this run starts from (E12's B and C start from A's at the
    # intervention epoch): its path depends on the output folder; what the run computes does not
    "run.start_from",
)
SWEEP_KEYS = {"name", "description", "base", "overrides", "grid", "zip", "profiles", "default_profile",
              "checkpoint_min_epochs", "checkpoint_every", "keep_checkpoints"}
PROFILE_KEYS = {"base", "overrides", "grid", "zip", "description", "checkpoint_min_epochs", "checkpoint_every",
                "keep_checkpoints"}
#: what a sweep's name may be: it names a folder
SWEEP_NAME = re.compile(r"[A-Za-z0-9._+\-]{1,100}")


# --- small helpers ------------------------------------------------------------------------------
def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces); the input of the run id.

    >>> canonical_json({"b": [1, 2.0], "a": None})
    '{"a":null,"b":[1,2.0]}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)


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
    if key in LABELS:
        return LABELS[key]
    parts = [p for p in split_dotted(key) if p not in ("init_args", "class_path")]
    return re.sub(r"[^A-Za-z0-9]", "", parts[-1] if parts else key)[:16]


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
    base_path: str | list[str] | None = None  # the base config file(s), for people reading sweep.yaml

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


def find_base(base: str, sweep_path: Path) -> Path:
    base_path = Path(base)
    if base_path.is_absolute():
        candidates = [base_path]
    else:
        candidates = [sweep_path.parent.parent / base_path, sweep_path.parent / base_path,
                      Path.cwd() / base_path, package_root() / base_path]  # configs/... ship in the package
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(f"{sweep_path}: base={base!r}: no such config (looked in "
                      f"{', '.join(str(c.parent) for c in candidates)})")


def merge_configs(first: dict, second: dict) -> dict:
    """``second`` over ``first``, as LightningCLI merges repeated ``--config`` files: mappings merge
    key by key, anything else (lists included) is replaced; a different ``class_path`` replaces the
    whole entry (init arguments of one class mean nothing to another).

    >>> merge_configs({"model": {"init_args": {"a": 1, "b": [1]}}}, {"model": {"init_args": {"b": [2]}}})
    {'model': {'init_args': {'a': 1, 'b': [2]}}}
    """
    merged = copy.deepcopy(first)
    for key, value in second.items():
        old = merged.get(key)
        if (isinstance(old, dict) and isinstance(value, dict)
                and old.get("class_path", value.get("class_path")) == value.get("class_path", old.get("class_path"))):
            merged[key] = merge_configs(old, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _read_bases(bases: Any, sweep_path: Path, where: str) -> tuple[dict, list[Path]]:
    """One base config file or a list of them -> the merged config and the files read."""
    names = bases if isinstance(bases, list) else [bases]
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ConfigError(f"{where}: base={bases!r}: must be a config file or a list of config files")
    merged: dict = {}
    paths = []
    for name in names:
        path = find_base(name, sweep_path)
        data = read_yaml(path, "base config")
        if not isinstance(data, dict):
            raise ConfigError(f"base config {path}: must be a YAML mapping")
        merged = merge_configs(merged, data)
        paths.append(path)
    return merged, paths


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping of dotted keys, got {type(value).__name__}")
    return dict(value)


def checked_axes(value: Any, where: str) -> dict[str, list | None]:
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
    return [checked_axes(group, f"{where}[{i}]" if isinstance(value, list) else where) for i, group in enumerate(groups)]


def _resolved(mapping: dict, where: str) -> dict:
    """Keys -> dotted keys. Two names for one key (``wd`` and ``weight_decay``) are refused: the
    last one would win silently."""
    resolved: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, value in mapping.items():
        dotted = resolve_key(key)
        if dotted in names:
            raise ConfigError(f"{where}: {names[dotted]!r} and {key!r} both name {dotted}; keep one of them")
        names[dotted], resolved[dotted] = str(key), value
    return resolved


def load_sweep(path: str | Path, profile: str | None = None) -> Sweep:
    """Read a sweep file and apply one profile; raise ``ConfigError`` (one line) if malformed.

    Without ``profile``: the file's ``default_profile``, else ``smoke`` when the file has one,
    else no profile.
    """
    path = Path(path)
    data = read_yaml(path, "sweep file")
    if not isinstance(data, dict):
        raise ConfigError(f"sweep file {path}: must be a YAML mapping with base/grid, got {type(data).__name__}")
    unknown = sorted(set(data) - SWEEP_KEYS)
    if unknown:
        raise ConfigError(f"sweep file {path}: unknown top-level key(s) {', '.join(unknown)} "
                          f"(allowed: {', '.join(sorted(SWEEP_KEYS))})")
    if not data.get("base"):
        raise ConfigError(f"sweep file {path}: missing 'base' (a LightningCLI config under configs/)")
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

    at = f"{path}: profiles.{profile}"
    bases = list(data["base"]) if isinstance(data["base"], list) else [data["base"]]
    if prof.get("base"):
        bases += list(prof["base"]) if isinstance(prof["base"], list) else [prof["base"]]
    base, base_paths = _read_bases(bases, path, f"sweep file {path}")
    overrides = _resolved(_mapping(data.get("overrides"), f"{path}: overrides"), f"{path}: overrides")
    overrides.update(_resolved(_mapping(prof.get("overrides"), f"{at}.overrides"), f"{at}.overrides"))
    if profile is not None:
        overrides.setdefault("run.profile", profile)
    grid = _resolved(checked_axes(data.get("grid"), f"{path}: grid"), f"{path}: grid")
    grid.update(_resolved(checked_axes(prof.get("grid"), f"{at}.grid"), f"{at}.grid"))  # replaces the same axes
    grid = {k: v for k, v in grid.items() if v is not None}
    zips = [_resolved(z, f"{path}: zip") for z in _zips(data.get("zip"), f"{path}: zip")]
    prof_zips = [_resolved(z, f"{at}.zip") for z in _zips(prof.get("zip"), f"{at}.zip")]
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
        source=str(path.resolve()),
        base_path=str(base_paths[0]) if len(base_paths) == 1 else [str(p) for p in base_paths],
    )
    check_sweep(sweep, where=str(path))
    return sweep


def check_sweep(sweep: Sweep, where: str = "sweep") -> None:
    """Structure and key checks (one ``ConfigError`` line each); classes it names must come from
    trusted packages (:func:`~grok_lightning.config.check_class_paths`)."""
    if not isinstance(sweep.name, str) or not SWEEP_NAME.fullmatch(sweep.name) or sweep.name in (".", ".."):
        # the name becomes a folder (runs/sweeps/<name>-<profile> without --out): never a path
        raise ConfigError(f"{where}: name={sweep.name!r}: must be a plain name (letters, digits, '.', '_', '+', '-'), "
                          "not a path")
    if not sweep.grid and not sweep.zips:
        raise ConfigError(f"{where}: empty grid (give at least one axis under grid: or zip:)")
    check_class_paths(sweep.base, where, "base")
    check_class_paths(sweep.overrides, where, "overrides")
    for name, axes in [("grid", sweep.grid), *(("zip", group) for group in sweep.zips)]:
        check_class_paths(axes, where, name)
        for key, values in axes.items():
            if key.endswith("class_path"):
                check_class_paths([{"class_path": v} for v in values], where, f"{name}.{key}")
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
    # every key is checked by the GrokCLI parser on one config: the base with every override and
    # the first value of every axis applied (a class_path on an axis brings its own arguments)
    probe = copy.deepcopy(sweep.base)
    locations: dict[str, str] = {}
    for key, value in sweep.overrides.items():
        set_dotted(probe, key, copy.deepcopy(value))
        locations[key] = f"overrides.{key}"
    for name, axes in [("grid", sweep.grid), *(("zip", group) for group in sweep.zips)]:
        for key, values in axes.items():
            if key == LABEL_AXIS:
                continue
            set_dotted(probe, key, copy.deepcopy(values[0]))
            locations[key] = f"{name}.{key}"
    check_keys(probe, locations, where)


def _coerce(base: dict, key: str, value: Any) -> Any:
    """An int given for a float field becomes a float (``wd: 1`` and ``wd: 1.0`` are one run)."""
    current = get_dotted(base, key, None)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def identity_of(config: dict) -> dict:
    """The config without its placement keys: what the run computes, the part its run id hashes."""
    identity = copy.deepcopy(config)
    for key in PLACEMENT_KEYS:
        delete_dotted(identity, key)
    return identity


def run_id_of(config: dict) -> str:
    """12 hex digits of SHA-1 over the canonical JSON of the config without placement keys."""
    return hashlib.sha1(canonical_json(identity_of(config)).encode()).hexdigest()[:12]


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
            if key == LABEL_AXIS:
                continue
            value = _coerce(base, key, copy.deepcopy(value))
            axes[key] = value
            set_dotted(config, key, value)
        run_id = run_id_of(config)
        # placement keys stay out of the folder name too: a folder must not depend on where the output lives;
        # a label axis replaces the axes it names
        named = {k: v for k, v in axes.items() if LABEL_AXIS not in axes or k in (LABEL_AXIS, *sweep.grid)}
        label = "_".join(_format_value(v) if k == LABEL_AXIS else f"{_label(k)}{_format_value(v)}"
                         for k, v in named.items() if not k.endswith("class_path") and k not in PLACEMENT_KEYS)
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


