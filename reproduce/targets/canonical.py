"""The canonical run: configs/canonical.yaml until it groks.

p = 97, a + b, 4L x 8H x d128, AdamW lr 1e-3, batch 512, lambda = 1.0, seed 0; stops 20 epochs
after grokking (horizon 400). Writes the run (TensorBoard, record.json, config.yaml), a learning
curve PNG and a report row. Both profiles run the same single run (it is already CPU-sized).

    python -m reproduce.targets.canonical --out reproduction
"""

from __future__ import annotations

from pathlib import Path

import yaml

from grok_lightning.plots.common import place_caption, plt
from grok_lightning.records import FINAL_STATUSES, load_record
from reproduce.manifest import write_manifest
from reproduce.report import row
from reproduce.report.sources import claim_sample
from reproduce.targets.common import REPO, caption, cli, describe, parse_args, write_outputs


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    from grok_lightning.run import run_config

    out = Path(args.out) / "canonical"
    config = yaml.safe_load((REPO / "configs" / "canonical.yaml").read_text())
    config["trainer"].update(enable_progress_bar=False)
    config["trainer"]["logger"]["init_args"].update(save_dir=str(out), name="run", version="seed0")
    config["run"]["profile"] = args.profile
    run_dir = out / "run" / "seed0"
    previous = load_record(run_dir / "record.json") if (run_dir / "record.json").exists() else None
    if previous is not None and previous["status"] in FINAL_STATUSES:
        record = previous  # already done in an earlier invocation: nothing is rerun
    elif args.no_train:  # reading records only: nothing to analyse yet, said in one line
        raise SystemExit(f"canonical ({args.profile}): no final record in {run_dir} (--no-train: nothing trained)")
    else:
        last = run_dir / "checkpoints" / "last.ckpt"
        record = run_config(config, ckpt_path=str(last) if last.exists() else None)
        write_manifest(args.out)  # the new record is listed where the report checks it
    history = record["history"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, color in (("train_acc", "tab:blue"), ("test_acc", "tab:green")):
        ax.plot(history["epoch"], history[key], color=color, label=key.replace("_", " "))
    if record["grok_epoch"] is not None:
        ax.axvline(record["grok_epoch"], color="black", linestyle="--", linewidth=1, label=f"t_grok = {record['grok_epoch']}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy")
    ax.legend(loc="center right")
    ax.set_title("Canonical run: lambda = 1.0, seed 0", fontsize=10)
    text = caption(args.profile, f"seed 0, horizon {record['config']['max_epochs']}, stop 20 epochs after grokking\n{describe(record)}", figure="canonical")
    place_caption(fig, text, bottom=0.1, top=1, size=6.5)
    fig.savefig(out / "canonical_learning_curve.png", dpi=130)
    rows = [row("2605.20441 canonical", "t_grok at lambda = 1, seed 0 (epochs; the paper's published grok epochs there: "
                f"{', '.join(str(int(t)) for t in sorted(claim_sample('wd.t_grok_1')))})", None,
                record["grok_epoch"], args.profile, 1, note=f"status {record['status']}, {record['wall_time_s']:.0f} s on CPU; "
                "one run, context (the claim is scored by Fig. 2's runs)")]
    write_outputs(out, {"record": str(out / "run" / "seed0" / "record.json"), "grok_epoch": record["grok_epoch"],
                        "wall_time_s": record["wall_time_s"], "status": record["status"]}, rows)
    print(f"canonical: grok_epoch={record['grok_epoch']} status={record['status']} ({record['wall_time_s']:.0f} s)")
    return out


if __name__ == "__main__":
    cli(main)
