"""Vectorised ensembles: E members trained together behave like E separate runs."""

from __future__ import annotations

import copy
import json
import os
import warnings

import pytest
import torch
from lightning.pytorch import Callback

from conftest import InterruptAfter, tiny_config
from grok_lightning.config import ConfigError
from grok_lightning.ensembles import EnsembleModule, build_ensemble, compatibility_key, run_ensemble
from grok_lightning.run import GrokCLI

MEMBERS = [(7, 0.1), (11, 1.0), (31, 3.0), (42, 0.5)]  # (seed, lambda)
# Tolerance: the vmapped forward/backward runs batched matmuls whose float32 summation order
# differs from E separate matmuls (differences ~1e-9 per step); Adam's normalised update keeps
# them from growing, so after 50+ steps losses and weights agree far inside 1e-5.
# One documented exception: the attention *key bias*. Softmax is invariant to adding the same
# q.b_k to every score of a row, so its gradient is exactly zero in exact arithmetic and pure
# rounding noise (~1e-10) in float32; Adam divides that noise by its own RMS and takes full
# lr-sized steps in random directions. Any change of summation order (another BLAS, a GPU, this
# vmap) moves it by O(lr) per step, with no effect on any output. It is compared to 1e-2.
TOL = 1e-5
KEY_BIAS_TOL = 1e-2


def member_config(tmp_path, seed, wd, tag, epochs=12, **overrides):
    config = tiny_config(tmp_path / tag, max_epochs=epochs, **overrides)
    config["seed_everything"] = seed
    config["model"]["init_args"]["weight_decay"] = wd
    config["trainer"]["logger"]["init_args"]["version"] = f"s{seed}_wd{wd}"
    config["run"].update(checkpoint_every=0, run_id=f"s{seed}_wd{wd}")
    return config


def separate(config, callbacks=()):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*args parameter.*")
        cli = GrokCLI(args=config, run=False)
    cli.trainer.callbacks[-1:-1] = list(callbacks)  # before the recorder, like YAML callbacks
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    torch.set_flush_denormal(False)
    recorder = next(c for c in cli.trainer.callbacks if hasattr(c, "record"))
    return cli.model, recorder.record, cli.trainer.global_step


def assert_same_run(module_a, record_a, module_b, record_b):
    assert record_a["history"]["epoch"] == record_b["history"]["epoch"]
    assert record_a["status"] == record_b["status"]
    for key in ("train_loss", "test_loss", "weight_norm", "mean_similarity", "entropy_std"):
        a, b = record_a["history"][key], record_b["history"][key]
        assert max(abs(x - y) for x, y in zip(a, b)) < TOL, key
    for (name, a), b in zip(module_a.model.named_parameters(), module_b.model.parameters()):
        if name.endswith("attn.qkv.bias"):  # [q | k | v]: the key third has a zero gradient
            d = a.shape[0] // 3
            key = torch.zeros_like(a, dtype=torch.bool)
            key[d : 2 * d] = True
            assert torch.allclose(a[~key], b[~key], rtol=0, atol=TOL), name
            assert torch.allclose(a[key], b[key], rtol=0, atol=KEY_BIAS_TOL), name
        else:
            assert torch.allclose(a, b, rtol=0, atol=TOL), name


@pytest.mark.slow
def test_four_members_equal_four_separate_runs(tmp_path):
    runs = [separate(member_config(tmp_path, s, w, "separate")) for s, w in MEMBERS]
    assert all(steps >= 50 for _, _, steps in runs)
    trainer, ensemble, loaders = build_ensemble([member_config(tmp_path, s, w, "ensemble") for s, w in MEMBERS],
                                                tmp_path / "root", checkpoint_every=0)
    trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    assert ensemble.vectorized is True and trainer.global_step == runs[0][2]
    for e, (module, record, _) in enumerate(runs):
        member_record = json.loads((tmp_path / "ensemble" / "tiny" / f"s{MEMBERS[e][0]}_wd{MEMBERS[e][1]}" / "record.json").read_text())
        assert member_record["config"]["seed"] == MEMBERS[e][0] and member_record["config"]["wd"] == MEMBERS[e][1]
        assert member_record["run_id"] == record["run_id"]
        assert_same_run(module, record, ensemble.members[e], member_record)
        events = list((tmp_path / "ensemble" / "tiny" / f"s{MEMBERS[e][0]}_wd{MEMBERS[e][1]}").glob("events.out.tfevents*"))
        assert events, "each member writes its own TensorBoard events"


class StopAt(Callback):
    """Stops a run at the end of epoch ``epoch`` (what GrokDetector's extra_epochs does)."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch + 1 == self.epoch:
            trainer.should_stop = True


@pytest.mark.slow
def test_finished_and_diverged_members_stop_alone(tmp_path):
    configs = [member_config(tmp_path, s, w, "ensemble", epochs=6) for s, w in MEMBERS[:3]]
    trainer, ensemble, loaders = build_ensemble(configs, tmp_path / "root", checkpoint_every=0)
    ensemble.member_parts[0]["callbacks"].insert(-1, StopAt(3))  # member 0 finishes at epoch 3 (before its recorder)
    with torch.no_grad():
        ensemble.members[1].model.head.bias.fill_(float("nan"))  # member 1 diverges at once
    trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    records = [next(c for c in p["callbacks"] if hasattr(c, "record")).record for p in ensemble.member_parts]
    assert [r["status"] for r in records] == ["completed", "diverged", "completed"]
    stopped, stopped_record, _ = separate(member_config(tmp_path, *MEMBERS[0], "separate", epochs=6), [StopAt(3)])
    assert records[1]["diverged_epoch"] == 1 and records[2]["final_epoch"] == 6
    assert records[0]["final_epoch"] == stopped_record["final_epoch"] < 6  # last evaluation before the stop
    assert_same_run(stopped, stopped_record, ensemble.members[0], records[0])  # it stopped where a run stops
    alone, alone_record, _ = separate(member_config(tmp_path, *MEMBERS[2], "separate", epochs=6))
    assert_same_run(alone, alone_record, ensemble.members[2], records[2])  # the others were not disturbed


@pytest.mark.slow
def test_interrupted_ensemble_resumes_with_nothing_lost(tmp_path):
    configs = lambda tag: [member_config(tmp_path, s, w, tag, epochs=6) for s, w in MEMBERS[:2]]  # noqa: E731
    full = run_ensemble(configs("full"), tmp_path / "full_root", checkpoint_every=0)
    torch.set_flush_denormal(False)
    trainer, ensemble, loaders = build_ensemble(configs("cut"), tmp_path / "cut_root", checkpoint_every=1,
                                                callbacks=[InterruptAfter(3)])
    with pytest.raises(SystemExit):  # Lightning's graceful shutdown after Ctrl-C
        trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    ckpt = tmp_path / "cut_root" / "checkpoints" / "last.ckpt"
    assert ckpt.is_file()
    resumed = run_ensemble(configs("cut"), tmp_path / "cut_root", ckpt_path=str(ckpt), checkpoint_every=1)
    for a, b in zip(full, resumed):
        assert a["history"]["epoch"] == b["history"]["epoch"] and b["status"] == "completed"
        assert max(abs(x - y) for x, y in zip(a["history"]["test_loss"], b["history"]["test_loss"])) < TOL


def test_compatibility_key_and_bad_ensembles(tmp_path):
    a = member_config(tmp_path, 7, 0.1, "x")
    b = member_config(tmp_path, 11, 3.0, "x")
    assert compatibility_key(a) == compatibility_key(b)  # seed, lambda, names and ids may differ
    c = copy.deepcopy(a)
    c["model"]["init_args"]["lr"] = 3e-3
    assert compatibility_key(a) != compatibility_key(c)
    with pytest.raises(ConfigError, match="differ in more than seed, weight decay and initialisation"):
        build_ensemble([a, c], tmp_path / "root")
    with pytest.raises(ValueError):
        EnsembleModule([])


@pytest.mark.slow
def test_tian_members_equal_separate_runs(tmp_path):
    from conftest import load_yaml

    def config(seed, eta):
        c = copy.deepcopy(load_yaml("tian.yaml"))
        c["seed_everything"] = seed
        c["model"]["init_args"].update(M=11, hidden=64, eta=eta, theorem6_epochs=[10], theorem6_pairs=20)
        c["data"]["init_args"].update(M=11, train_fraction=0.5)
        c["trainer"].update(max_epochs=40, enable_progress_bar=False)
        c["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path), version=f"s{seed}_eta{eta}")
        c["trainer"]["callbacks"][0]["init_args"].update(window=5, slope_span=5, min_epoch=10)
        c["run"].update(checkpoint_every=0, run_id=f"s{seed}_eta{eta}")
        return c

    members = [(0, 2e-4), (1, 0.0), (2, 1e-3)]
    runs = [separate(config(s, eta)) for s, eta in members]
    records = run_ensemble([config(s, eta) for s, eta in members], tmp_path / "root", checkpoint_every=0)
    torch.set_flush_denormal(False)
    for (_, alone, _), together in zip(runs, records):
        assert alone["history"]["epoch"] == together["history"]["epoch"]
        # sigma_2/sigma_3 is a ratio of small eigenvalues of the Gram of weight *updates* (each ~lr
        # in size, so a 1e-9 weight difference is ~1e-6 of an update; measured up to 1.4e-4): 1e-3 there
        for key, tol in (("train_loss", TOL), ("test_loss", TOL), ("rho_tian", TOL), ("lockin_w5_ratio23", 1e-3)):
            pairs = [(x, y) for x, y in zip(alone["history"][key], together["history"][key]) if x is not None and x == x]
            assert len(pairs) > 20 and max(abs(x - y) / max(1.0, abs(x)) for x, y in pairs) < tol, key
        assert alone.get("lockin_fire_epoch_w5") == together.get("lockin_fire_epoch_w5")
        assert (alone.get("theorem6") or {}).keys() == (together.get("theorem6") or {}).keys()


@pytest.mark.slow
def test_sweep_with_ensembles_writes_the_same_records(tmp_path):
    from test_sweep import TINY

    from grok_lightning.sweep.launchers import run_sweep
    from grok_lightning.sweep.packing import pack_tasks
    from grok_lightning.sweep.store import SweepStore, collect

    threads = torch.get_num_threads()
    quiet = open(os.devnull, "w")
    plain = run_sweep(TINY, out=tmp_path / "plain", workers=0, threads_per_worker=1, stream=quiet)
    packed = run_sweep(TINY, out=tmp_path / "packed", workers=2, threads_per_worker=1, stream=quiet, ensemble_size=4,
                       ensemble_on_cpu=True)
    torch.set_num_threads(threads)
    assert plain.statuses == packed.statuses == {"completed": 6}
    ensembles = sorted((tmp_path / "packed" / "ensembles").iterdir())
    assert [len(json.loads((d / "members.json").read_text())) for d in ensembles] in ([4, 2], [2, 4])
    a, b = collect(tmp_path / "plain"), collect(tmp_path / "packed")
    assert list(a["run_id"]) == list(b["run_id"]) and list(a["status"]) == list(b["status"])
    for column in ("final_test_loss", "final_train_loss"):
        assert (a[column] - b[column]).abs().max() < TOL, column
    store_a, store_b = SweepStore(tmp_path / "plain"), SweepStore(tmp_path / "packed")
    for entry in store_a.load_plan():
        ra, rb = store_a.read_record(entry["name"]), store_b.read_record(entry["name"])
        assert ra["config"] == rb["config"] and ra["history"]["epoch"] == rb["history"]["epoch"]
    # a rerun finds everything final: nothing is retrained, ensembled or not
    again = run_sweep(TINY, out=tmp_path / "packed", workers=0, stream=quiet, ensemble_size=4, ensemble_on_cpu=True)
    assert again.skipped == 6 and again.ran == 0
    assert pack_tasks([], 4, tmp_path) == []


@pytest.mark.slow
def test_killed_ensembled_sweep_resumes_from_the_ensemble_checkpoint(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from test_sweep import tiny_spec, write_spec

    from grok_lightning.sweep.store import collect

    spec = tiny_spec()
    spec["overrides"]["trainer.max_epochs"] = 12
    path = write_spec(tmp_path, spec)
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "grok_lightning.cli", "sweep", "run", str(path), "--out", str(out),
               "--workers", "1", "--threads-per-worker", "1", "--ensemble-size", "6", "--ensemble-on-cpu"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    deadline, killed = time.time() + 240, False
    while time.time() < deadline and proc.poll() is None:
        if list(out.glob("ensembles/*/checkpoints/last.ckpt")):
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.02)
    proc.wait()
    assert killed, "never caught the ensemble mid-way"
    resumed = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0 and "6 runs: done 6" in resumed.stdout, resumed.stdout + resumed.stderr
    log = next(out.glob("ensembles/*/run.log")).read_text()
    assert "resuming from" in log
    plain = tmp_path / "plain"
    subprocess.run(command[:6] + ["--out", str(plain), "--workers", "0"], check=True, capture_output=True, cwd=tmp_path, timeout=300)
    a, b = collect(out), collect(plain)
    assert (a["final_test_loss"] - b["final_test_loss"]).abs().max() < TOL
    assert set(a["status"]) == {"completed"} and list(a["final_epoch"]) == [12] * 6


def _stepper(n: int, arch: str = "transformer", **kwargs):
    """An ensemble of n tiny members on p = 23 (no Trainer), its optimizer and one batch per member."""
    from grok_lightning.data.modular import ModularArithmeticDataModule
    from grok_lightning.modules import GrokkingModule

    members, parts, batches = [], [], []
    for e in range(n):
        torch.manual_seed(e)
        members.append(GrokkingModule(arch=arch, weight_decay=0.5 * (e + 1), modulus=23, d_model=16, n_layers=1,
                                      n_heads=2, d_ff=32, **kwargs))
        dm = ModularArithmeticDataModule(p=23, batch_size=64, split_seed=e)
        dm.setup("fit")
        parts.append({"datamodule": dm})
        batches.append(next(iter(dm.train_dataloader())))
    ensemble = EnsembleModule(members)
    ensemble.member_parts = parts
    return ensemble, ensemble.configure_optimizers(), batches


def test_out_of_memory_halves_the_member_chunks_and_keeps_the_step(monkeypatch):
    reference, ref_optimizer, batches = _stepper(4)
    for _ in range(3):
        reference.train_step(batches, ref_optimizer)
    ensemble, optimizer, batches = _stepper(4)
    real = ensemble._vmapped_losses

    def tight_memory(params, members, chunk_batches):
        if len(members) > 2:  # what a full GPU says when four members do not fit
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(params, members, chunk_batches)

    monkeypatch.setattr(ensemble, "_vmapped_losses", tight_memory)
    with pytest.warns(UserWarning, match="out of memory"):
        for _ in range(3):
            ensemble.train_step(batches, optimizer)
    assert ensemble.member_chunks == 2
    for (name, a), b in zip(reference.named_parameters(), ensemble.parameters()):
        assert torch.allclose(a, b, rtol=0, atol=1e-6), name


def test_an_error_after_the_probe_is_not_swallowed(monkeypatch):
    ensemble, optimizer, batches = _stepper(2)
    assert ensemble.vectorized is True
    monkeypatch.setattr(ensemble, "_vmapped_losses", lambda *a: (_ for _ in ()).throw(RuntimeError("a real bug")))
    with pytest.raises(RuntimeError, match="a real bug"):
        ensemble.train_step(batches, optimizer)


def test_an_untraceable_model_trains_in_a_loop_and_records_it():
    with pytest.warns(UserWarning, match="vmap cannot trace"):
        ensemble, optimizer, batches = _stepper(2, arch="lstm", arch_kwargs={"d_embed": 8, "hidden": 8, "n_layers": 1})
    assert ensemble.vectorized is False
    assert all(m.record_extras["vectorized"] is False for m in ensemble.members)
    before = [p.detach().clone() for p in ensemble.members[1].parameters()]
    ensemble.train_step(batches, optimizer)
    assert any(not torch.equal(a, b) for a, b in zip(before, ensemble.members[1].parameters()))


def test_member_views_share_the_stacked_weights_and_optimizer_state():
    ensemble, optimizer, batches = _stepper(3)
    ensemble.train_step(batches, optimizer)
    stacked = ensemble._stacked["head.weight"]
    member = ensemble.members[1].model.head.weight
    assert member.data_ptr() == stacked[1].data_ptr()
    with torch.no_grad():
        member.mul_(0.0)  # an intervention writing a member's weights writes its row
    assert float(stacked[1].detach().abs().sum()) == 0.0 and float(stacked[0].detach().abs().sum()) > 0.0
    ensemble._trainer = type("T", (), {"optimizers": [optimizer]})()
    state = ensemble.member_optimizer_state(1, member)
    assert torch.equal(state["exp_avg"], optimizer.state[stacked]["exp_avg"][1])


def test_a_sweep_on_cpu_trains_single_runs_unless_asked_to_pack(tmp_path, monkeypatch):
    import io

    from test_sweep import TINY

    from grok_lightning.sweep import launchers

    monkeypatch.setattr(launchers.LocalLauncher, "on_gpu", lambda self, settings: False)
    first_two = lambda entry: entry["name"] in names[:2]  # noqa: E731
    _, runs, _ = launchers.prepare(TINY, None, tmp_path / "plan")
    names = sorted(run.name for run in runs)
    said = io.StringIO()
    result = launchers.run_sweep(TINY, out=tmp_path / "cpu", workers=0, stream=said, ensemble_size=4, only=first_two)
    assert result.statuses == {"completed": 2} and not (tmp_path / "cpu" / "ensembles").exists()
    assert "--ensemble-size 4: the runs train on CPU" in said.getvalue()
    monkeypatch.setattr(launchers.LocalLauncher, "on_gpu", lambda self, settings: True)  # a GPU: packed as asked
    packed = launchers.run_sweep(TINY, out=tmp_path / "gpu", workers=0, stream=io.StringIO(), ensemble_size=4,
                                 only=first_two)
    assert packed.statuses == {"completed": 2} and len(list((tmp_path / "gpu" / "ensembles").iterdir())) == 1
