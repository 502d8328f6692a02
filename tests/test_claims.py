"""The claims table (reference/claims.csv): every paper value has a source and agrees with it, every
comparable claim carries a margin with its reason, and a wrong value in the table is caught."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from reproduce.claims import CLAIMS, KINDS, check_sources, claim, claim_row, load_claims


def test_every_claim_agrees_with_the_source_it_cites():
    assert check_sources() == []


def test_both_papers_are_in_the_table():
    papers = [c.paper for c in load_claims().values()]
    assert papers.count("2605.20441") >= 42 and papers.count("2605.08119") >= 14


@pytest.mark.parametrize("claim_id", sorted(load_claims()))
def test_a_claim_says_how_it_is_scored(claim_id):
    c = claim(claim_id)
    assert c.kind in KINDS and c.source.strip() and c.statistic.strip() and c.target.strip()
    if c.kind not in ("named", "excludes"):
        assert c.margin is not None and c.margin >= 0 and c.margin_why.strip(), "a margin and its reason"
    if c.target == "-":
        assert c.needs not in ("", "-"), "a claim nothing here scores says what it would need"
    if "read off" in c.source:
        assert "reading error" in c.source
    assert c.reading in ("-", "released", "max_layer", "pooled", "sum_layers")


def _edited(tmp_path, claim_id: str, column: str, value: str):
    path = tmp_path / "claims.csv"
    shutil.copy(CLAIMS, path)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["id"] == claim_id:
            row[column] = value
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return load_claims(path)


@pytest.mark.parametrize("claim_id, column, wrong", [
    ("fig10.mamba_4L_d128_mod_add", "ci", "[0.0106, 0.0159]"),  # the provenance map's 0.015954 prints 0.0160
    ("wd.t_grok_1", "value", "125"),  # the published sample's median is 130
    ("e12.A_peak.0.05", "value", "0.2817"),  # 0.2817 is the mean over both lambdas
    ("fig4.perm_p", "n", "59"),  # 12 real + 15 null runs
    ("fig2.s_bar_dip", "value", "0.88"),  # the median curve's minimum reads 0.92
    ("wd.bin_0.02", "value", "9/10"),
    ("fig4.d", "source", ""),
])
def test_a_wrong_paper_value_is_caught(tmp_path, claim_id, column, wrong):
    problems = check_sources(_edited(tmp_path, claim_id, column, wrong))
    assert problems and all(p.startswith(claim_id) for p in problems)


def test_a_row_takes_its_paper_value_from_the_table():
    r = claim_row("wd.lambda_c", "lambda_c", 0.02, "medium", 20, ours_ci=[0.014, 0.055])
    c = claim("wd.lambda_c")
    assert (r["paper_value"], r["paper_ci"], r["margin"], r["claim"]) == (c.value, list(c.ci), c.margin, "wd.lambda_c")
    with pytest.raises(KeyError, match="claims.csv"):
        claim("no.such.claim")


def _shipped_rows():
    from conftest import REPO

    for path in sorted((REPO / "results" / "medium").glob("*/rows.json")):
        for r in json.loads(path.read_text()):
            yield path.parent.name, r


def test_every_paper_value_of_the_shipped_report_is_a_claims_value():
    """A report row shows a paper value only through its claim: no value without a source, none
    that differs from the table (whose values test_every_claim_agrees_with_the_source_it_cites
    checks against the files they cite)."""
    unsourced, differing = [], []
    for target, r in _shipped_rows():
        if r["paper_value"] is None:
            continue
        if not r.get("claim"):
            unsourced.append(f"{target}: {r['quantity']}")
            continue
        c = claim(r["claim"])
        expected = c.text if c.kind == "named" else c.value
        if r["paper_value"] != expected or (r.get("paper_ci") or None) != (list(c.ci) if c.ci else None):
            differing.append(f"{target}: {r['quantity']}: {r['paper_value']} vs {expected}")
    assert unsourced == [] and differing == []


def test_no_match_has_an_interval_wider_than_its_margin():
    from reproduce.verdict import verdict

    for target, r in _shipped_rows():
        if verdict(r).startswith("matches the paper in number") and r.get("ours_ci"):
            lo, hi = r["ours_ci"]
            assert r["paper_value"] - r["margin"] <= lo and hi <= r["paper_value"] + r["margin"], (target, r["quantity"])


def test_the_claim_counts_written_in_the_docs_are_the_tables():
    from collections import Counter

    from conftest import REPO

    counts = Counter(c.paper for c in load_claims().values())
    written = f"{counts['2605.20441']} of 2605.20441, {counts['2605.08119']} of 2605.08119"
    assert written in (REPO / "README.md").read_text()
    assert written in " ".join((REPO / "docs" / "decisions.md").read_text().split())


@pytest.mark.parametrize("ci, level, test_p, expected", [
    ([130, 140], 0.75, None, "inconclusive: too few runs"),  # inside the margin, but a 75% interval
    ([150, 160], 0.75, None, "inconclusive: too few runs"),  # outside it, same
    ([130, 140], 0.9375, None, "matches the paper in number"),  # 5 runs' range
    ([150, 160], 0.9375, None, "not reproduced"),
    ([150, 160], 0.75, 0.01, "not reproduced"),  # a test against the paper's sample decides at its own level
])
def test_an_interval_under_90_percent_coverage_decides_nothing(ci, level, test_p, expected):
    from reproduce.report import row
    from reproduce.verdict import verdict, verdict_class

    r = {**row("p", "q", 130, sum(ci) / 2, "medium", 3, ours_ci=ci, ci_level=level, test_p=test_p, test_name="Mann-Whitney"),
         "claim": "x", "kind": "estimate", "margin": 10, "paper_n": 8}
    assert verdict_class(verdict(r)) == expected


@pytest.mark.parametrize("ours, margin_from, replay, expected", [
    (0.26, "precision", "", "inconclusive: too few runs"),  # a gap of 0.22, but seeds may differ that much
    (0.48, "precision", "", "inconclusive: too few runs"),  # agreement at one run proves nothing either
    (0.26, "precision", "the paper's own run repeated", "not reproduced"),
    (0.481, "precision", "the paper's own run repeated", "matches the paper in number"),
    (0.26, "seed spread", "", "not reproduced"),  # outside the paper's run-to-run spread
    (0.47, "seed spread", "", "matches the paper in number"),
])
def test_one_run_against_one_run_decides_only_with_a_spread_or_a_replay(ours, margin_from, replay, expected):
    from reproduce.report import row
    from reproduce.verdict import verdict, verdict_class

    r = {**row("p", "q", 0.48, ours, "medium", 1, replay=replay), "claim": "x", "kind": "estimate",
         "margin": 0.005 if margin_from == "precision" else 0.02, "margin_from": margin_from, "paper_n": 1}
    assert verdict_class(verdict(r)) == expected


def test_a_one_run_claim_says_what_its_margin_measures(tmp_path):
    assert claim("fig6.pr_norm_100").margin_from == "precision"
    assert claim("lock.relu_sign_100").margin_from == "seed spread"
    assert claim("wd.lambda_c").margin_from == ""
    with pytest.raises(ValueError, match="fig6.pr_norm_100.*margin_from"):
        _edited(tmp_path, "fig6.pr_norm_100", "margin_from", "")
    with pytest.raises(ValueError, match="wd.lambda_c.*margin_from"):
        _edited(tmp_path, "wd.lambda_c", "margin_from", "precision")
