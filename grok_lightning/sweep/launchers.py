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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from grok_lightning.config import ConfigError
from grok_lightning.records import FINAL_STATUSES
from grok_lightning.sweep.devices import resolve_devices, workers_for_devices
from grok_lightning.sweep.grid import Sweep, expand, load_sweep, validate_types
from grok_lightning.sweep.local_pool import LocalPool, WorkerStartupError, run_inline, worker_command
from grok_lightning.sweep.nofollow import refuse_links
from grok_lightning.sweep.packing import pack_tasks
from grok_lightning.sweep.progress import Progress
from grok_lightning.sweep.ray_pool import import_ray, run_ray
from grok_lightning.sweep.store import SweepStore
from grok_lightning.sweep.worker import make_task

__all__ = ["LAUNCHERS", "LaunchSettings", "SweepResult", "WorkerStartupError", "available_cores", "default_layout",
           "prepare", "profile_label", "run_sweep", "worker_command"]


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
        store.load_plan()  # a plan of the wrong shape is one line before anything is written
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


# --- launchers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchSettings:
    """Where and how wide a launch runs (resolved from ``run_sweep``'s arguments)."""

    workers: int
    threads: int
    address: str | None = None
    gpus_per_run: float = 0.0
    devices: list[str] | None = None


class LocalLauncher:
    """Worker subprocesses on this machine (:class:`~grok_lightning.sweep.local_pool.LocalPool`);
    ``workers=0`` runs in this process."""

    options = ("devices",)

    def check(self, settings: LaunchSettings) -> None:
        if settings.address or settings.gpus_per_run:
            raise ConfigError("--address/--gpus-per-run apply to --launcher ray only")

    def on_gpu(self, settings: LaunchSettings) -> bool:
        """Whether the runs train on a GPU: pinned to devices, or one is visible (a run's
        ``accelerator: auto`` takes it)."""
        if settings.devices:
            return True
        import torch

        return torch.cuda.is_available()

    def describe(self, settings: LaunchSettings) -> str:
        pinned = f" on GPU(s) {','.join(settings.devices)}" if settings.devices else ""
        return f"local {settings.workers} worker(s) x {settings.threads} thread(s){pinned}"

    def run(self, tasks, progress, statuses, store, settings: LaunchSettings) -> bool:
        if settings.workers == 0:
            return run_inline(tasks, progress, statuses, store)
        return LocalPool(tasks, progress, statuses, settings.workers, settings.threads, store, settings.devices).run()


class RayLauncher:
    """One Ray task per run on a cluster that sees the sweep folder (:mod:`.ray_pool`)."""

    options = ("address", "gpus_per_run")

    def check(self, settings: LaunchSettings) -> None:
        import_ray()

    def on_gpu(self, settings: LaunchSettings) -> bool:
        return settings.gpus_per_run > 0

    def describe(self, settings: LaunchSettings) -> str:
        gpus = f", {settings.gpus_per_run} gpu(s)" if settings.gpus_per_run else ""
        return f"ray ({settings.address or 'local cluster'}, {settings.threads} cpu(s){gpus} per run)"

    def run(self, tasks, progress, statuses, store, settings: LaunchSettings) -> bool:
        return run_ray(tasks, progress, statuses, settings.address, settings.threads, settings.gpus_per_run, store)


#: every launcher behind one signature; the command-line choices are these keys
LAUNCHERS = {"local": LocalLauncher(), "ray": RayLauncher()}


def profile_label(sweep: Sweep) -> str:
    """`` (profile smoke)``, or nothing for a sweep without profiles."""
    return f" (profile {sweep.profile})" if sweep.profile else ""


def ensemble_size_for(asked: int, on_gpu: bool, ensemble_on_cpu: bool = False) -> int:
    """The ensemble size a launch packs: ``asked`` on GPUs, 1 (single runs) on CPU unless
    ``ensemble_on_cpu``. Why: on a CPU a vectorised ensemble costs more CPU time per member than
    the same runs trained separately, one thread each (measured: docs/performance.md), so packing
    would only slow a CPU sweep down; on a GPU it is what fills the device.

    >>> ensemble_size_for(64, on_gpu=True), ensemble_size_for(64, on_gpu=False), ensemble_size_for(4, False, True)
    (64, 1, 4)
    """
    return asked if on_gpu or ensemble_on_cpu else 1


def _settings(sweep: Sweep) -> dict:
    return {"checkpoint_min_epochs": sweep.checkpoint_min_epochs, "checkpoint_every": sweep.checkpoint_every,
            "keep_checkpoints": sweep.keep_checkpoints}


# --- the launch -----------------------------------------------------------------------------------
def run_sweep(target: str | Path, profile: str | None = None, out: str | Path | None = None,
              workers: int | None = None, threads_per_worker: int | None = None, launcher: str = "local",
              address: str | None = None, gpus_per_run: float = 0.0, extend: bool = False,
              stream: TextIO | None = None, only: Callable[[dict], bool] | None = None,
              ensemble_size: int = 1, devices=None, runs_per_device: int | None = None,
              ensemble_on_cpu: bool = False) -> SweepResult:
    """Run (or resume) a sweep; return what happened. Raises ``ConfigError`` before any run
    for a malformed sweep, a different grid in ``out`` or a sweep already running there.

    ``workers=0`` runs in this process (no worker processes; for debugging).
    ``ensemble_size`` > 1 packs compatible runs into vectorised ensembles of that many members
    (:mod:`grok_lightning.sweep.packing`); records are the same as without. Runs that train on
    CPU are not packed unless ``ensemble_on_cpu`` (:func:`ensemble_size_for`).
    ``devices`` (a count, or device numbers ``"0,2"``) pins each local worker to one GPU, round
    robin, ``runs_per_device`` workers per GPU (:mod:`grok_lightning.sweep.devices`); it also
    sets the default number of workers to devices x runs per device.
    """
    stream = stream or sys.stdout
    t0 = time.time()
    default_workers, default_threads = default_layout()
    threads = threads_per_worker or default_threads
    if launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher={launcher!r}: must be one of {', '.join(LAUNCHERS)}")
    device_list = resolve_devices(devices, runs_per_device, launcher)
    default_workers = workers_for_devices(device_list, runs_per_device) or default_workers
    chosen = LAUNCHERS[launcher]
    chosen.check(LaunchSettings(0, threads, address, gpus_per_run, device_list))
    if ensemble_size > 1:
        on_gpu = chosen.on_gpu(LaunchSettings(0, threads, address, gpus_per_run, device_list))
        if ensemble_size_for(ensemble_size, on_gpu, ensemble_on_cpu) == 1:
            stream.write(f"--ensemble-size {ensemble_size}: the runs train on CPU, where an ensemble costs more per "
                         "member than single runs (docs/performance.md): single runs (--ensemble-on-cpu packs them)\n")
            ensemble_size = 1
    sweep, runs, store = prepare(target, profile, out, extend=extend)
    refuse_links(store.given)  # before the first write: nothing in the folder may lead out of it
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
        settings = LaunchSettings(n_workers, threads, address, gpus_per_run, device_list)
        packed = len(tasks) != len(todo)
        plan_line = (f"{len(todo)} to run{f' in {len(tasks)} task(s) (ensembles of <= {ensemble_size})' if packed else ''} "
                     f"on {chosen.describe(settings)}") if todo else "nothing to run"
        stream.write(f"sweep {sweep.name}{profile_label(sweep)}: {len(plan)} runs, {skipped} already final, "
                     f"{plan_line} -> {store.root}\n")
        stream.flush()
        progress = Progress.for_plan(plan, todo, store, stream)  # counted in epochs, with an ETA
        statuses: dict[str, int] = {}
        interrupted = chosen.run(tasks, progress, statuses, store, settings) if tasks else False
        progress.close()
        index = store.rebuild_index()
        line = store.status_line(index)
    stream.write(f"{'interrupted: ' if interrupted else ''}{store.root}: {line}\n")
    stream.flush()
    return SweepResult(root=store.root, total=len(plan), skipped=skipped, ran=sum(statuses.values()),
                       statuses=statuses, interrupted=interrupted, status_line=line, wall_s=time.time() - t0)


