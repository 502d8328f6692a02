"""Readings of s_bar and sigma_H (grok_lightning.metrics.readings) against direct numpy formulas,
and the training options behind the Fig. 2 trajectory search (activation, last batch, warmup)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.metrics import attention_statistics
from grok_lightning.metrics.readings import (
    READINGS,
    AttentionReadings,
    attention_readings,
    head_entropies,
    merge_reading_states,
    reading_state,
    reading_values,
    sigma_h_bound,
)
from grok_lightning.models.transformer import DecoderTransformer
from grok_lightning.run import run_config


def _attention(seed: int, layers: int = 3, batch: int = 20, heads: int = 4, seq: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return [(2 * torch.randn(batch, heads, seq, seq, generator=g)).masked_fill(mask, float("-inf")).softmax(-1)
            for _ in range(layers)]


def _numpy_readings(layers: list[torch.Tensor]) -> dict:
    a = np.stack([x.double().numpy() for x in layers])  # (L, B, H, T, T)
    n_layers, batch, heads, t, _ = a.shape
    entropy = -(a * np.log(a + 1e-12)).sum(-1)  # (L, B, H, T)

    def cos_mean(vectors):  # (n, d) -> mean off-diagonal cosine
        unit = vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12)
        c = unit @ unit.T
        return (c.sum() - np.trace(c)) / (len(c) * (len(c) - 1))

    def per_layer(rows):
        s_bar = [cos_mean(a[layer][:, :, rows].transpose(1, 0, 2, 3).reshape(heads, -1)) for layer in range(n_layers)]
        sigma = [entropy[layer][:, :, rows].mean(axis=(0, 2)).std() for layer in range(n_layers)]
        return np.array(s_bar), np.array(sigma)

    out = {}
    s, h = per_layer(slice(0, t))
    out["released"] = (s.mean(), h.mean())
    out["max_layer"] = (s.min(), h.max())
    out["sum_layers"] = (s.mean(), h.sum())
    pooled = a.transpose(0, 2, 1, 3, 4).reshape(n_layers * heads, -1)
    out["pooled"] = (cos_mean(pooled), entropy.mean(axis=(1, 3)).reshape(-1).std())
    per_example = [[cos_mean(a[layer, b].reshape(heads, -1)) for b in range(batch)] for layer in range(n_layers)]
    out["per_row"] = (np.mean(per_example), entropy.std(axis=2).mean())
    for name, rows in (("no_row0", slice(1, t)), ("last_row", slice(t - 1, t))):
        s, h = per_layer(rows)
        out[name] = (s.mean(), h.mean())
    return out


def test_every_reading_matches_its_numpy_formula():
    layers = _attention(0)
    ours, expected = attention_readings(layers), _numpy_readings(layers)
    assert tuple(ours) == READINGS
    for reading, (s_bar, sigma) in expected.items():
        assert ours[reading]["mean_similarity"] == pytest.approx(s_bar, rel=1e-12), reading
        assert ours[reading]["entropy_std"] == pytest.approx(sigma, rel=1e-12, abs=1e-15), reading


def test_released_reading_is_the_published_metric():
    layers = _attention(1)
    stats, released = attention_statistics(layers), attention_readings(layers)["released"]
    assert released["mean_similarity"] == pytest.approx(stats["mean_similarity"].item(), rel=1e-12)
    assert released["entropy_std"] == pytest.approx(stats["entropy_std"].item(), rel=1e-12)


def test_records_rebuild_every_layer_pooling_reading():
    """A record keeps per-layer sigma_H and mean entropy (float32 on the training path); from them
    stats.phases rebuilds, with the function that read the tensors, every reading that pools layers."""
    from grok_lightning.metrics.readings import SIGMA_H_FROM_LAYERS
    from grok_lightning.stats.phases import RECORD_READINGS, sigma_h_curve

    layers = _attention(3, layers=4, heads=8)
    stats, readings = attention_statistics(layers, per_layer=True), attention_readings(layers)
    history = {"epoch": [0], "entropy_std": [float(stats["entropy_std"].mean())]}
    for layer in range(4):
        history[f"layer_{layer}/entropy_std"] = [float(stats["entropy_std"][layer])]
        history[f"layer_{layer}/entropy_mean"] = [float(stats["entropy_mean"][layer])]
    assert set(RECORD_READINGS) == set(SIGMA_H_FROM_LAYERS)
    for reading in RECORD_READINGS:
        assert sigma_h_curve(history, reading)[1][0] == pytest.approx(readings[reading]["entropy_std"], rel=1e-5), reading
    del history["layer_2/entropy_mean"]  # a record without the means cannot give the pooled reading
    assert np.isnan(sigma_h_curve(history, "pooled")[1]).all()
    with pytest.raises(ValueError, match="per_row"):
        sigma_h_curve(history, "per_row")  # needs every query row: tensors only


def test_row_zero_only_rescales_sigma_h_under_a_causal_mask():
    """Causal row 0 has zero entropy in every head: dropping it scales each head's mean entropy,
    hence sigma_H, by T / (T - 1)."""
    values = attention_readings(_attention(2, seq=4))
    assert values["no_row0"]["entropy_std"] == pytest.approx(values["released"]["entropy_std"] * 4 / 3, rel=1e-12)


def test_states_merge_into_the_union_and_chunks_add_up():
    train, test = _attention(3, batch=11), _attention(4, batch=7)
    union = [torch.cat([x, y]) for x, y in zip(train, test)]
    merged = reading_values(merge_reading_states(reading_state(train), reading_state(test)))
    whole = attention_readings(union)
    metric = AttentionReadings()
    metric.update(train)
    metric.update(test)
    for reading in READINGS:
        for name in ("mean_similarity", "entropy_std"):
            assert merged[reading][name] == pytest.approx(whole[reading][name], rel=1e-12)
            assert metric.compute()[reading][name] == pytest.approx(whole[reading][name], rel=1e-12)
    with pytest.raises(ValueError, match="shape"):
        metric.update(_attention(5, heads=2))


def test_head_entropies_are_the_numbers_behind_every_sigma_h():
    layers = _attention(8, layers=4, heads=8)
    per_head = head_entropies(reading_state(layers)).numpy()  # (L, H)
    values = attention_readings(layers)
    assert per_head.shape == (4, 8)
    assert values["released"]["entropy_std"] == pytest.approx(per_head.std(axis=1).mean(), rel=1e-12)
    assert values["sum_layers"]["entropy_std"] == pytest.approx(4 * values["released"]["entropy_std"], rel=1e-12)
    assert values["pooled"]["entropy_std"] == pytest.approx(per_head.std(), rel=1e-12)


def _extreme_attention(layers: int, heads: int, seq: int, causal: bool) -> list[torch.Tensor]:
    """Half the heads of every layer uniform over the keys they see, half on one key: each head's
    mean entropy at its largest or 0, the spread that attains the bound."""
    visible = torch.ones(seq, seq).tril() if causal else torch.ones(seq, seq)
    uniform = visible / visible.sum(-1, keepdim=True)
    one_key = torch.zeros(seq, seq)
    one_key[:, 0] = 1
    layer = torch.stack([uniform if h % 2 == 0 else one_key for h in range(heads)]).expand(5, heads, seq, seq)
    return [layer] * layers


@pytest.mark.parametrize("seq, causal", [(3, True), (4, True), (3, False)])
@pytest.mark.parametrize("reading", ["released", "max_layer", "pooled", "sum_layers", "per_row", "last_row"])
def test_the_bound_holds_for_random_attention_and_is_attained(reading, seq, causal):
    """No attention exceeds a reading's bound; half-uniform, half-one-key heads reach it."""
    bound = sigma_h_bound(reading, seq_len=seq, causal=causal, n_layers=3, n_heads=4)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if causal else torch.zeros(seq, seq, dtype=torch.bool)
    g = torch.Generator().manual_seed(seq)
    for _ in range(20):
        layers = [(6 * torch.randn(7, 4, seq, seq, generator=g)).masked_fill(mask, float("-inf")).softmax(-1)
                  for _ in range(3)]
        assert attention_readings(layers)[reading]["entropy_std"] <= bound + 1e-9
    extreme = attention_readings(_extreme_attention(3, 4, seq, causal))[reading]["entropy_std"]
    assert extreme == pytest.approx(bound, rel=1e-6)


def test_the_bound_of_the_papers_inputs():
    """``[a, b, =]`` under a causal mask, 4 layers x 8 heads: the per-layer readings stop at
    (ln 2 + ln 3) / 6 = 0.2986 nats; the summed one at 4 times that."""
    assert sigma_h_bound("released") == pytest.approx(np.log(6) / 6, rel=1e-12)
    assert sigma_h_bound("pooled") == pytest.approx(np.log(6) / 6, rel=1e-12)
    assert sigma_h_bound("sum_layers") == pytest.approx(4 * np.log(6) / 6, rel=1e-12)
    assert sigma_h_bound("released", n_heads=3) == pytest.approx(np.log(6) / 6 * np.sqrt(8 / 9), rel=1e-12)
    assert sigma_h_bound("released", n_heads=1) == 0.0
    with pytest.raises(ValueError, match="reading"):
        sigma_h_bound("bits")
    with pytest.raises(ValueError, match="seq_len"):
        sigma_h_bound("released", seq_len=0)


def test_one_head_gives_nan_for_the_pairwise_readings():
    """One head per layer: no pair within a layer (NaN); pooling the 3 layers gives 3 heads."""
    values = attention_readings(_attention(6, heads=1))
    assert all(np.isnan(values[r]["mean_similarity"]) for r in READINGS if r != "pooled")
    assert np.isfinite(values["pooled"]["mean_similarity"])
    assert values["released"]["entropy_std"] == 0.0


def test_the_run_records_every_reading_on_four_input_sets(tiny):
    config = tiny(max_epochs=2)
    config["diagnostics"].update(readings=True, readings_batch=16)
    history = run_config(config)["history"]
    keys = [k for k in history if k.startswith("reading/")]
    assert len(keys) == 4 * len(READINGS) * 2
    heads = [k for k in history if k.startswith("head_entropy/")]
    n_layers, n_heads = config["model"]["init_args"]["n_layers"], config["model"]["init_args"]["n_heads"]
    assert len(heads) == n_layers * n_heads
    per_head = np.array([[history[f"head_entropy/layer_{l}/head_{h}"][-1] for h in range(n_heads)] for l in range(n_layers)])
    assert per_head.std(axis=1).mean() == pytest.approx(history["entropy_std"][-1], rel=1e-6)
    for column in ("reading/test/released/mean_similarity", "reading/test/released/entropy_std"):
        assert history[column] == pytest.approx(history[column.split("/")[-1]], rel=1e-12)
    assert all(np.isfinite(history[k]).all() for k in keys)


def test_relu_activation_keeps_the_parameter_count():
    gelu, relu = DecoderTransformer(98, 97), DecoderTransformer(98, 97, activation="relu")
    assert sum(p.numel() for p in relu.parameters()) == sum(p.numel() for p in gelu.parameters()) == 818785
    assert isinstance(relu.blocks[0].mlp[1], torch.nn.ReLU)
    with pytest.raises(ValueError, match="activation"):
        DecoderTransformer(98, 97, activation="tanh")


@pytest.mark.parametrize("last_batch, sizes", [("keep", [512] * 9 + [96]), ("drop", [512] * 9),
                                                ("balance", [471] * 4 + [470] * 6)])
def test_last_batch_options(last_batch, sizes):
    data = ModularArithmeticDataModule(p=97, last_batch=last_batch)
    data.setup()
    loader = data.train_dataloader()
    loader.sampler.set_epoch(3)
    batches = [tokens for tokens, _ in loader]
    assert [len(b) for b in batches] == sizes and len(loader) == len(sizes)
    seen = torch.cat([b for b in batches])
    assert len(torch.unique(seen, dim=0)) == len(seen)  # no example twice in an epoch


def test_warmup_ramps_the_learning_rate_per_step(tiny):
    from grok_lightning.run import GrokCLI

    config = tiny(max_epochs=1, warmup_steps=4)
    cli = GrokCLI(args=config, run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    optimizer = cli.trainer.optimizers[0]
    steps = cli.trainer.global_step
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * min(1.0, (steps + 1) / 4))
