"""The reproduction layer above the package: ``python -m reproduce NAME`` runs a target by name.

* :mod:`reproduce.targets`: one module per figure or study, listed in :mod:`reproduce.targets.registry`
  (sweep -> statistics -> figure -> report rows);
* :mod:`reproduce.report`: the claims table -> typed rows -> verdicts -> ``REPORT.md``, and the
  generated blocks of README.md and docs/;
* :mod:`reproduce.plan`: which runs would decide the undecided claims, per CPU-hour;
* :mod:`reproduce.manifest`: the records a report may read; :mod:`reproduce.tally`: reproduce-all's closing lines;
* :mod:`reproduce.pilots`: one-off studies, which nothing above imports.
"""
