"""The closing lines of ``make reproduce-all``: what came out, where it is, and what did not run and why.

Read from what the targets wrote (``<out>/<target>/rows.json``, ``summary.json`` and the figures
beside them), so the tally says what is on disk, not what was meant to run::

    == reproduce-all (smoke): 13 targets in 41 min ==
    results (rows with a number of ours / rows) and figures, under reproduction/:
      fig5          6/8   fig5/fig5_critical.png
      rllc          0/1   -
    not run, and why:
      rllc: devinterp is not installed (pip install -e '.[llc]'); `make reproduce-rllc` installs it
    report, every claim with its verdict: reproduction/REPORT.md
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["tally"]

#: how a reason is cut in the tally (REPORT.md has it whole)
REASON_CHARS = 160
#: what to do about a reason the tally recognises
REMEDIES = {"devinterp is not installed": "`make reproduce-rllc` installs it (the llc extra)"}


def _has_number(value) -> bool:
    return value is not None and not (isinstance(value, float) and not math.isfinite(value))


def _read(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


def _why_not(rows: list[dict], summary: dict) -> list[str]:
    """The distinct reasons a target gives for rows without a number of ours (``not_run``,
    ``no_estimate``, a note that starts "not run: ") and for no result at all (its summary's
    ``undefined``); rows without a number that give none are counted."""
    reasons, unexplained = [], 0
    undefined = summary.get("undefined") if isinstance(summary, dict) else None
    if undefined:
        reasons.append(str(undefined).removeprefix("undefined: "))
    for row in rows:
        if _has_number(row.get("ours")):
            continue
        note = str(row.get("note") or "")
        reason = row.get("not_run") or row.get("no_estimate") or (note[len("not run: "):] if note.startswith("not run: ") else "")
        if not reason:
            unexplained += 1
        elif _short(reason) not in map(_short, reasons):
            reasons.append(reason)
    if unexplained:
        reasons.append(f"{unexplained} row{'s' if unexplained > 1 else ''} without a number (REPORT.md says why)")
    return reasons


def tally(out: Path, profile: str, targets: list[str], not_run: dict[str, str], left_out: dict[str, str],
          report: Path, minutes: float | None = None) -> str:
    """The tally (module docstring) of ``targets`` under ``out``; ``not_run``: targets that stopped
    without records (or with some missing), ``left_out``: targets the profile does not have."""
    out = Path(out)
    took = f" in {minutes:.0f} min" if minutes is not None else ""
    lines = [f"== reproduce-all ({profile}): {len(targets)} targets{took} ==",
             f"results (rows with a number of ours / rows) and figures, under {out}/:"]
    width = max([len(t) for t in targets] + [6]) + 2
    skipped = []
    for target in targets:
        folder = out / target
        rows = _read(folder / "rows.json", [])
        rows = rows if isinstance(rows, list) else []
        figures = sorted(str(p.relative_to(out)) for p in folder.glob("*.png"))
        counted = f"{sum(_has_number(r.get('ours')) for r in rows)}/{len(rows)}"
        lines.append(f"  {target:<{width}}{counted:>7}   {', '.join(figures) or '-'}")
        reasons = ([not_run[target]] if target in not_run else []) + _why_not(rows, _read(folder / "summary.json", {}))
        for reason in reasons[:3]:
            remedy = next((f"; {fix}" for cause, fix in REMEDIES.items() if cause in reason), "")
            skipped.append(f"  {target}: {_short(reason)}{remedy}")
        if len(reasons) > 3:
            skipped.append(f"  {target}: and {len(reasons) - 3} more reasons (REPORT.md)")
    skipped += [f"  {target}: not in the {profile} profile: {_short(reason)}" for target, reason in left_out.items()]
    if skipped:
        lines += ["not run, and why:", *skipped]
    lines.append(f"report, every claim with its verdict: {report}")
    return "\n".join(lines)
