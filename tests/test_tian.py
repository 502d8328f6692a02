"""Spectral lock-in paper (Xu 2026): data, model, metrics, detector, module, config, plots."""

from __future__ import annotations

import copy
import math
import time

import lightning as L
import numpy as np
import pytest
import torch
import yaml

from conftest import REPO
from grok_lightning.callbacks.evaluation import ScheduledEvaluation
from grok_lightning.callbacks.lockin import LockInDetector, lockin_key, slope_fire_epoch
from grok_lightning.config import ConfigError
from grok_lightning.data.tian import ModularAdditionOneHotDataModule
from grok_lightning.metrics.repulsion import RepulsionSignAgreement, repulsion_statistics, top_cosine_pairs
from grok_lightning.metrics.spectrum import (
    RhoTian,
    UpdateGramSpectrum,
    rho_tian,
    rho_tian_blocked,
    update_gram_spectrum,
)
from grok_lightning.models.two_layer import TwoLayerNet
from grok_lightning.modules.tian import TianModule, tian_mse_loss
from grok_lightning.plots import lockin as plots


class Rows(L.Callback):
    """Collects every evaluation row, as the recorder would (the lead's ScheduledEvaluation drives it)."""

    def __init__(self):
        self.rows = []

    def on_evaluation_end(self, trainer, pl_module, epoch, metrics):
        self.rows.append({"epoch": epoch, **metrics})


def fit(module, datamodule, epochs, callbacks=(), ckpt_path=None, **trainer_kwargs):
    rows = Rows()  # last, like the recorder: sees the keys the detectors added
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", deterministic=True, logger=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0, callbacks=[ScheduledEvaluation(), *callbacks, rows],
                        **{"enable_checkpointing": False, **trainer_kwargs})
    trainer.fit(module, datamodule, ckpt_path=ckpt_path)
    return rows.rows, trainer


def tiny(eta=2e-4, **kw):
    """M = 11, K = 64: the same code paths in a second."""
    return TianModule(M=11, hidden=64, eta=eta, init_seed=0, theorem6_pairs=20, **kw), \
        ModularAdditionOneHotDataModule(M=11, train_fraction=0.5, seed=0)


# --- data and model ---------------------------------------------------------------------
def test_data_split_sizes_disjoint_and_labels():
    dm = ModularAdditionOneHotDataModule(M=71, seed=0)
    assert (dm.n_train, dm.n_test, dm.x_train.shape, dm.x_test.shape) == (2016, 3025, (2016, 142), (3025, 142))
    pairs = torch.cat([dm.pairs_train, dm.pairs_test])
    assert len({tuple(p) for p in pairs.tolist()}) == 71 * 71  # disjoint and covering
    for x, p, y in ((dm.x_train, dm.pairs_train, dm.y_train), (dm.x_test, dm.pairs_test, dm.y_test)):
        assert torch.equal(x[:, :71].argmax(1), p[:, 0]) and torch.equal(x[:, 71:].argmax(1), p[:, 1])
        assert torch.equal(x.sum(1), torch.full((len(x),), 2.0))
        assert torch.equal(y, (p[:, 0] + p[:, 1]) % 71)
    # the split comes from its own generator: the global RNG state does not matter
    torch.manual_seed(123)
    assert torch.equal(ModularAdditionOneHotDataModule(M=71, seed=0).pairs_train, dm.pairs_train)
    assert not torch.equal(ModularAdditionOneHotDataModule(M=71, seed=0, split_seed=1).pairs_train, dm.pairs_train)
    g = torch.Generator().manual_seed(0)  # Xu's split_train_test
    assert torch.equal(dm.pairs_train[:, 0] * 71 + dm.pairs_train[:, 1], torch.randperm(5041, generator=g)[:2016])
    batches = list(dm.train_dataloader())  # full batch: the cached tensors, once per epoch
    assert len(batches) == 1 and batches[0][0] is dm.x_train and batches[0][1] is dm.y_train
    for bad in (dict(M=1), dict(M=7, train_fraction=1.5), dict(M=7, train_fraction=0.0), dict(M=3, train_fraction=0.01)):
        with pytest.raises(ConfigError):
            ModularAdditionOneHotDataModule(**bad)


def test_init_matches_xu_order_and_loss_is_class_centred_mse():
    torch.manual_seed(0)
    w = torch.nn.Linear(142, 2048, bias=False).weight.detach()  # Xu's TianMLP: W, then V
    v = torch.nn.Linear(2048, 71, bias=False).weight.detach()
    module = TianModule(init_seed=0)
    assert torch.equal(module.model.W.weight, w) and torch.equal(module.model.V.weight, v)
    assert float(w.abs().max()) <= 1 / math.sqrt(142) and float(v.abs().max()) <= 1 / math.sqrt(2048)
    with pytest.raises(ConfigError):
        TwoLayerNet(4, d_out=2, activation="tanh")
    for bad in (dict(eta=-1.0), dict(activation="tanh"), dict(M=1), dict(lr=0.0)):
        with pytest.raises(ConfigError):
            TianModule(**bad)
    out, y = torch.randn(9, 5), torch.randint(0, 5, (9,))
    target = torch.nn.functional.one_hot(y, 5).float() - 1 / 5
    expected = ((out - out.mean(1, keepdim=True) - target) ** 2).sum(1).mean()
    assert torch.allclose(tian_mse_loss(out, y, 5), expected, atol=1e-6)


# --- Theorem 6 --------------------------------------------------------------------------
def _reference(features, eta, n_pairs):
    """Independent numpy/K x K computation: pairs, true B, published-code residual, exact residual."""
    f = features.double() - features.double().mean(0)
    n, k = f.shape
    unit = f / f.norm(dim=0)
    cos = (unit.T @ unit).numpy()
    jj, ll = np.triu_indices(k, 1)
    order = np.argsort(-np.abs(cos[jj, ll]), kind="stable")[:n_pairs]
    j, l = jj[order], ll[order]
    gram = f.T @ f
    b_true = torch.linalg.inv(gram + eta * torch.eye(k)).numpy()
    inner = torch.linalg.inv(f @ f.T + eta * torch.eye(n))
    b_pub = (torch.eye(k) / eta - f.T @ inner @ f / eta**2).numpy()  # Xu's printed Woodbury
    fn = f.numpy()
    res_pub = np.einsum("ip,ip->p", fn[:, j], fn[:, l] - fn @ (b_pub @ (fn.T @ fn[:, l])))
    return j, l, cos[j, l], b_true[j, l], b_pub[j, l], res_pub, f


@pytest.mark.parametrize("n,k,eta", [(60, 80, 2e-4), (90, 40, 1e-2), (50, 70, 1e-3)])
def test_repulsion_exact_is_identity_and_paper_is_sign_of_cos(n, k, eta):
    torch.manual_seed(n + k)
    features = torch.randn(n, k) ** 2 + 0.3 * torch.randn(n, 1) ** 2  # x^2-like, correlated
    stats = repulsion_statistics(features, eta, n_pairs=30)
    j, l, cos, b_true, b_pub, res_pub, f = _reference(features, eta, 30)
    assert set(zip(stats["j"].tolist(), stats["l"].tolist())) == set(zip(j.tolist(), l.tolist()))
    order = {pair: i for i, pair in enumerate(zip(stats["j"].tolist(), stats["l"].tolist()))}
    idx = [order[pair] for pair in zip(j.tolist(), l.tolist())]
    assert np.allclose(stats["B"].numpy()[idx], b_true, rtol=1e-4)  # correct 1/eta prefactor
    assert np.array_equal(np.sign(b_pub), np.sign(b_true))  # published B: off-diagonal signs are right
    paper = np.mean(np.sign(b_true) == -np.sign(cos))
    assert float(stats["sign_match_paper"]) == pytest.approx(paper)
    assert float(stats["sign_match_paper"]) == pytest.approx(np.mean(np.sign(b_pub) == -np.sign(res_pub)))
    assert float(stats["sign_match_exact"]) == 1.0
    pos = cos > 0
    assert float(stats["frac_neg_B_pos_cos"]) == pytest.approx(np.mean(b_true[pos] < 0))
    assert float(stats["median_abs_cos"]) == pytest.approx(np.median(np.abs(cos)), rel=1e-5)
    # the exact residual is f_j^T P_{eta,-jl} f_l with the leave-pair-out projector, by brute force
    for p in range(3):
        keep = [c for c in range(k) if c not in (j[p], l[p])]
        rest = f[:, keep]
        proj = torch.eye(n) - rest @ torch.linalg.solve(rest.T @ rest + eta * torch.eye(k - 2), rest.T)
        brute = float(f[:, j[p]] @ proj @ f[:, l[p]])
        assert float(stats["residual_exact"][idx[p]]) == pytest.approx(brute, rel=1e-5, abs=1e-10)


def test_repulsion_metric_cat_state_matches_functional():
    torch.manual_seed(1)
    features = torch.randn(50, 40) ** 2
    for mode in ("paper", "exact"):
        metric = RepulsionSignAgreement(eta=2e-4, mode=mode, n_pairs=25)
        for chunk in features.split(17):
            metric.update(chunk)
        assert float(metric.compute()) == float(repulsion_statistics(features, 2e-4, 25)[f"sign_match_{mode}"])
    with pytest.raises(ConfigError):
        RepulsionSignAgreement(eta=0.0)
    with pytest.raises(ConfigError):
        RepulsionSignAgreement(eta=1e-4, mode="woodbury")
    j, l, _ = top_cosine_pairs(features - features.mean(0), 10)
    assert bool((j < l).all()) and len(set(zip(j.tolist(), l.tolist()))) == 10


# --- spectrum and rho -------------------------------------------------------------------
def test_update_gram_spectrum_matches_brute_force():
    torch.manual_seed(0)
    deltas = torch.randn(12, 3000, dtype=torch.float64) * torch.logspace(0, -3, 12, dtype=torch.float64)[:, None]
    eig = update_gram_spectrum(deltas)
    assert torch.allclose(eig, torch.linalg.svdvals(deltas) ** 2, rtol=1e-10)
    metric = UpdateGramSpectrum(window=5, k=5)
    for t, d in enumerate(deltas):
        metric.update(d.reshape(30, 100))  # any shape: flattened
        held, got = deltas[max(0, t - 4): t + 1], metric.compute()
        expected = torch.linalg.svdvals(held) ** 2 if len(held) >= 2 else torch.full((1,), math.nan, dtype=torch.float64)
        assert torch.allclose(got[: len(expected)], expected, rtol=1e-9, atol=1e-14, equal_nan=True)
    metric.reset()
    assert torch.isnan(metric.compute()).all()


def test_rho_tian_matches_explicit_formula():
    torch.manual_seed(0)
    features = torch.randn(30, 50) ** 2
    kernel = (features @ features.T).double()
    n = kernel.shape[0]
    for centred in (False, True):
        mat = kernel - kernel.mean(0, keepdim=True) if centred else kernel
        d, o = mat.diagonal().mean(), (mat.sum() - mat.diagonal().sum()) / (n * (n - 1))
        ideal = (d - o) * torch.eye(n, dtype=torch.float64) + o
        expected = torch.linalg.norm(ideal - mat) / torch.linalg.norm(kernel)
        assert float(rho_tian(features, centred=centred)) == pytest.approx(float(expected), rel=1e-5)
    metric = RhoTian()
    metric.update(features[:10])
    metric.update(features[10:])
    assert float(metric.compute()) == pytest.approx(float(rho_tian(features)), rel=1e-6)


@pytest.mark.parametrize("block_rows", [1, 7, 16, 64])
def test_blocked_rho_equals_the_full_kernel_rho(block_rows):
    torch.manual_seed(1)
    features = torch.randn(45, 33) ** 2
    assert float(rho_tian_blocked(features, block_rows)) == pytest.approx(float(rho_tian(features)), rel=1e-6)
    ideal = torch.eye(20)  # aI + b11^T exactly: rho 0 whatever the blocking
    assert float(rho_tian_blocked(ideal, 6)) == pytest.approx(0.0, abs=1e-12)


# --- detector ---------------------------------------------------------------------------
def _online(ratios, **kwargs):
    detector = LockInDetector(**kwargs)
    for t, r in enumerate(ratios):
        if t >= 1:
            detector._observe(t, {"ratio23": r})
    return detector


def test_detector_on_synthetic_ln_r_series():
    base = [math.nan, math.nan] + [20.0] * 98  # ratio undefined for t < 2, flat to 99
    early = [20.0 * math.exp(0.06 * k) for k in range(1, 41)]  # steep rise 100..139
    # a rise over 40..69 then flat: by epoch 100 the 25-epoch slope is 0, so it never fires
    before = [math.nan, math.nan] + [20.0] * 38 + [20.0 * math.exp(0.06 * k) for k in range(1, 31)]
    before += [before[-1]] * 200
    assert slope_fire_epoch(before) is None and _online(before).fire_epoch is None
    assert slope_fire_epoch(before, min_epoch=0) == 56  # ... which min_epoch = 100 exists to ignore
    series = base + early
    expected = 99 + next(k for k in range(1, 41) if 0.06 * k / 25 > 0.04)  # series[99 + k] = 20 e^(0.06 k)
    assert slope_fire_epoch(series) == expected == _online(series).fire_epoch == 116
    assert slope_fire_epoch(series, persistence=3) == _online(series, persistence=3).fire_epoch == 119
    assert slope_fire_epoch(series, min_epoch=130) == _online(series, min_epoch=130).fire_epoch == 130
    noise = [20.0 * (1 + 0.3 * math.sin(t)) for t in range(300)]  # bounded wiggles never fire
    assert slope_fire_epoch(noise) is None


def test_evaluate_without_trainer_and_eta_zero_omits_theorem6():
    for eta, expected in ((0.0, False), (1e-3, True)):
        module, dm = tiny(eta=eta, theorem6_epochs=(0,), rho_every=2)
        module.set_eval_data(dm.x_train, dm.y_train, dm.x_test, dm.y_test)
        row0, row1 = module.evaluate(0), module.evaluate(1)
        assert ("sign_match_exact" in row0) == expected and "sign_match_exact" not in row1
        assert "rho_tian" in row0 and "rho_tian" not in row1  # rho_every=2
        assert 0.0 <= row0["test_acc"] <= 1.0 and row0["train_loss"] > 0


@pytest.mark.parametrize("activation", ["x2", "relu"])
def test_one_hot_evaluation_is_bit_identical_to_the_dense_product(activation):
    module, dm = tiny(activation=activation, theorem6_epochs=(0,), rho_every=1)
    with torch.no_grad():
        module.model.W.weight.normal_()  # trained-like magnitudes, not just the init range
    module.set_eval_data(dm.x_train, dm.y_train, dm.x_test, dm.y_test)
    fast = module.evaluate(0)
    assert module._one_hot["train"] is not None and module._one_hot["test"] is not None
    x = dm.x_test
    assert torch.equal(module.model.features_one_hot(*module._one_hot["test"]), module.model.features(x))
    module._one_hot = {"train": None, "test": None}  # force the dense path
    assert module.evaluate(0) == fast
    not_one_hot = torch.rand(4, x.shape[1])
    from grok_lightning.modules.tian import one_hot_columns
    assert one_hot_columns(not_one_hot) is None


@pytest.mark.parametrize("activation", ["x2", "relu"])
def test_one_hot_training_follows_the_dense_trajectory_bit_for_bit(activation):
    from grok_lightning.modules.tian import one_hot_columns
    dense, dm = tiny(activation=activation)
    fast, _ = tiny(activation=activation)
    x, y = dm.x_train, dm.y_train
    columns = one_hot_columns(x)
    assert columns is not None
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2, weight_decay=2e-4) for m in (dense, fast)]
    for _ in range(5):
        for module, optimizer, features in (
            (dense, optimizers[0], lambda m: m.model.features(x)),
            (fast, optimizers[1], lambda m: m.model.features_one_hot(*columns, x=x)),
        ):
            optimizer.zero_grad()
            tian_mse_loss(module.model.V(features(module)), y, 11).backward()
            optimizer.step()
        assert torch.equal(dense.model.W.weight.grad, fast.model.W.weight.grad)
    for a, b in zip(dense.parameters(), fast.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(dense.model.W.weight, tiny(activation=activation)[0].model.W.weight)  # it moved


def test_module_rows_detector_keys_and_checkpoint_resume(tmp_path):
    module, dm = tiny(theorem6_epochs=(3, 8), rho_centred=True)
    det5 = LockInDetector(window=5, slope_span=2, min_epoch=4, threshold=-1.0)  # fires once the slope exists
    det7 = LockInDetector(window=7, min_epoch=4)
    rows, _ = fit(module, dm, 12, [det5, det7])
    assert [r["epoch"] for r in rows] == list(range(13))
    for row in rows:
        assert {"train_loss", "train_acc", "test_loss", "test_acc", "rho_tian", "rho_tian_centred"} <= set(row)
        has_t6 = row["epoch"] in (3, 8)
        assert all((key in row) == has_t6 for key in ("sign_match_paper", "sign_match_exact",
                                                      "frac_neg_B_pos_cos", "median_abs_cos"))
        assert (lockin_key(5, "ratio23") in row) == (row["epoch"] >= 3)
    assert rows[8]["sign_match_exact"] == 1.0  # trained features: the identity holds
    assert det5.fire_epoch == 5 and det7.fire_epoch is None  # r needs 3 updates: ln r(3) is the first
    assert rows[4][lockin_key(5, "fired")] == 0.0 and rows[5][lockin_key(5, "fired")] == 1.0
    assert module.record_extras["lockin_fire_epoch_w5"] == det5.fire_epoch
    assert module.record_extras["theorem6"]["8"]["sign_match_exact"] == 1.0
    assert det5.state_key != det7.state_key

    # resume: 6 epochs, checkpoint, 6 more == 12 straight (detector state and weights restored)
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path, filename="last", save_on_train_epoch_end=True)
    fit(*tiny(), 6, [LockInDetector(window=5, min_epoch=4), ckpt], enable_checkpointing=True)
    resumed, straight = LockInDetector(window=5, min_epoch=4), LockInDetector(window=5, min_epoch=4)
    rows_b, _ = fit(*tiny(), 12, [resumed], ckpt_path=str(tmp_path / "last.ckpt"))
    rows_a, _ = fit(*tiny(), 12, [straight])
    assert resumed.ln_r.keys() == straight.ln_r.keys() and rows_b[-1]["epoch"] == 12
    assert np.allclose(list(resumed.ln_r.values()), list(straight.ln_r.values()), rtol=1e-6, equal_nan=True)
    assert rows_b[-1][lockin_key(5, "sigma2")] == pytest.approx(rows_a[-1][lockin_key(5, "sigma2")], rel=1e-5)


def _tiny_yaml_config(tmp_path):
    with open(REPO / "configs" / "tian.yaml") as handle:
        config = yaml.safe_load(handle)
    assert config["model"]["init_args"]["eta"] == 2e-4 and config["trainer"]["max_epochs"] == 400
    config = copy.deepcopy(config)
    config["model"]["init_args"].update(M=11, hidden=32, theorem6_epochs=[5], theorem6_pairs=10)
    config["data"]["init_args"].update(M=11, train_fraction=0.5)
    config["trainer"].update(max_epochs=8, log_every_n_steps=1)
    config["trainer"]["logger"]["init_args"].update(save_dir=str(tmp_path), name="tian", version="v0")
    config["trainer"]["callbacks"][0]["init_args"].update(window=3, min_epoch=2, slope_span=2)
    config["run"].update(profile="test", checkpoint_every=0, record_path=str(tmp_path / "record.json"))
    return config


def test_config_yaml_runs_end_to_end(tmp_path, monkeypatch):
    from grok_lightning.run import run_config

    monkeypatch.chdir(tmp_path)
    record = run_config(_tiny_yaml_config(tmp_path))
    assert record["status"] == "completed" and record["history"]["epoch"] == list(range(9))
    assert record["config"]["wd"] == 2e-4 and record["config"]["model"]["activation"] == "x2"
    assert record["history"]["sign_match_exact"][5] == 1.0 and record["theorem6"]["5"]["sign_match_exact"] == 1.0


def test_config_yaml_detector_reaches_the_record(tmp_path, monkeypatch):
    from grok_lightning.run import run_config

    monkeypatch.chdir(tmp_path)
    record = run_config(_tiny_yaml_config(tmp_path))
    assert "lockin_fire_epoch_w3" in record and len(record["history"][lockin_key(3, "ratio23")]) == 9


# --- plots ------------------------------------------------------------------------------
SIGN_MATCH = {50: 0.86, 100: 0.9, 175: 0.95, 250: 0.97, 300: 0.98}  # any values at the Theorem-6 epochs


def _fake_record(eta, seed, activation="x2"):
    epochs = list(range(401))
    ratio = [math.nan] * 3 + list(np.exp(np.random.default_rng(seed).normal(0, 0.1, 398)) * (300 if eta else 1.3))
    history = {"epoch": epochs, "test_acc": [min(1.0, e / 150) for e in epochs], "rho_tian": [0.06 + e / 1e4 for e in epochs],
               "sign_match_paper": [SIGN_MATCH.get(e) for e in epochs],
               "sign_match_exact": [1.0 if e in SIGN_MATCH else None for e in epochs]}
    history.update({lockin_key(w, name): ratio for w in (5, 10, 20, 30) for name in ("ratio23", "ratio12")})
    extras = {f"lockin_fire_epoch_w{w}": (174 if eta else None) for w in (5, 10, 20, 30)}
    model = {"eta": eta, "activation": activation, "M": 71, "hidden": 2048, "lr": 1e-3}
    return {"config": {"wd": eta, "seed": seed, "model": model, "data": {"train_fraction": 0.4}}, "history": history, **extras}


def test_plots_build_from_records(tmp_path):
    records = [_fake_record(e, s, a) for e in (2e-4, 0.0) for s in range(3) for a in ("x2", "relu")]
    records += [_fake_record(e, s) for e in (1e-4, 5e-4) for s in range(2)]
    for name, fig in {"main": plots.main_figure(records, profile="test", published_sign_match=SIGN_MATCH), "window": plots.window_sweep_figure(records),
                      "act": plots.activation_figure(records), "eta": plots.eta_sweep_figure(records)}.items():
        fig.savefig(tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000


# --- the real thing (slow) --------------------------------------------------------------
@pytest.mark.slow
def test_real_x2_run_fires_and_control_does_not():
    """Seed 0, K = 2048, 200 epochs each: eta = 2e-4 fires near 173-174 (paper), eta = 0 does not."""
    results = {}
    for eta in (2e-4, 0.0):
        module = TianModule(eta=eta, init_seed=0, theorem6_epochs=(175,), rho_every=0)
        detector = LockInDetector()
        start = time.time()
        rows, _ = fit(module, ModularAdditionOneHotDataModule(seed=0), 200, [detector])
        results[eta] = (detector.fire_epoch, rows, time.time() - start)
    fire, rows, wall = results[2e-4]
    print(f"grok: fire {fire}, test>=0.99 at {next(r['epoch'] for r in rows if r['test_acc'] >= 0.99)}, "
          f"{wall:.0f}s for 200 epochs; control fire {results[0.0][0]}, {results[0.0][2]:.0f}s")
    assert fire is not None and 165 <= fire <= 185
    assert next(r["epoch"] for r in rows if r["test_acc"] >= 0.99) < fire
    assert rows[175]["sign_match_exact"] == 1.0 and 0.9 <= rows[175]["sign_match_paper"] <= 1.0
    assert results[0.0][0] is None and results[0.0][1][-1]["test_acc"] < 0.1
