"""Grokking in a tiny Hugging Face GPT-2, watched by the attention order parameters.

A randomly initialised GPT-2 (nothing is downloaded) is trained as a language model on
``a + b = c (mod p)``: sequences ``[a, b, =, c]`` with the loss on ``c`` only, 30% of all pairs
for training, the rest held out (a small training fraction is what delays generalisation well
past memorisation). :class:`AnyModelAttentionDiagnostics` reads the
attention of 512 held-out prompts ``[a, b, =]`` every ``--diag-every`` epochs and logs s_bar,
sigma_H, the spectral gap and PR_norm next to the accuracy curves:

    python examples/diagnostics_hf_gpt2.py                 # a few CPU minutes
    tensorboard --logdir runs/hf_gpt2                      # diag/*, diag_layer_*/*, val_acc

The model keeps transformers' default attention (SDPA on recent versions) for training; the
callback switches it to eager for its own forward only, because SDPA returns no weights.
"""

from __future__ import annotations

import argparse
import json
import time

import lightning as L
import torch
from lightning.pytorch import Callback, LightningModule
from lightning.pytorch.loggers import TensorBoardLogger
from torch.utils.data import DataLoader, TensorDataset

from grok_lightning.data.modular import modular_table
from grok_lightning.diagnostics import AnyModelAttentionDiagnostics


def modular_sequences(p: int, train_fraction: float, seed: int):
    """``[a, b, =, c]`` sequences (``=`` is token ``p``), split at random into train / held-out."""
    pairs, c = modular_table(p, "add")
    sequences = torch.cat([pairs, torch.full_like(c, p)[:, None], c[:, None]], dim=1)
    order = torch.randperm(len(c), generator=torch.Generator().manual_seed(seed))
    n_train = int(train_fraction * len(c))
    return sequences[order[:n_train]], sequences[order[n_train:]]


class ModularGPT2(LightningModule):
    """A user's LightningModule around ``GPT2LMHeadModel``: next-token loss on the answer only."""

    def __init__(self, p: int, n_layer: int = 2, n_head: int = 4, n_embd: int = 128, lr: float = 1e-3, weight_decay: float = 1.0):
        super().__init__()
        self.save_hyperparameters()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=p + 1, n_positions=4, n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_inner=4 * n_embd,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=p, eos_token_id=p,
        )
        self.model = GPT2LMHeadModel(config)

    def _step(self, batch, stage: str):
        (sequences,) = batch
        labels = torch.full_like(sequences, -100)
        labels[:, -1] = sequences[:, -1]  # GPT-2 shifts labels: the logits at "=" predict c
        out = self.model(input_ids=sequences, labels=labels)
        accuracy = (out.logits[:, -2].argmax(-1) == sequences[:, -1]).float().mean()
        self.log_dict({f"{stage}_loss": out.loss, f"{stage}_acc": accuracy}, on_step=False, on_epoch=True)
        return out.loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay, betas=(0.9, 0.98))


class StopAfterGrok(Callback):
    """Record the first epochs with training / held-out accuracy >= threshold (memorisation,
    grokking); stop ``patience`` epochs after grokking."""

    def __init__(self, threshold: float = 0.99, patience: int = 50):
        self.threshold, self.patience = threshold, patience
        self.memorised_epoch = self.grok_epoch = self.grok_seconds = None
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        accuracy = trainer.callback_metrics.get("train_acc")
        if self.memorised_epoch is None and accuracy is not None and accuracy >= self.threshold:
            self.memorised_epoch = trainer.current_epoch

    def on_validation_epoch_end(self, trainer, pl_module):
        accuracy = trainer.callback_metrics.get("val_acc")
        if trainer.sanity_checking or accuracy is None:
            return
        if self.grok_epoch is None and accuracy >= self.threshold:
            self.grok_epoch, self.grok_seconds = trainer.current_epoch, time.perf_counter() - self.start
        if self.grok_epoch is not None and trainer.current_epoch >= self.grok_epoch + self.patience:
            trainer.should_stop = True


def build(args, diagnostics: bool, logger=False, extra_callbacks=()):
    """Module, loaders and Trainer of one run (shared with benchmarks/diagnostics_any_model.py)."""
    L.seed_everything(args.seed, verbose=False)
    torch.set_num_threads(args.threads)
    train, held_out = modular_sequences(args.p, args.train_fraction, args.seed)
    module = ModularGPT2(args.p, args.n_layer, args.n_head, args.n_embd, args.lr, args.weight_decay)
    callbacks = list(extra_callbacks)
    if diagnostics:
        # a fixed evaluation batch, where the HF model sits, a cadence. The prompts are a random
        # subset of the held-out split (the split is shuffled): after memorisation, 512-prompt
        # subsets gave s_bar and sigma_H within 0.002 of the full 2,437-prompt split's, for a
        # fifth of the forward's cost
        prompts = held_out[: args.diag_prompts or None, :3]
        callbacks.append(AnyModelAttentionDiagnostics({"input_ids": prompts}, module_path="model", every_n_epochs=args.diag_every))
    trainer = L.Trainer(
        max_epochs=args.epochs, logger=logger, callbacks=callbacks, accelerator=args.accelerator, deterministic=True,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
        num_sanity_val_steps=0, check_val_every_n_epoch=args.val_every, log_every_n_steps=1,
    )
    loaders = (
        DataLoader(TensorDataset(train), batch_size=args.batch_size, shuffle=True),
        DataLoader(TensorDataset(held_out), batch_size=len(held_out)),
    )
    return module, loaders, trainer


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=int, default=59)
    parser.add_argument("--train-fraction", type=float, default=0.3)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1000, help="upper bound; stops --patience epochs after grokking")
    parser.add_argument("--patience", type=int, default=20)
    parser.add_argument("--val-every", type=int, default=5)
    parser.add_argument("--diag-every", type=int, default=10)
    parser.add_argument("--diag-prompts", type=int, default=512, help="held-out prompts the diagnostics read (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    # one thread: at these sizes (d 128, 512 x 4 tokens) extra threads cost more in
    # synchronisation than they give, and far more on a shared machine
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--accelerator", default="cpu")
    return parser


def main() -> None:
    args = parser().parse_args()
    grok = StopAfterGrok(patience=args.patience)
    logger = TensorBoardLogger(args.out, name="hf_gpt2", default_hp_metric=False)
    module, (train, held_out), trainer = build(args, True, logger, [grok])
    start = time.perf_counter()
    trainer.fit(module, train, held_out)
    diagnostics = next(c for c in trainer.callbacks if isinstance(c, AnyModelAttentionDiagnostics))
    summary = {
        "p": args.p,
        "epochs_run": trainer.current_epoch,
        "wall_s": round(time.perf_counter() - start, 1),
        "memorised_epoch": grok.memorised_epoch,
        "grok_epoch": grok.grok_epoch,
        "grok_s": None if grok.grok_seconds is None else round(grok.grok_seconds, 1),
        "train_acc": round(float(trainer.callback_metrics["train_acc"]), 4),
        "val_acc": round(float(trainer.callback_metrics["val_acc"]), 4),
        "final_diagnostics": {k: round(v, 4) for k, v in diagnostics.last.items() if "_layer_" not in k},
        "tensorboard": logger.log_dir,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
