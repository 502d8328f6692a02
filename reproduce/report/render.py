"""REPORT.md, from the rows each target wrote and the claims table.

Each target writes ``<out>/<target>/rows.json`` (:class:`reproduce.report.rows.Row` dicts). The
report leads with the verdict of every claim of ``reference/claims.csv`` (:func:`claim_verdicts`):
the denominator is the papers, not what ran here; a claim without a row of ours reads "not run
here" with what it would need. Rows marked ``sensitivity`` (another reading of the same statistic)
are listed but never count. A verdict that is consistent but not yet equivalent, or inconclusive,
says how many runs would settle it, from the simulated power of the rule
(:func:`reproduce.report.oc.more_runs`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reproduce.report.claims import Claim, load_claims
from reproduce.report.oc import more_runs
from reproduce.report.rows import Row
from reproduce.report.verdict import VERDICTS, Verdict, Word, judge

__all__ = ["Entry", "claim_verdicts", "counts_line", "format_value", "paper_cell", "read_rows", "verdict_counts",
           "write_report"]

@dataclass(frozen=True)
class Entry:
    """One claim of the table with the row of ours that scores it (None: not run here)."""

    claim: Claim
    row: Row | None
    verdict: Verdict


def n_cell(row: Row) -> str:
    """The n column: the runs behind ``ours``, and the runs its interval is drawn from where they differ
    (one lead run's value judged by the prediction interval of 3 runs reads ``1 (3 runs)``)."""
    return str(row.n) if not row.runs or len(row.runs) == row.n else f"{row.n} ({len(row.runs)} runs)"


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def format_value(value, ci=None, level=None) -> str:
    """A report cell: 4 significant digits, the interval when it has two finite ends (with its
    coverage when that is not 95%); ``-`` for none.

    >>> format_value(0.024576, [0.01414, 0.05511]), format_value(None), format_value(0.5, [None, 1.0])
    ('0.02458 [0.01414, 0.05511]', '-', '0.5')
    >>> format_value(140, [130, 140], 0.75)
    '140 [130, 140] (75%)'
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    text = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
    if ci is not None and len(ci) == 2 and all(_finite(v) for v in ci):
        text += f" [{ci[0]:.4g}, {ci[1]:.4g}]"
        if _finite(level) and abs(level - 0.95) > 0.005:
            text += f" ({level:.0%})"
    return text


def paper_cell(c: Claim) -> str:
    """The paper's value as printed, with its interval or its margin (``-+``)."""
    if c.ci_text:
        return f"{c.text} {c.ci_text}"
    if c.margin is not None and c.kind in ("estimate", "sample") and not c.one_run:
        return f"{c.text} -+{c.margin:g}"
    return c.text


def _epochs(horizon) -> str:
    """A horizon in epochs for the tables ('-' where the row or claim names none).

    >>> _epochs(10000), _epochs(None)
    ('10,000', '-')
    """
    return f"{int(horizon):,}" if _finite(horizon) else "-"


def read_rows(out: Path) -> list[Row]:
    """Every target's rows under ``out``, in target order."""
    rows = []
    for target in sorted(p for p in Path(out).iterdir() if (p / "rows.json").exists()):
        rows += [Row.from_dict(r) for r in json.loads((target / "rows.json").read_text())]
    return rows


def claim_verdicts(rows: list[Row], left_out: dict | None = None, not_run: dict | None = None) -> list[Entry]:
    """One entry per claim of ``reference/claims.csv``, in table order, the row being the first of
    ours that scores the claim (not a sensitivity row); a claim without one reads "not run here"
    with what it would need and why its target did not run."""
    left_out, not_run = left_out or {}, not_run or {}
    found: dict[str, Row] = {}
    for r in rows:
        if r.claim and not r.sensitivity:
            found.setdefault(r.claim, r)
    entries = []
    for c in load_claims().values():
        r = found.get(c.id)
        if r is not None:
            entries.append(Entry(c, r, judge(r, c)))
            continue
        why = [] if c.needs in ("", "-") else [f"needs {c.needs}"]
        if c.target in left_out:
            why.append(f"{c.target} is not in this profile: {left_out[c.target]}")
        elif c.target in not_run and not str(not_run[c.target]).startswith("partial"):
            why.append(f"{c.target} has no records here")
        elif c.target in not_run and not why:  # some records: the row waits for the runs still missing
            why.append(f"{c.target} has no row for it yet ({not_run[c.target]})")
        elif c.target != "-" and not why:
            why.append(f"{c.target} reports no row for it")
        entries.append(Entry(c, None, Verdict(Word.NOT_RUN, "; ".join(why or ["nothing here scores it"]))))
    return entries


def verdict_counts(entries: list[Entry]) -> dict[str, int]:
    """``{verdict word: number of claims}`` in the vocabulary's order (zeros left out)."""
    counts = Counter(e.verdict.word.value for e in entries)
    return {word: counts[word] for word in VERDICTS if counts[word]}


def counts_line(entries: list[Entry]) -> str:
    """'223 claims of the two papers: 20 equivalent within Delta; 40 consistent with the paper; ...'
    over every claim of the table."""
    counts = verdict_counts(entries)
    return f"{len(entries)} claims of the two papers: " + "; ".join(f"{n} {word}" for word, n in counts.items())


def _verdict_cell(e: Entry) -> str:
    """The verdict with its reason and, where more runs could settle it, how many."""
    extra = more_runs(e.row, e.claim, e.verdict) if e.row is not None else ""
    return str(e.verdict) + (f"; {extra}" if extra else "")


PROFILE_NOTES = {
    "smoke": "`smoke` runs are shrunk to 2 CPU cores: a pipeline check; compare them with the paper qualitatively "
             "and read each row's note.",
    "medium": "`medium` is the paper's model and protocol with fewer seeds, on CPU (rows on a smaller model say so); "
              "its run records are shipped in this folder and `make report PROFILE=medium` regenerates this file "
              "from them without training.",
    "paper": "`paper` is the exact protocol.",
}

HOW_TO_READ = [
    "Each comparison is judged on D = ours - paper (ours / paper for a claim compared as a factor) with both sides'",
    "uncertainty: **equivalent within Delta** when D's 90% interval lies inside the claim family's tolerance Delta",
    "(fixed in `reference/claims.csv` before this report), **consistent with the paper** when D's 95% interval",
    "contains 0 (or the test against the paper's counts or sample does not reject), **not reproduced** when it",
    "excludes 0 (*beyond Delta* when wholly outside it); **inconclusive** only where our runs give no interval of",
    "the coverage a verdict needs. The rule's simulated operating characteristics are in `docs/statistics.md`.",
]


def write_report(out: Path, timings: dict, profile: str, left_out: dict | None = None,
                 not_run: dict | None = None) -> Path:
    """``timings``: per target ``{"wall_s", "cpu_s"}`` (or plain wall seconds); ``left_out``:
    targets not run in this profile, with the reason; ``not_run``: targets of the profile whose
    records are missing (a ``--no-train`` pass), with what the target said."""
    out = Path(out)
    rows = read_rows(out)
    entries = claim_verdicts(rows, left_out, not_run)
    lines = [
        "# Reproduction report", "",
        f"Profile: **{profile}**. Every number below was read from the run records and fit JSONs in this folder",
        "(`make reproduce-all` or `make report`); every paper value, its uncertainty and the tolerance Delta within",
        "which ours counts as equivalent come from `reference/claims.csv`, each with its source and reason.",
        PROFILE_NOTES.get(profile, ""), "", *HOW_TO_READ, "",
        f"**{counts_line(entries)}.**", "",
        "## Every claim", "",
        "| claim | paper | where | claim in words | paper value | Delta | ours | n | horizon: ours / needed | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        c, r = e.claim, e.row
        ours = "-" if r is None else format_value(r.ours, r.ours_ci, r.ci_level)
        lines.append(f"| {c.id} | {c.paper} | {c.where} | {_cell(c.claim)} | {paper_cell(c)} | {c.tolerance} | {ours} | "
                     f"{'-' if r is None else n_cell(r)} | {_epochs(r and r.horizon)} / {_epochs(c.horizon)} | "
                     f"{_cell(_verdict_cell(e))} |")
    lines += ["", "## Every row", "",
              "Rows marked *sensitivity* score a claim under another reading of the same statistic; they never "
              "count above. Rows without a claim are context.", "",
              "| paper / figure | claim | quantity | paper | ours | profile | n | horizon | verdict | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    claims = load_claims()
    for r in rows:
        c = claims.get(r.claim)
        quantity = r.quantity + (" *(sensitivity)*" if r.sensitivity else "")
        lines.append(
            f"| {c.label if c else r.source} | {r.claim or '-'} | {_cell(quantity)} | {paper_cell(c) if c else '-'} | "
            f"{format_value(r.ours, r.ours_ci, r.ci_level)} | {r.profile} | {n_cell(r)} | {_epochs(r.horizon)} | "
            f"{_cell(str(judge(r, c)))} | {_cell(r.note)} |")
    lines += _figures_and_times(out, timings, left_out, not_run)
    path = out / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cell(text: str) -> str:
    """Table-safe text: a '|' inside a cell (|cos|, |ours - paper|) would split the row."""
    return str(text).replace("|", "\\|")


def _figures_and_times(out: Path, timings: dict, left_out: dict | None, not_run: dict | None) -> list[str]:
    lines = []
    figures = []
    targets = sorted(p for p in out.iterdir() if (p / "rows.json").exists())
    for target in targets:
        figures += sorted(target.glob("*.png"))
    for target in targets:  # a target's own notes (<target>/NOTES.md, markdown written by the target)
        if (target / "NOTES.md").exists():
            lines += ["", (target / "NOTES.md").read_text().rstrip()]
    lines += ["", "## Figures", ""]
    for png in figures:
        lines += [f"### {png.parent.name}: {png.stem}", "", f"![{png.stem}]({png.relative_to(out)})", ""]
    if not_run:
        lines += ["## In this profile, but without (all) records yet", "",
                  "`make reproduce-all` with the same profile and output trains what is missing.", "",
                  "| target | what is missing |", "|---|---|"]
        lines += [f"| {name} | {why} |" for name, why in not_run.items()]
        lines += [""]
    if left_out:
        lines += ["## Not in this profile", "", "| target | why |", "|---|---|"]
        lines += [f"| {name} | {why} |" for name, why in left_out.items()]
        lines += [""]
    lines += ["## Time per target (the pass that trained)", "",
              "Each target's last pass that trained: runs that an earlier, interrupted pass finished are not in it "
              "(a resumed sweep only trains what is missing).", "", "| target | wall s | CPU s |", "|---|---|---|"]
    total = 0.0
    for name, t in timings.items():
        t = t if isinstance(t, dict) else {"wall_s": t, "cpu_s": None}
        total += t.get("cpu_s") or 0.0
        cpu = "-" if t.get("cpu_s") is None else f"{t['cpu_s']:.0f}"
        lines.append(f"| {name} | {t['wall_s']:.0f} | {cpu} |")
    lines.append(f"| total of these passes | | {total:.0f} ({total / 3600:.2f} CPU-hours) |")
    return lines
