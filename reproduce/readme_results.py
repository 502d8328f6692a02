"""The README's headline table, from the report rows of the medium (else smoke) reproduction.

    python -m reproduce.readme_results [--medium results/medium] [--smoke reproduction] [--write README.md]

One line per headline claim of the two papers (:data:`HEADLINES`): the paper's number, ours, and
the verdict the report computed for that row (``reproduce.report.verdict``: one vocabulary for
the report, the README and the figures). The full table with every row is the medium report,
``results/medium/REPORT.md``. With ``--write`` the table replaces the block between the
README's ``<!-- results -->`` markers; otherwise it is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reproduce.common import REPO, cli
from reproduce.report import format_value, verdict

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
#: (claim in the papers' words, report target, the start of the report row's quantity)
HEADLINES = (
    ("Grokking at lambda = 1: t_grok 120-130 epochs", "fig2", "t_grok at lambda = 1"),
    ("Phase 1: s_bar rises from memorisation into grokking", "fig2", "Phase-1 rise: peak minus"),
    ("Phase 2 (epochs 1,000-3,000): sigma_H rises, s_bar dips. RMS distance of our median sigma_H curve "
     "to the paper's, from epoch 500 (goal <= 0.015)", "fig2", "RMS distance of the median sigma_H curve to the paper's median, epochs 500"),
    ("The whole Fig. 2 s_bar curve: RMS distance to the paper's median (goal <= 0.015)", "fig2",
     "RMS distance of the median s_bar curve to the paper's median, epochs 1-"),
    ("Phase 2 after the search for unstated lasting choices: sigma_H distance of the best arm (goal <= 0.015)",
     "fig2", "Fig. 2 trajectory search: RMS distance of the sigma_H curve"),
    ("E12's control group peaks at sigma_H 0.28 before grokking (paper's model, lambda 0.05)", "fig8",
     "E12 pilot, control A on the canonical model at lambda 0.05"),
    ("E12: re-initialising 2 heads at peak differentiation lowers peak sigma_H (d = -0.88)", "fig8",
     "Cohen's d, peak sigma_H on (E,"),
    ("Fig. 4: the real task's peak sigma_H is above the random-label null (paper's model, 3,000 epochs)", "fig4",
     "real vs null: permutation p"),
    ("Fig. 4: the same, as an effect size: Cohen's d of real (d/H = 16) against null peaks", "fig4",
     "real vs null: Cohen's d"),
    ("Fig. 4: peak sigma_H at d/H = 16 (8 heads): bin mean 0.113", "fig4", "peak sigma_H at d/H = 16 "),
    ("Fig. 4: the same, pooling layers by their maximum (the paper does not say how it pools)", "fig4",
     "peak sigma_H at d/H = 16, max_layer"),
    ("Fig. 4: peak sigma_H at d/H = 32 (4 heads): bin mean 0.099", "fig4", "peak sigma_H at d/H = 32 "),
    ("Fig. 5: critical weight decay lambda_c (paper's model, 5,000 epochs)", "fig5", "lambda_c, least-squares logistic"),
    ("Paper's model at lambda = 0.1 groks at epochs 860-1,130 (the horizon check)", "fig5",
     "median grok epoch at lambda = 0.1"),
    ("Grok fraction at lambda = 0.03 within 5,000 epochs: 10/10", "fig5", "grok fraction at lambda = 0.03"),
    ("Grok fraction at lambda = 0.02 within 5,000 epochs: 8/10", "fig5", "grok fraction at lambda = 0.02"),
    ("Grok fraction at lambda = 0.01 within 5,000 epochs: 2/30", "fig5", "grok fraction at lambda = 0.01"),
    ("Lock-in: the slope detector fires in grokking x^2 runs (epoch 174), never in controls", "lockin",
     "median slope fire epoch, grok (W=20)"),
    ("Lock-in: a ReLU network groks without a fire", "lockin", "ReLU: slope fire rate, grok (W=20)"),
)


def find_row(root: Path, target: str, start: str) -> dict | None:
    """The first report row of ``target`` whose quantity starts with ``start`` (None if none)."""
    path = root / target / "rows.json"
    if not path.is_file():
        return None
    return next((r for r in json.loads(path.read_text()) if r["quantity"].startswith(start)), None)


def table(medium: Path, smoke: Path) -> str:
    lines = ["| claim | paper | ours | verdict |", "|---|---|---|---|"]
    for claim, target, start in HEADLINES:
        row, where = find_row(medium, target, start), "medium"
        if row is None:
            row, where = find_row(smoke, target, start), "smoke"
        if row is None:
            lines.append(f"| {claim} | - | - | not run here |")
            continue
        ours = f"{format_value(row['ours'], row.get('ours_ci'))} (n = {row['n']}, {where})"
        judged = verdict(row)
        lines.append(f"| {claim} | {format_value(row['paper_value'], row.get('paper_ci'))} | {ours} | {judged} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medium", default=str(REPO / "results" / "medium"))
    parser.add_argument("--smoke", default=str(REPO / "reproduction"))
    parser.add_argument("--write", default=None, help="a README whose results block to replace")
    args = parser.parse_args(argv)
    text = table(Path(args.medium), Path(args.smoke))
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
