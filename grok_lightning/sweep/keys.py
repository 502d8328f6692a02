"""Dotted config keys: get/set, the short aliases of sweep files, and the checks that every key
exists (against the base config and the signature of the class that receives it) and that every
run parses with the GrokCLI parser.

A typo fails with one line (:class:`~grok_lightning.config.ConfigError`) before anything runs.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from typing import Any

from grok_lightning.config import ConfigError, parser_error_line, validate_run_config

__all__ = ["ALIASES", "KeyChecker", "get_dotted", "resolve_key", "set_dotted", "validate_types"]

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
_MISSING = object()  # "no default given"
_ABSENT = object()  # returned as a default to test for absence


# --- get and set ------------------------------------------------------------------------------------
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


class KeyChecker:
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


# --- full type validation through the GrokCLI parser (no instantiation) --------------------------
def validate_types(runs: list) -> None:
    """Parse every run's config with the GrokCLI parser without instantiating anything.

    Catches wrong types (``n_layers: abc``) and anything the key check could not see, and applies
    :func:`~grok_lightning.config.validate_run_config` (``trainer.max_epochs``, finite lr and
    weight decay). Values that only the classes reject (``n_heads`` not dividing ``d_model``)
    surface when the run starts and are recorded as a ``failed`` run with the message.
    """
    if not runs:
        return
    for run in runs:
        try:
            validate_run_config(run.config)
        except ConfigError as err:
            raise ConfigError(f"run {run.name}: {err}") from None
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
            raise ConfigError(f"run {runs[0].name}: {parser_error_line(str(err))}") from None
        for run in runs[1:]:
            try:
                cli.parser.parse_object(copy.deepcopy(run.config))
            except BaseException as err:
                raise ConfigError(f"run {run.name}: {parser_error_line(str(err))}") from None
