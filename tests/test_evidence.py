"""The evidence a report stands on cannot be bent without a word: each case as someone would try it
on a copy of the shipped records, then refused in one line naming the file.

1. A backup copy of a run folder is not counted again: the targets read each planned run once,
   from its own folder; ``analyze`` refuses a second record of one run id; the manifest refuses
   the extra record, and ``make report`` writes nothing.
2. A record that cannot be true is refused on every read: cross-field rules (a grok epoch after
   the horizon, or without a test accuracy above the threshold there; epochs out of order; an
   accuracy above 1; a final loss the history does not have; a weight decay or seed that is not
   the config's), and a record that is not the run its folder plans.
3. ``MANIFEST.json``: a changed, extra or missing record is one line and no report; so is a changed,
   extra or missing measurement file (what a clone reads in place of the weights); runs still in
   progress are neither listed nor refused; the shipped manifest lists exactly the shipped records
   and measurements; what an analysis itself measures during a report is listed after it.
4. Files that are not records: a FIFO, a folder, 400 KB of nested brackets, a 5,000-digit number.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO
from grok_lightning.config import ConfigError
from grok_lightning.records import load_record

MEDIUM = REPO / "results" / "medium"


@pytest.fixture
def shipped(tmp_path):
    """results/medium as a fresh clone has it (``git archive HEAD``, or the folder outside git)."""
    import tarfile

    archive = tmp_path / "medium.tar"
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), "HEAD",
                           "results/medium"], capture_output=True, text=True)
    if done.returncode != 0 or "MANIFEST.json" not in subprocess.run(
            ["tar", "-tf", str(archive)], capture_output=True, text=True).stdout:
        shutil.copytree(MEDIUM, tmp_path / "results" / "medium")  # not committed yet: the working tree
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path, filter="data")
    for stray in (tmp_path / "results" / "medium").rglob("*"):  # only what ships: no local checkpoints
        if stray.is_dir() and stray.name in ("checkpoints", "weights"):
            shutil.rmtree(stray, ignore_errors=True)
    return tmp_path / "results" / "medium"


def fig5_records(root: Path) -> list[Path]:
    return sorted((root / "fig5" / "sweep" / "runs").glob("*/record.json"))


def edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


# --- 1. a copied run folder counts once ----------------------------------------------------------------
def test_a_backup_copy_of_a_run_folder_is_not_counted_again(shipped, tmp_path, capsys):
    from grok_lightning.stats.cli import main as analyze
    from grok_lightning.sweep.grid import load_sweep
    from reproduce.targets.common import Launch, sweep_path, sweep_records

    before, _ = sweep_records("canonical_wd.yaml", "medium", shipped / "fig5", Launch(train=False))
    original = next(p.parent for p in fig5_records(shipped) if p.parent.name.startswith("wd0.02_seed11"))
    for i in (1, 2, 3):
        shutil.copytree(original, original.with_name(f"{original.name}.bak{i}"))
    after, _ = sweep_records("canonical_wd.yaml", "medium", shipped / "fig5", Launch(train=False))
    planned = load_sweep(sweep_path("canonical_wd.yaml"), "medium").expand()
    assert len(after) == len(before) == len(planned)
    assert [r["run_id"] for r in after] == [r["run_id"] for r in before]
    # the generic analysis reads every record.json below a folder: a run id twice is one line
    assert analyze(["critical-wd", str(shipped / "fig5" / "sweep" / "runs"), "--out", str(tmp_path / "fit.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".bak" in err[0] and "counts once" in err[0], err
    assert not (tmp_path / "fit.json").exists()


def test_a_record_moved_into_another_runs_folder_is_not_that_run(shipped):
    from reproduce.targets.common import Launch, sweep_records

    a, b = fig5_records(shipped)[:2]
    b.write_bytes(a.read_bytes())  # a's record (its own id, its own lambda) in b's folder
    with pytest.raises(ConfigError, match=rf"{b}: not the run its folder plans \(run_id="):
        sweep_records("canonical_wd.yaml", "medium", shipped / "fig5", Launch(train=False))


def test_a_record_whose_config_was_edited_is_not_its_run(shipped):
    from reproduce.targets.common import Launch, sweep_records

    path = fig5_records(shipped)[0]
    edit(path, lambda r: r["config"]["model"].update(lr=0.01))
    with pytest.raises(ConfigError, match=r"not the run its folder plans \(config.model.lr=0.01: the planned run has"):
        sweep_records("canonical_wd.yaml", "medium", shipped / "fig5", Launch(train=False))


# --- 2. a record is checked as a whole -------------------------------------------------------------------
def _grok_after_horizon(r):
    r["grok_epoch"] = 999999


def _grok_without_accuracy(r):  # the final test accuracy of a non-grokked lambda 0.01 run stays 0.64
    r["grok_epoch"] = r["history"]["epoch"][-1]
    r["history"]["test_acc"][-1] = 0.64
    r["final_test_acc"] = 0.64


def _huge_final_loss(r):
    r["final_train_loss"] = 1e308


def _epochs_out_of_order(r):
    epochs = r["history"]["epoch"]
    epochs[1], epochs[2] = epochs[2], epochs[1]


def _accuracy_above_one(r):
    r["history"]["test_acc"][3] = 5.0


def _negative_loss(r):
    r["history"]["train_loss"][3] = -1.0


def _wd_not_the_models(r):
    r["config"]["wd"] = 5.0


def _seed_not_the_configs(r):
    r["seed"] = r["config"]["seed"] + 1


def _huge_integer_grok_epoch(r):
    r["grok_epoch"] = 10**30


RULES = {
    "grok epoch after the horizon": (_grok_after_horizon, "grok_epoch=999999: after the run's horizon"),
    "grok epoch without its test accuracy": (_grok_without_accuracy, "not >= the grok threshold 0.99"),
    "a final loss the history does not have": (_huge_final_loss, "final_train_loss=1e+308: the history's last"),
    "epochs out of order": (_epochs_out_of_order, "history.epoch: 2 then 1: epochs must increase"),
    "a test accuracy of 5": (_accuracy_above_one, "history.test_acc: value 5.0: an accuracy must be in [0, 1]"),
    "a negative loss": (_negative_loss, "history.train_loss: value -1.0: a loss must be >= 0"),
    "config.wd not the model's": (_wd_not_the_models, "config.wd=5.0: the model's weight decay is"),
    "seed not the config's": (_seed_not_the_configs, "seed="),
    "a grok epoch of 10**30": (_huge_integer_grok_epoch, "grok_epoch=1000000000000000000000000000000: after"),
}


@pytest.mark.parametrize("case", list(RULES))
def test_a_record_that_cannot_be_true_is_one_line_naming_the_file_and_rule(tmp_path, case):
    change, expected = RULES[case]
    source = next(p for p in fig5_records(MEDIUM) if p.parent.name.startswith("wd0.01_"))
    path = tmp_path / "run" / "record.json"
    path.parent.mkdir()
    path.write_bytes(source.read_bytes())
    load_record(path)  # the shipped record passes every rule
    edit(path, change)
    with pytest.raises(ConfigError) as err:
        load_record(path)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value) and "\n" not in str(err.value)


def test_an_impossible_record_stops_the_target_in_one_line(shipped):
    """Three lambda 0.01 records edited to grok at epoch 999999 (their horizon is 5,000): the
    target that would have turned that bin into 3/3 stops at the first, naming it."""
    edited = [p for p in fig5_records(shipped) if p.parent.name.startswith("wd0.01_")]
    for path in edited:
        edit(path, _grok_after_horizon)
    done = subprocess.run([sys.executable, "-m", "reproduce.targets.fig5", "--profile", "medium", "--out", str(shipped),
                           "--no-train"], capture_output=True, text=True, cwd=REPO, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and str(edited[0]) in lines[0] and "horizon" in lines[0], lines


def test_every_shipped_record_passes_the_record_rules():
    from grok_lightning.records import iter_records

    paths = [path for path, _ in iter_records(REPO / "results")]
    assert len(paths) >= 300


# --- 3. the manifest -----------------------------------------------------------------------------------
def test_the_shipped_manifest_lists_exactly_the_shipped_final_records(shipped):
    from reproduce.manifest import check_manifest, read_manifest, read_measurements, scan, scan_measurements

    check_manifest(shipped)
    final, unfinished = scan(shipped)
    assert set(read_manifest(shipped)) == set(final)
    assert set(read_measurements(shipped)) == set(scan_measurements(shipped)) != set()
    assert len(final) + len(unfinished) == len(list(shipped.rglob("record.json")))
    # runs shipped while they train (to resume anywhere) are work in progress: never listed, never counted
    for path in unfinished:
        assert json.loads((shipped / path).read_text())["status"] in ("running", "interrupted"), path
        assert (MEDIUM / path).parent.joinpath("checkpoints", "last.ckpt").is_file(), path  # the clone has it


def _report(root: Path) -> subprocess.CompletedProcess:
    """``make report``'s command (the manifest required) on ``root``."""
    return subprocess.run([sys.executable, "-m", "reproduce.targets.all", "--profile", "medium", "--out", str(root),
                           "--no-train", "--require-manifest"], capture_output=True, text=True, cwd=REPO, timeout=600)


def _copy(root):
    original = fig5_records(root)[5].parent
    shutil.copytree(original, original.with_name(original.name + ".bak1"))
    return original.with_name(original.name + ".bak1") / "record.json", "an extra record"


def _change(root):
    path = fig5_records(root)[5]
    edit(path, lambda r: r.update(wall_time_s=r["wall_time_s"] + 1))  # valid, but not the shipped bytes
    return path, "changed since the manifest was written"


def _remove(root):
    path = fig5_records(root)[5]
    path.unlink()
    return path, "missing: the manifest lists run"


def _measurement_files(root):
    return sorted(root.rglob("checkpoint_points.json"))


def _change_measurement(root):
    path = _measurement_files(root)[0]
    points = json.loads(path.read_text())
    path.write_text(json.dumps(points).replace("0.", "0.9", 1))  # one digit of one measurement
    return path, "changed since the manifest was written (measurements"


def _copy_measurement(root):
    path = fig5_records(root)[5].with_name("checkpoint_points.json")
    shutil.copy(_measurement_files(root)[0], path)
    return path, "an extra measurement file that the manifest does not list"


def _remove_measurement(root):
    path = _measurement_files(root)[0]
    path.unlink()
    return path, "missing: the manifest lists this measurement file here"


@pytest.mark.parametrize("tamper", [_copy, _change, _remove, _change_measurement, _copy_measurement,
                                    _remove_measurement],
                         ids=["a copied run folder", "an edited record", "a missing record", "an edited measurement",
                              "a measurement copied beside another run", "a missing measurement"])
def test_make_report_refuses_records_that_differ_from_the_manifest_and_writes_nothing(shipped, tamper):
    report = (shipped / "REPORT.md").read_bytes()
    rows = (shipped / "fig5" / "rows.json").read_bytes()
    path, expected = tamper(shipped)
    done = _report(shipped)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {path}: {expected}"), lines[0]
    assert (shipped / "REPORT.md").read_bytes() == report and (shipped / "fig5" / "rows.json").read_bytes() == rows
    assert "==" not in done.stdout  # no target ran


def test_make_report_needs_a_manifest(tmp_path):
    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    done = _report(tmp_path)
    assert done.returncode != 0 and "MANIFEST.json: no manifest" in done.stderr and not (tmp_path / "REPORT.md").exists()


def test_runs_still_in_progress_are_neither_listed_nor_refused(tmp_path):
    from reproduce.manifest import check_manifest, read_manifest, write_manifest

    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    write_manifest(tmp_path)
    listed = read_manifest(tmp_path)
    running = tmp_path / "long_horizon_20k" / "sweep" / "runs" / "wd1.0_seed42_x" / "record.json"
    running.parent.mkdir(parents=True)
    source = json.loads(next(iter(sorted((tmp_path / "fig2").rglob("record.json")))).read_text())
    running.write_text(json.dumps({**source, "run_id": "x" * 12, "status": "running", "final_epoch": None}))
    check_manifest(tmp_path)  # in progress: not evidence yet
    edit(running, lambda r: r.update(status="completed", final_epoch=r["history"]["epoch"][-1]))
    with pytest.raises(ConfigError, match="an extra record"):  # once final, it must be listed
        check_manifest(tmp_path)
    write_manifest(tmp_path)
    assert set(read_manifest(tmp_path)) == set(listed) | {"long_horizon_20k/sweep/runs/wd1.0_seed42_x/record.json"}


def test_measurements_beside_runs_in_progress_are_neither_listed_nor_refused(tmp_path):
    from reproduce.manifest import check_manifest, read_measurements, write_manifest

    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    record = next(iter(sorted((tmp_path / "fig2").rglob("record.json"))))
    write_manifest(tmp_path)
    running = tmp_path / "lh" / "runs" / "x" / "record.json"
    running.parent.mkdir(parents=True)
    running.write_text(json.dumps({**json.loads(record.read_text()), "run_id": "x" * 12, "status": "running"}))
    running.with_name("rllc_points.json").write_text("{}")
    check_manifest(tmp_path)
    write_manifest(tmp_path)
    assert read_measurements(tmp_path) == {}


def test_what_an_analysis_measures_during_a_report_is_listed_after_it(tmp_path):
    """A machine with the weights measures them during ``make report``: the manifest lists what that
    run wrote, and only when its records and measurements matched the manifest before."""
    from reproduce.manifest import check_manifest, measurements_listed, read_measurements, write_manifest

    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    first, second = sorted((tmp_path / "fig2").rglob("record.json"))[:2]
    write_manifest(tmp_path)
    with measurements_listed(tmp_path):
        first.with_name("checkpoint_points.json").write_text('{"pr": []}')
    check_manifest(tmp_path)
    assert list(read_measurements(tmp_path)) == [first.with_name("checkpoint_points.json").relative_to(tmp_path).as_posix()]
    # planted before the run: the manifest does not match, so nothing the run finds is listed
    second.with_name("rllc_points.json").write_text("{}")
    with measurements_listed(tmp_path):
        first.with_name("checkpoint_points.json").write_text('{"pr": [1]}')
    with pytest.raises(ConfigError, match="changed since the manifest was written"):
        check_manifest(tmp_path)


def test_the_measurement_files_the_manifest_checks_are_the_ones_the_analyses_write():
    from reproduce.manifest import MEASUREMENT_NAMES
    from reproduce.targets.long_horizon import POINTS_FILE
    from reproduce.targets.rllc import RLLC_FILE

    assert set(MEASUREMENT_NAMES) == {POINTS_FILE, RLLC_FILE}


def test_the_manifest_command_is_one_line(tmp_path, capsys):
    from reproduce.manifest import main

    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    assert main(["write", str(tmp_path)]) == 0 and main(["check", str(tmp_path)]) == 0
    edit(fig2 := next(iter(sorted((tmp_path / "fig2").rglob("record.json")))), lambda r: r.update(wall_time_s=1.0))
    capsys.readouterr()
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(fig2) in err[0], err


# --- 4. files named like records that are none ------------------------------------------------------------
def _open_fifo_writer_later(path: Path) -> threading.Thread:
    """A reader blocked on the FIFO would wait forever; this unblocks it after the test (never
    needed when the FIFO is refused)."""
    def release():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass

    return threading.Timer(30, release)


@pytest.mark.parametrize("kind", ["fifo", "folder", "nested", "digits"])
def test_a_file_named_record_json_that_is_no_record_is_one_line(tmp_path, kind):
    path = tmp_path / "run" / "record.json"
    path.parent.mkdir()
    timer = None
    if kind == "fifo":
        os.mkfifo(path)
        timer = _open_fifo_writer_later(path)
        timer.start()
        expected = "a FIFO, not a regular file"
    elif kind == "folder":
        path.mkdir()
        expected = "a folder, not a regular file"
    elif kind == "nested":
        path.write_text("[" * 200_000 + "]" * 200_000)
        expected = "nested too deeply"
    else:
        path.write_text('{"status": "completed", "config": {}, "grok_epoch": ' + "7" * 5000 + "}")
        expected = "not a record (Exceeds the limit"
    try:
        with pytest.raises(ConfigError) as err:
            load_record(path)
    finally:
        if timer is not None:
            timer.cancel()
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value), err.value
