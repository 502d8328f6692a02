"""The results directory of one sweep.

Layout::

    DIR/
      sweep.yaml          the resolved sweep (profile applied, base config inlined)
      plan.json           every run: run_id, name, axis values, resolved config
      index.json          status per run, rebuilt from the records at any time
      .sweep.lock         an OS file lock, held while a sweep runs here (released by the kernel
                          when that process ends, however it ends)
      .sweep.lock.json    who holds it: pid, host, start time, command line
      runs/<name>/        one directory per run (TensorBoard version dir of logger "runs"):
        record.json       the one record of the run (atomic writes)
        events.out.tfevents.*, config.yaml, hparams.yaml
        checkpoints/last.ckpt   when the horizon reaches checkpoint_min_epochs
        attempts.jsonl    one line per start of this run (pid, host, resumed from)
        run.log           the run's stdout/stderr

``runs/<name>`` is also what TensorBoard shows: ``tensorboard --logdir DIR/runs``.
Records are the source of truth; ``index.json`` is a cache for people and tools.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock, Timeout

from grok_lightning.config import ConfigError, open_regular, read_yaml
from grok_lightning.records import RECORD_NAME, iter_records, last_epoch, load_record, write_json_atomic
from grok_lightning.sweep.grid import (
    PLACEMENT_KEYS,
    RunSpec,
    Sweep,
    canonical_json,
    check_sweep,
    checked_axes,
    get_dotted,
    identity_of,
    max_epochs_of,
)
from grok_lightning.sweep.nofollow import link_error, open_no_follow
from grok_lightning.sweep.rundir import run_dir_of

__all__ = ["COUNT_ORDER", "SweepLock", "SweepLockedError", "SweepStore", "collect", "write_table"]

SWEEP_FILE = "sweep.yaml"
PLAN_FILE = "plan.json"
INDEX_FILE = "index.json"
LOCK_FILE = ".sweep.lock"
LOCK_INFO_FILE = ".sweep.lock.json"
RUNS_DIR = "runs"
ATTEMPTS_FILE = "attempts.jsonl"
#: order of the status line; "done" is the record status "completed"
COUNT_ORDER = ("completed", "running", "failed", "diverged", "interrupted", "excluded", "unreadable", "pending")
COUNT_LABELS = {"completed": "done"}


class SweepLockedError(ConfigError):
    """Another live sweep holds this directory."""


# --- lock -----------------------------------------------------------------------------------------
class SweepLock:
    """``DIR/.sweep.lock``: an OS file lock (:mod:`filelock`, ``flock`` on Unix) held while a sweep
    runs in ``DIR``. The kernel releases it when the holding process ends, however it ends (SIGKILL
    included), so there is no stale lock to detect or to delete by hand. Who holds it is written
    to ``DIR/.sweep.lock.json`` for the message a second sweep gets."""

    def __init__(self, root: str | Path):
        self.path = Path(root) / LOCK_FILE
        self.info_path = Path(root) / LOCK_INFO_FILE
        self._lock: FileLock | None = None

    @property
    def held(self) -> bool:
        return self._lock is not None

    def holder(self) -> dict | None:
        """What the holder wrote about itself (None when nothing is written)."""
        try:
            with open_regular(self.info_path) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError):
            return {}

    def is_held_by_live_process(self) -> bool:
        """Whether a live sweep holds the lock, asked without writing: ``sweep status`` only reads,
        and works on a read-only folder. A shared ``flock`` on a read-only descriptor conflicts with
        the holder's exclusive one (filelock's, on Unix); filelock itself opens the file for writing,
        hence this probe by hand. Without ``fcntl`` (Windows) filelock's own probe is used."""
        if self.held:
            return True
        if not self.path.is_file() or self.path.is_symlink():  # no sweep ever ran here
            return False
        try:
            import fcntl
        except ImportError:
            return self._probe_with_filelock()
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases a shared lock taken here
        return False

    def _probe_with_filelock(self) -> bool:
        probe = FileLock(self.path, timeout=0)
        try:
            probe.acquire()
        except Timeout:
            return True
        probe.release()
        return False

    def acquire(self) -> "SweepLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_symlink():  # filelock opens (and truncates) what a link points to
            raise link_error(self.path)
        lock = FileLock(self.path, timeout=0)
        try:
            lock.acquire()
        except Timeout:
            holder = self.holder() or {}
            raise SweepLockedError(
                f"{self.path.parent}: a sweep is already running here (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}, started {holder.get('started', '?')}); stop it first, or use "
                f"another --out") from None
        self._lock = lock
        write_json_atomic(self.info_path, {"pid": os.getpid(), "host": socket.gethostname(),
                                           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv})
        return self

    def release(self) -> None:
        if self._lock is None:
            return
        self.info_path.unlink(missing_ok=True)
        self._lock.release()
        self._lock = None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# --- store ----------------------------------------------------------------------------------------
class SweepStore:
    """One sweep directory (see the module docstring for the layout)."""

    def __init__(self, root: str | Path):
        self.given = Path(root)  # as given: a symbolic link there is refused before a sweep writes
        self.root = Path(root).resolve()

    # paths
    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS_DIR

    def run_dir(self, name: str) -> Path:
        return run_dir_of(self.root, name)

    def record_path(self, name: str) -> Path:
        return self.run_dir(name) / RECORD_NAME

    def checkpoint_path(self, name: str) -> Path:
        return self.run_dir(name) / "checkpoints" / "last.ckpt"

    def exists(self) -> bool:
        return (self.root / PLAN_FILE).is_file()

    def lock(self) -> SweepLock:
        return SweepLock(self.root)

    # the plan
    def load_plan(self) -> list[dict]:
        try:
            with open_regular(self.root / PLAN_FILE) as handle:
                runs = json.load(handle)["runs"]
        except FileNotFoundError:
            raise ConfigError(f"{self.root}: not a sweep directory (no {PLAN_FILE}); start one with "
                              f"`grok-lightning sweep run SWEEP_FILE --out {self.root}`") from None
        except ConfigError:  # a folder or a FIFO named plan.json: one line naming it
            raise
        except RecursionError:
            raise ConfigError(f"{self.root / PLAN_FILE}: unreadable (JSON nested too deeply)") from None
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"{self.root / PLAN_FILE}: unreadable ({type(err).__name__}: {err})") from None
        if not isinstance(runs, list) or not all(isinstance(e, dict) and isinstance(e.get("run_id"), str)
                                                 and isinstance(e.get("name"), str) for e in runs):
            raise ConfigError(f"{self.root / PLAN_FILE}: not a plan (runs must be a list of entries with a run_id "
                              "and a name)")
        return runs

    def load_sweep(self) -> Sweep:
        """The stored sweep; a missing or damaged ``sweep.yaml`` is one line."""
        path = self.root / SWEEP_FILE
        if not path.is_file():
            raise ConfigError(f"{self.root}: not a sweep directory (no {SWEEP_FILE})")
        data = read_yaml(path, "stored sweep")
        try:
            if not isinstance(data, dict) or not isinstance(data.get("base"), dict):
                raise ValueError("not a mapping with an inlined base config")
            for axes in [data.get("grid"), *(data.get("zip") or [])]:
                checked_axes(axes, "axes")  # lists of values
            sweep = Sweep.from_dict(data)
        except (KeyError, TypeError, ValueError) as err:  # ConfigError is a ValueError
            raise ConfigError(f"stored sweep {path}: damaged ({err}); restore it, or start "
                              f"the sweep again from its sweep file with another --out") from None
        check_sweep(sweep, where=f"stored sweep {path}")
        return sweep

    def initialize(self, sweep: Sweep, runs: list[RunSpec], extend: bool = False) -> None:
        """Write ``sweep.yaml`` and ``plan.json``; refuse a different grid unless ``extend``."""
        new_ids = [r.run_id for r in runs]
        if self.exists():
            old = self.load_plan()
            old_ids = [r["run_id"] for r in old]
            if set(old_ids) == set(new_ids):
                # the same runs, now defined by another sweep file (a campaign's runs adopted into the
                # file its target reads): adopting it, the store names that file
                if extend and self.load_sweep().source != sweep.source:
                    self._write_sweep(sweep)
                return
            if not extend:
                added = len(set(new_ids) - set(old_ids))
                removed = len(set(old_ids) - set(new_ids))
                raise ConfigError(
                    f"{self.root} holds a different sweep ({added} run(s) not in it, {removed} of its runs "
                    f"not in this grid); use another --out, resume it with `grok-lightning sweep run "
                    f"{self.root}`, or pass --extend to adopt the new grid (existing runs are kept)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.runs_dir.mkdir(exist_ok=True)
        self._write_sweep(sweep)
        write_json_atomic(self.root / PLAN_FILE, {"sweep": sweep.name, "profile": sweep.profile,
                                                  "runs": [r.to_dict() for r in runs]})

    def _write_sweep(self, sweep: Sweep) -> None:
        text = yaml.safe_dump(sweep.to_dict(), sort_keys=False, default_flow_style=None)
        tmp = self.root / f".{SWEEP_FILE}.tmp"
        with open_no_follow(tmp, "w") as handle:
            handle.write("# written by grok-lightning sweep run: the resolved sweep (base config inlined)\n" + text)
        os.replace(tmp, self.root / SWEEP_FILE)

    def checked_plan(self, runs: list[RunSpec]) -> list[dict]:
        """The plan to run: the runs derived from the sweep (never the entries of ``plan.json``,
        which is a file anyone may have edited), after checking that ``plan.json`` still says the
        same; a difference is one line naming the run and the field. Placement keys (a checkpoint
        path to start from, a log folder) are not compared: they change when the repository moves,
        and what the run computes does not."""
        derived = [r.to_dict() for r in runs]
        stored = {entry.get("run_id"): entry for entry in self.load_plan() if isinstance(entry, dict)}

        def computed(field: str, value):
            if field == "config" and isinstance(value, dict):
                return identity_of(value)
            if field == "axes" and isinstance(value, dict):
                return {k: v for k, v in value.items() if k not in PLACEMENT_KEYS}
            return value

        for entry in derived:
            old = stored.get(entry["run_id"])
            if old is None:
                continue  # initialize() adopted a changed grid (--extend) or is about to write it
            for field in ("name", "config", "axes"):
                if canonical_json(computed(field, old.get(field))) != canonical_json(computed(field, entry[field])):
                    raise ConfigError(f"{self.root / PLAN_FILE}: run {entry['run_id']} has another {field} than its "
                                      f"sweep.yaml gives ({field} was edited); restore plan.json or start the sweep "
                                      f"again with another --out")
        return derived

    # records
    def read_record(self, name: str) -> dict | None:
        """The run's record, ``None`` when it has none, ``{"status": "unreadable"}`` if broken."""
        path = self.record_path(name)
        if not path.exists():
            return None
        try:
            return load_record(path)
        except (ValueError, OSError) as err:
            return {"status": "unreadable", "error": str(err)}

    def run_epoch(self, name: str) -> int | None:
        """The last evaluated epoch in the run's record (None without one)."""
        record = self.read_record(name)
        return last_epoch(record) if record else None

    def resume_epoch(self, name: str) -> int | None:
        """The epoch a rerun resumes from: the record's last epoch when a checkpoint is there,
        else None (it starts from scratch)."""
        return self.run_epoch(name) if self.checkpoint_path(name).is_file() else None

    def status_of(self, name: str) -> str:
        record = self.read_record(name)
        return "pending" if record is None else str(record.get("status"))

    def attempts(self, name: str) -> int:
        try:
            with open_regular(self.run_dir(name) / ATTEMPTS_FILE) as handle:  # a FIFO is refused, not waited on
                return sum(1 for line in handle if line.strip())
        except FileNotFoundError:
            return 0

    def rebuild_index(self, write: bool = True) -> dict:
        """Recompute ``index.json`` from the records (and write it atomically unless ``write`` is
        false: ``sweep status`` only reads, so it works on a read-only folder)."""
        plan = self.load_plan()
        runs = {}
        counts = {status: 0 for status in COUNT_ORDER}
        for entry in plan:
            record = self.read_record(entry["name"])
            status = "pending" if record is None else str(record.get("status"))
            counts[status] = counts.get(status, 0) + 1
            runs[entry["name"]] = {
                "run_id": entry["run_id"], "status": status, "axes": entry.get("axes", {}),
                "epoch": last_epoch(record) if record else None, "max_epochs": max_epochs_of(entry["config"]),
                "grok_epoch": (record or {}).get("grok_epoch"), "final_epoch": (record or {}).get("final_epoch"),
                "final_test_acc": (record or {}).get("final_test_acc"),
                "wall_time_s": (record or {}).get("wall_time_s"), "attempts": self.attempts(entry["name"]),
                "error": _last_line((record or {}).get("error")),
            }
        planned = {entry["name"] for entry in plan}
        extra = sorted(p.name for p in self.runs_dir.glob("*") if p.is_dir() and p.name not in planned) \
            if self.runs_dir.exists() else []
        index = {"root": str(self.root), "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
                 "total": len(plan), "counts": counts, "runs": runs, "not_in_plan": extra}
        if write:
            write_json_atomic(self.root / INDEX_FILE, index)
        return index

    def status_line(self, index: dict | None = None) -> str:
        index = index or self.rebuild_index()
        counts = index["counts"]
        parts = [f"{COUNT_LABELS.get(s, s)} {counts.get(s, 0)}" for s in COUNT_ORDER
                 if s not in ("excluded", "unreadable") or counts.get(s)]
        parts += [f"{s} {n}" for s, n in counts.items() if s not in COUNT_ORDER and n]
        line = f"{index['total']} runs: " + ", ".join(parts)
        if counts.get("running") and not self.lock().is_held_by_live_process():
            line += " (no sweep is running here: the 'running' ones were killed; run the sweep again to resume them)"
        return line

    def running_lines(self, index: dict | None = None) -> list[str]:
        """One line per run whose record says ``running``: its epoch / max epochs."""
        index = index or self.rebuild_index()
        lines = []
        for name, run in index["runs"].items():
            if run["status"] == "running":
                epoch = "-" if run.get("epoch") is None else run["epoch"]
                lines.append(f"  running  {name}: epoch {epoch}/{run.get('max_epochs') or '?'}")
        return lines



def _last_line(text: Any) -> str | None:
    if not text:
        return None
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


# --- collect --------------------------------------------------------------------------------------
MAIN_COLUMNS = ("run_id", "name", "status", "wd", "seed", "operation", "p", "grok_epoch", "final_epoch",
                "final_train_acc", "final_test_acc", "final_train_loss", "final_test_loss", "diverged_epoch",
                "wall_time_s", "attempts", "in_plan", "error")
_SKIP_RECORD_KEYS = {"history", "events", "environment", "config", "schema_version"}


def _flatten(tree: Any, prefix: str) -> dict:
    flat: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, (list, tuple)):
        flat[prefix] = json.dumps(list(tree))
    elif tree is None or isinstance(tree, (int, float, str, bool)):
        flat[prefix] = tree
    else:
        flat[prefix] = str(tree)
    return flat


def _row(record: dict | None, entry: dict | None, attempts: int | None, in_plan: bool) -> dict:
    record = record or {}
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    plan_config = (entry or {}).get("config", {})
    data = config.get("data") if isinstance(config.get("data"), dict) else {}

    def pick(value, key):
        return value if value is not None else get_dotted(plan_config, key, None)

    row: dict[str, Any] = {
        "run_id": record.get("run_id") or config.get("run_id") or (entry or {}).get("run_id"),
        "name": (entry or {}).get("name") or record.get("name"),
        "status": record.get("status", "pending") if record else "pending",
        "wd": pick(config.get("wd"), "model.init_args.weight_decay"),
        "seed": pick(config.get("seed"), "seed_everything"),
        "operation": pick(data.get("operation"), "data.init_args.operation"),
        "p": pick(data.get("p"), "data.init_args.p"),
    }
    for key in MAIN_COLUMNS[7:15]:
        row[key] = record.get(key)
    row["attempts"] = attempts
    row["in_plan"] = in_plan
    row["error"] = _last_line(record.get("error"))
    for key, value in record.items():
        if key in row or key in _SKIP_RECORD_KEYS:
            continue
        if value is None or isinstance(value, (int, float, str, bool)):
            row[key] = value
    row.update(_flatten(config, "config"))
    return row


def collect(root: str | Path, include_pending: bool = True):
    """Records below ``root`` -> one ``pandas.DataFrame`` row per run (see ``MAIN_COLUMNS``).

    For a sweep directory, every planned run has a row (``pending`` when it has no record yet)
    and records of runs outside the plan are added with ``in_plan = False``. Any other directory:
    one row per ``record.json`` below it.
    """
    import pandas as pd

    store = SweepStore(root)
    rows = []
    if store.exists():
        plan = store.load_plan()
        planned = set()
        for entry in plan:
            planned.add(entry["name"])
            record = store.read_record(entry["name"])
            if record is None and not include_pending:
                continue
            rows.append(_row(record, entry, store.attempts(entry["name"]), True))
        if store.runs_dir.exists():
            for path in sorted(store.runs_dir.glob(f"*/{RECORD_NAME}")):
                if path.parent.name not in planned:
                    rows.append(_row(store.read_record(path.parent.name), {"name": path.parent.name},
                                     store.attempts(path.parent.name), False))
    else:
        root = Path(root)
        if not root.is_dir():
            raise ConfigError(f"{root}: no such directory")
        for path, record in iter_records(root):
            rows.append(_row(record, {"name": path.parent.name}, None, False))
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=list(MAIN_COLUMNS))
    first = [c for c in MAIN_COLUMNS if c in frame.columns]
    others = [c for c in frame.columns if c not in first and not c.startswith("config.")]
    config_cols = sorted(c for c in frame.columns if c.startswith("config."))
    return frame[first + others + config_cols]


def write_table(frame, out: str | Path) -> tuple[Path, str | None]:
    """Write ``.csv`` or ``.parquet``; without pyarrow, parquet falls back to CSV with a note."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    suffix = out.suffix.lower()
    if suffix == ".csv":
        frame.to_csv(out, index=False)
        return out, None
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            csv = out.with_suffix(".csv")
            frame.to_csv(csv, index=False)
            return csv, f"pyarrow is not installed, so wrote CSV to {csv} instead of {out} (pip install pyarrow for parquet)"
        frame.to_parquet(out, index=False)
        return out, None
    raise ConfigError(f"--out={str(out)!r}: use a .csv or .parquet file name")

