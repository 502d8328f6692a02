"""LSTM probe for the cross-architecture comparison (docs/decisions.md, "Cross-architecture probes").

The paper: embedding 128, 4-layer LSTM with hidden 512, bias-free head 512 -> 97, 7,680,640
parameters. The LSTM and head are fixed by that description (``nn.LSTM`` keeps both bias vectors,
``b_ih`` and ``b_hh``, as every PyTorch LSTM does):

- layer 1: ``4*512*(128 + 512) + 2*4*512 = 1,314,816``;
  layers 2-4: ``3 * (4*512*(512 + 512) + 2*4*512) = 6,303,744``;
- head: ``512 * 97 = 49,664``;

which leaves ``7,680,640 - 7,668,224 = 12,416 = 97 * 128`` for the embedding: it has **p rows,
not p + 1** (98 rows give 7,680,768; no other part of the model comes in a size that could
absorb the 128 difference, since every LSTM tensor is a multiple of 512). So the paper's LSTM
embeds only the operands: the sequence is ``[a, b]`` and the prediction is read at the last
position (``b``). The constant ``=`` token carries no information, so nothing is lost.
``equals_token=True`` gives the alternative (p + 1 rows, sequence ``[a, b, =]``, read at ``=``).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LSTMClassifier"]


class LSTMClassifier(nn.Module):
    """``tokens (B, 3) [a, b, =]`` -> ``logits (B, n_classes)`` read at the last position.

    Args:
        vocab_size: p + 1 (``=`` is id p).
        n_classes: p.
        d_embed, hidden, n_layers: embedding width, LSTM hidden size and depth.
        equals_token: also embed and read ``=`` (p + 1 embedding rows; off by default, see above).

    >>> model = LSTMClassifier(98, 97)
    >>> sum(p.numel() for p in model.parameters())
    7680640
    >>> model(torch.zeros(2, 3, dtype=torch.long)).shape
    torch.Size([2, 97])
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_embed: int = 128,
        hidden: int = 512,
        n_layers: int = 4,
        equals_token: bool = False,
    ):
        super().__init__()
        self.equals_token = equals_token
        self.embedding = nn.Embedding(vocab_size if equals_token else vocab_size - 1, d_embed)
        self.lstm = nn.LSTM(d_embed, hidden, num_layers=n_layers, batch_first=True)
        self.head = nn.Linear(hidden, n_classes, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        sequence = tokens if self.equals_token else tokens[:, :2]
        outputs, _ = self.lstm(self.embedding(sequence))  # (B, T, hidden)
        return self.head(outputs[:, -1])
