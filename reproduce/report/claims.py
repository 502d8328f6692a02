"""The papers' quantitative claims (``reference/claims.csv``): the only place paper values come from.

One row per claim of arXiv 2605.20441 and 2605.08119. The columns:

* ``id``, ``paper``, ``where``, ``claim`` (in words);
* ``value`` as printed (a number, ``k/n`` for a count, a name for a ``named`` claim), ``ci`` (the
  paper's 95% interval as printed, ``[lo, hi]``, or blank), ``n`` (the paper's runs);
* ``kind``: how it is scored (:data:`KINDS`, reproduce.report.verdict); ``statistic``; ``reading``
  (the sigma_H / s_bar reading); ``horizon`` (the epochs it needs);
* ``margin``, ``margin_why``, ``margin_from``: the paper's own uncertainty about its value where it
  prints no interval: ``sampling`` (the half-width of its 95% interval from its spread and n),
  ``precision`` (its printed precision or a figure's reading error: the value is exact up to it),
  ``seed spread`` (a one-run claim: how far the paper's seeds fall apart); for an ``identity`` the
  tolerance; blank for decisions (p-values, tests, names, excluded values);
* ``family``, ``delta``, ``delta_why``: the claim family and its equivalence tolerance Delta, a
  difference that matters, chosen per family before the report used it and the same on every row of
  the family: ``0.2`` (absolute, in the claim's units) or ``x1.5`` (a factor: ours / paper within
  [1/1.5, 1.5]);
* ``source`` (a ``reference/`` file with the key paths ``keys`` of its numbers, a paraphrased
  sentence of the paper with its place, or a figure read-off with its reading error), ``target``
  (the reproduce target that scores it, ``-`` for none) and ``needs`` (what scoring it would need);
* ``headline``: ``yes`` for the claims a reader of the paper looks for first, shown in the README's
  headline table (the rule for choosing them is in docs/decisions.md), blank otherwise.

The table is checked when it is loaded: a bad value is one error line naming the file, the claim
and the field. :mod:`reproduce.report.sources` checks every value against the file it cites.

    claim("wd.lambda_c").value                  # 0.0158
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "reference" / "claims.csv"
COLUMNS = ("id", "paper", "where", "claim", "value", "ci", "n", "kind", "statistic", "reading", "horizon", "margin",
           "margin_why", "margin_from", "family", "delta", "delta_why", "source", "keys", "target", "needs", "headline")
#: how a claim is scored (reproduce.report.verdict): an estimate, a fraction (a count) or a
#: published sample by its difference from ours, a p-value or an excluded value by its decision, a
#: test of ours against the paper's counts by its p, an identity within its tolerance, a name by
#: equality
KINDS = ("estimate", "fraction", "sample", "test", "p-value", "excludes", "identity", "named")
#: the kinds compared as a difference D = ours - paper: each needs a family and its Delta
COMPARED = ("estimate", "fraction", "sample")
#: what a claim's margin measures (module docstring)
MARGIN_FROM = ("sampling", "precision", "seed spread")

__all__ = ["CLAIMS", "COLUMNS", "COMPARED", "Claim", "KINDS", "MARGIN_FROM", "REPO", "claim", "load_claims"]


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    where: str
    claim: str
    text: str  # the value as printed
    ci: tuple[float, float] | None
    ci_text: str  # the interval as printed
    n: int | None
    kind: str
    statistic: str
    reading: str
    horizon: int | None
    margin: float | None
    margin_why: str
    margin_from: str
    family: str
    delta: float | None  # the equivalence tolerance: absolute, or a factor > 1 when ``factor``
    factor: bool
    delta_why: str
    source: str
    keys: str
    target: str
    needs: str
    headline: bool = False  # shown in the README's headline table

    @property
    def value(self):
        """The value: a float, ``k/n`` as a fraction for a count, the text for a name."""
        if self.kind == "named":
            return self.text
        count = self.count
        return count[0] / count[1] if count else float(self.text)

    @property
    def count(self) -> tuple[int, int] | None:
        """``(k, n)`` of a claim printed as a count."""
        if "/" not in self.text:
            return None
        k, n = self.text.split("/")
        return int(k), int(n)

    @property
    def label(self) -> str:
        return f"{self.paper} {self.where}"

    @property
    def one_run(self) -> bool:
        """A value the paper reports from one run (seed 42's trajectory, one seed's table)."""
        return self.n == 1 and self.kind == "estimate"

    @property
    def rounding(self) -> float:
        """Half a unit of the last printed digit: how far the printed value may be from the
        number behind it (``0.83`` -> 0.005, ``1094`` -> 0.5, ``2.56e-07`` -> 5e-10).

        >>> [Claim.rounding.fget(type("C", (), {"text": t})) for t in ("0.83", "1094", "2.56e-07")]
        [0.005, 0.5, 5e-10]
        """
        mantissa, _, exponent = self.text.lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return float(f"5e{int(exponent or 0) - decimals - 1}")

    @property
    def tolerance(self) -> str:
        """Delta as written: ``x1.5`` or ``0.2`` ('-' for none)."""
        if self.delta is None:
            return "-"
        return f"x{self.delta:g}" if self.factor else f"{self.delta:g}"


class ClaimsError(ValueError):
    """A malformed claims table: one line naming the file, the claim and the field."""


def _fail(path, claim_id: str, field: str, text: str, why: str):
    raise ClaimsError(f"{path}: claim {claim_id!r}, field {field!r}: {text!r} {why}")


def _number(path, cid, field, text, low=-math.inf, strict=False) -> float:
    try:
        value = float(text)
    except ValueError:
        _fail(path, cid, field, text, "is not a number")
    if not math.isfinite(value) or value < low or (strict and value == low):
        _fail(path, cid, field, text, f"must be finite and {'>' if strict else '>='} {low:g}")
    return value


def _integer(path, cid, field, text, low=1) -> int | None:
    if not text.strip():
        return None
    if not re.fullmatch(r"\d+", text.strip()) or int(text) < low:
        _fail(path, cid, field, text, f"is not a whole number >= {low}")
    return int(text)


def _value(path, cid, kind, text) -> None:
    if kind == "named":
        if not text.strip():
            _fail(path, cid, "value", text, "is empty")
        return
    if "/" in text:
        match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not match or int(match[2]) < 1 or int(match[1]) > int(match[2]):
            _fail(path, cid, "value", text, "is not a count k/n with 0 <= k <= n and n >= 1")
        return
    _number(path, cid, "value", text)


def _ci(path, cid, text) -> tuple[float, float] | None:
    if not text.strip():
        return None
    parts = text.strip().strip("[]").split(",")
    if len(parts) != 2:
        _fail(path, cid, "ci", text, "is not an interval [lo, hi]")
    lo, hi = (_number(path, cid, "ci", p.strip()) for p in parts)
    if lo > hi:
        _fail(path, cid, "ci", text, "has lo > hi")
    return lo, hi


def _delta(path, cid, text) -> tuple[float | None, bool]:
    if not text.strip():
        return None, False
    if text.strip().startswith("x"):
        factor = _number(path, cid, "delta", text.strip()[1:], low=1.0, strict=True)
        return factor, True
    return _number(path, cid, "delta", text, low=0.0, strict=True), False


def _claim(path, row: dict, line: int) -> Claim:
    cid = row["id"]
    if None in row.values() or None in row:  # csv.DictReader fills a short row with None, keeps extras under None
        raise ClaimsError(f"{path}: claim {cid!r} (line {line}): {len([v for v in row.values() if v is not None])} "
                          f"fields where the header has {len(COLUMNS)} (a truncated or overlong row)")
    kind = row["kind"]
    if not cid.strip():
        raise ClaimsError(f"{path}: line {line}: field 'id' is empty")
    if kind not in KINDS:
        _fail(path, cid, "kind", kind, f"is not one of {KINDS}")
    _value(path, cid, kind, row["value"])
    n = _integer(path, cid, "n", row["n"])
    if "/" in row["value"] and n != int(row["value"].split("/")[1]):
        _fail(path, cid, "n", row["n"], f"differs from the count's n in {row['value']!r}")
    margin = _number(path, cid, "margin", row["margin"], low=0.0) if row["margin"].strip() else None
    one_run = n == 1 and kind == "estimate"
    allowed = MARGIN_FROM if one_run else ("sampling", "precision") if kind in ("estimate", "fraction", "sample") \
        else ("precision",) if kind == "identity" else ("",)
    if row["margin_from"] not in allowed:
        _fail(path, cid, "margin_from", row["margin_from"], f"is not one of {allowed} (a {kind} claim"
              f"{' of one run' if one_run else ''})")
    if kind in COMPARED + ("identity",) and (margin is None) != (row["margin_from"] == ""):
        _fail(path, cid, "margin", row["margin"], "needs margin_from, and margin_from a margin")
    if row["headline"] not in ("", "yes"):
        _fail(path, cid, "headline", row["headline"], "is not 'yes' or blank")
    delta, factor = _delta(path, cid, row["delta"])
    if kind in COMPARED and (delta is None or not row["family"].strip() or not row["delta_why"].strip()):
        _fail(path, cid, "delta", row["delta"], f"is required (with family and delta_why) for a {kind} claim")
    if kind not in COMPARED and (delta is not None or row["family"].strip()):
        _fail(path, cid, "delta", row["delta"], f"must be blank for a {kind} claim (no difference is sized)")
    return Claim(
        id=cid, paper=row["paper"], where=row["where"], claim=row["claim"], text=row["value"].strip(),
        ci=_ci(path, cid, row["ci"]), ci_text=row["ci"], n=n, kind=kind, statistic=row["statistic"],
        reading=row["reading"], horizon=_integer(path, cid, "horizon", row["horizon"]), margin=margin,
        margin_why=row["margin_why"], margin_from=row["margin_from"], family=row["family"].strip(), delta=delta,
        factor=factor, delta_why=row["delta_why"].strip(), source=row["source"], keys=row["keys"],
        target=row["target"], needs=row["needs"], headline=row["headline"] == "yes")


@lru_cache(maxsize=None)
def load_claims(path: str | Path = CLAIMS) -> dict[str, Claim]:
    """``{id: Claim}`` in table order; raises :class:`ClaimsError` (a ``ValueError``) on a
    malformed row, with one line naming the file, the claim and the field."""
    shown = Path(path).relative_to(REPO) if Path(path).is_relative_to(REPO) else path
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ClaimsError(f"{shown}: columns {reader.fieldnames} != {COLUMNS}")
        claims: dict[str, Claim] = {}
        for line, row in enumerate(reader, start=2):
            if row["id"] in claims:
                raise ClaimsError(f"{shown}: claim {row['id']!r} appears twice")
            claims[row["id"]] = _claim(shown, row, line)
    families: dict[str, Claim] = {}
    for c in claims.values():  # one Delta per family, stated the same way on each of its rows
        first = families.setdefault(c.family, c)
        if c.family and (first.delta, first.factor, first.delta_why) != (c.delta, c.factor, c.delta_why):
            _fail(shown, c.id, "delta", c.tolerance, f"differs from family {c.family!r}'s {first.tolerance} "
                  f"(claim {first.id!r}): one Delta and one reason per family")
    return claims


def claim(claim_id: str) -> Claim:
    """One claim by id (``KeyError`` naming the table when there is none)."""
    claims = load_claims()
    if claim_id not in claims:
        raise KeyError(f"no claim {claim_id!r} in {CLAIMS.relative_to(REPO)}")
    return claims[claim_id]
