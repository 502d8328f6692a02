"""README.md and docs/*.md: every number that comes from a record, a fit, the claims table or a
measurement is a generated block, current with its data; no number outside the blocks looks like
a result (reproduce.report.numbers); the README is a newcomer's first page."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from conftest import REPO
from reproduce.report import blocks, prose
from reproduce.report.numbers import ALLOWED, result_like, scan


@pytest.fixture(scope="module")
def facts():
    return blocks.Facts()


def test_every_generated_block_is_current(facts):
    """A record, claim or measurement that changed without `make report PROFILE=medium` fails here."""
    assert prose.stale(facts=facts) == []


def test_every_marker_in_the_docs_is_a_block_with_a_renderer_or_a_command():
    """Markers cannot hide hand-typed numbers from the rule: each names a registered block."""
    registered = {(b.path, b.name) for b in prose.BLOCKS} | set(prose.OWN_COMMAND)
    assert prose.found_markers() == registered


def test_no_number_outside_the_generated_blocks_looks_like_a_result():
    hits = scan()
    assert hits == {}, "\n".join(f"{path}: {hit}" for path, found in hits.items() for hit in found)


@pytest.mark.parametrize("text", [
    "lambda_c 0.0244, consistent", "[0.310, 0.412]", "grokked in 15/15 runs", "+4.1% over a plain loop",
    "it took 12 min on 2 cores", "435 CPU-h measured", "1.1 CPU-s/epoch", "peak RSS 1.72 GB", "x0.87 of the loop",
    "between 0.82-0.87",
])
def test_a_result_is_flagged(text):
    assert result_like(text), text


@pytest.mark.parametrize("text", [
    "p = 97, lr 1e-3, weight decay 0.05", "arXiv 2605.20441 and 2605.08119v2", "Python 3.10+, torch 2.13.0",
    "a range of [0, 1] or [-1, 1]", "the 95% interval and the 90% one", "seeds 7, 11, 31 at 10,000 epochs",
    "`0.361 [0.310, 0.412]` in code", "```\n0.361 [0.310, 0.412]\n```", "[REPORT](results/medium/REPORT.md#0.0158)",
    "<!-- x:begin -->0.361 and 15/15<!-- x:end -->", "x1.5 for lambda_c, 0.2 for a fraction", "lambda 0.015 and 0.05",
    "the grok threshold 0.99 and betas 0.999",
])
def test_the_protocol_code_and_generated_blocks_pass(text):
    assert result_like(text) == [], text


def test_every_allowed_number_says_why():
    assert ALLOWED and all(why.strip() for why in ALLOWED.values())


def test_a_stale_block_is_found_and_rewritten(tmp_path, facts):
    for path in ["README.md", *(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    readme.write_text(text.split(begin)[0] + begin + "\nhand-edited 0.999\n" + end + text.split(end)[1])
    assert prose.stale(tmp_path, facts) == ["README.md: block results is stale: run make report PROFILE=medium"]
    assert prose.write_all(tmp_path, facts) == ["README.md (results)"]
    assert readme.read_text() == text and prose.stale(tmp_path, facts) == []


def test_a_block_without_its_markers_is_named(tmp_path, facts):
    for path in ["README.md", *(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("<!-- commands:begin -->", ""))
    assert any("no block commands" in p for p in prose.stale(tmp_path, facts))
    with pytest.raises(SystemExit, match="no block commands"):
        prose.write_all(tmp_path, facts)


def test_the_readme_is_a_first_page():
    """At most 12 KB, Quick start on the first screen, the two commands CI and a new user need with
    what they produce and their measured time, and the headline claims of the claims table."""
    text = (REPO / "README.md").read_text()
    assert len(text.encode()) <= 12 * 1024
    lines = text.splitlines()
    assert lines.index("## Quick start") < 60
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for command in ("make test", "make reproduce-all", "make report PROFILE=medium", "make demo", "make tensorboard",
                    "make plan PROFILE=medium", "pip install torch --index-url https://download.pytorch.org/whl/cpu"):
        assert command in quick, command
    assert "| `make test` |" in quick and "| `make reproduce-all` |" in quick  # their measured times
    headline = [c for c in __import__("reproduce.report.claims", fromlist=["x"]).load_claims().values() if c.headline]
    assert 10 <= len(headline) <= 15
    assert all(c.claim.replace("|", "\\|") in text for c in headline)


def test_the_docs_index_lists_every_doc():
    index = (REPO / "docs" / "README.md").read_text()
    for doc in sorted((REPO / "docs").glob("*.md")):
        if doc.name != "README.md":
            assert f"]({doc.name})" in index, doc.name


def test_measure_reads_pytests_tally():
    spec = importlib.util.spec_from_file_location("measure", REPO / "benchmarks" / "measure.py")
    measure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure)
    assert measure.pytest_tally("== 1013 passed, 9 skipped in 685.10s (0:11:25) ==") == \
        {"passed": 1013, "skipped": 9, "pytest_s": 685.1}
    assert measure.pytest_tally("== 2 failed, 5 passed in 3.00s ==") == {"failed": 2, "passed": 5, "pytest_s": 3.0}
    assert measure.pytest_tally("no tally") == {}
