"""The generated blocks of README.md and docs/*.md, each a function of the shipped data
(:class:`Facts`); :mod:`reproduce.report.prose` places them between their markers."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from functools import cached_property
from pathlib import Path

from reproduce.report.claims import REPO, load_claims
from reproduce.report.render import Entry, claim_verdicts, counts_line, format_value, paper_cell, read_rows
from reproduce.report.verdict import VERDICTS
from reproduce.targets.costs import costs_table, medium_left_out

MEDIUM = REPO / "results" / "medium"
MEASUREMENTS = REPO / "benchmarks" / "measurements.json"
#: the papers, in the order the README names them
PAPERS = {"2605.20441": "Weight decay regimes", "2605.08119": "Spectral lock-in"}


class Facts:
    """The data the blocks are rendered from, read once: the medium report's verdicts over every
    claim, the sweep records, the measured commands."""

    def __init__(self, medium: Path = MEDIUM, measurements: Path = MEASUREMENTS):
        self.medium, self.measurements_path = Path(medium), Path(measurements)

    @cached_property
    def entries(self) -> list[Entry]:
        return claim_verdicts(read_rows(self.medium), medium_left_out())

    @cached_property
    def measurements(self) -> dict:
        return json.loads(self.measurements_path.read_text())["measurements"]

    @cached_property
    def records(self) -> dict[str, list[dict]]:
        """``{target folder: its final run records}`` under ``results/medium``."""
        out: dict[str, list[dict]] = {}
        for path in sorted(self.medium.glob("*/**/record.json")):
            record = json.loads(path.read_text())
            if record.get("status") == "completed":
                out.setdefault(path.relative_to(self.medium).parts[0], []).append(record)
        return out


def _cell(text) -> str:
    return str(text).replace("|", "\\|")


def duration(seconds: float) -> str:
    """'12 min 27 s', '37 s', '1 h 05 min'.

    >>> duration(747), duration(37.4), duration(3900)
    ('12 min 27 s', '37 s', '1 h 05 min')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


# --- README ---------------------------------------------------------------------------------------
def per_paper_table(entries: list[Entry]) -> list[str]:
    """One row per paper: its claims and how many read each verdict (the words with any claim)."""
    words = [w for w in VERDICTS if any(e.verdict.word.value == w for e in entries)]
    lines = ["| paper | claims | " + " | ".join(words) + " |", "|---|---|" + "---|" * len(words)]
    for paper, title in PAPERS.items():
        counts = Counter(e.verdict.word.value for e in entries if e.claim.paper == paper)
        lines.append(f"| {title} ({paper}) | {sum(counts.values())} | " + " | ".join(str(counts[w]) for w in words) + " |")
    return lines


def readme_results(facts: Facts) -> str:
    """The counts over every claim, per paper, and the headline table (claims.csv ``headline``)."""
    entries = facts.entries
    lines = [f"**{counts_line(entries)}.**", "", *per_paper_table(entries), "",
             "| paper | claim | paper's value | ours (runs) | verdict |", "|---|---|---|---|---|"]
    for e in entries:
        if not e.claim.headline:
            continue
        c, r = e.claim, e.row
        ours = "-" if r is None or r.ours is None else f"{format_value(r.ours, r.ours_ci, r.ci_level)} ({r.n})"
        lines.append(f"| {c.label} | {_cell(c.claim)} | {paper_cell(c)} | {ours} | {e.verdict.label} |")
    return "\n".join(lines)


#: the commands the README times, in its order: (entry of measurements.json, command as typed)
README_COMMANDS = (("make-demo", "make demo"), ("make-test", "make test"),
                   ("make-report", "make report PROFILE=medium"), ("make-reproduce-all", "make reproduce-all"))


def _when(m: dict) -> str:
    """'2026-12-04, 7f05117' (and 'transcribed' for a row copied from a run's console output)."""
    when = ", ".join(str(m[k]) for k in ("date", "commit") if m.get(k)) or "-"
    return when + (" (transcribed)" if m.get("transcribed") else "")


def _measured(m: dict) -> str:
    parts = [("a fresh clone" if m.get("fresh_clone") else "a checkout")
             + (", install included" if m.get("install_included") else ", venv already installed")]
    if "passed" in m:
        parts.append(f"{m['passed']} passed, {m.get('skipped', 0)} skipped")
    if m.get("tree_clean_after"):
        parts.append("tree clean after")
    return f"{duration(m['wall_s'])} wall ({'; '.join(parts)})"


def readme_commands(facts: Facts) -> str:
    """How long the Quick start's commands took on 2 cores, from benchmarks/measurements.json."""
    lines = ["| command | time on 2 CPU cores | measured |", "|---|---|---|"]
    for key, command in README_COMMANDS:
        m = facts.measurements[key]
        lines.append(f"| `{command}` | {_measured(m)} | {_when(m)}{', ' + m['note'] if m.get('note') else ''} |")
    return "\n".join(lines)


# --- docs/decisions.md ----------------------------------------------------------------------------
def claim_counts(facts: Facts) -> str:
    """'144 of 2605.20441, 79 of 2605.08119' (inline)."""
    counts = Counter(c.paper for c in load_claims().values())
    return ", ".join(f"{counts[p]} of {p}" for p in PAPERS)


def headline_claims(facts: Facts) -> str:
    """The ids of the headline claims (inline)."""
    return ", ".join(f"`{c.id}`" for c in load_claims().values() if c.headline)


# --- docs/medium.md -------------------------------------------------------------------------------
def medium_cost(facts: Facts) -> str:
    """Per medium target: its shipped runs and their CPU time, from the records (``cpu_time_s``,
    user + system of the run's process; ``wall_time_s`` where a record predates it, one thread)."""
    lines = ["| target | runs | CPU-hours (records) | runs timed by wall clock | median CPU-s per run |",
             "|---|---|---|---|---|"]
    total = 0.0
    for target, records in facts.records.items():
        seconds = [r["cpu_time_s"] if r.get("cpu_time_s") is not None else r.get("wall_time_s") or 0.0 for r in records]
        wall = sum(r.get("cpu_time_s") is None for r in records)
        total += sum(seconds)
        lines.append(f"| {target} | {len(records)} | {sum(seconds) / 3600:.1f} | {wall or '-'} | "
                     f"{statistics.median(seconds):,.0f} |")
    lines.append(f"| all | {sum(map(len, facts.records.values()))} | {total / 3600:.1f} | | |")
    return "\n".join(lines)


def gpu_costs(facts: Facts) -> str:
    return costs_table()


def left_out(facts: Facts) -> str:
    lines = ["| target | why |", "|---|---|"]
    return "\n".join(lines + [f"| {name} | {_cell(why)} |" for name, why in medium_left_out().items()])


def per_paper(facts: Facts) -> str:
    return "\n".join(per_paper_table(facts.entries))


def smoke_time(facts: Facts) -> str:
    """The smoke ``make reproduce-all``'s wall and CPU seconds per target (benchmarks/measurements.json)."""
    m = facts.measurements["make-reproduce-all"]
    if m.get("per_target"):
        lines = ["| target | wall s | CPU s |", "|---|---|---|"]
        lines += [f"| {name} | {t['wall_s']:,} | {t['cpu_s']:,} |" for name, t in m["per_target"].items()]
        wall, cpu = (sum(t[key] for t in m["per_target"].values()) for key in ("wall_s", "cpu_s"))
        lines.append(f"| targets in all | {wall:,} ({duration(wall)}) | {cpu:,} ({duration(cpu)}) |")
    else:  # a measurement taken before benchmarks/measure.py kept reproduce all's per-target lines
        lines = ["Per-target times were not kept by this measurement (benchmarks/measure.py keeps them now)."]
    lines += ["", f"The whole command: {duration(m['wall_s'])} wall, install included; {duration(m['cpu_s'])} of user + "
              f"system CPU time, peak resident memory {m['peak_rss_gb']:.1f} GB; exit {m['exit']} "
              f"({m['date']}, {m['commit']}; `{m['command']}`)."]
    return "\n".join(lines)


# --- docs/statistics.md --------------------------------------------------------------------------
def table4(facts: Facts) -> str:
    """Table 4 rebuilt by ``adamw_bound_table`` at the paper's calibration (its kappa, lr 1e-3,
    T_max 20,000), against the paper's lambda_c and interval (reference/a5_wdc_fit.json); the
    paper's own cell where the claims table has it."""
    from grok_lightning.stats.relaxation import adamw_bound_table

    fit = json.loads((REPO / "reference" / "a5_wdc_fit.json").read_text())["wd_c_fit"]
    claims = load_claims()
    paper = {0.99: (claims["fig11.bound_099"].text, claims["fig11.ratio_099"].text)}
    rows = adamw_bound_table(claims["fig11.kappa_arithmetic"].value, 1e-3, 20_000,
                             empirical_wd_c=fit["wd_c"], ci=tuple(fit["wd_c_ci"]))
    lines = ["| p_relax | bound (ours) | ratio to the paper's lambda_c | inside its 95% interval | paper: bound / ratio |",
             "|---|---|---|---|---|"]
    for r in rows:
        cell = " / ".join(paper[r["p_relax"]]) if r["p_relax"] in paper else "-"
        lines.append(f"| {r['p_relax']:.2f} | {r['wd_c_bound']:.6f} | {r['ratio_to_empirical']:.3f} | "
                     f"{'yes' if r['in_ci'] else 'no'} | {cell} |")
    return "\n".join(lines)


# --- docs/performance.md --------------------------------------------------------------------------
def tests_time(facts: Facts) -> str:
    """The test suite's measured time (benchmarks/measurements.json)."""
    lines = ["| what | time | CPU | peak memory | tests | measured | command |", "|---|---|---|---|---|---|---|"]
    for key in ("make-test", "make-test-fast"):
        m = facts.measurements.get(key)
        if m is None:
            continue
        tally = f"{m['passed']} passed, {m.get('skipped', 0)} skipped" if "passed" in m else "-"
        cpu = f"{duration(m['cpu_s'])}" if m.get("cpu_s") else "-"
        rss = f"{m['peak_rss_gb']:.2f} GB" if m.get("peak_rss_gb") else "-"
        lines.append(f"| {_cell(m['what'])} | {duration(m['wall_s'])} wall" +
                     (f" (pytest {duration(m['pytest_s'])})" if m.get("pytest_s") else "") +
                     f" | {cpu} | {rss} | {tally} | {_when(m)}, load {m.get('load_at_start', '-')} | "
                     f"`{m['command']}` |")
    return "\n".join(lines)


def measurements_section(section: str):
    """The renderer of one section of benchmarks/measurements.json: each measurement with its result,
    the load it ran under, when, and its command."""
    def render(facts: Facts) -> str:
        lines = ["| what | result | load | measured | command |", "|---|---|---|---|---|"]
        for m in facts.measurements.values():
            if m.get("section") != section:
                continue
            lines.append(f"| {_cell(m['what'])} | {_cell(m['result'])} | {_cell(m.get('load', '-'))} | {_when(m)} | "
                         f"`{m['command']}` |")
        return "\n".join(lines)

    render.__name__ = f"measurements_{section}"
    return render


__all__ = ["Facts", "PAPERS", "claim_counts", "duration", "gpu_costs", "headline_claims", "left_out", "medium_cost",
           "measurements_section", "per_paper", "per_paper_table", "readme_commands", "readme_results", "smoke_time",
           "table4", "tests_time"]
