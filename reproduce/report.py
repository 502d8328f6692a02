"""reproduction/REPORT.md from the rows and figures each target wrote in this invocation.

Each target writes ``<out>/<target>/rows.json``: a list of rows
``{paper, quantity, paper_value, paper_ci, ours, ours_ci, profile, n, note}``. Numbers come from
run records and fit JSONs of the run that just happened; nothing here is typed in. The verdict is
computed: ``CIs overlap`` / ``CIs differ`` when both sides have intervals, ``paper value inside
our CI`` / ``outside our CI`` when only ours has one, ``no value`` when we have none (the row's note
says why: a target that could not run, a quantity undefined at this horizon).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["verdict", "write_report", "row"]


def row(paper: str, quantity: str, paper_value, ours, profile: str, n, paper_ci=None, ours_ci=None, note: str = "") -> dict:
    return dict(paper=paper, quantity=quantity, paper_value=paper_value, paper_ci=paper_ci, ours=ours,
                ours_ci=ours_ci, profile=profile, n=n, note=note)


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def verdict(r: dict) -> str:
    """
    >>> verdict(row("p", "q", 0.0158, 0.02, "smoke", 10, [0.0109, 0.02], [0.015, 0.03]))
    'CIs overlap'
    >>> verdict(row("p", "q", 0.0158, 0.3, "smoke", 10, [0.0109, 0.02], [0.2, 0.4]))
    'CIs differ'
    >>> verdict(row("p", "q", 0.5, None, "smoke", 0))
    'no value'
    >>> verdict(row("p", "q", "20/20", "6/6", "medium", 6))
    'count (compare)'
    >>> verdict(row("p", "q", "saturating_exp", "linear", "medium", 10))
    'differs from the paper'
    """
    ours, ours_ci, paper_ci = r.get("ours"), r.get("ours_ci"), r.get("paper_ci")
    if isinstance(ours, str):
        if "/" in ours:  # a count such as "6/6": shown side by side with the paper's
            return "count (compare)"
        return "same as the paper" if ours == r.get("paper_value") else "differs from the paper"  # a named outcome
    if not _finite(ours):
        return "no value"
    has = lambda ci: ci is not None and len(ci) == 2 and all(_finite(v) for v in ci)
    if has(ours_ci) and has(paper_ci):
        return "CIs overlap" if ours_ci[0] <= paper_ci[1] and paper_ci[0] <= ours_ci[1] else "CIs differ"
    if has(ours_ci) and _finite(r.get("paper_value")):
        return "paper value inside our CI" if ours_ci[0] <= r["paper_value"] <= ours_ci[1] else "paper value outside our CI"
    if _finite(r.get("paper_value")):
        diff = ours - r["paper_value"]
        return f"no CI; ours - paper = {diff:+.3g}"
    return "reported (no paper value)"


def _fmt(value, ci=None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    text = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
    if ci is not None and len(ci) == 2 and all(_finite(v) for v in ci):
        text += f" [{ci[0]:.4g}, {ci[1]:.4g}]"
    return text


PROFILE_NOTES = {
    "smoke": "`smoke` runs are shrunk to 2 CPU cores: a pipeline check; compare them with the paper qualitatively "
             "and read each row's note.",
    "medium": "`medium` is the paper's protocol with fewer seeds and shorter horizons that still reach each effect "
              "(at most 8 CPU-hours on 2 cores); its run records are shipped in this folder and `make report "
              "PROFILE=medium` regenerates this file from them without training.",
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
                f"| {r['paper']} | {r['quantity']} | {_fmt(r['paper_value'], r.get('paper_ci'))} | "
                f"{_fmt(r['ours'], r.get('ours_ci'))} | {r['profile']} | {r['n']} | {verdict(r)} | {r.get('note', '')} |"
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
