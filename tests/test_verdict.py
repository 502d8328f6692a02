"""The verdict rule (reproduce.report.verdict): two steps on D = ours - paper with both sides'
uncertainty, one vocabulary, inconclusive only where our side has no interval of the coverage a
verdict needs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reproduce.report.claims import claim
from reproduce.report.rows import Row
from reproduce.report.verdict import VERDICTS, Word, judge, verdict, verdict_class


def _row(claim_id, ours, n, **fields) -> Row:
    return Row("simulated", ours, "medium", n, claim=claim_id, **fields)


def test_consistent_and_equivalent_are_distinct_words():
    assert "consistent with the paper" in VERDICTS and "equivalent within Delta" in VERDICTS
    assert not any(w.startswith("matches") for w in VERDICTS)
    assert verdict_class("equivalent within Delta: D = ...") == "equivalent within Delta"


@pytest.mark.parametrize("ci, word, qualifier", [
    ((0.0140, 0.0180), Word.EQUIVALENT, ""),  # D's 90% interval inside x1.5 with the paper's own interval
    ((0.0120, 0.0400), Word.CONSISTENT, ""),  # contains 1, reaches past x1.5
    ((0.0300, 0.0500), Word.NOT_REPRODUCED, "beyond Delta"),  # wholly past x1.5
])
def test_an_estimate_is_judged_on_d_with_both_sides_uncertainty(ci, word, qualifier):
    v = judge(_row("wd.lambda_c", (ci[0] * ci[1]) ** 0.5, 210, ours_ci=ci))
    assert (v.word, v.qualifier) == (word, qualifier), str(v)


def test_a_gap_smaller_than_delta_is_said_to_be():
    c = replace(claim("fig4.true"), delta=0.05)  # a wide tolerance: the gap is real but small
    v = judge(_row("fig4.true", 0.090, 40, ours_ci=(0.085, 0.095)), c)
    assert v.word is Word.NOT_REPRODUCED and v.qualifier == "smaller than Delta", str(v)


@pytest.mark.parametrize("claim_id, k, n, word", [
    ("lock.fire_grok", 15, 15, Word.EQUIVALENT), ("lock.fire_control", 0, 15, Word.EQUIVALENT),
    ("lock.rho_control", 0, 15, Word.EQUIVALENT), ("lock.relu_fire", 0, 15, Word.EQUIVALENT),
    ("lock.relu_rho0", 15, 15, Word.EQUIVALENT), ("lock.eta1e-05.test", 0, 5, Word.CONSISTENT),
    ("e10.mlp_grok.0.02", 3, 3, Word.NOT_REPRODUCED),  # 3/3 against 0/10: Fisher rejects
])
def test_a_count_equal_to_the_papers_is_never_inconclusive(claim_id, k, n, word):
    v = judge(_row(claim_id, k / n, n))
    assert v.word is word, str(v)
    assert "Fisher exact p" in v.reason


def test_an_interval_under_90_percent_decides_no_size_but_can_hold_the_papers_value():
    inside = judge(_row("fig2.s_bar_init", 0.922, 3, ours_ci=(0.9109, 0.9377), ci_level=0.75))
    assert inside.word is Word.CONSISTENT and "a 95% interval would too" in inside.reason, str(inside)
    outside = judge(_row("fig2.s_bar_init", 0.80, 3, ours_ci=(0.78, 0.82), ci_level=0.75))
    assert outside.word is Word.INCONCLUSIVE and "90% coverage" in outside.reason


def test_a_one_run_claim_needs_three_runs_and_their_prediction_interval():
    few = judge(_row("fig6.pr_norm_100", 0.86, 1, runs=(0.86, 0.85)))
    assert few.word is Word.INCONCLUSIVE and "prediction interval needs 3" in few.reason
    close = judge(_row("fig6.pr_norm_100", 0.85, 1, runs=(0.85, 0.86, 0.87)))
    assert close.word is Word.EQUIVALENT and "inside the 95% prediction interval of our 3 runs" in close.reason
    spread = judge(_row("fig6.pr_norm_100", 0.70, 1, runs=(0.70, 0.85, 0.98)))
    assert spread.word is Word.CONSISTENT, str(spread)
    far = judge(_row("fig6.pr_norm_100", 0.50, 1, runs=(0.50, 0.51, 0.52)))
    assert far.word is Word.NOT_REPRODUCED and far.qualifier == "beyond Delta" and "outside" in far.reason


def test_a_replay_is_equal_within_the_printed_precision_or_not():
    assert judge(_row("lock.sign_match_50.seed0", 0.83, 1, replay="full batch, seed 0")).word is Word.EQUIVALENT
    assert judge(_row("lock.long.lockin", 439, 1, replay="seed 0")).word is Word.NOT_REPRODUCED
    assert judge(_row("lock.long.rho", 527.4, 1, replay="seed 0")).word is Word.EQUIVALENT  # 527 printed: -+0.5


def test_a_published_sample_is_judged_by_the_rank_test_and_the_shift_interval():
    same = judge(_row("wd.t_grok_0.5", 215, 10, runs=(190, 200, 200, 210, 215, 220, 220, 240, 240, 260)))
    assert same.word is Word.EQUIVALENT and "rank test" in same.reason, str(same)
    late = judge(_row("wd.t_grok_0.5", 400, 6, runs=(380, 390, 400, 400, 410, 420)))
    assert late.word is Word.NOT_REPRODUCED and late.qualifier == "beyond Delta", str(late)


@pytest.mark.parametrize("ours, same_sign, word", [
    (0.01, True, Word.SAME_DECISION), (0.01, False, Word.NOT_REPRODUCED), (0.3, True, Word.INCONCLUSIVE),
])
def test_a_p_value_is_a_decision(ours, same_sign, word):
    assert judge(_row("fig4.perm_p", ours, 27, same_sign=same_sign)).word is word
    assert judge(_row("fig4.tail_drift_p", 0.2, 27)).word is Word.SAME_DECISION  # neither rejects


def test_the_words_before_any_comparison():
    assert judge(_row("wd.lambda_c", 0.02, 20, ours_ci=(0.01, 0.03), invalid="another model")).word is Word.INVALID
    short = judge(_row("fig3.final_test", 1.0, 1, horizon=1000))
    assert short.word is Word.NOT_RUN and short.qualifier == "horizon" and "20,000" in short.reason
    assert str(judge(_row("wd.lambda_c", None, 0, not_run="compute: 86 CPU-h"))) == "not run here (compute: 86 CPU-h)"
    assert str(judge(_row("wd.lambda_c", None, 0))) == "not run here"
    assert judge(_row("fig10.mlp_4L_h512_mod_add", None, 4, no_estimate="no edge")).word is Word.INCONCLUSIVE
    assert judge(_row("e12.B-A.d.0.05", -1.0, 2, ours_ci=(-2.7, 0.9), min_n=4)).word is Word.INCONCLUSIVE
    assert judge(_row("c1.identity", 3e-16, 12)).word is Word.IDENTITY_HOLDS
    assert judge(_row("fig4.shape", "linear", 12)).word is Word.NOT_REPRODUCED
    assert judge(Row("context", 0.5, "medium", 3)).word is Word.NONE
    assert verdict(_row("lock.fire_grok", 1.0, 15).to_dict()).startswith("equivalent within Delta: ")
