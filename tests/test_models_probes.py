"""Cross-architecture probes: MLP, LSTM and Mamba, their counts, backends and runs."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from grok_lightning.callbacks.evaluation import Captured
from grok_lightning.config import ConfigError
from grok_lightning.models import MLP, LSTMClassifier, MambaClassifier, build_model
from grok_lightning.models import mamba as mamba_module
from grok_lightning.models.mamba import MambaMixer, reference_forward
from grok_lightning.modules import GrokkingModule, parameter_groups
from grok_lightning.run import run_config

ATTENTION_KEYS = ("mean_similarity", "entropy_std", "entropy_mean", "spectral_gap", "pr_norm")

#: mamba_ssm.Mamba(d_model=128, d_state=16, d_conv=4, expand=4).state_dict(), keys and shapes in
#: order (mamba_ssm/modules/mamba_simple.py: A_log and D are the module's own parameters, so
#: state_dict lists them before the submodules'): d_inner 512, dt_rank ceil(128/16) = 8.
MAMBA_SSM_KEYS = [
    ("A_log", (512, 16)),
    ("D", (512,)),
    ("in_proj.weight", (1024, 128)),
    ("conv1d.weight", (512, 1, 4)),
    ("conv1d.bias", (512,)),
    ("x_proj.weight", (40, 512)),
    ("dt_proj.weight", (512, 8)),
    ("dt_proj.bias", (512,)),
    ("out_proj.weight", (128, 512)),
]


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "arch, kwargs, expected",
    [
        ("mlp", {}, 981_632),  # the count in MLP's docstring
        ("lstm", {}, 7_680_640),
        ("mamba", {}, 957_952),
        ("mamba", {"expand": 2}, 492_032),
    ],
)
def test_paper_parameter_counts_are_exact(arch, kwargs, expected):
    assert n_params(build_model(arch, vocab_size=98, n_classes=97, **kwargs)) == expected


def test_equals_token_variant_adds_one_embedding_row():
    assert n_params(LSTMClassifier(98, 97, equals_token=True)) == 7_680_640 + 128
    assert n_params(MambaClassifier(98, 97, equals_token=True)) == 957_952 + 128


@pytest.mark.parametrize(
    "model",
    [
        MLP(12, 11, d_embed=8, hidden=16, n_layers=2),
        LSTMClassifier(12, 11, d_embed=8, hidden=16, n_layers=2),
        LSTMClassifier(12, 11, d_embed=8, hidden=16, n_layers=2, equals_token=True),
        MambaClassifier(12, 11, d_model=16, n_layers=2, expand=2),
        MambaClassifier(12, 11, d_model=16, n_layers=2, expand=2, equals_token=True),
    ],
)
def test_forward_shapes_and_finite(model):
    tokens = torch.cat([torch.randint(0, 11, (5, 2)), torch.full((5, 1), 11)], dim=1)
    logits = model(tokens)
    assert logits.shape == (5, 11) and torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_mlp_input_is_order_aware():
    model = MLP(12, 11, d_embed=8, hidden=16, n_layers=2)
    ab, ba = torch.tensor([[1, 2, 11]]), torch.tensor([[2, 1, 11]])
    assert not torch.allclose(model(ab), model(ba))


def test_mamba_mixer_keys_and_shapes_are_mamba_ssm_s():
    mixer = MambaMixer(d_model=128, d_state=16, d_conv=4, expand=4)
    assert [(k, tuple(v.shape)) for k, v in mixer.state_dict().items()] == MAMBA_SSM_KEYS
    model = MambaClassifier(98, 97)
    for layer in range(4):
        prefix = f"layers.{layer}.mixer."
        block = {k[len(prefix) :]: tuple(v.shape) for k, v in model.state_dict().items() if k.startswith(prefix)}
        assert block == dict(MAMBA_SSM_KEYS)
    assert mixer.A_log.dtype == torch.float32 and torch.equal(mixer.D, torch.ones(512))
    assert torch.allclose(-torch.exp(mixer.A_log[3]), -torch.arange(1.0, 17.0))
    dt = F.softplus(mixer.dt_proj.bias.detach())  # initialised log-uniform in [1e-3, 0.1]
    assert float(dt.min()) >= 1e-3 - 1e-7 and float(dt.max()) <= 0.1 + 1e-6


def test_mamba_state_dict_round_trip_strict():
    torch.manual_seed(0)
    source, target = MambaClassifier(12, 11, d_model=16, n_layers=2), MambaClassifier(12, 11, d_model=16, n_layers=2)
    target.load_state_dict(source.state_dict(), strict=True)
    tokens = torch.randint(0, 11, (4, 3))
    assert torch.equal(source(tokens), target(tokens))


def _step_by_step(mixer, hidden):
    """mamba_ssm.Mamba.step's recurrence (rolling conv state, one token at a time)."""
    batch, length, _ = hidden.shape
    conv_state = torch.zeros(batch, mixer.d_inner, mixer.d_conv)
    ssm_state = torch.zeros(batch, mixer.d_inner, mixer.d_state)
    A = -torch.exp(mixer.A_log)
    outs = []
    for t in range(length):
        x, z = mixer.in_proj(hidden[:, t]).chunk(2, dim=-1)
        conv_state = torch.cat([conv_state[:, :, 1:], x.unsqueeze(-1)], dim=-1)
        x = F.silu((conv_state * mixer.conv1d.weight.squeeze(1)).sum(-1) + mixer.conv1d.bias)
        dt, B, C = mixer.x_proj(x).split([mixer.dt_rank, mixer.d_state, mixer.d_state], dim=-1)
        dt = F.softplus(F.linear(dt, mixer.dt_proj.weight) + mixer.dt_proj.bias)
        dA = torch.exp(torch.einsum("bd,dn->bdn", dt, A))
        ssm_state = ssm_state * dA + x.unsqueeze(-1) * torch.einsum("bd,bn->bdn", dt, B)
        y = (torch.einsum("bdn,bn->bd", ssm_state, C) + mixer.D * x) * F.silu(z)
        outs.append(mixer.out_proj(y))
    return torch.stack(outs, dim=1)


def test_reference_scan_equals_mamba_ssm_step_recurrence():
    torch.manual_seed(1)
    mixer = MambaMixer(d_model=16, d_state=4, d_conv=4, expand=2).double()
    with torch.no_grad():
        for p in mixer.parameters():
            p.add_(0.3 * torch.randn_like(p))  # away from the init's symmetric values
    hidden = torch.randn(3, 5, 16, dtype=torch.float64)
    assert torch.allclose(reference_forward(mixer, hidden), _step_by_step(mixer, hidden), atol=1e-10)


def test_mamba_a_log_and_d_never_decay():
    model = MambaClassifier(12, 11, d_model=16, n_layers=2)
    decay, no_decay = parameter_groups(model, 1.0, "all")
    exempt = {id(b.mixer.A_log) for b in model.layers} | {id(b.mixer.D) for b in model.layers}
    assert {id(p) for p in no_decay["params"]} == exempt and no_decay["weight_decay"] == 0.0
    assert len(decay["params"]) + len(exempt) == len(list(model.parameters()))


def test_backend_auto_on_cpu_is_torch_and_mamba_ssm_needs_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert MambaClassifier(12, 11, d_model=16, n_layers=1, backend="auto").backend == "torch"
    with pytest.raises(ConfigError, match=r"^model\.arch_kwargs\.backend='mamba_ssm': needs CUDA[^\n]*$"):
        MambaClassifier(12, 11, d_model=16, n_layers=1, backend="mamba_ssm")
    with pytest.raises(ConfigError, match="must be one of"):
        MambaClassifier(12, 11, backend="triton")


def test_backend_with_cuda_but_no_package(monkeypatch):
    def missing():
        raise ImportError("No module named 'mamba_ssm'")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(mamba_module, "_mamba_ssm_class", missing)
    with pytest.warns(UserWarning, match="using the PyTorch scan"):
        assert MambaClassifier(12, 11, d_model=16, n_layers=1, backend="auto").backend == "torch"
    with pytest.raises(ConfigError, match="mamba_ssm cannot be imported"):
        MambaClassifier(12, 11, d_model=16, n_layers=1, backend="mamba_ssm")


def test_mamba_ssm_backend_wiring_with_a_stand_in(monkeypatch):
    """With a stand-in for mamba_ssm.Mamba: same seed -> same weights, states load both ways, and
    CPU inputs go through the reference scan."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(mamba_module, "_mamba_ssm_class", lambda: MambaMixer)
    torch.manual_seed(3)
    fast = MambaClassifier(12, 11, d_model=16, n_layers=2, backend="auto")
    torch.manual_seed(3)
    slow = MambaClassifier(12, 11, d_model=16, n_layers=2, backend="torch")
    assert fast.backend == "mamba_ssm" and slow.backend == "torch"
    for (k1, v1), (k2, v2) in zip(fast.state_dict().items(), slow.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    fast.load_state_dict(slow.state_dict(), strict=True)
    tokens = torch.randint(0, 11, (4, 3))
    assert torch.equal(fast(tokens), slow(tokens))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_mamba_ssm_and_torch_backends_agree_on_gpu():
    pytest.importorskip("mamba_ssm")
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # fp32 convolutions on both sides
    try:
        torch.manual_seed(0)
        ref = MambaClassifier(98, 97, backend="torch")
        with torch.no_grad():
            for p in ref.parameters():
                p.add_(0.05 * torch.randn_like(p))  # random weights, not just the init
        fast = MambaClassifier(98, 97, backend="mamba_ssm")
        assert fast.backend == "mamba_ssm"
        fast.load_state_dict(ref.state_dict(), strict=True)
        ref, fast = ref.cuda(), fast.cuda()
        tokens = torch.randint(0, 97, (64, 3), device="cuda")
        labels = torch.randint(0, 97, (64,), device="cuda")
        out_ref, out_fast = ref(tokens), fast(tokens)
        assert torch.allclose(out_fast, out_ref, atol=1e-4)
        F.cross_entropy(out_ref, labels).backward()
        F.cross_entropy(out_fast, labels).backward()
        grads = dict(fast.named_parameters())
        for name, p in ref.named_parameters():
            assert torch.allclose(grads[name].grad, p.grad, atol=1e-4), name
    finally:
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def test_module_records_backend_and_refuses_attention():
    module = GrokkingModule(arch="mamba", arch_kwargs={"d_model": 16, "n_layers": 1}, modulus=11)
    assert module.record_extras["backend"] == "torch" and not module.has_attention
    assert module.record_extras["attention_metrics"] == "undefined for arch=mamba"
    with pytest.raises(ValueError, match="has no attention"):
        module(torch.zeros(1, 3, dtype=torch.long), return_attention=True)
    assert "backend" not in GrokkingModule(modulus=11, d_model=16, n_layers=1, n_heads=2).record_extras


def test_config_errors_are_one_line_before_training(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="needs CUDA"):
        GrokkingModule(arch="mamba", arch_kwargs={"backend": "mamba_ssm"})  # no modulus: not built yet
    with pytest.raises(ConfigError, match="unexpected keyword argument 'hiden'"):
        GrokkingModule(arch="mlp", arch_kwargs={"hiden": 8}, modulus=11)


def test_attention_diagnostics_on_a_module_without_attention(caplog):
    """Attached to any module without attention (here a bare LightningModule): no crash, one note."""
    import lightning as L

    from grok_lightning.callbacks import AttentionDiagnostics

    callback, module = AttentionDiagnostics(), L.LightningModule()
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            callback.setup(None, module, "fit")
            assert callback.contribute(None, module, 0, {}, Captured()) == {}
    assert sum("attention metrics undefined" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    "arch, arch_kwargs",
    [
        ("mlp", {"d_embed": 8, "hidden": 32, "n_layers": 2}),
        ("lstm", {"d_embed": 8, "hidden": 32, "n_layers": 2}),
        ("mamba", {"d_model": 16, "n_layers": 2, "expand": 2, "backend": "auto"}),
    ],
)
def test_tiny_training_run_per_probe(tiny, arch, arch_kwargs):
    config = tiny(max_epochs=3, arch=arch, arch_kwargs=arch_kwargs)
    config["data"]["init_args"]["p"] = 11
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # CPU: "auto" must pick torch silently
        warnings.filterwarnings("ignore", message=".*(workers|LeafSpec|treespec|args parameter).*")
        record = run_config(config)
    assert record["status"] == "completed" and record["final_epoch"] == 3
    assert record["attention_metrics"] == f"undefined for arch={arch}"
    history = record["history"]
    assert not any(key.startswith(ATTENTION_KEYS) or key.startswith("layer_") for key in history)
    assert len(history["test_acc"]) == len(history["epoch"]) and None not in history["weight_norm"]
    if arch == "mamba":
        assert record["backend"] == "torch"
    # the checkpoint rebuilds the probe without a datamodule (modulus is stored)
    logger = config["trainer"]["logger"]["init_args"]
    checkpoint = Path(logger["save_dir"]) / logger["name"] / logger["version"] / "checkpoints" / "last.ckpt"
    module = GrokkingModule.load_from_checkpoint(checkpoint, map_location="cpu")
    assert module.hparams.arch == arch and module.modulus == 11


def test_operator_token_runs_reload_and_rebuild_with_four_positions(tiny):
    """With data.operator_token the transformer reads [a, op, b, =]: the run records attention
    diagnostics on 4 x 4 patterns, its checkpoint reloads without a datamodule, and a record
    reader rebuilds the same shapes; a probe refuses it before training, naming the field."""
    from grok_lightning.modules.grokking import build_from_config

    config = tiny(max_epochs=2)
    config["data"]["init_args"]["operator_token"] = True
    record = run_config(config)
    assert record["status"] == "completed" and record["config"]["data"]["operator_token"] is True
    assert record["history"]["entropy_std"][-1] is not None
    logger = config["trainer"]["logger"]["init_args"]
    checkpoint = Path(logger["save_dir"]) / logger["name"] / logger["version"] / "checkpoints" / "last.ckpt"
    module = GrokkingModule.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    assert module.model.position_embedding.num_embeddings == 4 and module.model.token_embedding.num_embeddings == 25
    rebuilt = build_from_config(record["config"]["model"], record["config"]["data"])
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in module.model.state_dict().items()}
    longer = tiny(max_epochs=3)
    longer["data"]["init_args"]["operator_token"] = True
    longer["trainer"]["logger"]["init_args"]["version"] = "v1"
    assert run_config(longer, ckpt_path=str(checkpoint))["final_epoch"] == 3  # resumes: the flag is the data's
    probe = tiny(max_epochs=1, arch="mlp", arch_kwargs={"d_embed": 8, "hidden": 16, "n_layers": 1})
    probe["data"]["init_args"]["operator_token"] = True
    with pytest.raises(ConfigError, match="data.operator_token"):
        run_config(probe)
