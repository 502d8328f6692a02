"""Progress of a sweep for a person: counted in epochs, not runs, with an ETA (tqdm).

Runs of one sweep differ in cost by 100x (a 250-epoch smoke run beside a 5,000-epoch one), so a
run count says little about the time left; the bar counts the epochs of every planned run.

* On a terminal: one tqdm bar ``epochs done/total [elapsed<ETA, rate]``, redrawn while runs
  train, and one line per finished run above it.
* Elsewhere (a log file, ``make`` output in a pipe): the same finished-run lines, each ending
  with the bar's numbers, and every ``heartbeat_s`` (60 s) one line with each running run's
  epoch / max epochs, so that a long run is never a silent wait.

The epoch of a running run is the last evaluated epoch of its record (written after
evaluations, at most every few seconds), read by a background thread every ``poll_s``. A run
that ends early (grokked + extra epochs, diverged, failed) counts its whole horizon as done; an
interrupted one only the epochs it reached, and not as a finished run.
The ETA is tqdm's with ``smoothing=0``: epochs trained since this launch started over the time it has
run (a resumed run's checkpointed epochs are done but not trained here), so it assumes the
remaining epochs cost what the trained ones did on average.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Iterable, TextIO

from tqdm import tqdm

__all__ = ["Progress"]

BAR_FORMAT = "{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} epochs [{elapsed}<{remaining}, {rate_fmt}]"
TEXT_FORMAT = "{n_fmt}/{total_fmt} epochs ({percentage:.0f}%), elapsed {elapsed}, ETA {remaining}"


def _fmt_duration(seconds: float | None) -> str:
    """``_fmt_duration(3725) == '1h02m05s'``."""
    if seconds is None or seconds != seconds:
        return "?"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    """Epochs done / planned over a sweep, with an ETA.

    Args:
        horizons: run name -> its max epochs (every run of the plan).
        final: names of runs already final before this launch (their epochs count as done).
        stream: where to write (default stdout); a terminal gets a redrawn bar.
        read_epoch: run name -> the last epoch it reached (None if unknown); polled for running runs.
        start_epoch: run name -> the epoch it resumes from (None: from scratch). A record left by
            an interrupted run whose checkpoint is gone says nothing about where the rerun starts.
        poll_s: seconds between polls of the running runs.
        heartbeat_s: seconds between progress lines when ``stream`` is not a terminal (0: none).

    >>> import io
    >>> out = io.StringIO()
    >>> progress = Progress({"a": 100, "b": 300}, final=["a"], stream=out, heartbeat_s=0)
    >>> progress.start("b")
    >>> progress.running["b"] = 150
    >>> progress.epochs_done()
    250
    >>> progress.finish({"name": "b", "status": "completed", "grok_epoch": 120})
    >>> progress.close()
    >>> out.getvalue().splitlines()[0].startswith("[2/2 runs] b: completed (grok@120) | 400/400 epochs (100%)")
    True
    """

    def __init__(self, horizons: dict[str, int], final: Iterable[str] = (), stream: TextIO | None = None,
                 read_epoch: Callable[[str], int | None] | None = None, poll_s: float = 5.0,
                 heartbeat_s: float = 60.0, start_epoch: Callable[[str], int | None] | None = None):
        self.horizons = {name: max(1, int(epochs or 1)) for name, epochs in horizons.items()}
        final = set(final) & set(self.horizons)
        self.total_runs, self.done_runs = len(self.horizons), len(final)
        self.initial = sum(self.horizons[name] for name in final)
        self.finished_epochs = self.initial  # final before + finished in this launch
        self.running: dict[str, int] = {}  # name -> epoch reached
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.read_epoch = read_epoch
        self.start_epoch = start_epoch if start_epoch is not None else read_epoch
        self.heartbeat_s = heartbeat_s
        self.t0 = self._last_line = time.time()
        self._lock = threading.RLock()
        self.bar = tqdm(total=sum(self.horizons.values()), initial=self.initial, file=self.stream,
                        disable=not self.tty, bar_format=BAR_FORMAT, smoothing=0, dynamic_ncols=True, leave=True)
        self._stop = threading.Event()
        self._thread = None
        if read_epoch is not None or (not self.tty and heartbeat_s):
            self._thread = threading.Thread(target=self._poll, args=(poll_s,), daemon=True, name="sweep-progress")
            self._thread.start()

    @classmethod
    def for_plan(cls, plan: list[dict], todo: list[dict], store, stream: TextIO | None = None, **kwargs) -> "Progress":
        """A sweep's progress: ``plan`` (the planned entries), ``todo`` (those not final yet) and
        the ``SweepStore`` whose records give the epochs of running runs."""
        from grok_lightning.sweep.grid import max_epochs_of

        horizons = {entry["name"]: max_epochs_of(entry["config"]) or 1 for entry in plan}
        final = set(horizons) - {entry["name"] for entry in todo}
        return cls(horizons, final, stream, read_epoch=store.run_epoch, start_epoch=store.resume_epoch, **kwargs)

    # --- counting ---------------------------------------------------------------------------------
    def epochs_done(self) -> int:
        with self._lock:
            return self.finished_epochs + sum(min(epoch, self.horizons.get(name, epoch))
                                              for name, epoch in self.running.items())

    def text(self) -> str:
        """``'1,234/5,000 epochs (25%), elapsed 05:00, ETA 15:00'`` (tqdm's numbers)."""
        return tqdm.format_meter(self.epochs_done(), self.bar.total, time.time() - self.t0, initial=self.initial,
                                 bar_format=TEXT_FORMAT)

    def _refresh(self) -> None:
        with self._lock:
            self.bar.n = self.epochs_done()
            self.bar.refresh()

    def _poll(self, every: float) -> None:
        while not self._stop.wait(every):
            if self.read_epoch is not None:
                for name in list(self.running):
                    try:
                        epoch = self.read_epoch(name)
                    except Exception:  # a record being replaced, a vanished file: next time
                        continue
                    with self._lock:  # not max(): a run restarted from scratch really is back at 0
                        if epoch is not None and name in self.running:
                            self.running[name] = int(epoch)
            if self.tty:
                self._refresh()
            elif self.heartbeat_s and time.time() - self._last_line >= self.heartbeat_s and self.running:
                self.message(f"progress: {self.text()} | {self.running_text()}")

    def running_text(self, limit: int = 8) -> str:
        with self._lock:
            items = [f"{name} {epoch}/{self.horizons.get(name, '?')}" for name, epoch in self.running.items()]
        more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
        return "running: " + ", ".join(items[:limit]) + more if items else "running: none"

    # --- what the launchers call ------------------------------------------------------------------
    def message(self, text: str) -> None:
        with self._lock:
            if self.tty:
                self.bar.write(text, file=self.stream)
            else:
                self.stream.write(text + "\n")
                self.stream.flush()
            self._last_line = time.time()

    def start(self, name: str) -> None:
        epoch = None
        if self.start_epoch is not None:  # a resumed run starts where its checkpoint left it
            try:
                epoch = self.start_epoch(name)
            except Exception:
                epoch = None
        resumed_at = int(epoch or 0)
        with self._lock:
            self.running[name] = resumed_at
            # Epochs a checkpoint already holds were not trained by this launch: they count as
            # done, but not toward the rate (tqdm's rate is (n - initial) / elapsed), else a
            # resumed sweep's ETA is too short by their whole share.
            self.initial += resumed_at
            self.bar.initial = self.initial
        if self.tty:
            self._refresh()

    def finish(self, summary: dict) -> None:
        name, status = summary["name"], summary.get("status")
        with self._lock:
            reached = max(self.running.pop(name, 0), int(summary.get("final_epoch") or 0))
            if status == "interrupted":  # it resumes later: only the epochs it reached are done
                self.finished_epochs += min(reached, self.horizons.get(name, reached))
            else:
                self.done_runs += 1
                self.finished_epochs += self.horizons.get(name, 0)
        detail = []
        if summary.get("grok_epoch") is not None:
            detail.append(f"grok@{summary['grok_epoch']}")
        if summary.get("final_test_acc") is not None:
            detail.append(f"test_acc {summary['final_test_acc']:.3f}")
        if summary.get("wall_time_s"):
            detail.append(_fmt_duration(summary["wall_time_s"]))
        if summary.get("resumed_from"):
            detail.append("resumed")
        if summary.get("unusable_checkpoint"):  # reported once: the restart removes the file
            detail.append(f"restarted from scratch: {summary['unusable_checkpoint']}")
        if summary.get("error") and status not in ("completed",):
            detail.append(str(summary["error"])[:160])
        line = (f"[{self.done_runs}/{self.total_runs} runs] {name}: {status}"
                + (f" ({', '.join(detail)})" if detail else "")
                + ("" if self.tty else f" | {self.text()}"))
        self.message(line)
        if self.tty:
            self._refresh()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.tty:
            self._refresh()
        self.bar.close()
