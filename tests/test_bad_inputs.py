"""Every bad input a person can give the command line: exit status 2, exactly one line on stderr
that names the field (or file), and nothing created on disk (no run directory, no sweep folder,
no file a planted checkpoint asks for).

The table runs in this process through ``grok_lightning.cli.main`` (stderr captured at the file
descriptor); two cases also run as real processes, where Lightning's own log lines would show.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import load_yaml
from grok_lightning.cli import main

SENTINEL = "PLANTED"  # the file a planted checkpoint's unpickling would create


class Plant:
    """Unpickling this opens (creates) a file: what a crafted checkpoint could do."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def base_config() -> dict:
    """The canonical config shrunk; its logger writes under ./runs (so a run would show)."""
    config = copy.deepcopy(load_yaml("canonical.yaml"))
    config["model"]["init_args"].update(d_model=16, n_layers=1, n_heads=2, d_ff=32, eval_every=2, eval_dense_until=2)
    config["data"]["init_args"].update(p=23, batch_size=64)
    config["trainer"].update(max_epochs=2, enable_progress_bar=False)
    config["trainer"]["logger"]["init_args"].update(save_dir="runs", name="bad", version="v0")
    config["diagnostics"]["image_every"] = 0
    return config


def write(path: Path, content) -> Path:
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


def sweep_spec(base: Path, **changes) -> dict:
    spec = {"name": "bad", "base": str(base), "checkpoint_min_epochs": 0, "checkpoint_every": 1,
            "overrides": {"trainer.max_epochs": 2}, "grid": {"wd": [0.1, 1.0], "seed": [0]}}
    spec.update(changes)
    return spec


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Input files only; the test then checks that nothing else appears below ``tmp_path``."""
    from grok_lightning.sweep.grid import expand, load_sweep
    from grok_lightning.sweep.store import SweepStore

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` does: payload.py below is importable
    base = write(tmp_path / "base.yaml", base_config())
    write(tmp_path / "empty.yaml", "")
    write(tmp_path / "syntax.yaml", "model: {init_args: [1,\n")
    write(tmp_path / "list.yaml", "- 1\n- 2\n")
    write(tmp_path / "lrr.yaml", "model:\n  init_args:\n    lrr: 0.1\n")
    write(tmp_path / "trainer_typo.yaml", "trainer:\n  max_epoch: 3\n")
    write(tmp_path / "lr_inf.yaml", "model:\n  init_args:\n    lr: .inf\n")
    write(tmp_path / "wd_inf.yaml", "model:\n  init_args:\n    weight_decay: .inf\n")
    write(tmp_path / "wd_nan.yaml", "model:\n  init_args:\n    weight_decay: .nan\n")
    (tmp_path / "garbage.ckpt").write_bytes(b"this is not a checkpoint\n" * 20)
    torch.save({"state_dict": {}, "optimizer_states": [], "loops": {}, "x": Plant(str(tmp_path / SENTINEL))},
               tmp_path / "planted.ckpt")
    write(tmp_path / "sweep_two_names.yaml", sweep_spec(base, grid={"wd": [0.1], "weight_decay": [1.0]}))
    write(tmp_path / "sweep_alias_and_key.yaml", sweep_spec(base, grid={"seed": [0], "seed_everything": [1]}))
    write(tmp_path / "sweep_wd_inf.yaml", sweep_spec(base, grid={"wd": [0.1, float("inf")]}))
    write(tmp_path / "sweep_lr_nan.yaml", sweep_spec(base, grid={"lr": [float("nan")]}))
    write(tmp_path / "sweep_epochs_0.yaml", sweep_spec(base, overrides={"trainer.max_epochs": 0}))
    write(tmp_path / "sweep_epochs_-1.yaml", sweep_spec(base, grid={"epochs": [10, -1]}))
    write(tmp_path / "sweep_typo.yaml", sweep_spec(base, grid={"model.init_args.weight_decy": [0.1]}))
    write(tmp_path / "sweep_syntax.yaml", "base: base.yaml\ngrid: {wd: [0.1\n")
    # a sweep folder whose stored sweep.yaml got damaged after it was made
    sweep = load_sweep(write(tmp_path / "sweep_ok.yaml", sweep_spec(base)))
    SweepStore(tmp_path / "damaged").initialize(sweep, expand(sweep))
    (tmp_path / "damaged" / "sweep.yaml").write_text("name: bad\nbase: [unclosed\n")
    SweepStore(tmp_path / "no_base").initialize(sweep, expand(sweep))
    write(tmp_path / "no_base" / "sweep.yaml", {"name": "bad", "grid": {"wd": [0.1]}})
    # records whose outcomes only bracket lambda_c, and that fit
    runs = tmp_path / "records"
    for wd in (0.01, 0.1, 1.0):
        for seed in range(3):
            record = {"status": "completed", "config": {"wd": wd, "seed": seed}, "grok_epoch": 100 if wd >= 0.1 else None,
                      "history": {"epoch": [100], "test_acc": [1.0 if wd >= 0.1 else 0.5]}}
            (runs / f"{wd}_{seed}").mkdir(parents=True)
            (runs / f"{wd}_{seed}" / "record.json").write_text(json.dumps(record))
    # records that break the schema: a grok epoch as a string, a history value as a string
    for name, change in (("string_grok_epoch", {"grok_epoch": "12"}),
                         ("string_history", {"history": {"epoch": [1], "test_acc": ["0.9"]}})):
        shutil.copytree(runs, tmp_path / name)
        record = {"status": "completed", "config": {"wd": 0.1, "seed": 0}, "grok_epoch": 100, **change}
        (tmp_path / name / "0.1_0" / "record.json").write_text(json.dumps(record))
    (tmp_path / "separable_fit.json").write_text(json.dumps(
        {"wd_c": 0.05, "status": "separable", "separable": True, "wd_c_bracket": [0.01, 0.1]}))
    write(tmp_path / "twice.yaml", "trainer:\n  max_epochs: 5\n  max_epochs: 50\n")
    write(tmp_path / "bomb.yaml", BOMB)
    write(tmp_path / "sweep_twice.yaml", "base: base.yaml\ngrid:\n  wd: [0.1]\n  wd: [1.0]\n")
    write(tmp_path / "a_file", "not a folder\n")
    (tmp_path / "a_folder").mkdir()
    # a user's module next to the configs: importing it would create the sentinel
    write(tmp_path / "payload.py", f"open({str(tmp_path / SENTINEL)!r}, 'w')\ndef f(*args):\n    pass\nclass Cb:\n    pass\n")
    write(tmp_path / "lambda.yaml", "trainer:\n  callbacks:\n    - class_path: lightning.pytorch.callbacks.LambdaCallback\n"
                                    "      init_args: {on_fit_start: payload.f}\n")
    write(tmp_path / "cb.yaml", "class_path: payload.Cb\n")
    write(tmp_path / "nested.yaml", "trainer:\n  callbacks: [cb.yaml]\n")
    write(tmp_path / "cb_twice.yaml", "class_path: lightning.pytorch.callbacks.LambdaCallback\n"
                                      "class_path: lightning.pytorch.callbacks.LambdaCallback\n")
    write(tmp_path / "nested_twice.yaml", "trainer:\n  callbacks: [cb_twice.yaml]\n")
    SweepStore(tmp_path / "bad_plan").initialize(sweep, expand(sweep))
    (tmp_path / "bad_plan" / "plan.json").write_text(json.dumps({"runs": [1, 2]}))
    return tmp_path


FIT = ["fit", "--config", "base.yaml"]
#: nested aliases: 10**9 values from nine lines
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
#: id -> (argv, text the one error line must contain: the field or the file)
CASES = {
    # the config parser: unknown keys, wrong types, files
    "unknown key": (FIT + ["--model.foo", "3"], "model.foo"),
    "unknown section": (FIT + ["--modle.lr", "3"], "--modle.lr"),
    "abbreviated key": (FIT + ["--trainer.max_epoch", "3"], "--trainer.max_epoch"),
    "unknown key in YAML": (FIT + ["--config", "lrr.yaml"], "model.lrr"),
    "unknown trainer key in YAML": (FIT + ["--config", "trainer_typo.yaml"], "trainer.max_epoch"),
    "unknown logger argument": (FIT + ["--trainer.logger.init_args.foo", "1"], "trainer.logger.foo"),
    "class_path not a module": (FIT + ["--model.class_path", "os.system"], "model.class_path"),
    "unknown subcommand": (["fitt"], "fitt"),
    "config file missing": (["fit", "--config", "nope.yaml"], "nope.yaml"),
    "config YAML syntax error": (["fit", "--config", "syntax.yaml"], "syntax.yaml"),
    "config YAML empty": (["fit", "--config", "empty.yaml"], "empty.yaml"),
    "config YAML a list": (["fit", "--config", "list.yaml"], "list.yaml"),
    "lr nan": (FIT + ["--model.lr", "nan"], "model.lr"),
    "lr abc": (FIT + ["--model.lr", "abc"], "model.lr"),
    "lr inf": (FIT + ["--model.lr", "inf"], "model.lr"),
    "lr .inf in YAML": (FIT + ["--config", "lr_inf.yaml"], "model.lr"),
    "weight decay .inf in YAML": (FIT + ["--config", "wd_inf.yaml"], "model.weight_decay"),
    "weight decay .nan in YAML": (FIT + ["--config", "wd_nan.yaml"], "model.weight_decay"),
    "max_epochs abc": (FIT + ["--trainer.max_epochs", "abc"], "trainer.max_epochs"),
    "p abc": (FIT + ["--data.p", "abc"], "data.p"),
    "grok threshold abc": (FIT + ["--grok.threshold", "abc"], "grok.threshold"),
    "threads abc": (FIT + ["--run.threads", "abc"], "run.threads"),
    "seed abc": (FIT + ["--seed_everything", "abc"], "seed_everything"),
    "betas abc": (FIT + ["--model.betas", "[0.9, abc]"], "model.betas"),
    "weights_only maybe": (FIT + ["--weights_only", "maybe"], "weights_only"),
    # values the parser accepts and the package refuses
    "max_epochs -1": (FIT + ["--trainer.max_epochs", "-1"], "trainer.max_epochs"),
    "max_epochs 0": (FIT + ["--trainer.max_epochs", "0"], "trainer.max_epochs"),
    "lr 0": (FIT + ["--model.lr", "0"], "model.lr"),
    "weight decay -1": (FIT + ["--model.weight_decay", "-1"], "model.weight_decay"),
    "p 1": (FIT + ["--data.p", "1"], "data.p"),
    "operation pow": (FIT + ["--data.operation", "pow"], "data.operation"),
    "div with p not prime": (FIT + ["--data.operation", "div", "--data.p", "24"], "data.p"),
    "train fraction 1.5": (FIT + ["--data.train_fraction", "1.5"], "data.train_fraction"),
    "n_heads not dividing d_model": (FIT + ["--model.n_heads", "3"], "model.n_heads"),
    "one head with the attention diagnostics": (FIT + ["--model.n_heads", "1"], "model.n_heads=1"),
    "betas >= 1": (FIT + ["--model.betas", "[0.9, 1.5]"], "model.betas"),
    "grok threshold 2": (FIT + ["--grok.threshold", "2"], "grok.threshold"),
    "accelerator foo": (FIT + ["--trainer.accelerator", "foo"], "accelerator"),
    "eps 0": (FIT + ["--model.eps", "0"], "model.eps"),
    "eps -1": (FIT + ["--model.eps", "-1"], "model.eps"),
    "seed 2**32": (FIT + ["--seed_everything", str(2**32)], "seed_everything"),
    "seed -3": (FIT + ["--seed_everything", "-3"], "seed_everything"),
    "n_layers 100000": (FIT + ["--model.n_layers", "100000"], "model.n_layers"),
    "d_model 10**6": (FIT + ["--model.d_model", str(10**6), "--model.n_heads", "1"], "model.d_model"),
    "two devices": (FIT + ["--trainer.devices", "2", "--trainer.accelerator", "cpu"], "trainer.devices"),
    "diagnostics every 0": (FIT + ["--diagnostics.every", "0"], "diagnostics.every"),
    "checkpoint_every -1": (FIT + ["--run.checkpoint_every", "-1"], "run.checkpoint_every"),
    "an empty training split": (FIT + ["--data.train_fraction", "0.0001"], "data.train_fraction=0.0001: gives 0 training"),
    "record_path a folder": (FIT + ["--run.record_path", "a_folder"], "run.record_path='a_folder': is a folder"),
    "logger save_dir a file": (FIT + ["--trainer.logger.init_args.save_dir", "a_file"], "trainer.logger.init_args.save_dir"),
    "logger save_dir below a file": (FIT + ["--trainer.logger.init_args.save_dir", "a_file/runs"],
                                     "trainer.logger.init_args.save_dir"),
    "a YAML key twice": (["fit", "--config", "twice.yaml"], "max_epochs"),
    "a YAML alias bomb": (["fit", "--config", "bomb.yaml"], "bomb.yaml"),
    "an inline YAML alias bomb": (FIT + ["--config", BOMB], "expands to more than"),
    "an inline YAML key twice": (FIT + ["--config", "{trainer: {max_epochs: 5, max_epochs: 50}}"], "'max_epochs' written twice"),
    "a nested config file with a key twice": (FIT + ["--config", "nested_twice.yaml"], "'class_path' written twice"),
    # code: only this package, Lightning, torch and torchmetrics, unless --trust-code says so
    "a callable from a user's module": (FIT + ["--config", "lambda.yaml"], "on_fit_start='payload.f'"),
    "a nested config file naming a user's class": (FIT + ["--config", "nested.yaml"], "'payload.Cb'"),
    "a user's class on the command line": (FIT + ["--trainer.callbacks+=payload.Cb"], "'payload.Cb'"),
    "--trust-code without a module": (FIT + ["--trust-code"], "--trust-code"),
    "--trust-code not a module name": (FIT + ["--trust-code", "../x"], "--trust-code"),
    # checkpoints
    "ckpt_path best": (FIT + ["--ckpt_path", "best"], "ckpt_path"),
    "ckpt_path hpc": (FIT + ["--ckpt_path", "hpc"], "ckpt_path"),
    "ckpt_path registry": (FIT + ["--ckpt_path", "registry"], "ckpt_path"),
    "ckpt_path missing": (FIT + ["--ckpt_path", "nope.ckpt"], "ckpt_path"),
    "ckpt_path garbage": (FIT + ["--ckpt_path", "garbage.ckpt"], "ckpt_path"),
    "ckpt_path planted": (FIT + ["--ckpt_path", "planted.ckpt"], "ckpt_path"),
    "weights_only false": (FIT + ["--weights_only", "false"], "weights_only"),
    # sweeps
    "sweep file missing": (["sweep", "run", "nope_sweep.yaml", "--out", "out"], "nope_sweep.yaml"),
    "sweep YAML syntax error": (["sweep", "run", "sweep_syntax.yaml", "--out", "out"], "sweep_syntax.yaml"),
    "sweep two names for one key": (["sweep", "run", "sweep_two_names.yaml", "--out", "out"], "weight_decay"),
    "sweep alias and its key": (["sweep", "run", "sweep_alias_and_key.yaml", "--out", "out"], "seed_everything"),
    "sweep weight decay .inf": (["sweep", "run", "sweep_wd_inf.yaml", "--out", "out"], "model.weight_decay"),
    "sweep lr .nan": (["sweep", "run", "sweep_lr_nan.yaml", "--out", "out"], "model.lr"),
    "sweep max_epochs 0": (["sweep", "run", "sweep_epochs_0.yaml", "--out", "out"], "trainer.max_epochs"),
    "sweep max_epochs -1": (["sweep", "run", "sweep_epochs_-1.yaml", "--out", "out"], "trainer.max_epochs"),
    "sweep unknown key": (["sweep", "run", "sweep_typo.yaml", "--out", "out"], "weight_decy"),
    "sweep workers abc": (["sweep", "run", "sweep_ok.yaml", "--out", "out", "--workers", "abc"], "--workers"),
    "stored sweep.yaml corrupt": (["sweep", "run", "damaged"], "sweep.yaml"),
    "stored sweep.yaml without base": (["sweep", "run", "no_base"], "sweep.yaml"),
    "sweep status of a non-sweep": (["sweep", "status", "records"], "plan.json"),
    "sweep a YAML key twice": (["sweep", "run", "sweep_twice.yaml", "--out", "out"], "'wd' written twice"),
    "sweep --out empty": (["sweep", "run", "sweep_ok.yaml", "--out", ""], "--out"),
    "sweep --out a file": (["sweep", "run", "sweep_ok.yaml", "--out", "a_file"], "--out"),
    "sweep plan.json of the wrong shape": (["sweep", "run", "bad_plan"], "plan.json"),
    # analysis
    "power-law on a separable fit": (["analyze", "power-law", "records", "--fit", "separable_fit.json",
                                      "--out", "nu.json"], "--fit"),
    "analyze missing directory": (["analyze", "critical-wd", "nowhere", "--out", "fit.json"], "nowhere"),
    "analyze --where without =": (["analyze", "critical-wd", "records", "--where", "wd", "--out", "fit.json"], "--where"),
    "analyze unknown method": (["analyze", "critical-wd", "records", "--method", "mle", "--out", "fit.json"], "--method"),
    "analyze a record whose grok_epoch is a string": (["analyze", "critical-wd", "string_grok_epoch", "--out", "fit.json"],
                                                      "0.1_0/record.json: grok_epoch='12'"),
    "analyze a record whose history holds a string": (["analyze", "critical-wd", "string_history", "--out", "fit.json"],
                                                      "0.1_0/record.json: history.test_acc"),
}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_creates_nothing(workdir, capfd, case):
    argv, field = CASES[case]
    before = _tree(workdir)
    try:
        code = main(list(argv))
    except SystemExit as err:  # argparse exits by itself
        code = err.code
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}; stderr:\n{err}\nstdout:\n{out[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert field in lines[0], lines[0]
    assert _tree(workdir) == before, f"created: {sorted(_tree(workdir) - before)}"
    assert not (workdir / SENTINEL).exists()


@pytest.mark.parametrize("flags, field", [
    (["--model.foo", "3"], "model.foo"),
    (["--trainer.max_epochs", "0"], "trainer.max_epochs"),
])
def test_in_a_real_process_stderr_is_the_one_line(workdir, flags, field):
    """Lightning's own log lines ("Seed set to ...") would show here, not in the table above."""
    result = subprocess.run([sys.executable, "-m", "grok_lightning.cli", *FIT, *flags], capture_output=True,
                            text=True, cwd=workdir, timeout=180)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and field in result.stderr, result.stderr
    assert not (workdir / "runs").exists()


def test_a_bad_environment_seed_is_one_line(workdir, capfd, monkeypatch):
    """``PL_GLOBAL_SEED`` is the seed the data split reads when the config seeds nothing: a value
    that is not a seed is refused before anything is built, whatever ``seed_everything`` says."""
    before = _tree(workdir)
    for value in ("abc", "-3", str(2**32)):
        monkeypatch.setenv("PL_GLOBAL_SEED", value)
        for seed in ("false", "0"):
            assert main(FIT + ["--seed_everything", seed]) == 2
            lines = capfd.readouterr().err.strip().splitlines()
            assert len(lines) == 1 and f"PL_GLOBAL_SEED={value!r}" in lines[0], lines
    assert _tree(workdir) == before
