"""Pilot studies: scripts that score pilot runs and calibrations (not figure targets)."""
