"""The per-run record: the one contract between training and everything downstream.

Training writes exactly one JSON record per run; sweeps, statistics, plots and the report only
read records. Field names follow the paper's published run JSON where it has one
(``config.wd``, ``config.seed``, ``grok_epoch``, ``final_test_acc``, ``history.test_acc``,
``history.mean_similarity``, ``history.entropy_std``).

Writes are atomic (temporary file in the same directory, then ``os.replace``) so a run killed at
any moment leaves either the previous record or the new one, never a truncated file.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"

#: ``history`` is a table: one row per evaluation, one list per quantity, every list as long as
#: ``history["epoch"]`` (None where a quantity was not computed at that evaluation). Read it with
#: :func:`series` / :func:`rows`, never by zipping lists by hand.
EPOCH = "epoch"
#: quantities every evaluated run has (the evaluation callback); the attention diagnostics add
#: ``mean_similarity``, ``entropy_std``, ... and ``layer_<k>/<name>``, the lock-in detector
#: ``lockin_w<W>_<name>``, TianModule ``rho_tian`` and ``sign_match_*``
HISTORY_KEYS = ("epoch", "train_loss", "train_acc", "test_loss", "test_acc", "weight_norm")

#: statuses a run can end in; ``running`` is written while training, so a SIGKILLed run is visible.
STATUSES = ("running", "completed", "diverged", "interrupted", "failed", "excluded")
#: statuses after which a run is never trained again by a sweep.
FINAL_STATUSES = ("completed", "diverged", "excluded")


def json_safe(value: Any) -> Any:
    """Make numpy/torch scalars and non-finite floats JSON-safe (NaN/Inf -> None)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; set back at once (at import, before any thread)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
#: the mode of a file this package makes (mkstemp makes 0600): the user's normal one
FILE_MODE = 0o666 & ~_UMASK


def _refuse_folder(path: Path) -> None:
    """A rename over a folder fails naming the temporary file: say which path it is instead."""
    if path.is_dir() and not path.is_symlink():
        from grok_lightning.config import ConfigError

        raise ConfigError(f"{path}: a folder, where a file is written; remove it or give another path")


def write_json_atomic(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` as JSON to ``path`` atomically (temp file + rename), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(json_safe(payload), indent=1, sort_keys=False))


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a new temporary file (created, never opened through a
    link), flushed to disk, then renamed over ``path``, which replaces a symbolic link planted there
    instead of writing where it points."""
    path = Path(path)
    _refuse_folder(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; a record gets the user's normal mode
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def weight_decay_of(model: dict) -> float | None:
    """The run's weight decay, the record's ``config.wd``: AdamW's decoupled ``weight_decay``
    (GrokkingModule), else the coupled L2 ``eta`` of the lock-in paper's network (TianModule)."""
    return model.get("weight_decay", model.get("eta"))


def record_config(model: dict, data: dict, seed: int | None, max_epochs: int | None, module: str | None,
                  **extra) -> dict:
    """A record's ``config`` block: the paper's field names (``wd``, ``seed``, ``max_epochs``), the
    module's class name, its and the datamodule's hyperparameters, and ``extra`` (precision,
    profile, run id, name). The recorder writes it at the start of a run; a run that fails before
    its recorder exists gets the same block from its resolved config."""
    return {"wd": weight_decay_of(model), "seed": seed, "max_epochs": max_epochs, "module": module,
            "model": model, "data": data, **extra}


def new_record(config: dict, run_id: str | None = None, name: str | None = None) -> dict:
    """An empty record for a run about to start (status ``running``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "name": name,
        "status": "running",
        "config": dict(config),
        "seed": config.get("seed"),
        "grok_epoch": None,
        "final_epoch": None,
        "final_train_acc": None,
        "final_test_acc": None,
        "final_train_loss": None,
        "final_test_loss": None,
        "diverged_epoch": None,
        "error": None,
        "wall_time_s": 0.0,
        "history": {"epoch": []},
        "events": [],
        "environment": {},
    }


def append_history(record: dict, epoch: int, values: dict[str, float]) -> None:
    """Append one evaluation row; keys seen for the first time are back-filled with None.

    Every history list stays the same length as ``history.epoch`` so rows line up.
    """
    history = record["history"]
    n_before = len(history["epoch"])
    if n_before and history["epoch"][-1] == epoch:  # re-evaluation of the same epoch: overwrite
        n_before -= 1
        for key in history:
            history[key].pop()
    history["epoch"].append(int(epoch))
    for key, value in values.items():
        if key == "epoch":
            continue
        column = history.setdefault(key, [None] * n_before)
        column.append(json_safe(float(value)) if value is not None else None)
    for key, column in history.items():
        if len(column) < n_before + 1:
            column.append(None)


def _history(record_or_history: dict) -> dict:
    history = record_or_history.get("history", record_or_history)
    return history if isinstance(history, dict) else {}


def rows(record: dict, *keys: str) -> Iterator[tuple]:
    """``(epoch, value_1, ..., value_k)`` for every evaluation of a record (or of its history),
    None where a quantity is missing.

    >>> record = {"history": {"epoch": [1, 2, 3], "test_acc": [0.1, None, 0.9], "train_acc": [0.5, 0.8, 1.0]}}
    >>> list(rows(record, "test_acc", "train_acc"))
    [(1, 0.1, 0.5), (2, None, 0.8), (3, 0.9, 1.0)]
    """
    history = _history(record)
    epochs = history.get(EPOCH) or []
    columns = [history.get(key) or [None] * len(epochs) for key in keys]
    for i, epoch in enumerate(epochs):
        yield (epoch, *(column[i] if i < len(column) else None for column in columns))


def series(record: dict, key: str) -> tuple[list[int], list[float]]:
    """``(epochs, values)`` of one history quantity at the evaluations where it has a value.

    >>> series({"history": {"epoch": [1, 2, 3], "rho_tian": [None, 0.2, 0.1]}}, "rho_tian")
    ([2, 3], [0.2, 0.1])
    """
    pairs = [(epoch, value) for epoch, value in rows(record, key) if value is not None]
    return [e for e, _ in pairs], [v for _, v in pairs]


def last_epoch(record: dict) -> int | None:
    """The last evaluated epoch of a record (None before its first evaluation)."""
    epochs = _history(record).get(EPOCH) or []
    return epochs[-1] if epochs else None


#: the largest record read (the largest written here, a 10,000-epoch run with every reading, is a
#: few MB): a bigger file is refused before it is parsed, not read into memory
MAX_RECORD_BYTES = 32 * 2**20


def load_record(path: str | os.PathLike) -> dict:
    """Load one record; raise ``ValueError`` (one line naming the file, and the field or rule) if it
    is not a valid record: a record is data from anywhere, checked as a whole against
    :func:`record_problem` on every read."""
    from grok_lightning.config import ConfigError, open_regular  # a ValueError: one line wherever it surfaces

    path = Path(path)
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_RECORD_BYTES:
            raise ConfigError(f"{path}: {size / 2**20:,.0f} MB, more than a record's {MAX_RECORD_BYTES // 2**20} MB; "
                              "refused")
        try:
            record = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"{path}: not valid JSON ({err})") from None
        except RecursionError:
            raise ConfigError(f"{path}: not a record (JSON nested too deeply to read)") from None
        except ValueError as err:  # e.g. an integer of more digits than Python converts
            raise ConfigError(f"{path}: not a record ({str(err).splitlines()[0]})") from None
    problem = record_problem(record)
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    return record


# --- the record's schema -----------------------------------------------------------------------
# Hand-written: no schema library is among the dependencies, and a record's open-ended parts
# (history columns and the callbacks' extra fields) need only the few rules below.
def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


#: field -> (check, what it must be); ``None`` is allowed for every field but ``status``
_FIELDS = {
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "schema_version": (_count, "an integer >= 0"),
    "run_id": (lambda v: isinstance(v, str), "a string"),
    "name": (lambda v: isinstance(v, str), "a string"),
    "error": (lambda v: isinstance(v, str), "a string"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "final_train_acc": (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "final_test_acc": (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "final_train_loss": (_number, "a number"),
    "final_test_loss": (_number, "a number"),
    "wall_time_s": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "cpu_time_s": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "config.wd": (lambda v: _number(v) and v >= 0, "a number >= 0"),
    "config.seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "config.max_epochs": (_count, "an integer >= 0"),
}
#: a top-level field named like an epoch (grok_epoch, final_epoch, lockin_fire_epoch_w10...)
_EPOCH_FIELD = re.compile(r"(^|_)epoch(_w\d+)?$")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_problem(record) -> str | None:
    """Why ``record`` is not a valid run record (``field=value: expected ...``), or ``None``.

    >>> record_problem({"status": "completed", "config": {}, "grok_epoch": "12"})
    "grok_epoch='12': expected an integer >= 0 or null"
    >>> record_problem({"status": "completed", "config": {}, "history": {"epoch": [1, 2], "test_acc": [0.5]}})
    'history.test_acc: 1 values for 2 epochs'
    """
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict) or "status" not in record:
        return "not a grok_lightning run record (missing status/config)"
    for field, (check, expected) in _FIELDS.items():
        section, _, key = field.rpartition(".")
        value = (record[section] if section else record).get(key)
        if value is None and field == "status" or value is not None and not check(value):
            return f"{field}={_short(value)}: expected {expected}{'' if field == 'status' else ' or null'}"
    for field, value in record.items():
        if _EPOCH_FIELD.search(field) and value is not None and not _count(value):
            return f"{field}={_short(value)}: expected an integer >= 0 or null"
    history = record.get("history", {})
    if not isinstance(history, dict):
        return "history: not a mapping of columns"
    epochs = history.get(EPOCH, [])
    if not isinstance(epochs, list) or not all(_count(e) for e in epochs):
        return f"history.epoch={_short(epochs)}: expected a list of integers >= 0"
    for key, column in history.items():
        if not isinstance(column, list):
            return f"history.{key}={_short(column)}: expected a list"
        if len(column) != len(epochs):
            return f"history.{key}: {len(column)} values for {len(epochs)} epochs"
        bad = next((v for v in column if v is not None and not _number(v)), None)
        if bad is not None:
            return f"history.{key}: value {_short(bad)}: expected a number or null"
    return _cross_field_problem(record, history)


def _kind(column: str) -> str:
    """``acc`` or ``loss`` for a history column of an accuracy or a loss (``layer_0/test_acc``
    too), else ``""``."""
    name = column.rsplit("/", 1)[-1]
    return next((kind for kind in ("acc", "loss") if name == kind or name.endswith(f"_{kind}")), "")


def _cross_field_problem(record: dict, history: dict) -> str | None:
    """The rules that tie a record's fields together (each field alone passed :data:`_FIELDS`):
    what a run that was trained can write, and an edited record may not."""
    epochs = history.get(EPOCH, [])
    wrong = next(((a, b) for a, b in zip(epochs, epochs[1:]) if b <= a), None)
    if wrong is not None:
        return f"history.epoch: {wrong[0]} then {wrong[1]}: epochs must increase"
    for key, column in history.items():
        kind = _kind(key)
        bad = next((v for v in column if v is not None and (v < 0 or kind == "acc" and v > 1)), None) if kind else None
        if bad is not None:
            return f"history.{key}: value {_short(bad)}: {'an accuracy must be in [0, 1]' if kind == 'acc' else 'a loss must be >= 0'}"
    for key in ("final_train_loss", "final_test_loss"):
        if record.get(key) is not None and record[key] < 0:
            return f"{key}={_short(record[key])}: a loss must be >= 0"
    config = record["config"]
    horizon = config.get("max_epochs")
    for key in ("grok_epoch", "final_epoch"):
        if record.get(key) is not None and horizon is not None and record[key] > horizon:
            return f"{key}={record[key]}: after the run's horizon config.max_epochs={horizon}"
    model = config.get("model")
    if isinstance(model, dict) and config.get("wd") is not None and weight_decay_of(model) not in (None, config["wd"]):
        return f"config.wd={config['wd']}: the model's weight decay is {weight_decay_of(model)}"
    if record.get("seed") is not None and config.get("seed") is not None and record["seed"] != config["seed"]:
        return f"seed={record['seed']}: config.seed is {config['seed']}"
    grok_epoch = record.get("grok_epoch")
    if grok_epoch is not None:
        metric, threshold = record.get("grok_metric", "test_acc"), record.get("grok_threshold", 0.99)
        values = dict(zip(epochs, history.get(metric) or []))
        if values.get(grok_epoch) is None or not _number(threshold) or values[grok_epoch] < threshold:
            return (f"grok_epoch={grok_epoch}: history.{metric} at that epoch is {values.get(grok_epoch)}, not >= the "
                    f"grok threshold {threshold}")
    if record["status"] in FINAL_STATUSES and record.get("final_epoch") is not None:
        # the recorder copies the last evaluation into final_*: the two must agree
        if not epochs or epochs[-1] != record["final_epoch"]:
            return f"final_epoch={record['final_epoch']}: the history's last epoch is {epochs[-1] if epochs else None}"
        for key in ("train_acc", "test_acc", "train_loss", "test_loss"):
            final, column = record.get(f"final_{key}"), history.get(key)
            if final is not None and column and column[-1] != final:
                return f"final_{key}={_short(final)}: the history's last {key} is {_short(column[-1])}"
    return None


def iter_records(root: str | os.PathLike) -> Iterator[tuple[Path, dict]]:
    """Yield ``(path, record)`` for every ``record.json`` below ``root`` (sorted, deterministic),
    each run once: a second record of one run id (a copied run folder) is one ``ConfigError``
    line naming both files, never a second data point."""
    from grok_lightning.config import ConfigError

    seen: dict[str, Path] = {}
    for path in sorted(Path(root).rglob(RECORD_NAME)):
        record = load_record(path)
        run_id = record.get("run_id")
        if run_id is not None and run_id in seen:
            raise ConfigError(f"{path}: run {run_id} again (its record is {seen[run_id]}); a run counts once: "
                              "remove the copy")
        if run_id is not None:
            seen[run_id] = path
        yield path, record


def is_grokked(record: dict) -> bool:
    """Whether a run grokked: it completed and has a grok epoch (its own criterion, test accuracy
    >= its grok threshold). A run that diverged after grokking did not keep it: not grokked. A
    record without a status (the paper's published run JSONs) counts as completed.

    >>> is_grokked({"status": "completed", "grok_epoch": 130}), is_grokked({"status": "diverged", "grok_epoch": 90})
    (True, False)
    """
    return record.get("status", "completed") == "completed" and record.get("grok_epoch") is not None
