"""Crashes, corrupted files and concurrent sweeps, each compared field by field with an
uninterrupted sweep: 0 runs lost, 0 duplicated, 0 changed numbers.

Every record field is compared except ``wall_time_s`` and ``cpu_time_s`` (the times of a resumed run are the
sum of its attempts). The grid has one run of each ending: stopped by GrokDetector before its
horizon, trained to its horizon, diverged. Faults are injected in a separate process that kills
itself with SIGKILL at a chosen point (``FAULTY``); the resume is the ordinary ``sweep run``.

The fast tests at the top check the pieces without training (or with one tiny ``fit``): a
checkpoint continued with other hyperparameters is one line naming the field, or, with
``--run.override_hparams``, trains with the new values and the record says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from grok_lightning.callbacks.grok import GrokDetector, StopState
from grok_lightning.checkpoint_io import checkpoint_problem, load_checkpoint
from grok_lightning.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SENTINEL = "PLANTED"


class Plant:
    """Unpickling this opens (creates) a file: what a crafted checkpoint could do."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def plant(path: Path, target: Path) -> None:
    torch.save({"state_dict": {}, "optimizer_states": [], "loops": {}, "callbacks": {}, "x": Plant(str(target))}, path)


# --- without training -----------------------------------------------------------------------------
def test_a_planted_checkpoint_runs_nothing(tmp_path):
    plant(tmp_path / "last.ckpt", tmp_path / SENTINEL)
    problem = checkpoint_problem(tmp_path / "last.ckpt")
    assert "refused by weights_only=True" in problem and "\n" not in problem
    assert "asks the unpickler to call" in problem and "weights_only` set to `False`" not in problem  # not torch's advice
    with pytest.raises(ConfigError, match="not a usable checkpoint"):
        load_checkpoint(tmp_path / "last.ckpt")
    from grok_lightning.sweep.worker import checkpoint_to_resume

    assert checkpoint_to_resume(tmp_path / "last.ckpt") == (None, problem)
    assert not (tmp_path / SENTINEL).exists()


def test_unusable_checkpoints_are_named_in_one_line(tmp_path):
    (tmp_path / "garbage.ckpt").write_bytes(b"\x00garbage" * 100)
    torch.save({"state_dict": {"w": torch.zeros(2)}}, tmp_path / "weights.ckpt")
    torch.save({"state_dict": {}, "optimizer_states": [], "loops": {}}, tmp_path / "full.ckpt")
    with open(tmp_path / "full.ckpt", "rb") as handle:
        (tmp_path / "truncated.ckpt").write_bytes(handle.read()[:200])
    for name, expected in [("garbage", "not a torch checkpoint"), ("weights", "cannot resume training"),
                           ("truncated", "not a usable checkpoint"), ("missing", "no such checkpoint file")]:
        problem = checkpoint_problem(tmp_path / f"{name}.ckpt")
        assert expected in problem and "\n" not in problem, problem
    assert checkpoint_problem(tmp_path / "full.ckpt") is None
    assert checkpoint_problem(tmp_path / "weights.ckpt", resume=False) is None


def test_the_stop_decision_is_in_the_checkpointed_state():
    trainer = SimpleNamespace(should_stop=False)
    module = SimpleNamespace(record_extras={}, diverged_epoch=None)
    detector = GrokDetector(threshold=0.5, extra_epochs=0)
    assert detector.contribute(trainer, module, 7, {"test_acc": 0.9}, {}) == {}
    assert trainer.should_stop and detector.state_dict() == {"grok_epoch": 7, "stopped": True}
    resumed, fresh = GrokDetector(threshold=0.5, extra_epochs=0), SimpleNamespace(should_stop=False)
    resumed.load_state_dict(detector.state_dict())
    resumed.on_train_start(fresh, module)
    assert fresh.should_stop, "a resumed run that had stopped stops again before training"

    module.diverged_epoch = 3
    state = StopState()
    state.setup(trainer, module, "fit")
    saved = state.state_dict()
    assert saved == {"diverged_epoch": 3, "excluded_reason": None, "should_stop": True}
    again, member, fresh = StopState(), SimpleNamespace(diverged_epoch=None), SimpleNamespace(should_stop=False)
    again.load_state_dict(saved)
    again.on_train_start(fresh, member)
    assert member.diverged_epoch == 3 and fresh.should_stop


# --- continuing a checkpoint with other hyperparameters: one line, or an override the record states
@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A tiny ``grok-lightning fit`` run of 2 epochs (p 23, weight decay 1.0, seed 0), trained once."""
    from grok_lightning.cli import main

    root = tmp_path_factory.mktemp("fitted")
    assert main(fit_args(root)) == 0
    return root


def fit_args(folder: Path, config_name: str = "canonical.yaml") -> list[str]:
    """``fit --config tiny.yaml`` with the tiny config's run folder in ``folder`` (tiny/v0)."""
    from conftest import tiny_config

    config = tiny_config(folder, max_epochs=2)
    if config_name != "canonical.yaml":
        config = yaml.safe_load((REPO / "configs" / config_name).read_text())
        config["trainer"]["logger"]["init_args"].update(save_dir=str(folder), name="other", version="v0")
    (folder / "tiny.yaml").write_text(yaml.safe_dump(config))
    return ["fit", "--config", str(folder / "tiny.yaml")]


RESUME_CHANGES = {
    "weight decay on --resume": (["--resume", "--model.weight_decay", "0.5"], "model.weight_decay=0.5"),
    "seed on --resume": (["--resume", "--seed_everything", "5"], "seed_everything=5"),
    "lr on --ckpt_path": (["--ckpt_path", "CKPT", "--model.lr", "0.01"], "model.lr=0.01"),
    "p on --ckpt_path": (["--ckpt_path", "CKPT", "--data.p", "29"], "another model (p 23, this run 29)"),
    "another model's checkpoint": (["--ckpt_path", "CKPT"], "another model (class_path"),
}


@pytest.mark.parametrize("case", list(RESUME_CHANGES))
def test_continuing_a_checkpoint_with_another_hyperparameter_is_one_line(fitted, tmp_path, capfd, case):
    from grok_lightning.cli import main

    shutil.copytree(fitted, tmp_path, dirs_exist_ok=True)
    flags, expected = RESUME_CHANGES[case]
    ckpt = tmp_path / "tiny" / "v0" / "checkpoints" / "last.ckpt"
    record = (tmp_path / "tiny" / "v0" / "record.json").read_bytes()
    argv = fit_args(tmp_path, "tian.yaml" if case == "another model's checkpoint" else "canonical.yaml")
    capfd.readouterr()
    assert main(argv + [str(ckpt) if f == "CKPT" else f for f in flags]) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert (tmp_path / "tiny" / "v0" / "record.json").read_bytes() == record


def test_override_hparams_continues_with_the_new_values_and_the_record_says_so(fitted, tmp_path):
    from grok_lightning.cli import main

    shutil.copytree(fitted, tmp_path, dirs_exist_ok=True)
    flags = ["--resume", "--model.weight_decay", "0.5", "--trainer.max_epochs", "4", "--run.override_hparams", "true"]
    assert main(fit_args(tmp_path) + flags) == 0
    record = json.loads((tmp_path / "tiny" / "v0" / "record.json").read_text())
    assert record["config"]["wd"] == 0.5 and record["final_epoch"] == 4
    assert record["overrides"] == [{"epoch": 2, "fields": {"model.weight_decay": {"checkpoint": 1.0, "now": 0.5}}}]
    groups = load_checkpoint(tmp_path / "tiny" / "v0" / "checkpoints" / "last.ckpt")["optimizer_states"][0]["param_groups"]
    assert {group["weight_decay"] for group in groups} == {0.5}, "the optimizer trained on with the checkpoint's value"


# --- real (tiny) runs -----------------------------------------------------------------------------
def spec() -> dict:
    """One run of each ending (GrokDetector stops run 0 at epoch 4; run 1 trains to epoch 8; run 2
    diverges at epoch 1), a checkpoint every epoch."""
    data = yaml.safe_load((REPO / "configs" / "sweeps" / "tiny_test.yaml").read_text())
    data["base"] = str(REPO / "configs" / "canonical.yaml")
    data["checkpoint_every"] = 1
    data["overrides"].update({"trainer.max_epochs": 8, "grok.extra_epochs": 3})
    data["grid"] = None
    data["zip"] = {"grok.threshold": [0.02, 0.99, 0.99], "lr": [0.001, 0.001, 1.0e30]}
    return {k: v for k, v in data.items() if v is not None}


def run_sweep_here(path: Path, out: Path, stream=None):
    from grok_lightning.sweep.launchers import run_sweep

    return run_sweep(path, out=out, workers=0, threads_per_worker=1, stream=stream or open(os.devnull, "w"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    threads = torch.get_num_threads()
    root = tmp_path_factory.mktemp("reference")
    path = root / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec(), sort_keys=False))
    result = run_sweep_here(path, root / "clean")
    torch.set_num_threads(threads)
    assert result.statuses == {"completed": 2, "diverged": 1}
    records = _records(root / "clean")
    ends = [(r["status"], r["final_epoch"], r["grok_epoch"], r["diverged_epoch"]) for r in records.values()]
    assert ends == [("completed", 4, 0, None), ("completed", 8, None, None), ("diverged", 0, None, 1)], ends
    return SimpleNamespace(path=path, out=root / "clean", records=records)


def _records(out: Path) -> dict[str, dict]:
    from grok_lightning.sweep.store import SweepStore

    store = SweepStore(out)
    return {entry["name"]: json.loads(store.record_path(entry["name"]).read_text()) for entry in store.load_plan()}


def _differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b)) if not (path == "" and key in ("wall_time_s", "cpu_time_s"))
                for d in _differences(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{path}: {a!r} != {b!r}"]


def assert_same_as_reference(out: Path, reference) -> None:
    """0 runs lost, 0 duplicated, 0 changed numbers (every record field but the wall and CPU times)."""
    from grok_lightning.sweep.store import SweepStore

    store = SweepStore(out)
    names = [entry["name"] for entry in store.load_plan()]
    assert names == list(reference.records)
    assert sorted(p.name for p in store.runs_dir.iterdir()) == sorted(names), "a run directory too many or missing"
    for name in names:
        assert len(list(store.run_dir(name).rglob("record.json"))) == 1
        assert not list(store.run_dir(name).glob(".record.json.*")), "a temporary record was left behind"
    records = _records(out)
    differences = {name: _differences(records[name], reference.records[name]) for name in names}
    assert not any(differences.values()), differences


#: the process that crashes: patches one point to SIGKILL itself the n-th time it is reached
FAULTY = r'''
import json, os, signal, sys, time
kind, n, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
count = [0]

def reached():
    count[0] += 1
    if count[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)

from grok_lightning.callbacks.resume import ResumeCheckpoint
from grok_lightning.callbacks import recorder
from grok_lightning.callbacks.evaluation import ScheduledEvaluation

if kind == "after_checkpoint":  # a checkpoint is on disk (and the record written with it)
    save = ResumeCheckpoint.save
    def patched(self, trainer):
        save(self, trainer)
        reached()
    ResumeCheckpoint.save = patched
elif kind == "before_final_record":  # training ended; the final record is not written yet
    fit_end = recorder.RunRecorder.on_fit_end
    def patched(self, trainer, pl_module):
        reached()
        fit_end(self, trainer, pl_module)
    recorder.RunRecorder.on_fit_end = patched
elif kind == "at_train_start":  # the record says running; no checkpoint yet
    start = ScheduledEvaluation.on_train_start
    def patched(self, trainer, pl_module):
        reached()
        start(self, trainer, pl_module)
    ScheduledEvaluation.on_train_start = patched
elif kind == "pause_after_checkpoint":  # wait for ./go, having said so in ./paused
    save = ResumeCheckpoint.save
    def patched(self, trainer):
        save(self, trainer)
        count[0] += 1
        if count[0] == n:
            open("paused", "w").close()
            while not os.path.exists("go"):
                time.sleep(0.05)
    ResumeCheckpoint.save = patched
elif kind == "torn_final_record":  # a filesystem without atomic rename: half the final record
    write = recorder.write_json_atomic
    def patched(path, payload):
        if payload.get("status") in ("completed", "diverged"):
            count[0] += 1
            if count[0] == n:
                text = json.dumps(payload)
                with open(path, "w") as handle:
                    handle.write(text[: len(text) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
        return write(path, payload)
    recorder.write_json_atomic = patched

from grok_lightning.cli import main
sys.exit(main(argv))
'''


def crash(tmp_path: Path, reference, kind: str, n: int) -> Path:
    """Run the sweep in a process that kills itself at the n-th ``kind``; its output dir."""
    script, out = tmp_path / "faulty.py", tmp_path / "crashed"
    script.write_text(FAULTY)
    command = [sys.executable, str(script), kind, str(n), "sweep", "run", str(reference.path), "--out", str(out),
               "--workers", "0", "--threads-per-worker", "1"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == -signal.SIGKILL, f"never reached {kind} #{n}:\n{result.stdout}\n{result.stderr}"
    return out


# (kind, n): counted in plan order; checkpoints are saved after every epoch: run 0 saves #1-#4 (it
# stops at epoch 4), run 1 #5-#12, run 2 #13 (the epoch it diverged in)
CRASHES = {
    "mid-run": ("after_checkpoint", 2),
    "at the checkpoint of the epoch a grokked run stops": ("after_checkpoint", 4),
    "between the last checkpoint and the final record": ("before_final_record", 1),
    "second run mid-run": ("after_checkpoint", 7),
    "at the checkpoint of the epoch a run diverged": ("after_checkpoint", 13),
    "diverged run before its final record": ("before_final_record", 3),
    "before the first checkpoint": ("at_train_start", 2),
    "torn final record": ("torn_final_record", 2),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CRASHES))
def test_crash_then_resume_equals_the_uninterrupted_sweep(tmp_path, reference, case):
    out = crash(tmp_path, reference, *CRASHES[case])
    result = run_sweep_here(reference.path, out)
    assert result.ok and not result.interrupted
    assert_same_as_reference(out, reference)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated", "planted"])
def test_a_damaged_checkpoint_is_reported_once_and_the_run_restarts(tmp_path, reference, damage):
    import io

    out = crash(tmp_path, reference, "after_checkpoint", 7)  # run 1 killed at epoch 2
    ckpt = out / "runs" / list(reference.records)[1] / "checkpoints" / "last.ckpt"
    if damage == "garbage":
        ckpt.write_bytes(os.urandom(4096))
    elif damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:3000])
    else:
        plant(ckpt, tmp_path / SENTINEL)
    log = io.StringIO()
    assert run_sweep_here(reference.path, out, stream=log).ok
    assert not (tmp_path / SENTINEL).exists(), "the planted checkpoint ran code"
    assert log.getvalue().count("restarted from scratch") == 1, log.getvalue()
    attempts = [json.loads(line) for line in (ckpt.parents[1] / "attempts.jsonl").read_text().splitlines()]
    assert attempts[-1]["resumed_from"] is None and "not a usable checkpoint" in attempts[-1]["unusable_checkpoint"]
    assert_same_as_reference(out, reference)
    again = io.StringIO()
    assert run_sweep_here(reference.path, out, stream=again).ok and "restarted" not in again.getvalue()


@pytest.mark.slow
def test_a_truncated_record_of_a_finished_run_is_repaired_without_training_on(tmp_path, reference):
    """The grokked run stopped at epoch 4 and its checkpoint is of that epoch: the repair resumes
    from it and must not train on to the next evaluation."""
    out = tmp_path / "done"
    shutil.copytree(reference.out, out)
    record = out / "runs" / list(reference.records)[0] / "record.json"
    record.write_text(record.read_text()[:500])
    assert run_sweep_here(reference.path, out).ok
    assert_same_as_reference(out, reference)


@pytest.mark.slow
def test_fit_ckpt_path_on_finished_runs_changes_nothing(tmp_path, reference):
    """``fit --ckpt_path`` on the last checkpoint of a finished run (grokked-and-stopped, and
    diverged) writes the same record again."""
    from grok_lightning.run import run_config
    from grok_lightning.sweep.store import SweepStore

    store = SweepStore(reference.out)
    for entry in [store.load_plan()[0], store.load_plan()[2]]:
        config = json.loads(json.dumps(entry["config"]))
        record_path = tmp_path / entry["name"] / "record.json"
        config["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path), name="again", version=entry["name"])
        config["run"].update(record_path=str(record_path), threads=1, name=entry["name"], run_id=entry["run_id"])
        run_config(config, ckpt_path=str(store.checkpoint_path(entry["name"])))
        assert not _differences(json.loads(record_path.read_text()), reference.records[entry["name"]]), entry["name"]


@pytest.mark.slow
def test_a_second_sweep_on_the_same_folder_is_refused_and_changes_nothing(tmp_path, reference):
    """The first sweep is held after a checkpoint of run 1 while the second one tries."""
    out = tmp_path / "shared"
    (tmp_path / "faulty.py").write_text(FAULTY)
    sweep = ["sweep", "run", str(reference.path), "--out", str(out), "--workers", "0", "--threads-per-worker", "1"]
    first = subprocess.Popen([sys.executable, "faulty.py", "pause_after_checkpoint", "6", *sweep],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not (tmp_path / "paused").exists() and first.poll() is None:
            time.sleep(0.05)
        assert (tmp_path / "paused").exists(), first.communicate()
        second = subprocess.run([sys.executable, "-m", "grok_lightning.cli", *sweep], capture_output=True, text=True,
                                cwd=tmp_path, timeout=240)
        assert second.returncode == 2 and "a sweep is already running here" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
    finally:
        (tmp_path / "go").touch()
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stdout + stderr
    assert_same_as_reference(out, reference)
