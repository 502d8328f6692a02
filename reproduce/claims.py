"""The claims table, as the figure targets import it (the engine is :mod:`reproduce.report`)."""

from reproduce.report.claims import CLAIMS, COLUMNS, KINDS, MARGIN_FROM, Claim, claim, load_claims
from reproduce.report.rows import claim_row, count_row
from reproduce.report.sources import check_sources, claim_sample, printed_agrees, resolve, source_value

__all__ = ["CLAIMS", "COLUMNS", "Claim", "KINDS", "MARGIN_FROM", "check_sources", "claim", "claim_row", "claim_sample",
           "count_row", "load_claims", "printed_agrees", "resolve", "source_value"]
