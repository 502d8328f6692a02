"""Input handling shared by the statistics modules: validation and run records -> arrays.

Every public statistic works on plain 1-D arrays. This module turns user input into clean
float arrays and refuses anything that would otherwise produce a silently wrong number:
mismatched lengths, NaN/inf where a value is required, empty input.

``records_to_arrays`` is the one bridge from the per-run record (``grok_lightning.records``)
to these arrays::

    wd[i]      = record["config"]["wd"]
    grokked[i] = record["status"] == "completed" and record["grok_epoch"] is not None
    t_grok[i]  = record["grok_epoch"] if grokked[i] else NaN

>>> wd, g, t = records_to_arrays([
...     {"config": {"wd": 0.1}, "status": "completed", "grok_epoch": 900},
...     {"config": {"wd": 0.01}, "status": "completed", "grok_epoch": None},
...     {"config": {"wd": 1.0}, "status": "diverged", "grok_epoch": 120}])
>>> wd.tolist(), g.tolist(), t.tolist()
([0.1, 0.01, 1.0], [True, False, False], [900.0, nan, nan])
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np

from grok_lightning.records import is_grokked

#: statuses that enter the statistics; everything else is skipped (with a warning).
COUNTED_STATUSES = ("completed", "diverged")


def as_1d_float(x: Any, name: str, *, allow_nan: bool = False, min_len: int = 1) -> np.ndarray:
    """Convert ``x`` to a 1-D float array, raising ``ValueError`` on bad input.

    >>> as_1d_float([1, 2], "x").tolist()
    [1.0, 2.0]
    >>> as_1d_float([1, float("nan")], "x")
    Traceback (most recent call last):
    ...
    ValueError: x contains 1 non-finite value(s) (NaN/inf); clean the input first
    """
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size < min_len:
        raise ValueError(f"{name} needs at least {min_len} value(s), got {arr.size}")
    if not allow_nan:
        bad = int(np.sum(~np.isfinite(arr)))
        if bad:
            raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN/inf); "
                             f"clean the input first")
    return arr


def as_bool_outcome(x: Any, name: str = "grokked") -> np.ndarray:
    """Convert 0/1 or boolean outcomes to a bool array; anything else is a ``ValueError``."""
    arr = as_1d_float(x, name)
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must contain only 0/1 or booleans")
    return arr.astype(bool)


def check_same_length(**arrays: np.ndarray) -> int:
    """Raise ``ValueError`` unless all arrays have the same length; return that length."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"mismatched lengths: {lengths}")
    return next(iter(lengths.values()))


def nan_to_none(value: Any) -> Any:
    """JSON-safe copy: NaN/inf floats become ``None``, numpy scalars/arrays become Python."""
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nan_to_none(v) for v in value]
    if isinstance(value, np.ndarray):
        return [nan_to_none(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def records_to_arrays(records: Iterable[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run records -> ``(wd, grokked, t_grok)`` arrays for the fits in this package.

    Only ``completed`` runs count as observed outcomes; ``diverged`` runs count as *not
    grokked* (the run could not generalise, which is what P(grok) measures). Any other
    status (``running``, ``interrupted``, ``failed``, ``excluded``) is skipped, because its
    outcome is unknown, and a ``RuntimeWarning`` reports how many were skipped per status.
    A record without a ``status`` key (the paper's published run JSONs have none) is read
    as ``completed``.

    Raises ``ValueError`` if a counted record lacks ``config.wd`` or has a non-numeric one.
    """
    wd: list[float] = []
    grokked: list[bool] = []
    t_grok: list[float] = []
    skipped: Counter = Counter()
    for i, rec in enumerate(records):
        status = rec.get("status", "completed")
        if status not in COUNTED_STATUSES:
            skipped[str(status)] += 1
            continue
        try:
            w = float(rec["config"]["wd"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"record {i} has no numeric config['wd']") from None
        did_grok = is_grokked(rec)
        wd.append(w)
        grokked.append(did_grok)
        t_grok.append(float(rec["grok_epoch"]) if did_grok else math.nan)
    if skipped:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
        warnings.warn(f"records_to_arrays skipped {sum(skipped.values())} record(s) "
                      f"with uncounted status ({detail})", RuntimeWarning, stacklevel=2)
    return np.asarray(wd, float), np.asarray(grokked, bool), np.asarray(t_grok, float)


def group_bins(weight_decay: Sequence[float], grokked: Sequence[bool]):
    """Per-λ bins in ascending λ: ``(wd, n, n_grok)`` as numpy arrays."""
    wd_u, inverse = np.unique(np.asarray(weight_decay, float), return_inverse=True)
    n = np.bincount(inverse, minlength=wd_u.size)
    n_grok = np.bincount(inverse, weights=np.asarray(grokked, float), minlength=wd_u.size)
    return wd_u, n.astype(int), np.rint(n_grok).astype(int)
