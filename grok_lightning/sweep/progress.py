"""Progress of a sweep on the terminal: one line per finished run, ``done/total`` and an ETA,
and a redrawn bar when the output is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _fmt_duration(seconds: float | None) -> str:
    """``_fmt_duration(3725) == '1h02m05s'``."""
    if seconds is None or seconds != seconds:
        return "?"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    """done/total with an ETA: a redrawn bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, already: int, stream: TextIO | None = None, width: int = 28):
        self.total, self.done, self.already = total, already, already  # done: final or finished here
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self.t0 = time.time()
        self.running: set[str] = set()
        self.failed = 0

    def eta(self) -> float | None:
        finished = self.done - self.already
        remaining = self.total - self.done
        if remaining <= 0:
            return 0.0
        if finished <= 0:
            return None
        return (time.time() - self.t0) / finished * remaining

    def bar(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"running {len(self.running)} | elapsed {_fmt_duration(time.time() - self.t0)} "
                f"ETA {_fmt_duration(self.eta())}")

    def message(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + "\n" + self.bar())
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, name: str) -> None:
        self.running.add(name)
        if self.tty:
            self.stream.write("\r\033[K" + self.bar())
            self.stream.flush()

    def finish(self, summary: dict) -> None:
        self.running.discard(summary["name"])
        status = summary.get("status")
        self.done += 1
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
        line = (f"[{self.done}/{self.total}] {summary['name']}: {status}"
                + (f" ({', '.join(detail)})" if detail else "")
                + ("" if self.tty else f" | ETA {_fmt_duration(self.eta())}"))
        self.message(line)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.bar() + "\n")
            self.stream.flush()
