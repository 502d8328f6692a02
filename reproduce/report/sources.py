"""Each claim of ``reference/claims.csv`` checked against the file it cites.

Key paths (``keys``: ``value=...; ci=...; n=...; k=...``) walk a JSON or CSV file: ``a.b.0.c``
(a name, ``'wd0.05'`` quoted when it holds a dot, or an index into a list), ``[wd=0.1]`` /
``[epoch>100]`` (keep the list entries whose field compares so; a name after it maps over the
list), ``x+y`` (a sum of paths) and a final ``|median`` / ``|min`` / ``|max`` / ``|mean`` /
``|count``, or ``|number<i>`` for the i-th number written in a text field. ``lo=`` and ``hi=``
check the interval's ends one at a time. :func:`check_sources` compares every claim with the file
it cites, at the precision the claim prints; :func:`claim_sample` gives a published sample behind
a claim, :func:`source_value` any other number of the file a claim cites.
"""

from __future__ import annotations

import csv
import json
import math
import operator
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from reproduce.report.claims import REPO, Claim, claim, load_claims

__all__ = ["check_sources", "claim_sample", "printed_agrees", "resolve", "source_value"]


def source_value(claim_id: str, expression: str):
    """Another number of the file a claim cites (a key expression, module docstring), e.g. the
    sign of the difference behind a published p-value."""
    return resolve(_load(_source_file(claim(claim_id))), expression)


def claim_sample(claim_id: str) -> list:
    """The published sample behind a claim of kind ``sample`` (its ``value`` key path without the
    final aggregate), e.g. the grok epochs whose median the claim prints."""
    return list(_sample(claim_id))


@lru_cache(maxsize=None)
def _sample(claim_id: str) -> tuple:
    c = claim(claim_id)
    item = next(k for k in c.keys.split(";") if k.strip().startswith("value="))
    expression = item.strip()[len("value="):].split("|")[0]
    found = resolve(_load(_source_file(c)), expression)
    return tuple(found) if isinstance(found, list) else (found,)


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

