import pytest
import torch

from grok_lightning.config import ConfigError
from grok_lightning.models import SCALES, DecoderTransformer, build_model
from grok_lightning.modules import GrokkingModule, parameter_groups


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_canonical_parameter_count_is_exact():
    assert n_params(DecoderTransformer(98, 97, **SCALES["small"])) == 818_785


def _count_from_formula(L, d, d_ff, vocab=98, classes=97, T=3):
    block = 2 * 2 * d + 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d
    return vocab * d + T * d + L * block + 2 * d + d * classes + classes


@pytest.mark.parametrize("scale, millions", [("medium", 19.02), ("large", 85.21)])
def test_medium_and_large_constructible_by_config(scale, millions):
    shape = SCALES[scale]
    expected = _count_from_formula(shape["n_layers"], shape["d_model"], shape["d_ff"])
    assert round(expected / 1e6, 2) == millions
    with torch.device("meta"):  # no memory: only shapes
        model = DecoderTransformer(98, 97, **shape)
    assert n_params(model) == expected


def test_forward_shapes_and_attention_rows_are_probabilities():
    model = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32)
    tokens = torch.randint(0, 23, (5, 3))
    logits, attention = model(tokens, return_attention=True)
    assert logits.shape == (5, 23) and len(attention) == 2 and attention[0].shape == (5, 4, 3, 3)
    assert torch.allclose(attention[1].sum(-1), torch.ones(5, 4, 3))
    assert torch.all(attention[0].triu(1) == 0), "causal mask"
    assert torch.equal(model(tokens), logits), "asking for attention must not change logits"


def test_without_the_causal_mask_every_row_sees_every_token():
    torch.manual_seed(0)
    causal = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32)
    torch.manual_seed(0)
    full = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32, causal=False)
    tokens = torch.randint(0, 23, (5, 3))
    _, attention = full(tokens, return_attention=True)
    assert bool((attention[0][..., 0, 1:] > 0).all()), "row 0 attends to later tokens"
    assert n_params(full) == n_params(causal)
    module = GrokkingModule(d_model=16, n_layers=2, n_heads=4, d_ff=32, causal=False, modulus=23)
    assert module.model.blocks[0].attn.causal is False


def test_gpt_init_zero_biases():
    model = DecoderTransformer(24, 23, d_model=16, n_layers=1, n_heads=2, d_ff=32, init="gpt")
    assert float(model.head.bias.abs().sum()) == 0.0
    assert abs(float(model.head.weight.std()) - 0.02) < 0.01


def test_weight_decay_scope():
    model = DecoderTransformer(24, 23, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    all_groups = parameter_groups(model, 1.0, "all")
    assert len(all_groups) == 1 and len(all_groups[0]["params"]) == len(list(model.parameters()))
    mat = parameter_groups(model, 1.0, "matrices")
    assert all(p.ndim >= 2 for p in mat[0]["params"]) and all(p.ndim == 1 for p in mat[1]["params"])
    model.head.bias._no_weight_decay = True  # e.g. Mamba's A_log and D
    groups = parameter_groups(model, 1.0, "all")
    assert any(p is model.head.bias for p in groups[1]["params"]) and groups[1]["weight_decay"] == 0.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(n_heads=3), "model.n_heads"),
        (dict(weight_decay=-0.1), "model.weight_decay"),
        (dict(lr=0.0), "model.lr"),
        (dict(arch="rnn"), "model.arch"),
        (dict(weight_decay_scope="some"), "model.weight_decay_scope"),
    ],
)
def test_bad_model_config_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        GrokkingModule(**kwargs)


def test_unknown_arch_in_registry():
    with pytest.raises(ConfigError, match="model.arch"):
        build_model("nope", 10, 9)
