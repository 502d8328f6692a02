"""The initialisation calibration: the shipped measurements and the adopted default agree."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from conftest import REPO
from grok_lightning.metrics.functional import attention_statistics
from grok_lightning.models import build_model
from grok_lightning.modules.grokking import model_kwargs
from reproduce.pilots import init_calibration as ic

SHIPPED = REPO / "results" / "pilots" / "init_calibration"


def _s_bar(variant: dict, seed: int) -> float:
    tokens = ic.split(seed).x_test
    with torch.no_grad():
        _, attention = ic.build(variant, seed).eval()(tokens, return_attention=True)
    return float(attention_statistics(attention)["mean_similarity"])


def test_the_canonical_model_is_the_adopted_variant_and_starts_nearest_the_paper():
    model = yaml.safe_load((REPO / "configs" / "canonical.yaml").read_text())["model"]["init_args"]
    adopted = {k: model[k] for k in ic.VARIANT_KEYS}
    rows = {r["label"]: r for r in json.loads((SHIPPED / "init_s_bar.json").read_text())}
    shipped = rows[ic.variant_label(adopted)]
    assert _s_bar(adopted, 7) == pytest.approx(shipped["s_bar"][0], abs=1e-6)  # the shipped number is ours
    old = rows[ic.variant_label(dict(adopted, init="pytorch"))]
    assert abs(shipped["s_bar_mean"] - 0.93) < abs(old["s_bar_mean"] - 0.93)
    # GrokkingModule builds exactly that model from the config
    torch.manual_seed(7)
    built = build_model("transformer", vocab_size=98, n_classes=97, **model_kwargs(dict(model, arch="transformer")))
    for a, b in zip(built.state_dict().values(), ic.build(adopted, 7).state_dict().values()):
        assert torch.equal(a, b)


def test_report_recomputes_the_table_from_the_shipped_trajectories(tmp_path):
    ic.report(SHIPPED, tmp_path)
    rows = {r["variant"]: r for r in json.loads((tmp_path / "calibration.json").read_text())["rows"]}
    mha = rows["mha, 1/sqrt(d_head), pre-LN"]
    assert mha["t_grok"] == 140 and mha["s_bar_init"] == pytest.approx(0.955, abs=5e-4)
    assert rows["xavier, emb 0.02, 1/sqrt(d_head), pre-LN"]["sigma_H_max_after_100"] < 0.03
    assert (tmp_path / "init_calibration.png").stat().st_size > 10_000
