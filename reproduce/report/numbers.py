"""What in the prose looks like a result: the rule README.md and docs/*.md are held to.

A result (a number read from a record, a fit, the claims table or a measurement) is written into
the prose by a renderer, between generated-block markers (:mod:`reproduce.report.prose`); hand-typed
text explains and links. A number *looks like a result* when, outside fenced code, inline code,
link targets, HTML comments and generated blocks, it is

* a decimal with two or more significant digits after the point: ``0.361``, ``18.57``, ``1.000``
  (not ``0.5``, ``2.5``, ``0.05``, ``1e-3``);
* an interval ``[a, b]`` with an end of two or more significant digits: ``[0.310, 0.412]``,
  ``[790, 1210]`` (not ``[0, 1]``, ``[-1, 1]``, ``[0.5, 1]``);
* a count ``k/n``: ``15/15``, ``3/10``;
* a percentage: ``41%``, ``+4.1%`` (not the coverage levels of the verdict rule's intervals);
* a measured amount of time or memory: ``12 min``, ``37 s wall``, ``435 CPU-h``, ``1.1 CPU-s``,
  ``1.72 GB``.

These are not results and pass: arXiv ids (``2605.20441``), version numbers (after a package's
name, or with two dots), every value of the shipped configs (``configs/**/*.yaml``: the protocol's
lambda grid, lr, betas, thresholds, epochs) and the short reviewed list :data:`ALLOWED`, each entry
with why it is not a result. Plain integers pass: epochs, sizes and seeds of the protocol are
integers too, so an integer result in prose is left to review.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

__all__ = ["ALLOWED", "Hit", "config_values", "masked", "result_like", "scan", "without_code"]

#: numbers that are not results, each with the reason (reviewed: keep it short)
ALLOWED: dict[str, str] = {
    "95%": "the coverage of the verdict rule's intervals (reproduce.report.verdict)",
    "90%": "the coverage of the TOST interval that decides 'equivalent' (5% per side)",
    "75%": "the coverage a median of 3 runs can give (order statistics), named by the verdict rule",
    "5%": "the TOST level per side, and the rule's size target (reproduce.report.oc_table.TARGETS)",
    "2.5%": "the tail of a two-sided 95% interval",
    "93%": "the rule's faithful-replicate target (reproduce.report.oc_table.TARGETS)",
    "80%": "the rule's power target (reproduce.report.oc_table.TARGETS)",
    "0.075": "the rho_tian threshold of the lock-in paper's protocol (grok_lightning.plots.lockin.RHO_THRESHOLD)",
    "0.9995": "the collapse threshold on s_bar (grok_lightning.stats.regimes)",
    "0.597": "the largest mean attention entropy on [a, b, =] under a causal mask, (ln 1 + ln 2 + ln 3) / 3 nats",
    "0.299": "half of 0.597: the largest spread of head entropies on [a, b, =] (an arithmetic bound)",
    "94%": "the coverage of 5 runs' range as an interval of their median, 1 - 2^-4 (the rule prints it)",
    "1.2533": "sqrt(pi / 2): the standard error of a median over that of a mean, for a normal sample",
    "1.96": "the normal quantile of a two-sided 95% interval",
    "1.4826": "the factor that turns a median absolute deviation into a normal SD",
    "6 GB": "the size of the CUDA wheels a plain pip install of torch pulls on Linux (the index's listing)",
}

_NUM = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?"
_DECIMAL = re.compile(r"(?<![A-Za-wyz0-9_.,/-])(\d+)\.(\d+)(?!\d|\.\d)")
_INTERVAL = re.compile(rf"\[\s*({_NUM})\s*,\s*({_NUM})\s*\]")
_COUNT = re.compile(r"(?<![\w./-])\d+/\d+(?![\w/.])")
_PERCENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?%")
_MEASURED = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s*(?:CPU-h(?:ours)?|CPU-s(?:econds)?|GPU-h(?:ours)?|"
                       r"s wall|min\b|GB\b|MB\b|KB\b|GiB\b|MiB\b)")
_ARXIV = re.compile(r"\b\d{4}\.\d{4,5}(?:v\d+)?\b")
_VERSION = re.compile(r"(?:Python|python|torch|Lightning|lightning|CUDA|cuda|Ray|ray|transformers|devinterp|numpy|"
                      r"scipy|statsmodels|torchmetrics|mamba-ssm|mamba_ssm|version|v)\s?\d+(?:\.\d+)+|\d+\.\d+\.\d+")
_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1", re.S | re.M)
_BLOCK = re.compile(r"<!-- ([\w.-]+):begin -->.*?<!-- \1:end -->", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\([^)\s]*\)")


@dataclass(frozen=True)
class Hit:
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text!r} ({self.why})"


def _blank(match: re.Match) -> str:
    """The match with every character but newlines blanked: line numbers survive the masking."""
    return re.sub(r"[^\n]", " ", match.group())


def without_code(text: str) -> str:
    """``text`` with fenced and inline code blanked (markers quoted in code are no markers)."""
    for pattern in (_FENCE, _CODE):
        text = pattern.sub(_blank, text)
    return text


def masked(text: str) -> str:
    """``text`` with what the rule does not read blanked out: fenced and inline code, generated
    blocks, HTML comments, link targets, arXiv ids and version numbers."""
    for pattern in (_FENCE, _BLOCK, _COMMENT, _CODE, _LINK, _ARXIV, _VERSION):
        text = pattern.sub(_blank, text)
    return text


def _significant(number: str) -> int:
    """Significant digits of a printed number ('0.0158' -> 3, '130' -> 2, '1.000' -> 4, '-1' -> 1).

    >>> [_significant(t) for t in ("0.0158", "130", "1.000", "-1", "1,210", "0.5")]
    [3, 2, 4, 1, 3, 1]
    """
    mantissa = number.lstrip("-").replace(",", "").lower().split("e")[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits if "." in mantissa else digits.rstrip("0")) or 1


@lru_cache(maxsize=1)
def config_values() -> frozenset[str]:
    """Every number of the shipped configs as it would be printed (``0.015``, ``1e-3`` -> ``0.001``):
    the protocol, not a result."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            found.update({f"{node}", f"{node:g}", f"{float(node):.4f}".rstrip("0")})

    for path in sorted((REPO / "configs").rglob("*.yaml")):
        walk(yaml.safe_load(path.read_text()))
    return frozenset(found)


def _allowed(token: str) -> bool:
    token = token.strip().lstrip("+")
    return token in ALLOWED or token.replace(" ", "") in ALLOWED or token in config_values()


def result_like(text: str) -> list[Hit]:
    """Every number of a markdown ``text`` that looks like a result (module docstring), by line."""
    hits: list[Hit] = []
    for number, line in enumerate(masked(text).splitlines(), 1):
        spans: list[tuple[int, int]] = []

        def add(match: re.Match, why: str) -> None:
            if any(a <= match.start() < b for a, b in spans):
                return
            spans.append(match.span())
            hits.append(Hit(number, match.group().strip(), why))

        for m in _INTERVAL.finditer(line):
            if max(_significant(m[1]), _significant(m[2])) >= 2 and not (_allowed(m[1]) and _allowed(m[2])):
                add(m, "an interval")
        for m in _MEASURED.finditer(line):
            if not _allowed(m.group()):
                add(m, "a measured amount")
        for m in _COUNT.finditer(line):
            if not _allowed(m.group()):
                add(m, "a count k/n")
        for m in _PERCENT.finditer(line):
            if not _allowed(m.group()):
                add(m, "a percentage")
        for m in _DECIMAL.finditer(line):
            integer, fraction = m.groups()
            digits = fraction.lstrip("0") if int(integer) == 0 else fraction
            if len(digits) >= 2 and not _allowed(m.group()):
                add(m, "a decimal of two or more significant digits after the point")
    return sorted(hits, key=lambda h: h.line)


def scan(paths=None) -> dict[str, list[Hit]]:
    """``{path relative to the repository: hits}`` over README.md and docs/*.md (files with none
    left out)."""
    paths = paths or [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    out = {}
    for path in paths:
        hits = result_like(Path(path).read_text())
        if hits:
            out[str(Path(path).relative_to(REPO))] = hits
    return out
