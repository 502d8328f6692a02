"""What a campaign costs, read from the shipped run records: CPU-seconds per epoch times epochs.

**CPU-s per epoch** of a run's model comes from the records of the same model: the median over
them of ``cpu_time_s`` / the epochs the record trained. A run that started from another run's
checkpoint (E12's B, C, P) records ``started_from.epoch`` and a ``cpu_time_s`` of the epochs after
it only (the recorder restarts its clocks for a run with a new identity); a run resumed from its
own ``last.ckpt`` carries the CPU time of its earlier segments, so its epochs count from 0. Records
that trained fewer than :data:`MIN_EPOCHS` epochs are dominated by start-up; a model with only such
records (the cost pilots: one config trained 1 and 1 + K epochs) gets the slope between its
shortest and longest record, which cancels the start-up. Records without ``cpu_time_s`` (the
lock-in runs predate it) count their ``wall_time_s`` where they ran on one thread (one thread
cannot use more CPU-s than wall-s): said in the table. Records of runs on more threads are not used.

Which records: first those in the campaign's own store whose runs match the new run on every axis
but the seed and the weight decay (same model, precision, cadence and store-specific diagnostics);
else every shipped record under ``results/`` of the same model (:func:`cost_key`: module, shape,
precision, evaluation cadence). A campaign's ``cost_like`` changes axes of the run before the
look-up, a stated assumption where no record of its model exists; once the campaign's store holds
finished runs of a run's own cell, their measured cost replaces the assumption.

**Epochs** of a new run: its horizon, or, when it stops after grokking (``grok.extra_epochs``), the
median final epoch of the store's records of the same cell (every axis but the seed); without any,
the campaign's ``epochs`` rule: ``like`` (another cell's records, e.g. a lower lambda's, which groks
later: an upper bound), ``claim`` (the paper's value of that claim plus the extra epochs) or
``horizon`` (the upper bound). A run that ended unfinished with a ``last.ckpt`` in its own folder
resumes from it, so it costs only the epochs after its record's last evaluation
(:func:`stored_progress`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from grok_lightning.config import ConfigError
from grok_lightning.records import FINAL_STATUSES, iter_records
from grok_lightning.sweep.grid import LABEL_AXIS, LABELS, RunSpec, get_dotted, max_epochs_of, resolve_key
from grok_lightning.sweep.planned import planned_records
from reproduce.targets.common import REPO

__all__ = ["MIN_EPOCHS", "CampaignCost", "Rate", "Usage", "campaign_cost", "cost_key", "final_run_ids", "load_usages",
           "rate_of", "run_epochs", "run_rate", "stored_progress"]

#: records that trained fewer epochs are dominated by start-up (imports, data, the first epoch)
MIN_EPOCHS = 50
SEED, WEIGHT_DECAY = "seed_everything", "model.init_args.weight_decay"
#: model and data fields that change what an epoch costs (compared where the new run sets them)
COST_FIELDS = {"model": ("arch", "arch_kwargs", "d_model", "n_layers", "n_heads", "d_ff", "hidden", "M", "activation",
                         "eval_every", "rho_every", "theorem6_epochs", "eval_batch_size"),
               "data": ("p", "M", "batch_size", "full_batch", "train_fraction")}


@dataclass(frozen=True)
class Usage:
    """One record's measured cost."""

    path: Path
    record: dict
    epochs: int
    cpu_s: float
    basis: str  # "cpu_time_s" or "wall_time_s"


@dataclass(frozen=True)
class Rate:
    cpu_s_per_epoch: float
    n_records: int
    how: str  # how it was read, for the table


def _usage(path: Path, record: dict) -> Usage | None:
    if record.get("status") not in FINAL_STATUSES or not isinstance(record.get("final_epoch"), (int, float)):
        return None
    threads = (record.get("environment") or {}).get("torch_threads")
    if threads not in (None, 1):
        return None
    start = (record.get("started_from") or {}).get("epoch") or 0
    epochs = int(record["final_epoch"]) - int(start)
    cpu, basis = record.get("cpu_time_s"), "cpu_time_s"
    if cpu is None and threads == 1 and record.get("wall_time_s"):
        cpu, basis = record["wall_time_s"], "wall_time_s"
    if cpu is None or epochs <= 0:
        return None
    return Usage(path=Path(path), record=record, epochs=epochs, cpu_s=float(cpu), basis=basis)


@lru_cache(maxsize=4)
def load_usages(root: str | Path = REPO / "results") -> tuple[Usage, ...]:
    """Every usable record under ``root`` (the shipped records)."""
    found = (_usage(path, record) for path, record in iter_records(Path(root)))
    return tuple(u for u in found if u is not None)


def rate_of(usages) -> Rate | None:
    """CPU-s per epoch of a set of records of one model (module docstring); ``None`` for none.

    >>> from pathlib import Path
    >>> u = lambda e, c: Usage(Path("r"), {}, e, c, "cpu_time_s")
    >>> rate_of([u(1000, 700.0), u(2000, 1600.0), u(500, 400.0)]).cpu_s_per_epoch
    0.8
    >>> round(rate_of([u(1, 13.4), u(11, 55.8)]).cpu_s_per_epoch, 2)   # a cost pilot's pair
    4.24
    """
    usages = list(usages)
    if not usages:
        return None
    wall = (" (wall_time_s of one-thread runs: no cpu_time_s recorded)"
            if all(u.basis == "wall_time_s" for u in usages) else "")
    long = [u for u in usages if u.epochs >= MIN_EPOCHS]
    if long:
        rates = sorted(u.cpu_s / u.epochs for u in long)
        span = f", {rates[0]:.2f}-{rates[-1]:.2f}" if len(rates) > 1 else ""
        return Rate(float(np.median(rates)), len(long), f"median of {len(long)} records{span}{wall}")
    short, longest = min(usages, key=lambda u: u.epochs), max(usages, key=lambda u: u.epochs)
    if longest.epochs > short.epochs:
        slope = (longest.cpu_s - short.cpu_s) / (longest.epochs - short.epochs)
        return Rate(slope, 2, f"slope of a {short.epochs}- and a {longest.epochs}-epoch record{wall}")
    return Rate(short.cpu_s / short.epochs, 1, f"one {short.epochs}-epoch record (start-up included){wall}")


# --- matching a planned run to records ------------------------------------------------------------
def _normal(value):
    """Values as records store them: ``{}`` and None are one (no extra arguments), ints are floats."""
    if value in (None, {}):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def _record_value(record: dict, dotted: str):
    """The record's value of a config key of the sweep vocabulary (``model.init_args.n_heads`` ->
    ``config.model.n_heads``)."""
    config = record.get("config") or {}
    key = resolve_key(dotted)
    simple = {SEED: "seed", "trainer.max_epochs": "max_epochs", "trainer.precision": "precision"}
    if key in simple:
        value = config.get(simple[key])
        return "32-true" if key == "trainer.precision" and value is None else value
    parts = key.split(".")
    if len(parts) == 3 and parts[0] in ("model", "data") and parts[1] == "init_args":
        return (config.get(parts[0]) or {}).get(parts[2])
    return get_dotted(config, key, None)


def _matches(record: dict, values: dict) -> bool:
    return all(_normal(_record_value(record, key)) == _normal(value) for key, value in values.items())


def cost_key(config: dict) -> dict:
    """The fields of a run's config that set what an epoch costs, as ``{dotted key: value}``:
    the module, the precision, and the shape and cadence fields the config sets."""
    key = {"trainer.precision": get_dotted(config, "trainer.precision", None) or "32-true"}
    for part, fields in COST_FIELDS.items():
        for name in fields:
            value = get_dotted(config, f"{part}.init_args.{name}", "__unset__")
            if value != "__unset__":
                key[f"{part}.init_args.{name}"] = value
    return key


def _module(record_or_config: dict, is_record: bool) -> str | None:
    if is_record:
        return (record_or_config.get("config") or {}).get("module")
    path = get_dotted(record_or_config, "model.class_path", "") or ""
    return path.rsplit(".", 1)[-1] or None


def _shown(path: Path) -> str:
    """A path as the tables show it: relative to the repository when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _store_of(path: Path) -> str:
    """The store a record belongs to: the folder above ``runs/``, else the folder above the run's."""
    parts = Path(_shown(path)).parts
    return "/".join(parts[: parts.index("runs")] if "runs" in parts else parts[:-2])


def _in(usage: Usage, store: str | Path) -> bool:
    try:
        usage.path.resolve().relative_to((REPO / store).resolve())
        return True
    except ValueError:
        return False


def _axes(run: RunSpec, drop=(SEED,)) -> dict:
    return {k: v for k, v in run.axes.items() if k != LABEL_AXIS and resolve_key(k) not in drop}


def _own_cell(run: RunSpec, store: str, usages) -> bool:
    """Whether the campaign's store holds finished records of the run's own cell (every axis but the
    seed and the weight decay)."""
    axes = _axes(run, drop=(SEED, WEIGHT_DECAY))
    return any(_in(u, store) and _matches(u.record, axes) for u in usages)


def run_rate(run: RunSpec, store: str, usages, cost_like: dict | None = None) -> tuple[Rate, str]:
    """CPU-s per epoch of a planned run and where it was read (module docstring)."""
    import copy

    from grok_lightning.sweep.grid import set_dotted

    config, axes = run.config, _axes(run, drop=(SEED, WEIGHT_DECAY))
    if cost_like and _own_cell(run, store, usages):  # the campaign's own finished runs before the assumption
        try:
            return run_rate(run, store, [u for u in usages if _in(u, store)])
        except ConfigError:  # none of the same precision: the assumption stands
            pass
    if cost_like:
        config = copy.deepcopy(config)
        for key, value in cost_like.items():
            set_dotted(config, resolve_key(key), value)
        axes = {**axes, **{resolve_key(k): v for k, v in cost_like.items()}}
    module, key = _module(config, False), cost_key(config)
    own = [u for u in usages if _in(u, store) and _matches(u.record, axes)
           and _matches(u.record, {"trainer.precision": key["trainer.precision"]})]
    alike = [u for u in usages if _module(u.record, True) == module and _matches(u.record, key)]
    # CPU time where a record has it; wall time of one-thread runs only where none does
    for basis in ("cpu_time_s", "wall_time_s"):
        if [u for u in own if u.basis == basis]:
            return rate_of([u for u in own if u.basis == basis]), _shown(store)
        if [u for u in alike if u.basis == basis]:
            chosen = [u for u in alike if u.basis == basis]
            stores = sorted({_store_of(u.path) for u in chosen})
            shown = ", ".join(stores[:3]) + (f" and {len(stores) - 3} more" if len(stores) > 3 else "")
            return rate_of(chosen), f"the same model in {shown}"
    raise ConfigError(f"run {run.name}: no shipped record of its model ({key}); give the campaign a cost_like")


def run_epochs(run: RunSpec, store: str, usages, rule: dict | None, claims) -> tuple[float, str]:
    """Epochs a planned run will train, and why (module docstring)."""
    horizon = max_epochs_of(run.config)
    extra = get_dotted(run.config, "grok.extra_epochs", None)
    if extra is None:
        return float(horizon), "its horizon"
    cell = [u for u in usages if _in(u, store) and _matches(u.record, _axes(run))]
    if cell:
        return float(np.median([u.record["final_epoch"] for u in cell])), f"median final epoch of {len(cell)} records"
    if not rule:
        raise ConfigError(f"run {run.name}: no shipped record of its cell says when it stops; give the campaign "
                          "an epochs rule (like, claim or horizon)")
    if "like" in rule:
        like = {**_axes(run), **{resolve_key(k): v for k, v in rule["like"].items()}}
        cell = [u for u in usages if _in(u, store) and _matches(u.record, like)]
        if not cell:
            raise ConfigError(f"run {run.name}: epochs like {rule['like']}: no record there")
        what = ", ".join(f"{k} {v}" for k, v in rule["like"].items())
        return float(np.median([u.record["final_epoch"] for u in cell])), f"as at {what} ({len(cell)} records)"
    if "claim" in rule:
        value = claims[rule["claim"]].value
        return float(min(horizon, value + extra)), f"{rule['claim']} + {extra}"
    return float(horizon), "its horizon (an upper bound)"


# --- a campaign ------------------------------------------------------------------------------------
@dataclass
class CampaignCost:
    runs: int  # still to train
    runs_total: int
    cpu_h: float
    lines: list[str]  # per cell: runs x epochs x CPU-s/epoch (where read)


def final_run_ids(store: str, runs) -> set[str]:
    """The ids of ``runs`` (:class:`RunSpec` or plan entries) whose own folder in ``store`` holds their
    final record (:func:`stored_progress`)."""
    return stored_progress(store, runs)[0]


def stored_progress(store: str, runs) -> tuple[set[str], dict[str, int]]:
    """``(final, resumable)`` for the planned ``runs`` in one read of ``store``'s records.

    ``final``: the ids whose own folder holds their final record, read by
    :func:`~grok_lightning.sweep.planned.planned_records`, so a backup copy of a run folder never
    counts as the run, and a record that is not its run is one error line. ``resumable``:
    ``{run_id: epochs}`` of the runs that ended unfinished (interrupted, or a record left ``running``
    by a killed sweep) with a ``checkpoints/last.ckpt`` in their own folder: a resume continues from
    it, so only the rest of the horizon is still to pay. The epochs are the record's last evaluated
    epoch; the checkpoint can lag it by up to the store's ``checkpoint_every`` (an upper bound on the
    saving of at most that many epochs per run)."""
    from grok_lightning.records import last_epoch

    root = REPO / store / "runs"
    if not root.is_dir():
        return set(), {}
    final, resumable = set(), {}
    for entry, record in planned_records(root, list(runs)):
        if record is None:
            continue
        if record.get("status") in FINAL_STATUSES:
            final.add(entry["run_id"])
        elif (root / str(entry["name"]) / "checkpoints" / "last.ckpt").is_file() and last_epoch(record):
            resumable[entry["run_id"]] = int(last_epoch(record))
    return final, resumable


def _group_cost(group, usages) -> tuple[float, str]:
    rate = rate_of([u for u in usages if _in(u, group.cost_like)])
    if rate is None:
        raise ConfigError(f"cost_like {group.cost_like}: no usable record there")
    start, why = 0.0, ""
    if group.start and "assume" in group.start:
        start, why = float(group.start["assume"]), f" from {group.start['assume']} (assumed)"
    elif group.start:
        values = [get_dotted(u.record, group.start["field"], None) for u in usages if _in(u, group.start["store"])]
        values = [v for v in values if isinstance(v, (int, float))]
        if not values:
            raise ConfigError(f"start {group.start}: no record there has the field")
        start = float(np.median(values))
        why = f" from the median {group.start['field'].rsplit('.', 1)[-1]} {start:,.0f}"
    epochs = max(group.horizon - start, 0.0)
    cpu_h = group.runs * epochs * rate.cpu_s_per_epoch / 3600
    line = (f"{group.runs} x {epochs:,.0f} epochs (to {group.horizon:,}{why}) x {rate.cpu_s_per_epoch:.2f} CPU-s/epoch "
            f"({rate.how}, {group.cost_like})")
    return cpu_h, line


def campaign_cost(campaign, usages, claims) -> CampaignCost:
    """The CPU-hours of the runs a campaign still has to train (module docstring)."""
    lines, cpu_h, total, pending_n = [], 0.0, 0, 0
    if campaign.by_sweep:
        runs = campaign.runs()
        final, resumed = stored_progress(campaign.store, runs)
        pending = [r for r in runs if r.run_id not in final]
        total, pending_n = len(runs), len(pending)
        cells: dict[str, list] = {}
        for run in pending:
            rate, where = run_rate(run, campaign.store, usages, campaign.cost_like)
            if campaign.cost_like:
                where += ", costed as " + ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in campaign.cost_like.items())
            epochs, why = run_epochs(run, campaign.store, usages, campaign.epochs, claims)
            if run.run_id in resumed:
                epochs, why = max(epochs - resumed[run.run_id], 0.0), f"{why}, resumed from epoch {resumed[run.run_id]:,}"
            cpu_h += epochs * rate.cpu_s_per_epoch / 3600
            shown = _axes(run) or {k: v for k, v in run.axes.items() if k != LABEL_AXIS}  # the seed when nothing else
            label = ", ".join(f"{LABELS.get(resolve_key(k)) or k.rsplit('.', 1)[-1]} {v}"
                              for k, v in shown.items() if v not in ({}, None))
            cells.setdefault(f"{epochs:,.0f} epochs ({why}) x {rate.cpu_s_per_epoch:.2f} CPU-s/epoch ({rate.how}, {where})",
                             []).append(label)
        for text, labels in cells.items():
            counted = "; ".join(f"{label}{f' ({labels.count(label)})' if labels.count(label) > 1 else ''}"
                                for label in dict.fromkeys(labels))
            lines.append(f"{len(labels)} x {text}: {counted}")
    for group in (*campaign.groups, *campaign.also):
        hours, line = _group_cost(group, usages)
        cpu_h, total, pending_n = cpu_h + hours, total + group.runs, pending_n + group.runs
        lines.append(line + (f": {group.why}" if group.why else ""))
    if not math.isfinite(cpu_h):
        raise ConfigError(f"campaign {campaign.name}: its cost is not finite")
    return CampaignCost(runs=pending_n, runs_total=total, cpu_h=cpu_h, lines=lines)
