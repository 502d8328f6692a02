"""The README's results table, from the report rows of the medium and smoke reproductions.

    python -m reproduce.readme_results [--medium results/medium] [--smoke reproduction] [--write README.md]

One line per figure and quantity that has a paper value: what the paper found, what we find in
``medium`` and in ``smoke`` (each with its CI where there is one), and the computed verdict of
the medium row (else the smoke row). With ``--write`` the table replaces the block between the
README's ``<!-- results -->`` markers; otherwise it is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reproduce.common import REPO, cli
from reproduce.report import _fmt, verdict

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
#: at most this many rows per target (the first ones each target writes are its headline numbers)
PER_TARGET = 4


def rows_of(root: Path) -> dict[tuple[str, str], dict]:
    """``{(paper, quantity): row}`` of every target's rows.json under ``root``."""
    found: dict[tuple[str, str], dict] = {}
    if not root.is_dir():
        return found
    for rows_file in sorted(root.glob("*/rows.json")):
        kept = 0
        for r in json.loads(rows_file.read_text()):
            if r.get("paper_value") is None or kept >= PER_TARGET:
                continue
            found[(r["paper"], r["quantity"])] = r
            kept += 1
    return found


def table(medium: dict, smoke: dict) -> str:
    lines = ["| figure | quantity | paper | medium | smoke | verdict |", "|---|---|---|---|---|---|"]
    for key in list(medium) + [k for k in smoke if k not in medium]:
        m, s = medium.get(key), smoke.get(key)
        first = m or s
        shown = lambda r: "-" if r is None else f"{_fmt(r['ours'], r.get('ours_ci'))} (n = {r['n']})"
        judged = f"{verdict(m)} (medium)" if m else f"{verdict(s)} (smoke)"
        lines.append(f"| {key[0]} | {key[1]} | {_fmt(first['paper_value'], first.get('paper_ci'))} | {shown(m)} | "
                     f"{shown(s)} | {judged} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medium", default=str(REPO / "results" / "medium"))
    parser.add_argument("--smoke", default=str(REPO / "reproduction"))
    parser.add_argument("--write", default=None, help="a README whose results block to replace")
    args = parser.parse_args(argv)
    text = table(rows_of(Path(args.medium)), rows_of(Path(args.smoke)))
    if not args.write:
        print(text)
        return
    path = Path(args.write)
    readme = path.read_text()
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block to fill")
    head, rest = readme.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    cli(main)
