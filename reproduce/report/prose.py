"""Prose generated from data: every number README.md and docs/*.md cite from a record, a fit, the
claims table or a measurement is written here, between markers, never typed.

    python -m reproduce.report.prose            # rewrite every block from the data (make report)
    python -m reproduce.report.prose --check    # name each stale block; exit 1 if any
    python -m reproduce.report.prose --lint     # name each number outside the blocks that looks like a result

A generated block is ``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->`` in the file :data:`BLOCKS`
names for it (the markers on lines of their own, or inline within a sentence for a one-line block).
Each block is rendered by a function of :mod:`reproduce.report.blocks` from the shipped data: the
medium report's rows and the claims table (``results/medium``, ``reference/claims.csv``), the
sweep records, the measured costs (``results/pilots/costs/costs.json``) and the measured commands
(``benchmarks/measurements.json``, written by ``benchmarks/measure.py``). A few blocks are written
by a slower command of their own (a simulation, the run planner): they are listed with it
(:data:`OWN_COMMAND`), and the number rule skips them like the others.

Text outside the blocks explains and links; :mod:`reproduce.report.numbers` is the rule that
finds a number there that looks like a result (tests/test_prose.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from reproduce.report import blocks, e12_blocks, pilot_blocks, reading_blocks
from reproduce.report.claims import REPO
from reproduce.report.numbers import scan, without_code

__all__ = ["BLOCKS", "OWN_COMMAND", "Block", "expected", "found_markers", "stale", "write_all"]

MARKER = re.compile(r"<!-- ([\w.-]+):begin -->(.*?)<!-- \1:end -->", re.S)


@dataclass(frozen=True)
class Block:
    """One generated block: its marker name, the file it lives in (relative to the repository)
    and the function that renders it from :class:`blocks.Facts`."""

    name: str
    path: str
    render: Callable[[blocks.Facts], str]


BLOCKS = (
    Block("results", "README.md", blocks.readme_results),
    Block("commands", "README.md", blocks.readme_commands),
    Block("claim-counts", "docs/decisions.md", blocks.claim_counts),
    Block("headline-claims", "docs/decisions.md", blocks.headline_claims),
    Block("update-sizes", "docs/decisions.md", pilot_blocks.update_sizes),
    Block("pr-norm-candidates", "docs/decisions.md", pilot_blocks.pr_norm_candidates),
    Block("medium-cost", "docs/medium.md", blocks.medium_cost),
    Block("gpu-costs", "docs/medium.md", blocks.gpu_costs),
    Block("left-out", "docs/medium.md", blocks.left_out),
    Block("per-paper", "docs/medium.md", blocks.per_paper),
    Block("smoke-time", "docs/medium.md", blocks.smoke_time),
    Block("table4", "docs/statistics.md", blocks.table4),
    Block("reading-bounds", "docs/sigma_h_readings.md", reading_blocks.reading_bounds),
    Block("cohort-evidence", "docs/sigma_h_readings.md", reading_blocks.cohort_evidence),
    Block("input-pilot", "docs/sigma_h_readings.md", reading_blocks.input_pilot),
    Block("installs", "docs/predict_and_llc.md", blocks.measurements_section("installs")),
    Block("fig2-sawtooth", "docs/fig2_search.md", pilot_blocks.fig2_search_table("sawtooth")),
    Block("fig2-arms", "docs/fig2_search.md", pilot_blocks.fig2_search_table("arms")),
    Block("fig2-low-lambda", "docs/fig2_search.md", pilot_blocks.fig2_search_table("low_lambda")),
    Block("e12-controls", "docs/e12.md", e12_blocks.e12_controls),
    Block("e12-pairs", "docs/e12.md", e12_blocks.e12_pairs),
    Block("e12-contrasts", "docs/e12.md", e12_blocks.e12_contrasts),
    Block("e12-bg", "docs/e12.md", e12_blocks.e12_bg),
    Block("tests-time", "docs/performance.md", blocks.tests_time),
    Block("perf-training", "docs/performance.md", blocks.measurements_section("cpu-training")),
    Block("perf-epoch-cost", "docs/performance.md", pilot_blocks.benchmark_output("epoch_cost.md")),
    Block("perf-same-numbers", "docs/performance.md", pilot_blocks.benchmark_output("same_numbers.txt", fenced=True)),
    Block("perf-sweeps", "docs/performance.md", blocks.measurements_section("cpu-sweeps")),
    Block("perf-lockin", "docs/performance.md", blocks.measurements_section("cpu-lockin")),
    Block("gpu-check", "docs/performance.md", pilot_blocks.gpu_check),
)

#: blocks written by a command of their own (slow, or another tool's), not by ``make report``:
#: ``{(path, name): command}``
OWN_COMMAND = {
    ("docs/statistics.md", "oc"): "nice python -m reproduce.report.oc_table --reps 400 --reps-all 150 --write docs/statistics.md",
    ("docs/statistics.md", "coverage"): "nice python -m reproduce.report.coverage --write docs/statistics.md",
    ("docs/medium.md", "plan"): "make plan PROFILE=medium",
}


def _framed(name: str, text: str) -> str:
    """The block as the file holds it: one line inline, several on lines of their own."""
    body = text if "\n" not in text else f"\n{text}\n"
    return f"<!-- {name}:begin -->{body}<!-- {name}:end -->"


def found_markers(root: Path = REPO) -> set[tuple[str, str]]:
    """Every ``(path, name)`` with a generated block in README.md and docs/*.md."""
    out = set()
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for m in MARKER.finditer(without_code(path.read_text())):
            out.add((str(path.relative_to(root)), m[1]))
    return out


def expected(facts: blocks.Facts | None = None) -> dict[tuple[str, str], str]:
    """``{(path, name): block as it should read}``, every block rendered in memory."""
    facts = facts or blocks.Facts()
    return {(b.path, b.name): _framed(b.name, b.render(facts)) for b in BLOCKS}


def _current(root: Path, path: str, name: str) -> str | None:
    m = re.search(rf"<!-- {re.escape(name)}:begin -->.*?<!-- {re.escape(name)}:end -->", (root / path).read_text(), re.S)
    return m.group() if m else None


def stale(root: Path = REPO, facts: blocks.Facts | None = None) -> list[str]:
    """'path: block NAME is stale' (or missing) for each block whose file differs from its rendering."""
    problems = []
    for (path, name), text in expected(facts).items():
        current = _current(root, path, name)
        if current is None:
            problems.append(f"{path}: no block {name} (<!-- {name}:begin --> ... <!-- {name}:end -->)")
        elif current != text:
            problems.append(f"{path}: block {name} is stale: run make report PROFILE=medium")
    return problems


def replace_block(file: Path, name: str, text: str) -> bool:
    """Put ``text`` between the markers of block ``name`` of ``file``; whether the file changed.
    The one writer of generated blocks (the simulation tables of docs/statistics.md use it too)."""
    file = Path(file)
    current = _current(file.parent, file.name, name)
    if current is None:
        raise SystemExit(f"{file}: no block {name} to fill (<!-- {name}:begin --> ... <!-- {name}:end -->)")
    framed = _framed(name, text)
    if current == framed:
        return False
    file.write_text(file.read_text().replace(current, framed, 1))
    return True


def print_or_write(text: str, path: str | None, name: str) -> None:
    """A simulation table's command line: print ``text``, or put it in block ``name`` of ``path``."""
    if path:
        replace_block(Path(path), name, text)
    else:
        print(text)


def write_all(root: Path = REPO, facts: blocks.Facts | None = None) -> list[str]:
    """Rewrite every block in place; the paths changed."""
    facts = facts or blocks.Facts()
    return [f"{b.path} ({b.name})" for b in BLOCKS if replace_block(root / b.path, b.name, b.render(facts))]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="name each stale block; exit 1 if any")
    mode.add_argument("--lint", action="store_true", help="name each number outside the blocks that looks like a result")
    args = parser.parse_args(argv)
    if args.lint:
        hits = scan()
        for path, found in hits.items():
            for hit in found:
                print(f"{path}: {hit}")
        sys.exit(1 if hits else 0)
    if args.check:
        problems = stale()
        print("\n".join(problems) or "every generated block is up to date")
        sys.exit(1 if problems else 0)
    changed = write_all()
    print("generated blocks rewritten: " + (", ".join(changed) if changed else "none changed"))


if __name__ == "__main__":
    main()
