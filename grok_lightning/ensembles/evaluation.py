"""The members' evaluations of one epoch as vmapped forwards over their stacked weights.

A separate run evaluates its train and test splits in one forward each. An ensemble of E
transformers would repeat that E times, each a small kernel launch sequence: on a GPU the
launches, not the arithmetic, set the cost. Here the first member asking for its evaluation at an
epoch computes every pending member's at once: per split, ``torch.func.vmap`` of the lead member's
model over the stacked weights and the members' own splits (each member has its own split seed),
returning logits, attention and the output-projection inputs as outputs (hooks cannot leave a
vmap). Each member's pipeline then receives its row and :class:`~grok_lightning.callbacks.evaluation.Captured`
exactly as its own forward would have given them (:meth:`MemberTrainer.prepared_evaluation`).

Only the vectorised transformer members use it; the loop (LSTM) and the lock-in network evaluate
member by member as before. Members are evaluated in chunks (``max_members``) to bound memory.
"""

from __future__ import annotations

import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F

from grok_lightning.callbacks.evaluation import Captured, ScheduledEvaluation
from grok_lightning.metrics.head_outputs import attention_blocks

__all__ = ["batched_evaluations", "can_batch"]

#: activation values (logits excluded) one vmapped evaluation forward may hold, per chunk of members
ELEMENT_BUDGET = 2**27


def can_batch(ensemble) -> bool:
    """Vectorised transformer members (attention returned as outputs)."""
    lead = ensemble.members[0]
    return bool(ensemble.vectorized) and getattr(lead.hparams, "arch", None) == "transformer"


def _wants(ensemble, e: int) -> tuple[set, set]:
    """The splits member e's evaluation pipeline wants attention and head outputs of."""
    pipeline = next((c for c in ensemble.member_parts[e]["callbacks"] if isinstance(c, ScheduledEvaluation)), None)
    contributors = (pipeline.contributors or []) if pipeline is not None else []
    attention = {s for c in contributors for s in getattr(c, "attention_splits", ())}
    outputs = {s for c in contributors for s in getattr(c, "head_output_splits", ())}
    return attention, outputs


@torch.no_grad()
def batched_evaluations(ensemble, members: list[int]) -> dict[int, tuple[dict, Captured]]:
    """``{e: (row, captured)}`` for ``members``: the evaluation each would compute alone."""
    lead = ensemble.members[members[0]]
    splits = {e: ensemble.member_parts[e]["datamodule"].eval_splits() for e in members}
    rows = {e: {} for e in members}
    captured = {e: Captured() for e in members}
    wants = {e: _wants(ensemble, e) for e in members}
    was_training = [m.training for m in ensemble.members]
    for m in ensemble.members:
        m.eval()
    try:
        for split in next(iter(splits.values())):
            n = len(splits[members[0]][split][1])
            batch = min(lead.hparams.eval_batch_size, n)
            per_example = 2 * lead.hparams.d_ff + 8 * lead.hparams.d_model  # rough activation width
            group = max(1, ELEMENT_BUDGET // (batch * per_example))
            for start_m in range(0, len(members), group):
                chunk = members[start_m:start_m + group]
                _evaluate_split(ensemble, lead, chunk, split, splits, batch, rows, captured, wants)
        for e in members:
            rows[e]["weight_norm"] = ensemble.members[e].weight_norm()
    finally:
        for m, training in zip(ensemble.members, was_training):
            m.train(training)
    return {e: (rows[e], captured[e]) for e in members}


def _evaluate_split(ensemble, lead, chunk, split, splits, batch, rows, captured, wants) -> None:
    index = torch.tensor(chunk, device=lead.device)
    params = {name: p.detach().index_select(0, index) for name, p in ensemble._stacked.items()}
    tokens = torch.stack([splits[e][split][0] for e in chunk]).to(lead.device)
    labels = torch.stack([splits[e][split][1] for e in chunk]).to(lead.device)

    def forward(p, x):
        return functional_call(lead.model, p, (x,), {"return_attention": True, "return_projection_inputs": True})

    n = labels.shape[1]
    loss_sum, correct = [0.0] * len(chunk), [0] * len(chunk)
    attention_chunks = {e: [] for e in chunk}
    for start in range(0, n, batch):
        logits, attentions, projections = vmap(forward)(params, tokens[:, start:start + batch])
        y = labels[:, start:start + batch]
        for i, e in enumerate(chunk):
            loss_sum[i] += float(F.cross_entropy(logits[i].double(), y[i], reduction="sum"))
            correct[i] += int((logits[i].argmax(-1) == y[i]).sum())
            want_attention, want_outputs = wants[e]
            if split in want_attention:
                attention_chunks[e].append([a[i] for a in attentions])
            if split in want_outputs:
                blocks = attention_blocks(ensemble.members[e].model)
                captured[e].projection_inputs.setdefault(split, []).append(
                    [(p[i], block) for p, block in zip(projections, blocks)])
    for i, e in enumerate(chunk):
        rows[e][f"{split}_loss"] = loss_sum[i] / n
        rows[e][f"{split}_acc"] = correct[i] / n
        if attention_chunks[e]:
            captured[e].attention[split] = [torch.cat(layer) for layer in zip(*attention_chunks[e])]
