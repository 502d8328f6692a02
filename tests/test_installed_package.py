"""The package as someone who installs it meets it: the wheel built from this tree, installed into a
fresh virtual environment, used from a folder outside the clone.

The environment sees the dependencies (torch, Lightning, ...) of the one running the tests through a
path file, so nothing is downloaded; grok_lightning itself comes only from the wheel: neither the
clone nor an editable install is on its path, and an audit hook fails any file it opens inside the
clone. A config or reference file missing from the wheel, or a module reading the repository, fails
here.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
#: what a wheel is built from (pyproject.toml's package and its package data)
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "grok_lightning", "configs", "reference")

CHECK = r'''
import importlib, json, os, pkgutil, sys
repo, venv = (os.path.realpath(p) for p in sys.argv[1:3])

def no_repository(event, args):  # the dependencies may live in the clone's .venv; nothing else there
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(repo + os.sep) and not path.startswith(venv + os.sep):
            raise RuntimeError(f"read the repository: {path}")

sys.addaudithook(no_repository)
import torch
import grok_lightning
assert grok_lightning.__file__.startswith(sys.prefix), grok_lightning.__file__
modules = [m.name for m in pkgutil.walk_packages(grok_lightning.__path__, "grok_lightning.")]
for name in modules:
    importlib.import_module(name)
from grok_lightning.diagnostics import masked_attention_statistics
from grok_lightning.metrics import attention_statistics
from grok_lightning.metrics.readings import attention_readings
from grok_lightning.package_data import config_file
from grok_lightning.stats.trajectory import read_off_reference

attention = torch.rand(6, 4, 3, 3, generator=torch.Generator().manual_seed(0)).softmax(-1)  # (B, H, T, T)
stats, readings = attention_statistics([attention]), attention_readings([attention])
masked = masked_attention_statistics([attention], torch.ones(6, 3, dtype=torch.bool))
assert abs(float(stats["entropy_std"]) - readings["released"]["entropy_std"]) < 1e-6
assert abs(float(stats["mean_similarity"]) - float(masked["mean_similarity"])) < 1e-6
assert str(config_file("canonical")).startswith(sys.prefix) and len(read_off_reference()["epoch"]) > 10
print(json.dumps({"modules": len(modules), "s_bar": float(stats["mean_similarity"]),
                  "sigma_H": float(stats["entropy_std"])}))
'''


def _run(args: list, cwd: Path, env: dict, timeout: int = 600) -> str:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def test_the_wheel_installs_into_a_fresh_venv_and_works_outside_the_clone(tmp_path):
    assert REPO not in tmp_path.resolve().parents
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    source = tmp_path / "source"  # a copy of the tree: building in the clone would leave build/ there
    source.mkdir()
    for name in SOURCE:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        kwargs = {"symlinks": True, "ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}
        copy(REPO / name, source / name, **kwargs)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", tmp_path / "dist", source], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("grok_lightning-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("configs/canonical.yaml", "configs/smoke.yaml", "configs/sweeps/canonical_wd.yaml",
                 "configs/interventions/head_reinit.yaml", "reference/fig2_median_read_off.csv", "reference/README.md"):
        assert f"grok_lightning/{data}" in names, data

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, env)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], tmp_path, env)
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env).strip())
    # the dependencies: a plain path line adds the folder without running its .pth files, so an
    # editable grok_lightning installed there stays invisible
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "work"
    work.mkdir()
    checked = _run([python, "-c", CHECK, REPO, REPO / ".venv"], work, env)
    assert '"modules"' in checked, checked

    demo = _run([venv / "bin" / "grok-lightning", "demo", "--trainer.max_epochs", "20",
                 "--trainer.enable_progress_bar", "false"], work, env)
    record = work / "runs" / "demo" / "version_0" / "record.json"
    assert record.is_file() and list(record.parent.glob("events.out.tfevents.*")), demo
    (command,) = [line.split(": ", 1)[1] for line in demo.splitlines() if line.startswith("TensorBoard: ")]
    assert command.endswith("--logdir runs/demo/version_0") and "#custom_scalars&_smoothingWeight=0" in demo
    # the printed command runs as printed (this venv has no tensorboard script: python -m tensorboard.main)
    version = _run(shlex.split(command.replace("--logdir runs/demo/version_0", "--version_tb")), work, env)
    assert version.strip()[:1].isdigit(), version

    planned = _run([venv / "bin" / "grok-lightning", "sweep", "run", "tiny_test", "--dry-run", "--out", work / "sweep"],
                   work, env)
    assert "runs ->" in planned, planned
