"""reproduction/REPORT.md from the rows and figures each target wrote in this invocation.

Each target writes ``<out>/<target>/rows.json``: a list of rows
``{paper, quantity, paper_value, paper_ci, ours, ours_ci, profile, n, note, null, invalid}``.
Numbers come from run records and fit JSONs of the run that just happened; nothing here is typed
in. The verdict is computed from the row, in one vocabulary (:data:`VERDICTS`), each with its
reason after a colon:

* ``invalid test``: the design cannot show the effect (``invalid`` says why; the target's
  checks in :mod:`grok_lightning.stats.validity` decide it). Never evidence of either sign.
* ``not run here``: no number of ours (the note says why: GPU-sized, undefined at this horizon).
* ``matches the paper in number``: the paper's value inside our CI (or the two CIs overlap, or
  ours inside the paper's CI); without any CI, within the row's stated ``tolerance``, else equal
  at the precision the paper prints; for a
  count, the paper's proportion inside our Wilson interval; for a named outcome, the same name.
* ``same direction, different size``: not a match, but ours and the paper's lie on the same side
  of the row's ``null`` (the no-effect value, e.g. 0 for a Cohen's d), with our CI excluding it.
* ``not reproduced``: anything else with a paper value.

A row without a paper value has no verdict (``-``): it is context, not a comparison.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

__all__ = ["VERDICTS", "format_value", "join_notes", "verdict", "verdict_class", "write_report", "row"]

VERDICTS = ("matches the paper in number", "same direction, different size", "not reproduced", "invalid test",
            "not run here")


def row(paper: str, quantity: str, paper_value, ours, profile: str, n, paper_ci=None, ours_ci=None, note: str = "",
        null=None, invalid: str | None = None, tolerance: float | None = None, alpha: float | None = None,
        same_sign: bool = True) -> dict:
    """One report row; ``null``: the no-effect value of the quantity (direction verdicts);
    ``invalid``: why the design cannot show the effect (the verdict is then ``invalid test``);
    ``tolerance``: a stated goal (``|ours - paper| <= tolerance`` matches) for rows without CIs;
    ``alpha``: the row is a p-value tested at this level, and ``same_sign`` says whether our effect
    has the paper's sign (a p's size follows the number of runs, so only the decision is compared)."""
    return dict(paper=paper, quantity=quantity, paper_value=paper_value, paper_ci=paper_ci, ours=ours,
                ours_ci=ours_ci, profile=profile, n=n, note=note, null=null, invalid=invalid, tolerance=tolerance,
                alpha=alpha, same_sign=same_sign)


def join_notes(*parts) -> str:
    """A row's note from its parts: the non-empty ones, joined by ``; ``.

    >>> join_notes("2 of 3 planned runs finished", "", None, "medium profile")
    '2 of 3 planned runs finished; medium profile'
    """
    return "; ".join(part for part in parts if part)


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _printed_digits(x: float) -> int:
    """Significant digits the paper printed: the fewest that give back its value."""
    return next((k for k in range(1, 16) if float(f"{x:.{k}g}") == x), 16)


def _count(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\s*/\s*(\d+)", text)
    return (int(match[1]), int(match[2])) if match and int(match[2]) > 0 else None


def _wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p, denom = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / denom, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _named(r: dict) -> str:
    ours, paper = r["ours"], r.get("paper_value")
    counts = _count(ours), _count(str(paper)) if paper is not None else None
    if counts[0] and counts[1]:
        lo, hi = _wilson(*counts[0])
        inside = lo <= counts[1][0] / counts[1][1] <= hi
        return ("matches the paper in number" if inside else "not reproduced") + \
            f": {ours} (Wilson 95% [{lo:.2f}, {hi:.2f}]) vs {paper}"
    if paper is None:
        return "-"
    return "matches the paper in number" if ours == paper else f"not reproduced: {ours} vs {paper}"


def _p_verdict(ours: float, paper: float, alpha: float, same_sign: bool) -> str:
    """A p-value row: whether each test rejects at ``alpha``, and in which direction."""
    if ours < alpha and not same_sign:
        return f"not reproduced: p {ours:.3g} < {alpha:g} with the opposite sign"
    if (ours < alpha) != (paper < alpha):
        return f"not reproduced: p {ours:.3g} against the paper's {paper:.3g} at level {alpha:g}"
    if ours < alpha:
        return f"same direction, different size: both p < {alpha:g} (the size of a p follows the number of runs)"
    return f"matches the paper in number: neither p is below {alpha:g}"


def verdict(r: dict) -> str:
    """The row's verdict in the one vocabulary (module docstring), with its reason.

    >>> verdict(row("p", "q", 0.0158, 0.02, "smoke", 10, [0.0109, 0.02], [0.015, 0.03]))
    'matches the paper in number: CIs overlap'
    >>> verdict(row("p", "q", 0.0158, 0.3, "smoke", 10, [0.0109, 0.02], [0.2, 0.4]))
    'not reproduced: CIs differ'
    >>> verdict(row("p", "q", -0.88, -0.3, "medium", 8, ours_ci=[-0.6, -0.1], null=0))
    'same direction, different size: paper value outside our CI'
    >>> verdict(row("p", "q", 0.5, None, "smoke", 0))
    'not run here'
    >>> verdict(row("p", "q", -0.88, 7.3, "medium", 6, invalid="A has no peak"))
    'invalid test: A has no peak'
    >>> verdict(row("p", "q", "20/20 (A, B)", "6/6", "medium", 6))
    'matches the paper in number: 6/6 (Wilson 95% [0.61, 1.00]) vs 20/20 (A, B)'
    >>> verdict(row("p", "q", 174, 174.0, "medium", 15)), verdict(row("p", "q", 0.8, 0.7982, "medium", 5))
    ('matches the paper in number: equal at the printed precision', 'matches the paper in number: equal at the printed precision')
    >>> verdict(row("p", "q", 0.0094, 0.027, "medium", 7, alpha=0.05))
    'same direction, different size: both p < 0.05 (the size of a p follows the number of runs)'
    >>> verdict(row("p", "q", 0.0094, 0.027, "medium", 7, alpha=0.05, same_sign=False))
    'not reproduced: p 0.027 < 0.05 with the opposite sign'
    """
    if r.get("invalid"):
        return f"invalid test: {r['invalid']}"
    ours, paper, ours_ci, paper_ci = r.get("ours"), r.get("paper_value"), r.get("ours_ci"), r.get("paper_ci")
    if isinstance(ours, str):
        return _named(r)
    if not _finite(ours):
        return "not run here"
    if not _finite(paper):
        return "-"
    if _finite(r.get("alpha")):
        return _p_verdict(ours, paper, r["alpha"], r.get("same_sign", True))
    has = lambda ci: ci is not None and len(ci) == 2 and all(_finite(v) for v in ci)
    if has(ours_ci) and has(paper_ci):
        match, how = ours_ci[0] <= paper_ci[1] and paper_ci[0] <= ours_ci[1], ("CIs overlap", "CIs differ")
    elif has(ours_ci):
        match, how = ours_ci[0] <= paper <= ours_ci[1], ("paper value inside our CI", "paper value outside our CI")
    elif has(paper_ci):
        match, how = paper_ci[0] <= ours <= paper_ci[1], ("ours inside the paper's CI", "ours outside the paper's CI")
    elif _finite(r.get("tolerance")):
        match = abs(ours - paper) <= r["tolerance"]
        how = (f"ours - paper within the stated tolerance {r['tolerance']:g}",
               f"ours - paper beyond the stated tolerance {r['tolerance']:g}")
    else:
        k = _printed_digits(paper)
        match = f"{ours:.{k}g}" == f"{paper:.{k}g}"
        how = ("equal at the printed precision", f"no CI; ours - paper = {ours - paper:+.3g}")
    if match:
        return f"matches the paper in number: {how[0]}"
    null = r.get("null")
    if _finite(null) and (ours - null) * (paper - null) > 0 and not (has(ours_ci) and ours_ci[0] <= null <= ours_ci[1]):
        return f"same direction, different size: {how[1]}"
    return f"not reproduced: {how[1]}"


def verdict_class(text: str) -> str:
    """The vocabulary word of a verdict (its text before the colon); ``-`` for no verdict."""
    head = text.split(":")[0]
    return head if head in VERDICTS else "-"


def format_value(value, ci=None) -> str:
    """A report cell: 4 significant digits, the interval when it has two finite ends; ``-`` for none.

    >>> format_value(0.024576, [0.01414, 0.05511]), format_value(None), format_value(0.5, [None, 1.0])
    ('0.02458 [0.01414, 0.05511]', '-', '0.5')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    text = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
    if ci is not None and len(ci) == 2 and all(_finite(v) for v in ci):
        text += f" [{ci[0]:.4g}, {ci[1]:.4g}]"
    return text


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
    lines = [
        "# Reproduction report",
        "",
        f"Profile: **{profile}**. Every number below was read from the run records and fit JSONs in this folder",
        "(`make reproduce-all` or `make report`); the paper values are the published ones (with their CIs).",
        PROFILE_NOTES.get(profile, ""),
        "",
        "| paper / figure | quantity | paper | ours | profile | n | verdict | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    figures = []
    targets = sorted(p for p in out.iterdir() if (p / "rows.json").exists())
    for target in targets:
        for r in json.loads((target / "rows.json").read_text()):
            lines.append(
                f"| {r['paper']} | {r['quantity']} | {format_value(r['paper_value'], r.get('paper_ci'))} | "
                f"{format_value(r['ours'], r.get('ours_ci'))} | {r['profile']} | {r['n']} | {verdict(r)} | {r.get('note', '')} |"
            )
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
