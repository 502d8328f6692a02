"""Modular arithmetic as a LightningDataModule: ``c = a (op) b mod p`` for op in + - x /.

Tokens are ``[a, b, =]`` (T = 3) with vocabulary ``p + 1`` (``=`` is id ``p``); the label is
read at the last position. Division drops ``b = 0`` and uses the modular inverse
``b^(p-2) mod p`` (Fermat), so ``p`` must be prime for ``div``. ``operator_token=True`` gives
``[a, op, b, =]`` (T = 4, ``op`` is id ``p + 1``), the other input format a paper on one
operation might have used (an input check of its sigma_H values, docs/sigma_h_readings.md); the
paper's Fig. 2 values fit ``[a, b, =]``.

Why the loader is hand-rolled: the whole dataset is a few thousand integer triples, so it lives
in two tensors. A stock ``DataLoader`` over a ``TensorDataset`` would collate 512 single items per
step; instead an epoch-seeded batch sampler yields index tensors and the dataset gathers them in
one indexing op. Seeding the shuffle by ``(seed, epoch)`` makes data order a function of the
epoch alone, so a run resumed from a checkpoint sees exactly the batches it would have seen.
"""

from __future__ import annotations

import os

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from grok_lightning.config import require, require_choice, validate_modular_task

__all__ = ["ModularArithmeticDataModule", "modular_table", "token_layout", "with_operator"]


def modular_table(p: int, operation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All ``(a, b)`` pairs and their labels, in row-major order.

    >>> pairs, labels = modular_table(5, "div")
    >>> pairs.shape, labels[:4].tolist()   # a = 0: 0 / b = 0 for b = 1..4
    (torch.Size([20, 2]), [0, 0, 0, 0])
    >>> int(labels[(pairs[:, 0] == 1) & (pairs[:, 1] == 2)])  # 1 / 2 = 3 mod 5 (2 * 3 = 6 = 1)
    3
    """
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    if operation == "add":
        c = (a + b) % p
    elif operation == "sub":
        c = (a - b) % p
    elif operation == "mul":
        c = (a * b) % p
    elif operation == "div":
        keep = b != 0
        a, b = a[keep], b[keep]
        inverse = torch.tensor([pow(int(v), p - 2, p) for v in range(p)])
        c = (a * inverse[b]) % p
    else:  # validated earlier; kept for direct callers
        raise ValueError(f"unknown operation {operation!r}")
    return torch.stack([a, b], dim=1), c


def token_layout(p: int, operator_token: bool = False) -> tuple[int, int]:
    """``(vocabulary size, sequence length)`` of the inputs, for the model that reads them.

    >>> token_layout(97), token_layout(97, operator_token=True)
    ((98, 3), (99, 4))
    """
    return (p + 2, 4) if operator_token else (p + 1, 3)


def with_operator(pairs: torch.Tensor, p: int, operator_token: bool = False) -> torch.Tensor:
    """Input tokens from ``(a, b)`` pairs: ``[a, b, =]``, or ``[a, op, b, =]`` with the operator token.

    >>> with_operator(torch.tensor([[3, 4]]), 5).tolist(), with_operator(torch.tensor([[3, 4]]), 5, True).tolist()
    ([[3, 4, 5]], [[3, 6, 4, 5]])
    """
    def column(token: int) -> torch.Tensor:
        return torch.full((len(pairs), 1), token, dtype=torch.long)

    parts = [pairs[:, :1], column(p + 1), pairs[:, 1:]] if operator_token else [pairs]
    return torch.cat([*parts, column(p)], dim=1)


class _GatherDataset(Dataset):
    """``dataset[index_tensor] -> (tokens, labels)`` in one gather (no per-item collation)."""

    def __init__(self, tokens: torch.Tensor, labels: torch.Tensor):
        self.tokens, self.labels = tokens, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        return self.tokens[index], self.labels[index]


#: what happens to the ``n mod batch_size`` examples left after the full batches of an epoch
LAST_BATCH = ("keep", "drop", "balance")


class _EpochBatchSampler(Sampler):
    """Yields index tensors of one epoch; the permutation depends only on ``(seed, epoch)``.

    ``last_batch``: ``keep`` (a smaller last batch: 9 x 512 + 96 at p = 97), ``drop`` (full
    batches only; a different remainder is left out each epoch) or ``balance`` (as many batches
    as ``keep``, of sizes differing by at most one: 10 x 470-471).
    """

    def __init__(self, n: int, batch_size: int, shuffle: bool, seed: int, last_batch: str = "keep"):
        self.n, self.batch_size, self.shuffle, self.seed = n, batch_size, shuffle, seed
        self.last_batch = last_batch
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:  # called by Lightning at the start of every epoch
        self.epoch = epoch

    def __len__(self) -> int:
        if self.last_batch == "drop":
            return max(1, self.n // self.batch_size)
        return (self.n + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.n, generator=generator)
        else:
            order = torch.arange(self.n)
        if self.last_batch == "balance":
            yield from order.tensor_split(len(self))
        elif self.last_batch == "drop" and self.n >= self.batch_size:
            yield from order[: len(self) * self.batch_size].split(self.batch_size)
        else:
            yield from order.split(self.batch_size)


class ModularArithmeticDataModule(L.LightningDataModule):
    """Train/test split of the full ``p x p`` operation table.

    Args:
        p: modulus (97 in the paper).
        operation: ``add`` | ``sub`` | ``mul`` | ``div``.
        train_fraction: fraction of all pairs used for training (0.5 in the paper).
        batch_size: minibatch size (512 in the paper, about 10 steps per epoch at p = 97).
        full_batch: one step per epoch on the whole training split (overrides ``batch_size``).
        last_batch: ``keep`` (default), ``drop`` or ``balance`` the examples left after the full
            batches of an epoch (see ``_EpochBatchSampler``).
        split_seed: seed of the train/test permutation; ``None`` uses the run seed
            (``seed_everything``), so each seed also draws its own split, as in the paper.
        random_labels: the paper's null (Fig. 4): permute the training labels with
            ``label_seed``; test labels stay true.
        label_seed: seed of that permutation.
        order_seed: seed of the minibatch order; ``None`` uses the split's seed. A run resumed
            from another's checkpoint with its own ``order_seed`` sees the same split in another
            order: E12's placebo, a perturbation that changes nothing but the trajectory.
        operator_token: inputs ``[a, op, b, =]`` (T = 4) instead of ``[a, b, =]`` (transformer only).
    """

    def __init__(
        self,
        p: int = 97,
        operation: str = "add",
        train_fraction: float = 0.5,
        batch_size: int = 512,
        full_batch: bool = False,
        last_batch: str = "keep",
        split_seed: int | None = None,
        random_labels: bool = False,
        label_seed: int = 0,
        order_seed: int | None = None,
        operator_token: bool = False,
    ):
        super().__init__()
        validate_modular_task(p, operation, train_fraction)
        require(batch_size >= 1, "data.batch_size", batch_size, "must be an integer >= 1")
        require_choice("data.last_batch", last_batch, LAST_BATCH)
        self.save_hyperparameters()
        self.p, self.operation = p, operation
        require(isinstance(operator_token, bool), "data.operator_token", operator_token, "must be true or false")
        self.operator_token = operator_token
        (self.vocab_size, self.seq_len), self.n_classes = token_layout(p, operator_token), p
        self._ready = False

    @property
    def run_seed(self) -> int:
        return int(os.environ.get("PL_GLOBAL_SEED", 0))

    def setup(self, stage: str | None = None) -> None:
        if self._ready:
            return
        hp = self.hparams
        pairs, labels = modular_table(hp.p, hp.operation)
        tokens = with_operator(pairs, hp.p, hp.operator_token)
        split_seed = self.run_seed if hp.split_seed is None else hp.split_seed
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(split_seed))
        n_train = int(hp.train_fraction * len(labels))
        train_idx, test_idx = order[:n_train], order[n_train:]
        self.x_train, self.y_train = tokens[train_idx], labels[train_idx].clone()
        self.x_test, self.y_test = tokens[test_idx], labels[test_idx]
        if hp.random_labels:
            shuffle = torch.randperm(n_train, generator=torch.Generator().manual_seed(hp.label_seed))
            self.y_train = self.y_train[shuffle]
        self.split_seed = split_seed
        self._ready = True

    def train_dataloader(self) -> DataLoader:
        batch_size = len(self.y_train) if self.hparams.full_batch else self.hparams.batch_size
        order_seed = self.split_seed if self.hparams.order_seed is None else self.hparams.order_seed
        sampler = _EpochBatchSampler(len(self.y_train), batch_size, shuffle=True, seed=order_seed,
                                     last_batch=self.hparams.last_batch)
        return DataLoader(_GatherDataset(self.x_train, self.y_train), sampler=sampler, batch_size=None)

    def eval_splits(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The full splits used for evaluation (no loader: they fit in one tensor each)."""
        return {"train": (self.x_train, self.y_train), "test": (self.x_test, self.y_test)}
