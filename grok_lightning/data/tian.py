"""Full-batch modular addition with one-hot concatenated inputs (Tian 2025 / Xu 2026 setup).

All ``M * M`` ordered pairs ``(a, b)`` with label ``(a + b) mod M``. The split follows Xu's code
(``tian_eigengap.split_train_test``): one ``torch.randperm`` drawn from a *separate*
``torch.Generator`` seeded with the split seed, first ``n_train`` pairs train, the rest test.
Because the split never touches the global RNG, seeding the global RNG and then building the
model reproduces the paper's initial weights regardless of when the data module is built.

Input ``x = [onehot(a), onehot(b)]`` (shape ``(N, 2M)``, float32); target ``y`` (class index).
Training is full batch: the train loader yields the cached ``(x_train, y_train)`` once per epoch,
so one epoch is exactly one optimizer step.

>>> dm = ModularAdditionOneHotDataModule(M=5, train_fraction=0.4, seed=0)
>>> dm.x_train.shape, dm.x_test.shape, dm.n_train
(torch.Size([10, 10]), torch.Size([15, 10]), 10)
>>> int(len(dm.train_dataloader()))
1
"""

from __future__ import annotations

import os

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from grok_lightning.config import require

#: Xu's headline split: n_train = 2016 of 71^2 = 5041 pairs (p ~= 0.40).
DEFAULT_TRAIN_FRACTION = 2016 / 5041


class _FullBatch(Dataset):
    """A one-item dataset whose item is the whole (cached) training set.

    With ``batch_size=None`` the DataLoader hands the tensors over untouched: no per-sample
    indexing or collation, so a full-batch "epoch" costs nothing beyond the step itself.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.y


def modular_addition_pairs(M: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All pairs in Xu's order (a major, b minor) and their labels ``(a + b) mod M``.

    >>> pairs, y = modular_addition_pairs(3)
    >>> pairs[:4].tolist(), y[:4].tolist()
    ([[0, 0], [0, 1], [0, 2], [1, 0]], [0, 1, 2, 1])
    """
    a = torch.arange(M).repeat_interleave(M)
    b = torch.arange(M).repeat(M)
    return torch.stack([a, b], dim=1), (a + b) % M


def one_hot_concat(pairs: torch.Tensor, M: int) -> torch.Tensor:
    """``(N, 2)`` operand pairs -> ``(N, 2M)`` float32 concatenated one-hots."""
    n = pairs.shape[0]
    return torch.nn.functional.one_hot(pairs, num_classes=M).to(torch.float32).reshape(n, 2 * M)


class ModularAdditionOneHotDataModule(L.LightningDataModule):
    """a + b mod M, one-hot concatenated inputs, full-batch training loader.

    Args:
        M: modulus (>= 2).
        train_fraction: fraction of the ``M^2`` pairs used for training; ``n_train =
            round(train_fraction * M^2)`` (default gives Xu's 2016 of 5041).
        seed: run seed; ``None`` takes the run seed set by ``seed_everything`` (the
            ``PL_GLOBAL_SEED`` environment variable; 0 when unset), so one ``seed_everything``
            drives both the split and the initialisation, as one ``--seed`` does in Xu's code.
        split_seed: seed of the split permutation (defaults to ``seed``, as in Xu's code).

    Attributes ``x_train, y_train, x_test, y_test`` (and ``pairs_train, pairs_test``) are built
    eagerly: they are tiny and deterministic, and the LightningModule's ``evaluate`` reads them.
    """

    def __init__(
        self,
        M: int = 71,
        train_fraction: float = DEFAULT_TRAIN_FRACTION,
        seed: int | None = None,
        split_seed: int | None = None,
    ) -> None:
        super().__init__()
        require(isinstance(M, int) and M >= 2, "data.M", M, "must be an integer >= 2")
        require(
            isinstance(train_fraction, (int, float)) and 0.0 < float(train_fraction) < 1.0,
            "data.train_fraction", train_fraction, "must be in the open interval (0, 1)",
        )
        n_train = int(round(float(train_fraction) * M * M))
        require(
            1 <= n_train <= M * M - 1, "data.train_fraction", train_fraction,
            f"gives n_train={n_train}; need 1 <= n_train <= {M * M - 1} (both splits non-empty)",
        )
        self.save_hyperparameters()
        self.M, self.n_train, self.n_test = M, n_train, M * M - n_train
        self.seed = int(os.environ.get("PL_GLOBAL_SEED", 0)) if seed is None else int(seed)
        self.split_seed = self.seed if split_seed is None else split_seed

        pairs, labels = modular_addition_pairs(M)
        generator = torch.Generator().manual_seed(int(self.split_seed))
        perm = torch.randperm(M * M, generator=generator)
        train_idx, test_idx = perm[:n_train], perm[n_train:]
        self.pairs_train, self.pairs_test = pairs[train_idx], pairs[test_idx]
        self.y_train, self.y_test = labels[train_idx], labels[test_idx]
        self.x_train = one_hot_concat(self.pairs_train, M)
        self.x_test = one_hot_concat(self.pairs_test, M)

    @property
    def d_in(self) -> int:
        return 2 * self.M

    def eval_splits(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"train": (x, y), "test": (x, y)}``, the full splits (same contract as the other data modules)."""
        return {"train": (self.x_train, self.y_train), "test": (self.x_test, self.y_test)}

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_FullBatch(self.x_train, self.y_train), batch_size=None, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(_FullBatch(self.x_test, self.y_test), batch_size=None, shuffle=False)
