"""Stop signals: a run finishes its epoch, writes last.ckpt, records `interrupted` and exits
non-zero; `fit --resume` continues it to the same numbers as a run that never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grok_lightning.run import run_config

TIMES = ("wall_time_s", "cpu_time_s", "error")


def _config(tmp_path: Path, tiny, version=None) -> Path:
    config = tiny(max_epochs=300)
    config["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path / "runs"), name="tiny", version=version)
    config["run"].update(checkpoint_every=1000, checkpoint_minutes=0)  # only the signal writes a checkpoint
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _fit(config: Path, *extra, cwd=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grok_lightning.cli", "fit", "--config", str(config), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)


def _first_difference(resumed: dict, uninterrupted: dict) -> str:
    """Where two histories first differ (key, epoch, values): what a failure needs to be read."""
    if resumed.get("epoch") != uninterrupted.get("epoch"):
        return f"evaluated epochs differ: resumed {resumed.get('epoch')} vs uninterrupted {uninterrupted.get('epoch')}"
    for key in sorted(set(resumed) | set(uninterrupted)):
        a, b = resumed.get(key), uninterrupted.get(key)
        if a != b:
            if a is None or b is None or len(a) != len(b):
                return f"{key}: missing from one history, or of another length"
            i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            return f"{key} first differs at epoch {resumed['epoch'][i]}: resumed {a[i]!r} vs uninterrupted {b[i]!r}"
    return "histories equal"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_checkpoints_records_interrupted_and_resume_gives_the_same_numbers(tmp_path, tiny, sig):
    config = _config(tmp_path, tiny)
    proc = _fit(config)
    record_path = tmp_path / "runs" / "tiny" / "version_0" / "record.json"
    # the signal must land mid-training: on a loaded machine start-up alone can take minutes, so
    # wait for the run's epoch 4 rather than for a fixed time, and fail plainly if it never comes
    deadline, reached = time.time() + 600, False
    while not reached and time.time() < deadline and proc.poll() is None:
        try:
            reached = json.loads(record_path.read_text())["history"]["epoch"][-1] >= 4
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.02)
    if not reached:  # stop the run rather than leave it training past the test
        proc.kill()
        pytest.fail(f"the run never reached epoch 4, so the signal would not land mid-training:\n{proc.communicate()[0]}")
    proc.send_signal(sig)
    output = proc.communicate(timeout=600)[0]
    assert proc.returncode == 128 + sig, output
    assert "`weights_only` was not set" not in output  # the checkpoint is written as a full one, by intent
    stopped = json.loads(record_path.read_text())
    assert stopped["status"] == "interrupted" and "stopped by" in stopped["error"]
    assert (record_path.parent / "checkpoints" / "last.ckpt").is_file()
    assert stopped["history"]["epoch"][-1] < 300

    resumed = _fit(config, "--resume")
    output = resumed.communicate(timeout=900)[0]
    assert resumed.returncode == 0, output
    assert not (tmp_path / "runs" / "tiny" / "version_1").exists()  # the same folder, not a new version
    final = json.loads(record_path.read_text())

    reference = tiny(max_epochs=300)
    reference["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path / "reference"))
    uninterrupted = run_config(reference)
    assert final["status"] == "completed"
    assert final["history"] == uninterrupted["history"], _first_difference(final["history"], uninterrupted["history"])
    assert {k: v for k, v in final.items() if k not in TIMES + ("config", "environment", "events", "name", "run_id")} == \
        {k: v for k, v in uninterrupted.items() if k not in TIMES + ("config", "environment", "events", "name", "run_id")}


def test_resume_without_a_checkpoint_starts_a_new_run(tmp_path, tiny):
    config = _config(tmp_path, tiny)
    data = yaml.safe_load(config.read_text())
    data["trainer"]["max_epochs"] = 2
    config.write_text(yaml.safe_dump(data))
    done = subprocess.run([sys.executable, "-m", "grok_lightning.cli", "fit", "--config", str(config), "--resume"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "runs" / "tiny" / "version_0" / "record.json").read_text())["status"] == "completed"


def test_a_signal_to_the_launcher_reaches_its_workers(tmp_path):
    """`kill -INT <launcher>` (not the terminal's process group): the workers stop their runs at
    the end of the epoch with a checkpoint, the launcher exits 130 within seconds, and the
    records say interrupted."""
    spec = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "sweeps" / "tiny_test.yaml").read_text())
    spec["base"] = str(Path(__file__).resolve().parents[1] / "configs" / "canonical.yaml")
    spec["overrides"].update({"trainer.max_epochs": 5000, "run.checkpoint_minutes": 0})
    spec.update(checkpoint_every=10000, grid={"wd": [1.0], "seed": [0, 1]})
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "grok_lightning.cli", "sweep", "run", str(path), "--out", str(out),
                             "--workers", "2", "--threads-per-worker", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 180
    records = []
    while time.time() < deadline:
        records = [json.loads(p.read_text()) for p in out.glob("runs/*/record.json") if p.stat().st_size]
        if len(records) == 2 and all(len(r["history"]["epoch"]) >= 3 for r in records):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    start = time.time()
    output = proc.communicate(timeout=90)[0]
    assert proc.returncode == 130, output
    assert time.time() - start < 30
    for record_path in out.glob("runs/*/record.json"):
        record = json.loads(record_path.read_text())
        assert record["status"] == "interrupted", record.get("error")
        assert (record_path.parent / "checkpoints" / "last.ckpt").is_file()
