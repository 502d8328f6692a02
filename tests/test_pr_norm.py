"""PR_norm constructions: numpy references, chunk and rank additivity, the default on a freshly
initialised canonical model, head outputs, the C1 identity, and the option reaching the
diagnostics callback and the checkpoint analysis."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from grok_lightning.config import ConfigError
from grok_lightning.metrics import AttentionStatistics, HeadParticipationRatio, ParticipationRatio, attention_statistics
from grok_lightning.metrics.functional import (
    AttentionState,
    attention_state_update,
    attention_statistics_compute,
    head_participation_ratio,
)
from grok_lightning.metrics.participation import (
    CENTRINGS,
    DEFAULT_PR_CONSTRUCTION,
    DIAGNOSTICS_PR_CONSTRUCTION,
    PR_CONSTRUCTIONS,
    head_participation,
    parse_pr_construction,
    pr_covariance,
    pr_state_update,
)
from grok_lightning.models.transformer import DecoderTransformer
from grok_lightning.run import run_config
from grok_lightning.stats.spectra import head_covariance_eigenvalues, pr_identity_rows
from reproduce.targets.weight_analysis import head_pr_states


def _np_pr(x: np.ndarray, centring: str) -> float:
    """Affine PR_norm of one layer's per-head features ``x`` (B, H, C), written out in numpy."""
    b, h, c = x.shape
    def pr(cov):
        ev = np.clip(np.linalg.eigvalsh(cov), 0, None)
        return ev.sum() ** 2 / (ev**2).sum()
    if centring == "per_example":
        return float(np.mean([(pr(np.cov(x[i], bias=True)) - 1) / (h - 1) for i in range(b)]))
    if centring == "examples":
        flat = (x - x.mean(0, keepdims=True)).transpose(1, 0, 2).reshape(h, -1)
        cov = flat @ flat.T / flat.shape[1]
    else:
        flat = x.transpose(1, 0, 2).reshape(h, -1)
        if centring == "coordinates":
            cov = np.cov(flat, bias=True)
        elif centring == "heads":
            d = flat - flat.mean(0, keepdims=True)
            cov = d @ d.T / flat.shape[1]
        else:
            cov = flat @ flat.T / flat.shape[1]
    return (pr(cov) - 1) / (h - 1)


def _attention(seed: int, layers: int = 3, batch: int = 12, heads: int = 5, seq: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return [(2 * torch.randn(batch, heads, seq, seq, generator=g)).masked_fill(mask, float("-inf")).softmax(-1)
            for _ in range(layers)]


@pytest.mark.parametrize("centring", CENTRINGS)
def test_every_construction_matches_its_numpy_formula(centring):
    attn = _attention(0)
    expected = np.mean([_np_pr(a.double().numpy().reshape(12, 5, -1), centring) for a in attn])
    assert head_participation_ratio(attn, construction=centring).item() == pytest.approx(expected, abs=1e-10)
    outputs = [torch.randn(12, 5, 3, 8, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    expected = np.mean([_np_pr(o.double().numpy().reshape(12, 5, -1), centring) for o in outputs])
    assert head_participation(outputs, f"output_{centring}").item() == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("centring", CENTRINGS)
def test_chunks_and_ranks_add_up_to_the_one_shot_value(centring):
    attn = _attention(1, batch=11)
    one_shot = head_participation_ratio(attn, per_layer=True, construction=centring)
    metric, rank1 = AttentionStatistics(per_layer=True, pr_construction=centring), AttentionStatistics(
        per_layer=True, pr_construction=centring)
    for lo, hi in ((0, 3), (3, 4), (4, 7)):
        metric.update([a[lo:hi] for a in attn])
    rank1.update([a[7:] for a in attn])
    metric.merge_state(rank1)  # what DDP's sum reduction does
    torch.testing.assert_close(metric.compute()["pr_norm"], one_shot)
    generic = ParticipationRatio(centring, per_layer=True)
    generic.update([a[:5] for a in attn]), generic.update([a[5:] for a in attn])
    torch.testing.assert_close(generic.compute(), one_shot)


def test_default_is_high_on_a_freshly_initialised_canonical_model():
    """Table 3 starts at 0.864 (epoch 100, still before grokking). Centring each head's vector over
    its own coordinates gives ~0.02 on a fresh canonical model, because every head shares the causal
    rows; the attention default (centred over examples) gives ~0.9."""
    torch.manual_seed(0)
    model = DecoderTransformer(98, 97).eval()
    tokens = torch.cartesian_prod(torch.arange(97), torch.arange(97))[::4]
    tokens = torch.cat([tokens, torch.full((len(tokens), 1), 97)], dim=1)
    with torch.no_grad():
        _, attn = model(tokens, return_attention=True)
    assert DEFAULT_PR_CONSTRUCTION == "examples"
    assert attention_statistics(attn)["pr_norm"].item() > 0.8
    assert head_participation_ratio(attn, construction="coordinates").item() < 0.1


def test_heads_centring_has_a_zero_eigenvalue_and_bounded_pr():
    attn = _attention(2, heads=6)
    eig = head_covariance_eigenvalues(attn, "heads")
    assert (eig[:, 0] < 1e-12 * eig[:, -1]).all()
    assert (head_participation_ratio(attn, per_layer=True, construction="heads") <= 4 / 5 + 1e-12).all()


def test_one_example_has_a_zero_examples_covariance_by_definition():
    """With one example no coordinate varies across examples: the covariance is exactly zero and
    PR_norm NaN, whatever the values and however they round (not left to cancellation)."""
    for seed in range(5):
        attn = _attention(seed, batch=1)
        state = pr_state_update(attn)
        assert torch.equal(pr_covariance(state, "examples"), torch.zeros_like(state.gram))
        assert torch.isnan(head_participation(attn, "examples"))


def test_c1_identity_holds_for_the_default_and_matches_the_diagnostic():
    attn = _attention(3, layers=4, batch=40, heads=8)
    rows = pr_identity_rows(head_covariance_eigenvalues(attn))
    assert max(r["identity_error"] for r in rows) < 1e-12 and max(r["pr_norm_error"] for r in rows) < 1e-12
    per_layer = attention_statistics(attn, per_layer=True)["pr_norm"]
    assert [r["pr_norm"] for r in rows] == pytest.approx(per_layer.tolist(), abs=1e-12)
    with pytest.raises(ValueError, match="per_example"):
        head_covariance_eigenvalues(attn, "per_example")


def test_a_state_without_the_per_coordinate_sums_gives_nan_for_the_default_only():
    attn = _attention(4)
    full = attention_state_update(attn)
    bare = AttentionState(full.gram, full.head_sum, full.n_coords, full.entropy_sum, full.n_rows)
    with pytest.warns(RuntimeWarning, match="per-coordinate sums"):
        out = attention_statistics_compute(bare)
    assert torch.isnan(out["pr_norm"]) and not torch.isnan(out["mean_similarity"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for centring in ("coordinates", "heads", "uncentred"):  # the Gram and head sums suffice
            torch.testing.assert_close(attention_statistics_compute(bare, pr_construction=centring)["pr_norm"],
                                       attention_statistics_compute(full, pr_construction=centring)["pr_norm"])


def test_names_and_refusals():
    assert parse_pr_construction("output_per_example") == ("output", "per_example")
    assert len(PR_CONSTRUCTIONS) == 2 * len(CENTRINGS)
    with pytest.raises(ValueError):
        parse_pr_construction("covariance")
    with pytest.raises(ValueError, match="head outputs"):
        HeadParticipationRatio(pr_construction="output_examples")
    from grok_lightning.callbacks import AttentionDiagnostics

    with pytest.raises(ConfigError, match="diagnostics.pr_construction"):
        AttentionDiagnostics(pr_construction="output")


def test_head_outputs_sum_to_the_attention_block_output():
    torch.manual_seed(1)
    model = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32).eval()
    tokens = torch.randint(0, 23, (30, 3))
    captured = []
    handles = [b.attn.register_forward_hook(lambda m, i, o: captured.append(o[0])) for b in model.blocks]
    from grok_lightning.metrics.head_outputs import head_output_pr_update, head_outputs, projection_input_hooks

    inputs: list = []
    handles += projection_input_hooks(model, inputs)
    with torch.no_grad():
        model(tokens)
    for h in handles:
        h.remove()
    outputs = head_outputs(inputs)
    for block, per_head, total in zip(model.blocks, outputs, captured):
        assert per_head.shape == (30, 4, 3, 16)
        torch.testing.assert_close(per_head.sum(1).float() + block.attn.out.bias, total, atol=1e-5, rtol=1e-5)
    # the Gram path (no outputs formed) gives the statistics of the formed outputs
    for fast, formed in zip(head_output_pr_update(inputs), pr_state_update(outputs)):
        torch.testing.assert_close(fast, formed, rtol=1e-10, atol=1e-12)
    labels = torch.zeros(30, dtype=torch.long)
    _, chunked = head_pr_states(model, tokens, labels, ("pattern", "output"), per_example=True, batch_size=7)
    _, whole = head_pr_states(model, tokens, labels, ("pattern", "output"), per_example=True, batch_size=30)
    for source in ("pattern", "output"):
        for a, b in zip(chunked[source], whole[source]):
            torch.testing.assert_close(a, b)


def test_the_callback_option_reaches_the_record(tiny):
    config = tiny(max_epochs=2, n_layers=2)
    config["diagnostics"] = {"every": 1, "per_layer": False, "image_every": 0, "pr_construction": "coordinates"}
    record = run_config(config)
    assert record["pr_construction"] == "coordinates"
    config = {**tiny(max_epochs=2, n_layers=2), "diagnostics": {"image_every": 0}}
    config["trainer"]["logger"]["init_args"]["version"] = "v1"
    default = run_config(config)
    assert default["pr_construction"] == DIAGNOSTICS_PR_CONSTRUCTION == "output_examples"  # nearest Table 3
    assert record["history"]["pr_norm"][-1] != pytest.approx(default["history"]["pr_norm"][-1])


def test_the_callback_computes_an_output_construction_from_head_outputs(tiny):
    from grok_lightning.metrics.head_outputs import head_output_participation
    from grok_lightning.run import GrokCLI

    config = tiny(max_epochs=2, n_layers=2)
    config["diagnostics"] = {"every": 1, "per_layer": True, "image_every": 0, "pr_construction": "output_examples"}
    cli = GrokCLI(args=config, run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    record = next(c for c in cli.trainer.callbacks if type(c).__name__ == "RunRecorder").record
    direct = head_output_participation(cli.model.model, cli.datamodule.eval_splits()["test"][0], "output_examples")
    assert record["pr_construction"] == "output_examples"
    assert record["history"]["pr_norm"][-1] == pytest.approx(float(direct["pr_norm"].mean()), abs=1e-9)
    assert record["history"]["layer_1/pr_norm_ratio"][-1] == pytest.approx(float(direct["pr_norm_ratio"][1]), abs=1e-9)
