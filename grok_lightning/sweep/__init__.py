"""Sweeps that survive: grid expansion, a results store, local and Ray launchers.

- :mod:`.grid`      sweep file -> resolved run configs with stable ids (``load_sweep``, ``expand``)
- :mod:`.store`     one directory per sweep: ``sweep.yaml``, ``plan.json``, ``runs/<name>/``,
  ``index.json``, the sweep lock, ``status`` counts and ``collect`` (records -> one table)
- :mod:`.worker`    one run inside a worker: resume from ``last.ckpt``, failure records
- :mod:`.launchers` local worker processes and Ray tasks, progress, resume
- :mod:`.cli`       ``grok-lightning sweep run|status|collect``

See ``docs/sweeps.md``.
"""

from grok_lightning.sweep.grid import RunSpec, Sweep, expand, load_sweep, run_id_of

__all__ = ["RunSpec", "Sweep", "expand", "load_sweep", "run_id_of"]
