"""TianModule: Xu's (2026) port of Tian's (2025) two-layer modular-addition setup.

Recipe (PAPER_SPECTRAL_LOCKIN.md §§1-4, 13): ``sigma(X W) V`` with K = 2048 hidden units and no
biases, Tian's class-centred MSE, ``torch.optim.Adam(lr=1e-3, weight_decay=eta)`` (coupled L2,
not AdamW, on W and V), full batch, so one epoch is one optimizer step.

:meth:`evaluate` (called by :class:`~grok_lightning.callbacks.ScheduledEvaluation` at epoch 0 and
after every epoch) returns the row "W after ``epoch`` steps": train/test loss and accuracy,
rho_tian (every ``rho_every`` epochs) and, at ``theorem6_epochs``, the Theorem-6 statistics
(``sign_match_paper``, ``sign_match_exact``, ``frac_neg_B_pos_cos``, ``median_abs_cos``; absent at
other epochs and when eta = 0, where B needs a ridge). The spectral lock-in detector is the
:class:`~grok_lightning.callbacks.lockin.LockInDetector` callback.
"""

from __future__ import annotations

import os

import lightning as L
import torch

from grok_lightning.config import ConfigError, require, validate_optimizer
from grok_lightning.metrics.repulsion import repulsion_statistics
from grok_lightning.metrics.spectrum import activation_kernel, rho_tian_blocked, rho_tian_from_kernel
from grok_lightning.models.two_layer import ACTIVATIONS, TwoLayerNet

__all__ = ["TianModule", "one_hot_columns", "tian_mse_loss"]

THEOREM6_KEYS = ("sign_match_paper", "sign_match_exact", "frac_neg_B_pos_cos", "median_abs_cos")


def tian_mse_loss(out: torch.Tensor, y: torch.Tensor, M: int) -> torch.Tensor:
    """Tian's MSE exactly as in his (and Xu's) code, no 1/2 factor.

    Outputs are centred across classes, then ``L = mean_i ||o_i - (e_{y_i} - 1/M)||^2`` computed
    as ``||o||^2 - 2 o[y] + (1 - 1/M)``. The scale matters: with coupled L2 the loss/decay ratio
    sets the grokking time, so the theory's ``1/2 ||P_1^perp (Y - FV)||^2`` would not reproduce.

    >>> import torch
    >>> out = torch.nn.functional.one_hot(torch.tensor([2, 0]), 3).float()
    >>> round(float(tian_mse_loss(out, torch.tensor([2, 0]), 3)), 6)  # one-hot output: zero loss
    0.0
    """
    centred = out - out.mean(dim=1, keepdim=True)
    square = centred.pow(2).sum(dim=1).mean()
    cross = centred.gather(1, y.unsqueeze(1)).mean()
    return square - 2.0 * cross + (1.0 - 1.0 / M)


class TianModule(L.LightningModule):
    """Two-layer x^2 (or ReLU/GELU/SiLU) network on a + b mod M, Xu's protocol.

    Args:
        M: modulus (must match the datamodule); inputs 2M, outputs M.
        hidden: hidden units K (2048).
        activation: ``x2`` | ``relu`` | ``gelu`` | ``silu``.
        lr: Adam learning rate (1e-3).
        eta: coupled L2 weight decay (2e-4 grok, 0 control); also the ridge of B in Theorem 6.
        init_seed: the network is built right after ``torch.manual_seed(init_seed)`` inside a
            forked RNG (Xu's order: seed, then W, then V), so the initial weights equal Xu's for
            that seed whatever else used the global RNG. ``None`` takes the run seed of
            ``seed_everything`` (``PL_GLOBAL_SEED``); without one, the global RNG is used as is.
        theorem6_epochs: epochs at which the Theorem-6 statistics are computed.
        theorem6_pairs: number of top-|cos| pairs (200).
        rho_every: compute rho_tian every this many epochs (its n x n kernel is the most
            expensive per-epoch metric; 0 disables it).
        rho_centred: also log the centred variant ``rho_tian_centred``.
    """

    def __init__(
        self,
        M: int = 71,
        hidden: int = 2048,
        activation: str = "x2",
        lr: float = 1e-3,
        eta: float = 2e-4,
        init_seed: int | None = None,
        theorem6_epochs: tuple[int, ...] = (50, 100, 175, 250, 300),
        theorem6_pairs: int = 200,
        rho_every: int = 1,
        rho_centred: bool = False,
    ) -> None:
        super().__init__()
        require(isinstance(M, int) and M >= 2, "model.M", M, "must be an integer >= 2")
        require(activation in ACTIVATIONS, "model.activation", activation, f"must be one of {', '.join(ACTIVATIONS)}")
        require(eta >= 0, "model.eta", eta, "must be >= 0")
        validate_optimizer(lr, eta)
        require(isinstance(theorem6_pairs, int) and theorem6_pairs >= 1, "model.theorem6_pairs", theorem6_pairs,
                "must be an integer >= 1")
        require(isinstance(rho_every, int) and rho_every >= 0, "model.rho_every", rho_every, "must be an integer >= 0")
        self.save_hyperparameters()
        self.theorem6_epochs = frozenset(int(e) for e in theorem6_epochs)
        if init_seed is None and "PL_GLOBAL_SEED" in os.environ:
            init_seed = int(os.environ["PL_GLOBAL_SEED"])
        if init_seed is None:
            self.model = TwoLayerNet(2 * M, d_out=M, hidden=hidden, activation=activation)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(init_seed)
                self.model = TwoLayerNet(2 * M, d_out=M, hidden=hidden, activation=activation)
        self.record_extras: dict = {}
        self.diverged_epoch: int | None = None
        self.train_step_losses: list[torch.Tensor] = []  # this epoch's step losses
        self._splits: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None
        self._one_hot: dict | None = None  # per split: the two one-hot columns of each row, or None
        self._train_columns: tuple | None = None  # (training batch, its one-hot columns or None)

    # --- data ---------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and getattr(datamodule, "M", self.hparams.M) != self.hparams.M:
            raise ConfigError(f"model.M={self.hparams.M}: must equal data.M={datamodule.M}")

    def set_eval_data(self, x_train, y_train, x_test, y_test) -> None:
        """Use these splits in :meth:`evaluate` (default: the trainer's datamodule attributes)."""
        self._splits = {"train": (x_train, y_train), "test": (x_test, y_test)}
        self._one_hot = None

    def _eval_splits(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        if self._splits is None:
            dm = self.trainer.datamodule
            self.set_eval_data(dm.x_train, dm.y_train, dm.x_test, dm.y_test)
        # cached on the module's device once, not copied every epoch
        self._splits = {k: (x.to(self.device), y.to(self.device)) for k, (x, y) in self._splits.items()}
        if self._one_hot is None:
            self._one_hot = {k: one_hot_columns(x) for k, (x, _) in self._splits.items()}
        return self._splits

    def _features(self, split: str, x: torch.Tensor) -> torch.Tensor:
        columns = (self._one_hot or {}).get(split)
        return self.model.features(x) if columns is None else self.model.features_one_hot(*columns)

    # --- training -----------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def on_train_epoch_start(self) -> None:
        self.train_step_losses = []

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.eta)

    def compute_loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The training loss of a forward's output (also what an ensemble vmaps per member)."""
        return tian_mse_loss(out, y, self.hparams.M)

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self._train_columns is None or self._train_columns[0] is not x:  # full batch: same tensor
            self._train_columns = (x, one_hot_columns(x))
        columns = self._train_columns[1]  # the gathered forward (bit-identical trajectory, tested)
        features = self.model.features(x) if columns is None else self.model.features_one_hot(*columns, x=x)
        loss = self.compute_loss(self.model.V(features), y)
        if not torch.isfinite(loss):
            # diverged (Xu's M = 127, p = 0.5 runs did): skip the update and stop the run
            self.diverged_epoch = self.current_epoch + 1
            self.trainer.should_stop = True
            return None
        self.train_step_losses.append(loss.detach())  # logged per epoch by ScheduledEvaluation
        return loss

    # --- evaluation ---------------------------------------------------------------------
    def is_eval_epoch(self, epoch: int) -> bool:
        return True  # the paper logs every epoch (rows 0..400), the Theorem-6 epochs included

    @torch.no_grad()
    def evaluate(self, epoch: int) -> dict[str, float]:
        """Metrics of the current weights (after ``epoch`` optimizer steps)."""
        hp = self.hparams
        out: dict[str, float] = {}
        train_features = None
        for split, (x, y) in self._eval_splits().items():
            features = self._features(split, x)
            logits = self.model.V(features)
            out[f"{split}_loss"] = float(tian_mse_loss(logits, y, hp.M))
            out[f"{split}_acc"] = float((logits.argmax(dim=1) == y).float().mean())
            if split == "train":
                train_features = features
        if hp.rho_every and epoch % hp.rho_every == 0:
            if hp.rho_centred:  # the centred variant needs the whole n x n kernel: form it once
                kernel = activation_kernel(train_features)
                out["rho_tian"] = float(rho_tian_from_kernel(kernel))
                out["rho_tian_centred"] = float(rho_tian_from_kernel(kernel, centred=True))
            else:
                out["rho_tian"] = float(rho_tian_blocked(train_features))
        if epoch in self.theorem6_epochs and hp.eta > 0:
            stats = repulsion_statistics(train_features, hp.eta, hp.theorem6_pairs)
            values = {key: float(stats[key]) for key in THEOREM6_KEYS}
            out.update(values)
            self.record_extras.setdefault("theorem6", {})[str(epoch)] = values
        return out


def one_hot_columns(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(first, second)`` column of the two ones per row if ``x`` is a concatenated one-hot pair
    (exactly one 1 in each half, zeros elsewhere), else None (then training and evaluation use the dense path)."""
    if x.ndim != 2 or x.shape[1] % 2:
        return None
    half = x.shape[1] // 2
    ones = x == 1
    if not (((x == 0) | ones).all() and ones[:, :half].sum(1).eq(1).all() and ones[:, half:].sum(1).eq(1).all()):
        return None
    return ones[:, :half].float().argmax(1), half + ones[:, half:].float().argmax(1)
