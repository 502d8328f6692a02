"""Every sweep's paper profile against the paper's cohort table in docs/decisions.md, the cohorts'
structure (bins, seeds, sizes), one horizon per figure, and Fig. 10's common horizon."""

from __future__ import annotations

from collections import Counter

import pytest
from test_regimes import make_record

from conftest import REPO
from grok_lightning.config import ConfigError
from grok_lightning.sweep.grid import load_sweep, max_epochs_of
from reproduce.targets import fig10

SWEEPS = REPO / "configs" / "sweeps"
S0 = [7, 11, 31, 42, 73, 97, 123, 199, 401, 977]
S1 = [2, 3, 5, 17, 23, 29, 53, 67, 89, 103, 113, 137, 149, 167, 181, 197, 211, 229, 241, 263]


def cohort_table() -> dict[str, dict]:
    """The rows of docs/decisions.md's "Paper cohorts" table, by sweep file."""
    text = (REPO / "docs" / "decisions.md").read_text()
    section = text.split("## Paper cohorts (paper profiles)", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].endswith(".yaml"):
            # one horizon, or several ("400/600/1000") where the paper's cohort ran several
            rows[cells[0]] = {"cohort": cells[1], "paper_n": cells[2], "runs": int(cells[3]),
                              "horizons": {int(h) for h in cells[4].split("/")}}
    return rows


def paper_runs(name: str) -> list:
    return load_sweep(SWEEPS / name, profile="paper").expand()


def _paper_profiles() -> list[str]:
    names = []
    for path in sorted(SWEEPS.glob("*.yaml")):
        try:
            load_sweep(path, profile="paper")
        except ConfigError:  # no paper profile (betas, tiny_test)
            continue
        names.append(path.name)
    return names


def _wd(spec) -> float:
    return spec.config["model"]["init_args"]["weight_decay"]


def test_every_paper_profile_is_in_the_table_with_its_run_count_and_horizon():
    table = cohort_table()
    assert set(_paper_profiles()) == set(table), "docs/decisions.md 'Paper cohorts' must list every paper profile"
    for name, row in table.items():
        runs = paper_runs(name)
        assert len(runs) == row["runs"], name
        assert {max_epochs_of(r.config) for r in runs} == row["horizons"], name


def test_canonical_wd_is_the_papers_fig5_cohort():
    runs = paper_runs("canonical_wd.yaml")
    per_bin = Counter(_wd(r) for r in runs)
    bins = [0.001, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.3, 0.5, 0.7, 1.0, 2.0]
    assert {w: per_bin[w] for w in bins} == {w: 30 if w in (0.01, 0.1, 1.0) else 10 for w in bins}
    assert sum(per_bin[w] for w in bins) == 190 and per_bin[10.0] == 10 and len(per_bin) == 14
    for w in per_bin:
        seeds = sorted(r.config["seed_everything"] for r in runs if _wd(r) == w)
        assert seeds == sorted(S0 + (S1 if w in (0.01, 0.1, 1.0) else [])), w
    assert cohort_table()["canonical_wd.yaml"]["paper_n"] == "210"  # the text's N, documented as differing


def test_regime_map_is_e5_for_medium_and_large():
    runs = paper_runs("regime_map.yaml")
    cells = Counter((r.config["model"]["init_args"]["d_model"], _wd(r)) for r in runs)
    assert cells == {(d, w): 10 for d in (512, 768) for w in (0.01, 0.1, 1.0)}
    assert sorted({r.config["seed_everything"] for r in runs}) == sorted(S0)
    small = {(_wd(r), r.config["seed_everything"]) for r in paper_runs("canonical_wd.yaml")}
    assert {(w, s) for w in (0.01, 0.1, 1.0) for s in S0} <= small  # E5's small third


def test_lockin_relu_runs_past_relu_grokking():
    assert {max_epochs_of(r.config) for r in paper_runs("lockin_relu.yaml")} == {800}
    smoke = load_sweep(SWEEPS / "lockin_relu.yaml", profile="smoke").expand()
    assert min(max_epochs_of(r.config) for r in smoke) >= 600
    assert all(max(r.config["model"]["init_args"]["theorem6_epochs"]) <= 600 for r in smoke)


@pytest.mark.parametrize("profile", ["paper", "smoke"])
def test_cross_arch_has_one_horizon_per_profile(profile):
    assert len({max_epochs_of(r.config) for r in load_sweep(SWEEPS / "cross_arch.yaml", profile=profile).expand()}) == 1


def test_fig10_judges_every_architecture_at_the_shortest_horizon(tmp_path):
    probes = [make_record(wd, 7, grok_epoch=150 if wd >= 1 else None, horizon=200) for wd in (0.4, 1.0, 2.0)]
    for r in probes:
        r["config"]["model"] = dict(r["config"]["model"], arch="mlp", arch_kwargs={})
    # the transformer's 250-epoch runs: one groks at 230, after the probes' horizon
    transformer = [make_record(wd, 7, grok_epoch=e, horizon=250) for wd, e in ((0.4, 230), (1.0, 120), (2.0, 90))]
    summary = fig10.analyse(probes + transformer, "smoke", tmp_path)
    assert summary["horizon"] == 200 and summary["cut_to_horizon"]
    entry = next(e for e in summary["entries"] if e["label"].startswith("transformer"))
    assert entry["n_grok"] == 2  # the epoch-230 grok is past the common horizon
    late = fig10.truncate_to_horizon({**transformer[0], "status": "diverged", "diverged_epoch": 240}, 200)
    assert late["status"] == "completed" and late["grok_epoch"] is None and late["config"]["max_epochs"] == 200
    assert fig10.truncate_to_horizon(probes[0], 200) is probes[0]
