"""The verdict rule, as earlier callers import it (the rule is :mod:`reproduce.report.verdict`)."""

from reproduce.report.verdict import ALPHA, MIN_COVERAGE, VERDICTS, Verdict, Word, judge, verdict, verdict_class

__all__ = ["ALPHA", "MIN_COVERAGE", "VERDICTS", "Verdict", "Word", "judge", "verdict", "verdict_class"]
