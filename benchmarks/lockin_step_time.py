"""Per-epoch cost of the lock-in run (Xu's x^2 network, M = 71, K = 2048): old path vs new, side by side.

Three pieces of every epoch, each timed both ways in the same process, interleaved, so the
ratios hold even on a loaded machine:

- training step: dense one-hot ``X @ W^T`` vs the gathered forward with the dense backward
  (bit-identical trajectory);
- evaluation features on train + test: two strided row gathers of ``W^T`` vs one embedding_bag;
- rho_tian: the full n x n kernel vs the upper block triangle.

Then, optionally (``--fit``), the wall time of the whole 400-epoch ``configs/tian.yaml`` run.

    python benchmarks/lockin_step_time.py [--repeats 20] [--fit]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from _common import REPO

from grok_lightning.data.tian import ModularAdditionOneHotDataModule
from grok_lightning.metrics.spectrum import rho_tian, rho_tian_blocked
from grok_lightning.models.two_layer import TwoLayerNet
from grok_lightning.modules.tian import one_hot_columns, tian_mse_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--fit", action="store_true", help="also time the whole 400-epoch run (rho every epoch)")
    args = parser.parse_args()
    torch.manual_seed(0)
    dm = ModularAdditionOneHotDataModule(M=71, seed=0)
    net = TwoLayerNet(142, d_out=71, hidden=2048)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=2e-4)
    x, y = dm.x_train, dm.y_train
    columns = {split: one_hot_columns(t) for split, t in (("train", dm.x_train), ("test", dm.x_test))}

    def step(gathered: bool) -> None:
        optimizer.zero_grad()
        features = net.features_one_hot(*columns["train"], x=x) if gathered else net.features(x)
        tian_mse_loss(net.V(features), y, 71).backward()
        optimizer.step()

    @torch.no_grad()
    def eval_features(gathered: bool) -> None:
        w_t = net.W.weight.t()
        for split in ("train", "test"):
            first, second = columns[split]
            net._sigma(w_t[first] + w_t[second]) if not gathered else net.features_one_hot(first, second)

    with torch.no_grad():
        features = net.features(x)
    cases = {
        "training step": (lambda: step(False), lambda: step(True)),
        "evaluation features": (lambda: eval_features(False), lambda: eval_features(True)),
        "rho_tian": (lambda: rho_tian(features), lambda: rho_tian_blocked(features)),
    }
    results = {}
    for name, (old, new) in cases.items():
        old(), new()  # warm-up
        times = {"old": [], "new": []}
        for _ in range(args.repeats):
            for key, fn in (("old", old), ("new", new)):
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
        old_ms, new_ms = (1e3 * statistics.median(times[k]) for k in ("old", "new"))
        results[name] = {"old_ms": round(old_ms, 2), "new_ms": round(new_ms, 2), "speedup": round(old_ms / new_ms, 2)}
        print(f"{name:20s} old {old_ms:7.1f} ms   new {new_ms:7.1f} ms   x{old_ms / new_ms:.2f}")
    old_epoch = sum(r["old_ms"] for r in results.values())
    new_epoch = sum(r["new_ms"] for r in results.values())
    print(f"{'sum per epoch':20s} old {old_epoch:7.1f} ms   new {new_epoch:7.1f} ms   x{old_epoch / new_epoch:.2f}")
    results["threads"] = torch.get_num_threads()
    if args.fit:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "grok_lightning.cli", "fit", "--config", str(REPO / "configs/tian.yaml"),
                            "--trainer.logger.init_args.save_dir", tmp], check=True, capture_output=True)
            results["fit_400_epochs_wall_s"] = round(time.perf_counter() - start, 1)
        print(f"400-epoch run (rho every epoch, start-up included): {results['fit_400_epochs_wall_s']} s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
