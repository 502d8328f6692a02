"""Dotted config keys: get/set, the short aliases of sweep files, and the checks that every key
exists and every run parses, both done by the GrokCLI parser (jsonargparse) without
instantiating anything.

A typo fails with one line (:class:`~grok_lightning.config.ConfigError`) before anything runs;
an unknown key is reported where the sweep file has it (``grid.<key>``, ``overrides.<key>``)
with the class that has no such argument and the closest names it does have.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import re
import warnings
from typing import Any

from grok_lightning.config import ConfigError, parser_error_line, validate_run_config

__all__ = ["ALIASES", "LABELS", "check_keys", "delete_dotted", "get_dotted", "resolve_key", "set_dotted", "split_dotted", "validate_types"]

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
    "ep": "trainer.max_epochs",
}
#: dotted keys whose values name themselves in a run's folder name (``add``, not ``opadd``)
VALUE_ONLY = ("data.init_args.operation",)


def _labels() -> dict[str, str]:
    """The inverse of :data:`ALIASES`: dotted key -> its shortest alias, the label it gets in run
    names (``wd0.1_seed7``); empty for :data:`VALUE_ONLY` keys."""
    inverse: dict[str, str] = {}
    for alias, dotted in ALIASES.items():
        if dotted not in inverse or len(alias) < len(inverse[dotted]):
            inverse[dotted] = alias
    return {dotted: "" if dotted in VALUE_ONLY else alias for dotted, alias in inverse.items()}


LABELS = _labels()
_MISSING = object()  # "no default given"
_ABSENT = object()  # returned as a default to test for absence


# --- get and set ------------------------------------------------------------------------------------
def split_dotted(key: str) -> list[str]:
    return [part for part in str(key).split(".")]


def get_dotted(config: dict, key: str, default: Any = _MISSING) -> Any:
    """``get_dotted({"a": {"b": 1}}, "a.b") == 1``; list items by index (``callbacks.0``)."""
    node: Any = config
    for part in split_dotted(key):
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
    parts = split_dotted(key)
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


def delete_dotted(config: dict, key: str) -> None:
    parts = split_dotted(key)
    try:
        parent = get_dotted(config, ".".join(parts[:-1])) if len(parts) > 1 else config
    except KeyError:
        return
    if isinstance(parent, dict):
        parent.pop(parts[-1], None)


# --- key resolution ------------------------------------------------------------------------------
def resolve_key(key: str) -> str:
    """Aliases -> dotted keys; ``model.lr`` -> ``model.init_args.lr`` (LightningCLI shorthand).

    >>> resolve_key("wd"), resolve_key("model.lr"), resolve_key("trainer.max_epochs")
    ('model.init_args.weight_decay', 'model.init_args.lr', 'trainer.max_epochs')
    """
    key = str(key).strip()
    key = ALIASES.get(key, key)
    parts = split_dotted(key)
    if len(parts) >= 2 and parts[0] in ("model", "data") and parts[1] not in ("init_args", "class_path", "dict_kwargs"):
        parts.insert(1, "init_args")
    return ".".join(parts)


# --- the parser -----------------------------------------------------------------------------------
_CLI = None  # one GrokCLI that only builds its parser, per process: building it costs about a second


def _parser():
    """The GrokCLI parser (jsonargparse), built once without parsing or instantiating anything."""
    global _CLI
    if _CLI is None:
        from jsonargparse import Namespace

        from grok_lightning.run import GrokCLI

        class _ParserOnly(GrokCLI):
            def parse_arguments(self, parser, args):
                self.config = Namespace()

            def _parse_ckpt_path(self):
                pass

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
            _CLI = _ParserOnly(args={}, run=False, parser_kwargs={"exit_on_error": False})
    return _CLI.parser


def _parse(config: dict) -> None:
    """Parse ``config`` as ``grok-lightning fit --config`` would (raises jsonargparse's error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _parser().parse_object(copy.deepcopy(config))


def _unknown_key(message: str) -> tuple[str, str | None] | None:
    r"""``(dotted key without init_args, class path or group that lacks it)`` when jsonargparse's
    error is an unknown key, else None.

    >>> _unknown_key("Group 'trainer' does not accept option 'max_epoch'")
    ('trainer.max_epoch', 'group:trainer')
    >>> _unknown_key("Parser key \"model\": Problem with given class_path 'a.B': Option 'foo' is not accepted")
    ('model.foo', 'a.B')
    """
    text = str(message)
    match = re.search(r"Group '([^']+)' does not accept option '([^']+)'", text)
    if match:
        return f"{match.group(1)}.{match.group(2)}", f"group:{match.group(1)}"
    match = re.search(r"Option '([^']+)' is not accepted", text)
    if not match:
        return None
    section = ".".join(re.findall(r'Parser key "([^"]+)"', text))
    owners = re.findall(r"Problem with given class_path '([^']+)'", text)
    return (f"{section}.{match.group(1)}" if section else match.group(1)), (owners[-1] if owners else None)


def _owner_class(owner: str | None):
    if owner is None:
        return None
    if owner.startswith("group:"):
        name = owner.split(":", 1)[1]
        if name == "trainer":  # LightningCLI adds it without a group class
            from lightning.pytorch import Trainer

            return Trainer
        return getattr(_parser().groups.get(name), "group_class", None)
    from grok_lightning.config import is_trusted

    if not is_trusted(owner):  # a name from a parser message: imported only where a config may name it
        return None
    module, _, name = owner.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _parameters(cls) -> list[str]:
    try:
        signature = inspect.signature(cls.__init__ if inspect.isclass(cls) else cls)
    except (TypeError, ValueError):
        return []
    return [p.name for p in signature.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _without_init_args(key: str) -> str:
    return ".".join(part for part in split_dotted(key) if part != "init_args")


def check_keys(config: dict, locations: dict[str, str], where: str) -> None:
    """Parse ``config`` (a sweep's base config with every override and the first value of every
    axis applied) with the GrokCLI parser; an unknown key becomes one line naming the sweep
    entry that set it (``locations``: dotted key -> ``"grid.<key>"`` etc.).

    Other parse errors (a value of the wrong type) are left to :func:`validate_types`, which
    names the run."""
    try:
        _parse(config)
    except ConfigError:
        raise
    except BaseException as err:  # jsonargparse's ArgumentError (or its SystemExit)
        unknown = _unknown_key(str(err))
        if unknown is None:
            return
        dotted, owner = unknown
        source = next((key for key in locations if _without_init_args(key) == dotted
                       or _without_init_args(key).startswith(dotted + ".")), None)
        at = f"{where}: {locations[source]}" if source else f"{where}: base config"
        cls = _owner_class(owner)
        name = dotted.rpartition(".")[2]
        if cls is None:
            sections = ", ".join(sorted({"seed_everything", *_parser().groups}))
            raise ConfigError(f"{at}: unknown key {source or dotted!r} (top-level sections: {sections})") from None
        close = difflib.get_close_matches(name, _parameters(cls), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"{at}: unknown key {source or dotted!r}: {cls.__name__} has no argument {name!r}{hint}") from None


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
    for run in runs:
        try:
            _parse(run.config)
        except ConfigError:
            raise
        except BaseException as err:  # ArgumentError / SystemExit from jsonargparse
            raise ConfigError(f"run {run.name}: {parser_error_line(str(err))}") from None
