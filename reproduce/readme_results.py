"""The README's results block, from the claims table and the medium report's rows.

    python -m reproduce.readme_results [--medium results/medium] [--write README.md]

Every claim of ``reference/claims.csv`` gets its verdict (``reproduce.report.claim_verdicts``, one
vocabulary for the report, the README and the figures); the block leads with the counts over all
claims, so its denominator is the two papers. Claims scored here are one table row each (the
paper's value, ours, the verdict word); claims without a row of ours are listed by what they would
need. The reasons behind each verdict are in ``results/medium/REPORT.md``. With ``--write`` the
block replaces the one between the README's ``<!-- results -->`` markers; otherwise it is printed.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from reproduce.common import REPO, cli
from reproduce.report import claim_verdicts, counts_line, format_value, read_rows, verdict_class

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _need(text: str) -> str:
    """What a 'not run here' claim needs, from its verdict.

    >>> _need("not run here (compute: LSTM 824 CPU-h measured (4.2 CPU-s/epoch))")
    'compute: LSTM 824 CPU-h measured (4.2 CPU-s/epoch)'
    >>> _need("not run here: needs E9")
    'needs E9'
    """
    head = "not run here ("
    return text[len(head):-1] if text.startswith(head) and text.endswith(")") else text.split(": ", 1)[-1]


def table(medium: Path) -> str:
    from reproduce.all import medium_left_out

    entries = claim_verdicts(read_rows(medium), medium_left_out())
    lines = [f"**{counts_line(entries)}.**", "",
             "| claim | source | claim in words | paper | ours (n) | verdict |", "|---|---|---|---|---|---|"]
    unscored = defaultdict(list)
    for e in entries:
        c, r = e["claim"], e["row"]
        word = verdict_class(e["verdict"])
        if r is None or (word == "not run here" and r.get("ours") is None):
            unscored[_need(e["verdict"])].append(c.id)
            continue
        paper = c.text + (f" {c.ci_text}" if c.ci_text else "")
        ours = f"{format_value(r['ours'], r.get('ours_ci'), r.get('ci_level'))} ({r['n']})"
        if e["verdict"].startswith("not run here (horizon)"):
            word = "not run here (horizon)"
        cells = (c.id, f"{c.paper} {c.where}", c.claim, paper, ours, word)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")  # |cos| is not a column
    if unscored:
        lines += ["", f"Not run here ({sum(map(len, unscored.values()))} claims), by what they need:", ""]
        lines += [f"- {why}: {', '.join(ids)}" for why, ids in unscored.items()]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medium", default=str(REPO / "results" / "medium"))
    parser.add_argument("--write", default=None, help="a README whose results block to replace")
    args = parser.parse_args(argv)
    text = table(Path(args.medium))
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
