"""Scorer partial-credit rules (spec §9.4), aggregation (§9.5) and the QA–CEPS Spearman vector (§10.5)."""

from __future__ import annotations

import math

import pytest

from quantgym.envs.portbench.static_qa.aggregate import aggregate, qa_ceps_spearman, spearman, summary_from_template_means
from quantgym.envs.portbench.static_qa.base import QAPair
from quantgym.envs.portbench.static_qa.scorer import (
    cosine, extract_weights, first_number, rebalance_decision, score_response,
)


def pair(template, answer, numeric=None, assets=("A",), metadata=None):
    return QAPair(id=f"{template}_all_20250102_0000", template=template, complexity=1, split="test",
                  market_regime="bull", asset_class="all", assets=tuple(assets), decision_date="2025-01-02", seq=0,
                  context_summary="", question="", answer=answer, answer_numeric=numeric, explanation="",
                  metadata=metadata or {})


def s(p, text, fidelity="clean"):
    return score_response(p, text, fidelity).score


def test_t1_first_keyword_in_fixed_order():
    p = pair("T1", "positive")
    assert s(p, "Positive.") == 1.0
    assert s(p, "I expect an upward move") == 1.0
    assert s(p, "negative") == 0.0
    assert s(p, "no idea") == 0.0
    # fixed keyword order, not text order: "positive" is checked before "negative"
    assert s(p, "negative rather than positive") == 1.0
    assert s(pair("T1", "flat"), "neutral / sideways") == 1.0


def test_t2_t3_relative_error_on_first_number():
    p = pair("T2", "-0.0200", -0.02)
    assert s(p, "-0.02") == 1.0
    assert s(p, "-0.021") == pytest.approx(1 - 0.001 / 0.02)  # 0.95
    assert s(p, "-2%") == pytest.approx(1.0)  # 2 % -> -0.02
    assert s(p, "0.02") == 0.0  # |0.02 - (-0.02)| / 0.02 = 2 -> floored at 0
    assert s(p, "VaR is -0.05 or -0.02") == 0.0  # the FIRST number counts: 1 - 0.03/0.02 < 0
    assert s(p, "no number") == 0.0
    assert first_number("12.5%") == 0.125
    z = pair("T3", "0.0000", 0.0)
    assert s(z, "0") == 1.0 and s(z, "0.001") == 0.0  # |truth| < 1e-9: 1 iff |pred| < 1e-6


def test_unicode_minus_mapped_in_clean_mode_only():
    p = pair("T2", "-0.0200", -0.02)
    assert s(p, "\u22120.02") == 1.0  # U+2212 minus
    assert s(p, "\u20130.02") == 1.0  # U+2013 en dash
    assert s(p, "\u22120.02", "paper") == 0.0  # paper: "0.02" is read -> relative error 2


def test_t4_t5_cosine_vector_and_parsers():
    p = pair("T4", "w_A=0.6000, w_B=0.4000", 0.6, ("A", "B"), {"weights": {"A": 0.6, "B": 0.4}})
    # §9.4 vector: (0.6·0.5 + 0.4·0.5) / (sqrt(0.52)·sqrt(0.5)) = 0.5 / 0.50990 = 0.98058
    assert s(p, "w_A=0.5, w_B=0.5") == pytest.approx(0.98058, abs=1e-5)
    assert s(p, '{"A": 0.6, "B": 0.4}') == pytest.approx(1.0)
    assert s(p, '```json\n{"weights": {"w_A": 60, "w_B": 40}}\n```') == pytest.approx(1.0)  # > 1.5 -> /100
    assert s(p, '{"weights": [0.6, 0.4]}') == pytest.approx(1.0)
    assert s(p, "[0.6, 0.4]") == pytest.approx(1.0)
    assert s(p, '{"A_weight_pct": 60, "B_weight_pct": 40}') == pytest.approx(1.0)
    assert s(p, "A: 60%, B: 40%") == pytest.approx(1.0)
    assert s(p, "I would put 60% and 40%") == pytest.approx(1.0)  # first n percentages in asset order
    assert s(p, "w_A=1.0") == pytest.approx(0.6 / math.sqrt(0.52))  # missing asset = 0 -> 0.83205
    assert s(p, "w_A=-0.5, w_B=0") == 0.0  # negative cosine floored at 0
    assert s(p, "cannot answer") == 0.0
    assert extract_weights("w_btc-usd = 0.3, w_spy=0.7", ["SPY", "BTC-USD"]) == {"SPY": 0.7, "BTC-USD": 0.3}
    assert cosine([0, 0], [1, 0]) == 0.0


def test_t6_partial_credit():
    yes = pair("T6", "yes; sell 0.0612 of XLE")
    assert s(yes, "yes; sell 0.0612 of XLE") == 1.0
    assert s(yes, "Yes; sell 0.07 of xle") == 1.0  # trade size not scored, asset compared upper-cased
    assert s(yes, "yes; buy 0.0612 of XLE") == pytest.approx(0.4 + 0.6 * 0.5)  # 0.7
    assert s(yes, "yes; sell 0.0612 of SPY") == pytest.approx(0.7)
    assert s(yes, "yes; buy 0.0612 of SPY") == pytest.approx(0.4)
    assert s(yes, "yes") == pytest.approx(0.4)  # no trade pattern -> 0.4·1[decision]
    assert s(yes, "yes; sell 0.0612 of XLE.") == pytest.approx(0.7)  # trailing punctuation is part of the token
    assert s(yes, "no") == 0.0
    no = pair("T6", "no")
    assert s(no, "No.") == 1.0 and s(no, "hold") == 1.0 and s(no, "yes") == 0.0


def test_t6_no_rebalance_clean_vs_paper():
    no = pair("T6", "no")
    # repo defect: "no rebalance" contains "rebalance" -> parsed as rebalance in paper mode
    assert rebalance_decision("No rebalance needed", "paper") == "rebalance"
    assert s(no, "No rebalance needed", "paper") == 0.0
    assert rebalance_decision("No rebalance needed", "clean") == "hold"
    assert s(no, "No rebalance needed") == 1.0
    assert s(no, "Do not rebalance") == 1.0
    # whole words: "threshold" is not a hold
    assert rebalance_decision("Yes, above the threshold; sell 0.06 of XLE") == "rebalance"


def test_t7_regime_and_directions_maintain_mapping():
    truth = ("Regime: sideways; Allocations: equities: neutral, bonds: neutral, commodities: neutral, "
             "real_estate: neutral, cryptocurrency: decrease, cash: increase")
    p = pair("T7", truth)
    assert s(p, truth) == 1.0
    resp = ("Regime: sideways; Allocations: equities: maintain, bonds: maintain, commodities: hold, "
            "real_estate: maintain, cryptocurrency: decrease, cash: increase")
    assert s(p, resp) == 1.0  # clean: maintain/hold -> neutral
    assert s(p, resp, "paper") == pytest.approx(0.5 + 0.5 * 2 / 6)  # paper: maintain unscored
    assert s(p, "bear market; equities: neutral") == pytest.approx(0.5 * 1 / 6)
    assert s(p, '{"part_a": "sideways", "part_b": {"equities": "neutral", "bonds": "neutral", "commodities": '
                '"neutral", "real_estate": "neutral", "cryptocurrency": "decrease", "cash": "increase"}}') == 1.0
    # keyword order: "bull" is checked before "bear"
    assert s(pair("T7", "Regime: bull; Allocations: "), "not bear but bull") == 0.5


def test_untrusted_answers_never_raise():
    p = pair("T4", "w_A=0.6000, w_B=0.4000", 0.6, ("A", "B"), {"weights": {"A": 0.6, "B": 0.4}})
    for bad in (None, 3.5, ["w_A=1"], b"\xff\xfe", "{" * 5000, "9" * 400):
        r = score_response(p, bad)
        assert r.score == 0.0 or 0.0 <= r.score <= 1.0
    assert score_response(p, None).error and score_response(p, b"w_A=0.6, w_B=0.4").score == pytest.approx(1.0)


def test_aggregation_vector_deepseek_v4_flash():
    # §10.4 DeepSeek-V4-Flash: T1..T7 = .520 .843 .945 1.00 .932 .652 .843
    means = {"T1": .520, "T2": .843, "T3": .945, "T4": 1.00, "T5": .932, "T6": .652, "T7": .843}
    out = summary_from_template_means(means)
    assert out["Mean"] == pytest.approx(0.819, abs=5e-4)  # 5.735 / 7 = 0.81929
    assert out["F"] == pytest.approx(0.966, abs=5e-4)  # (1.00 + .932) / 2
    assert out["J"] == pytest.approx(0.715, abs=5e-4)  # (.520 + .843 + .652 + .843) / 4 = 0.7145


def test_aggregate_records_per_template_restricted_and_regime():
    recs = []
    for t, sc in {"T1": 1.0, "T2": 0.5, "T3": 1.0, "T4": 0.8, "T5": 0.6, "T6": 0.4, "T7": 0.2}.items():
        recs += [{"template": t, "restricted": False, "regime": "bull", "score": sc},
                 {"template": t, "restricted": False, "regime": "bear", "score": sc / 2}]
    recs += [{"template": "T4", "restricted": True, "regime": "bull", "score": 0.1},
             {"template": "T5", "restricted": True, "regime": "bull", "score": 0.3}]
    out = aggregate(recs)
    tab = out["table"]
    assert tab["T1"] == pytest.approx(0.75) and tab["T4_r"] == pytest.approx(0.1) and tab["T5_r"] == pytest.approx(0.3)
    assert tab["F"] == pytest.approx((0.6 + 0.45) / 2)
    assert tab["J"] == pytest.approx((0.75 + 0.375 + 0.3 + 0.15) / 4)
    # bull: (1 + .5 + 1 + .8 + .6 + .4 + .2) / 7 = 4.5 / 7; restricted items excluded from regimes and Mean
    assert tab["Bull"] == pytest.approx(4.5 / 7)
    assert tab["Bear"] == pytest.approx(2.25 / 7)
    assert math.isnan(tab["Side."])
    assert out["n"]["T4_r"] == 1 and out["n_correct"]["T1"] == 1


def test_spearman_vector_from_page_ranks():
    # §10.5 rank columns; Σd² = 242 -> 1 - 6·242/(10·99) = -0.4667
    qa_rank = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    ceps_rank = [9, 6, 5, 10, 7, 2, 1, 4, 8, 3]
    assert spearman(qa_rank, ceps_rank) == pytest.approx(1 - 6 * 242 / 990, abs=1e-12)
    assert spearman(qa_rank, ceps_rank) == pytest.approx(-0.4667, abs=5e-5)
    # §11.9: from the values with average ranks -> -0.4207
    qa = {"DS-F": .819, "Q-Max": .819, "DS-Pro": .818, "DB-Lite": .804, "DB-Pro": .787, "Q-Plus": .783,
          "GLM": .757, "Q-35B": .684, "Hy": .624, "Kimi": .511}
    ceps = {"DS-F": .348, "Q-Max": .398, "DS-Pro": .399, "DB-Lite": .329, "DB-Pro": .386, "Q-Plus": .434,
            "GLM": .495, "Q-35B": .399, "Hy": .384, "Kimi": .402}
    out = qa_ceps_spearman(qa, ceps)
    assert out["n"] == 10 and out["rho"] == pytest.approx(-0.4207, abs=5e-5)
    assert math.isnan(qa_ceps_spearman({"a": 1.0, "b": 0.5}, {"a": 0.3, "b": 0.4})["rho"])  # < 3 agents
