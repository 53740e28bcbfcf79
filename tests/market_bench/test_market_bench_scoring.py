"""Scorer formulas of spec §6 on a made-up attempt table (incl. unsolved rounds)."""

import math

import numpy as np
import pytest

from quantgym.envs.market_bench.config import METRIC_KEYS, MarketBenchScoringConfig
from quantgym.envs.market_bench.scoring import (FAILED, SUCCESS, AttemptRecord, attempt_reward, fmt, is_correct, mae,
                                                mean_clipped_rel_error, metric_errors, path_correlation, round_table,
                                                score_table, strategy_scores, validate_metrics)


def A(agent, strategy, rnd, attempt, ok, m=None):
    return AttemptRecord(agent, strategy, rnd, attempt, SUCCESS if ok else FAILED, m if ok else None)


# agent X on "pairs", 5 rounds:
#   r1: attempt 1 SUCCESS mae 2.0                       -> solved, first 1, best 2.0
#   r2: 1 FAILED, 2 SUCCESS 4.0, 3 SUCCESS 1.0          -> solved, first 2, best 1.0
#   r3: 1,2,3 FAILED                                    -> unsolved
#   r4: 1 FAILED, 2 FAILED, 3 SUCCESS 3.0               -> solved, first 3, best 3.0
#   r5: 1 SUCCESS 0.0                                   -> solved, first 1, best 0.0
# pass@3 = 4/5 = 0.8; pass@1 = 2/5 = 0.4; mean_mae_solved = (2 + 1 + 3 + 0)/4 = 1.5;
# avg_attempt = (1 + 2 + 3 + 1)/4 = 1.75
# agent Y on "pairs": r1..r5 all FAILED once -> pass@3 0, pass@1 0, MAE and attempts undefined
# agent X on "scheduled": r1 SUCCESS 10.0 on attempt 1, others unsolved -> pass@3 0.2, pass@1 0.2, MAE 10, att 1
TABLE = [
    A("X", "pairs", 1, 1, True, 2.0),
    A("X", "pairs", 2, 1, False), A("X", "pairs", 2, 2, True, 4.0), A("X", "pairs", 2, 3, True, 1.0),
    A("X", "pairs", 3, 1, False), A("X", "pairs", 3, 2, False), A("X", "pairs", 3, 3, False),
    A("X", "pairs", 4, 1, False), A("X", "pairs", 4, 2, False), A("X", "pairs", 4, 3, True, 3.0),
    A("X", "pairs", 5, 1, True, 0.0),
    *[A("Y", "pairs", r, 1, False) for r in range(1, 6)],
    A("X", "scheduled", 1, 1, True, 10.0), *[A("X", "scheduled", r, 1, False) for r in range(2, 6)],
]


def test_round_table():
    rt = round_table(TABLE).set_index(["agent", "strategy", "round"])
    assert rt.loc[("X", "pairs", 2), "best_mae"] == 1.0 and rt.loc[("X", "pairs", 2), "first_attempt"] == 2
    assert rt.loc[("X", "pairs", 3), "solved"] == 0 and math.isnan(rt.loc[("X", "pairs", 3), "best_mae"])


def test_strategy_scores_formulas():
    s = strategy_scores(TABLE).set_index(["agent", "strategy"])
    x = s.loc[("X", "pairs")]
    assert x["pass@3"] == pytest.approx(0.8) and x["pass@1"] == pytest.approx(0.4)
    assert x["mean_mae_solved"] == pytest.approx(1.5) and x["avg_attempt"] == pytest.approx(1.75)
    y = s.loc[("Y", "pairs")]
    assert y["pass@3"] == 0 and y["pass@1"] == 0 and math.isnan(y["mean_mae_solved"]) and math.isnan(y["avg_attempt"])
    # pass@1 counts only attempt-1 successes: with k = 1, round 2 and 4 are unsolved
    s1 = strategy_scores(TABLE, k=1).set_index(["agent", "strategy"]).loc[("X", "pairs")]
    assert s1["pass@1"] == pytest.approx(0.4) and s1["mean_mae_solved"] == pytest.approx(1.0)  # (2 + 0)/2


def test_overall_and_ranking():
    t = score_table(TABLE)
    ov = t[t["strategy"] == "overall"].set_index("agent")
    # X overall: pass@3 = (0.8 + 0.2)/2 = 0.5, pass@1 = (0.4 + 0.2)/2 = 0.3, MAE (1.5 + 10)/2 = 5.75, att (1.75 + 1)/2
    assert ov.loc["X", "pass@3"] == pytest.approx(0.5) and ov.loc["X", "pass@1"] == pytest.approx(0.3)
    assert ov.loc["X", "mean_mae_solved"] == pytest.approx(5.75) and ov.loc["X", "avg_attempt"] == pytest.approx(1.375)
    # Y: MAE over strategies with a solved round -> none -> NaN
    assert math.isnan(ov.loc["Y", "mean_mae_solved"])
    pairs = t[t["strategy"] == "pairs"]
    assert pairs["agent"].tolist() == ["X", "Y"] and pairs["rank"].tolist() == [1, 2]


def test_ranking_tie_breaks():
    # equal pass@3 and pass@1: lower MAE first; equal MAE: lower avg_attempt first
    t = [A("P", "pairs", 1, 1, True, 5.0), A("Q", "pairs", 1, 1, True, 1.0),
         A("R", "pairs", 1, 1, False), A("R", "pairs", 1, 2, True, 0.5)]
    ranked = score_table(t)
    pairs = ranked[ranked["strategy"] == "pairs"]
    # Q, P: pass@3 1, pass@1 1 (Q lower MAE first); R: pass@1 0 -> last despite lowest MAE
    assert pairs["agent"].tolist() == ["Q", "P", "R"]


def test_validate_metrics_rejects_garbage():
    keys = METRIC_KEYS["delta_hedge"]
    good = {k: 1.0 for k in keys}
    assert validate_metrics(good, "delta_hedge")[0] == good
    assert validate_metrics({**good, "extra": "ignored"}, "delta_hedge")[0] == good
    assert "not a JSON object" in validate_metrics([1, 2], "delta_hedge")[1]
    assert "missing metric(s): n_fills" in validate_metrics({k: 1 for k in keys if k != "n_fills"}, "delta_hedge")[1]
    assert "not finite" in validate_metrics({**good, "final_cash": float("nan")}, "delta_hedge")[1]
    assert "not a number" in validate_metrics({**good, "final_cash": "12"}, "delta_hedge")[1]
    assert "not a number" in validate_metrics({**good, "final_cash": True}, "delta_hedge")[1]
    assert "not a number" in validate_metrics({**good, "final_cash": None}, "delta_hedge")[1]


def test_mae_relative_error_and_path_correlation():
    keys = METRIC_KEYS["scheduled"]
    ref = {k: 10.0 for k in keys}
    pred = dict(ref, final_cash=13.0)  # one metric off by 3 -> MAE 3/13
    assert mae(pred, ref, "scheduled") == pytest.approx(3 / 13)
    errs = metric_errors(pred, ref, "scheduled")
    assert errs["final_cash"]["rel_error"] == pytest.approx(0.3) and errs["n_fills"]["abs_error"] == 0
    r = np.array([100, 101, 99, 102.0])
    assert path_correlation(r * 2, r) == pytest.approx(1.0)
    assert path_correlation(r[:3], r) is None and path_correlation(None, r) is None
    assert path_correlation([1, float("nan"), 2, 3], r) is None


def test_fmt_two_decimals():
    assert fmt(0.8) == "0.80" and fmt(437.514) == "437.51" and fmt(float("nan")) == "-" and fmt(None) == "-"


def C(agent, strategy, rnd, attempt, ok, m=None, correct=None):
    return AttemptRecord(agent, strategy, rnd, attempt, SUCCESS if ok else FAILED, m if ok else None,
                         correct=correct)


def test_correct_at_k_beside_pass_at_k():
    # agent Z on "pairs", 4 rounds (attempts run on after a wrong success, as with end_on_success=False):
    #   r1: 1 SUCCESS correct                       -> solved@1, correct@1
    #   r2: 1 SUCCESS wrong (stub), 2 SUCCESS correct -> solved@1, correct on 2
    #   r3: 1 SUCCESS wrong, 2 SUCCESS wrong          -> solved@1, never correct
    #   r4: 1 FAILED, 2 FAILED, 3 FAILED, 4 SUCCESS correct (beyond k = 3) -> unsolved, not correct
    # pass@3 = 3/4, pass@1 = 3/4; correct@3 = 2/4, correct@1 = 1/4
    t = [C("Z", "pairs", 1, 1, True, 0.0, True),
         C("Z", "pairs", 2, 1, True, 9.0, False), C("Z", "pairs", 2, 2, True, 0.0, True),
         C("Z", "pairs", 3, 1, True, 5.0, False), C("Z", "pairs", 3, 2, True, 4.0, False),
         C("Z", "pairs", 4, 1, False), C("Z", "pairs", 4, 2, False), C("Z", "pairs", 4, 3, False),
         C("Z", "pairs", 4, 4, True, 0.0, True)]
    rt = round_table(t).set_index("round")
    assert rt["correct"].tolist() == [1, 1, 0, 1] and rt.loc[2, "first_correct"] == 2
    assert math.isnan(rt.loc[3, "first_correct"])
    s = strategy_scores(t).set_index(["agent", "strategy"]).loc[("Z", "pairs")]
    assert s["pass@3"] == pytest.approx(0.75) and s["pass@1"] == pytest.approx(0.75)
    assert s["correct@3"] == pytest.approx(0.5) and s["correct@1"] == pytest.approx(0.25)
    # overall = mean over strategies; the paper's ranking ignores correct@k
    t2 = t + [C("Z", "scheduled", 1, 1, True, 0.0, True)]
    ov = score_table(t2).set_index("strategy").loc["overall"]
    assert ov["correct@3"] == pytest.approx((0.5 + 1.0) / 2) and ov["correct@1"] == pytest.approx((0.25 + 1.0) / 2)
    # a FAILED attempt flagged correct by mistake never counts; records without the field are not correct
    bad = [C("W", "pairs", 1, 1, False, correct=True), {"agent": "V", "strategy": "pairs", "round": 1, "attempt": 1,
                                                        "status": SUCCESS, "mae": 0.0}]
    s3 = strategy_scores(bad).set_index("agent")
    assert s3.loc["W", "correct@3"] == 0 and s3.loc["V", "correct@3"] == 0 and s3.loc["V", "pass@3"] == 1


def test_is_correct_tolerance_and_reward():
    keys = METRIC_KEYS["scheduled"]
    ref = {k: 0.0 for k in keys} | {"final_cash": 5_000_000.0, "n_fills": 14.0}
    cfg = MarketBenchScoringConfig()
    assert (cfg.correct_atol, cfg.correct_rtol) == (1e-6, 1e-6)
    assert is_correct(dict(ref), ref, "scheduled")
    # |err| <= max(1e-6, 1e-6*|y|): 5 CNY on 5e6 is within (bound 5.0), 5.01 is not; 1e-6 abs on a 0 reference
    assert is_correct(dict(ref, final_cash=5_000_005.0), ref, "scheduled")
    assert not is_correct(dict(ref, final_cash=5_000_005.01), ref, "scheduled")
    assert is_correct(dict(ref, realized_pnl=1e-6), ref, "scheduled")
    assert not is_correct(dict(ref, realized_pnl=2e-6), ref, "scheduled")
    assert not is_correct(dict(ref, n_fills=13.0), ref, "scheduled")
    # reward: correct 1.0; FAILED 0.0; wrong SUCCESS 0.5*exp(-mean(min(rel, 1))/0.1)
    stub = {k: 0.0 for k in keys}
    errs = metric_errors(stub, ref, "scheduled")
    m = mean_clipped_rel_error(errs)
    assert m == pytest.approx(2 / 13)  # two non-zero references, each relative error 1
    assert attempt_reward(SUCCESS, False, errs) == pytest.approx(0.5 * math.exp(-m / 0.1))
    assert attempt_reward(SUCCESS, True, errs) == 1.0 and attempt_reward(FAILED, None, None) == 0.0
    close = metric_errors(dict(ref, final_cash=5_001_000.0), ref, "scheduled")  # rel 2e-4 on one key
    r_close = attempt_reward(SUCCESS, False, close)
    assert attempt_reward(SUCCESS, False, errs) < r_close < 0.5
