"""The records an analysis counts: those of the runs a sweep plans, each read once, from its own
folder, and each the run its id names.

A results folder is data from anywhere: a backup copy of a run folder (``runs/<name>.bak``), a
record moved into another run's folder, or a record whose configuration was edited would
otherwise count as runs that were never trained. So a planned run's record is read from
``runs/<name>/record.json`` only (never found by a recursive search), and it must be that run:
its ``run_id`` is the planned one, the planned config hashes to that id
(:func:`~grok_lightning.sweep.grid.run_id_of`), and every hyperparameter the record states
equals the planned config's. A record that is not its run is one ``ConfigError`` line naming the
file and the field.
"""

from __future__ import annotations

from pathlib import Path

from grok_lightning.config import ConfigError
from grok_lightning.records import RECORD_NAME, load_record
from grok_lightning.sweep.grid import RunSpec, canonical_json, get_dotted, run_id_of

__all__ = ["identity_problem", "planned_records"]

#: record ``config`` field -> the dotted key of the run config it comes from
_TOP_LEVEL = {"seed": "seed_everything", "max_epochs": "trainer.max_epochs"}


def identity_problem(record: dict, run_id: str, config: dict | None) -> str | None:
    """Why ``record`` is not the run ``run_id`` with the resolved ``config`` (``None`` when it is).
    Without a planned ``config`` (a registered run whose plan is no longer at hand) only the run id
    is checked.

    >>> config = {"model": {"class_path": "m.M", "init_args": {"lr": 0.001, "weight_decay": 1.0}},
    ...           "seed_everything": 7, "trainer": {"max_epochs": 10}}
    >>> run_id = run_id_of(config)
    >>> record = {"run_id": run_id, "config": {"seed": 7, "max_epochs": 10, "model": {"lr": 0.001, "weight_decay": 1.0}}}
    >>> identity_problem(record, run_id, config) is None
    True
    >>> identity_problem({**record, "config": {**record["config"], "seed": 8}}, run_id, config)
    'config.seed=8: the planned run has 7'
    >>> identity_problem(record, run_id, None) is None     # no planned config known: the run id alone
    True
    """
    if config is None:
        return None if record.get("run_id") == run_id else f"run_id={record.get('run_id')!r}: the planned run here is {run_id}"
    if run_id_of(config) != run_id:
        return f"the planned config hashes to {run_id_of(config)}, not to its run id {run_id}"
    if record.get("run_id") != run_id:
        return f"run_id={record.get('run_id')!r}: the planned run here is {run_id}"
    stated = record.get("config") or {}
    for key, dotted in _TOP_LEVEL.items():
        planned = get_dotted(config, dotted, None)
        if planned is not None and stated.get(key) != planned:
            return f"config.{key}={stated.get(key)!r}: the planned run has {planned!r}"
    for section in ("model", "data"):
        recorded = stated.get(section) if isinstance(stated.get(section), dict) else {}
        class_path = get_dotted(config, f"{section}.class_path", None)
        if class_path is not None and recorded.get("class_path", class_path) != class_path:
            return f"config.{section}.class_path={recorded.get('class_path')!r}: the planned run has {class_path!r}"
        for key, value in (get_dotted(config, f"{section}.init_args", None) or {}).items():
            # a value the run derives at setup (model.modulus from the data) is planned as null
            if value is not None and key in recorded and canonical_json(recorded[key]) != canonical_json(value):
                return f"config.{section}.{key}={recorded[key]!r}: the planned run has {value!r}"
    return None


def planned_records(runs_dir: str | Path, specs: list[RunSpec] | list[dict]) -> list[tuple[dict, dict | None]]:
    """``(entry, record)`` for every planned run (a :class:`RunSpec` or a ``plan.json`` entry with
    ``run_id``, ``name`` and ``config``), in plan order; ``record`` is ``None`` where
    ``runs_dir/<name>/record.json`` does not exist. An entry whose ``config`` is ``None`` is checked
    by its run id alone (:func:`identity_problem`). A record that is unreadable, breaks the record
    rules, or is not the planned run is one ``ConfigError`` line naming the file."""
    runs_dir = Path(runs_dir)
    found = []
    for spec in specs:
        entry = spec.to_dict() if isinstance(spec, RunSpec) else spec
        name = str(entry["name"])
        if not name or Path(name).name != name or name in (".", ".."):
            raise ConfigError(f"run name {name!r}: must be one plain folder name inside {runs_dir}")
        path = runs_dir / name / RECORD_NAME
        if not path.exists() and not path.is_symlink():
            found.append((entry, None))
            continue
        record = load_record(path)
        problem = identity_problem(record, entry["run_id"], entry.get("config"))
        if problem is not None:
            raise ConfigError(f"{path}: not the run its folder plans ({problem})")
        found.append((entry, record))
    return found
