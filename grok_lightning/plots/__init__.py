"""Figures are functions of results: records and fit results in, matplotlib Figure out."""
