"""Wall clock of the Hugging Face GPT-2 example with and without AnyModelAttentionDiagnostics.

Both runs are the example's (examples/diagnostics_hf_gpt2.py: same model, data, seed, validation
cadence, TensorBoard logger) for a fixed number of epochs, without early stopping; the only
difference is the callback (held-out prompts, every ``--diag-every`` epochs, plus once at the
start). Rounds alternate to cancel machine drift. Two overhead figures:

* ``wall``: median fit time with / without - 1 (what a user sees; noisy on a shared machine);
* ``in_callback``: seconds spent inside the callback's evaluations over the rest of the run
  with it (the same quantity, free of run-to-run noise).

Goal: at most 3% at an every-10-epochs cadence.

    python benchmarks/diagnostics_any_model.py [--epochs 100] [--rounds 3] [--diag-every 10]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

from _common import REPO, median
from lightning.pytorch.loggers import TensorBoardLogger

sys.path.insert(0, str(REPO / "examples"))
import diagnostics_hf_gpt2 as example  # noqa: E402

from grok_lightning.diagnostics import AnyModelAttentionDiagnostics  # noqa: E402


def timed_fit(args, diagnostics: bool) -> tuple[float, float, int]:
    """(fit seconds, seconds inside the callback's evaluations, evaluations)."""
    with tempfile.TemporaryDirectory() as tmp:
        module, (train, held_out), trainer = example.build(args, diagnostics, TensorBoardLogger(tmp, name="bench"))
        inside, calls = 0.0, 0
        for callback in trainer.callbacks:
            if isinstance(callback, AnyModelAttentionDiagnostics):
                evaluate = callback._evaluate

                def timed(*a, _evaluate=evaluate):
                    nonlocal inside, calls
                    start = time.perf_counter()
                    _evaluate(*a)
                    inside, calls = inside + time.perf_counter() - start, calls + 1

                callback._evaluate = timed
        start = time.perf_counter()
        trainer.fit(module, train, held_out)
        return time.perf_counter() - start, inside, calls


def main() -> None:
    parser = example.parser()
    parser.description = __doc__.splitlines()[0]
    parser.set_defaults(epochs=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    without, with_diag, inside = [], [], []
    for _ in range(args.rounds):
        without.append(timed_fit(args, False)[0])
        wall, seconds, calls = timed_fit(args, True)
        with_diag.append(wall)
        inside.append(seconds)
    result = {
        "p": args.p,
        "epochs": args.epochs,
        "diag_every": args.diag_every,
        "evaluations_per_run": calls,
        "rounds": args.rounds,
        "without_s": [round(t, 2) for t in without],
        "with_s": [round(t, 2) for t in with_diag],
        "per_evaluation_s": round(median(inside) / calls, 4),
        "wall_ratio": round(median(with_diag) / median(without), 4),
        "overhead_wall_pct": round(100 * (median(with_diag) / median(without) - 1), 2),
        "overhead_in_callback_pct": round(100 * median([s / (w - s) for s, w in zip(inside, with_diag)]), 2),
    }
    print(f"{'run':24s} {'median wall s':>14s}")
    print(f"{'without callback':24s} {median(without):14.2f}")
    print(f"{'with callback':24s} {median(with_diag):14.2f}")
    print(
        f"ratio {result['wall_ratio']:.4f} (overhead {result['overhead_wall_pct']:+.2f}% wall, "
        f"{result['overhead_in_callback_pct']:.2f}% inside the callback; {calls} evaluations x "
        f"{result['per_evaluation_s'] * 1000:.0f} ms; {args.epochs} epochs, {args.rounds} rounds)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
