"""Ground-truth formulas of T1..T7 on a tiny hand-made panel (spec §9.2); arithmetic in comments."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench.static_qa import t1_return, t2_var, t3_sizing, t4_pair, t5_sharpe, t6_rebalance, t7_regime
from quantgym.envs.portbench.static_qa.config import QAConfig, T7_DIRECTIONS
from ._panel import D, DATES, alternating, context, make_panel, window_rows

CFG = QAConfig()


def test_context_window_is_point_in_time():
    data = make_panel({"SPY": alternating(0.01)})
    ctx = context(data)
    rows = window_rows()
    assert ctx.n_rows == 60 and ctx.lo == rows[0] and ctx.hi == rows[-1] + 1
    assert ctx.dates()[-1].date() < D  # last context row is 2021-05-31 (the day before D)
    ctx.validate_pit()


def test_t1_direction_from_21_rows_after_p0():
    r = alternating(0.01)
    after = DATES >= np.datetime64(D)
    r[after] = 0.005  # +0.5 % every day from D on
    data = make_panel({"SPY": r})
    out = t1_return.build(context(data), ["SPY"], 0, CFG, "clean")
    # P_0 = price on D; P_21 = P_0 · 1.005^21 -> g = 1.005^21 - 1 = 0.11040 > 0.01 -> positive
    assert out.answer == "positive"
    assert out.answer_numeric == pytest.approx(1.005 ** 21 - 1, abs=1e-6)
    assert out.metadata["horizon_rows"] == 21
    r[after] = -0.0002  # 1 - 0.9998^21 = 0.0042 -> within ±1 % -> flat
    out = t1_return.build(context(make_panel({"SPY": r})), ["SPY"], 0, CFG, "clean")
    assert out.answer == "flat"
    r[after] = -0.001  # 0.999^21 - 1 = -0.0208 -> negative
    out = t1_return.build(context(make_panel({"SPY": r})), ["SPY"], 0, CFG, "clean")
    assert out.answer == "negative"
    assert t1_return.direction_label(0.0100) == "flat" and t1_return.direction_label(0.0101) == "positive"


def _tail_panel():
    # 60 context returns: 56 alternating ±0.001 plus -0.25, -0.15, -0.02, -0.015 on four window rows
    r = alternating(0.001)
    w = window_rows()
    r[w[[3, 17, 31, 45]]] = [-0.25, -0.15, -0.02, -0.015]
    return make_panel({"BTC-USD": r, "SPY": alternating(0.01)})


def test_t2_var95_linear_quantile():
    out = t2_var.build(context(_tail_panel()), ["BTC-USD"], 0, CFG, "clean")
    # sorted: -0.25, -0.15, -0.02, -0.015, -0.001, ...; position 0.05·59 = 2.95
    # q = -0.02 + 0.95·(-0.015 + 0.02) = -0.01525
    assert out.answer_numeric == pytest.approx(-0.01525, abs=1e-9)
    assert out.answer == f"{out.answer_numeric:.4f}"


def test_t3_fraction_from_var99():
    out = t3_sizing.build(context(_tail_panel()), ["BTC-USD"], 0, CFG, "clean")
    # position 0.01·59 = 0.59: q01 = -0.25 + 0.59·(-0.15 + 0.25) = -0.191; f = 0.10 / 0.191 = 0.52356 -> 0.5236
    assert out.metadata["var99"] == pytest.approx(-0.191, abs=1e-9)
    assert out.answer == "0.5236" and out.answer_numeric == 0.5236
    assert t3_sizing.position_fraction(-0.05) == 1.0  # 0.10/0.05 = 2 -> capped at 1
    assert t3_sizing.position_fraction(0.0) == 1.0


def test_t4_min_variance_clean_and_paper():
    data = make_panel({"SPY": alternating(0.01), "TLT": alternating(0.005, phase=1)})
    # window: 30 × (+0.01, -0.005) and 30 × (-0.01, +0.005); mean 0; with k = n/(n-1) = 60/59:
    # s1² = k·1e-4, s2² = k·0.25e-4, c = -k·0.5e-4
    # clean (ddof 1 throughout): w1 = (0.25 + 0.5)/(1 + 0.25 + 1) = 0.75/2.25 = 1/3
    out = t4_pair.build(context(data), ["SPY", "TLT"], 0, CFG, "clean")
    assert out.answer == "w_SPY=0.3333, w_TLT=0.6667"
    assert out.metadata["correlation"] == pytest.approx(-1.0, abs=1e-6)
    # paper (ddof 0 stds, ddof 1 cov): w1 = (0.25 + 0.5k)/(1.25 + k) = 0.758475/2.266949 = 0.33458
    k = 60 / 59
    out_p = t4_pair.build(context(data), ["SPY", "TLT"], 0, CFG, "paper")
    w1 = (0.25 + 0.5 * k) / (1.25 + k)
    assert out_p.answer == f"w_SPY={round(w1, 4):.4f}, w_TLT={round(1 - w1, 4):.4f}" == "w_SPY=0.3346, w_TLT=0.6654"
    # long-only clamp: s1=1, s2=2, c=1.9 -> w1 = (4-1.9)/(1+4-3.8) = 1.75, w2 = -0.75 -> (1, 0)
    assert t4_pair.min_variance_pair(1.0, 2.0, 1.9) == (1.0, 0.0)
    assert t4_pair.min_variance_pair(0.0, 0.0, 0.0) == (0.5, 0.5)  # degenerate denominator


def test_t4_restricted_removes_covariance_line():
    data = make_panel({"SPY": alternating(0.01), "TLT": alternating(0.005, phase=1)})
    q = t4_pair.build(context(data), ["SPY", "TLT"], 0, CFG, "clean").question
    r = t4_pair.restrict(q)
    assert "Covariance(SPY,TLT)" in q and "Covariance(" not in r and "Correlation" not in r
    assert len(r.split("\n")) == len(q.split("\n")) - 1


def test_t5_matches_tangency_portfolio():
    # seeded synthetic returns whose unconstrained tangency portfolio is long-only, so the long-only
    # max-Sharpe optimum is w ∝ Σ⁻¹(μ - rf)
    rng = np.random.default_rng(4)
    R = rng.normal([0.002, 0.0015, 0.001, 0.0012], [0.01, 0.012, 0.008, 0.015], (60, 4))
    tick = ["SPY", "BTC-USD", "GLD", "BIL"]
    rets = {t: alternating(0.001) for t in tick}
    w = window_rows()
    for j, t in enumerate(tick):
        rets[t][w] = R[:, j]
    out = t5_sharpe.build(context(make_panel(rets)), tick, 0, CFG, "clean")
    mu, S = R.mean(0) * 252, np.cov(R, rowvar=False) * 252
    tan = np.linalg.solve(S, mu - 0.04)
    tan /= tan.sum()
    assert (tan > 0).all()
    got = np.array([out.metadata["weights"][t] for t in tick])
    np.testing.assert_allclose(got, tan, atol=1e-3)
    sharpe = (tan @ mu - 0.04) / np.sqrt(tan @ S @ tan)
    assert out.answer_numeric == pytest.approx(sharpe, abs=1e-5)
    # paper-mode (gradient-free SLSQP) reaches the same optimum
    out_p = t5_sharpe.build(context(make_panel(rets)), tick, 0, CFG, "paper")
    np.testing.assert_allclose([out_p.metadata["weights"][t] for t in tick], tan, atol=1e-3)
    # restricted: means and rf stay, the covariance header and matrix go
    r = t5_sharpe.restrict(out.question)
    assert "Covariance" not in r and "[[" not in r and "Annualized mean returns" in r and "Risk-free rate" in r


def test_t5_nonpositive_excess_means_give_equal_weight():
    mu = np.array([0.01, 0.02, 0.03])  # all below rf = 4 %
    w, solved = t5_sharpe.max_sharpe_rf(mu, np.eye(3) * 0.04, 0.04, "clean")
    assert not solved and np.allclose(w, 1 / 3)


def test_t6_weight_generator_and_truth():
    n = 4
    # odd seq: U(-0.0325, 0.0325) drifts -> max deviation ≤ 0.25·0.065/0.9675 ≈ 0.0168 < 0.05 -> "no"
    for seq in (1, 3, 5, 7):
        c = t6_rebalance.current_weights(D, seq, n, CFG)
        rng = np.random.default_rng(D.toordinal() + seq)
        u = 0.25 * (1 + rng.uniform(-0.0325, 0.0325, n))
        np.testing.assert_allclose(c, np.clip(u / u.sum(), 0, 1))
        assert np.abs(c - 0.25).max() < 0.05
    # even seq: N(0, 0.18) drifts, ×1.5 until the max deviation exceeds 5 % (≤ 10 times)
    seq = 2
    rng = np.random.default_rng(D.toordinal() + seq)
    drift = rng.normal(0, 0.18, n)
    for _ in range(10):
        u = 0.25 * (1 + drift)
        c = np.clip(u / u.sum(), 0, 1)
        if np.abs(c - 0.25).max() > 0.05:
            break
        drift = drift * 1.5
    np.testing.assert_allclose(t6_rebalance.current_weights(D, seq, n, CFG), c)
    data = make_panel({t: alternating(0.001) for t in ("SPY", "BTC-USD", "GLD", "BIL")})
    out = t6_rebalance.build(context(data), ["SPY", "BTC-USD", "GLD", "BIL"], seq, CFG, "clean")
    j = int(np.argmax(np.abs(c - 0.25)))
    side = "sell" if c[j] > 0.25 else "buy"
    assert out.answer == f"yes; {side} {abs(c[j] - 0.25):.4f} of {['SPY', 'BTC-USD', 'GLD', 'BIL'][j]}"
    out1 = t6_rebalance.build(context(data), ["SPY", "BTC-USD", "GLD", "BIL"], 1, CFG, "clean")
    assert out1.answer == "no"


def test_t7_regime_and_direction_table():
    r = np.full(len(DATES), 0.002)  # +0.2 %/day: over 126 calendar days (~88 rows) g ≈ 1.002^88 - 1 = 19 % > 10 %
    data = make_panel({"SPY": r})
    out = t7_regime.build(context(data), ["SPY"], 0, CFG, "clean")
    assert out.metadata["regime"] == "bull"
    assert out.answer == ("Regime: bull; Allocations: equities: increase, bonds: decrease, commodities: neutral, "
                          "real_estate: increase, cryptocurrency: increase, cash: decrease")
    assert "Market regime" not in out.question and "bull," in out.question  # only in the list of choices
    data = make_panel({"SPY": np.full(len(DATES), -0.003)})  # 0.997^88 - 1 = -23 % < -20 % -> crisis
    out = t7_regime.build(context(data), ["SPY"], 0, CFG, "clean")
    assert out.metadata["regime"] == "crisis"
    assert out.metadata["directions"] == T7_DIRECTIONS["crisis"]
    assert "maintain" in t7_regime.build(context(data), ["SPY"], 0, CFG, "paper").question


def test_failing_contexts_return_none():
    r = alternating(0.01)
    btc = np.full(len(DATES), np.nan)
    btc[-5:] = 0.01  # listed after D: no context prices
    prices_ok = make_panel({"SPY": r, "TLT": alternating(0.005)})
    ctx = context(prices_ok)
    assert t4_pair.build(ctx, ["SPY", "SPY"], 0, CFG, "clean") is None  # same asset twice
    import pandas as pd
    from quantgym.envs.portbench.data import PortBenchData

    px = pd.DataFrame({"SPY": 100 * np.cumprod(1 + r), "BTC-USD": 100 * np.cumprod(1 + np.nan_to_num(btc))},
                      index=DATES)
    px.loc[px.index[:-5], "BTC-USD"] = np.nan
    data = PortBenchData.from_frames(px, {"SPY": "equities", "BTC-USD": "cryptocurrency"}, crypto_close="same_day")
    ctx = context(data)
    for mod in (t1_return, t2_var, t3_sizing):
        assert mod.build(ctx, ["BTC-USD"], 0, CFG, "clean") is None
