"""Sweep progress for a person: epochs done / planned, and an ETA from the epochs trained here."""

from __future__ import annotations

import io
import json
import time

from grok_lightning.sweep.progress import Progress
from grok_lightning.sweep.store import SweepStore


def test_progress_counts_epochs_with_an_eta_and_a_heartbeat():
    reached = {"long": 0}
    out = io.StringIO()
    progress = Progress({"short": 10, "long": 990}, final=[], stream=out, read_epoch=lambda name: reached.get(name),
                        poll_s=0.05, heartbeat_s=0.1)
    progress.start("short")
    progress.finish({"name": "short", "status": "completed"})
    assert "[1/2 runs] short: completed | 10/1000 epochs (1%)" in out.getvalue()
    progress.start("long")
    reached["long"] = 500
    deadline = time.time() + 10
    while "long 500/990" not in out.getvalue() and time.time() < deadline:
        time.sleep(0.05)
    progress.close()
    beat = next(line for line in out.getvalue().splitlines() if line.startswith("progress:"))
    assert "510/1000 epochs (51%)" in beat and "ETA" in beat and "running: long 500/990" in beat


def test_a_rerun_without_a_checkpoint_counts_from_epoch_zero(tmp_path):
    """An interrupted run's record says 1,590, but with its checkpoint gone (a fresh machine) the
    rerun starts from scratch: the progress line must not claim the old epochs."""
    store = SweepStore(tmp_path)
    run_dir = store.run_dir("a")
    run_dir.mkdir(parents=True)
    record = {"status": "interrupted", "config": {}, "history": {"epoch": [1580, 1590]}}
    store.record_path("a").write_text(json.dumps(record))
    assert store.run_epoch("a") == 1590 and store.resume_epoch("a") is None
    progress = Progress({"a": 5000}, stream=io.StringIO(), heartbeat_s=0, start_epoch=store.resume_epoch)
    progress.start("a")
    assert progress.running["a"] == 0
    progress.close()
    store.checkpoint_path("a").parent.mkdir()
    store.checkpoint_path("a").write_bytes(b"")
    assert store.resume_epoch("a") == 1590


def test_an_interrupted_run_counts_only_the_epochs_it_reached():
    out = io.StringIO()
    progress = Progress({"a": 3000, "b": 3000}, stream=out, heartbeat_s=0)
    progress.start("a")
    progress.running["a"] = 700
    progress.finish({"name": "a", "status": "interrupted", "final_epoch": 742})
    progress.close()
    assert progress.epochs_done() == 742 and progress.done_runs == 0
    assert out.getvalue().startswith("[0/2 runs] a: interrupted"), out.getvalue()


def test_a_resumed_runs_checkpointed_epochs_are_done_but_not_in_the_rate():
    """Two runs resume at epochs 700 and 680 of 5,000 and train 50 more each in 60 s: the ETA
    must come from those 100 epochs a minute (8,520 left: about 85 minutes), not from 1,480 a
    minute (under 6 minutes)."""
    resumed = {"a": 700, "b": 680}
    progress = Progress({"a": 5000, "b": 5000}, stream=io.StringIO(), heartbeat_s=0,
                        start_epoch=resumed.get)
    progress.start("a")
    progress.start("b")
    assert progress.epochs_done() == 1380 and progress.initial == 1380
    progress.running.update(a=750, b=730)
    progress.t0 = time.time() - 60
    eta = progress.text().split("ETA ")[1]
    hours, minutes, seconds = (int(part) for part in ("0:" * (2 - eta.count(":")) + eta).split(":"))
    assert 84 <= 60 * hours + minutes + seconds / 60 <= 86, eta
    progress.close()
