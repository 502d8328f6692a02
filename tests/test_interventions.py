"""HeadReinit and WeightNormClip: what they change, what they leave alone, once-only across resumes,
exclusion on non-finite values, and configuration errors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from grok_lightning.callbacks import HeadReinit, InterventionSource, WeightNormClip
from grok_lightning.callbacks.interventions import _Intervention
from grok_lightning.config import ConfigError
from grok_lightning.modules import GrokkingModule
from grok_lightning.records import new_record, write_json_atomic
from grok_lightning.run import run_config


def _module_and_optimizer():
    torch.manual_seed(0)
    module = GrokkingModule(d_model=16, n_layers=2, n_heads=4, d_ff=32, modulus=7)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)
    loss = module.model(torch.randint(0, 7, (8, 3))).square().mean()
    loss.backward()
    optimizer.step()  # so that Adam has moments to reset
    return module, SimpleNamespace(optimizers=[optimizer], current_epoch=5, logger=None)


def test_head_reinit_changes_only_the_chosen_heads_and_can_give_them_a_fresh_adam_state():
    module, trainer = _module_and_optimizer()
    before = {n: p.detach().clone() for n, p in module.model.named_parameters()}
    callback = HeadReinit(epoch=5, heads=[1, 3], layers=[1], optimizer_state="fresh")
    with torch.no_grad():
        log = callback.apply(trainer, module)
    assert log["heads"] == {"1": [1, 3]} and log["norm_before"] > 0 and log["norm_after"] > 0
    d, dh = 16, 4
    changed = torch.zeros(3 * d, dtype=torch.bool)
    for part in range(3):
        for h in (1, 3):
            changed[part * d + h * dh: part * d + (h + 1) * dh] = True
    qkv = module.model.blocks[1].attn.qkv.weight
    assert torch.equal(qkv[~changed], before["blocks.1.attn.qkv.weight"][~changed])
    assert (qkv[changed] != before["blocks.1.attn.qkv.weight"][changed]).all()
    assert qkv[changed].abs().max() <= 1 / math.sqrt(d)  # nn.Linear's own init range
    out = module.model.blocks[1].attn.out.weight
    cols = torch.zeros(d, dtype=torch.bool)
    cols[4:8] = cols[12:16] = True
    assert torch.equal(out[:, ~cols], before["blocks.1.attn.out.weight"][:, ~cols])
    for name, value in before.items():  # layer 0 and everything else untouched
        if not name.startswith("blocks.1.attn."):
            assert torch.equal(dict(module.model.named_parameters())[name], value), name
    state = trainer.optimizers[0].state[module.model.blocks[1].attn.qkv.weight]
    assert (state["exp_avg"][changed] == 0).all() and (state["exp_avg"][~changed] != 0).any()
    assert callback.fresh.t0 == 1


def test_head_reinit_keeps_the_adam_state_by_default():
    module, trainer = _module_and_optimizer()
    state = trainer.optimizers[0].state[module.model.blocks[1].attn.qkv.weight]
    moments = state["exp_avg"].clone()
    with torch.no_grad():
        HeadReinit(epoch=5, heads=[1, 3], layers=[1]).apply(trainer, module)
    assert torch.equal(state["exp_avg"], moments)


def test_fresh_adam_slices_step_like_a_new_parameter():
    """A slice re-initialised at step t0 with a fresh state then moves exactly as the same values
    would under a brand-new AdamW fed the same gradients (step count from 1, bias-corrected)."""
    from grok_lightning.callbacks.optimizer_state import FreshAdamSlices

    g = torch.Generator().manual_seed(0)
    param = torch.nn.Parameter(torch.randn(10, generator=g))
    optimizer = torch.optim.AdamW([param], lr=1e-2, weight_decay=0.5)
    trainer = SimpleNamespace(optimizers=[optimizer])
    for _ in range(30):
        param.grad = torch.randn(10, generator=g)
        optimizer.step()
    index = (slice(0, 5),)
    with torch.no_grad():
        param[index] = torch.randn(5, generator=g)
    fresh = torch.nn.Parameter(param.detach()[index].clone())
    reference = torch.optim.AdamW([fresh], lr=1e-2, weight_decay=0.5)
    slices = FreshAdamSlices([(param, index)])
    slices.start(trainer)
    for _ in range(6):
        grad = torch.randn(10, generator=g)
        param.grad, fresh.grad = grad.clone(), grad[index].clone()
        optimizer.step()
        reference.step()
        slices.correct(trainer)
        assert torch.allclose(param.detach()[index], fresh.detach(), rtol=0, atol=1e-6)


def test_random_head_choice_is_seeded_and_per_layer():
    module, trainer = _module_and_optimizer()
    log = HeadReinit(epoch=5, n_heads=2, seed=3).apply(trainer, module)
    assert sorted(log["heads"]) == ["0", "1"] and all(len(h) == 2 for h in log["heads"].values())
    other_module, other_trainer = _module_and_optimizer()
    assert log == HeadReinit(epoch=5, n_heads=2, seed=3).apply(other_trainer, other_module)  # seeded


def test_a_per_run_head_draw_takes_the_runs_own_seed(monkeypatch):
    """``seed: run``: the heads and their fresh weights come from the run's seed_everything, so two
    seeds of a paired design draw differently and one seed draws as the integer seed would."""
    logs = {}
    for run_seed in (7, 11):
        monkeypatch.setenv("PL_GLOBAL_SEED", str(run_seed))
        module, trainer = _module_and_optimizer()
        per_run = HeadReinit(epoch=5, n_heads=2, seed="run")
        assert per_run.seed == run_seed
        logs[run_seed] = per_run.apply(trainer, module)
        assert logs[run_seed]["draw"] == "per run" and logs[run_seed]["seed"] == run_seed
    module, trainer = _module_and_optimizer()
    fixed = HeadReinit(epoch=5, n_heads=2, seed=7).apply(trainer, module)
    assert fixed["draw"] == "fixed"
    assert (fixed["heads"], fixed["norm_after"]) == (logs[7]["heads"], logs[7]["norm_after"])
    assert (logs[7]["heads"], logs[7]["norm_after"]) != (logs[11]["heads"], logs[11]["norm_after"])


def test_a_per_run_head_draw_needs_a_run_seed(monkeypatch):
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    with pytest.raises(ConfigError, match=r"head_reinit.seed='run'.*seed_everything"):
        HeadReinit(epoch=5, seed="run")
    with pytest.raises(ConfigError, match=r"head_reinit.seed='seven'"):
        HeadReinit(epoch=5, seed="seven")


def test_weight_norm_clip_caps_every_matrix_at_the_median_across_matrices():
    module, trainer = _module_and_optimizer()
    names = [n for n, p in module.model.named_parameters() if p.ndim == 2 and n.startswith("blocks.")]
    norms = {n: float(torch.linalg.matrix_norm(dict(module.model.named_parameters())[n].double(), 2)) for n in names}
    before = {n: dict(module.model.named_parameters())[n].detach().clone() for n in names}
    with torch.no_grad():
        log = WeightNormClip(epoch=5, reference="matrices").apply(trainer, module)
    values = sorted(norms.values())
    median = 0.5 * (values[len(values) // 2 - 1] + values[len(values) // 2])
    assert all(v == pytest.approx(median) for v in log["references"].values()) and log["n_matrices"] == len(names) == 8
    assert len(log["clipped"]) == 4 and log["norm_after"] < log["norm_before"]
    for n in names:
        w = dict(module.model.named_parameters())[n]
        spectral = float(torch.linalg.matrix_norm(w.double(), 2))
        if norms[n] > median:
            assert spectral == pytest.approx(median, rel=1e-5)
        else:
            assert torch.equal(w, before[n])


def test_weight_norm_clip_brings_each_matrix_back_to_its_own_median_norm():
    module, trainer = _module_and_optimizer()
    source = InterventionSource()
    names = [n for n, p in module.model.named_parameters() if p.ndim == 2 and n.startswith("blocks.")]
    params = dict(module.model.named_parameters())
    now = {n: float(torch.linalg.matrix_norm(params[n].double(), 2)) for n in names}
    # a trajectory in which every matrix was usually 0.5x or 2x its current size
    source.norm_epochs = [0, 10, 20, 30]
    source.norms = {n: [now[n] * f for f in ((0.5, 0.4, 0.6, 9.0) if i % 2 else (2.0, 1.5, 2.5, 0.1))]
                    for i, n in enumerate(names)}
    trainer.callbacks, trainer.current_epoch = [source], 25
    before = {n: params[n].detach().clone() for n in names}
    with torch.no_grad():
        log = WeightNormClip(epoch=25).apply(trainer, module)
    for i, n in enumerate(names):  # medians over epochs 0-20 only: 0.5x (clipped) or 2x (untouched)
        assert log["references"][n] == pytest.approx(now[n] * (0.5 if i % 2 else 2.0))
        if i % 2:
            assert float(torch.linalg.matrix_norm(params[n].double(), 2)) == pytest.approx(0.5 * now[n], rel=1e-5)
        else:
            assert torch.equal(params[n], before[n])
    trainer.callbacks = []
    with pytest.raises(ConfigError, match="InterventionSource"):
        WeightNormClip(epoch=25).apply(trainer, module)


def test_the_source_takes_its_peak_only_inside_its_epoch_range():
    source = InterventionSource(after_epoch=100, before_epoch=300, save_peak=False, matrices="all")
    module = SimpleNamespace(model=torch.nn.Linear(2, 2), record_extras={})
    for epoch, value in [(50, 9.0), (150, 0.2), (250, 0.3), (280, 0.1), (400, 5.0)]:
        source.on_evaluation_end(None, module, epoch, {"entropy_std": value})
    assert (source.peak_epoch, source.peak_value) == (250, 0.3)
    assert source.norm_epochs == [50, 150, 250, 280, 400]  # the norms are still recorded at every evaluation
    with pytest.raises(ConfigError, match="before_epoch"):
        InterventionSource(after_epoch=100, before_epoch=100)


def test_the_source_also_keeps_the_peak_before_grokking():
    """The whole-run argmax may fall after grokking; the pre-grokking one is kept beside it."""
    source = InterventionSource(after_epoch=100, save_peak=False, matrices="all")
    module = SimpleNamespace(model=torch.nn.Linear(2, 2), record_extras={})
    for epoch, value, accuracy in [(150, 0.2, 0.3), (250, 0.3, 0.5), (300, 0.25, 0.99), (400, 0.5, 1.0)]:
        source.on_evaluation_end(None, module, epoch, {"entropy_std": value, "test_acc": accuracy})
    assert (source.peak_epoch, source.pre_grok_epoch) == (400, 250)
    assert module.record_extras["intervention_source"]["before_grok"]["peak_epoch"] == 250
    restored = InterventionSource(after_epoch=100, save_peak=False, matrices="all")
    old = {k: v for k, v in source.state_dict().items() if k not in ("grokked", "pre_grok_value", "pre_grok_epoch")}
    restored.load_state_dict(old)  # a checkpoint without the pre-grokking state starts it afresh
    assert restored.pre_grok_epoch is None and restored.peak_epoch == 400


def test_peak_epoch_comes_from_the_control_record(tmp_path):
    record = new_record({"wd": 1.0, "seed": 0})
    record["history"] = {"epoch": [0, 50, 110, 120, 130], "entropy_std": [0.9, 0.8, 0.05, 0.09, 0.07]}
    write_json_atomic(tmp_path / "record.json", record)
    callback = HeadReinit(control_record=str(tmp_path / "record.json"))
    callback.setup(None, None, "fit")
    assert callback.epoch == 120  # epochs <= 100 are ignored, as in the paper
    with pytest.raises(ConfigError, match="control_record"):
        HeadReinit(control_record=str(tmp_path / "missing.json")).setup(None, None, "fit")


@pytest.mark.parametrize("kwargs, field", [
    (dict(), "head_reinit.control_record"), (dict(epoch=0), "head_reinit.epoch"),
    (dict(epoch=3, weights=["w"]), "head_reinit.weights"), (dict(epoch=3, heads="best"), "head_reinit.heads"),
])
def test_bad_head_reinit_settings_fail_with_one_line(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        HeadReinit(**kwargs)


def test_bad_clip_settings_fail_with_one_line():
    with pytest.raises(ConfigError, match="weight_norm_clip.norm"):
        WeightNormClip(epoch=3, norm="l1")
    with pytest.raises(ConfigError, match="weight_norm_clip.reference"):
        WeightNormClip(epoch=3, reference="layer")
    with pytest.raises(ConfigError, match="head_reinit.optimizer_state"):
        HeadReinit(epoch=3, optimizer_state="zero")


def _with(config, callback: dict) -> dict:
    config["trainer"]["callbacks"] = [callback]
    return config


REINIT = {"class_path": "grok_lightning.callbacks.HeadReinit",
          "init_args": {"epoch": 2, "n_heads": 1, "heads": "most_similar"}}


def test_intervention_happens_once_across_resumes(tiny, tmp_path):
    """Resumed after the intervention: not repeated. Resumed before it: still performed.
    (Uses heads="most_similar", which needs the run's test split.)"""
    first = run_config(_with(tiny(max_epochs=3), REINIT))
    assert [i["epoch"] for i in first["interventions"]] == [2]
    ckpt = tmp_path / "tiny" / "v0" / "checkpoints" / "last.ckpt"
    resumed = run_config(_with(tiny(max_epochs=5), REINIT), ckpt_path=str(ckpt))
    assert [i["epoch"] for i in resumed["interventions"]] == [2] and resumed["final_epoch"] == 5

    early = tiny(max_epochs=1)
    early["trainer"]["logger"]["init_args"]["version"] = "early"
    run_config(_with(early, REINIT))
    late = _with(tiny(max_epochs=4), REINIT)
    late["trainer"]["logger"]["init_args"]["version"] = "early"
    record = run_config(late, ckpt_path=str(tmp_path / "tiny" / "early" / "checkpoints" / "last.ckpt"))
    assert [i["epoch"] for i in record["interventions"]] == [2]


class PoisonIntervention(_Intervention):
    name = "poison"

    def apply(self, trainer, pl_module):
        next(pl_module.parameters()).fill_(float("nan"))
        return {}


def test_non_finite_after_an_intervention_marks_the_run_excluded(tiny):
    record = run_config(_with(tiny(max_epochs=6), {"class_path": "tests.test_interventions.PoisonIntervention",
                                                   "init_args": {"epoch": 2}}), trusted_code=["tests"])
    assert record["status"] == "excluded" and "after poison at epoch 2" in record["excluded_reason"]
    assert record["final_epoch"] < 6


SOURCE = {"class_path": "grok_lightning.callbacks.InterventionSource", "init_args": {"after_epoch": 1}}


def test_groups_start_from_the_controls_peak_checkpoint_with_its_history(tiny, tmp_path):
    """A keeps a checkpoint at its peak-sigma_H epoch E; B starts there: identical to A up to E."""
    control = tiny(max_epochs=8)
    control["trainer"]["callbacks"] = [SOURCE]
    control["run"]["run_id"] = "A"
    a = run_config(control)
    peak = a["intervention_source"]["peak_epoch"]
    sigma = dict(zip(a["history"]["epoch"], a["history"]["entropy_std"]))
    assert peak == max((e for e in sigma if e > 1), key=lambda e: sigma[e])  # the argmax over epochs > 1
    ckpt = tmp_path / "tiny" / "v0" / "checkpoints" / "peak.ckpt"
    assert ckpt.is_file() and a["intervention_source"]["checkpoint"] == str(ckpt)

    group_b = tiny(max_epochs=8)
    group_b["trainer"]["callbacks"] = [dict(SOURCE, init_args={"after_epoch": 1, "save_peak": False}),
                                       {"class_path": "grok_lightning.callbacks.HeadReinit",
                                        "init_args": {"epoch": peak, "n_heads": 1}}]
    group_b["trainer"]["logger"]["init_args"]["version"] = "B"
    group_b["run"].update(run_id="B", start_from=str(ckpt))
    b = run_config(group_b, ckpt_path=str(ckpt))
    assert b["run_id"] == "B" and b["started_from"] == {"run_id": "A", "name": a["name"], "epoch": peak}
    assert [i["epoch"] for i in b["interventions"]] == [peak] and b["final_epoch"] == a["final_epoch"]
    upto = a["history"]["epoch"].index(peak) + 1
    for key, values in a["history"].items():
        assert b["history"][key][:upto] == values[:upto], key
    assert b["history"]["epoch"] == a["history"]["epoch"]
    assert b["history"]["entropy_std"][upto:] != a["history"]["entropy_std"][upto:]  # B intervened
