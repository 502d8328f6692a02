"""``run.compile``: the compiled training step trains the same run as the eager one, for a single
run and for an ensemble (CPU, inductor; the mode that matters on a GPU is ``reduce-overhead``)."""

from __future__ import annotations

import json

import pytest
import torch
from test_ensemble import assert_same_run, member_config, separate

from grok_lightning.config import ConfigError
from grok_lightning.ensembles import build_ensemble
from grok_lightning.sweep.grid import run_id_of

pytestmark = pytest.mark.slow  # inductor compiles C++ on first use: tens of seconds


def test_a_compiled_single_run_equals_the_eager_run(tmp_path):
    eager = separate(member_config(tmp_path, 7, 1.0, "eager", epochs=6))
    config = member_config(tmp_path, 7, 1.0, "compiled", epochs=6)
    config["run"]["compile"] = "default"
    compiled = separate(config)
    assert callable(getattr(compiled[0], "_training_loss", None))
    assert_same_run(eager[0], eager[1], compiled[0], compiled[1])


def test_a_compiled_ensemble_equals_the_eager_ensemble(tmp_path):
    def fit(tag, mode):
        configs = [member_config(tmp_path, s, 1.0, tag, epochs=6) for s in (7, 11)]
        for c in configs:
            c["run"]["compile"] = mode
        trainer, ensemble, loaders = build_ensemble(configs, tmp_path / f"{tag}_root", checkpoint_every=0)
        trainer.fit(ensemble, train_dataloaders=loaders)
        torch.set_flush_denormal(False)
        return ensemble

    eager, compiled = fit("eager", None), fit("compiled", "default")
    assert compiled.compile_mode == "default" and compiled._member_losses is not None and eager._member_losses is None
    for e, seed in enumerate((7, 11)):
        records = [json.loads((tmp_path / tag / "tiny" / f"s{seed}_wd1.0" / "record.json").read_text())
                   for tag in ("eager", "compiled")]
        assert_same_run(eager.members[e], records[0], compiled.members[e], records[1])


def test_compile_mode_is_checked_and_does_not_change_the_run_id(tmp_path):
    config = member_config(tmp_path, 7, 1.0, "bad", epochs=1)
    same = json.loads(json.dumps(config))
    same["run"]["compile"] = "default"
    assert run_id_of(config) == run_id_of(same)
    config["run"]["compile"] = "fastest"
    with pytest.raises(ConfigError, match="run.compile"):
        separate(config)
