"""Local launchers: worker subprocesses on this machine (:class:`LocalPool`), or this process.

Workers are subprocesses (``python -m grok_lightning.sweep.worker --serve``), each importing
torch once and taking one run at a time over JSON lines on its stdin/stdout (a reader thread per
worker feeds one queue), so the pool always knows which worker holds which run. Subprocesses
rather than ``multiprocessing``: a worker never re-imports the caller's ``__main__``, so a script
without an ``if __name__ == "__main__"`` guard cannot make workers re-launch the sweep. Worker
stderr (start-up warnings, crashes) goes to ``DIR/workers.log``; each run's own output goes to
its run.log. With ``devices``, each worker sees one of them (``CUDA_VISIBLE_DEVICES``).

A worker that dies (OOM, segfault) marks its run ``failed`` and is replaced; workers that cannot
start stop the sweep with one line. Workers run in their own session and exit when the pool's
process dies, even by SIGKILL (``worker.die_with_parent``). SIGINT or SIGTERM to the pool is
passed to each busy worker once: it finishes its epoch, writes ``last.ckpt`` and reports the run
``interrupted``; the pool waits up to a minute for that.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from grok_lightning.config import ConfigError
from grok_lightning.sweep import dispatch
from grok_lightning.sweep.devices import pick_device
from grok_lightning.sweep.nofollow import open_no_follow
from grok_lightning.sweep.packing import member_tasks
from grok_lightning.sweep.rundir import mark_failed
from grok_lightning.sweep.worker import execute_run

__all__ = ["LocalPool", "WorkerStartupError", "run_inline", "worker_command"]


class WorkerStartupError(ConfigError):
    """Worker processes exit before they can take a run (one line, like a config error)."""


def worker_command(parent_pid: int, threads: int | None) -> list[str]:
    """The command line of one local worker process (a function so tests can replace it)."""
    command = [sys.executable, "-m", "grok_lightning.sweep.worker", "--serve", "--parent", str(parent_pid)]
    return command + (["--threads", str(threads)] if threads else [])


def run_inline(tasks, progress, statuses, store) -> bool:
    """Every task in this process, one after the other (``--workers 0``, for debugging)."""
    for task in tasks:
        dispatch.start(progress, task)
        summary = execute_run(task)
        dispatch.finish(progress, statuses, summary)
        store.rebuild_index()
        if summary.get("interrupted"):
            return True
    return False


class LocalPool:
    """``n_workers`` worker subprocesses over ``tasks``; :meth:`run` returns whether it was stopped."""

    def __init__(self, tasks, progress, statuses: dict, n_workers: int, threads: int | None, store,
                 devices: list[str] | None = None):
        self.pending = list(tasks)
        self.by_name = {task["name"]: task for task in tasks}
        self.progress, self.statuses, self.store = progress, statuses, store
        self.n_workers, self.threads, self.devices = n_workers, threads, devices
        self.events: queue.Queue = queue.Queue()
        self.procs: dict[int, subprocess.Popen] = {}
        self.holding: dict[int, str | None] = {}
        self.device_of: dict[int, str] = {}  # live workers' GPUs
        self.ready: set[int] = set()
        self.stopping = False
        self.startup_failures: list[int] = []
        self.next_id = 0
        self.log_path = store.root / "workers.log"
        self.env = dict(os.environ, PYTHONSAFEPATH="1")  # python >= 3.11: no working directory on sys.path
        if threads:
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                self.env[var] = str(threads)

    # --- workers --------------------------------------------------------------------------------
    def _read(self, wid: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self.events.put((wid, json.loads(line)))
            except ValueError:
                self.log.write(f"[worker {wid}] unexpected output: {line[:500]}\n")
        self.events.put((wid, {"kind": "eof"}))

    def spawn(self) -> None:
        wid, self.next_id = self.next_id, self.next_id + 1
        env = self.env
        if self.devices:
            self.device_of[wid] = pick_device(self.devices, self.device_of.values())
            env = dict(self.env, CUDA_VISIBLE_DEVICES=self.device_of[wid])
        proc = subprocess.Popen(worker_command(os.getpid(), self.threads), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=self.log, env=env, text=True, bufsize=1, start_new_session=True)
        self.procs[wid], self.holding[wid] = proc, None
        threading.Thread(target=self._read, args=(wid, proc), daemon=True, name=f"sweep-worker-{wid}").start()

    def send(self, wid: int, payload) -> None:
        try:
            self.procs[wid].stdin.write(json.dumps(payload) + "\n")
            self.procs[wid].stdin.flush()
        except (BrokenPipeError, OSError, KeyError):
            pass  # it died; its "eof" is on the way

    def dispatch(self, wid: int) -> None:
        if self.pending and not self.stopping:
            task = self.pending.pop(0)
            self.holding[wid] = task["name"]
            self.send(wid, {"kind": "run", "task": task})
            dispatch.start(self.progress, task)
        else:
            self.holding[wid] = None
            self.send(wid, {"kind": "stop"})

    def on_signal(self, signum, frame) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.progress.message(f"stopping: {signal.Signals(signum).name} received; interrupting running runs "
                              f"(they resume from their checkpoint next time)")
        # workers run in their own session (a terminal's Ctrl-C reaches only this process): each
        # gets one SIGINT, finishes its epoch, writes last.ckpt and reports its run interrupted
        for wid, proc in self.procs.items():
            if self.holding.get(wid) and proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    def on_exit(self, wid: int) -> None:
        proc = self.procs.pop(wid)
        self.device_of.pop(wid, None)
        code = proc.wait()
        lost = self.holding.pop(wid, None)
        if wid not in self.ready:
            self.startup_failures.append(code)
        if lost is not None:
            error = f"worker process died (exit code {code}) while training this run; see {self.log_path}"
            dispatch.finish(self.progress, self.statuses, {"members": dispatch.mark(self.by_name[lost], error)})
            self.store.rebuild_index()
        if self.pending and not self.stopping and len(self.startup_failures) < max(3, self.n_workers):
            self.spawn()

    def on_message(self, wid: int, message: dict) -> None:
        kind = message.get("kind")
        if kind == "eof":
            self.on_exit(wid)
        elif kind == "ready":
            self.ready.add(wid)
            self.dispatch(wid)
        elif kind == "done":
            self.holding[wid] = None
            summary = message["summary"]
            dispatch.finish(self.progress, self.statuses, summary)
            self.store.rebuild_index()
            if summary.get("interrupted"):
                self.stopping = True  # the worker exits by itself after an interrupted run
                return
            self.dispatch(wid)

    # --- the loop -------------------------------------------------------------------------------
    def run(self) -> bool:
        self.log = open_no_follow(self.log_path, "a")
        previous = dispatch.on_signals(self.on_signal)
        try:
            for _ in range(self.n_workers):
                self.spawn()
            deadline = None
            while self.procs:
                if self.stopping and deadline is None:
                    deadline = time.time() + 60
                    for wid in list(self.procs):
                        if self.holding.get(wid) is None:
                            self.send(wid, {"kind": "stop"})
                if deadline is not None and time.time() > deadline:
                    break
                try:
                    wid, message = self.events.get(timeout=0.5)
                except queue.Empty:
                    continue
                self.on_message(wid, message)
        finally:
            self._close()
            dispatch.restore(previous)
            self.log.close()
        if self.pending and not self.stopping:  # no worker left to take them
            raise WorkerStartupError(self._startup_failure())
        return self.stopping

    def _close(self) -> None:
        for proc in list(self.procs.values()):
            try:
                proc.wait(timeout=10 if self.stopping else 30)
            except subprocess.TimeoutExpired:
                proc.kill()  # SIGKILL: a worker that ignored its stop
                proc.wait(timeout=10)
        # a worker stopped mid-run left its record 'running': say so in the record
        for name in self.holding.values():
            for run in member_tasks(self.by_name[name]) if name is not None else []:
                if self.store.status_of(run["name"]) == "running":
                    mark_failed(run, "sweep stopped while this run was training", status="interrupted")

    def _startup_failure(self) -> str:
        tail = ""
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
            tail = f": {lines[-1].strip()[:300]}" if lines else ""
        except OSError:
            pass
        code = self.startup_failures[-1] if self.startup_failures else "?"
        return (f"worker processes exit at start-up (exit code {code}){tail} "
                f"(full output in {self.log_path}; --workers 0 runs in this process)")
