"""Does a change of the code leave what a run records unchanged? The canonical run, trained by two
checkouts of this package, compared value for value (exactly: JSON keeps every float's bits).

Three records of the same config and seed: the ``--before`` checkout trains it whole; the
``--after`` checkout trains it whole; and the ``--before`` checkout trains the first half, writes
``last.ckpt``, and the ``--after`` checkout resumes it to the end (a run in progress continued by
the new code). Every field that does not depend on where and when the run ran must agree
exactly, the history first (losses, accuracies, weight norm, every diagnostic at every
evaluated epoch). Each run is a subprocess with ``PYTHONPATH`` set to its checkout.

    python benchmarks/same_numbers.py --before /path/to/main [--after .] [--epochs 40]
        [--precision bf16-mixed] [--seed 42]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import canonical_config

#: what depends on where and when a run ran, not on what it computed
VOLATILE = {"wall_time_s", "cpu_time_s", "environment", "name", "weight_checkpoint_dir", "resumed", "events"}

#: one run in a fresh interpreter: argv = config file, checkpoint ('' for none), record file
RUN = """
import json, sys
from grok_lightning.run import run_config
record = run_config(json.load(open(sys.argv[1])), ckpt_path=sys.argv[2] or None)
json.dump(record, open(sys.argv[3], "w"))
"""


def config_for(save_dir: Path, epochs: int, precision: str, seed: int, checkpoint_every: int) -> dict:
    """The canonical run as the medium profiles train it: one thread, evaluation and attention
    diagnostics every epoch to 10 then every 10, no attention images."""
    config = canonical_config(str(save_dir), max_epochs=epochs, precision=precision)
    config["seed_everything"] = seed
    config["run"].update(threads=1, checkpoint_every=checkpoint_every, checkpoint_minutes=0)
    config["diagnostics"].update(image_every=0)
    return config


def train(checkout: Path, config: dict, folder: Path, ckpt_path: str | None = None) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    config_file, record_file = folder / "config.json", folder / "record.out.json"
    config_file.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    args = [sys.executable, "-c", RUN, str(config_file), ckpt_path or "", str(record_file)]
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(record_file.read_text())


def differences(a, b, path: str = "") -> list[str]:
    """Every place where two JSON values differ (exact comparison)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) if k not in VOLATILE or path
                for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if json.dumps(a) == json.dumps(b) else [f"{path}: {json.dumps(a)[:80]} != {json.dumps(b)[:80]}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the reference checkout (e.g. main)")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--precision", default="bf16-mixed", choices=("32-true", "bf16-mixed"))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    half = args.epochs // 2
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        whole = lambda epochs: config_for(tmp / "logs", epochs, args.precision, args.seed, half)  # noqa: E731
        records = {"before": train(args.before, whole(args.epochs), tmp / "before"),
                   "after": train(args.after, whole(args.epochs), tmp / "after")}
        first = config_for(tmp / "resume_logs", half, args.precision, args.seed, half)
        train(args.before, first, tmp / "resume_first")
        ckpt = next((tmp / "resume_logs").rglob("last.ckpt"))
        second = config_for(tmp / "resume_logs", args.epochs, args.precision, args.seed, half)
        records["before, resumed by after"] = train(args.after, second, tmp / "resume_second", str(ckpt))
    reference = records["before"]
    rows = len(reference["history"]["epoch"])
    print(f"canonical run, {args.epochs} epochs, {args.precision}, seed {args.seed}: {rows} evaluated epochs x "
          f"{len(reference['history'])} columns")
    # a resumed record keeps the configuration of the run it continues: extended here from half
    # the epochs, its config.max_epochs says so (as it does with one checkout)
    records["before, resumed by after"]["config"]["max_epochs"] = reference["config"]["max_epochs"]
    failed = False
    for name in ("after", "before, resumed by after"):
        found = differences(records[name], reference)
        failed |= bool(found)
        print(f"  {name} vs before: " + ("identical" if not found else f"{len(found)} differences, e.g. {found[:3]}"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
