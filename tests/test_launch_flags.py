"""Ensemble size, launcher and devices reach every sweep: from `make`, through reproduce.targets.all, to run_sweep."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest

from reproduce.targets import common
from reproduce.targets.registry import order

REPO = Path(__file__).resolve().parents[1]
# under `make test` the outer make's MAKELEVEL/MAKEFLAGS would make the inner one print
# "Entering/Leaving directory" lines after the command; run it as a top-level make
MAKE = ["make", "--no-print-directory"]
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
FLAGS = ["--ensemble-size", "64", "--workers", "3", "--devices", "0,2", "--runs-per-device", "2",
         "--launcher", "local"]
RAY_FLAGS = ["--launcher", "ray", "--address", "head:6379", "--gpus-per-run", "0.5", "--no-train"]


def test_sweep_records_passes_the_launch_flags_to_run_sweep(tmp_path, monkeypatch):
    import grok_lightning.sweep.launchers as launchers

    calls = []
    monkeypatch.setattr(launchers, "run_sweep", lambda *a, **kw: calls.append(kw))
    args = common.parse_args("doc", ["--out", str(tmp_path)] + FLAGS)
    records, missing = common.sweep_records("canonical_wd.yaml", "smoke", tmp_path, args.launch)
    assert records == [] and len(missing) > 0  # nothing trained (run_sweep is faked): every run missing
    assert calls and {k: calls[0][k] for k in ("ensemble_size", "devices", "runs_per_device", "launcher", "workers")} == \
        {"ensemble_size": 64, "devices": "0,2", "runs_per_device": 2, "launcher": "local", "workers": 3}


@pytest.mark.parametrize("flags", [FLAGS, RAY_FLAGS])
def test_reproduce_all_forwards_every_launch_flag_to_each_target(tmp_path, monkeypatch, flags):
    import reproduce.targets.all as everything

    seen = {}

    def fake_target(name):
        def main(argv):
            seen[name] = common.parse_args(name, argv).launch
        return types.SimpleNamespace(main=main)

    monkeypatch.setattr(everything.importlib, "import_module", lambda module: fake_target(module))
    monkeypatch.setattr(everything, "write_report", lambda *a: tmp_path / "REPORT.md")
    everything.main(["--out", str(tmp_path)] + flags)
    expected = common.parse_args("doc", ["--out", str(tmp_path)] + flags).launch
    assert len(seen) == len(order("smoke"))
    assert all(launch == expected for launch in seen.values()), (seen, expected)


def test_reproduce_all_runs_only_the_targets_asked_for_and_merges_their_times(tmp_path, monkeypatch):
    import reproduce.targets.all as everything

    ran = []
    monkeypatch.setattr(everything.importlib, "import_module",
                        lambda module: types.SimpleNamespace(main=lambda argv: ran.append(module)))
    monkeypatch.setattr(everything, "write_report", lambda *a: tmp_path / "REPORT.md")
    (tmp_path / "cpu_time.json").write_text('{"fig8": {"wall_s": 5, "cpu_s": 9}}')  # another pass's
    everything.main(["--profile", "medium", "--out", str(tmp_path), "--targets", "fig2", "long_horizon"])
    assert ran == ["reproduce.targets.long_horizon", "reproduce.targets.fig2"]  # the profile's order
    assert set(json.loads((tmp_path / "cpu_time.json").read_text())) == {"fig8", "long_horizon", "fig2"}
    with pytest.raises(SystemExit, match="fig9"):  # a target with no medium profile
        everything.main(["--profile", "medium", "--out", str(tmp_path), "--targets", "fig9"])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_every_make_reproduce_target_passes_the_launch_variables():
    help_text = subprocess.run(MAKE + ["-s", "help"], cwd=REPO, env=MAKE_ENV, capture_output=True, text=True, check=True).stdout
    targets = re.findall(r"^\s+(reproduce-\S+)", help_text, re.M)
    assert len(targets) >= 15
    variables = ["ENSEMBLE=64", "WORKERS=3", "DEVICES=0,2", "RUNS_PER_DEVICE=2", "LAUNCHER=ray",
                 "ADDRESS=head:6379", "GPUS_PER_RUN=0.5"]
    for target in targets:
        # -o: take the venv as installed, so -n prints only the target's own command
        out = subprocess.run(MAKE + ["-n", "-o", "install", target] + variables, cwd=REPO, env=MAKE_ENV, capture_output=True,
                             text=True, check=True).stdout
        command = out.strip().splitlines()[-1].split()
        assert " ".join(command[command.index("--ensemble-size"):]) == (
            "--ensemble-size 64 --workers 3 --devices 0,2 --runs-per-device 2 --launcher ray --address head:6379 "
            "--gpus-per-run 0.5"), (target, out)
    plain = subprocess.run(MAKE + ["-n", "-o", "install", "reproduce-fig5"], cwd=REPO, env=MAKE_ENV, capture_output=True,
                           text=True, check=True).stdout
    assert plain.split()[-4:] == ["--profile", "smoke", "--out", "reproduction"], "no flags unless asked for"
