"""The a7 contrasts' runs (configs/sweeps/a7_contrasts.yaml): the campaigns that train them, each
run Fig. 4's 8-head config with one factor and the seed changed, and the a7 rows reading them
beside Fig. 4's runs (synthetic records in stores laid out as the sweep runner leaves them)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import read_reference
from grok_lightning.records import new_record
from grok_lightning.stats import cohens_d
from grok_lightning.sweep.grid import get_dotted, load_sweep, max_epochs_of, run_id_of
from reproduce.plan.catalogue import load_catalogue
from reproduce.report import verdict
from reproduce.targets import fig4
from reproduce.targets.a7 import CONTRAST_SWEEP, CONTRASTS, a7_rows, contrast_records, unique_runs
from reproduce.targets.common import SWEEPS, read_planned

STORE = "results/medium/fig4/a7/sweep"
#: claim -> the dotted config key of its factor and the factor's level in Fig. 4's runs
FACTOR_KEYS = {"a7.add_vs_mul": "data.init_args.operation", "a7.lnpre_vs_lnpost": "model.init_args.norm_position",
               "a7.dmodel_high_vs_low": "model.init_args.d_model", "a7.depth_deep_vs_shallow": "model.init_args.n_layers"}
CANONICAL = {"data.init_args.operation": "add", "model.init_args.norm_position": "pre", "model.init_args.d_model": 128,
             "model.init_args.n_layers": 4}
#: claim -> its key in reference/a7_cohens_d.json
REFERENCE = {"a7.add_vs_mul": "add_vs_mul_amplitude", "a7.lnpre_vs_lnpost": "lnpre_vs_lnpost_amplitude",
             "a7.dmodel_high_vs_low": "dmodel_high_vs_low_amplitude",
             "a7.depth_deep_vs_shallow": "depth_deep_vs_shallow_amplitude"}


def _runs(profile: str):
    return load_sweep(SWEEPS / CONTRAST_SWEEP, profile=profile).expand()


def _fig4_cell() -> dict:
    """Fig. 4's medium runs at 8 heads with real labels, by seed."""
    return {spec.config["seed_everything"]: spec for spec in load_sweep(SWEEPS / "head_width.yaml", "medium").expand()
            if spec.config["model"]["init_args"]["n_heads"] == 8 and not spec.config["data"]["init_args"]["random_labels"]}


def _flat(config: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_each_a7_campaign_trains_its_profile_into_the_store_fig4_reads():
    campaigns = load_catalogue("medium").campaigns
    for claim_id, (_, _, _, profile) in CONTRASTS.items():
        c = campaigns[f"a7_{profile}"]
        assert c.runnable and c.by_sweep and not c.add and c.adopted
        assert (c.sweep, c.profile, c.store) == (CONTRAST_SWEEP, profile, STORE)
        assert c.run_command("medium") == f"python -m reproduce.plan run a7_{profile} --profile medium"
        side = read_reference("a7_cohens_d.json")[REFERENCE[claim_id]]
        assert c.feeds == {claim_id: side["n_a"] + side["n_b"]}
        assert {max_epochs_of(r.config) for r in c.runs()} == {3000}
    assert Path(fig4.__file__).read_text().count('out / "a7" / "sweep"') == 1  # the store the target reads


def test_every_a7_run_is_fig4s_8_head_config_with_one_factor_and_the_seed_changed():
    cell = _fig4_cell()
    assert sorted(cell) == [7, 11, 31]
    reference = _flat(cell[7].config)
    for spec in _runs("medium"):
        config = _flat(spec.config)
        changed = {k for k in set(config) | set(reference) if config.get(k, "absent") != reference.get(k, "absent")}
        assert changed <= {"seed_everything", *CANONICAL}, (spec.name, changed)
        assert len(changed - {"seed_everything"}) <= 1, (spec.name, changed)
        # back at the canonical level and seed 7, it is Fig. 4's run, id for id
        canonical = copy.deepcopy(spec.config)
        for key, level in CANONICAL.items():
            section, _, name = key.split(".")
            canonical[section]["init_args"][name] = level
        canonical["seed_everything"] = 7
        assert run_id_of(canonical) == cell[7].run_id, spec.name


@pytest.mark.parametrize("claim_id", list(CONTRASTS))
def test_each_contrast_has_the_authors_side_sizes_with_fig4s_runs(claim_id):
    """Fig. 4's 3 runs plus the profile's give each level the author's n (group a, then b)."""
    _, _, levels, profile = CONTRASTS[claim_id]
    key = FACTOR_KEYS[claim_id]
    sides: dict = {}
    for spec in _runs(profile):
        sides.setdefault(get_dotted(spec.config, key), []).append(spec.config["seed_everything"])
    sides.setdefault(CANONICAL[key], []).extend(_fig4_cell())
    assert len(sides) == 2 and all(len(set(seeds)) == len(seeds) for seeds in sides.values())
    a, b = levels if levels is not None else sorted(sides, reverse=True)
    side = read_reference("a7_cohens_d.json")[REFERENCE[claim_id]]
    assert (len(sides[a]), len(sides[b])) == (side["n_a"], side["n_b"])


def test_the_medium_profile_is_the_union_of_the_contrasts_and_a_shared_run_has_one_folder():
    union: dict = {}
    for _, _, _, profile in CONTRASTS.values():
        for spec in _runs(profile):
            assert union.setdefault(spec.run_id, spec.name) == spec.name  # the same folder in every profile
    assert {spec.run_id: spec.name for spec in _runs("medium")} == union
    assert len(union) < sum(len(_runs(p)) for *_, p in CONTRASTS.values())  # canonical runs two contrasts share


def _record(spec, shape) -> dict:
    """A completed record of the planned run ``spec`` whose sigma_H follows ``shape(epoch)``, its
    config as the recorder writes it."""
    c = spec.config
    model, data = c["model"], c["data"]
    config = {"wd": model["init_args"]["weight_decay"], "seed": c["seed_everything"], "max_epochs": max_epochs_of(c),
              "precision": c["trainer"]["precision"], "profile": "medium",
              "model": {"class_path": model["class_path"], **model["init_args"]},
              "data": {"class_path": data["class_path"], **data["init_args"]}}
    record = new_record(config, run_id=spec.run_id, name=spec.name)
    epochs = list(range(0, 3001, 10))
    record.update(status="completed", final_epoch=3000, history={
        "epoch": epochs, "entropy_std": [shape(e) for e in epochs], "mean_similarity": [0.9] * len(epochs)})
    return record


def _bump(peak: float):
    """sigma_H 0.03 with a Phase-2 peak of ``peak`` at epochs 1,000-1,200."""
    return lambda e: 0.03 + (peak if 1000 <= e <= 1200 else 0.0)


def _write(store: Path, spec, peak: float) -> None:
    path = store / "runs" / spec.name / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_record(spec, _bump(peak))))


def test_a7_reads_fig4s_runs_and_the_contrast_store_and_pairs_them(tmp_path):
    fig4_store, a7_store = tmp_path / "fig4" / "sweep", tmp_path / "fig4" / "a7" / "sweep"
    fig4_specs = load_sweep(SWEEPS / "head_width.yaml", "medium").expand()
    pre = {7: 0.10, 11: 0.12, 31: 0.11}
    for spec in fig4_specs:
        seed, init = spec.config["seed_everything"], spec.config["model"]["init_args"]
        real_8 = init["n_heads"] == 8 and not spec.config["data"]["init_args"]["random_labels"]
        _write(fig4_store, spec, pre[seed] if real_8 else 0.3)
    post = {spec.config["seed_everything"]: spec for spec in _runs("post_ln")}
    for seed, spec in post.items():
        _write(a7_store, spec, pre[seed] - 0.05 - 0.001 * seed)
    fig4_records = read_planned(fig4_store, fig4_specs)
    contrasts = contrast_records("medium", a7_store)
    assert len(contrasts) == 3 and contrast_records("smoke", a7_store) == []
    assert contrast_records("medium", tmp_path / "fresh clone") == []  # no store yet: nothing, no error
    duplicated = fig4_records + contrasts + contrasts[:1]  # a run held twice counts once
    rows = {r["claim"]: r for r in a7_rows(unique_runs(duplicated), "medium", "Fig. 4 and a7_contrasts.yaml")}
    ln = rows["a7.lnpre_vs_lnpost"]
    expected = cohens_d([pre[s] for s in (7, 11, 31)], [pre[s] - 0.05 - 0.001 * s for s in (7, 11, 31)])
    assert ln["n"] == 6 and ln["ours"] == pytest.approx(expected) and "pre (3) vs post (3)" in ln["note"]
    assert ln["horizon"] == 3000
    mul = verdict(rows["a7.add_vs_mul"])
    assert mul.startswith("not run here (no two groups of the runs of Fig. 4 and a7_contrasts.yaml differ in the "
                          "operation alone: needs mod mul runs at the Fig. 4 width")
    assert "python -m reproduce.plan run a7_add_vs_mul --profile medium trains them" in mul


def test_fig4_pools_the_contrast_runs_for_a7_only_never_into_its_fit(tmp_path):
    cell = _fig4_cell()
    fig4_records = [_record(cell[s], _bump(0.10 + 0.01 * i)) for i, s in enumerate((7, 11, 31))]
    contrasts = [_record(spec, _bump(0.05 + 0.01 * i)) for i, spec in enumerate(_runs("post_ln"))]
    summary = fig4.analyse(fig4_records, "medium", tmp_path, n_permutations=200, contrasts=contrasts)
    assert len(summary["runs"]) == 3 and summary["dh"] == [16.0, 16.0, 16.0]  # Fig. 4's runs alone
    rows = {r["claim"]: r for r in json.loads((tmp_path / "rows.json").read_text()) if r["claim"].startswith("a7.")}
    ln = rows["a7.lnpre_vs_lnpost"]
    assert ln["n"] == 6 and ln["ours"] == pytest.approx(cohens_d([0.13, 0.14, 0.15], [0.08, 0.09, 0.10]))
    assert ln["note"].startswith("runs of Fig. 4 and a7_contrasts.yaml, pre (3) vs post (3)")
