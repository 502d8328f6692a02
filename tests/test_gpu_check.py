"""`make gpu-check DEVICE=cpu` writes its one JSON; the precision verdict and the time box, on CPU."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402


def _run(seed, grok, s_bar, entropy=0.05, epochs=200):
    """A run summary as gpu_check.run_summary writes it, with a flat s_bar bump at t_grok."""
    grid = list(range(0, epochs + 1, 10))
    peak = [s_bar + (0.1 if grok is not None and abs(e - grok) <= 10 else 0.0) for e in grid]
    return {"seed": seed, "grok_epoch": grok,
            "history": {"epoch": grid, "mean_similarity": peak, "entropy_std": [entropy] * len(grid)}}


def test_precision_verdict_agrees_disagrees_or_cannot_tell():
    fp32 = [_run(s, 120 + 10 * s, 0.85) for s in range(1, 5)]
    close = [_run(s, 120 + 10 * s + (10 if s == 1 else 0), 0.855) for s in range(1, 5)]
    verdict = gpu_check.precision_verdict(fp32, close)
    assert verdict["verdict"] == "agrees", verdict["checks"]
    late = [_run(s, 150 + 10 * s, 0.85) for s in range(1, 5)]  # t_grok 30 epochs later on every seed
    verdict = gpu_check.precision_verdict(fp32, late)
    assert verdict["verdict"] == "disagrees" and verdict["checks"]["grok_epoch"]["ok"] is False
    shifted = [_run(s, 120 + 10 * s, 0.9) for s in range(1, 5)]  # s_bar 0.05 higher throughout
    assert gpu_check.precision_verdict(fp32, shifted)["checks"]["s_bar_peak"]["ok"] is False
    never = [_run(s, None, 0.85) for s in range(1, 5)]
    assert gpu_check.precision_verdict(never, never)["verdict"] == "undecided"


def test_precision_verdict_compares_up_to_the_epochs_both_reached():
    fp32 = [_run(s, 150, 0.85, epochs=300) for s in (1, 2)]
    cut = [_run(s, None, 0.85, epochs=100) for s in (1, 2)]  # its time box ended before t_grok
    verdict = gpu_check.precision_verdict(fp32, cut)
    assert verdict["compared_up_to_epoch"] == {1: 100, 2: 100}
    assert verdict["checks"]["same_seeds_grok"] == {"fp32": [], "mode": [], "ok": True}
    assert verdict["verdict"] == "undecided"


def test_time_box_signals_once_and_a_late_timer_is_harmless():
    seen = []
    with gpu_check.time_box(1.0):
        signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # what run_sweep installs
        deadline = time.time() + 10
        while not seen and time.time() < deadline:
            time.sleep(0.05)
    assert seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert gpu_check.epochs_reached({"final_epoch": None, "history": {"epoch": [0, 10, 140]}}) == 140
    assert gpu_check.epochs_reached({"final_epoch": 200, "history": {"epoch": [0, 190]}}) == 200


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_gpu_check_on_cpu_writes_one_json(tmp_path):
    out = tmp_path / "gpu_check.json"
    # -o install: the venv is there already (make test installed it); never reinstall inside a test
    done = subprocess.run(["make", "-o", "install", "gpu-check", "DEVICE=cpu", f"GPU_CHECK_OUT={out}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    errors = {k: v["error"] for k, v in report.items() if isinstance(v, dict) and v.get("status") == "error"}
    assert not errors, errors
    assert report["environment"]["device"] == "cpu"
    assert report["mamba_parity"]["status"] == "skipped"
    assert [row["E"] for row in report["throughput"]["rows"]] == [1, 2]
    assert all(row["member_epochs_per_s"] > 0 for row in report["throughput"]["rows"])
    assert report["slice"]["statuses"] == {"completed": 2} and report["slice"]["member_epochs"] == 6
    assert all(run["vectorized"] is True for run in report["slice"]["runs"])
    assert report["projection"]["paper_runs"] > 1000 and report["projection"]["end_to_end_hours_1_device"] > 0
    bf16 = report["precision"]["bf16"]
    assert bf16["trainer_precision"] == "bf16-mixed" and bf16["statuses"] == {"completed": 2}
    assert bf16["verdict"]["verdict"] == "undecided"  # 3 epochs: nothing groks, nothing to judge


@pytest.mark.slow
def test_gpu_pilots_script_on_cpu_writes_records_the_scorer_reads(tmp_path):
    """benchmarks/gpu_pilots.py --tiny: every part runs (ensembles for the Fig. 2 arms, the
    gradient-clipping and warmup arms included; separate runs for the E12 controls, which keep
    peak checkpoints) and the Fig. 2 scorer reads its stores."""
    out = tmp_path / "gpu_pilots.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_pilots.py"), "--device", "cpu", "--tiny",
                           "--deadline", "400", "--root", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    parts = json.loads(out.read_text())["parts"]
    assert {k: v["statuses"] for k, v in parts.items()} == {
        "fig2_arms": {"completed": 16}, "fig2_default": {"completed": 2}, "e12_pilot": {"completed": 2}}
    assert len(list((tmp_path / "e12_pilot" / "gpu" / "runs").glob("*/record.json"))) == 2  # separate runs, no ensemble
    from reproduce.pilots import fig2_search

    arms = fig2_search.load_arms(tmp_path / "fig2_search", also=())
    assert len(arms) == 9 and all(len(records) == 2 for records in arms.values())


def test_gpu_systems_parts_are_the_paper_profiles_own_runs(tmp_path):
    """Each part of benchmarks/gpu_systems.py narrows a sweep's paper profile to one system: its
    runs are a subset of the paper profile's (same ids and names), so the paper report reads them."""
    import gpu_systems

    from grok_lightning.sweep.grid import load_sweep

    sizes = {}
    for name, sweep_name, zip_axes, _, _, _ in gpu_systems.PARTS:
        part = {s.run_id: s.name for s in load_sweep(gpu_systems.narrowed(sweep_name, zip_axes, tmp_path, False),
                                                     profile="paper").expand()}
        full = {s.run_id: s.name for s in load_sweep(REPO / "configs" / "sweeps" / sweep_name, profile="paper").expand()}
        assert part.items() <= full.items()
        sizes[name] = len(part)
    assert sizes == {"fig10_mlp": 70, "fig10_lstm": 70, "fig9_small": 140}


@pytest.mark.slow
def test_gpu_systems_script_on_cpu_trains_each_part_as_one_ensemble(tmp_path):
    out = tmp_path / "gpu_systems.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_systems.py"), "--device", "cpu", "--tiny",
                           "--parts", "fig10_mlp", "--deadline", "300", "--root", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    part = json.loads(out.read_text())["parts"]["fig10_mlp"]
    assert part["statuses"] == {"completed": 4} and part["member_epochs"] == 12
    assert "4 to run in 1 task(s)" in done.stdout  # the 2 lambdas x 2 seeds stacked as one ensemble
