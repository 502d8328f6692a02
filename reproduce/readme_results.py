"""The README's results block, from the claims table and the medium report's rows.

    python -m reproduce.readme_results [--medium results/medium] [--write README.md]

The block (:func:`reproduce.report.render.readme_block`) leads with the verdict counts over every
claim of ``reference/claims.csv``; the reasons are in ``results/medium/REPORT.md``. With
``--write`` it replaces the block between the README's ``<!-- results:begin/end -->`` markers;
otherwise it is printed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reproduce.all import medium_left_out
from reproduce.common import REPO, cli
from reproduce.report.render import BEGIN, END, readme_block, write_readme

__all__ = ["BEGIN", "END", "main", "table"]


def table(medium: Path) -> str:
    return readme_block(Path(medium), medium_left_out())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medium", default=str(REPO / "results" / "medium"))
    parser.add_argument("--write", default=None, help="a README whose results block to replace")
    args = parser.parse_args(argv)
    text = table(Path(args.medium))
    if args.write:
        write_readme(Path(args.write), text)
    else:
        print(text)


if __name__ == "__main__":
    cli(main)
