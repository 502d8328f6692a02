"""Sweeps that survive: grid expansion, a results store, local and Ray launchers.

- :mod:`.grid`      sweep file -> resolved run configs with stable ids (``load_sweep``, ``expand``)
- :mod:`.keys`      dotted keys, aliases, and the GrokCLI-parser checks that every key exists and every run parses
- :mod:`.store`     one directory per sweep: ``sweep.yaml``, ``plan.json``, ``runs/<name>/``,
  ``index.json``, the sweep lock (filelock), ``status`` counts and ``collect`` (records -> one table)
- :mod:`.rundir`    one run's directory: owner, attempts, run.log, the record of a failed run, summaries
- :mod:`.worker`    one run inside a worker: resume from ``last.ckpt`` (loaded as data only), failure records
- :mod:`.launchers` local worker processes and Ray tasks, resume
- :mod:`.ensembles` packing compatible runs into vectorised ensemble tasks
- :mod:`.progress`  progress in epochs with an ETA (tqdm)
- :mod:`.cli`       ``grok-lightning sweep run|status|collect``

See ``docs/sweeps.md``.
"""

from grok_lightning.sweep.grid import RunSpec, Sweep, expand, load_sweep, run_id_of

__all__ = ["RunSpec", "Sweep", "expand", "load_sweep", "run_id_of"]
