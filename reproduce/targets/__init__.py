"""The reproduction targets: one module per figure or study.

Each target module has ``main(argv)`` and writes ``<out>/<name>/``: its figures, ``summary.json``
and ``rows.json`` (the report's rows). ``make reproduce-all`` (:mod:`~reproduce.targets.all`)
runs them all, then the report. The other modules here serve them:
:mod:`~reproduce.targets.common` (the command line, reading sweeps, captions),
:mod:`~reproduce.targets.costs` (measured CPU costs of what is not run), and helpers named after
the target they serve: ``lockin_*`` (lockin), ``e12_*`` (fig8), ``a7`` (fig4), ``predict_medium``
(predict), ``weight_analysis`` (the checkpoints of long_horizon, read by rllc and fig11 too).
"""
