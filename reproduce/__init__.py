"""Reproduction targets: each module runs one figure (sweep -> statistics -> figure -> report rows)."""
