"""What every launcher does with a task: start it on the progress line, finish it (each run of an
ensemble task on its own line), mark its runs failed or interrupted, and catch stop signals."""

from __future__ import annotations

import signal

from grok_lightning.sweep.packing import member_tasks
from grok_lightning.sweep.progress import Progress
from grok_lightning.sweep.rundir import mark_failed

__all__ = ["count", "finish", "mark", "on_signals", "restore", "start"]


def count(statuses: dict, summary: dict) -> None:
    statuses[summary.get("status")] = statuses.get(summary.get("status"), 0) + 1


def finish(progress: Progress, statuses: dict, summary: dict) -> None:
    """Count and report a finished task: each run of an ensemble task on its own line."""
    for run in summary.get("members") or [summary]:
        count(statuses, run)
        progress.finish(run)


def start(progress: Progress, task: dict) -> None:
    for run in member_tasks(task):
        progress.start(run["name"])


def mark(task: dict, error: str, status: str = "failed") -> list[dict]:
    """mark_failed for every run of ``task``; their summaries."""
    return [{"name": run["name"], "status": mark_failed(run, error, status=status).get("status"), "error": error}
            for run in member_tasks(task)]


def on_signals(handler):
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return previous


def restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
