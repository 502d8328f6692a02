"""The papers' quantitative claims (``reference/claims.csv``): the only place paper values come from.

One row per claim of arXiv 2605.20441 and 2605.08119: the value as printed, its interval and n,
the statistic, the sigma_H / s_bar reading it is scored by, the horizon it needs, the equivalence
margin (taken from the paper's own precision or seed spread, with one line of why), and its
source: a ``reference/`` file with the key paths of its numbers, a paraphrased sentence of the
paper with its place, or a read-off of a figure with its reading error.

    claim("wd.lambda_c").value                  # 0.0158
    claim_row("wd.lambda_c", quantity, ours, profile, n, ours_ci=[lo, hi])   # a report row

Key paths (``keys``: ``value=...; ci=...; n=...; k=...``) walk a JSON or CSV file: ``a.b.0.c``
(a name, ``'wd0.05'`` quoted when it holds a dot, or an index into a list), ``[wd=0.1]`` / ``[epoch>100]`` (keep the list entries whose
field compares so; a name after it maps over the list), ``x+y`` (a sum of paths) and a final
``|median`` / ``|min`` / ``|max`` / ``|mean`` / ``|count``, or ``|number<i>`` for the i-th number
written in a text field. ``lo=`` and ``hi=`` check the interval's ends one at a time. :func:`check_sources` compares every
claim with the file it cites, at the precision the claim prints.
"""

from __future__ import annotations

import csv
import json
import math
import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CLAIMS = REPO / "reference" / "claims.csv"
COLUMNS = ("id", "paper", "where", "claim", "value", "ci", "n", "kind", "statistic", "reading", "horizon", "margin",
           "margin_why", "margin_from", "source", "keys", "target", "needs")
#: how a claim is scored (reproduce.verdict): an estimate or fraction by equivalence within its
#: margin, a p-value or an excluded value by its decision, a published sample by a rank test, a
#: test of counts by its p, an arithmetic identity within its margin, a name by equality
KINDS = ("estimate", "fraction", "sample", "test", "p-value", "excludes", "identity", "named")
#: what the margin of a one-run claim measures (required there, blank elsewhere): a run-to-run
#: spread (so one run of ours outside it differs from the paper's run by more than seeds do), or
#: the printed precision / a reading error (which says nothing about how far two seeds fall apart)
MARGIN_FROM = ("seed spread", "precision")

__all__ = ["CLAIMS", "Claim", "KINDS", "MARGIN_FROM", "check_sources", "claim", "claim_row", "claim_sample", "count_row", "source_value", "load_claims", "printed_agrees",
           "resolve"]


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
    source: str
    keys: str
    target: str
    needs: str

    @property
    def value(self):
        """The value: a float, ``k/n`` as a fraction for a count, the text for a name."""
        if self.kind == "named":
            return self.text
        if "/" in self.text:
            k, n = self.text.split("/")
            return int(k) / int(n)
        return float(self.text)

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


def _ci(text: str):
    if not text.strip():
        return None
    lo, hi = (float(v) for v in text.strip("[] ").split(","))
    return lo, hi


@lru_cache(maxsize=None)
def load_claims(path: str | Path = CLAIMS) -> dict[str, Claim]:
    """``{id: Claim}`` in table order; raises ``ValueError`` on a malformed row."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames} != {COLUMNS}")
        claims = {}
        for row in reader:
            if row["id"] in claims:
                raise ValueError(f"{path}: claim {row['id']!r} appears twice")
            if row["kind"] not in KINDS:
                raise ValueError(f"{path}: claim {row['id']!r} has kind {row['kind']!r}, not one of {KINDS}")
            one_run = row["n"] == "1" and row["kind"] in ("estimate", "fraction")
            if not (row["margin_from"] in MARGIN_FROM if one_run else row["margin_from"] == ""):
                raise ValueError(f"{path}: claim {row['id']!r} has margin_from {row['margin_from']!r}: "
                                 f"a one-run estimate needs one of {MARGIN_FROM}, any other claim a blank")
            claims[row["id"]] = Claim(
                id=row["id"], paper=row["paper"], where=row["where"], claim=row["claim"], text=row["value"],
                ci=_ci(row["ci"]), ci_text=row["ci"], n=int(row["n"]) if row["n"] else None, kind=row["kind"],
                statistic=row["statistic"], reading=row["reading"], horizon=int(row["horizon"]) if row["horizon"] else None,
                margin=float(row["margin"]) if row["margin"] else None, margin_why=row["margin_why"],
                margin_from=row["margin_from"], source=row["source"], keys=row["keys"], target=row["target"], needs=row["needs"])
    return claims


def claim(claim_id: str) -> Claim:
    """One claim by id (``KeyError`` naming the table when there is none)."""
    claims = load_claims()
    if claim_id not in claims:
        raise KeyError(f"no claim {claim_id!r} in {CLAIMS.relative_to(REPO)}")
    return claims[claim_id]


def claim_row(claim_id: str, quantity: str, ours, profile: str, n, ours_ci=None, note: str = "", **extra) -> dict:
    """A report row scored against a claim: the paper's value, interval, margin, kind, reading and
    horizon come from the table; ``extra`` passes the row's own fields (``horizon`` of our runs,
    ``ci_level``, ``test_p``, ``null``, ``invalid``, ``sensitivity``, ...)."""
    from reproduce.report import row

    c = claim(claim_id)
    paper_ci = list(c.ci) if c.ci else None
    value = c.text if c.kind == "named" else c.value
    r = row(c.label, quantity, value, ours, profile, n, paper_ci=paper_ci, ours_ci=ours_ci, note=note, **extra)
    r.update(claim=c.id, kind=c.kind, margin=c.margin, margin_from=c.margin_from, paper_n=c.n, horizon_needed=c.horizon,
             reading=extra.get("reading", c.reading), paper_text=c.text)
    return r


def count_row(claim_id: str, quantity: str, k: int, n: int, profile: str, note: str = "", **fields) -> dict:
    """A row of our count k/n against a claim printed as a count: our fraction with its Wilson 95%
    interval and Fisher's exact test of k/n against the paper's count (``not run here`` for n = 0)."""
    from grok_lightning.stats.intervals import wilson
    from grok_lightning.stats.samples import fisher_counts

    if n < 1:
        return claim_row(claim_id, quantity, None, profile, 0, note=note, **fields)
    paper_k, paper_n = claim(claim_id).count
    interval, p = wilson(k, n), fisher_counts(k, n, paper_k, paper_n)
    note = f"ours {k}/{n}, paper {paper_k}/{paper_n}; Fisher exact p = {p:.2g}" + (f"; {note}" if note else "")
    return claim_row(claim_id, quantity, k / n, profile, n, ours_ci=interval.ci, note=note, test_p=p,
                     test_name="Fisher exact", **fields)


def source_value(claim_id: str, expression: str):
    """Another number of the file a claim cites (a key expression, module docstring), e.g. the
    sign of the difference behind a published p-value."""
    return resolve(_load(_source_file(claim(claim_id))), expression)


def claim_sample(claim_id: str) -> list:
    """The published sample behind a claim of kind ``sample`` (its ``value`` key path without the
    final aggregate), e.g. the grok epochs whose median the claim prints."""
    c = claim(claim_id)
    item = next(k for k in c.keys.split(";") if k.strip().startswith("value="))
    expression = item.strip()[len("value="):].split("|")[0]
    found = resolve(_load(_source_file(c)), expression)
    return list(found) if isinstance(found, list) else [found]


# --- sources --------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\[([^\]]+)\]|'([^']+)'|([^.\[\]']+)")
_COMPARE = re.compile(r"^(\w+)\s*(>=|<=|=|>|<)\s*(.+)$")
_OPS = {"=": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), ">": operator.gt, ">=": operator.ge,
        "<": operator.lt, "<=": operator.le}
_AGGREGATES = {"median": lambda v: float(np.median(v)), "min": min, "max": max, "mean": lambda v: float(np.mean(v)),
               "count": len}


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def _load(path: Path):
    if path.suffix == ".csv":
        with open(path, newline="") as handle:
            return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    return json.loads(path.read_text())


def _walk(data, path: str):
    for cond, quoted, name in _TOKEN.findall(path):
        name = quoted or name
        if cond:
            field, op, ref = _COMPARE.match(cond).groups()
            data = [d for d in data if _OPS[op](float(d[field]), float(ref))]
        elif isinstance(data, list) and not name.isdigit():
            data = [d[name] for d in data]
        else:
            data = data[int(name)] if isinstance(data, list) else data[name]
    return data


def resolve(data, expression: str):
    """The value of one key expression (module docstring) in loaded ``data``.

    >>> resolve({"a": [{"w": 0.1, "t": 3}, {"w": 0.1, "t": 5}, {"w": 2, "t": 9}]}, "a[w=0.1].t|median")
    4.0
    >>> resolve({"x": 2, "y": {"z": 3}}, "x+y.z")
    5
    """
    expression, _, aggregate = expression.partition("|")
    parts = [_walk(data, p.strip()) for p in expression.split("+")]
    value = parts[0] if len(parts) == 1 else sum(parts)
    if aggregate.startswith("number"):  # the i-th number written in a text field
        return float(re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", value)[int(aggregate[6:])])
    if aggregate:
        return _AGGREGATES[aggregate](value)
    return value[0] if isinstance(value, list) and len(value) == 1 else value  # the one entry a filter kept


def _source_file(c: Claim) -> Path | None:
    match = re.search(r"reference/[\w./-]+\.(json|csv)", c.source)
    return REPO / match[0] if match else None


def printed_agrees(printed: str, value: float) -> bool:
    """Whether ``value`` rounds to ``printed`` at the significant digits printed (trailing zeros
    count: '0.0160' has three).

    >>> printed_agrees("0.0160", 0.015954), printed_agrees("0.0159", 0.015954), printed_agrees("2.56e-07", 2.5595e-07)
    (True, False, True)
    """
    mantissa = printed.lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0")
    digits = max(1, len(mantissa))
    return math.isclose(float(f"{value:.{digits}g}"), float(printed), rel_tol=1e-12, abs_tol=0.0)


def check_sources(claims: dict[str, Claim] | None = None) -> list[str]:
    """Every disagreement between a claim and its source ([] when all agree): a claim without a
    source, a cited file that is missing, or a printed value, interval end, count or n that the
    cited key path does not give back."""
    problems = []
    for c in (claims or load_claims()).values():
        if not c.source.strip():
            problems.append(f"{c.id}: no source")
            continue
        path = _source_file(c)
        if path is None:
            if c.keys:
                problems.append(f"{c.id}: key paths without a reference/ file")
            continue
        if not path.is_file():
            problems.append(f"{c.id}: {path.relative_to(REPO)} does not exist")
            continue
        data = _load(path)
        for item in filter(None, (k.strip() for k in c.keys.split(";"))):
            field, _, expression = item.partition("=")
            try:
                found = resolve(data, expression)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
                problems.append(f"{c.id}: {field}={expression} does not resolve ({err!r})")
                continue
            problems += _compare(c, field.strip(), found)
    return problems


def _compare(c: Claim, field: str, found) -> list[str]:
    bad = lambda what, printed: [f"{c.id}: {what} {printed} but {c.source.split(':')[0]} gives {found!r}"]
    if field == "value":
        if c.count:
            ok = math.isclose(float(found), c.count[0] / c.count[1], rel_tol=1e-9)
            return [] if ok else bad("fraction", c.text)
        return [] if printed_agrees(c.text, float(found)) else bad("value", c.text)
    if field == "k":
        return [] if c.count and int(found) == c.count[0] else bad("count", c.text)
    if field == "n":
        return [] if c.n is not None and int(found) == c.n else bad("n", c.n)
    if field in ("lo", "hi"):
        printed = [t.strip() for t in c.ci_text.strip("[] ").split(",")][field == "hi"]
        return [] if printed_agrees(printed, float(found)) else bad(f"interval {field}", printed)
    if field == "ci":
        printed = [t.strip() for t in c.ci_text.strip("[] ").split(",")]
        ok = c.ci is not None and all(printed_agrees(p, float(f)) for p, f in zip(printed, found))
        return [] if ok else bad("interval", c.ci)
    return [f"{c.id}: unknown key field {field!r}"]

