"""Golden records: a short run and a two-member ensemble, compared value for value with records
made by an earlier version of the package (``tests/golden/*.json``). A restructuring of the code
must leave what a run records unchanged; the medium report's rows are guarded the same way by
``test_medium_report.py``.

Float columns are compared at float32 tolerance (these records are reproduced on other CPUs,
where float32 kernels may round differently); everything else exactly. Regenerate the files only
when a change of numbers is intended, and say so in the commit:

    python tests/test_golden.py --write
"""

from __future__ import annotations

import copy
import json
import math
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
REL, ABS = 1e-4, 1e-6
#: what depends on where and when a run ran, not on what it computed
VOLATILE = {"wall_time_s", "cpu_time_s", "environment", "name", "weight_checkpoint_dir"}


def _config(tmp: Path, **model) -> dict:
    sys.path.insert(0, str(HERE))
    try:
        from conftest import tiny_config
    finally:
        sys.path.pop(0)
    config = tiny_config(tmp, max_epochs=6, **model)
    config["diagnostics"].update(readings=True, readings_batch=64)
    config["run"]["checkpoint_every"] = 0
    return config


def single_run(tmp: Path) -> dict:
    from grok_lightning.run import run_config

    return run_config(_config(tmp))


def ensemble_run(tmp: Path) -> list[dict]:
    from grok_lightning.ensembles import run_ensemble

    configs = []
    for seed, wd in ((3, 0.5), (4, 2.0)):
        config = _config(tmp / f"s{seed}")
        config["seed_everything"] = seed
        config["model"]["init_args"]["weight_decay"] = wd
        config["diagnostics"]["readings"] = False
        config["run"]["run_id"] = f"golden_s{seed}"
        configs.append(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_ensemble(configs, root=tmp / "ensemble", checkpoint_every=0)


def _strip(record: dict) -> dict:
    record = {k: v for k, v in record.items() if k not in VOLATILE}
    config = dict(record.get("config") or {})
    for key in ("name", "run_id"):
        config.pop(key, None)
    record["config"] = config
    return record


def _compare(ours, golden, path: str = "") -> list[str]:
    if isinstance(golden, dict) and isinstance(ours, dict):
        keys = set(golden) | set(ours)
        return [d for k in sorted(keys) for d in _compare(ours.get(k, "<absent>"), golden.get(k, "<absent>"), f"{path}.{k}")]
    if isinstance(golden, list) and isinstance(ours, list):
        if len(golden) != len(ours):
            return [f"{path}: length {len(ours)} != {len(golden)}"]
        return [d for i, (a, b) in enumerate(zip(ours, golden)) for d in _compare(a, b, f"{path}[{i}]")]
    if isinstance(golden, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
        if math.isnan(golden) and math.isnan(ours):
            return []
        return [] if math.isclose(ours, golden, rel_tol=REL, abs_tol=ABS) else [f"{path}: {ours!r} != {golden!r}"]
    return [] if ours == golden else [f"{path}: {ours!r} != {golden!r}"]


@pytest.mark.slow
def test_a_short_run_records_what_it_recorded_before(tmp_path):
    golden = json.loads((GOLDEN / "run.json").read_text())
    differences = _compare(_strip(json.loads(json.dumps(single_run(tmp_path)))), golden)
    assert not differences, "\n".join(differences[:20])


@pytest.mark.slow
def test_an_ensemble_records_what_it_recorded_before(tmp_path):
    golden = json.loads((GOLDEN / "ensemble.json").read_text())
    ours = [_strip(json.loads(json.dumps(r))) for r in ensemble_run(tmp_path)]
    differences = _compare(ours, golden)
    assert not differences, "\n".join(differences[:20])


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = _strip(json.loads(json.dumps(single_run(Path(tmp) / "run"))))
        (GOLDEN / "run.json").write_text(json.dumps(run, indent=1))
        members = [_strip(json.loads(json.dumps(r))) for r in ensemble_run(Path(tmp) / "ens")]
        (GOLDEN / "ensemble.json").write_text(json.dumps(copy.deepcopy(members), indent=1))
    print(f"wrote {GOLDEN / 'run.json'} and {GOLDEN / 'ensemble.json'}")
