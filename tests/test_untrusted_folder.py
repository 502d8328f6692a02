"""A sweep folder from someone else is data: each attack as a user would try it, then refused.

1. plan.json names a run folder outside the sweep, or a folder or file the sweep writes is a
   symbolic link (the sweep folder, ``runs/``, a run folder, its checkpoints, attempts.jsonl,
   run.log, index.json, the lock): nothing outside the sweep is emptied or written; one line
   names the path.
2. plan.json / sweep.yaml / a --config file names a class from a module next to the sweep: it is
   never imported.
3. Another run's last.ckpt planted in a run folder, or a plain ``fit`` run's (no run id): refused,
   not adopted.
4. A checkpoint of another model shape: one line before training.
5. A config names a user's module through a trusted class: a callable in ``init_args``, a nested
   config file, ``dict_kwargs``; from the working directory, ``PYTHONPATH`` or the console script,
   and through ``sweep run``. Never imported; ``--trust-code MODULE`` is the one way in.
Plus YAML: a key written twice, and an alias bomb.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grok_lightning.config import ConfigError, read_yaml
from grok_lightning.sweep.launchers import run_sweep
from grok_lightning.sweep.store import SweepStore

REPO = Path(__file__).resolve().parents[1]


def tiny_sweep(tmp_path: Path, epochs: int = 2, seeds=(0,)) -> Path:
    spec = yaml.safe_load((REPO / "configs" / "sweeps" / "tiny_test.yaml").read_text())
    spec["base"] = str(REPO / "configs" / "canonical.yaml")
    spec["overrides"]["trainer.max_epochs"] = epochs
    spec["grid"] = {"wd": [1.0], "seed": list(seeds)}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def quiet_run(target, **kw):
    return run_sweep(target, workers=0, threads_per_worker=1, stream=open("/dev/null", "w"), **kw)


def edit_plan(out: Path, change) -> None:
    plan = json.loads((out / "plan.json").read_text())
    change(plan["runs"][0])
    (out / "plan.json").write_text(json.dumps(plan))


@pytest.fixture(scope="module")
def finished_once(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "s"
    quiet_run(tiny_sweep(out.parent), out=out)
    return out


@pytest.fixture
def finished(tmp_path, finished_once):
    """A finished one-run sweep (trained once per module, copied for each test)."""
    import shutil

    out = tmp_path / "s"
    shutil.copytree(finished_once, out, symlinks=True)
    return out


def test_a_plan_naming_a_folder_outside_the_sweep_empties_nothing(finished, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    name = json.loads((finished / "plan.json").read_text())["runs"][0]["name"]
    (finished / "runs" / name / "record.json").unlink()  # so that the run is due again
    edit_plan(finished, lambda entry: entry.update(name=str(victim)))
    with pytest.raises(ConfigError, match="another name than its sweep.yaml gives") as err:
        quiet_run(finished)
    assert "\n" not in str(err.value)
    assert (victim / "keep").read_text() == "mine"
    with pytest.raises(ConfigError, match="one plain folder name"):
        SweepStore(finished).run_dir(str(victim))
    with pytest.raises(ConfigError, match="one plain folder name"):
        SweepStore(finished).run_dir("..")


def test_a_symlinked_run_folder_is_refused_not_followed(finished, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    name = json.loads((finished / "plan.json").read_text())["runs"][0]["name"]
    run_dir = finished / "runs" / name
    import shutil

    shutil.rmtree(run_dir)
    run_dir.symlink_to(victim, target_is_directory=True)
    with pytest.raises(ConfigError, match="symbolic link"):
        quiet_run(finished)
    assert (victim / "keep").read_text() == "mine"


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


#: what is planted -> (the link's path inside the sweep, what it points to inside the victim's folder)
LINKS = {"the sweep folder": (None, "."), "runs/": ("runs", "."),
         "a run's attempts.jsonl": ("runs/{run}/attempts.jsonl", "keep"), "a run's run.log": ("runs/{run}/run.log", "keep"),
         "a run's .owner": ("runs/{run}/.owner", "keep"), "a run's checkpoints/": ("runs/{run}/checkpoints", "ckpts"),
         "a run's hparams.yaml": ("runs/{run}/hparams.yaml", "keep"), "index.json": ("index.json", "keep"),
         "the lock": (".sweep.lock", "keep"), "the lock's note": (".sweep.lock.json", "keep")}


@pytest.mark.parametrize("planted", list(LINKS))
def test_a_symbolic_link_in_a_sweep_is_refused_and_nothing_outside_changes(finished, tmp_path, planted):
    import shutil

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    name = json.loads((finished / "plan.json").read_text())["runs"][0]["name"]
    shutil.copytree(finished / "runs" / name / "checkpoints", victim / "ckpts")
    (finished / "runs" / name / "record.json").unlink()  # so that the run is due again
    where, target = LINKS[planted]
    if where is None:
        sweep = tmp_path / "link"
        sweep.symlink_to(finished, target_is_directory=True)
    else:
        sweep = finished
        link = finished / where.format(run=name)
        if link.is_dir():
            shutil.rmtree(link)
        link.unlink(missing_ok=True)
        link.symlink_to(victim / target)
    before = _snapshot(victim)
    with pytest.raises(ConfigError, match="symbolic link") as err:
        quiet_run(sweep)
    assert "\n" not in str(err.value)
    assert _snapshot(victim) == before


def test_writes_and_deletions_never_go_through_a_link_planted_later(tmp_path):
    """After the walk that refuses links: a sweep's own writes open with O_NOFOLLOW, and it deletes
    only inside its folder."""
    from grok_lightning.sweep.nofollow import open_no_follow, remove_inside

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    runs = tmp_path / "s" / "runs"
    runs.mkdir(parents=True)
    (runs / "run.log").symlink_to(victim / "keep")
    for mode in ("a", "w"):
        with pytest.raises(ConfigError, match="symbolic link"):
            open_no_follow(runs / "run.log", mode)
    (runs / "out").symlink_to(victim, target_is_directory=True)
    with pytest.raises(ConfigError, match="resolves outside"):
        remove_inside(tmp_path / "s", runs / "out" / "keep")
    remove_inside(tmp_path / "s", runs / "out")  # the link itself goes, never what it points to
    assert (victim / "keep").read_text() == "mine" and not (runs / "out").exists()


def test_a_hard_link_in_a_sweep_is_refused_and_the_other_name_is_untouched(finished, tmp_path):
    """A file of the sweep that is also a file of yours (a hard link) would be appended to through
    the sweep: refused before the sweep runs, and by the sweep's own writes if planted later."""
    import os

    from grok_lightning.sweep.nofollow import open_no_follow

    victim = tmp_path / "keep"
    victim.write_text("mine")
    name = json.loads((finished / "plan.json").read_text())["runs"][0]["name"]
    (finished / "runs" / name / "record.json").unlink()  # so that the run is due again
    attempts = finished / "runs" / name / "attempts.jsonl"
    attempts.unlink()
    os.link(victim, attempts)
    with pytest.raises(ConfigError, match="hard link") as err:
        quiet_run(finished)
    assert "\n" not in str(err.value) and victim.read_text() == "mine"
    for mode in ("a", "w"):
        with pytest.raises(ConfigError, match="hard link"):
            open_no_follow(attempts, mode)
    assert victim.read_text() == "mine"


def test_an_ensemble_checkpoint_of_other_members_is_refused(tmp_path):
    import torch

    from grok_lightning.checkpoint_io import check_ensemble_members

    path = tmp_path / "last.ckpt"
    torch.save({"callbacks": {"MemberCallbacks[theirs]": {}, "RunRecorder": {}}}, path)
    with pytest.raises(ConfigError, match="not this ensemble's") as err:
        check_ensemble_members(path, ["mine"])
    assert "\n" not in str(err.value)
    torch.save({"callbacks": {}}, path)
    with pytest.raises(ConfigError, match="without member run ids"):
        check_ensemble_members(path, ["mine"])


def test_a_class_from_next_to_the_sweep_is_never_imported(finished, tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "payload.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass Evil: pass\n")
    name = json.loads((finished / "plan.json").read_text())["runs"][0]["name"]
    (finished / "runs" / name / "record.json").unlink()
    evil = [{"class_path": "payload.Evil"}]
    edit_plan(finished, lambda entry: entry["config"]["trainer"].update(callbacks=evil))
    cli = [sys.executable, "-m", "grok_lightning.cli", "sweep", "run", str(finished), "--workers", "1"]
    done = subprocess.run(cli, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "plan.json" in done.stderr and not marker.exists()
    # the same class in the stored sweep.yaml: refused when the sweep is read
    stored = yaml.safe_load((finished / "sweep.yaml").read_text())
    stored["overrides"]["trainer.callbacks"] = evil
    (finished / "sweep.yaml").write_text(yaml.safe_dump(stored))
    with pytest.raises(ConfigError, match="payload.Evil.*must come from grok_lightning"):
        SweepStore(finished).load_sweep()
    # and in a --config file given to fit
    config = tmp_path / "evil.yaml"
    config.write_text("trainer:\n  callbacks:\n    - class_path: payload.Evil\n")
    fit = [sys.executable, "-m", "grok_lightning.cli", "fit", "--config", str(config)]
    done = subprocess.run(fit, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "payload.Evil" in done.stderr
    assert not marker.exists()


def test_another_runs_checkpoint_is_refused_not_adopted(tmp_path):
    out = tmp_path / "s"
    path = tiny_sweep(tmp_path, epochs=4, seeds=(0, 1))
    quiet_run(path, out=out)
    store = SweepStore(out)
    a, b = [entry["name"] for entry in store.load_plan()]
    planted = store.run_dir(a) / "checkpoints" / "last.ckpt"
    planted.write_bytes((store.run_dir(b) / "checkpoints" / "last.ckpt").read_bytes())
    record = json.loads(store.record_path(a).read_text())
    record["status"] = "running"
    store.record_path(a).write_text(json.dumps(record))
    quiet_run(out)
    after = json.loads(store.record_path(a).read_text())
    assert after["status"] == "failed" and "the checkpoint of run" in after["error"].splitlines()[-1]
    assert after["history"] == record["history"]  # not B's


def test_a_checkpoint_from_a_plain_fit_is_foreign_never_adopted(finished, tmp_path, tiny):
    """A checkpoint that carries no run id (a ``grok-lightning fit`` run's) is not this run's."""
    from grok_lightning.run import run_config

    config = tiny(max_epochs=2, lr=0.01, weight_decay=3.0)
    config["seed_everything"] = 99
    run_config(config)
    store = SweepStore(finished)
    name = store.load_plan()[0]["name"]
    (store.run_dir(name) / "checkpoints" / "last.ckpt").write_bytes(
        next((tmp_path / "tiny").rglob("last.ckpt")).read_bytes())
    record = json.loads(store.record_path(name).read_text())
    record["status"] = "running"
    store.record_path(name).write_text(json.dumps(record))
    quiet_run(finished)
    after = json.loads(store.record_path(name).read_text())
    assert after["status"] == "failed" and "not this run's" in after["error"].splitlines()[-1], after["error"]
    assert after["history"] == record["history"] and after["config"] == record["config"]


def test_a_checkpoint_of_another_shape_is_one_line_before_training(tmp_path, tiny):
    from grok_lightning.run import run_config

    config = tiny(max_epochs=2)
    run_config(config)
    ckpt = next(Path(tmp_path).rglob("last.ckpt"))
    other = tiny(max_epochs=4)
    other["model"]["init_args"]["n_heads"] = 4
    with pytest.raises(ConfigError, match=r"a checkpoint of another model \(n_heads 2, this run 4\)"):
        run_config(other, ckpt_path=str(ckpt))


def test_yaml_keys_written_twice_and_alias_bombs_are_one_line(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("trainer:\n  max_epochs: 5\n  max_epochs: 50\n")
    with pytest.raises(ConfigError, match="'max_epochs' written twice"):
        read_yaml(twice, "config")
    bomb = tmp_path / "bomb.yaml"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="expands to more than"):
        read_yaml(bomb, "config")
    merged = tmp_path / "merge.yaml"  # a merge key may be overridden: that is not a key twice
    merged.write_text("base: &base {a: 1, b: 2}\nuse:\n  <<: *base\n  b: 3\n")
    assert read_yaml(merged, "config")["use"] == {"a": 1, "b": 3}


def test_a_record_that_breaks_its_schema_or_size_never_counts(finished, monkeypatch, capsys):
    """A record is data: checked on every read (types, ranges, a size cap); a bad one is one line
    naming the file and the field, never a completed run, never a point of a fit."""
    from grok_lightning import records
    from grok_lightning.cli import main

    path = next(finished.rglob("record.json"))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "grok_epoch": "12"}))
    assert main(["sweep", "status", str(finished), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "done 0" in out and "unreadable 1" in out and "grok_epoch='12'" in out, out
    assert main(["analyze", "critical-wd", str(finished / "runs"), "--out", str(finished / "fit.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "grok_epoch='12'" in err[0], err
    assert not (finished / "fit.json").exists()
    path.write_text(json.dumps(record))
    monkeypatch.setattr(records, "MAX_RECORD_BYTES", path.stat().st_size - 1)
    assert main(["sweep", "status", str(finished), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "done 0" in out and "unreadable 1" in out and "refused" in out, out


def test_sweep_status_only_reads(finished, capsys, monkeypatch):
    """Not index.json, not the lock (a record that says running makes status ask whether a sweep
    holds it): nothing is opened for writing, so a read-only folder works."""
    import os

    from grok_lightning.sweep.cli import main

    (finished / "index.json").unlink(missing_ok=True)
    record_path = next(finished.rglob("record.json"))
    record_path.write_text(json.dumps({**json.loads(record_path.read_text()), "status": "running"}))
    writes, real_open = [], os.open
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def spy(path, flags, *args, **kwargs):
        if flags & write_flags and str(finished) in os.path.abspath(str(path)):
            writes.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    assert main(["status", str(finished)]) == 0
    assert "no sweep is running here" in capsys.readouterr().out
    assert not writes, f"status opened for writing: {writes}"
    assert not (finished / "index.json").exists(), "status wrote into the folder"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device", "x/record.json"),
                                   PermissionError(13, "Permission denied", "x/plan.json")])
def test_a_full_disk_or_read_only_folder_is_one_line(tmp_path, capfd, monkeypatch, error):
    from grok_lightning.sweep import store
    from grok_lightning.sweep.cli import main

    def refuse(path, payload):
        raise error

    monkeypatch.setattr(store, "write_json_atomic", refuse)
    assert main(["run", str(tiny_sweep(tmp_path)), "--out", str(tmp_path / "s"), "--workers", "0"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and error.strerror in err[0] and error.filename in err[0], err


@pytest.mark.parametrize("damage, expected", [("truncated", "not valid JSON"), ("a number as a string", "final_test_acc='0.9'")])
def test_a_bad_record_under_no_train_names_the_file(tmp_path, damage, expected):
    import shutil

    shutil.copytree(REPO / "results" / "medium" / "fig2", tmp_path / "fig2")
    broken = sorted((tmp_path / "fig2" / "sweep" / "runs").glob("*/record.json"))[0]
    if damage == "truncated":
        broken.write_text('{"status": "completed", "config": ')
    else:
        broken.write_text(json.dumps({**json.loads(broken.read_text()), "final_test_acc": "0.9"}))
    done = subprocess.run([sys.executable, "-m", "reproduce.targets.fig2", "--profile", "medium", "--out", str(tmp_path),
                           "--no-train"], capture_output=True, text=True, cwd=REPO, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and str(broken) in lines[0] and expected in lines[0], lines


def test_records_get_the_users_file_mode(tmp_path):
    import os

    from grok_lightning.records import write_json_atomic

    mask = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "record.json", {"status": "completed"})
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644


# --- a user's module named through a trusted class --------------------------------------------
CANONICAL = str(REPO / "configs" / "canonical.yaml")
LAMBDA = ("trainer:\n  callbacks:\n    - class_path: lightning.pytorch.callbacks.LambdaCallback\n"
          "      init_args: {on_fit_start: payload.f}\n")


def plant_payload(folder: Path) -> Path:
    """``payload.py`` in ``folder``: importing it writes ``folder/imported``, which is returned."""
    marker = folder / "imported"
    (folder / "payload.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n"
                                       "def f(*args):\n    pass\n\nclass Cb:\n    pass\n")
    (folder / "lambda.yaml").write_text(LAMBDA)
    (folder / "cb.yaml").write_text("class_path: payload.Cb\n")
    (folder / "nested.yaml").write_text("trainer:\n  callbacks: [cb.yaml]\n")
    return marker


def fit_prints_config(folder: Path, *argv: str, cwd: Path | None = None, env: dict | None = None,
                      command: list[str] | None = None):
    """``grok-lightning fit --config canonical.yaml ARGV --print_config``: parses (and would import)
    everything, trains nothing."""
    import os

    command = command or [sys.executable, "-m", "grok_lightning.cli"]
    return subprocess.run([*command, "fit", "--config", CANONICAL, *argv, "--print_config"], cwd=cwd or folder,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("how", ["working directory", "PYTHONPATH", "console script", "nested config file"])
def test_a_callable_or_nested_file_naming_a_users_module_is_never_imported(tmp_path, how):
    folder = tmp_path / "shared"
    folder.mkdir()
    marker = plant_payload(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = str(folder / ("nested.yaml" if how == "nested config file" else "lambda.yaml"))
    kwargs = {"working directory": {}, "nested config file": {},
              "PYTHONPATH": {"cwd": elsewhere, "env": {"PYTHONPATH": str(folder)}},
              "console script": {"env": {"PYTHONPATH": str(folder)},
                                 "command": [str(Path(sys.executable).parent / "grok-lightning")]}}[how]
    done = fit_prints_config(folder, "--config", config, **kwargs)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "payload." in lines[0] and "--trust-code" in lines[0], lines[0]
    assert not marker.exists()


def test_trust_code_on_the_command_line_is_the_one_way_in(tmp_path):
    marker = plant_payload(tmp_path)
    done = fit_prints_config(tmp_path, "--trust-code", "payload", "--config", "lambda.yaml")
    assert done.returncode == 0 and "payload.f" in done.stdout, done.stderr
    assert marker.exists()


def test_a_task_file_cannot_trust_code(finished, tmp_path, capsys):
    """``python -m grok_lightning.sweep.worker --task FILE``: the file's own ``trusted_code`` is
    dropped; only the worker's ``--trust-code`` counts."""
    from grok_lightning.config import trusted_code
    from grok_lightning.sweep.worker import main, make_task

    task = make_task(SweepStore(finished).load_plan()[0], finished, {}, None)
    (tmp_path / "task.json").write_text(json.dumps({**task, "trusted_code": ["payload"]}))
    assert main(["--task", str(tmp_path / "task.json"), "--no-capture"]) == 0  # a final run: skipped
    assert trusted_code() == ()
    assert main(["--task", str(tmp_path / "task.json"), "--no-capture", "--trust-code", "mine"]) == 0
    assert trusted_code() == ("mine",)


def test_dict_kwargs_and_any_typed_values_stay_data(tmp_path, tiny, monkeypatch):
    """The parser's own policy, without the file check before it: a ``{class_path: ...}`` in
    ``dict_kwargs`` is passed on as data, never imported."""
    from grok_lightning.sweep.keys import _parse

    marker = plant_payload(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tiny()
    config["trainer"]["logger"]["dict_kwargs"] = {"comment": {"class_path": "payload.Cb"}}
    _parse(config)
    config["trainer"]["callbacks"] = [{"class_path": "lightning.pytorch.callbacks.LambdaCallback",
                                       "init_args": {"on_fit_start": "payload.f"}}]
    with pytest.raises(Exception, match="payload.f"):
        _parse(config)
    assert not marker.exists() and "payload" not in sys.modules


def test_sweep_run_never_imports_a_users_module_named_in_its_configs(tmp_path, monkeypatch, capfd):
    from grok_lightning.sweep.cli import main

    marker = plant_payload(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = yaml.safe_load(tiny_sweep(tmp_path).read_text())
    for name, callbacks in (("nested", ["cb.yaml"]), ("lambda", yaml.safe_load(LAMBDA)["trainer"]["callbacks"])):
        spec["overrides"]["trainer.callbacks"] = callbacks
        (tmp_path / f"{name}_sweep.yaml").write_text(yaml.safe_dump(spec))
        assert main(["run", f"{name}_sweep.yaml", "--out", f"out_{name}", "--workers", "0"]) == 2
        err = capfd.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "payload." in err[0], err
        assert not marker.exists() and "payload" not in sys.modules
        assert not (tmp_path / f"out_{name}").exists()
