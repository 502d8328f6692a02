"""Launch a sweep's runs: local worker processes or Ray tasks, with progress and resume.

Both launchers take the planned runs that are not final, turn each into a task
(:func:`~grok_lightning.sweep.worker.make_task`) and call the same
:func:`~grok_lightning.sweep.worker.execute_run` for it, so a run behaves the same wherever it
runs. Running the same sweep again resumes it: final runs are skipped, the others restart from
their ``last.ckpt`` (or from scratch), and a run never gets a second record.

Local workers are subprocesses (``python -m grok_lightning.sweep.worker --serve``), each
importing torch once and taking one run at a time from the launcher over JSON lines (so the
launcher always knows which worker holds which run). A worker that dies (OOM, segfault) marks
its run ``failed`` and is replaced; workers that cannot start stop the sweep with one line.
Workers exit when the launcher dies, even by SIGKILL, so no orphan keeps writing into a run
directory.
Ctrl-C or SIGTERM stops the sweep: running runs are marked ``interrupted`` and resume later.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from grok_lightning.config import ConfigError
from grok_lightning.records import FINAL_STATUSES
from grok_lightning.sweep.devices import pick_device, resolve_devices, workers_for_devices
from grok_lightning.sweep.grid import Sweep, expand, load_sweep, validate_types
from grok_lightning.sweep.packing import member_tasks, pack_tasks
from grok_lightning.sweep.progress import Progress
from grok_lightning.sweep.store import SweepStore
from grok_lightning.sweep.worker import execute_run, make_task, mark_failed

__all__ = ["SweepResult", "WorkerStartupError", "available_cores", "default_layout", "prepare", "run_sweep", "worker_command"]


def default_layout(n_cpus: int | None = None) -> tuple[int, int]:
    """``(workers, threads_per_worker)``: one single-threaded worker per core (measured faster
    than one multi-threaded run for the small models here, see docs/sweeps.md)."""
    return max(1, n_cpus or available_cores()), 1


def available_cores() -> int:
    """Cores this process may use (CPU affinity / cpuset aware, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class SweepResult:
    """What a launch did: counts by final status of this session and the store's status line."""

    root: Path
    total: int
    skipped: int
    ran: int
    statuses: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    status_line: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.interrupted and not any(s not in FINAL_STATUSES for s in self.statuses if self.statuses[s])


# --- preparation ----------------------------------------------------------------------------------
def prepare(target: str | Path, profile: str | None = None, out: str | Path | None = None,
            extend: bool = False, validate: bool = True) -> tuple[Sweep, list, SweepStore]:
    """Sweep file (or an existing sweep directory) -> ``(sweep, runs, store)``, all checked.

    Nothing is written here; :func:`run_sweep` initializes the store under the lock.
    """
    target = Path(target)
    if out is not None and (not str(out).strip() or Path(out).is_file()):
        raise ConfigError(f"--out={str(out)!r}: must name a folder (it is {'empty' if not str(out).strip() else 'a file'})")
    if target.is_dir():
        store = SweepStore(target if out is None else out)
        if out is not None and Path(out).resolve() != target.resolve():
            raise ConfigError(f"{target} is a sweep directory: resume it in place (drop --out)")
        sweep = store.load_sweep()
        if profile is not None and profile != sweep.profile:
            raise ConfigError(f"{target} holds profile {sweep.profile!r}, not --profile={profile!r}")
    else:
        if not target.exists():
            raise ConfigError(f"{target}: no such sweep file or directory")
        sweep = load_sweep(target, profile)
        suffix = f"-{sweep.profile}" if sweep.profile else ""
        store = SweepStore(out if out is not None else Path("runs") / "sweeps" / f"{sweep.name}{suffix}")
    runs = expand(sweep)
    if validate:
        validate_types(runs)
    return sweep, runs, store


def _settings(sweep: Sweep) -> dict:
    return {"checkpoint_min_epochs": sweep.checkpoint_min_epochs, "checkpoint_every": sweep.checkpoint_every,
            "keep_checkpoints": sweep.keep_checkpoints}


# --- the launch -----------------------------------------------------------------------------------
def run_sweep(target: str | Path, profile: str | None = None, out: str | Path | None = None,
              workers: int | None = None, threads_per_worker: int | None = None, launcher: str = "local",
              address: str | None = None, gpus_per_run: float = 0.0, extend: bool = False,
              stream: TextIO | None = None, only: Callable[[dict], bool] | None = None,
              ensemble_size: int = 1, devices=None, runs_per_device: int | None = None) -> SweepResult:
    """Run (or resume) a sweep; return what happened. Raises ``ConfigError`` before any run
    for a malformed sweep, a different grid in ``out`` or a sweep already running there.

    ``workers=0`` runs in this process (no worker processes; for debugging).
    ``ensemble_size`` > 1 packs compatible runs into vectorised ensembles of that many members
    (:mod:`grok_lightning.sweep.packing`); records are the same as without.
    ``devices`` (a count, or device numbers ``"0,2"``) pins each local worker to one GPU, round
    robin, ``runs_per_device`` workers per GPU (:mod:`grok_lightning.sweep.devices`); it also
    sets the default number of workers to devices x runs per device.
    """
    stream = stream or sys.stdout
    t0 = time.time()
    default_workers, default_threads = default_layout()
    threads = threads_per_worker or default_threads
    if launcher not in ("local", "ray"):
        raise ConfigError(f"--launcher={launcher!r}: must be one of local, ray")
    if launcher == "local" and (address or gpus_per_run):
        raise ConfigError("--address/--gpus-per-run apply to --launcher ray only")
    if launcher == "ray":
        _import_ray()
    device_list = resolve_devices(devices, runs_per_device, launcher)
    default_workers = workers_for_devices(device_list, runs_per_device) or default_workers
    sweep, runs, store = prepare(target, profile, out, extend=extend)
    with store.lock():
        store.initialize(sweep, runs, extend=extend)
        plan = store.checked_plan(runs)
        if only is not None:
            plan = [entry for entry in plan if only(entry)]
        todo = [entry for entry in plan if store.status_of(entry["name"]) not in FINAL_STATUSES]
        skipped = len(plan) - len(todo)
        store.rebuild_index()
        tasks = pack_tasks([make_task(entry, store.root, _settings(sweep), threads) for entry in todo],
                           ensemble_size, store.root)
        n_workers = default_workers if workers is None else workers
        n_workers = min(n_workers, len(tasks)) if n_workers else 0
        pinned = f" on GPU(s) {','.join(device_list)}" if device_list else ""
        where = f"{launcher}" + (f" {n_workers} worker(s) x {threads} thread(s){pinned}" if launcher == "local"
                                 else f" ({address or 'local cluster'}, {threads} cpu(s)"
                                      f"{f', {gpus_per_run} gpu(s)' if gpus_per_run else ''} per run)")
        packed = len(tasks) != len(todo)
        plan_line = (f"{len(todo)} to run{f' in {len(tasks)} task(s) (ensembles of <= {ensemble_size})' if packed else ''} "
                     f"on {where}") if todo else "nothing to run"
        stream.write(f"sweep {sweep.name} (profile {sweep.profile}): {len(plan)} runs, {skipped} already final, "
                     f"{plan_line} -> {store.root}\n")
        stream.flush()
        progress = Progress.for_plan(plan, todo, store, stream)  # counted in epochs, with an ETA
        statuses: dict[str, int] = {}
        interrupted = False
        if tasks:
            if launcher == "ray":
                interrupted = _run_ray(tasks, progress, statuses, address, threads, gpus_per_run, store)
            elif n_workers == 0:
                interrupted = _run_inline(tasks, progress, statuses, store)
            else:
                interrupted = _run_local(tasks, progress, statuses, n_workers, threads, store, device_list)
        progress.close()
        index = store.rebuild_index()
        line = store.status_line(index)
    stream.write(f"{'interrupted: ' if interrupted else ''}{store.root}: {line}\n")
    stream.flush()
    return SweepResult(root=store.root, total=len(plan), skipped=skipped, ran=sum(statuses.values()),
                       statuses=statuses, interrupted=interrupted, status_line=line, wall_s=time.time() - t0)


def _count(statuses: dict, summary: dict) -> None:
    statuses[summary.get("status")] = statuses.get(summary.get("status"), 0) + 1


def _finish(progress: Progress, statuses: dict, summary: dict) -> None:
    """Count and report a finished task: each run of an ensemble task on its own line."""
    for run in summary.get("members") or [summary]:
        _count(statuses, run)
        progress.finish(run)


def _start(progress: Progress, task: dict) -> None:
    for run in member_tasks(task):
        progress.start(run["name"])


def _mark(task: dict, error: str, status: str = "failed") -> list[dict]:
    """mark_failed for every run of ``task``; their summaries."""
    return [{"name": run["name"], "status": mark_failed(run, error, status=status).get("status"), "error": error}
            for run in member_tasks(task)]


def _on_signals(handler):
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return previous


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _run_inline(tasks, progress, statuses, store) -> bool:
    for task in tasks:
        _start(progress, task)
        summary = execute_run(task)
        _finish(progress, statuses, summary)
        store.rebuild_index()
        if summary.get("interrupted"):
            return True
    return False


class WorkerStartupError(ConfigError):
    """Worker processes exit before they can take a run (one line, like a config error)."""


def worker_command(parent_pid: int, threads: int | None) -> list[str]:
    """The command line of one local worker process (a function so tests can replace it)."""
    command = [sys.executable, "-m", "grok_lightning.sweep.worker", "--serve", "--parent", str(parent_pid)]
    return command + (["--threads", str(threads)] if threads else [])


def _run_local(tasks, progress, statuses, n_workers, threads, store, devices=None) -> bool:
    """Worker subprocesses (``python -m grok_lightning.sweep.worker --serve``), one run at a time.

    Tasks go to a worker's stdin and results come back on its stdout as JSON lines (a reader
    thread per worker feeds one queue). Subprocesses rather than ``multiprocessing``: a worker
    never re-imports the caller's ``__main__``, so a script without an ``if __name__ ==
    "__main__"`` guard cannot make workers re-launch the sweep. Worker stderr (start-up
    warnings, crashes) goes to ``DIR/workers.log``; each run's own output goes to its run.log.
    With ``devices``, each worker sees one of them (``CUDA_VISIBLE_DEVICES``; :func:`pick_device`).
    """
    import json
    import subprocess
    import threading

    events: queue.Queue = queue.Queue()
    pending = list(tasks)
    by_name = {task["name"]: task for task in tasks}
    procs: dict[int, subprocess.Popen] = {}
    holding: dict[int, str | None] = {}
    device_of: dict[int, str] = {}  # live workers' GPUs
    ready: set[int] = set()
    stop = {"flag": False}
    startup_failures: list[int] = []
    next_id = 0
    log_path = store.root / "workers.log"
    log = open(log_path, "a")
    env = dict(os.environ, PYTHONSAFEPATH="1")  # python >= 3.11: no working directory on the workers' sys.path
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)

    def reader(wid: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                events.put((wid, json.loads(line)))
            except ValueError:
                log.write(f"[worker {wid}] unexpected output: {line[:500]}\n")
        events.put((wid, {"kind": "eof"}))

    def spawn() -> None:
        nonlocal next_id
        wid, next_id = next_id, next_id + 1
        worker_env = env
        if devices:
            device_of[wid] = pick_device(devices, device_of.values())
            worker_env = dict(env, CUDA_VISIBLE_DEVICES=device_of[wid])
        proc = subprocess.Popen(worker_command(os.getpid(), threads), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, env=worker_env, text=True, bufsize=1, start_new_session=True)
        procs[wid], holding[wid] = proc, None
        threading.Thread(target=reader, args=(wid, proc), daemon=True, name=f"sweep-worker-{wid}").start()

    def send(wid: int, payload) -> None:
        try:
            procs[wid].stdin.write(json.dumps(payload) + "\n")
            procs[wid].stdin.flush()
        except (BrokenPipeError, OSError, KeyError):
            pass  # it died; its "eof" is on the way

    def dispatch(wid: int) -> None:
        if pending and not stop["flag"]:
            task = pending.pop(0)
            holding[wid] = task["name"]
            send(wid, {"kind": "run", "task": task})
            _start(progress, task)
        else:
            holding[wid] = None
            send(wid, {"kind": "stop"})

    def on_signal(signum, frame):
        if stop["flag"]:
            return
        stop["flag"] = True
        progress.message(f"stopping: {signal.Signals(signum).name} received; interrupting running runs "
                         f"(they resume from their checkpoint next time)")
        # workers run in their own session (a terminal's Ctrl-C reaches only this process): each
        # gets one SIGINT, finishes its epoch, writes last.ckpt and reports its run interrupted
        for wid, proc in procs.items():
            if holding.get(wid) and proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    def on_exit(wid: int) -> None:
        proc = procs.pop(wid)
        device_of.pop(wid, None)
        code = proc.wait()
        lost = holding.pop(wid, None)
        if wid not in ready:
            startup_failures.append(code)
        if lost is not None:
            error = f"worker process died (exit code {code}) while training this run; see {log_path}"
            _finish(progress, statuses, {"members": _mark(by_name[lost], error)})
            store.rebuild_index()
        if pending and not stop["flag"] and len(startup_failures) < max(3, n_workers):
            spawn()

    previous = _on_signals(on_signal)
    try:
        for _ in range(n_workers):
            spawn()
        deadline = None
        while procs:
            if stop["flag"] and deadline is None:
                deadline = time.time() + 60
                for wid in list(procs):
                    if holding.get(wid) is None:
                        send(wid, {"kind": "stop"})
            if deadline is not None and time.time() > deadline:
                break
            try:
                wid, message = events.get(timeout=0.5)
            except queue.Empty:
                continue
            kind = message.get("kind")
            if kind == "eof":
                on_exit(wid)
            elif kind == "ready":
                ready.add(wid)
                dispatch(wid)
            elif kind == "done":
                holding[wid] = None
                summary = message["summary"]
                _finish(progress, statuses, summary)
                store.rebuild_index()
                if summary.get("interrupted"):
                    stop["flag"] = True  # the worker exits by itself after an interrupted run
                    continue
                dispatch(wid)
    finally:
        for wid, proc in list(procs.items()):
            try:
                proc.wait(timeout=10 if stop["flag"] else 30)
            except subprocess.TimeoutExpired:
                proc.kill()  # SIGKILL: Lightning swallows SIGTERM while training
                proc.wait(timeout=10)
        # a worker stopped mid-run left its record 'running': say so in the record
        for wid, name in holding.items():
            for run in member_tasks(by_name[name]) if name is not None else []:
                if store.status_of(run["name"]) == "running":
                    mark_failed(run, "sweep stopped while this run was training", status="interrupted")
        _restore(previous)
        log.close()
    if pending and not stop["flag"]:  # no worker left to take them
        tail = ""
        try:
            lines = [l for l in log_path.read_text(errors="replace").splitlines() if l.strip()]
            tail = f": {lines[-1].strip()[:300]}" if lines else ""
        except OSError:
            pass
        code = startup_failures[-1] if startup_failures else "?"
        raise WorkerStartupError(f"worker processes exit at start-up (exit code {code}){tail} "
                                 f"(full output in {log_path}; --workers 0 runs in this process)")
    return bool(stop["flag"])


# --- Ray ------------------------------------------------------------------------------------------
def _import_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--launcher ray needs Ray: pip install 'grok_lightning[ray]' (or 'ray[default]')") from None
    return ray


def _run_ray(tasks, progress, statuses, address, threads, gpus_per_run, store) -> bool:
    """Each run is one Ray task on a worker that sees the store's directory (shared filesystem)."""
    ray = _import_ray()
    from grok_lightning.sweep.worker import ray_execute

    started_here = False
    if not ray.is_initialized():
        kwargs = {"address": address} if address else {"include_dashboard": False}
        ray.init(ignore_reinit_error=True, log_to_driver=False, **kwargs)
        started_here = True
    gpus = ray.cluster_resources().get("GPU", 0)
    if gpus and not gpus_per_run:  # Ray sets CUDA_VISIBLE_DEVICES="" for a task that asks for no GPU
        progress.message(f"note: the Ray cluster has {gpus:g} GPU(s) but --gpus-per-run is 0: these runs see no GPU "
                         f"and train on CPU")
    remote = ray.remote(num_cpus=threads, num_gpus=gpus_per_run or 0, max_retries=0)(ray_execute)
    refs = {}
    for task in tasks:
        refs[remote.remote(task)] = task
        _start(progress, task)
    interrupted = False
    stop = {"flag": False}

    def on_signal(signum, frame):
        stop["flag"] = True

    previous = _on_signals(on_signal)
    try:
        while refs and not stop["flag"]:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for ref in done:
                task = refs.pop(ref)
                try:
                    summary = ray.get(ref)
                except Exception as err:  # worker crash, task error
                    line = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
                    summary = {"members": _mark(task, f"Ray task failed: {type(err).__name__}: {err}")}
                    for run in summary["members"]:
                        run["error"] = line
                _finish(progress, statuses, summary)
                store.rebuild_index()
        if refs:
            interrupted = True
            for ref in refs:
                ray.cancel(ref, force=True)
            for task in refs.values():
                for run in member_tasks(task):
                    if store.status_of(run["name"]) == "running":
                        mark_failed(run, "sweep stopped while this run was training", status="interrupted")
    finally:
        _restore(previous)
        if started_here:
            ray.shutdown()
    return interrupted
