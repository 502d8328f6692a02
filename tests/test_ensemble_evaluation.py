"""The members' evaluations as one vmapped forward (grok_lightning.ensembles.evaluation): the same
rows and diagnostics as each member's own evaluation forward."""

from __future__ import annotations

import pytest
import torch
from test_ensemble import MEMBERS, TOL, member_config

from grok_lightning.ensembles import build_ensemble
from grok_lightning.ensembles import evaluation as batched

KEYS = ("train_loss", "test_loss", "train_acc", "test_acc", "weight_norm", "mean_similarity", "entropy_std", "pr_norm")


def _fit(tmp_path, tag: str, batch_evaluation: bool):
    configs = [member_config(tmp_path, s, w, tag, epochs=4) for s, w in MEMBERS[:3]]
    for config in configs:
        config["diagnostics"].update(readings=True, readings_batch=32)
    trainer, ensemble, loaders = build_ensemble(configs, tmp_path / f"{tag}_root", checkpoint_every=0)
    ensemble.batch_evaluation = batch_evaluation
    trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    return [next(c for c in p["callbacks"] if hasattr(c, "record")).record for p in ensemble.member_parts]


def test_one_batched_forward_gives_every_members_own_evaluation(tmp_path, monkeypatch):
    calls = []
    original = batched.batched_evaluations
    monkeypatch.setattr(batched, "batched_evaluations", lambda ens, members: calls.append(members) or original(ens, members))
    together = _fit(tmp_path, "batched", True)
    assert calls and all(len(members) == 3 for members in calls)  # once per evaluated epoch, for all members
    alone = _fit(tmp_path, "alone", False)
    for a, b in zip(together, alone):
        assert a["history"]["epoch"] == b["history"]["epoch"]
        for key in KEYS + tuple(k for k in b["history"] if k.startswith("reading/")):
            assert a["history"][key] == pytest.approx(b["history"][key], rel=TOL, abs=1e-7), key


def test_the_step_without_host_syncs_equals_the_checked_step(tmp_path):
    """The GPU path (losses checked on the device, divergence looked at once per epoch) run on
    the CPU: a member that diverges and one that stops early end as with the per-step check."""
    from test_ensemble import StopAt, assert_same_run

    def fit(tag, sync):
        configs = [member_config(tmp_path, s, w, tag, epochs=5) for s, w in MEMBERS[:3]]
        trainer, ensemble, loaders = build_ensemble(configs, tmp_path / f"{tag}_root", checkpoint_every=0)
        ensemble.sync_every_step = sync
        ensemble.member_parts[0]["callbacks"].insert(-1, StopAt(2))
        with torch.no_grad():
            ensemble.members[1].model.head.bias.fill_(float("nan"))  # diverges at once
        trainer.fit(ensemble, train_dataloaders=loaders)
        torch.set_flush_denormal(False)
        records = [next(c for c in p["callbacks"] if hasattr(c, "record")).record for p in ensemble.member_parts]
        return ensemble, records

    device_side, deferred = fit("deferred", False)
    host_side, checked = fit("checked", True)
    assert [r["status"] for r in deferred] == [r["status"] for r in checked] == ["completed", "diverged", "completed"]
    assert deferred[1]["diverged_epoch"] == checked[1]["diverged_epoch"] == 1
    for e in (0, 2):
        assert_same_run(host_side.members[e], checked[e], device_side.members[e], deferred[e])


@pytest.mark.parametrize("setting", ["clip", "warmup"])
def test_members_with_clipping_or_warmup_equal_their_separate_runs(tmp_path, setting):
    from test_ensemble import assert_same_run, separate

    def configs(tag):
        out = []
        for s, w in MEMBERS[:2]:
            config = member_config(tmp_path, s, w, tag, epochs=4)
            if setting == "clip":
                config["trainer"]["gradient_clip_val"] = 0.05  # small enough to clip every step
            else:
                config["model"]["init_args"]["warmup_steps"] = 7
            out.append(config)
        return out

    alone = [separate(c) for c in configs("separate")]
    trainer, ensemble, loaders = build_ensemble(configs("ensemble"), tmp_path / "root", checkpoint_every=0)
    trainer.fit(ensemble, train_dataloaders=loaders)
    torch.set_flush_denormal(False)
    records = [next(c for c in p["callbacks"] if hasattr(c, "record")).record for p in ensemble.member_parts]
    for e, (module, record, _) in enumerate(alone):
        assert_same_run(module, record, ensemble.members[e], records[e])
