"""What a stored config, plan, task, checkpoint or folder from someone else can make a run do:
each case as a user would meet it, then refused in one line, or handled as the docs promise.

1. A checkpoint is checked as a whole before a run continues it: tensor names, shapes and dtypes
   against the model, finite values, the optimizer's param groups against the run's
   hyperparameters, an optimizer state where steps were taken, the run record inside it. ``fit``
   refuses one in a line (the shape error is not cut); a sweep sets its own aside (kept) and
   restarts the run from scratch, reported once.
2. One path rule: a task file's ``run_dir`` and ``run.record_path``, a stored config's
   ModelCheckpoint, logger ``sub_dir`` and profiler, and a sweep's ``name`` resolve inside the run
   (or sweep) folder, or the run is refused in one line; ``config.yaml`` is written without
   following a link planted there; ``python -m grok_lightning`` imports nothing from the
   working directory.
3. A FIFO named ``attempts.jsonl`` or ``record.json`` hangs nothing; two ``fit --resume`` on one
   run folder do not both train; the seed a run records is the one it used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import REPO, tiny_config
from grok_lightning.checkpoint_io import checkpoint_problem
from grok_lightning.cli import main as cli_main
from grok_lightning.config import ConfigError
from grok_lightning.sweep.launchers import run_sweep
from grok_lightning.sweep.store import SweepStore


def fit_args(folder: Path, **changes) -> list[str]:
    """``fit --config tiny.yaml``: 2 epochs at p 23, run folder ``folder/tiny/v0``, a checkpoint
    every epoch."""
    config = tiny_config(folder, max_epochs=2)
    for key, value in changes.items():
        section, _, name = key.partition("__")
        config[section][name] = value
    (folder / "tiny.yaml").write_text(yaml.safe_dump(config))
    return ["fit", "--config", str(folder / "tiny.yaml")]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    root = tmp_path_factory.mktemp("fitted")
    assert cli_main(fit_args(root)) == 0
    return root


def one_line_error(capfd, argv) -> str:
    capfd.readouterr()
    assert cli_main(argv) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


# --- 1. checkpoints -----------------------------------------------------------------------------------
def _groups(c, **values):
    for group in c["optimizer_states"][0]["param_groups"]:
        group.update(values)


def _recorded(c):
    return c["callbacks"]["RunRecorder"]["record"]


def _first_weight(c):
    return next(name for name, t in c["state_dict"].items() if t.is_floating_point() and t.ndim == 2)


def _reshape(c):
    name = _first_weight(c)
    c["state_dict"][name] = torch.zeros(c["state_dict"][name].shape[0] + 1, c["state_dict"][name].shape[1])


def _group_size(c):
    c["optimizer_states"][0]["param_groups"][0]["params"].pop()


TAMPERED = {
    "lr 0.05 in the optimizer": (lambda c: _groups(c, lr=0.05), "optimizer param group 0: lr 0.05, the run's lr is 0.001"),
    "weight decay 50 in the optimizer": (lambda c: _groups(c, weight_decay=50.0),
                                         "optimizer param group 0: weight decay 50.0, the run's is 1.0"),
    "betas in the optimizer": (lambda c: _groups(c, betas=(0.5, 0.5)), "optimizer param group 0: betas [0.5, 0.5]"),
    "an empty optimizer state": (lambda c: c["optimizer_states"][0].update(state={}), "an empty optimizer state"),
    "NaN weights": (lambda c: c["state_dict"][_first_weight(c)].fill_(float("nan")), "holds NaN or infinite values"),
    "the recorder's config.wd": (lambda c: _recorded(c)["config"].update(wd=5.0),
                                 "the run record in its RunRecorder state: config.wd=5.0"),
    "the recorder's history": (lambda c: _recorded(c)["history"]["test_acc"].__setitem__(0, 5.0),
                               "an accuracy must be in [0, 1]"),
    "fp16 tensors": (lambda c: c["state_dict"].update({k: v.half() for k, v in c["state_dict"].items()
                                                       if v.is_floating_point()}), "is torch.float16, the model's is "),
    "a tensor of another shape": (_reshape, "has shape ("),
    "an extra tensor": (lambda c: c["state_dict"].update(extra=torch.zeros(2)), "tensor 'extra' not in the model"),
    "a param group of another size": (_group_size, "optimizer param groups of ["),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_checkpoint_is_one_line_before_fit_trains(fitted, tmp_path, capfd, case):
    change, expected = TAMPERED[case]
    shutil.copytree(fitted, tmp_path, dirs_exist_ok=True)
    ckpt = tmp_path / "tiny" / "v0" / "checkpoints" / "last.ckpt"
    assert checkpoint_problem(ckpt) is None
    checkpoint = torch.load(ckpt, weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, ckpt)
    record = (tmp_path / "tiny" / "v0" / "record.json").read_bytes()
    line = one_line_error(capfd, fit_args(tmp_path) + ["--trainer.max_epochs", "4", "--ckpt_path", str(ckpt)])
    assert expected in line and "not a usable checkpoint" in line, line
    assert (tmp_path / "tiny" / "v0" / "record.json").read_bytes() == record


def tiny_sweep(tmp_path: Path, epochs: int = 4) -> Path:
    spec = yaml.safe_load((REPO / "configs" / "sweeps" / "tiny_test.yaml").read_text())
    spec["base"] = str(REPO / "configs" / "canonical.yaml")
    spec["overrides"]["trainer.max_epochs"] = epochs
    spec["checkpoint_every"], spec["checkpoint_min_epochs"] = 1, 0
    spec["grid"] = {"wd": [1.0], "seed": [0]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def quiet_run(target, **kw):
    return run_sweep(target, workers=0, threads_per_worker=1, stream=open(os.devnull, "w"), **kw)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("swept") / "s"
    assert quiet_run(tiny_sweep(out.parent), out=out).ok
    return out


@pytest.fixture
def sweep_copy(tmp_path, swept):
    out = tmp_path / "s"
    shutil.copytree(swept, out, symlinks=True)
    return out


@pytest.mark.parametrize("case", ["a tensor of another shape", "an extra tensor", "a param group of another size",
                                  "NaN weights", "lr 0.05 in the optimizer"])
def test_a_sweep_sets_an_unusable_checkpoint_aside_and_restarts_the_run_once(sweep_copy, swept, case):
    """The docs' promise: reported once, set aside (not deleted), the run restarts from scratch and
    ends as an uninterrupted run does; the next ``sweep run`` has nothing to report."""
    import io

    store = SweepStore(sweep_copy)
    name = store.load_plan()[0]["name"]
    ckpt, record_path = store.checkpoint_path(name), store.record_path(name)
    checkpoint = torch.load(ckpt, weights_only=True)
    TAMPERED[case][0](checkpoint)
    torch.save(checkpoint, ckpt)
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "status": "running"}))  # killed: it would resume
    log = io.StringIO()
    assert run_sweep(sweep_copy, workers=0, threads_per_worker=1, stream=log).ok
    assert log.getvalue().count("restarted from scratch") == 1, log.getvalue()
    after = json.loads(record_path.read_text())
    expected = json.loads(SweepStore(swept).record_path(name).read_text())
    for key in ("status", "history", "grok_epoch", "final_epoch", "final_test_acc", "config"):
        assert after[key] == expected[key], key
    kept = list((store.run_dir(name) / "unusable_checkpoints").glob("*last.ckpt"))
    assert len(kept) == 1 and kept[0].read_bytes() != ckpt.read_bytes()
    attempts = [json.loads(line) for line in (store.run_dir(name) / "attempts.jsonl").read_text().splitlines()]
    assert attempts[-1]["resumed_from"] is None and "not a usable checkpoint" in attempts[-1]["unusable_checkpoint"]
    again = io.StringIO()
    assert run_sweep(sweep_copy, workers=0, threads_per_worker=1, stream=again).ok
    assert "restarted" not in again.getvalue()


# --- 2. paths ----------------------------------------------------------------------------------------
def _task(out: Path) -> dict:
    from grok_lightning.sweep.worker import make_task

    store = SweepStore(out)
    return make_task(store.load_plan()[0], out, {"checkpoint_every": 1, "checkpoint_min_epochs": 0}, 1)


def run_task(task: dict, tmp_path: Path, capsys) -> tuple[int, list[str]]:
    from grok_lightning.sweep.worker import main

    (tmp_path / "task.json").write_text(json.dumps(task))
    capsys.readouterr()
    code = main(["--task", str(tmp_path / "task.json"), "--no-capture"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_task_file_runs_only_in_its_own_run_folder(sweep_copy, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    task = _task(sweep_copy)
    code, err = run_task({**task, "run_dir": str(victim)}, tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "run_dir=" in err[0] and "own run folder" in err[0], err
    assert (victim / "keep").read_text() == "mine"
    # a folder shaped like a run folder of a folder without a plan
    fake = tmp_path / "elsewhere" / "runs" / task["name"]
    fake.mkdir(parents=True)
    (fake / "keep").write_text("mine")
    code, err = run_task({**task, "run_dir": str(fake)}, tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "plan.json" in err[0], err
    assert (fake / "keep").read_text() == "mine"


def test_a_task_file_cannot_rewrite_another_sweeps_record(sweep_copy, swept, tmp_path, capsys):
    other = SweepStore(swept).record_path(SweepStore(swept).load_plan()[0]["name"])
    before = other.read_bytes()
    task = _task(sweep_copy)
    store = SweepStore(sweep_copy)
    store.record_path(task["name"]).unlink()  # due again
    task["config"]["run"]["record_path"] = str(other)
    code, err = run_task(task, tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "run.record_path=" in err[0], err
    assert other.read_bytes() == before
    changed = _task(sweep_copy)
    changed["config"]["model"]["init_args"]["lr"] = 0.05  # another run's config under this run's id
    code, err = run_task(changed, tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "not the one its plan gives" in err[0], err


WRITERS = {
    "a ModelCheckpoint elsewhere": (
        "trainer.callbacks", [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                               "init_args": {"dirpath": "VICTIM", "filename": "victim", "enable_version_counter": False}}],
        "trainer.callbacks.0.init_args.dirpath"),
    "a ModelCheckpoint filename climbing out": (
        "trainer.callbacks", [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                               "init_args": {"filename": "../../../../victim"}}], "trainer.callbacks.0.init_args.filename"),
    "a logger sub_dir": ("trainer.logger.init_args.sub_dir", "VICTIM", "trainer.logger.init_args.sub_dir"),
    "a profiler's folder": ("trainer.profiler", {"class_path": "lightning.pytorch.profilers.SimpleProfiler",
                                                 "init_args": {"dirpath": "VICTIM", "filename": "victim"}},
                            "trainer.profiler.init_args.dirpath"),
}


@pytest.mark.parametrize("case", list(WRITERS))
def test_a_stored_config_writes_only_inside_its_run_folder(tmp_path, case):
    key, value, field = WRITERS[case]
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "victim.ckpt").write_text("mine")
    path = tiny_sweep(tmp_path, epochs=2)
    spec = yaml.safe_load(path.read_text())
    spec["overrides"][key] = json.loads(json.dumps(value).replace("VICTIM", str(victim)))
    path.write_text(yaml.safe_dump(spec))
    result = quiet_run(path, out=tmp_path / "s")
    assert not result.ok
    store = SweepStore(tmp_path / "s")
    record = json.loads(store.record_path(store.load_plan()[0]["name"]).read_text())
    last = record["error"].strip().splitlines()[-1]
    assert record["status"] == "failed" and field in last and "resolves outside the run folder" in last, last
    assert sorted(p.name for p in victim.iterdir()) == ["victim.ckpt"] and (victim / "victim.ckpt").read_text() == "mine"
    assert not list(tmp_path.glob("victim*.ckpt"))


@pytest.mark.parametrize("name", ["/abs/sweep", "../../../escaped", "..", "a/b"])
def test_a_sweep_name_is_never_a_path(tmp_path, monkeypatch, name, capfd):
    from grok_lightning.sweep.cli import main

    monkeypatch.chdir(tmp_path)
    path = tiny_sweep(tmp_path)
    spec = yaml.safe_load(path.read_text())
    spec["name"] = name
    path.write_text(yaml.safe_dump(spec))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--workers", "0"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a path" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_config_yaml_is_written_without_following_a_link_planted_there(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    run_dir = tmp_path / "tiny" / "v0"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").symlink_to(victim)  # planted after any check, before Lightning saves
    assert cli_main(fit_args(tmp_path) + ["--trainer.max_epochs", "1"]) == 0
    assert victim.read_text() == "mine"
    assert not (run_dir / "config.yaml").is_symlink() and "model:" in (run_dir / "config.yaml").read_text()


def test_python_m_grok_lightning_imports_nothing_from_the_working_directory(swept, tmp_path):
    (tmp_path / "filelock.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').write('x')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)  # this checkout, as an installed package would be found
    done = subprocess.run([sys.executable, "-m", "grok_lightning", "sweep", "status", str(swept)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "ran").exists()


# --- 3. files that block, concurrent fits, seeds ---------------------------------------------------------
def test_fifos_named_like_a_sweeps_files_hang_nothing(sweep_copy, tmp_path, capsys):
    from grok_lightning.sweep.cli import main

    store = SweepStore(sweep_copy)
    name = store.load_plan()[0]["name"]
    (store.run_dir(name) / "attempts.jsonl").unlink()
    os.mkfifo(store.run_dir(name) / "attempts.jsonl")
    for argv in (["status", str(sweep_copy)], ["collect", str(sweep_copy), "--out", str(tmp_path / "t.csv")],
                 ["run", str(sweep_copy), "--workers", "0"]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "attempts.jsonl" in err[0] and "FIFO" in err[0], err
    (store.run_dir(name) / "attempts.jsonl").unlink()
    store.record_path(name).unlink()
    os.mkfifo(store.record_path(name))
    assert main(["status", str(sweep_copy), "--runs"]) == 0
    assert "unreadable" in capsys.readouterr().out
    assert main(["run", str(sweep_copy), "--workers", "0"]) == 2
    assert "record.json: not a regular file" in capsys.readouterr().err


def test_two_fits_on_one_run_folder_do_not_both_train(fitted, tmp_path, capfd):
    from filelock import FileLock

    shutil.copytree(fitted, tmp_path, dirs_exist_ok=True)
    record = (tmp_path / "tiny" / "v0" / "record.json").read_bytes()
    with FileLock(tmp_path / "tiny" / "v0" / ".fit.lock"):  # the first `fit --resume`, still training
        line = one_line_error(capfd, fit_args(tmp_path) + ["--trainer.max_epochs", "4", "--resume"])
    assert "another process is training this run folder" in line
    assert (tmp_path / "tiny" / "v0" / "record.json").read_bytes() == record


@pytest.mark.parametrize("environment, recorded", [(None, None), ("5", 5)])
def test_a_run_without_a_seed_records_the_seed_it_used(tmp_path, monkeypatch, environment, recorded):
    """``seed_everything: false`` seeds nothing: the record says so (``null``), or gives the
    environment's ``PL_GLOBAL_SEED``, which the data split used."""
    from grok_lightning.run import run_config

    if environment is None:
        monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    else:
        monkeypatch.setenv("PL_GLOBAL_SEED", environment)
    config = tiny_config(tmp_path, max_epochs=1)
    config["seed_everything"] = False
    record = run_config(config)
    assert record["seed"] == record["config"]["seed"] == recorded


def test_a_one_example_test_split_gets_a_note():
    from grok_lightning.config import validate_modular_task

    with pytest.warns(UserWarning, match="one test pair of the 529 at p 23"):
        validate_modular_task(23, "add", 528.5 / 529)
    with pytest.raises(ConfigError, match="gives 0 training pairs"):
        validate_modular_task(23, "add", 0.0001)
