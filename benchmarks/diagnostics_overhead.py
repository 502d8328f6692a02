"""Wall clock of a canonical run with and without AttentionDiagnostics at the paper's cadence.

Both runs evaluate loss/accuracy on the same schedule (every epoch to 10, then every 10); the
difference is the diagnostics alone: keeping the test split's attention during evaluation and
computing s_bar, sigma_H, entropy mean/range, spectral gap and PR_norm per layer. Rounds
alternate to cancel machine drift. The paper reports about 3% (goal: at most 3%).

    python benchmarks/diagnostics_overhead.py [--epochs 60] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from _common import canonical_config, median

from grok_lightning.run import GrokCLI


def timed_fit(epochs: int, diagnostics: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        config = canonical_config(tmp, max_epochs=epochs)
        config["run"].update(checkpoint_every=0, diagnostics=diagnostics)
        cli = GrokCLI(args=config, run=False)
        start = time.perf_counter()
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    without, with_diag = [], []
    for _ in range(args.rounds):
        without.append(timed_fit(args.epochs, False))
        with_diag.append(timed_fit(args.epochs, True))
    result = {
        "epochs": args.epochs,
        "without_s": median(without),
        "with_s": median(with_diag),
        "overhead_pct": 100 * (median(with_diag) / median(without) - 1),
    }
    print(f"{'run':28s} {'wall s':>8s}")
    print(f"{'without diagnostics':28s} {result['without_s']:8.1f}")
    print(f"{'with diagnostics':28s} {result['with_s']:8.1f}")
    print(f"overhead: {result['overhead_pct']:.1f}%  ({args.epochs} epochs, median of {args.rounds})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
