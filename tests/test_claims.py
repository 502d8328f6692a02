"""The claims table (reference/claims.csv): every paper value has a source and agrees with it, every
compared claim has a family and a substantive Delta, a bad value is one clear error line, and a row
never carries a paper value of its own."""

from __future__ import annotations

import csv
import json
import math
import shutil

import pytest

from grok_lightning.stats.intervals import wilson
from reproduce.report.claims import CLAIMS, COMPARED, KINDS, ClaimsError, claim, load_claims
from reproduce.report.rows import Row, claim_row, row
from reproduce.report.sources import check_sources


def test_every_claim_agrees_with_the_source_it_cites():
    assert check_sources() == []


def test_both_papers_are_in_the_table():
    papers = [c.paper for c in load_claims().values()]
    assert papers.count("2605.20441") >= 42 and papers.count("2605.08119") >= 14


@pytest.mark.parametrize("claim_id", sorted(load_claims()))
def test_a_claim_says_how_it_is_scored(claim_id):
    c = claim(claim_id)
    assert c.kind in KINDS and c.source.strip() and c.statistic.strip() and c.target.strip()
    if c.kind in COMPARED:
        assert c.margin is not None and c.margin >= 0 and c.margin_why.strip() and c.margin_from, "a margin and its reason"
        assert c.family and c.delta and c.delta_why, "a family, its Delta and why"
    if c.target == "-":
        assert c.needs not in ("", "-"), "a claim nothing here scores says what it would need"
    if "read off" in c.source:
        assert "reading error" in c.source
    assert c.reading in ("-", "released", "max_layer", "pooled", "sum_layers")


def test_one_delta_per_family_and_never_the_papers_half_width():
    by_family = {}
    for c in load_claims().values():
        if c.family:
            by_family.setdefault(c.family, set()).add((c.delta, c.factor, c.delta_why))
            if c.margin_from == "sampling" and not c.factor:  # Delta says what matters, not how precise the paper is
                assert not math.isclose(c.delta, c.margin, rel_tol=1e-3), c.id
    assert all(len(v) == 1 for v in by_family.values())
    assert claim("wd.lambda_c").tolerance == "x1.5" and claim("lock.fire_grok").tolerance == "0.2"


@pytest.mark.parametrize("claim_id", [c.id for c in load_claims().values() if "Wilson 95% interval of" in c.margin_why
                                      and c.count])
def test_a_wilson_margin_is_rounded_outward(claim_id):
    c = claim(claim_id)
    interval = wilson(*c.count)
    larger = max(c.value - (0.0 if c.count[0] == 0 else interval.lo), (1.0 if c.count[0] == c.count[1] else interval.hi)
                 - c.value)
    assert c.margin >= larger - 1e-12, (c.margin, larger)


def _edited(tmp_path, claim_id: str, column: str, value: str | None, truncate: bool = False):
    path = tmp_path / "claims.csv"
    shutil.copy(CLAIMS, path)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for r in rows:
        if r["id"] == claim_id:
            r[column] = value
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    if truncate:  # cut the claim's line after its first five fields
        lines = path.read_text().splitlines()
        i = next(i for i, line in enumerate(lines) if line.startswith(claim_id + ","))
        lines[i] = ",".join(lines[i].split(",")[:5])
        path.write_text("\n".join(lines) + "\n")
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


@pytest.mark.parametrize("column, wrong", [
    ("margin", "-0.1"), ("margin", "inf"), ("margin", "nan"), ("margin", "wide"), ("value", "abc"), ("n", "3.5"),
    ("delta", "x0.9"), ("delta", "-1"), ("delta", "inf"), ("delta", ""), ("kind", "guess"), ("margin_from", "vibes"),
    ("ci", "[0.02, 0.01]"), ("headline", "maybe"),
])
def test_a_bad_value_is_one_line_naming_file_claim_and_field(tmp_path, column, wrong):
    with pytest.raises(ClaimsError) as err:
        _edited(tmp_path, "wd.lambda_c", column, wrong)
    message = str(err.value)
    assert "\n" not in message and "claims.csv" in message and "'wd.lambda_c'" in message and repr(column) in message


def test_a_bad_count_or_a_truncated_row_is_one_line(tmp_path):
    for value in ("2/0", "3/2"):
        with pytest.raises(ClaimsError, match=r"claims.csv: claim 'wd.bin_0.01', field 'value'"):
            _edited(tmp_path, "wd.bin_0.01", "value", value)
    with pytest.raises(ClaimsError, match=r"claim 'wd.bin_0.01', field 'n'"):
        _edited(tmp_path, "wd.bin_0.01", "n", "31")  # the count says 30
    with pytest.raises(ClaimsError, match=r"claim 'wd.bin_0.01' \(line \d+\): \d fields where the header has 22"):
        _edited(tmp_path, "wd.bin_0.01", "n", "30", truncate=True)
    with pytest.raises(ClaimsError, match=r"claim 'wd.bin_0.02', field 'delta'.*family 'grok fraction'"):
        _edited(tmp_path, "wd.bin_0.02", "delta", "0.3")


def test_a_row_carries_no_paper_value_and_names_a_real_claim():
    r = claim_row("wd.lambda_c", "lambda_c", 0.02, "medium", 20, ours_ci=[0.014, 0.055])
    assert r["claim"] == "wd.lambda_c" and not {"paper_value", "paper_ci", "margin", "kind"} & set(r)
    with pytest.raises(KeyError, match="claims.csv"):
        claim_row("wd.lamda_c", "a typo", 0.02, "medium", 20)
    with pytest.raises(KeyError, match="claims.csv"):
        Row("q", 0.5, "medium", 3, claim="no.such.claim")
    with pytest.raises(ValueError, match="comes from reference/claims.csv"):
        row("2605.20441 Fig. 5", "a context row with a typed paper value", 0.0158, 0.02, "medium", 20)
    with pytest.raises(ValueError, match="unknown field"):
        Row.from_dict({**r, "paper_value": 0.0158})


def _shipped_rows():
    from conftest import REPO

    for path in sorted((REPO / "results" / "medium").glob("*/rows.json")):
        for r in json.loads(path.read_text()):
            yield path.parent.name, r


def test_every_shipped_row_is_a_typed_row_of_a_real_claim_or_context():
    for target, r in _shipped_rows():
        typed = Row.from_dict(r)  # unknown fields and bad values raise
        assert not typed.claim or typed.claim in load_claims(), (target, typed.quantity)
