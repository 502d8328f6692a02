"""Configuration validation: every bad input fails before training with one clear line.

Each check raises :class:`ConfigError` whose message names the field, the bad value and the
allowed values, e.g. ``data.train_fraction=1.5: must be in the open interval (0, 1)``. The CLI
prints that one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable

OPERATIONS = ("add", "sub", "mul", "div")


class ConfigError(ValueError):
    """A configuration value is invalid. ``str(err)`` is the one line shown to the user."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with the package's error format: one ``error:`` line and a ``--help`` hint,
    exit status 2 (argparse's default prints the whole usage first)."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message} (see: {self.prog} --help)\n")
        sys.exit(2)


def is_prime(n: int) -> bool:
    """Trial division; p is at most a few thousand here.

    >>> [n for n in range(20) if is_prime(n)]
    [2, 3, 5, 7, 11, 13, 17, 19]
    """
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def require(condition: bool, field: str, value: Any, allowed: str) -> None:
    """Raise ``ConfigError("field=value: allowed")`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"{field}={value!r}: {allowed}")


def require_choice(field: str, value: Any, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    require(value in choices, field, value, f"must be one of {', '.join(choices)}")


def validate_modular_task(p: int, operation: str, train_fraction: float, prefix: str = "data") -> None:
    require_choice(f"{prefix}.operation", operation, OPERATIONS)
    require(isinstance(p, int) and p >= 2, f"{prefix}.p", p, "must be an integer >= 2")
    if operation == "div":
        require(is_prime(p), f"{prefix}.p", p, "must be prime for operation 'div' (modular inverse)")
    require(
        isinstance(train_fraction, (int, float)) and 0.0 < float(train_fraction) < 1.0,
        f"{prefix}.train_fraction",
        train_fraction,
        "must be in the open interval (0, 1)",
    )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_optimizer(lr: float, weight_decay: float, prefix: str = "model") -> None:
    # an infinite lr or weight decay "trains" into NaN at once and is then recorded as a diverged run
    require(_finite(lr), f"{prefix}.lr", lr, "must be a finite number")
    require(lr > 0, f"{prefix}.lr", lr, "must be > 0")
    require(_finite(weight_decay), f"{prefix}.weight_decay", weight_decay, "must be a finite number")
    require(weight_decay >= 0, f"{prefix}.weight_decay", weight_decay, "must be >= 0")


def validate_run_config(config: dict) -> None:
    """Checks on a resolved run config (sections ``model``, ``trainer``...) that no class makes.

    ``trainer.max_epochs``: Lightning reads -1 as "no limit" (a run that never ends, and in a
    sweep never checkpoints) and 0 as "done" (a ``completed`` record with an empty history,
    which the analysis would count as a run that did not grok). The optimizer numbers are
    checked here too, so a sweep refuses them before any run starts.
    """
    max_epochs = (config.get("trainer") or {}).get("max_epochs")
    require(max_epochs is None or (isinstance(max_epochs, int) and not isinstance(max_epochs, bool) and max_epochs >= 1),
            "trainer.max_epochs", max_epochs, "must be an integer >= 1")
    model = (config.get("model") or {})
    init_args = model.get("init_args") if isinstance(model.get("init_args"), dict) else {}
    for name in ("lr", "weight_decay", "eta"):
        value = init_args.get(name)
        if isinstance(value, float):
            require(math.isfinite(value), f"model.{name}", value, "must be a finite number")
    eps = init_args.get("eps")
    if eps is not None:  # Adam divides by sqrt(v) + eps: 0 gives 0/0 on a zero gradient
        require(_finite(eps) and eps > 0, "model.eps", eps, "must be a finite number > 0")
    seed = config.get("seed_everything")
    if seed is not None and not isinstance(seed, bool):
        require(isinstance(seed, int) and 0 <= seed < 2**32, "seed_everything", seed, "must be an integer in [0, 2**32)")


#: the most values a config may expand to (aliases counted each time they are used): nested
#: aliases make a few lines expand to billions of values ("billion laughs")
MAX_YAML_VALUES = 1_000_000


def _expanded_size(tree: Any, memo: dict | None = None) -> int:
    """Values in ``tree`` with every shared (aliased) subtree counted at each use; memoised by
    identity, so it costs one pass over the distinct objects however large the expansion."""
    memo = {} if memo is None else memo
    if id(tree) in memo:
        return memo[id(tree)]
    memo[id(tree)] = 1  # a cycle (a recursive alias) counts once
    children = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else ()
    size = 1 + sum(_expanded_size(child, memo) for child in children)
    memo[id(tree)] = size
    return size


def _strict_loader():
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (YAML keeps the last one,
    silently)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.YAMLError(f"key {key!r} written twice (lines {seen[key] + 1} and "
                                         f"{key_node.start_mark.line + 1}); keep one")
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    return StrictLoader


def read_yaml(path: str | Path, what: str) -> Any:
    """YAML of a file, safely (no code, no key twice, no alias bomb); a missing file or bad YAML is a
    one-line ``ConfigError`` naming the file (and the line and column of a syntax error)."""
    import yaml

    try:
        with open(path) as handle:
            data = yaml.load(handle, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
        if _expanded_size(data) > MAX_YAML_VALUES:
            raise ConfigError(f"{what} {path}: expands to more than {MAX_YAML_VALUES:,} values (nested YAML aliases); "
                              "refused")
        return data
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path}: not a text file") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{what} {path}: not valid YAML{at}: {problem}") from None


#: where a class named in a file may come from: this package, Lightning, torch and torchmetrics.
#: A user's own classes are named on the command line (``--trainer.callbacks+=mypkg.Callback``),
#: never taken from a file: a config, sweep, plan or record from elsewhere is data, not code.
TRUSTED_CLASS_PREFIXES = ("grok_lightning.", "lightning.", "pytorch_lightning.", "lightning_fabric.", "torch.",
                          "torchmetrics.")


def check_class_paths(tree: Any, where: str, path: str = "") -> None:
    """Raise ``ConfigError`` (one line) for a ``class_path`` outside :data:`TRUSTED_CLASS_PREFIXES`.

    A bare class name (``TensorBoardLogger``) is resolved by the parser among classes already
    imported, so it imports nothing and is accepted.

    >>> check_class_paths({"trainer": {"callbacks": [{"class_path": "payload.Evil"}]}}, "plan.json")
    Traceback (most recent call last):
    ...
    grok_lightning.config.ConfigError: plan.json: trainer.callbacks.0.class_path='payload.Evil': classes named in a file must come from grok_lightning, lightning, pytorch_lightning, lightning_fabric, torch or torchmetrics (name your own on the command line)
    """
    if isinstance(tree, dict):
        value = tree.get("class_path")
        if isinstance(value, str) and "." in value and not value.startswith(TRUSTED_CLASS_PREFIXES):
            allowed = [p.rstrip(".") for p in TRUSTED_CLASS_PREFIXES]
            raise ConfigError(f"{where}: {path + '.' if path else ''}class_path={value!r}: classes named in a file must "
                              f"come from {', '.join(allowed[:-1])} or {allowed[-1]} (name your own on the command line)")
        for key, child in tree.items():
            check_class_paths(child, where, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, child in enumerate(tree):
            check_class_paths(child, where, f"{path}.{i}" if path else str(i))


# --- jsonargparse's errors as one line --------------------------------------------------------
_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
               "NoneType": "null", "dict": "a mapping", "list": "a list"}


def parser_error_line(message: str) -> str:
    r"""The informative line of a (multi-line) jsonargparse error: the key or file, and what was
    expected.

    >>> parser_error_line('Parser key "run.threads":\n  Errors:\n  - Expected a <class \'int\'>\n'
    ...                   '  - Expected a <class \'NoneType\'>\n  Given value: x')
    "run.threads='x': expected an integer or null"
    >>> parser_error_line('Parser key "model":\n - Problem with given class_path \'a.B\':\n  Option \'foo\' is not accepted')
    "model.foo: unknown key (B has no argument 'foo')"
    """
    text = str(message).strip()
    lines = [line.strip().lstrip("- ").strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else "invalid configuration"
    key = ".".join(re.findall(r'Parser key "([^"]+)"', text))
    klass = re.search(r"Problem with given class_path '([^']+)'", text)
    owner = klass.group(1).rpartition(".")[2] if klass else None
    match = re.search(r"File does not exist: '([^']+)'", text)
    if match:
        return f"--{key or 'config'} {match.group(1)}: no such file"
    match = re.search(r"Option '([^']+)' is not accepted", text)
    if match:
        name = match.group(1)
        return f"{key}.{name}: unknown key" + (f" ({owner} has no argument {name!r})" if owner else "")
    match = re.search(r"does not accept option '([^']+)'", text)
    if match:
        return f"{match.group(1)}: unknown key"
    match = re.match(r"unrecognized arguments: (.+)", first)
    if match:
        return f"{match.group(1).split()[0]}: unknown option (given: {match.group(1)})"
    match = re.search(r"Import path (\S+) does not correspond to a subclass of (\w+)", text)
    if match:
        return f"{key}.class_path={match.group(1)!r}: not a {match.group(2)} subclass"
    match = re.search(r"Problem with given class_path '([^']+)':\s*\n\s*(.+)", text)
    if match and "Parser key" not in match.group(2) and "Option" not in match.group(2):
        return f"{key}.class_path={match.group(1)!r}: cannot import it ({match.group(2).strip()})"
    inner = re.search(r"Expected an? <class '(\w+)'>\. Got value: (.*)", text)
    if inner:  # the innermost failure; the outer union's alternatives (e.g. null) do not apply
        return f"{key}={inner.group(2).strip()!r}: expected {_TYPE_WORDS.get(inner.group(1), inner.group(1))}"
    expected = list(dict.fromkeys(re.findall(r"Expected an? <class '(\w+)'>", text)))
    if expected:
        given = re.search(r"Given value: (.*)", text)
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in expected)
        return f"{key}={given.group(1).strip()!r}: expected {words}" if given else f"{key}: expected {words}"
    if first.startswith("Unexpected config:"):
        return "a config file is empty or not a YAML mapping of keys"
    if first.startswith("Problems parsing config:"):
        return f"a config is not valid YAML: {first.split(':', 1)[1].strip()}"
    return f"{key}: {first}" if key and not first.startswith("Parser key") else first
