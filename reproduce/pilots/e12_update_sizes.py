"""How large are the updates of re-initialised heads after E12's group-B intervention?

    python -m reproduce.pilots.e12_update_sizes --out reproduction [--epochs 200] [--steps 50]

Trains the canonical model (seed 7, lambda = 1) for ``--epochs`` epochs with the package's data
order and AdamW, then re-initialises 2 heads per layer (configs/interventions/head_reinit.yaml's
choice) three ways and takes ``--steps`` more steps with the same batches:

- ``keep``: the slices keep their Adam moments (the default);
- ``fresh``: moments zeroed, updates bias-corrected with the slices' own step count;
- ``zeroed``: moments zeroed with the shared step count (the reading the docs warn against).

Per step it records the RMS update of the re-initialised q/k/v rows and of the other heads'
rows (same tensors), and writes their ratio to ``<out>/e12_update_sizes/update_sizes.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from types import SimpleNamespace

import torch

from grok_lightning.callbacks.interventions import HeadReinit, head_slices
from grok_lightning.data import ModularArithmeticDataModule
from grok_lightning.modules import GrokkingModule
from reproduce.targets.common import REPO, cli

MODES = ("keep", "fresh", "zeroed")


def batches(dm: ModularArithmeticDataModule, epoch: int):
    sampler = dm.train_dataloader().sampler
    sampler.set_epoch(epoch)
    for index in sampler:
        yield dm.x_train[index], dm.y_train[index]


def step(module, optimizer, x, y) -> None:
    optimizer.zero_grad(set_to_none=True)
    module.compute_loss(module.model(x), y).backward()
    optimizer.step()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="reproduction")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)  # as every run does (run.flush_denormal): weight decay makes subnormals
    torch.manual_seed(7)
    import yaml

    canonical = yaml.safe_load((REPO / "configs" / "canonical.yaml").read_text())["model"]["init_args"]
    module = GrokkingModule(**{k: v for k, v in canonical.items() if k != "arch_kwargs"}, modulus=97)
    dm = ModularArithmeticDataModule(p=97, split_seed=7)
    dm.setup("fit")
    optimizer = module.configure_optimizers()
    for epoch in range(args.epochs):
        for x, y in batches(dm, epoch):
            step(module, optimizer, x, y)
    after = [b for epoch in range(args.epochs, args.epochs + 2 + args.steps // 9) for b in batches(dm, epoch)][: args.steps]
    spec = yaml.safe_load((REPO / "configs" / "interventions" / "head_reinit.yaml").read_text())["init_args"]
    results = {}
    for mode in MODES:
        m, opt = copy.deepcopy(module), None
        opt = m.configure_optimizers()
        opt.load_state_dict(optimizer.state_dict())
        trainer = SimpleNamespace(optimizers=[opt], callbacks=[], current_epoch=args.epochs, logger=None)
        callback = HeadReinit(**dict(spec, epoch=args.epochs, optimizer_state="keep" if mode == "keep" else "fresh"))
        with torch.no_grad():
            log = callback.apply(trainer, m)
        if mode == "zeroed":
            callback.fresh = None  # moments zeroed, the shared step count left as it is
        rows = _row_masks(m, log["heads"])
        sizes = {"reinit": [], "other": []}
        for x, y in after:
            before = {name: p.detach().clone() for name, p in m.model.named_parameters()}
            step(m, opt, x, y)
            if callback.fresh is not None:
                callback.fresh.correct(trainer)
            for kind in sizes:
                deltas = [(dict(m.model.named_parameters())[n].detach() - before[n])[rows[n][kind]] for n in rows]
                sizes[kind].append(float(torch.cat([d.flatten() for d in deltas]).pow(2).mean().sqrt()))
        ratio = [r / o for r, o in zip(sizes["reinit"], sizes["other"])]
        results[mode] = {"rms_update_reinit": sizes["reinit"], "rms_update_other": sizes["other"], "ratio": ratio,
                         "ratio_first_step": ratio[0], "ratio_mean_steps_1_10": sum(ratio[:10]) / 10,
                         "ratio_mean_steps_1_50": sum(ratio) / len(ratio)}
        print(f"{mode:7s} reinit/other RMS update: step 1 {ratio[0]:.2f}, steps 1-10 {sum(ratio[:10]) / 10:.2f}, "
              f"steps 1-{len(ratio)} {sum(ratio) / len(ratio):.2f}", flush=True)
    out = Path(args.out) / "e12_update_sizes"
    out.mkdir(parents=True, exist_ok=True)
    (out / "update_sizes.json").write_text(json.dumps({"epochs": args.epochs, "steps": args.steps, "seed": 7,
                                                       "heads": log["heads"], "modes": results}, indent=1))


def _row_masks(module, heads: dict) -> dict:
    """Per q/k/v weight: boolean masks of the re-initialised heads' rows and the other heads' rows."""
    masks = {}
    for layer, block in enumerate(module.model.blocks):
        name = f"blocks.{layer}.attn.qkv.weight"
        reinit = torch.zeros_like(block.attn.qkv.weight, dtype=torch.bool)
        for param, index, kind in head_slices(block.attn, heads.get(str(layer), []), ["q", "k", "v"]):
            if kind == "qkv_weight":
                reinit[index] = True
        masks[name] = {"reinit": reinit, "other": ~reinit}
    return masks


if __name__ == "__main__":
    cli(main)
