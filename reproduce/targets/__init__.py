"""The reproduction targets: one module per figure or study, listed in :mod:`reproduce.targets.registry`.

Each target module has ``main(argv)`` and writes ``<out>/<name>/``: its figures, ``summary.json``
and ``rows.json`` (the report's rows). ``python -m reproduce <name>`` and ``make reproduce-<name>``
run it; ``make reproduce-all`` (:mod:`~reproduce.targets.all`) runs them all, then the report.
The other modules here serve them: :mod:`~reproduce.targets.common` (the command line, reading
sweeps, captions), :mod:`~reproduce.targets.costs` (measured CPU costs of what is not run, and why
the medium pass leaves a target out), :mod:`~reproduce.targets.make` (the Makefile's rules), and
helpers named after the target they serve: ``lockin_*`` (lockin), ``e12_*`` (fig8), ``a7`` (fig4),
``predict_medium`` (predict), ``weight_analysis`` (the checkpoints of long_horizon, read by rllc
and fig11 too).
"""
