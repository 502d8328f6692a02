"""The claims -> rows -> verdict -> report engine.

* :mod:`~reproduce.report.claims`: ``reference/claims.csv`` loaded and checked (:class:`Claim`);
  :mod:`~reproduce.report.sources` checks each value against the file it cites.
* :mod:`~reproduce.report.rows`: the typed :class:`Row` a target reports, and the builders the
  targets call (:func:`row`, :func:`claim_row`, :func:`count_row`).
* :mod:`~reproduce.report.verdict`: the rule (:func:`judge` -> :class:`Verdict`, one vocabulary).
* :mod:`~reproduce.report.oc`: the rule's simulated operating characteristics, and how many runs
  would decide a claim (:func:`~reproduce.report.oc.decide_probability`).
* :mod:`~reproduce.report.render`: REPORT.md.
* :mod:`~reproduce.report.prose`: the generated blocks of README.md and docs/ (rendered by
  :mod:`~reproduce.report.blocks`), and :mod:`~reproduce.report.numbers`, the rule that finds a
  number outside them that looks like a result.
"""

from reproduce.report.claims import Claim, claim, load_claims
from reproduce.report.oc import decide_probability
from reproduce.report.render import (
    claim_verdicts,
    counts_line,
    format_value,
    read_rows,
    verdict_counts,
    write_report,
)
from reproduce.report.rows import Row, claim_row, count_row, join_notes, paper_value, row
from reproduce.report.verdict import VERDICTS, Verdict, Word, judge, verdict, verdict_class

__all__ = ["VERDICTS", "Claim", "Row", "Verdict", "Word", "claim", "claim_row", "claim_verdicts", "count_row",
           "counts_line", "decide_probability", "format_value", "join_notes", "judge", "load_claims", "paper_value", "read_rows",
           "row", "verdict", "verdict_class", "verdict_counts", "write_report"]
