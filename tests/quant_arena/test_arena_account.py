"""Hand-worked exchange and cash-account vectors (spec quant_arena.md §10.5–§10.9, worked examples §10.16)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantgym.envs.quant_arena.config import ArenaCostModel, ExecutionModel, ImpactModel
from quantgym.envs.quant_arena.account import labels, run_account, score_order, select_top, window_rows
from quantgym.envs.quant_arena.exchange import book_params, order_fees, price_limits, r2, walk_book
from quantgym.envs.quant_arena.metrics import account_metrics

from .conftest import make_panel

IMP = ImpactModel()
NAN = float("nan")


# ---------------------------------------------------------------------- §10.16 A, B, D: book and fees
def test_example_a_buy_with_lot_rounding_and_book_walk():
    # V* = 10,000,000/75 = 133,333.33; shares = 100*floor(133,333.33/37.85/100) = 100*floor(35.23) = 3,500
    vstar = 10_000_000 / 75
    want = 100 * np.floor(vstar / 37.85 / 100)
    assert want == 3500
    # Δ: 0.006*0.025*37.85/0.01 = 0.57 tick -> floor(0.57+0.5)=1 -> 0.01; q: 0.02*4e6*0.01/0.94625 = 845.4 -> 800
    assert book_params(37.85, 0.025, 4_000_000, IMP) == (0.01, 800.0)
    filled, value = walk_book(+1, 3500, 37.85, 0.025, 4_000_000, NAN, IMP)
    # 800 at 37.855, 37.865, 37.875, 37.885 and 300 at 37.895 = 132,552.50
    assert filled == 3500
    assert value == pytest.approx(132_552.50, abs=1e-6)
    assert value / filled == pytest.approx(37.87214, abs=1e-5)
    assert value - filled * 37.85 == pytest.approx(77.50, abs=1e-6)  # impact, 5.85 bp
    c1, c2, c3 = order_fees(value, +1, "2024-03-01", ArenaCostModel())
    assert (c1, c2, c3) == (33.14, 1.33, 0.0)  # r2(33.138), r2(1.3255) with the 2024 transfer rate 0.00001
    assert value + c1 + c2 + c3 == pytest.approx(132_586.97, abs=1e-6)


def test_example_b_minimum_commission_and_stamp_duty_cut():
    value = 300 * 9.855  # trim 300 at open 9.86, level 1 of the sell side at 9.855
    assert value == pytest.approx(2956.50)
    # commission max(5, 0.74) = 5.00; transfer r2(0.059) = 0.06? no: 0.00001*2956.5 = 0.0296 -> 0.03
    assert order_fees(value, -1, "2023-08-25", ArenaCostModel()) == (5.0, 0.03, 2.96)   # stamp r2(2.9565)
    assert order_fees(value, -1, "2023-08-28", ArenaCostModel()) == (5.0, 0.03, 1.48)   # stamp r2(1.47825)
    net_before = value - 5.0 - 0.03 - 2.96
    net_after = value - 5.0 - 0.03 - 1.48
    assert (round(net_before, 2), round(net_after, 2)) == (2948.51, 2949.99)
    # buys pay no stamp duty; transfer fee 0.00002 before 2022-04-29
    assert order_fees(100_000.0, +1, "2022-04-28", ArenaCostModel()) == (25.0, 2.0, 0.0)
    assert order_fees(100_000.0, +1, "2022-04-29", ArenaCostModel()) == (25.0, 1.0, 0.0)
    assert order_fees(100_000.0, -1, "2022-04-29", ArenaCostModel.off()) == (0.0, 0.0, 0.0)


def test_example_d_three_level_walk():
    # P = 10, σ = 0.025, ADV = 5e6: Δ = 0.01 (0.15 tick -> 1), q = 0.02*5e6*0.01/0.25 = 4,000
    assert book_params(10.0, 0.025, 5_000_000, IMP) == (0.01, 4000.0)
    f, v = walk_book(+1, 10_000, 10.0, 0.025, 5_000_000, NAN, IMP)
    # 4,000*10.005 + 4,000*10.015 + 2,000*10.025 = 40,020 + 40,060 + 20,050 = 100,130
    assert (f, v) == (10_000, pytest.approx(100_130.0))
    f, v = walk_book(-1, 10_000, 10.0, 0.025, 5_000_000, NAN, IMP)
    # 39,980 + 39,940 + 19,950 = 99,870
    assert (f, v) == (10_000, pytest.approx(99_870.0))
    # impact off: everything at the open
    assert walk_book(+1, 10_000, 10.0, 0.025, 5_000_000, NAN, ImpactModel.off()) == (10_000, 100_000.0)


def test_example_c_limit_removes_levels():
    # open 11.05, up 11.06, Δ = 0.01: level 1 at 11.055 <= 11.06 stays, level 2 at 11.065 is removed
    delta, q = book_params(11.05, 0.025, 5_000_000, IMP)
    assert delta == 0.01
    f, v = walk_book(+1, 10 * q, 11.05, 0.025, 5_000_000, 11.06, IMP)
    assert f == q and v == pytest.approx(q * 11.055)
    # at the limit: nothing
    assert walk_book(+1, 100, 11.06, 0.025, 5_000_000, 11.06, IMP)[0] == 0


def test_r2_rounds_half_up():
    assert float(r2(2.9565)) == 2.96 and float(r2(1.47825)) == 1.48 and float(r2(19.0476)) == 19.05


def test_selection_order_and_ties():
    # §10.5: {SZ000002: 1.0, SH600000: 1.0, SH600519: 0.5, SZ300750: NaN}, cap 2 -> SH600000, SZ000002
    syms = np.array(["SH600000", "SH600519", "SZ000002", "SZ300750"])
    sc = np.array([1.0, 0.5, 1.0, np.nan])
    assert syms[select_top(sc, np.ones(4, bool), 2)].tolist() == ["SH600000", "SZ000002"]
    assert syms[select_top(sc, np.ones(4, bool), 75)].tolist() == ["SH600000", "SZ000002", "SH600519"]
    assert select_top(np.full(4, np.nan), np.ones(4, bool), 2).size == 0


# ---------------------------------------------------------------------- account on tiny panels
def _two_stock_panel(d0, d1, d2, d3):
    """A = SH600000, B = SH600004; prices chosen to avoid half-cent ties."""
    rows = [
        {"date": d0, "symbol": "SH600000", "open": 37.80, "close": 37.80},
        {"date": d0, "symbol": "SH600004", "open": 9.85, "close": 9.85},
        {"date": d1, "symbol": "SH600000", "open": 37.85, "close": 38.00},
        {"date": d1, "symbol": "SH600004", "open": 9.87, "close": 9.90},
        {"date": d2, "symbol": "SH600000", "open": 38.11, "close": 38.20},
        {"date": d2, "symbol": "SH600004", "open": 9.91, "close": 9.95},
        {"date": d3, "symbol": "SH600000", "open": 38.20, "close": 38.20},
        {"date": d3, "symbol": "SH600004", "open": 9.95, "close": 9.95},
    ]
    return make_panel(rows)


@pytest.mark.parametrize("dates,stamp", [
    (("2023-08-23", "2023-08-24", "2023-08-25", "2023-08-29"), 49.54),   # exit executed 08-25: 10 bp
    (("2023-08-24", "2023-08-25", "2023-08-28", "2023-08-29"), 24.77),   # exit executed 08-28: 5 bp
])
def test_account_lots_fees_and_stamp_duty_by_date(dates, stamp):
    ds = _two_stock_panel(*dates)
    ex = ExecutionModel(top_n=2, initial_capital=100_000.0)
    # decisions: D0 -> A=2, B=1 (buy both); D1 -> A NaN, B=1 (exit A); D2 -> same
    sc = np.array([[2.0, 1.0], [np.nan, 1.0], [np.nan, 1.0]])
    acc = run_account(ds, 0, 3, sc, execution=ex, impact=ImpactModel.off(), record_trades=True)
    t = acc.trades
    # D1: V* = 50,000. A: 100*floor(50,000/37.85/100) = 1,300 sh = 49,205.00; comm r2(12.30125) = 12.30;
    #     transfer r2(0.49205) = 0.49 -> cash 100,000 - 49,217.79 = 50,782.21
    assert (t[0]["symbol"], t[0]["filled"], t[0]["value"], t[0]["commission"], t[0]["transfer"]) == (
        "SH600000", 1300, pytest.approx(49_205.0), 12.30, 0.49)
    # B: 100*floor(min(50,000, 50,782.21)/9.87/100) = 5,000 sh = 49,350.00; comm r2(12.3375) = 12.34; tr 0.49
    assert (t[1]["symbol"], t[1]["filled"], t[1]["commission"], t[1]["transfer"]) == ("SH600004", 5000, 12.34, 0.49)
    assert acc.cash[1] == pytest.approx(100_000 - 49_217.79 - 49_362.83, abs=1e-6)  # 1,419.38
    # close D1: 1,419.38 + 1,300*38.00 + 5,000*9.90 = 100,319.38
    assert acc.nav[1] == pytest.approx(100_319.38, abs=1e-6)
    # D2: exit A: 1,300*38.11 = 49,543.00; comm r2(12.38575) = 12.39; transfer r2(0.49543) = 0.50;
    #     stamp r2(0.001*49,543) = 49.54 before 2023-08-28, r2(0.0005*49,543) = r2(24.7715) = 24.77 on/after
    sell = t[2]
    assert (sell["side"], sell["filled"], sell["commission"], sell["transfer"], sell["stamp"]) == (
        "sell", 1300, 12.39, 0.50, stamp)
    # B stays (49,550 is within ±25 % of V* = 50,256.19): no order
    assert len(t) == 3
    assert acc.cash[2] == pytest.approx(1_419.38 + 49_543.0 - 12.39 - 0.50 - stamp, abs=1e-6)
    assert (acc.cash >= 0).all()
    # turnover of D1 = (98,555 + 0)/(2*100,000)
    assert (acc.bought[0] + acc.sold[0]) / (2 * acc.nav_open[0]) == pytest.approx(98_555 / 200_000)


def test_account_minimum_commission_on_a_small_order():
    ds = _two_stock_panel("2023-08-23", "2023-08-24", "2023-08-25", "2023-08-29")
    ex = ExecutionModel(top_n=2, initial_capital=10_000.0)
    sc = np.array([[np.nan, 1.0], [np.nan, 1.0], [np.nan, 1.0]])
    acc = run_account(ds, 0, 3, sc, execution=ex, impact=ImpactModel.off(), record_trades=True)
    # V* = 5,000; B: 100*floor(5,000/9.87/100) = 500 sh = 4,935.00; commission max(5, 1.23) = 5.00;
    # transfer r2(0.04935) = 0.05; cash 10,000 - 4,940.05 = 5,059.95 (the second slot stays cash)
    t = acc.trades[0]
    assert (t["filled"], t["commission"], t["transfer"]) == (500, 5.0, 0.05)
    assert acc.cash[1] == pytest.approx(5_059.95, abs=1e-6)
    assert acc.position_value[1] / acc.nav[1] == pytest.approx(4_950 / (5_059.95 + 4_950))


def test_account_limit_up_blocks_buy_and_suspended_day():
    d = ["2024-03-01", "2024-03-04", "2024-03-05", "2024-03-06"]
    rows = [
        # A main board: base 10.05 -> up (1005*110+50)//100 = 1106 -> 11.06; opens at 11.06 on D1: locked
        {"date": d[0], "symbol": "SH600000", "open": 10.00, "close": 10.05},
        {"date": d[1], "symbol": "SH600000", "open": 11.06, "close": 11.06},
        {"date": d[2], "symbol": "SH600000", "open": 11.50, "close": 11.60},
        {"date": d[3], "symbol": "SH600000", "open": 11.60, "close": 11.60},
        # B suspended on D1 (source flags it and has volume 0): cannot be bought
        {"date": d[0], "symbol": "SH600004", "open": 20.00, "close": 20.00},
        {"date": d[1], "symbol": "SH600004", "open": 20.00, "close": 20.00, "volume": 0, "suspended": True},
        {"date": d[2], "symbol": "SH600004", "open": 20.10, "close": 20.20},
        {"date": d[3], "symbol": "SH600004", "open": 20.20, "close": 20.20},
        # C ChiNext: base 10.05 -> up 12.06, down 8.04; bought on D1, at its down limit on D2 (locked sell)
        {"date": d[0], "symbol": "SZ300001", "open": 10.00, "close": 10.05},
        {"date": d[1], "symbol": "SZ300001", "open": 10.00, "close": 10.05},
        {"date": d[2], "symbol": "SZ300001", "open": 8.04, "close": 8.04},
        {"date": d[3], "symbol": "SZ300001", "open": 8.50, "close": 8.50},
    ]
    # listed long before the panel (without list_date the first row counts as the listing day, §10.6)
    old = {"list_date": "2010-01-04"}
    ds = make_panel(rows, info={"SH600000": old, "SH600004": old, "SZ300001": old})
    up, down, base = price_limits(ds)
    assert (up[1, 0], down[1, 0]) == (11.06, 9.05)
    assert (up[1, 2], down[1, 2]) == (12.06, 8.04)
    assert np.isnan(up[0]).all()  # no previous close on the panel's first day
    ex = ExecutionModel(top_n=3, initial_capital=90_000.0)
    # D0: all three selected; D1: only A and B (C exits on D2 but is sell-locked); D2: A and B
    sc = np.array([[3.0, 2.0, 1.0], [3.0, 2.0, np.nan], [3.0, 2.0, np.nan]])
    acc = run_account(ds, 0, 3, sc, execution=ex, impact=ImpactModel.off(), record_trades=True)
    day1 = [t for t in acc.trades if t["date"] == d[1]]
    assert [t["symbol"] for t in day1] == ["SZ300001"]          # A locked at 11.06, B suspended
    assert acc.blocked_buy[0] == 2
    # V* = 30,000 -> C: 3,000 sh at 10.00 = 30,000.00, comm 7.50, transfer 0.30; the other slots stay cash
    assert acc.cash[1] == pytest.approx(90_000 - 30_007.80, abs=1e-6)
    day2 = [t for t in acc.trades if t["date"] == d[2]]
    assert acc.blocked_sell[1] == 1                              # C opens at its down limit 8.04
    assert sorted(t["symbol"] for t in day2) == ["SH600000", "SH600004"]
    assert acc.n_held[1] == 3                                    # C still held at the close of D2
    last = acc.trades[-1]                                        # ... and sold at the open of D3
    assert (last["date"], last["symbol"], last["side"], last["filled"]) == (d[3], "SZ300001", "sell", 3000)
    assert (acc.cash >= -1e-9).all()


def test_account_impact_on_a_tiny_book():
    # one stock, volume 10,000 sh/day, 3 rows before the decision -> σ = 0.03 (fewer than 10 returns)
    d = ["2024-03-01", "2024-03-04", "2024-03-05"]
    rows = [{"date": x, "symbol": "SH600000", "open": 10.0, "close": 10.0, "volume": 10_000} for x in d]
    ds = make_panel(rows)
    # Δ = 0.01*max(1, floor(0.006*0.03*10/0.01 + 0.5)) = 0.01; q = 100*max(1, floor(0.02*10,000*0.01/0.3/100))
    #   = 100 shares per level; 10 levels -> at most 1,000 shares fill
    acc = run_account(ds, 0, 2, np.array([[1.0], [1.0]]), execution=ExecutionModel(top_n=1, initial_capital=100_000),
                      record_trades=True)
    t = acc.trades[0]
    # want 10,000; fill 1,000: Σ_k 100*(10 + (k-½)*0.01) = 100*(100 + 0.5) = 10,050.00; impact 50.00
    assert (t["want"], t["filled"], t["value"], t["impact"]) == (10_000, 1000, pytest.approx(10_050.0),
                                                               pytest.approx(50.0))
    # commission max(5, r2(2.5125)) = 5.00; transfer r2(0.1005) = 0.10
    assert (t["commission"], t["transfer"]) == (5.0, 0.10)
    assert acc.cash[1] == pytest.approx(100_000 - 10_055.10)
    assert acc.partial[0] == 1
    assert acc.impact[0] == pytest.approx(50.0)


def test_example_h_corporate_action_and_full_exit():
    d = ["2024-03-01", "2024-03-04", "2024-03-05", "2024-03-06"]
    rows = [
        {"date": d[0], "symbol": "SH600000", "open": 37.85, "close": 37.85},
        {"date": d[1], "symbol": "SH600000", "open": 37.85, "close": 37.85},
        # ex-date: factor 1.0000 -> 1.0123, base r2(37.85/1.0123) = 37.39
        {"date": d[2], "symbol": "SH600000", "open": 37.40, "close": 37.40, "adj_factor": 1.0123},
        {"date": d[3], "symbol": "SH600000", "open": 37.40, "close": 37.40, "adj_factor": 1.0123},
    ]
    ds = make_panel(rows)
    ex = ExecutionModel(top_n=1, initial_capital=140_000.0)
    # buy 100*floor(140,000/37.85/100) = 3,600? use a band so that no top-up happens; then exit on D3
    sc = np.array([[1.0], [1.0], [np.nan]])
    acc = run_account(ds, 0, 3, sc, execution=ex, impact=ImpactModel.off(), record_trades=True)
    bought = acc.trades[0]["filled"]
    assert bought == 3600
    # after the ex-date the holding is 3,600 * 1.0123 = 3,644.28 shares (fractional allowed)
    sell = acc.trades[-1]
    assert sell["side"] == "sell" and sell["exit"] and sell["filled"] == pytest.approx(3600 * 1.0123)
    assert acc.final_shares[0] == 0.0
    # worked example H: 3,500 -> 3,543.05
    assert 3500 * 1.0123 == pytest.approx(3543.05)


def test_turnover_and_reference_examples():
    # §10.16 H: buys 1,000,000 and sells 1,200,000 on NAV_open 10,000,000 -> TO = 0.11
    m = account_metrics(np.array([1e7, 1e7]), np.array([0.0, 0.0]), np.array([1e6]), np.array([1.2e6]),
                        np.array([1e7]), np.array([1.0, 1.0]))
    assert m["turnover"] == pytest.approx(0.11)
    # reference day: A +2 %, B suspended, C -1 % -> +0.5 %
    rows = [
        {"date": "2024-03-01", "symbol": "SH600000", "open": 10.0, "close": 10.0},
        {"date": "2024-03-01", "symbol": "SH600004", "open": 10.0, "close": 10.0},
        {"date": "2024-03-01", "symbol": "SH600006", "open": 10.0, "close": 10.0},
        {"date": "2024-03-04", "symbol": "SH600000", "open": 10.0, "close": 10.2},
        {"date": "2024-03-04", "symbol": "SH600004", "open": 10.0, "close": 10.0, "volume": 0, "suspended": True},
        {"date": "2024-03-04", "symbol": "SH600006", "open": 10.0, "close": 9.9},
    ]
    ds = make_panel(rows)
    assert ds.reference_returns().iloc[0] == pytest.approx(0.005)


def test_labels_need_both_days_tradable():
    d = ["2024-03-01", "2024-03-04", "2024-03-05", "2024-03-06"]
    rows = [{"date": x, "symbol": "SH600000", "open": o, "close": o} for x, o in zip(d, [10, 10, 11, 12])]
    rows += [{"date": x, "symbol": "SH600004", "open": 10, "close": 10, "volume": v, "suspended": v == 0}
             for x, v in zip(d, [1, 1, 0, 1])]
    ds = make_panel(rows)
    y = labels(ds, 0, 3)  # t = D0, D1: y = open(t+2)/open(t+1) - 1
    assert y.shape == (2, 2)
    assert y[0, 0] == pytest.approx(0.1) and y[1, 0] == pytest.approx(12 / 11 - 1)
    assert np.isnan(y[0, 1]) and np.isnan(y[1, 1])  # suspended on D2


def test_cash_never_negative_random_panels():
    rng = np.random.default_rng(7)
    dates = [str(x.date()) for x in __import__("pandas").bdate_range("2024-01-02", periods=30)]
    syms = ["SH600000", "SH600004", "SH600006", "SZ000001", "SZ300001"]
    rows = []
    for s in syms:
        p = 10.0
        for i, d in enumerate(dates):
            p = round(max(1.0, p * (1 + rng.normal(0, 0.04))), 2)
            susp = bool(rng.random() < 0.1) and i > 0
            rows.append({"date": d, "symbol": s, "open": p, "close": p, "volume": 0 if susp else 50_000,
                         "suspended": susp})
    ds = make_panel(rows)
    d0, n = window_rows(ds, dates[1], dates[-1])
    sc = rng.normal(size=(n, len(syms)))
    sc[rng.random(sc.shape) < 0.2] = np.nan
    acc = run_account(ds, d0, n, sc, execution=ExecutionModel(top_n=3, initial_capital=30_000.0))
    assert (acc.cash >= 0).all()
    assert np.allclose(acc.nav, acc.cash + acc.position_value)
    # deterministic
    acc2 = run_account(ds, d0, n, sc, execution=ExecutionModel(top_n=3, initial_capital=30_000.0))
    assert np.array_equal(acc.nav, acc2.nav)


def test_bad_score_shapes_raise():
    ds = _two_stock_panel("2023-08-23", "2023-08-24", "2023-08-25", "2023-08-29")
    with pytest.raises(ValueError, match="shape"):
        run_account(ds, 0, 3, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="finite"):
        run_account(ds, 0, 3, np.full((3, 2), np.inf))


# ---------------------------------------------------------------------- compiled kernels = interpreted
_KERNEL_CHECK = """
import pickle, sys
import numpy as np
from quantgym.envs.quant_arena.account import run_account, score_order, window_rows, labels
from quantgym.envs.quant_arena.config import ExecutionModel, Windows
from quantgym.envs.quant_arena.data import load_dataset
from quantgym.envs.quant_arena.exchange import _round10
from quantgym.envs.quant_arena.metrics import signal_metrics
ds = load_dataset(None)
d0, _ = window_rows(ds, Windows().sealed_start, Windows().sealed_end)
n = 12
sc = np.round(np.random.default_rng(3).normal(size=(n, ds.N)), 1)   # ties
sc[:, ::7] = np.nan
out = {}
for top in (20, 75):
    r = run_account(ds, d0, n, sc, execution=ExecutionModel(top_n=top, initial_capital=2e6), record_trades=True)
    out[top] = (r.nav, r.cash, r.nav_open, r.fees, r.impact, r.partial, r.final_shares, r.trades)
sm = signal_metrics(sc, labels(ds, d0, n), ds.has_row[d0:d0 + n])
out["signal"] = (sm["_daily_ic"], sm["_daily_ls"], sm["quantile_returns_bp"])
out["round10"] = [_round10(0.005 * t) for t in range(1, 3000, 7)]
bunched = np.where(np.arange(300) == 0, -1.0, 1.0 + np.random.default_rng(4).integers(0, 40, (3, 300)) * 1e-7)
out["order"] = tuple(score_order(bunched))   # long runs of equal upper key bits: the 64-bit pass
sys.stdout.buffer.write(pickle.dumps(out))
"""


def test_compiled_kernels_equal_their_interpreted_source():
    # QUANTGYM_JIT=0 runs the account's day loop and the signal pass as plain Python: the same bits
    import os
    import pickle
    import subprocess
    import sys

    import quantgym

    root = str(Path(quantgym.__file__).resolve().parents[1])  # the checkout under test

    def run(jit):
        env = {**os.environ, "QUANTGYM_JIT": jit, "PYTHONPATH": root}
        return pickle.loads(subprocess.run([sys.executable, "-c", _KERNEL_CHECK], env=env, capture_output=True,
                                           check=True).stdout)

    compiled, interpreted = run("1"), run("0")
    assert compiled["order"][2].sum() > 500  # ties in the bunched rows
    assert len(compiled[75][-1]) > 100 and compiled["round10"] == [round(0.005 * t, 10) for t in range(1, 3000, 7)]
    for key in compiled:
        for a, b in zip(compiled[key], interpreted[key]):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
            else:
                assert a == b or (a != a and b != b) or all(x == y or (x != x and y != y) for x, y in zip(a, b))


def _score_order_cases():
    rng = np.random.default_rng(11)
    N = 300
    normal = rng.normal(size=(6, N))
    coarse = np.round(rng.normal(size=(6, N)), 1)  # many equal scores
    coarse[:, ::5] = np.nan
    signed_zero = rng.choice([-0.0, 0.0, 1.0, -1.0, np.nan], size=(4, N))
    # one outlier: every other score shares its 32-bit key's upper bits with many others; runs of 20-40
    # distinct scores (an insertion sort of the run), of ~300 (the row sorted again by 64-bit keys) and of ~300
    # scores a few ulps apart (whose 64-bit keys still tie)
    mid = np.where(np.arange(N) == 7, -1.0, rng.integers(1, 11, (4, N)) + rng.integers(0, 12, (4, N)) * 1e-9)
    wide = np.where(np.arange(N) == 7, -1.0, 1.0 + rng.integers(0, 200, (4, N)) * 1e-7)
    ulps = np.where(np.arange(N) == 7, -1.0, 1.0 + rng.integers(0, 400, (3, N)) * np.spacing(1.0))  # numpy's argsort
    return {"normal": normal, "coarse": coarse, "signed_zero": signed_zero, "mid": mid, "wide": wide, "ulps": ulps,
            "empty_rows": np.full((3, N), np.nan), "one_column": rng.normal(size=(5, 1))}


@pytest.mark.parametrize("case", sorted(_score_order_cases()))
def test_score_order_is_a_stable_argsort_of_minus_the_score(case):
    s = _score_order_cases()[case]
    so = score_order(s)
    for i in range(s.shape[0]):
        fin = np.flatnonzero(np.isfinite(s[i]))
        want = fin[np.argsort(-s[i, fin], kind="stable")]  # score descending, ties by column (§10.5)
        assert so.count[i] == fin.size
        np.testing.assert_array_equal(so.order[i, :fin.size], want)
        v = s[i, want]
        np.testing.assert_array_equal(so.tie[i, 1:fin.size], (v[1:] == v[:-1]).astype(np.uint8))
        assert so.tie[i, 0] == 0


@pytest.mark.parametrize("limits", [True, False])
def test_day_cells_are_the_panels_values(limits):
    # the day loop reads a stock's day from one record: the same values as the panels' (spec §10.6-§10.8)
    from quantgym.envs.quant_arena.account import _CLOSE, _DOWN, _MARK_OPEN, _OPEN, _RATIO, _UP, day_cells
    from quantgym.envs.quant_arena.data import load_dataset
    from quantgym.envs.quant_arena.exchange import book_inputs, impact_args

    ds = load_dataset(None)
    d0, n = 30, 40
    imp = impact_args(ImpactModel())
    cells = day_cells(ds, d0, n, limits, imp)
    assert cells.shape == (n, ds.N, 8) and not cells.flags.writeable and cells.ctypes.data % 64 == 0
    d, p = slice(d0 + 1, d0 + n + 1), slice(d0, d0 + n)
    C, F, O = ds.ffill("close"), ds.ffill("adj_factor"), ds.fields["open"]
    up, down, base = price_limits(ds)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(F[p] != 0, F[d] / F[p], np.nan)
    mark = np.where(ds.tradable[d], O[d], np.where(np.isfinite(base[d]), base[d], C[p]))
    sig, adv = book_inputs(ds, np.arange(d0, d0 + n), ImpactModel())
    want = {_OPEN: O[d], _CLOSE: C[d], _RATIO: ratio, _MARK_OPEN: mark, _UP: up[d] if limits else np.nan,
            _DOWN: down[d] if limits else np.nan, 6: sig, 7: adv}
    for f, v in want.items():
        np.testing.assert_array_equal(cells[:, :, f], np.broadcast_to(v, (n, ds.N)))
    assert day_cells(ds, d0, n, limits, imp) is cells  # one per window and setting
