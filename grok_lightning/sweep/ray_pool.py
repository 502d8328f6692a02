"""The Ray launcher: each run (or ensemble task) is one Ray task on a worker that sees the sweep
directory (a shared filesystem); ``--address`` joins a cluster, else a local one is started."""

from __future__ import annotations

from grok_lightning.config import ConfigError
from grok_lightning.sweep import dispatch
from grok_lightning.sweep.packing import member_tasks
from grok_lightning.sweep.rundir import mark_failed

__all__ = ["import_ray", "run_ray"]


def import_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--launcher ray needs Ray: pip install 'grok_lightning[ray]' (or 'ray[default]')") from None
    return ray


def run_ray(tasks, progress, statuses, address, threads, gpus_per_run, store) -> bool:
    """Each run is one Ray task on a worker that sees the store's directory (shared filesystem)."""
    ray = import_ray()
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
        dispatch.start(progress, task)
    interrupted = False
    stop = {"flag": False}

    def on_signal(signum, frame):
        stop["flag"] = True

    previous = dispatch.on_signals(on_signal)
    try:
        while refs and not stop["flag"]:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for ref in done:
                task = refs.pop(ref)
                try:
                    summary = ray.get(ref)
                except Exception as err:  # worker crash, task error
                    line = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
                    summary = {"members": dispatch.mark(task, f"Ray task failed: {type(err).__name__}: {err}")}
                    for run in summary["members"]:
                        run["error"] = line
                dispatch.finish(progress, statuses, summary)
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
        dispatch.restore(previous)
        if started_here:
            ray.shutdown()
    return interrupted
