"""Attention capture and the order parameters on any transformer: this package's model,
torch.nn.TransformerEncoder / Decoder, Hugging Face GPT-2 and BERT (with padding), and the
callback for any LightningModule. The metrics are checked against a numpy transcription of the
published formulas, the probabilities against an independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import CSVLogger
from torch import nn

from grok_lightning.diagnostics import (
    AnyModelAttentionDiagnostics,
    AttentionCapture,
    MaskedAttentionStatistics,
    UnsupportedModelError,
    attention_probabilities,
    masked_attention_statistics,
)
from grok_lightning.metrics.participation import DEFAULT_PR_CONSTRUCTION
from grok_lightning.models.transformer import DecoderTransformer

#: float32 forwards through different kernels or chunkings agree to about this relative error
FLOAT32_REL = 1e-5


# -- the published formulas, in numpy, with padding as "drop invalid rows and keys" ----------
def reference(attentions, mask=None):
    """Layer means of s_bar, sigma_H, spectral gap and PR_norm ((R - 1)/(H - 1)) under the
    package's default ``examples`` covariance: each head's value at a coordinate (q, k) minus its
    mean over the sequences in which that coordinate is valid."""
    per_layer = {"mean_similarity": [], "entropy_std": [], "spectral_gap": [], "pr_norm": []}
    for a in attentions:
        a = a.detach().double().numpy()
        batch, heads, t, _ = a.shape
        valid = np.ones((batch, t), bool) if mask is None else mask.numpy().astype(bool)
        patterns, entropies = [], []
        for h in range(heads):
            blocks = [a[b, h][np.ix_(valid[b], valid[b])] for b in range(batch)]
            patterns.append(np.concatenate([block.ravel() for block in blocks]))
            rows = np.concatenate([-(block * np.log(block + 1e-12)).sum(-1) for block in blocks])
            entropies.append(rows.mean())  # over batch and query rows
        x = np.stack(patterns)  # (H, N)
        unit = x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)
        cosine = unit @ unit.T
        per_layer["mean_similarity"].append((cosine.sum() - np.trace(cosine)) / (heads * (heads - 1)))
        per_layer["entropy_std"].append(np.std(entropies))  # population std over heads
        eigenvalues = np.linalg.eigvalsh(cosine)
        per_layer["spectral_gap"].append(eigenvalues[-1] - eigenvalues[-2])
        deviations = []  # (H,) vectors, one per valid (sequence, q, k)
        for q in range(t):
            for k in range(t):
                seqs = [b for b in range(batch) if valid[b, q] and valid[b, k]]
                if seqs:
                    values = a[seqs, :, q, k]  # (n_c, H)
                    deviations.append(values - values.mean(0))
        d = np.concatenate(deviations)  # (N, H)
        lam = np.clip(np.linalg.eigvalsh(d.T @ d / len(d)), 0, None)
        per_layer["pr_norm"].append((lam.sum() ** 2 / (lam**2).sum() - 1) / (heads - 1))
    return {k: float(np.mean(v)) for k, v in per_layer.items()}


def test_reference_uses_the_package_default_pr_construction():
    assert DEFAULT_PR_CONSTRUCTION == "examples"  # the construction `reference` transcribes


def assert_matches_reference(layers, mask=None):
    ours = masked_attention_statistics(layers, mask)
    for key, expected in reference(layers, mask).items():
        assert ours[key].item() == pytest.approx(expected, rel=1e-9, abs=1e-12), key


def manual_mha_probabilities(mha: nn.MultiheadAttention, x, attn_mask=None, key_padding_mask=None):
    """softmax(Q K^T / sqrt(d_head) + masks) from the module's packed projection; x is (B, T, D)."""
    batch, t, d = x.shape
    heads, d_head = mha.num_heads, d // mha.num_heads
    w_q, w_k, _ = mha.in_proj_weight.chunk(3)
    b_q, b_k, _ = mha.in_proj_bias.chunk(3)
    q = (x @ w_q.T + b_q).view(batch, t, heads, d_head).transpose(1, 2)
    k = (x @ w_k.T + b_k).view(batch, t, heads, d_head).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if attn_mask is not None:
        scores = scores + attn_mask
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return scores.softmax(-1)


def padded_tokens(batch=4, t=6, vocab=11, seed=0):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab, (batch, t), generator=generator)
    lengths = torch.tensor([t, t - 2, 3, t - 1][:batch])
    valid = torch.arange(t)[None] < lengths[:, None]  # right padding
    return tokens.masked_fill(~valid, 0), valid


# -- this package's DecoderTransformer -------------------------------------------------------
def test_decoder_transformer_capture_equals_returned_attention():
    torch.manual_seed(0)
    model = DecoderTransformer(12, 11, d_model=16, n_layers=2, n_heads=4, d_ff=32).eval()
    tokens = torch.randint(0, 12, (5, 3))
    logits, returned = model(tokens, return_attention=True)
    layers = attention_probabilities(model, tokens)
    assert len(layers) == 2 and all(torch.equal(a, b) for a, b in zip(layers, returned))
    wrapper = nn.ModuleDict({"net": model})  # found anywhere in the tree
    with AttentionCapture(wrapper) as capture:
        assert torch.equal(wrapper["net"](tokens), logits)
        assert all(torch.equal(a, b) for a, b in zip(capture.take(), returned))
    assert_matches_reference(layers)


# -- torch.nn ----------------------------------------------------------------------------------
def encoder(batch_first: bool, dropout=0.0, norm_first=False, layers=2):
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=dropout, batch_first=batch_first, norm_first=norm_first)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def layer_inputs(model, x, **kwargs):
    """The input each self-attention sees, (B, T, D), read independently of the capture code."""
    seen = []
    hooks = [m.register_forward_pre_hook(lambda m, args: seen.append(args[0])) for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    model(x, **kwargs)
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("padding", [False, True])
def test_torch_encoder_capture_equals_manual_softmax(batch_first, padding):
    model = encoder(batch_first).eval()
    x = torch.randn(4, 6, 16)
    _, valid = padded_tokens()
    kwargs = {"src_key_padding_mask": ~valid} if padding else {}
    x_in = x if batch_first else x.transpose(0, 1)
    layers = attention_probabilities(model, x_in, **kwargs)
    attentions = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    with torch.no_grad():
        inputs = layer_inputs(model, x_in, **kwargs)
        expected = [
            manual_mha_probabilities(m, h if batch_first else h.transpose(0, 1), key_padding_mask=kwargs.get("src_key_padding_mask"))
            for m, h in zip(attentions, inputs)
        ]
    assert len(layers) == 2 and layers[0].shape == (4, 4, 6, 6)
    for got, want in zip(layers, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_matches_reference(layers, valid if padding else None)


def test_torch_encoder_causal_mask():
    model = encoder(True).eval()
    x = torch.randn(3, 5, 16)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    layers = attention_probabilities(model, x, mask=causal, is_causal=True)
    with torch.no_grad():
        inputs = layer_inputs(model, x, mask=causal, is_causal=True)
    mhas = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    for got, m, h in zip(layers, mhas, inputs):
        torch.testing.assert_close(got, manual_mha_probabilities(m, h, attn_mask=causal), rtol=1e-5, atol=1e-6)
        assert torch.all(got.triu(1) == 0)


@pytest.mark.parametrize("batch_first", [True, False])
def test_torch_capture_leaves_training_untouched(batch_first):
    """Training mode with dropout: same outputs, same gradients, same random stream, same mode."""
    model = encoder(batch_first, dropout=0.2, norm_first=True).train()
    x = torch.randn(4, 6, 16) if batch_first else torch.randn(6, 4, 16)

    def step(capture: bool):
        model.zero_grad()
        torch.manual_seed(123)
        if capture:
            with AttentionCapture(model) as c:
                out = model(x)
                layers = c.take()
            assert len(layers) == 2 and torch.allclose(layers[0].sum(-1), torch.ones(()))
        else:
            out = model(x)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()], torch.rand(3)

    plain, captured = step(False), step(True)
    assert torch.equal(plain[0], captured[0])
    assert all(torch.equal(a, b) for a, b in zip(plain[1], captured[1]))
    assert torch.equal(plain[2], captured[2])  # the capture drew no random numbers
    assert all(m.training for m in model.modules())


def test_torch_capture_eval_mode_outputs():
    """Evaluation mode: bit-identical to the regular forward; the fused fast path (no_grad only)
    agrees to round-off, and the fast-path switch is restored."""
    model = encoder(True).eval()
    x = torch.randn(4, 6, 16)
    with AttentionCapture(model):
        captured = model(x)
        with torch.no_grad():
            captured_no_grad = model(x)
    assert torch.equal(captured, model(x))  # with grad enabled: no fast path either way
    assert torch.backends.mha.get_fastpath_enabled()
    with torch.no_grad():
        torch.testing.assert_close(captured_no_grad, model(x))  # fast path
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            assert torch.equal(captured_no_grad, model(x))
        finally:
            torch.backends.mha.set_fastpath_enabled(True)


def test_torch_decoder_self_and_cross_attention():
    torch.manual_seed(2)
    layer = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    model = nn.TransformerDecoder(layer, 2).eval()
    target, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    self_layers = attention_probabilities(model, target, memory=memory)
    assert [tuple(a.shape) for a in self_layers] == [(3, 4, 5, 5)] * 2
    both = attention_probabilities(model, target, memory=memory, cross_attention=True)
    assert [tuple(a.shape) for a in both] == [(3, 4, 5, 5), (3, 4, 5, 7)] * 2
    assert torch.equal(both[0], self_layers[0]) and torch.equal(both[2], self_layers[1])


def test_unsupported_model_names_what_was_looked_for():
    with pytest.raises(UnsupportedModelError) as error:
        attention_probabilities(nn.Sequential(nn.Linear(4, 4)), torch.zeros(2, 4))
    message = str(error.value)
    for looked_for in ("Sequential", "PreTrainedModel", "output_attentions", "MultiheadAttention", "TransformerEncoderLayer", "DecoderTransformer"):
        assert looked_for in message


# -- Hugging Face --------------------------------------------------------------------------------
@pytest.fixture
def transformers():
    return pytest.importorskip("transformers", reason="Hugging Face transformers is the optional `hf` extra")


def tiny_gpt2(transformers, **kwargs):
    torch.manual_seed(3)
    config = transformers.GPT2Config(vocab_size=11, n_positions=8, n_embd=16, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0, **kwargs)
    return transformers.GPT2LMHeadModel(config).eval()


def tiny_bert(transformers):
    torch.manual_seed(4)
    config = transformers.BertConfig(
        vocab_size=11, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32, max_position_embeddings=8, pad_token_id=0
    )
    return transformers.BertModel(config).eval()


def test_hf_gpt2_capture_equals_own_attentions(transformers):
    model = tiny_gpt2(transformers)
    assert model.config._attn_implementation != "eager"  # SDPA returns no weights
    tokens, _ = padded_tokens()
    layers = attention_probabilities(model, tokens)
    assert model.config._attn_implementation != "eager"  # restored
    model.set_attn_implementation("eager")
    own = model(tokens, output_attentions=True).attentions
    assert len(layers) == 2 and all(torch.equal(a, b) for a, b in zip(layers, own))
    with AttentionCapture(model):  # eager model: outputs bit-identical with and without capture
        logits = model(tokens).logits
    assert torch.equal(logits, model(tokens).logits)
    assert_matches_reference(layers)


def test_hf_inside_a_wrapper_and_dict_inputs(transformers):
    model = tiny_gpt2(transformers)

    class Wrapper(nn.Module):  # a user's module that drops everything but the logits
        def __init__(self):
            super().__init__()
            self.gpt = model

        def forward(self, input_ids, attention_mask=None):
            return self.gpt(input_ids=input_ids, attention_mask=attention_mask).logits

    tokens, valid = padded_tokens()
    layers = attention_probabilities(Wrapper(), {"input_ids": tokens, "attention_mask": valid.long()})
    model.set_attn_implementation("eager")
    own = model(tokens, attention_mask=valid.long(), output_attentions=True).attentions
    assert all(torch.equal(a, b) for a, b in zip(layers, own))


def test_hf_bert_padding(transformers):
    model = tiny_bert(transformers)
    tokens, valid = padded_tokens()
    layers = attention_probabilities(model, {"input_ids": tokens, "attention_mask": valid.long()})
    model.set_attn_implementation("eager")
    own = model(tokens, attention_mask=valid.long(), output_attentions=True).attentions
    assert all(torch.equal(a, b) for a, b in zip(layers, own))
    assert_matches_reference(layers, valid)
    # the rule means "as if there were no padding": each sequence run alone, unpadded, gives the
    # same probabilities on its tokens, so the same sum-reduced state
    alone = MaskedAttentionStatistics()
    for sequence, keep in zip(tokens, valid):
        n = int(keep.sum())
        single = attention_probabilities(model, sequence[:n][None])  # (1, H, n, n) per layer
        alone.update([torch.nn.functional.pad(x, (0, 6 - n, 0, 6 - n)) for x in single], keep[None])
    padded, unpadded = masked_attention_statistics(layers, valid), alone.compute()
    for key in ("mean_similarity", "entropy_std", "spectral_gap", "pr_norm"):
        torch.testing.assert_close(padded[key], unpadded[key], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(masked_attention_statistics(layers)["entropy_std"], padded["entropy_std"])


# -- the callback on user LightningModules ---------------------------------------------------------
class EncoderClassifier(LightningModule):
    """A user's module: padded token sequences -> class, through nn.TransformerEncoder."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 16)
        self.net = encoder(True, dropout=0.1)
        self.head = nn.Linear(16, 3)

    def forward(self, tokens, src_key_padding_mask=None):
        hidden = self.net(self.embed(tokens), src_key_padding_mask=src_key_padding_mask)
        return self.head(hidden[:, 0])

    def training_step(self, batch, batch_idx):
        tokens, labels = batch
        return nn.functional.cross_entropy(self(tokens, tokens == 0), labels)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def fit(module, callback, tmp_path, epochs=2):
    tokens, _ = padded_tokens(seed=5)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens, torch.arange(4) % 3), batch_size=2)
    trainer = Trainer(
        max_epochs=epochs, logger=CSVLogger(tmp_path), callbacks=[callback], enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False, accelerator="cpu",
    )
    trainer.fit(module, data)
    return trainer


def test_callback_logs_on_schedule_and_matches_direct_computation(tmp_path):
    module = EncoderClassifier()
    tokens, valid = padded_tokens(seed=6)
    batch = {"tokens": tokens, "src_key_padding_mask": ~valid}
    callback = AnyModelAttentionDiagnostics(batch, every_n_epochs=2, chunk_size=3)
    trainer = fit(module, callback, tmp_path, epochs=4)
    assert all(m.training for m in module.modules())  # the evaluation restored training mode
    import pandas as pd

    logged = pd.read_csv(f"{trainer.logger.log_dir}/metrics.csv")
    rows = logged.dropna(subset=["diag/mean_similarity"])
    assert rows["step"].tolist() == [0, 4, 8]  # at start, after epochs 2 and 4 (2 steps each)
    for name in ("mean_similarity", "entropy_std", "spectral_gap", "pr_norm"):
        assert {f"diag/{name}", f"diag_layer_0/{name}", f"diag_layer_1/{name}"} <= set(logged.columns)
    module.eval()
    with torch.no_grad():
        layers = attention_probabilities(module, batch)
    direct = masked_attention_statistics(layers, valid)
    # the callback's chunked float32 forwards and this one batched forward may use different
    # kernels: a float32 tolerance, not a float64 one
    for name in ("mean_similarity", "entropy_std", "spectral_gap", "pr_norm"):
        assert callback.last[f"diag/{name}"] == pytest.approx(direct[name].item(), rel=FLOAT32_REL)
        assert callback.last[f"diag/{name}"] == pytest.approx(reference(layers, valid)[name], rel=FLOAT32_REL)


def test_callback_with_module_path_and_dataloader(tmp_path):
    module = EncoderClassifier()
    tokens, _ = padded_tokens(seed=7)
    embedded = module.embed(tokens).detach()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(embedded, torch.zeros(4)), batch_size=3)
    callback = AnyModelAttentionDiagnostics(loader, module_path="net", every_n_epochs=1, per_layer=False)
    fit(module, callback, tmp_path, epochs=1)
    assert sorted(callback.last) == ["diag/entropy_std", "diag/mean_similarity", "diag/pr_norm", "diag/spectral_gap"]
    module.eval()
    with torch.no_grad():
        layers = attention_probabilities(module.net, embedded)
    assert callback.last["diag/entropy_std"] == pytest.approx(reference(layers)["entropy_std"], rel=FLOAT32_REL)


def test_callback_on_hf_gpt2_lightning_module(tmp_path, transformers):
    class LM(LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_gpt2(transformers).train()

        def training_step(self, batch, batch_idx):
            return self.model(input_ids=batch[0], labels=batch[0]).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    module = LM()
    tokens, valid = padded_tokens(seed=8)
    eval_batch = {"input_ids": tokens, "attention_mask": valid.long(), "labels": tokens}
    callback = AnyModelAttentionDiagnostics(eval_batch, module_path="model", every_n_epochs=1, chunk_size=2)
    fit(module, callback, tmp_path, epochs=1)
    assert module.model.config._attn_implementation != "eager"
    module.model.eval()
    with torch.no_grad():
        layers = attention_probabilities(module.model, {"input_ids": tokens, "attention_mask": valid.long()})
    assert callback.last["diag/mean_similarity"] == pytest.approx(reference(layers, valid)["mean_similarity"], rel=1e-6)


@pytest.mark.parametrize("construction", ["examples", "heads", "coordinates", "uncentred", "per_example"])
def test_masked_single_sequence_equals_trimmed(construction):
    """One padded sequence: every statistic, under every PR construction, is that of the sequence
    with its padding cut off; an all-true mask is the unmasked kernel."""
    logits = torch.randn(1, 4, 6, 6, generator=torch.Generator().manual_seed(9))
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    a = logits.masked_fill(causal, float("-inf")).softmax(-1)
    keep = torch.tensor([[True] * 4 + [False] * 2])
    padded = masked_attention_statistics([a, a.flip(1)], keep, pr_construction=construction)
    trimmed = masked_attention_statistics([a[..., :4, :4], a[..., :4, :4].flip(1)], pr_construction=construction)
    full = masked_attention_statistics([a], torch.ones(1, 6, dtype=torch.bool), pr_construction=construction)
    unmasked = masked_attention_statistics([a], pr_construction=construction)
    for key in padded:
        torch.testing.assert_close(padded[key], trimmed[key], equal_nan=True)
        torch.testing.assert_close(full[key], unmasked[key], equal_nan=True)


def test_hf_gpt2_example_runs(tmp_path, transformers):
    """examples/diagnostics_hf_gpt2.py, shrunk to seconds: it trains and the callback logs."""
    import sys

    from conftest import REPO

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import diagnostics_hf_gpt2 as example
    finally:
        sys.path.pop(0)
    args = example.parser().parse_args(["--p", "11", "--n-embd", "16", "--epochs", "2", "--diag-every", "1", "--val-every", "1"])
    threads = torch.get_num_threads()  # build() sets the example's one thread, process-wide
    try:
        module, (train, held_out), trainer = example.build(args, True, CSVLogger(tmp_path))
        trainer.fit(module, train, held_out)
    finally:
        torch.set_num_threads(threads)
    callback = next(c for c in trainer.callbacks if isinstance(c, AnyModelAttentionDiagnostics))
    assert set(callback.last) >= {"diag/mean_similarity", "diag_layer_1/pr_norm"}
    assert all(math.isfinite(v) for v in callback.last.values())


def test_masked_metric_accepts_chunks_of_different_lengths():
    """Dynamic padding: chunks of T = 6, 4, 5 accumulate to the statistics of one batch padded to 6."""
    logits = torch.randn(6, 4, 6, 6, generator=torch.Generator().manual_seed(10))
    a = logits.softmax(-1)
    lengths = torch.tensor([6, 3, 4, 2, 5, 4])
    valid = torch.arange(6)[None] < lengths[:, None]
    a = torch.where(valid[:, None, None, :], a, 0)  # a model that masks padded keys (rows not renormalised: irrelevant here)
    whole = masked_attention_statistics([a], valid)
    metric = MaskedAttentionStatistics()
    metric.update([a[:2]], valid[:2])  # T = 6
    metric.update([a[2:4, :, :4, :4]], valid[2:4, :4])  # T = 4
    metric.update([a[4:, :, :5, :5]], valid[4:, :5])  # T = 5
    chunked = metric.compute()
    for key in whole:
        torch.testing.assert_close(chunked[key], whole[key])
    grown = MaskedAttentionStatistics()  # the longest chunk last: the states grow
    grown.update([a[2:4, :, :4, :4]], valid[2:4, :4])
    grown.update([a[4:, :, :5, :5]], valid[4:, :5])
    grown.update([a[:2]], valid[:2])
    for key in whole:
        torch.testing.assert_close(grown.compute()[key], whole[key])
