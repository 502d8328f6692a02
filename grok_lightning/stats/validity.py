"""Can a design show the effect it tests? Checks on a run's trajectory, for the "invalid test" verdict.

An intervention or amplitude test is valid only if the control shows the quantity it acts on (a
peak that stands out of its own trajectory, not a window edge or a single end-of-run value) and
the outcome is not decided by how the intervention is built. These functions take plain arrays
(epochs and values of one history column) and return booleans with the numbers behind them, so
a report can say why.

* :func:`peak_check` - does the maximum over an allowed range stand out of that range? Three
  conditions (defaults in :data:`PEAK_RULE`): the peak is at least ``min_ratio`` times the
  range's median; its robust z-score ``(peak - median) / (1.4826 MAD)`` is at least ``min_z``;
  and it is not a lone evaluation (a neighbouring evaluation is at least halfway from the median
  to the peak). It also says whether the peak sits on the range's first or last evaluation.
* :func:`summarise_checks` - the reason a report gives when most units fail a check.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["PEAK_RULE", "PeakCheck", "peak_check", "summarise_checks"]

#: a peak stands out when it is >= 1.5x the median of its range, >= 3 robust SDs above it, and
#: shared by a neighbouring evaluation (halfway up at least); our choices, stated in docs/decisions.md
PEAK_RULE = {"min_ratio": 1.5, "min_z": 3.0, "neighbour_fraction": 0.5}


@dataclass
class PeakCheck:
    peak: float
    peak_epoch: int | None
    median: float
    ratio: float  # peak / median
    z: float  # (peak - median) / (1.4826 MAD)
    lone: bool  # no neighbouring evaluation shares the peak
    on_edge: bool  # the peak is the range's first or last evaluation
    stands_out: bool  # ratio, z and not lone

    def to_dict(self) -> dict:
        return asdict(self)


def _range(epochs, values, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    e, v = np.asarray(epochs, float), np.asarray([np.nan if x is None else x for x in values], float)
    keep = (e > lo) & (e <= hi) & np.isfinite(v)
    return e[keep], v[keep]


def peak_check(epochs, values, lo: float = 100, hi: float = math.inf, min_ratio: float = PEAK_RULE["min_ratio"],
               min_z: float = PEAK_RULE["min_z"], neighbour_fraction: float = PEAK_RULE["neighbour_fraction"]) -> PeakCheck:
    """The maximum of ``values`` over epochs in ``(lo, hi]`` and whether it stands out (module docstring).

    >>> epochs = list(range(110, 400, 10))
    >>> flat = [0.03 + 0.002 * (i % 3) for i in range(len(epochs))]
    >>> peak_check(epochs, flat).stands_out
    False
    >>> bump = [v + (0.2 if 200 <= e <= 230 else 0.0) for e, v in zip(epochs, flat)]
    >>> check = peak_check(epochs, bump)
    >>> check.stands_out, check.peak_epoch, check.on_edge
    (True, 220, False)
    >>> peak_check(epochs, flat[:-1] + [0.3]).lone  # a single end-of-run value
    True
    """
    e, v = _range(epochs, values, lo, hi)
    if len(v) == 0:
        return PeakCheck(math.nan, None, math.nan, math.nan, math.nan, True, True, False)
    i = int(np.argmax(v))
    peak, median = float(v[i]), float(np.median(v))
    mad = 1.4826 * float(np.median(np.abs(v - median)))
    z = (peak - median) / mad if mad > 0 else (math.inf if peak > median else 0.0)
    ratio = peak / median if median > 0 else math.inf
    neighbours = [v[j] for j in (i - 1, i + 1) if 0 <= j < len(v)]
    lone = not any(n >= median + neighbour_fraction * (peak - median) for n in neighbours) if peak > median else True
    on_edge = i in (0, len(v) - 1)
    stands_out = ratio >= min_ratio and z >= min_z and not lone
    return PeakCheck(peak, int(e[i]), median, ratio, z, lone, on_edge, stands_out)


def summarise_checks(checks: list[dict], reasons: dict[str, str]) -> str | None:
    """``None`` when a majority of units pass every check, else the reason: each failed check with
    its count. ``checks``: one dict of booleans per unit (True = the check failed); ``reasons``:
    check name -> words.

    >>> summarise_checks([{"flat": True}, {"flat": True}, {"flat": False}], {"flat": "A's peak does not stand out"})
    "A's peak does not stand out in 2/3"
    """
    n = len(checks)
    valid = sum(not any(c.values()) for c in checks)
    if n and valid * 2 > n:
        return None
    failed = [f"{words} in {sum(bool(c.get(name)) for c in checks)}/{n}" for name, words in reasons.items()
              if any(c.get(name) for c in checks)]
    return "; ".join(failed) or "no units to test"
