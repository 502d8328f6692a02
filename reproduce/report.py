"""reproduction/REPORT.md from the rows and figures each target wrote in this invocation.

Each target writes ``<out>/<target>/rows.json``: a list of rows
``{paper, quantity, paper_value, paper_ci, ours, ours_ci, profile, n, note, null, invalid, ...}``;
a row that compares with the papers names its claim of ``reference/claims.csv``
(``reproduce.claims.claim_row``), which supplies the paper's value, interval, margin and the
horizon it needs. Numbers come from run records and fit JSONs of the run that just happened;
nothing here is typed in. Each row's verdict is computed from the row
(:func:`reproduce.verdict.verdict`, one vocabulary: :data:`VERDICTS`).

The report leads with the verdict of every claim of the table (:func:`claim_verdicts`): the
denominator is the papers, not what ran here; a claim without a row of ours reads "not run here"
with what it would need. Rows marked ``sensitivity`` (another reading of the same statistic) are
listed but never count.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from reproduce.verdict import VERDICTS, verdict, verdict_class

__all__ = ["VERDICTS", "claim_verdicts", "format_value", "join_notes", "verdict", "verdict_class", "write_report",
           "row"]


def row(paper: str, quantity: str, paper_value, ours, profile: str, n, paper_ci=None, ours_ci=None, note: str = "",
        null=None, invalid: str | None = None, **extra) -> dict:
    """One report row; ``null``: the no-effect value of the quantity (direction verdicts);
    ``invalid``: why the design cannot show the effect (the verdict is then ``invalid test``);
    ``extra``: ``horizon`` (of our runs), ``ci_level`` (our interval's coverage), ``test_p`` and
    ``test_name`` (a test of ours against the paper's published sample or counts), ``same_sign``
    (a p-value row: our effect has the paper's sign), ``sensitivity`` (another reading; never
    counted), ``expected`` (an identity of ours without a paper value), ``not_run`` (why there is
    no number of ours, e.g. the measured compute it would need), ``min_n`` and ``min_n_reason``
    (the fewest runs at which the estimate is scored at all), ``no_estimate`` (why runs that are
    there give no number yet: the verdict is then ``inconclusive``), ``replay`` (why our one run is the
    paper's own run repeated, so a one-run comparison decides)."""
    return dict(paper=paper, quantity=quantity, paper_value=paper_value, paper_ci=paper_ci, ours=ours,
                ours_ci=ours_ci, profile=profile, n=n, note=note, null=null, invalid=invalid, **extra)


def join_notes(*parts) -> str:
    """A row's note from its parts: the non-empty ones, joined by ``; ``.

    >>> join_notes("2 of 3 planned runs finished", "", None, "medium profile")
    '2 of 3 planned runs finished; medium profile'
    """
    return "; ".join(part for part in parts if part)


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


def _epochs(horizon) -> str:
    """A horizon in epochs for the tables ('-' where the row or claim names none).

    >>> _epochs(10000), _epochs(None)
    ('10,000', '-')
    """
    return f"{int(horizon):,}" if _finite(horizon) else "-"


def read_rows(out: Path) -> list[dict]:
    """Every target's rows under ``out``, each with its ``target``."""
    rows = []
    for target in sorted(p for p in Path(out).iterdir() if (p / "rows.json").exists()):
        rows += [{**r, "_target": target.name} for r in json.loads((target / "rows.json").read_text())]
    return rows


def claim_verdicts(rows: list[dict], left_out: dict | None = None, not_run: dict | None = None) -> list[dict]:
    """One entry per claim of ``reference/claims.csv``, in table order: ``{claim, row, verdict}``,
    the row being the first of ours that scores the claim (not a sensitivity row); a claim without
    one reads "not run here" with what it would need and why its target did not run."""
    from reproduce.claims import load_claims

    left_out, not_run = left_out or {}, not_run or {}
    found = {}
    for r in rows:
        if r.get("claim") and not r.get("sensitivity"):
            found.setdefault(r["claim"], r)
    entries = []
    for c in load_claims().values():
        r = found.get(c.id)
        if r is not None:
            entries.append(dict(claim=c, row=r, verdict=verdict(r)))
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
        entries.append(dict(claim=c, row=None, verdict="not run here: " + "; ".join(why or ["nothing here scores it"])))
    return entries


def verdict_counts(entries: list[dict]) -> dict[str, int]:
    """``{verdict word: number of claims}`` in the vocabulary's order (zeros left out)."""
    counts = Counter(verdict_class(e["verdict"]) for e in entries)
    return {word: counts[word] for word in VERDICTS if counts[word]}


def counts_line(entries: list[dict]) -> str:
    """'197 claims of the two papers: 27 matches the paper in number; 2 same decision; ...' over
    every claim of the table."""
    counts = verdict_counts(entries)
    return f"{len(entries)} claims of the two papers: " + "; ".join(f"{n} {word}" for word, n in counts.items())


PROFILE_NOTES = {
    "smoke": "`smoke` runs are shrunk to 2 CPU cores: a pipeline check; compare them with the paper qualitatively "
             "and read each row's note.",
    "medium": "`medium` is the paper's model and protocol with fewer seeds, on CPU (rows on a smaller model say so); "
              "its run records are shipped in this folder and `make report PROFILE=medium` regenerates this file "
              "from them without training.",
    "paper": "`paper` is the exact protocol.",
}


def write_report(out: Path, timings: dict, profile: str, left_out: dict | None = None,
                 not_run: dict | None = None) -> Path:
    """``timings``: per target ``{"wall_s", "cpu_s"}`` (or plain wall seconds); ``left_out``:
    targets not run in this profile, with the reason; ``not_run``: targets of the profile whose
    records are missing (a ``--no-train`` pass), with what the target said."""
    out = Path(out)
    rows = read_rows(out)
    entries = claim_verdicts(rows, left_out, not_run)
    lines = [
        "# Reproduction report",
        "",
        f"Profile: **{profile}**. Every number below was read from the run records and fit JSONs in this folder",
        "(`make reproduce-all` or `make report`); every paper value, its interval and the margin within which ours",
        "counts as the same come from `reference/claims.csv`, each with its source.",
        PROFILE_NOTES.get(profile, ""),
        "",
        f"**{counts_line(entries)}.**",
        "",
        "## Every claim",
        "",
        "| claim | paper | where | claim in words | paper value | margin | ours | n | horizon: ours / needed | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        c, r = e["claim"], e["row"]
        ours = "-" if r is None else format_value(r["ours"], r.get("ours_ci"), r.get("ci_level"))
        paper_value = c.text + (f" {c.ci_text}" if c.ci_text else "")
        margin = "-" if c.margin is None else f"{c.margin:g}"
        lines.append(f"| {c.id} | {c.paper} | {c.where} | {c.claim} | {paper_value} | {margin} | {ours} | "
                     f"{'-' if r is None else r['n']} | {_epochs(r and r.get('horizon'))} / {_epochs(c.horizon)} | "
                     f"{e['verdict']} |")
    lines += ["", "## Every row", "",
              "Rows marked *sensitivity* score a claim under another reading of the same statistic; they never "
              "count above. Rows without a claim are context.", "",
              "| paper / figure | claim | quantity | paper | ours | profile | n | horizon | verdict | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        claim_id = r.get("claim") or "-"
        quantity = r["quantity"] + (" *(sensitivity)*" if r.get("sensitivity") else "")
        lines.append(
            f"| {r['paper']} | {claim_id} | {quantity} | {format_value(r['paper_value'], r.get('paper_ci'))} | "
            f"{format_value(r['ours'], r.get('ours_ci'), r.get('ci_level'))} | {r['profile']} | {r['n']} | "
            f"{_epochs(r.get('horizon'))} | {verdict(r)} | {r.get('note', '')} |")
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
    path = out / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path
