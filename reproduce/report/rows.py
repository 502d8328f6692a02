"""One report row: a number of ours, typed and checked (:class:`Row`).

A row that compares with the papers names its claim of ``reference/claims.csv``; the paper's value,
interval, n, kind, horizon and Delta are read from the table when the row is judged, never copied
into the row. A row without a claim is context (no verdict), or an identity of ours (``expected``
within ``tolerance``). Each target writes its rows to ``<out>/<target>/rows.json`` as
:meth:`Row.to_dict`; the report reads them back with :meth:`Row.from_dict`, which refuses a field it
does not know.

:func:`row`, :func:`claim_row` and :func:`count_row` build a checked row and return its dict, the
form the targets merge and write.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from grok_lightning.stats.intervals import wilson
from grok_lightning.stats.samples import fisher_counts
from reproduce.report.claims import claim as _claim

__all__ = ["Row", "claim_row", "count_row", "join_notes", "paper_value", "row"]


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Row:
    """A number of ours and what the verdict needs to judge it (module docstring)."""

    quantity: str
    ours: float | str | None  # a name only for a ``named`` claim; NaN reads as None
    profile: str
    n: int  # our runs (pairs, checkpoints) behind ``ours``
    claim: str = ""  # its id in reference/claims.csv; "" for a context row
    source: str = ""  # a context row: the paper and figure it stands beside
    ours_ci: tuple[float, float] | None = None
    ci_level: float = 0.95  # the real coverage of ``ours_ci``
    runs: tuple[float, ...] = ()  # our per-run values of the same configuration (prediction / shift intervals)
    null: float | None = None  # the no-effect value: a difference on its side of it keeps the direction
    test_p: float | None = None  # a test of ours against the paper's published counts or sample
    test_name: str = ""
    same_sign: bool = True  # a p-value row: our effect has the paper's sign
    horizon: int | None = None  # the epochs of our runs
    horizon_final: str = ""  # why our number is final before the claim's horizon
    min_n: int | None = None  # the fewest runs at which the estimate is scored at all
    min_n_reason: str = ""
    no_estimate: str = ""  # why runs that are there give no number yet
    not_run: str = ""  # why there is no number of ours (e.g. the measured compute it needs)
    invalid: str | None = None  # why the design cannot show the effect (None: it can)
    replay: str = ""  # why our one run is the paper's own deterministic run repeated
    reading: str = ""  # the reading our number used, when not the claim's
    sensitivity: str = ""  # another reading of the same statistic: listed, never counted
    expected: float | None = None  # an identity of ours without a claim: the value it must equal
    tolerance: float | None = None
    note: str = ""
    part: str = ""  # the part of a target that wrote the row (a partial rerun keeps the others)

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)
        if not isinstance(self.quantity, str) or not self.quantity.strip():
            raise ValueError(f"row: quantity {self.quantity!r} must be a non-empty string")
        where = f"row {self.quantity[:60]!r}"
        if isinstance(self.ours, float) and not math.isfinite(self.ours):
            set_("ours", None)
        if self.ours is not None and not isinstance(self.ours, str):
            if not _finite(self.ours):
                raise ValueError(f"{where}: ours {self.ours!r} is not a number")
            set_("ours", float(self.ours))
        if isinstance(self.n, float) and self.n.is_integer():
            set_("n", int(self.n))
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 0:
            raise ValueError(f"{where}: n {self.n!r} must be a whole number >= 0")
        if self.claim:
            _claim(self.claim)  # an unknown claim id is an error, never a context row
            if isinstance(self.ours, str) and _claim(self.claim).kind != "named":
                raise ValueError(f"{where}: ours {self.ours!r} is a name, claim {self.claim} is not a named claim")
        elif self.expected is None and isinstance(self.ours, str):
            raise ValueError(f"{where}: a name needs a named claim")
        ci = self.ours_ci
        if ci is not None and (len(ci) != 2 or not all(_finite(v) for v in ci)):
            ci = None  # no interval (None or NaN ends)
        if ci is not None and ci[0] > ci[1]:
            raise ValueError(f"{where}: ours_ci {list(ci)} has lo > hi")
        set_("ours_ci", None if ci is None else (float(ci[0]), float(ci[1])))
        if self.ci_level is None:  # no interval, no coverage (median_ci of fewer than 2 runs)
            set_("ci_level", 0.95)
        if not 0.0 < self.ci_level <= 1.0:
            raise ValueError(f"{where}: ci_level {self.ci_level!r} must be in (0, 1]")
        runs = tuple(float(v) for v in self.runs if v is not None and _finite(v))
        set_("runs", runs)
        if self.test_p is not None and not _finite(self.test_p):
            set_("test_p", None)  # a test that could not be computed
        if self.test_p is not None and not 0.0 <= self.test_p <= 1.0:
            raise ValueError(f"{where}: test_p {self.test_p!r} is not a probability")
        for name in ("null", "expected", "tolerance"):
            value = getattr(self, name)
            if value is not None and not _finite(value):
                raise ValueError(f"{where}: {name} {value!r} is not a finite number")
        for name in ("horizon", "min_n"):
            value = getattr(self, name)
            if value is not None:
                if not _finite(value) or value < 0 or float(value) != int(value):
                    raise ValueError(f"{where}: {name} {value!r} must be a whole number >= 0")
                set_(name, int(value))
        if self.expected is not None and (self.claim or self.tolerance is None):
            raise ValueError(f"{where}: an identity of ours (expected) needs a tolerance and no claim")
        if self.sensitivity is True or self.sensitivity is False:  # a flag reads as a label
            set_("sensitivity", "another reading" if self.sensitivity else "")
        if self.invalid == "":
            set_("invalid", None)
        elif self.invalid is not None and not isinstance(self.invalid, str):
            raise ValueError(f"{where}: invalid {self.invalid!r} must be text")
        for name in ("source", "test_name", "horizon_final", "min_n_reason", "no_estimate", "not_run",
                     "replay", "reading", "sensitivity", "note", "part"):
            value = getattr(self, name)
            if value is None:
                set_(name, "")
            elif not isinstance(value, str):
                raise ValueError(f"{where}: {name} {value!r} must be text")
        set_("same_sign", bool(self.same_sign))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["ours_ci"] = None if self.ours_ci is None else list(self.ours_ci)
        out["runs"] = list(self.runs)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"row {str(data.get('quantity'))[:60]!r}: unknown field(s) {unknown}")
        return cls(**data)


def join_notes(*parts) -> str:
    """A row's note from its parts: the non-empty ones, joined by ``; ``.

    >>> join_notes("2 of 3 planned runs finished", "", None, "medium profile")
    '2 of 3 planned runs finished; medium profile'
    """
    return "; ".join(part for part in parts if part)


def row(paper: str, quantity: str, paper_value, ours, profile: str, n, paper_ci=None, ours_ci=None, note: str = "",
        null=None, invalid: str | None = None, **extra) -> dict:
    """A context row (no claim, no verdict) beside ``paper`` (e.g. '2605.20441 Fig. 6'), or an
    identity of ours (``kind="identity"``, ``expected``, ``margin``: the tolerance). A paper value
    comes only from the claims table: ``paper_value`` and ``paper_ci`` must be None (use
    :func:`claim_row`). ``extra``: the other :class:`Row` fields (``target`` is read as ``part``)."""
    if paper_value is not None or paper_ci is not None:
        raise ValueError(f"row {quantity[:60]!r}: a paper value comes from reference/claims.csv; name its claim "
                         "(claim_row)")
    kind = extra.pop("kind", None)
    if kind not in (None, "identity") or (kind == "identity") != ("expected" in extra):
        raise ValueError(f"row {quantity[:60]!r}: kind {kind!r}: a context row is an identity (with expected) or nothing")
    if "margin" in extra:
        extra["tolerance"] = extra.pop("margin")
    if "target" in extra:
        extra["part"] = extra.pop("target")
    return Row(quantity=quantity, ours=ours, profile=profile, n=n, source=paper, ours_ci=ours_ci, note=note, null=null,
               invalid=invalid, **extra).to_dict()


def claim_row(claim_id: str, quantity: str, ours, profile: str, n, ours_ci=None, note: str = "", **extra) -> dict:
    """A row scored against the claim ``claim_id`` (``KeyError`` when the table has none); ``extra``:
    the other :class:`Row` fields (``horizon`` of our runs, ``ci_level``, ``runs``, ``test_p``,
    ``null``, ``invalid``, ``sensitivity``, ...)."""
    _claim(claim_id)
    if "target" in extra:
        extra["part"] = extra.pop("target")
    return Row(quantity=quantity, ours=ours, profile=profile, n=n, claim=claim_id, ours_ci=ours_ci, note=note,
               **extra).to_dict()


def count_row(claim_id: str, quantity: str, k: int, n: int, profile: str, note: str = "", **fields) -> dict:
    """A row of our count k/n against a claim printed as a count: our fraction with its Wilson 95%
    interval and Fisher's exact test of k/n against the paper's count (``not run here`` for n = 0)."""
    if n < 1:
        return claim_row(claim_id, quantity, None, profile, 0, note=note, **fields)
    paper_k, paper_n = _claim(claim_id).count
    interval, p = wilson(k, n), fisher_counts(k, n, paper_k, paper_n)
    note = f"ours {k}/{n}, paper {paper_k}/{paper_n}; Fisher exact p = {p:.2g}" + (f"; {note}" if note else "")
    return claim_row(claim_id, quantity, k / n, profile, n, ours_ci=interval.ci, note=note, test_p=p,
                     test_name="Fisher exact", **fields)


def paper_value(r: dict | Row):
    """The paper's value a row is scored against (from the claims table; None for context): a
    number, or the name of a ``named`` claim."""
    claim_id = r.claim if isinstance(r, Row) else r.get("claim")
    if not claim_id:
        return None
    c = _claim(claim_id)
    return c.text if c.kind == "named" else c.value
