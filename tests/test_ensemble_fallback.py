"""No silent slow path: the loop fallback happens only at the probe, warns, and is in every record."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from test_ensemble import _stepper, member_config

from grok_lightning.ensembles import run_ensemble

LSTM = {"arch": "lstm", "arch_kwargs": {"d_embed": 8, "hidden": 8, "n_layers": 1}}


def _records_on_disk(configs) -> list[dict]:
    return [json.loads(open(c["run"]["record_path"]).read()) for c in configs]


@pytest.mark.slow
@pytest.mark.parametrize("arch, vectorized", [("transformer", True), ("lstm", False)])
def test_each_members_record_file_says_whether_it_was_vectorised(tmp_path, arch, vectorized):
    overrides = LSTM if arch == "lstm" else {}
    configs = [member_config(tmp_path, seed, wd, f"m{seed}", epochs=2, **overrides) for seed, wd in ((7, 0.1), (11, 1.0))]
    for c in configs:
        c["run"]["record_path"] = str(tmp_path / f"{c['run']['run_id']}.json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run_ensemble(configs, tmp_path / "root", checkpoint_every=0)
    torch.set_flush_denormal(False)
    said = [str(w.message) for w in caught if "vmap cannot trace" in str(w.message)]
    assert bool(said) is (not vectorized), said
    assert [r["vectorized"] for r in records] == [vectorized] * 2
    assert [r["vectorized"] for r in _records_on_disk(configs)] == [vectorized] * 2
    assert all(r["status"] == "completed" for r in records)


def test_out_of_memory_at_the_probe_is_raised_not_turned_into_the_loop(monkeypatch):
    from grok_lightning.ensembles.module import EnsembleModule

    def full_gpu(self, params, members, batches, eager=False):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(EnsembleModule, "_vmapped_losses", full_gpu)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        _stepper(2)
