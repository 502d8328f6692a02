"""`make report PROFILE=medium`: every number of results/medium/REPORT.md is recomputed from the
shipped run records, without training, and follows them when they change."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from conftest import REPO

MEDIUM = REPO / "results" / "medium"


def _table(report_text: str) -> list[str]:
    # float64 round-off (the C1 identity's residual, ~1e-16) differs between machines and BLAS builds
    roundoff = re.compile(r"\b\d(\.\d+)?e-(1[3-9]|[2-9]\d)\b")
    return [roundoff.sub("~0", line) for line in report_text.splitlines()
            if line.startswith("| ") and "wall s" not in line]


def _rows(path) -> dict:
    return {r["quantity"]: r for r in json.loads(path.read_text())}


@pytest.fixture
def shipped(tmp_path):
    """results/medium as committed (``git archive HEAD``): what a fresh clone has, without the
    untracked checkpoints, weights and logs of the machine that trained it."""
    import subprocess
    import tarfile

    assert (MEDIUM / "REPORT.md").is_file(), "results/medium/REPORT.md is shipped with the repository"
    archive = tmp_path / "medium.tar"
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), "HEAD",
                           "results/medium"], capture_output=True, text=True)
    if done.returncode != 0:  # not a git checkout (an sdist): the folder is all there is
        shutil.copytree(MEDIUM, tmp_path / "results" / "medium")
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path, filter="data")
    return tmp_path / "results" / "medium"


@pytest.mark.slow
def test_report_regenerates_from_the_shipped_records_without_training(shipped):
    from reproduce.targets import all as reproduce_all

    before = set(p for p in shipped.rglob("record.json"))
    # how long this takes is measured, not asserted (README, "Measured"): a loaded machine is slower
    report = reproduce_all.main(["--profile", "medium", "--out", str(shipped), "--no-train"])
    assert set(p for p in shipped.rglob("record.json")) == before  # nothing trained, nothing added
    assert _table(report.read_text()) == _table((MEDIUM / "REPORT.md").read_text())


def test_a_changed_record_changes_its_number(shipped):
    from reproduce.targets import fig2

    fig2.main(["--profile", "medium", "--out", str(shipped), "--no-train"])
    rows = _rows(shipped / "fig2" / "rows.json")
    key = next(q for q in rows if q.startswith("t_grok"))
    assert rows[key]["ours"] == _rows(MEDIUM / "fig2" / "rows.json")[key]["ours"]
    records = sorted((shipped / "fig2" / "sweep" / "runs").glob("*/record.json"))
    for path in records:  # every seed grokked 1,000 epochs later: the median follows
        record = json.loads(path.read_text())
        record["grok_epoch"] = record["grok_epoch"] + 1000
        path.write_text(json.dumps(record))
    fig2.main(["--profile", "medium", "--out", str(shipped), "--no-train"])
    assert _rows(shipped / "fig2" / "rows.json")[key]["ours"] == rows[key]["ours"] + 1000


def test_a_pass_without_records_names_every_missing_target_and_trains_nothing(tmp_path):
    from reproduce.targets import all as reproduce_all
    from reproduce.targets.registry import order

    report = reproduce_all.main(["--profile", "medium", "--out", str(tmp_path), "--no-train"]).read_text()
    missing = report.split("## In this profile, but without (all) records yet", 1)[1].split("## Not in this profile")[0]
    for name in order("medium"):
        assert f"| {name} | " in missing
    assert not list(tmp_path.rglob("record.json"))


def test_a_target_with_runs_missing_is_reported_as_partial(tmp_path):
    from reproduce.targets import all as reproduce_all

    shutil.copytree(MEDIUM / "fig2", tmp_path / "fig2")
    records = sorted((tmp_path / "fig2" / "sweep" / "runs").glob("*/record.json"))
    records[0].unlink()
    report = reproduce_all.main(["--profile", "medium", "--out", str(tmp_path), "--no-train", "--targets", "fig2"])
    assert f"| fig2 | partial: fig2.yaml (medium): 1 of {len(records)} runs missing |" in report.read_text()
    assert f"| {len(records) - 1} |" in report.read_text()  # the rows stand on the runs present


def test_lockin_reports_the_parts_that_have_records(tmp_path):
    """Only the main lock-in sweep shipped: main and window report from it; activation and eta,
    whose sweeps have no records, are listed as missing instead of dropping every lock-in row."""
    from reproduce.targets import all as reproduce_all

    store = tmp_path / "lockin" / "lockin_main"
    shutil.copytree(MEDIUM / "lockin" / "lockin_main", store)
    report = reproduce_all.main(["--profile", "medium", "--out", str(tmp_path), "--no-train", "--targets", "lockin"])
    targets = {r["part"] for r in json.loads((tmp_path / "lockin" / "rows.json").read_text())}
    assert targets == {"main", "window"}
    text = report.read_text()
    assert "| lockin | partial: " in text and "lockin_relu.yaml (medium): 30 of 30 runs missing" in text
    assert not list((tmp_path / "lockin").glob("lockin_relu/**/record.json"))  # nothing trained


def test_the_report_leads_with_the_verdicts_of_every_claim():
    from reproduce.report import VERDICTS, load_claims

    text = (MEDIUM / "REPORT.md").read_text()
    head = text.split("## Every claim", 1)[0]
    counts = re.search(r"\*\*(\d+) claims of the two papers: (.*)\.\*\*", head)
    assert counts and int(counts[1]) == len(load_claims())
    numbers = {part.split(" ", 1)[1]: int(part.split(" ", 1)[0]) for part in counts[2].split("; ")}
    assert set(numbers) <= set(VERDICTS) and sum(numbers.values()) == len(load_claims())
    table = text.split("## Every claim", 1)[1].split("## Every row", 1)[0]
    assert sum(line.startswith("| ") for line in table.splitlines()) == len(load_claims()) + 1


def test_the_systems_medium_does_not_train_state_their_measured_cost():
    """fig9 is left out of medium with the CPU-hours its paper protocol was measured to need
    (results/pilots/costs/costs.json), computed, never typed; rllc, which trains nothing, is in."""
    from reproduce.targets.costs import load_costs, medium_left_out

    costs = load_costs()
    reasons = medium_left_out()
    assert "fig9" in reasons and not {"fig1", "fig10", "rllc"} & set(reasons)
    for target, system in (("fig9", "fig9_small"), ("fig9", "fig9_medium")):
        assert f"{costs[system]['paper_protocol_cpu_h']:,.0f} CPU-h measured" in reasons[target]
