"""Configuration validation: every bad input fails before training with one clear line.

Each check raises :class:`ConfigError` whose message names the field, the bad value and the
allowed values, e.g. ``data.train_fraction=1.5: must be in the open interval (0, 1)``. The CLI
prints that one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
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
    # the split takes int(fraction * pairs) for training (so at least one pair is left to test)
    pairs = p * (p - 1) if operation == "div" else p * p
    n_train = int(train_fraction * pairs)
    require(n_train >= 1, f"{prefix}.train_fraction", train_fraction,
            f"gives {n_train} training pairs of the {pairs} at p {p}: nothing to train on")
    if pairs - n_train == 1:
        import warnings

        warnings.warn(f"{prefix}.train_fraction={train_fraction}: one test pair of the {pairs} at p {p}: test accuracy "
                      "is 0 or 1 at every evaluation, so a grok epoch says little", stacklevel=2)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_optimizer(lr: float, weight_decay: float, prefix: str = "model") -> None:
    # an infinite lr or weight decay "trains" into NaN at once and is then recorded as a diverged run
    require(_finite(lr), f"{prefix}.lr", lr, "must be a finite number")
    require(lr > 0, f"{prefix}.lr", lr, "must be > 0")
    require(_finite(weight_decay), f"{prefix}.weight_decay", weight_decay, "must be a finite number")
    require(weight_decay >= 0, f"{prefix}.weight_decay", weight_decay, "must be >= 0")


def environment_seed() -> int | None:
    """``PL_GLOBAL_SEED`` (Lightning's seed for a process, which the data split reads when the
    config gives no seed) as an integer, ``None`` when unset; anything but an integer in
    ``[0, 2**32)`` is one ``ConfigError`` line naming it."""
    text = os.environ.get("PL_GLOBAL_SEED")
    if text is None:
        return None
    require(text.strip().isdigit() and int(text) < 2**32, "PL_GLOBAL_SEED", text,
            "must be an integer in [0, 2**32) (the environment's seed)")
    return int(text)


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
    # counts a run divides by or steps with: 0 or a negative number is a crash or a silent no-op later
    run, diagnostics = config.get("run") or {}, config.get("diagnostics") or {}
    for field, value, low in (("run.checkpoint_every", run.get("checkpoint_every"), 0),
                              ("diagnostics.every", diagnostics.get("every"), 1),
                              ("diagnostics.image_every", diagnostics.get("image_every"), 0)):
        if value is not None:
            require(isinstance(value, int) and not isinstance(value, bool) and value >= low, field, value,
                    f"must be an integer >= {low}" + (" (0: only on a stop signal)" if field == "run.checkpoint_every"
                                                      else " (0: no images)" if low == 0 else ""))
    minutes = run.get("checkpoint_minutes")
    if minutes is not None:
        require(_finite(minutes) and minutes >= 0, "run.checkpoint_minutes", minutes, "must be a finite number >= 0")


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


def _strict_loader(what: str):
    """A ``yaml.SafeLoader`` that refuses a key written twice in one mapping (YAML keeps the last
    one, silently), in a ``ConfigError`` naming ``what``."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise ConfigError(f"{what}: key {key!r} written twice (lines {seen[key] + 1} and "
                                      f"{key_node.start_mark.line + 1}); keep one")
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    return StrictLoader


def _load_checked(stream, what: str, syntax_errors: bool = True) -> Any:
    """YAML of ``stream`` (a file or a string) with no code, no key twice and no alias bomb; a
    ``ConfigError`` naming ``what`` otherwise (``syntax_errors=False``: ``None`` for text that is not
    YAML, which the caller reads its own way)."""
    import yaml

    try:
        data = yaml.load(stream, Loader=_strict_loader(what))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        if not syntax_errors:
            return None
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{what}: not valid YAML{at}: {problem}") from None
    if _expanded_size(data) > MAX_YAML_VALUES:
        raise ConfigError(f"{what}: expands to more than {MAX_YAML_VALUES:,} values (nested YAML aliases); refused")
    return data


def open_regular(path: str | os.PathLike, mode: str = "r"):
    """``open(path, mode)`` for reading that refuses anything but a regular file in one line: a
    FIFO named ``record.json`` would block a reader forever; a folder or a device is no file of
    this package. The file is opened first (without blocking) and its type read from the open
    descriptor, so nothing can be swapped in between."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(kind) else "a FIFO" if stat.S_ISFIFO(kind) else "not a regular file"
        raise ConfigError(f"{path}: {what}, not a regular file; refused")
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode)


def read_yaml(path: str | Path, what: str) -> Any:
    """YAML of a file, safely (no code, no key twice, no alias bomb); a missing file or bad YAML is a
    one-line ``ConfigError`` naming the file (and the line and column of a syntax error)."""
    try:
        handle = open_regular(path)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except ConfigError as err:  # a folder, a FIFO
        raise ConfigError(f"{what} {err}") from None
    try:
        with handle:
            return _load_checked(handle, f"{what} {path}")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path}: not a text file") from None


# --- what code a file may name --------------------------------------------------------------------
#: where a class, callable or type named in a file may come from: this package, Lightning, torch
#: and torchmetrics. A config, sweep, plan or record from elsewhere is data, not code; a user's own
#: modules come in only through ``--trust-code MODULE`` on the command line (:func:`trust_code`).
TRUSTED_MODULES = ("grok_lightning", "lightning", "pytorch_lightning", "lightning_fabric", "torch", "torchmetrics")
#: inside those, what acts on a path, a pickle or an argument list given by name: loaders of code
#: or pickles, and the command-line entry points (a callable named in a config is called by the
#: class it is given to, with arguments the file does not choose, but these need no more)
DENIED_INSIDE_TRUSTED = ("torch.hub", "torch.load", "torch.serialization", "torch.package", "torch.jit",
                         "torch.utils.cpp_extension", "torch.utils.model_zoo", "torch.ops", "torch.classes",
                         "lightning.pytorch.cli", "pytorch_lightning.cli", "lightning.fabric.utilities.cloud_io",
                         "lightning_fabric.utilities.cloud_io", "grok_lightning.cli", "grok_lightning.sweep",
                         "grok_lightning.stats.cli", "grok_lightning.checkpoint_io")
#: the parser mode under which jsonargparse reads every YAML text (files, nested files, inline
#: ``--config`` strings, values): :func:`parser_yaml_load`
PARSER_MODE = "grok_yaml"

_trusted_by_user: tuple[str, ...] = ()  # --trust-code MODULE, this process
_ever_trusted_by_user: set[str] = set()  # to take back in jsonargparse's (add-only) policy


def _verdict(dotted: str) -> bool:
    """Whether ``dotted`` may be imported because a file names it: the most specific entry of
    the allowlist (trusted) and the denials inside it decides."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        entry = ".".join(parts[:n])
        if entry in _trusted_by_user:
            return True
        if entry in DENIED_INSIDE_TRUSTED:
            return False
        if entry in TRUSTED_MODULES:
            return True
    return False


def is_trusted(dotted: str) -> bool:
    """Whether a class or callable named ``dotted`` in a file may be imported.

    >>> is_trusted("lightning.pytorch.callbacks.LambdaCallback"), is_trusted("payload.f"), is_trusted("torch.hub.load")
    (True, False, False)
    """
    return isinstance(dotted, str) and _verdict(dotted)


def trust_code(modules) -> None:
    """Trust the modules a user named on the command line (``--trust-code mypkg``) for this
    process: their classes and callables may then be named in configs too. Given anew each time
    (an earlier call's modules are no longer trusted)."""
    global _trusted_by_user
    names = tuple(dict.fromkeys(str(m) for m in modules or ()))
    for name in names:
        require(bool(name) and all(part.isidentifier() for part in name.split(".")), "--trust-code", name,
                "must be a dotted module name (mypkg or mypkg.callbacks)")
        require(name.split(".")[0] != "jsonargparse", "--trust-code", name,
                "the parser's own settings cannot be trusted to a file")
    _trusted_by_user = names
    _ever_trusted_by_user.update(names)
    _apply_import_policy()


def trusted_code() -> tuple[str, ...]:
    """The modules trusted with ``--trust-code`` in this process (a sweep passes them to its runs)."""
    return _trusted_by_user


def _apply_import_policy() -> None:
    """jsonargparse's own import-path policy (``set_parsing_settings``), which it applies to every
    dotted name a value makes it resolve: ``class_path``, callables and types in ``init_args``,
    ``dict_kwargs`` and the classes of nested config files. Everything is denied (``*``) but
    :data:`TRUSTED_MODULES` and the user's ``--trust-code`` modules."""
    import sys

    if "jsonargparse" not in sys.modules:  # applied when the parser is first built (secure_parsing)
        return
    from jsonargparse import set_parsing_settings

    taken_back = sorted(_ever_trusted_by_user - set(_trusted_by_user))
    set_parsing_settings(import_path_denylist=["*", *DENIED_INSIDE_TRUSTED, *taken_back],
                         import_path_allowlist=[*TRUSTED_MODULES, *_trusted_by_user],
                         # a {class_path: ...} inside a value typed Any stays data; jsonargparse
                         # would otherwise build it
                         instantiate_subclass_spec_in_any=False)


def parser_yaml_load(text: str) -> Any:
    """jsonargparse's YAML loader with this package's checks first (:func:`_load_checked`): an
    inline ``--config '<yaml>'``, a nested config file and every value go through the same rules as a
    config file."""
    from jsonargparse import get_loader

    if isinstance(text, str) and text.strip():
        try:
            _load_checked(text, f"YAML {_excerpt(text)}", syntax_errors=False)
        except ConfigError:
            raise
        except ValueError:  # text PyYAML's safe loader cannot build (a date out of range): jsonargparse's own reading decides
            pass
    return get_loader("yaml")(text)


def _excerpt(text: str, width: int = 40) -> str:
    """The start of a YAML text, on one line, to name it in an error."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[:width] + "...")


def secure_parsing() -> None:
    """Before building a parser: jsonargparse reads YAML with :func:`parser_yaml_load` (parser
    mode :data:`PARSER_MODE`) and imports only what :func:`is_trusted` allows."""
    import yaml
    from jsonargparse import set_loader

    set_loader(PARSER_MODE, parser_yaml_load, exceptions=(yaml.YAMLError,))
    _apply_import_policy()


def check_class_paths(tree: Any, where: str, path: str = "") -> None:
    """Raise ``ConfigError`` (one line) for a ``class_path`` that :func:`is_trusted` refuses, before
    any parser sees the file (the parser refuses them too, and every other dotted name).

    A bare class name (``TensorBoardLogger``) is resolved by the parser among classes already
    imported, so it imports nothing and is accepted.

    >>> check_class_paths({"trainer": {"callbacks": [{"class_path": "payload.Evil"}]}}, "plan.json")
    Traceback (most recent call last):
    ...
    grok_lightning.config.ConfigError: plan.json: trainer.callbacks.0.class_path='payload.Evil': code named in a config must come from grok_lightning, lightning, pytorch_lightning, lightning_fabric, torch or torchmetrics (trust your own modules with --trust-code MODULE)
    """
    if isinstance(tree, dict):
        value = tree.get("class_path")
        if isinstance(value, str) and "." in value and not is_trusted(value):
            raise ConfigError(f"{where}: {path + '.' if path else ''}class_path={value!r}: {untrusted_reason()}")
        for key, child in tree.items():
            check_class_paths(child, where, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, child in enumerate(tree):
            check_class_paths(child, where, f"{path}.{i}" if path else str(i))


def untrusted_reason() -> str:
    allowed = [*TRUSTED_MODULES, *_trusted_by_user]
    return (f"code named in a config must come from {', '.join(allowed[:-1])} or {allowed[-1]} (trust your own "
            "modules with --trust-code MODULE)")


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
    match = re.search(r"(YAML '.*?': (?:key .* written twice|expands to more than).*?; (?:keep one|refused))", text)
    if match:  # parser_yaml_load refused an inline config, a nested file or a value
        return f"--{key or 'config'}: {match.group(1)}"
    match = re.search(r"Importing '([^']+)' is not allowed", text)
    if match:  # jsonargparse's import policy (secure_parsing): a class, callable or type not trusted
        named = match.group(1)
        field = f"{key}.class_path" if re.search(rf"class_path '{re.escape(named)}'", text) else key
        return f"{field}={named!r}: {untrusted_reason()}"
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
