"""A run's directory in a sweep store: who owns it, what a failed run's record says, and the
summary a launcher gets back. Shared by :mod:`.worker` (one run) and :mod:`.ensembles` (several
runs trained together), which both import from here and not from each other.

Layout of ``<store>/runs/<name>/`` as written here (the recorder and the logger add the rest)::

    record.json       the run's record (mark_failed writes one when the recorder could not)
    .owner            pid, host and process start time of the process training it right now
    attempts.jsonl    one line per start (kept when a run restarts from scratch)
    unusable_checkpoints/   checkpoints that could not resume the run, set aside (kept too)
    run.log           the run's stdout/stderr
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from grok_lightning.records import (
    FINAL_STATUSES,
    RECORD_NAME,
    load_record,
    new_record,
    record_config,
    write_json_atomic,
)
from grok_lightning.sweep.nofollow import link_error, open_no_follow, remove_inside

__all__ = ["ATTEMPTS_FILE", "LOG_FILE", "OWNER_FILE", "checkpoint_to_resume", "clean", "error_line", "log_tail",
           "failed_run_config", "mark_failed", "output_to", "owner_alive", "pid_alive", "proc_start", "read_record",
           "run_dir_of", "run_summary", "set_aside", "check_write_paths"]

ATTEMPTS_FILE = "attempts.jsonl"
OWNER_FILE = ".owner"
LOG_FILE = "run.log"
#: checkpoints that could not resume the run, kept (not deleted) for whoever wants to look
UNUSABLE_DIR = "unusable_checkpoints"
KEEP_ON_RESTART = {ATTEMPTS_FILE, OWNER_FILE, UNUSABLE_DIR}


# --- processes ------------------------------------------------------------------------------------
def proc_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks (``/proc/<pid>/stat``): with the pid, it tells a
    live owner from a new process that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, host: str | None = None, start: str | None = None) -> bool:
    """Whether ``pid`` runs (on this host; another host's pid is assumed alive)."""
    if host is not None and host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    if start is not None:  # the pid was reused by another process
        current = proc_start(int(pid))
        if current is not None and current != start:
            return False
    return True


def owner_alive(run_dir: Path) -> dict | None:
    """The ``.owner`` of ``run_dir`` when it is another live process on this host, else None."""
    from grok_lightning.config import open_regular

    try:
        with open_regular(run_dir / OWNER_FILE) as handle:  # a FIFO there is no owner, never waited on
            owner = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(owner, dict):
        return None
    if owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        return None
    if owner.get("host") != socket.gethostname():
        return None  # another machine (Ray): the sweep lock is what keeps runs single
    return owner if pid_alive(owner.get("pid", -1), owner.get("host"), owner.get("proc_start")) else None


# --- records --------------------------------------------------------------------------------------
def read_record(path: Path) -> dict | None:
    """The record at ``path``; None when there is none, ``{"status": "unreadable"}`` if broken."""
    if not path.exists():
        return None
    try:
        return load_record(path)
    except (ValueError, OSError):
        return {"status": "unreadable"}


def failed_run_config(config: dict) -> dict:
    """The record's ``config`` block (:func:`grok_lightning.records.record_config`) of a run that
    failed before its recorder existed, from its resolved config."""
    model = dict((config.get("model") or {}).get("init_args") or {})
    data = dict((config.get("data") or {}).get("init_args") or {})
    run = dict(config.get("run") or {})
    class_path = str((config.get("model") or {}).get("class_path", ""))
    seed = config.get("seed_everything")
    return record_config(model, data, seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                         (config.get("trainer") or {}).get("max_epochs"),
                         class_path.rpartition(".")[2] or None, profile=run.get("profile"), run_id=run.get("run_id"))


def mark_failed(task: dict, error: str, status: str = "failed") -> dict:
    """Write ``status`` (failed/interrupted) into the run's record, creating it if needed.

    A record the recorder already marked ``failed`` keeps its own traceback.
    """
    path = Path(task["run_dir"]) / RECORD_NAME
    record = read_record(path)
    if record is None or record.get("status") == "unreadable":
        record = new_record(failed_run_config(task["config"]), run_id=task["run_id"], name=task["name"])
    if record.get("status") == status and record.get("error"):
        return record
    if record.get("status") in FINAL_STATUSES:
        return record
    record["status"] = status
    record["error"] = error[-4000:] if error else record.get("error")
    record.setdefault("name", task["name"])
    write_json_atomic(path, record)
    return record


def error_line(err: BaseException) -> str:
    """One line for an exception: a ``ConfigError`` anywhere in the chain wins (jsonargparse wraps
    the modules' validation errors in its own multi-line messages)."""
    from grok_lightning.config import ConfigError

    seen: set[int] = set()
    node: BaseException | None = err
    while node is not None and id(node) not in seen:
        if isinstance(node, ConfigError):
            return f"ConfigError: {node}"
        seen.add(id(node))
        node = node.__cause__ or node.__context__
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def run_summary(task: dict, record: dict | None, **extra) -> dict:
    """What a launcher gets back for one run: status and outcome from its record, plus ``extra``."""
    record = record or {}
    error = record.get("error")
    result = {
        "name": task["name"], "run_id": task["run_id"], "status": record.get("status", "pending"),
        "grok_epoch": record.get("grok_epoch"), "final_epoch": record.get("final_epoch"),
        "final_test_acc": record.get("final_test_acc"), "wall_time_s": record.get("wall_time_s"),
        "error": str(error).strip().splitlines()[-1] if error else None,
        "skipped": False, "interrupted": False, "resumed_from": None, "unusable_checkpoint": None,
    }
    result.update(extra)
    return result


# --- where a run lives ----------------------------------------------------------------------------
def run_dir_of(store_root: str | Path, name: str) -> Path:
    """``<store>/runs/<name>``, refused (one line) unless ``name`` is one plain path part that stays
    inside ``runs/`` and the folder is not a symbolic link: a run folder is emptied on a restart,
    so it must never point elsewhere."""
    from grok_lightning.config import ConfigError

    runs = Path(store_root).resolve() / "runs"
    if runs.is_symlink():
        raise link_error(runs)
    text = str(name)
    if not text or text in (".", "..") or Path(text).name != text or "/" in text or "\\" in text:
        raise ConfigError(f"run name {text!r}: must be one plain folder name inside {runs}")
    run_dir = runs / text
    if run_dir.is_symlink():
        raise ConfigError(f"{run_dir}: a symbolic link; a run folder must be a real folder inside {runs}")
    if run_dir.resolve().parent != runs.resolve():
        raise ConfigError(f"run name {text!r}: resolves outside {runs}")
    return run_dir


#: init arguments of a trainer's logger, callbacks and profiler that name where they write
WRITE_PATH_ARGS = ("dirpath", "filename", "save_dir", "sub_dir", "root_dir", "log_dir", "default_root_dir", "filepath",
                   "output_dir")


def _specs(value, where: str):
    """``(where, {class_path, init_args})`` of a logger, callback or profiler entry (or a list)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _specs(item, f"{where}.{i}")
    elif isinstance(value, dict) and isinstance(value.get("init_args"), dict):
        yield where, value


def check_write_paths(config: dict, run_dir: Path) -> None:
    """Every path a run config names for writing resolves inside ``run_dir``, or one
    ``ConfigError`` line names the field: the run's logger folder (``save_dir/name/version``,
    what a sweep sets) and its ``sub_dir``, and the ``dirpath``/``filename``/... of the trainer's
    callbacks and profiler and ``trainer.default_root_dir``. A stored plan is data: its run may not
    write anywhere else (a ModelCheckpoint overwriting a file elsewhere, events sent outside)."""
    from grok_lightning.config import ConfigError
    from grok_lightning.sweep.nofollow import is_inside

    trainer = config.get("trainer") or {}
    wanted: list[tuple[str, Path]] = []
    if trainer.get("default_root_dir") is not None:
        wanted.append(("trainer.default_root_dir", Path(str(trainer["default_root_dir"]))))
    for where, spec in _specs(trainer.get("logger"), "trainer.logger"):
        args = spec["init_args"]
        if args.get("save_dir") is not None:
            log_dir = Path(str(args["save_dir"])) / str(args.get("name") or "") / str(args.get("version") or "")
            wanted.append((f"{where}.init_args.save_dir/name/version", log_dir))
            if args.get("sub_dir") is not None:
                wanted.append((f"{where}.init_args.sub_dir", log_dir / str(args["sub_dir"])))
    for section in ("callbacks", "profiler", "plugins"):
        for where, spec in _specs(trainer.get(section), f"trainer.{section}"):
            args = spec["init_args"]
            folder = Path(str(args.get("dirpath") or args.get("output_dir") or run_dir))
            for key in WRITE_PATH_ARGS:
                if args.get(key) is not None:
                    value = Path(str(args[key]))
                    wanted.append((f"{where}.init_args.{key}", folder / value if key in ("filename", "filepath") else value))
    for field, path in wanted:
        if not is_inside(run_dir, path):
            raise ConfigError(f"{field}={str(path)!r}: resolves outside the run folder {run_dir}; a stored config "
                              "writes only inside its run folder")


# --- checkpoints and files ------------------------------------------------------------------------
def checkpoint_to_resume(path: Path) -> tuple[str | None, str | None]:
    """``(ckpt_path, problem)``: the checkpoint to resume from, or why the file there cannot be
    used (``None`` when there is no file). It is loaded with ``weights_only=True``: a checkpoint
    in a results folder is data from anywhere, and must not run code on load."""
    if not path.is_file():
        return None, None
    from grok_lightning.checkpoint_io import checkpoint_problem

    problem = checkpoint_problem(path)
    return (str(path), None) if problem is None else (None, problem)


def set_aside(run_dir: Path, path: Path) -> Path | None:
    """Move an unusable checkpoint ``path`` of ``run_dir`` into ``run_dir/unusable_checkpoints/``
    (the run restarts from scratch; the file is kept, not deleted); its new path, or ``None``
    when there is no such file."""
    if not path.is_file() or path.is_symlink():
        return None
    folder = run_dir / UNUSABLE_DIR
    if folder.is_symlink():
        raise link_error(folder)
    folder.mkdir(exist_ok=True)
    target = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{path.name}"
    os.replace(path, target)
    return target


def clean(run_dir: Path) -> None:
    """Empty ``run_dir`` for a start from scratch, keeping its attempts log and owner file. A
    symbolic link is refused, never followed."""
    if Path(run_dir).is_symlink():
        from grok_lightning.config import ConfigError

        raise ConfigError(f"{run_dir}: a symbolic link; refusing to empty what it points to")
    for child in run_dir.iterdir():
        if child.name not in KEEP_ON_RESTART:
            remove_inside(run_dir, child)


@contextlib.contextmanager
def output_to(path: Path, enabled: bool = True):
    """Send this process's stdout/stderr (file descriptors 1 and 2) to ``path`` for the run."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open_no_follow(path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def log_tail(run_dir: Path, n: int = 15) -> str:
    """The last ``n`` lines of the run's ``run.log``."""
    from grok_lightning.config import open_regular

    try:
        with open_regular(run_dir / LOG_FILE, "rb") as handle:
            lines = handle.read().decode(errors="replace").splitlines()
    except (OSError, ValueError):
        return ""
    return "\n".join(lines[-n:])
