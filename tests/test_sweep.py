"""Sweeps: stable ids, one-line errors, the store, and a sweep that survives SIGKILL + resume."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grok_lightning.config import ConfigError
from grok_lightning.records import new_record, write_json_atomic
from grok_lightning.sweep.grid import expand, load_sweep, run_id_of, validate_types
from grok_lightning.sweep.store import MAIN_COLUMNS, SweepLock, SweepLockedError, SweepStore, collect

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "sweeps" / "tiny_test.yaml"
CANONICAL = REPO / "configs" / "canonical.yaml"


def tiny_spec(**changes) -> dict:
    spec = yaml.safe_load(TINY.read_text())
    spec["base"] = str(CANONICAL)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def write_spec(tmp_path: Path, spec, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    return path


# --- grid: stable ids and names -------------------------------------------------------------------
def test_same_grid_gives_same_ids_and_readable_names():
    first, second = expand(load_sweep(TINY)), expand(load_sweep(TINY))
    assert [r.run_id for r in first] == [r.run_id for r in second]
    assert len({r.run_id for r in first}) == len(first) == 6
    assert [r.name for r in first][:2] == [f"wd0.1_seed0_{first[0].run_id[:8]}", f"wd0.1_seed1_{first[1].run_id[:8]}"]
    assert all(re.fullmatch(r"wd[0-9.]+_seed\d_[0-9a-f]{8}", r.name) for r in first)
    assert first[0].config["model"]["init_args"]["weight_decay"] == 0.1 and first[0].config["seed_everything"] == 0
    assert first[0].config["data"]["init_args"]["p"] == 23  # overrides applied


def test_changing_one_value_changes_only_that_runs_id(tmp_path):
    before = {(r.axes["model.init_args.weight_decay"], r.axes["seed_everything"]): r.run_id
              for r in expand(load_sweep(write_spec(tmp_path, tiny_spec(), "a.yaml")))}
    spec = tiny_spec(grid={"wd": [0.1, 2.0], "seed": [2, 1, 0]})  # new lambda, seeds reordered
    after = {(r.axes["model.init_args.weight_decay"], r.axes["seed_everything"]): r.run_id
             for r in expand(load_sweep(write_spec(tmp_path, spec, "b.yaml")))}
    for seed in (0, 1, 2):
        assert after[(0.1, seed)] == before[(0.1, seed)]
        assert after[(2.0, seed)] not in before.values()
    # an int for a float field is the same run; placement keys do not enter the id
    ints = expand(load_sweep(write_spec(tmp_path, tiny_spec(grid={"wd": [1], "seed": [0]}), "c.yaml")))
    assert ints[0].run_id == before[(1.0, 0)]
    placed = copy.deepcopy(ints[0].config)
    placed["trainer"]["logger"]["init_args"].update(save_dir="/elsewhere", version="x")
    placed["run"].update(threads=7, checkpoint_every=3, record_path="/x/record.json")
    assert run_id_of(placed) == ints[0].run_id


def test_aliases_zip_and_profiles(tmp_path):
    spec = tiny_spec(grid={"model.lr": [0.001]}, zip={"p": [23, 29], "operation": ["add", "mul"]})
    runs = expand(load_sweep(write_spec(tmp_path, spec)))
    assert [(r.config["data"]["init_args"]["p"], r.config["data"]["init_args"]["operation"]) for r in runs] == \
        [(23, "add"), (29, "mul")]
    assert runs[1].name.startswith("lr0.001_p29_mul_")
    paper = load_sweep(REPO / "configs" / "sweeps" / "canonical_wd.yaml", "paper")
    runs = expand(paper)
    assert len(runs) == 14 * 10 + 3 * 20  # the paper's cohort: S0 at 14 lambdas, S1 (20 more seeds) at 3
    assert {r.config["trainer"]["max_epochs"] for r in runs} == {5000}
    assert {r.config["run"]["profile"] for r in runs} == {"paper"}
    seeds = {r.axes["seed_everything"] for r in runs}
    assert len(seeds) == 30 and {7, 11, 31, 42, 73, 97, 123, 199, 401, 977} <= seeds
    smoke = expand(load_sweep(REPO / "configs" / "sweeps" / "canonical_wd.yaml", "smoke"))
    assert 4 <= len(smoke) <= 24 and smoke[0].config["model"]["init_args"]["n_layers"] == 2
    assert smoke[0].config["run"]["profile"] == "smoke"
    validate_types(smoke)
    with pytest.raises(ConfigError, match="has profiles paper, smoke"):
        load_sweep(REPO / "configs" / "sweeps" / "canonical_wd.yaml", "gpu")


def test_a_label_axis_names_runs_and_stays_out_of_config_and_id(tmp_path):
    spec = tiny_spec(grid={"seed": [0]}, zip={"p": [23, 29], "operation": ["add", "mul"], "label": ["small", "big"]})
    labelled = expand(load_sweep(write_spec(tmp_path, spec, "a.yaml")))
    spec["zip"].pop("label")
    plain = expand(load_sweep(write_spec(tmp_path, spec, "b.yaml")))
    assert [r.run_id for r in labelled] == [r.run_id for r in plain]
    assert [r.name for r in labelled] == [f"seed0_small_{plain[0].run_id[:8]}", f"seed0_big_{plain[1].run_id[:8]}"]
    assert "label" not in json.dumps(labelled[0].config) and labelled[1].axes["label"] == "big"


def test_base_takes_a_list_and_a_profile_adds_to_it(tmp_path):
    """Base configs merge in order, like repeated --config files; a profile's base comes last."""
    (tmp_path / "small.yaml").write_text("model:\n  init_args:\n    lr: 0.002\n    init: default\n")
    (tmp_path / "heads.yaml").write_text("model:\n  init_args:\n    lr: 0.003\n")
    spec = tiny_spec(base=[str(CANONICAL), str(tmp_path / "small.yaml")], grid={"wd": [0.1], "seed": [0]},
                     profiles={"two": {"base": str(tmp_path / "heads.yaml")}, "one": {}})
    two = expand(load_sweep(write_spec(tmp_path, spec), "two"))[0].config["model"]["init_args"]
    one = expand(load_sweep(write_spec(tmp_path, spec), "one"))[0].config["model"]["init_args"]
    canonical = yaml.safe_load(CANONICAL.read_text())["model"]["init_args"]
    assert (two["lr"], two["init"], two["betas"]) == (0.003, "default", canonical["betas"])
    assert (one["lr"], one["init"]) == (0.002, "default")
    # the lock-in sweep gets its four detectors from a shared overlay
    main = expand(load_sweep(REPO / "configs" / "sweeps" / "lockin_main.yaml", "smoke"))[0].config
    assert [c["init_args"]["window"] for c in main["trainer"]["callbacks"]] == [5, 10, 20, 30]
    with pytest.raises(ConfigError, match="must be a config file or a list"):
        load_sweep(write_spec(tmp_path, tiny_spec(base=[str(CANONICAL), 3])))


def test_lockin_medium_profiles_are_the_papers_protocol():
    for name in ("lockin_main", "lockin_relu", "lockin_eta", "lockin_eta_long", "lockin_mp"):
        path = REPO / "configs" / "sweeps" / f"{name}.yaml"
        medium, paper = expand(load_sweep(path, "medium")), expand(load_sweep(path, "paper"))
        assert len(medium) == len(paper)
        for m, p in zip(medium, paper):
            assert m.config["trainer"]["max_epochs"] == p.config["trainer"]["max_epochs"]
            assert m.config["model"] == p.config["model"] and m.config["run"]["profile"] == "medium"


# --- malformed sweep files: one line, before anything runs ----------------------------------------
BAD_SPECS = {
    "unknown init arg": (dict(grid={"model.init_args.weight_decy": [0.1]}), "GrokkingModule has no argument 'weight_decy'"),
    "unknown section": (dict(grid={"modle.lr": [0.1]}), "unknown key 'modle.lr'"),
    "unknown trainer arg": (dict(overrides={"trainer.max_epoch": 3}), "Trainer has no argument 'max_epoch'"),
    "unknown sweep key": (dict(grdi={"wd": [1.0]}), "unknown top-level key(s) grdi"),
    "empty grid": (dict(grid={}), "empty grid"),
    "empty axis": (dict(grid={"wd": []}), "grid.wd: empty list"),
    "axis not a list": (dict(grid={"wd": 0.1}), "must be a list of values"),
    "zip length mismatch": (dict(grid=None, zip={"wd": [0.1, 1.0], "seed": [1, 2, 3]}), "zip axes must have equal lengths"),
    "duplicate runs": (dict(grid={"wd": [0.1, 0.1]}), "have the same config"),
    "missing base": (dict(base="configs/nope.yaml"), "no such config"),
    "wrong type": (dict(grid={"model.init_args.n_layers": ["abc"]}), "n_layers"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_malformed_sweep_is_one_config_error_line(tmp_path, case):
    changes, message = BAD_SPECS[case]
    path = write_spec(tmp_path, tiny_spec(**changes))
    with pytest.raises(ConfigError) as info:
        validate_types(expand(load_sweep(path)))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_yaml_and_cli_error_runs_nothing(tmp_path, capsys):
    from grok_lightning.sweep.cli import main

    path = write_spec(tmp_path, "base: configs/canonical.yaml\ngrid: {wd: [0.1, 1.0\n")
    with pytest.raises(ConfigError, match=r"not valid YAML \(line"):
        load_sweep(path)
    out = tmp_path / "out"
    for bad in (path, write_spec(tmp_path, tiny_spec(grid={"wd": [0.1], "model.init_args.nheads": [2]}), "b.yaml")):
        assert main(["run", str(bad), "--out", str(out), "--workers", "0"]) == 2
        err = capsys.readouterr().err
        assert len([l for l in err.splitlines() if l.startswith("error:")]) == 1 and "Traceback" not in err
        assert not out.exists(), "nothing ran, nothing was written"


# --- store: status, collect, lock -----------------------------------------------------------------
def test_a_stored_plan_survives_a_moved_repository_but_not_an_edit(tmp_path):
    """A checkpoint path to start from is a placement key: a clone elsewhere resumes the same
    runs; a changed hyperparameter in plan.json is still refused, naming the field."""
    def runs_from(start_from: str):
        sweep = load_sweep(write_spec(tmp_path, tiny_spec(zip={"run.start_from": [start_from]}), "s.yaml"))
        return sweep, expand(sweep)

    sweep, runs = runs_from("/old/clone/peak.ckpt")
    store = SweepStore(tmp_path / "store")
    store.initialize(sweep, runs)
    moved_sweep, moved = runs_from("/new/clone/peak.ckpt")
    store.initialize(moved_sweep, moved)  # same run ids: the stored plan is kept as it is
    assert [e["axes"]["run.start_from"] for e in store.checked_plan(moved)] == ["/new/clone/peak.ckpt"] * 6
    plan = json.loads((store.root / "plan.json").read_text())
    plan["runs"][0]["config"]["model"]["init_args"]["lr"] = 0.5
    (store.root / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ConfigError, match="another config"):
        store.checked_plan(moved)


def _fake_store(tmp_path) -> tuple[SweepStore, list]:
    sweep = load_sweep(TINY)
    runs = expand(sweep)
    store = SweepStore(tmp_path / "store")
    store.initialize(sweep, runs)
    for run, status in zip(runs, ("completed", "diverged", "failed", "running", "interrupted")):
        record = new_record({"wd": run.axes["model.init_args.weight_decay"], "seed": run.axes["seed_everything"],
                             "data": {"operation": "add", "p": 23}, "run_id": run.run_id}, run_id=run.run_id)
        record.update(status=status, final_test_acc=0.5, wall_time_s=1.0)
        record["grok_epoch"] = 4 if status == "completed" else None
        if status == "completed":  # its grok epoch stands on the test accuracy there
            record["history"] = {"epoch": [4], "test_acc": [1.0]}
        record["error"] = "Traceback...\nerror: ConfigError: boom" if status == "failed" else None
        if status == "running":
            record["history"] = {"epoch": [1, 2, 3], "test_acc": [0.1, 0.2, 0.3]}
        write_json_atomic(store.record_path(run.name), record)
    return store, runs


def test_status_counts(tmp_path, capsys):
    from grok_lightning.sweep.cli import main

    store, runs = _fake_store(tmp_path)
    index = store.rebuild_index()
    assert index["counts"] == {"completed": 1, "running": 1, "failed": 1, "diverged": 1, "interrupted": 1,
                               "excluded": 0, "unreadable": 0, "pending": 1}
    assert json.loads((store.root / "index.json").read_text())["runs"][runs[2].name]["error"] == "error: ConfigError: boom"
    assert main(["status", str(store.root), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "6 runs: done 1, running 1, failed 1, diverged 1, interrupted 1, pending 1" in out
    assert "no sweep is running here" in out and f"pending     {runs[5].name}" in out
    horizon = runs[3].config["trainer"]["max_epochs"]
    assert f"running  {runs[3].name}: epoch 3/{horizon}" in out  # epoch / max epochs per running run
    assert main(["status", str(tmp_path)]) == 2  # not a sweep directory: one line
    assert "not a sweep directory" in capsys.readouterr().err


def test_collect_columns_csv_and_parquet_fallback(tmp_path, capsys):
    import pandas as pd

    from grok_lightning.sweep.cli import main

    store, runs = _fake_store(tmp_path)
    frame = collect(store.root)
    assert list(frame.columns[: len(MAIN_COLUMNS)]) == list(MAIN_COLUMNS)
    assert len(frame) == 6 and frame["status"].tolist()[-1] == "pending"
    assert frame.loc[5, "wd"] == 1.0 and frame.loc[5, "seed"] == 2 and frame.loc[5, "p"] == 23  # from the plan
    assert frame.loc[0, "grok_epoch"] == 4 and frame.loc[2, "error"] == "error: ConfigError: boom"
    assert "config.data.operation" in frame.columns
    assert main(["collect", str(store.root), "--out", str(tmp_path / "runs.csv")]) == 0
    table = pd.read_csv(tmp_path / "runs.csv")
    assert list(table.columns) == list(frame.columns) and len(table) == 6
    assert main(["collect", str(store.root), "--out", str(tmp_path / "runs.parquet"), "--no-pending"]) == 0
    try:
        import pyarrow  # noqa: F401

        assert len(pd.read_parquet(tmp_path / "runs.parquet")) == 5
    except ImportError:
        assert "pyarrow is not installed" in capsys.readouterr().err
        assert len(pd.read_csv(tmp_path / "runs.csv")) == 5
    assert main(["collect", str(store.root), "--out", str(tmp_path / "runs.xlsx")]) == 2


def test_a_different_grid_in_the_same_directory_is_refused(tmp_path):
    store, runs = _fake_store(tmp_path)
    other = load_sweep(write_spec(tmp_path, tiny_spec(grid={"wd": [0.3], "seed": [0]})))
    with pytest.raises(ConfigError, match="holds a different sweep"):
        store.initialize(other, expand(other))
    store.initialize(other, expand(other), extend=True)
    assert len(store.load_plan()) == 1 and store.rebuild_index()["not_in_plan"] == sorted(r.name for r in runs[:5])  # those with a directory


def test_a_sweep_directory_is_self_contained(tmp_path):
    from grok_lightning.sweep.launchers import prepare

    store, runs = _fake_store(tmp_path)
    sweep, again, same = prepare(store.root)  # from DIR/sweep.yaml, not configs/
    assert same.root == store.root and [r.run_id for r in again] == [e["run_id"] for e in store.load_plan()]
    with pytest.raises(ConfigError, match="holds profile None"):
        prepare(store.root, profile="paper")


def test_sweep_lock_refuses_a_second_sweep_and_dies_with_its_process(tmp_path):
    lock = SweepLock(tmp_path).acquire()
    with pytest.raises(SweepLockedError, match="already running here"):
        SweepLock(tmp_path).acquire()
    assert SweepLock(tmp_path).is_held_by_live_process()
    lock.release()
    assert not SweepLock(tmp_path).is_held_by_live_process()
    # a process holding the lock is SIGKILLed: the kernel releases it, nothing is left to clean up
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from grok_lightning.sweep.store import SweepLock; "
                               f"lock = SweepLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SweepLockedError, match=f"pid {holder.pid}"):
            SweepLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = SweepLock(tmp_path).acquire()
    assert json.loads((tmp_path / ".sweep.lock.json").read_text())["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / ".sweep.lock.json").exists()


# --- real (tiny) sweeps ---------------------------------------------------------------------------
def test_a_sweep_without_profiles_says_no_profile(tmp_path, capsys):
    from grok_lightning.sweep.cli import main

    spec = tiny_spec()
    spec.pop("profiles", None)
    spec.pop("default_profile", None)
    assert main(["run", str(write_spec(tmp_path, spec)), "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("sweep tiny_test: 6 runs"), first


def test_failed_and_diverged_runs_do_not_stop_the_sweep(tmp_path):
    from grok_lightning.sweep.launchers import run_sweep

    spec = tiny_spec(grid=None, zip={"model.init_args.n_heads": [2, 3, 2], "lr": [0.001, 0.001, 1.0e30]})
    spec["overrides"]["trainer.max_epochs"] = 4
    path = write_spec(tmp_path, spec)
    out = tmp_path / "out"
    result = run_sweep(path, out=out, workers=0, stream=open(os.devnull, "w"))
    assert result.statuses == {"completed": 1, "failed": 1, "diverged": 1} and not result.ok
    store = SweepStore(out)
    plan = store.load_plan()
    failed = store.read_record(plan[1]["name"])
    assert failed["status"] == "failed" and failed["config"]["wd"] == 1.0 and failed["run_id"] == plan[1]["run_id"]
    assert failed["error"].rstrip().endswith("error: ConfigError: model.n_heads=3: must divide model.d_model=16")
    assert store.read_record(plan[2]["name"])["diverged_epoch"] == 1
    # resuming retries the failed run only (it fails again, deterministically)
    again = run_sweep(path, out=out, workers=0, stream=open(os.devnull, "w"))
    assert again.skipped == 2 and again.statuses == {"failed": 1}
    assert [store.attempts(e["name"]) for e in plan] == [1, 2, 1]
    assert [len(list(store.run_dir(e["name"]).rglob("record.json"))) for e in plan] == [1, 1, 1]


def test_workers_that_cannot_start_stop_the_sweep_with_one_line(tmp_path, monkeypatch):
    from grok_lightning.sweep import launchers, local_pool

    crash = [sys.executable, "-c", "import sys; print('boom: no torch here', file=sys.stderr); sys.exit(3)"]
    monkeypatch.setattr(local_pool, "worker_command", lambda parent, threads: crash)
    out = tmp_path / "out"
    with pytest.raises(launchers.WorkerStartupError, match=r"exit code 3\): boom: no torch here") as info:
        launchers.run_sweep(TINY, out=out, workers=2, stream=open(os.devnull, "w"))
    assert "\n" not in str(info.value)
    assert SweepStore(out).rebuild_index()["counts"]["pending"] == 6, "no run was marked failed"
    assert not SweepLock(out).is_held_by_live_process()
    assert 3 <= (out / "workers.log").read_text().count("boom") <= 4, "respawned a bounded number of times"


def _statuses(out: Path) -> dict[str, str]:
    statuses = {}
    for path in out.glob("runs/*/record.json"):
        try:
            statuses[path.parent.name] = json.loads(path.read_text())["status"]
        except (OSError, ValueError, KeyError):
            pass
    return statuses


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_uninterrupted_sweep(tmp_path):
    """The reliability test: kill -9 the sweep in the middle of a run, resume, compare."""
    import pandas as pd

    from grok_lightning.sweep.launchers import run_sweep

    spec = tiny_spec()
    spec["overrides"]["trainer.max_epochs"] = 12  # a wider window to land the kill mid-run
    path = write_spec(tmp_path, spec)
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "grok_lightning.cli", "sweep", "run", str(path), "--out", str(killed),
               "--workers", "1", "--threads-per-worker", "1"]
    log = open(tmp_path / "killed.log", "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    deadline = time.time() + 240
    victim = None
    while time.time() < deadline and proc.poll() is None:
        statuses = _statuses(killed)
        final = [n for n, s in statuses.items() if s == "completed"]
        running = [n for n, s in statuses.items()
                   if s == "running" and (killed / "runs" / n / "checkpoints" / "last.ckpt").exists()]
        if len(final) >= 2 and running:
            os.kill(proc.pid, signal.SIGKILL)
            victim = running[0]
            break
        time.sleep(0.02)
    proc.wait()
    assert victim is not None, f"never caught a run mid-way:\n{(tmp_path / 'killed.log').read_text()}"
    store = SweepStore(killed)
    owner = json.loads((store.run_dir(victim) / ".owner").read_text())
    for _ in range(100):  # the worker dies with the launcher (PDEATHSIG): no orphan keeps training
        if not _pid_alive(owner["pid"]):
            break
        time.sleep(0.1)
    assert not _pid_alive(owner["pid"]), "worker outlived the killed sweep"
    assert store.read_record(victim)["status"] == "running"
    before = {name: (store.record_path(name).stat().st_mtime_ns, store.record_path(name).read_bytes())
              for name, status in _statuses(killed).items() if status == "completed"}
    assert len(before) >= 2

    resumed = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "6 runs: done 6" in resumed.stdout

    plan = store.load_plan()
    for entry in plan:
        run_dir = store.run_dir(entry["name"])
        assert len(list(run_dir.rglob("record.json"))) == 1 and not list(run_dir.glob(".record.json.*"))
        record = json.loads(store.record_path(entry["name"]).read_text())  # parses: never truncated
        assert record["status"] == "completed" and record["run_id"] == entry["run_id"]
    for name, (mtime, content) in before.items():  # completed runs were not rerun
        assert store.record_path(name).stat().st_mtime_ns == mtime and store.record_path(name).read_bytes() == content
        assert store.attempts(name) == 1
    assert store.attempts(victim) == 2
    attempts = [json.loads(l) for l in (store.run_dir(victim) / "attempts.jsonl").read_text().splitlines()]
    assert attempts[1]["resumed_from"].endswith("last.ckpt") and attempts[1]["prior_status"] == "running"

    clean = tmp_path / "clean"
    # in this process (no worker): the results must not depend on where a run ran
    result = run_sweep(path, out=clean, workers=0, threads_per_worker=1, stream=open(os.devnull, "w"))
    assert result.statuses == {"completed": 6}
    drop = ["wall_time_s", "cpu_time_s", "attempts"]
    a, b = collect(killed).drop(columns=drop), collect(clean).drop(columns=drop)
    pd.testing.assert_frame_equal(a, b)
    for entry in plan:
        history = json.loads(store.record_path(entry["name"]).read_text())["history"]
        assert history == json.loads(SweepStore(clean).record_path(entry["name"]).read_text())["history"]
        assert history["epoch"][-1] == 12


def test_concurrent_sweep_on_the_same_directory_is_refused(tmp_path, capsys):
    from grok_lightning.sweep.cli import main

    out = tmp_path / "out"
    lock = SweepLock(out).acquire()
    try:
        assert main(["run", str(TINY), "--out", str(out), "--workers", "0"]) == 2
        assert "a sweep is already running here" in capsys.readouterr().err
    finally:
        lock.release()


@pytest.mark.slow
def test_ray_launcher_runs_the_same_grid(tmp_path):
    ray = pytest.importorskip("ray")
    from grok_lightning.sweep.launchers import run_sweep

    spec = tiny_spec(grid={"wd": [0.1, 1.0], "seed": [0]})
    spec["overrides"]["trainer.max_epochs"] = 4
    path = write_spec(tmp_path, spec)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = run_sweep(path, out=tmp_path / "ray", launcher="ray", threads_per_worker=1,
                           stream=open(os.devnull, "w"))
    finally:
        ray.shutdown()
    assert result.statuses == {"completed": 2}
    local = run_sweep(path, out=tmp_path / "local", workers=0, threads_per_worker=1, stream=open(os.devnull, "w"))
    assert local.statuses == {"completed": 2}
    drop = ["wall_time_s", "cpu_time_s", "attempts"]
    assert collect(tmp_path / "ray").drop(columns=drop).equals(collect(tmp_path / "local").drop(columns=drop))


def test_the_same_runs_adopted_from_another_sweep_file_are_named_by_it(tmp_path):
    """A campaign's runs pasted into the sweep file its target reads: the store, extended by that
    file, plans the same runs and now names the file (the report says which file a store follows)."""
    store, runs = _fake_store(tmp_path)
    plan = (store.root / "plan.json").read_bytes()
    moved = tmp_path / "adopted"
    moved.mkdir()
    source = Path(store.load_sweep().source)
    same = load_sweep(shutil.copy(source, moved / "adopted.yaml"))
    store.initialize(same, expand(same))                      # without extend: nothing changes
    assert Path(store.load_sweep().source) == source
    store.initialize(same, expand(same), extend=True)
    assert Path(store.load_sweep().source).name == "adopted.yaml" and (store.root / "plan.json").read_bytes() == plan
