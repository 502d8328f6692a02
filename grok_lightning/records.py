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
import tempfile
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"

#: statuses a run can end in; ``running`` is written while training, so a SIGKILLed run is visible.
STATUSES = ("running", "completed", "diverged", "interrupted", "failed", "excluded")
#: statuses after which a run is never trained again by a sweep.
FINAL_STATUSES = ("completed", "diverged", "excluded")


def _json_safe(value: Any) -> Any:
    """Make numpy/torch scalars and non-finite floats JSON-safe (NaN/Inf -> None)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def write_json_atomic(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` as JSON to ``path`` atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(_json_safe(payload), handle, indent=1, sort_keys=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


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
        column.append(_json_safe(float(value)) if value is not None else None)
    for key, column in history.items():
        if len(column) < n_before + 1:
            column.append(None)


def load_record(path: str | os.PathLike) -> dict:
    """Load one record; raise ``ValueError`` naming the file if it is not a valid record."""
    path = Path(path)
    try:
        with open(path) as handle:
            record = json.load(handle)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(record, dict) or "status" not in record or "config" not in record:
        raise ValueError(f"{path}: not a grok_lightning run record (missing status/config)")
    return record


def iter_records(root: str | os.PathLike) -> Iterator[tuple[Path, dict]]:
    """Yield ``(path, record)`` for every ``record.json`` below ``root`` (sorted, deterministic)."""
    for path in sorted(Path(root).rglob(RECORD_NAME)):
        yield path, load_record(path)


def is_grokked(record: dict) -> bool:
    """A run counts as grokked when its record has a grok epoch (the run's own criterion)."""
    return record.get("grok_epoch") is not None
