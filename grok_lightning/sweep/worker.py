"""One run of a sweep, executed where a launcher puts it (a local worker process or a Ray task).

:func:`execute_run` is the whole per-run protocol, the same for every launcher:

1. A run whose record is final (completed / diverged / excluded) is never trained again.
2. Otherwise, when ``checkpoints/last.ckpt`` exists and loads (with ``weights_only=True``: it
   is data, never code), training resumes from it: the recorder's state is in the checkpoint, so
   the same record continues (one record per run). Without a usable checkpoint the run directory
   is emptied and the run starts from scratch; a file that was there but could not be used is
   reported once (``unusable_checkpoint`` in the summary and ``attempts.jsonl``, and run.log).
3. Any exception marks the run ``failed`` with its traceback in the record, written here when
   the run raised before its recorder existed (e.g. a ``ConfigError`` at construction).
   Ctrl-C / SIGINT leaves ``interrupted``; a NaN loss ``diverged`` (the recorder's doing).

Keep this module's top-level imports light: worker processes set their thread limits before
torch is imported.

As a command: ``--serve`` is the local launcher's worker (JSON lines on stdin/stdout, see
:func:`serve`); ``--task task.json`` runs one task, e.g. from an external scheduler::

    python -m grok_lightning.sweep.worker --task task.json
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from grok_lightning.records import FINAL_STATUSES, RECORD_NAME
from grok_lightning.sweep.nofollow import open_no_follow, remove_inside
from grok_lightning.sweep.rundir import (
    ATTEMPTS_FILE,
    LOG_FILE,
    OWNER_FILE,
    check_write_paths,
    checkpoint_to_resume,
    clean,
    error_line,
    log_tail,
    mark_failed,
    output_to,
    owner_alive,
    proc_start,
    read_record,
    run_dir_of,
    run_summary,
    set_aside,
)

# mark_failed, checkpoint_to_resume: the run-directory helpers, importable from here too
__all__ = ["checkpoint_to_resume", "execute_run", "make_task", "mark_failed", "serve"]


# --- placing a run in the store ----------------------------------------------------------------
def make_task(entry: dict, store_root: str | Path, settings: dict, threads: int | None) -> dict:
    """A planned run -> a task: its config placed in ``<store>/runs/<name>/`` (logger, record,
    checkpoints, threads). ``settings`` has ``checkpoint_min_epochs``, ``checkpoint_every`` and
    ``keep_checkpoints`` from the sweep."""
    import copy

    from grok_lightning.config import trusted_code
    from grok_lightning.sweep.grid import get_dotted, max_epochs_of, set_dotted

    config = copy.deepcopy(entry["config"])
    root = Path(store_root).resolve()
    run_dir = run_dir_of(root, entry["name"])
    logger = get_dotted(config, "trainer.logger", None)
    if not isinstance(logger, dict) or "class_path" not in logger:
        logger = {"class_path": "lightning.pytorch.loggers.TensorBoardLogger", "init_args": {"default_hp_metric": False}}
    logger = copy.deepcopy(logger)
    logger.setdefault("init_args", {}).update(save_dir=str(root), name="runs", version=entry["name"])
    set_dotted(config, "trainer.logger", logger)
    set_dotted(config, "trainer.enable_progress_bar", False)
    set_dotted(config, "run.record_path", str(run_dir / RECORD_NAME))
    set_dotted(config, "run.run_id", entry["run_id"])
    if threads:
        set_dotted(config, "run.threads", int(threads))
    horizon = max_epochs_of(config)
    every = settings.get("checkpoint_every")
    if every is None:
        every = get_dotted(config, "run.checkpoint_every", None)
    every = 50 if every is None else int(every)  # 0 disables checkpoints
    min_epochs = int(settings.get("checkpoint_min_epochs", 100) or 0)
    use_checkpoints = horizon is None or horizon >= min_epochs
    set_dotted(config, "run.checkpoint_every", every if use_checkpoints else 0)
    return {"name": entry["name"], "run_id": entry["run_id"], "run_dir": str(run_dir), "config": config,
            "keep_checkpoints": bool(settings.get("keep_checkpoints", True)), "threads": threads,
            "trusted_code": list(trusted_code())}  # --trust-code of the sweep's command line


# --- the protocol ---------------------------------------------------------------------------------
def execute_run(task: dict, capture_output: bool = True, unusable_before: str | None = None) -> dict:
    """Run (or resume, or skip) one task; return a short summary. Never raises for a run failure.

    An ensemble task (``members``, from ``--ensemble-size``) trains its runs together; its summary
    lists theirs under ``members``. ``unusable_before``: why the run's checkpoint was just set
    aside (it failed the checks against the built model): said once, as the restart's reason.
    """
    from grok_lightning.config import trust_code

    check_placement(task)  # before anything is made, emptied or written
    # the modules the sweep's command line trusted (--trust-code), in this process too
    trust_code(task.get("trusted_code") or next((m.get("trusted_code") for m in task.get("members") or []), None) or ())
    if task.get("members"):
        from grok_lightning.sweep.packing import execute_ensemble  # one way: ensembles never import worker

        return execute_ensemble(task, capture_output)
    run_dir = Path(task["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    record_path = run_dir / RECORD_NAME
    prior = read_record(record_path)
    if prior is not None and prior.get("status") in FINAL_STATUSES:
        return run_summary(task, prior, skipped=True)
    owner = owner_alive(run_dir)
    if owner is not None:
        return run_summary(task, prior, status="busy", skipped=True,
                        error=f"run is being trained by live pid {owner.get('pid')}; left alone")

    # a write killed between its temp file and the rename leaves the temp file; it never holds
    # anything the run needs (the previous file is intact), so it goes before the run continues
    for partial in run_dir.glob(f".{RECORD_NAME}.*.tmp"):
        remove_inside(run_dir, partial)
    own_path = run_dir / "checkpoints" / "last.ckpt"
    ckpt_path, unusable = checkpoint_to_resume(own_path)
    if ckpt_path is None:
        if unusable is not None:  # reported this once: set aside (kept), so the next sweep does not see it
            set_aside(run_dir, own_path)
        clean(run_dir)
        # no checkpoint of its own yet: a run may start from another run's (E12's B and C)
        ckpt_path = ((task["config"].get("run") or {}).get("start_from")) or None
    unusable = unusable or unusable_before
    me = {"pid": os.getpid(), "host": socket.gethostname(), "proc_start": proc_start(os.getpid())}
    with open_no_follow(run_dir / OWNER_FILE, "w") as handle:
        handle.write(json.dumps(me))
    with open_no_follow(run_dir / ATTEMPTS_FILE, "a") as handle:
        handle.write(json.dumps({**me, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "resumed_from": ckpt_path,
                                 "unusable_checkpoint": unusable, "prior_status": (prior or {}).get("status")}) + "\n")
    interrupted = False
    sigint = {"received": False}

    def on_sigint(signum, frame):  # remember it: Lightning turns it into SystemExit(1)
        sigint["received"] = True
        raise KeyboardInterrupt

    try:
        previous_handler = signal.signal(signal.SIGINT, on_sigint) \
            if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else None
    except ValueError:  # not the main thread (e.g. some Ray setups): no Ctrl-C handling here
        previous_handler = None
    own = ckpt_path is not None and ckpt_path == str(own_path)
    set_aside_because = None
    try:
        with output_to(run_dir / LOG_FILE, capture_output):
            check_task(task, ckpt_path, own_checkpoint=own)
            if ckpt_path:
                print(f"[grok-lightning sweep] resuming {task['name']} from {ckpt_path}", flush=True)
            if unusable:
                print(f"[grok-lightning sweep] {unusable}; {task['name']} restarts from scratch", flush=True)
            from grok_lightning.run import run_config

            run_config(task["config"], ckpt_path=ckpt_path)
    except KeyboardInterrupt:
        interrupted = True
        mark_failed(task, "KeyboardInterrupt", status="interrupted")
    except SystemExit as err:  # Lightning turns Ctrl-C into SystemExit(1); jsonargparse exits 2
        record = read_record(record_path)
        if sigint["received"] or (record is not None and record.get("status") == "interrupted"):
            interrupted = True
            mark_failed(task, "KeyboardInterrupt (Ctrl-C / SIGINT)", status="interrupted")
        else:
            mark_failed(task, f"SystemExit({err.code}) while running; end of run.log:\n{log_tail(run_dir)}")
    except BaseException as err:  # noqa: BLE001 - every failure becomes a record, the sweep goes on
        from grok_lightning.checkpoint_io import UnusableCheckpoint

        if own and isinstance(err, UnusableCheckpoint):  # its own checkpoint does not fit the model
            set_aside_because = error_line(err).removeprefix("ConfigError: ")
        else:
            mark_failed(task, f"{traceback.format_exc().rstrip()}\nerror: {error_line(err)}")
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGINT, previous_handler)
        (run_dir / OWNER_FILE).unlink(missing_ok=True)
    if set_aside_because is not None:  # nothing was trained: set it aside and start again from scratch
        set_aside(run_dir, own_path)
        return execute_run(task, capture_output, unusable_before=set_aside_because)
    record = read_record(record_path)
    interrupted = interrupted or (record or {}).get("status") == "interrupted"  # stopped gracefully by a signal
    if record is not None and record.get("status") == "running":  # should not happen; never leave it
        record = mark_failed(task, "run ended without a final status")
    status = (record or {}).get("status")
    if status in FINAL_STATUSES and not task.get("keep_checkpoints", True):
        remove_inside(run_dir, run_dir / "checkpoints")
    return run_summary(task, record, interrupted=interrupted, resumed_from=ckpt_path, unusable_checkpoint=unusable)


def _computed(config) -> str:
    """What a run computes (its config without placement keys and logger, which a task sets)."""
    from grok_lightning.sweep.grid import canonical_json, identity_of

    identity = identity_of(config if isinstance(config, dict) else {})
    identity.get("trainer", {}).pop("logger", None)
    return canonical_json(identity)


def check_placement(task: dict) -> None:
    """A task (from a launcher, or a task file from anywhere) runs only a run its sweep plans, in
    that run's own folder, one ``ConfigError`` line otherwise: ``run_dir`` is
    ``<sweep>/runs/<name>`` of a sweep folder whose ``plan.json`` lists this run id under this
    name (with a config that hashes to it), the task's config is that one (what it computes), and
    the record goes to ``run_dir/record.json``. A run
    folder is emptied on a restart and its record rewritten: a task naming another folder or
    another sweep's record must not reach them."""
    from grok_lightning.config import ConfigError
    from grok_lightning.sweep.grid import get_dotted, run_id_of
    from grok_lightning.sweep.store import SweepStore

    members = task.get("members") or [task]
    for member in members:
        run_dir, name = Path(str(member.get("run_dir"))), str(member.get("name"))
        store = SweepStore(run_dir.parent.parent)
        if run_dir.parent.name != "runs" or run_dir.resolve() != store.run_dir(name).resolve():
            raise ConfigError(f"run_dir={str(run_dir)!r}: not the folder of run {name!r} (<sweep>/runs/{name}); a task "
                              "runs only in its own run folder")
        entry = next((e for e in store.load_plan() if e["run_id"] == member.get("run_id")), None)
        if entry is None or entry["name"] != name or run_id_of(entry.get("config") or {}) != entry["run_id"]:
            raise ConfigError(f"{store.root / 'plan.json'}: plans no run {member.get('run_id')!r} named {name!r}; a task "
                              "runs only a run its sweep plans")
        if _computed(member.get("config")) != _computed(entry["config"]):
            raise ConfigError(f"task {name}: its config is not the one its plan gives run {entry['run_id']}")
        record_path = get_dotted(member["config"], "run.record_path", None)
        if record_path is None or Path(str(record_path)).resolve() != (store.run_dir(name) / RECORD_NAME).resolve():
            raise ConfigError(f"run.record_path={record_path!r}: a sweep run's record is {store.run_dir(name) / RECORD_NAME}")
    if task.get("members"):
        ensemble_dir = Path(str(task["run_dir"]))
        root = Path(str(members[0]["run_dir"])).parent.parent.resolve()
        if ensemble_dir.parent.resolve() != root / "ensembles" or ensemble_dir.is_symlink() or \
                Path(str(task.get("name"))).name != ensemble_dir.name:
            raise ConfigError(f"run_dir={str(ensemble_dir)!r}: an ensemble runs in <sweep>/ensembles/<its name>")


def check_task(task: dict, ckpt_path: str | None, own_checkpoint: bool) -> None:
    """Before a run trains: the classes its config names come from trusted packages (a task comes
    from a results folder, which is data), and its own ``last.ckpt`` is its own: a checkpoint
    that another run wrote, or one that carries no run id, is refused, never adopted (a run starts
    from another run's only where its config says ``run.start_from``)."""
    from grok_lightning.checkpoint_io import checkpoint_run_id
    from grok_lightning.config import ConfigError, check_class_paths

    check_class_paths(task["config"], f"run {task['name']}")
    check_write_paths(task["config"], Path(task["run_dir"]).resolve())
    if own_checkpoint:
        owner = checkpoint_run_id(ckpt_path)
        if owner != task["run_id"]:  # no id at all: a plain `fit` run's, or written elsewhere
            whose = f"the checkpoint of run {owner}" if owner is not None else "a checkpoint without a run id"
            raise ConfigError(f"{ckpt_path}: {whose}, not this run's ({task['run_id']}); remove it to restart this "
                              "run from scratch")


# --- worker processes -----------------------------------------------------------------------------
def limit_threads(threads: int | None) -> None:
    """Set thread limits before torch is imported (and torch's, if it already is)."""
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        if "torch" in sys.modules:
            import torch

            torch.set_num_threads(int(threads))


def die_with_parent(parent_pid: int) -> None:
    """Exit when the launching process dies (even by SIGKILL), so no orphan keeps training a
    run that a resumed sweep is about to restart: PR_SET_PDEATHSIG on Linux, a watchdog thread
    everywhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def serve(parent_pid: int, threads: int | None) -> int:
    """A local worker: JSON lines in on stdin (``{"kind": "run", "task": ...}`` or
    ``{"kind": "stop"}``), JSON lines out (``ready``, ``start``, ``done`` with the summary).

    The protocol uses a private copy of stdout; file descriptor 1 then points at stderr, so a
    stray print cannot corrupt it.
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    die_with_parent(parent_pid)
    limit_threads(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # idle: the launcher decides

    def send(kind: str, **payload) -> None:
        proto.write(json.dumps({"kind": kind, "pid": os.getpid(), **payload}) + "\n")
        proto.flush()

    import torch  # noqa: F401  (import once, up front, with the limits above)

    limit_threads(threads)
    send("ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("kind") != "run":
            break
        task = message["task"]
        send("start", name=task["name"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            summary = execute_run(task)
        except BaseException as err:  # noqa: BLE001
            summary = {"name": task["name"], "run_id": task["run_id"], "status": "failed",
                       "error": f"{type(err).__name__}: {err}", "interrupted": isinstance(err, KeyboardInterrupt)}
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        send("done", name=task["name"], summary=summary)
        if summary.get("interrupted"):
            break
    return 0


def ray_execute(task: dict) -> dict:
    """The Ray task body (module-level so Ray ships it by reference)."""
    limit_threads(task.get("threads"))
    return execute_run(task)


def main(argv: list[str] | None = None) -> int:
    import argparse

    # `python -m` put the working directory first on sys.path: a module lying there (next to a
    # sweep folder from elsewhere) must not shadow or add to what a run imports
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]

    parser = argparse.ArgumentParser(prog="python -m grok_lightning.sweep.worker",
                                     description="Run one sweep task (JSON from make_task), or serve a launcher.")
    parser.add_argument("--task", help="task JSON file: run it and print the summary")
    parser.add_argument("--no-capture", action="store_true", help="keep the run's output on this terminal")
    parser.add_argument("--serve", action="store_true", help="worker mode: tasks on stdin, results on stdout")
    parser.add_argument("--parent", type=int, default=None, help="exit when this pid is gone (--serve)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--trust-code", action="append", default=[], metavar="MODULE",
                        help="let the task's config name classes and callables of this module of yours (repeatable)")
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.parent or os.getppid(), args.threads)
    if not args.task:
        parser.error("give --task FILE or --serve")
    from grok_lightning.config import ConfigError, open_regular

    try:
        with open_regular(args.task) as handle:
            task = json.load(handle)
        if not isinstance(task, dict):
            raise ConfigError(f"--task {args.task}: not a task (a JSON object from make_task)")
        task["trusted_code"] = args.trust_code  # from this command line, never from the file
        limit_threads(args.threads or task.get("threads"))
        summary = execute_run(task, capture_output=not args.no_capture)
    except (ValueError, KeyError, TypeError, RecursionError) as err:  # a ConfigError is a ValueError
        print(f"error: {err if isinstance(err, ConfigError) else f'--task {args.task}: not a task ({err!r})'}",
              file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0 if summary["status"] in FINAL_STATUSES else 1


if __name__ == "__main__":
    sys.exit(main())
