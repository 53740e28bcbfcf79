"""Hand-worked vectors of the three reference backtesters and the synthetic book (spec §9.16).

Every expected number below is worked out by hand in the comments (tick 0.01, L = 2).
"""

import math

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.market_bench.book import BookData, Fifo, SyntheticBook, max_drawdown
from quantgym.envs.market_bench.references import backtest_delta_hedge, backtest_pairs, backtest_scheduled

from .market_bench_vectors import (V1_BOOK, V1_C0, V1_SCHEDULE, V2_BOOK, V2_PARAMS, V3_BOOK, V3_DELTA, V3_PARAMS,
                                   V4_BOOK, V4_PARAMS, book)


def test_v1_scheduled_market_orders():
    r = backtest_scheduled(V1_BOOK, V1_SCHEDULE, V1_C0)
    # o1 (100, B400) -> r0: 200@10.00 + 200@10.01 -> cash 10,000 - 2,000 - 2,002 = 5,998
    # o2 (150, B500) -> r1: 10.01 has 300 - 200 consumed = 100 -> 100@10.01 (cash 4,997);
    #    10.02: cap floor(4,997/10.02) = 498 > 400 -> 400@10.02, cash 989
    # o3 (200, B300) -> r1: 10.01 synthetic 0 (skipped), 10.02 synthetic 100, cap floor(989/10.02) = 98
    #    -> 98@10.02, cash 7.04, 202 unfilled
    # o4 (350, S1200) -> r3: 200@10.02 + 300@10.01, 700 unfilled; FIFO closes 200@10.00 (+4.00),
    #    200@10.01 (0), 100@10.01 (0): realised +4.00, cash 5,014.04
    # o5 (500, S800) -> r4: 600@9.97 + 200@9.96 closes 400@10.02 (-20.00) and 98@10.02 (-4.90),
    #    opens shorts -102@9.97, -200@9.96; cash 12,988.04
    # o6 (500, B100) -> r4: 100@9.99 closes 100 of the OLDEST short lot (9.97): -2.00 (LIFO: -3.00)
    # o7 (600, B100): no row >= 600 -> expires, 100 unfilled
    assert r["final_cash"] == pytest.approx(11_989.04, abs=1e-9)
    assert r["final_position"] == -202
    assert r["realized_pnl"] == pytest.approx(4.00 - 20.00 - 4.90 - 2.00, abs=1e-9)  # -22.90
    # unrealised: 2·(9.97 − 9.98) + 200·(9.96 − 9.98) = −0.02 − 4.00 = −4.02 (raw mid 9.98)
    assert r["unrealized_pnl"] == pytest.approx(-4.02, abs=1e-9)
    assert r["final_equity"] == pytest.approx(11_989.04 - 202 * 9.98, abs=1e-9)  # 9,973.08
    assert r["final_equity"] == pytest.approx(V1_C0 + r["realized_pnl"] + r["unrealized_pnl"], abs=1e-6)
    # curve [10,000 | 9,994, 9,987.04, 9,992.03, 10,008.98, 9,973.08]: peak 10,008.98 -> dd 35.90
    assert r["equity_curve"] == pytest.approx([10_000, 9_994, 9_987.04, 9_992.03, 10_008.98, 9_973.08], abs=1e-9)
    assert r["max_drawdown"] == pytest.approx(35.90, abs=1e-9)
    assert (r["n_fills"], r["filled_qty"], r["unfilled_qty"]) == (10, 2_398, 1_002)  # 202 + 700 + 100
    # stats at r4: bid 9.97: 600 − 600 = 0, 9.96: 300 − 200 = 100 -> size 100, vwap 9.96;
    # ask 9.99: 300 − 100 = 200, 10.00: 400 − 200 (consumed at r0, still reserved) = 200 -> 400, 9.995
    assert (r["syn_bid_size"], r["syn_ask_size"]) == (100, 400)
    assert r["syn_bid_vwap"] == pytest.approx(9.96) and r["syn_ask_vwap"] == pytest.approx(9.995)


def test_v2_pairs():
    r = backtest_pairs(V2_BOOK, **V2_PARAMS)
    # r1-r3: s = 0.00, 0.02, 0.10; at r3 mu = 0.04, sigma = sqrt(0.0056/3) = 0.043205, z = 1.3887 -> SHORT
    # Q_A = floor(0.5·10,000/(20.10 + 0.5·40.00)) = 124, Q_B = floor(62.5) = 62
    # r4: SELL 124 limit 20.08 -> 100@20.08 (20.06 < limit stops), cash 12,008
    # r5: BUY 62 @40.01, cash 9,527.38; z = 0 -> exit; limits A BUY 100 @20.12 (synthetic book:
    #     bid 20.08 consumed, best bid 20.06), B SELL 62 @39.95
    # r6: 60@20.10 + 40@20.12 (realised −1.20 − 1.60), cash 7,516.58
    # r7: 40@39.96 (realised −2.00), 22 cancelled, cash 9,114.98; z = 1.4142 but SHORT cooldown to 1,420
    # r8: z = −1.3887 -> LONG; both orders expire (no later rows)
    assert r["final_cash"] == pytest.approx(9_114.98, abs=1e-9)
    assert (r["final_position_a"], r["final_position_b"]) == (0, 22)
    assert r["realized_pnl"] == pytest.approx(-4.80, abs=1e-9)
    assert r["unrealized_pnl"] == pytest.approx(22 * (39.98 - 40.01), abs=1e-9)  # -0.66
    assert r["final_equity"] == pytest.approx(9_994.54, abs=1e-9)
    assert r["equity_curve"] == pytest.approx(
        [10_000, 10_000, 10_000, 10_000, 10_000, 9_999.00, 9_997.76, 9_995.96, 9_994.54, 9_994.54], abs=1e-9)
    assert r["max_drawdown"] == pytest.approx(5.46, abs=1e-9)
    assert (r["n_entries"], r["n_exits"], r["n_orders"], r["n_fills"]) == (2, 1, 6, 5)
    assert (r["filled_qty_a"], r["filled_qty_b"]) == (200, 102)
    assert r["fill_vwap_a"] == pytest.approx(4_018.80 / 200)  # 20.094
    assert r["fill_vwap_b"] == pytest.approx(4_079.02 / 102)  # 39.990392
    assert r["final_z"] == pytest.approx(-1.388730, abs=1e-6)


def test_v4_pairs_equal_timestamps_file_order():
    # Task set v2 rule (docs/market_bench.md, "Task set v2"): the legs' rows may share a ts_event, A's first;
    # as_of at a row is the leg's last row at or before THIS row in the file. beta 1, W 3, z_in 1.2, delay 50.
    r = backtest_pairs(V4_BOOK, **V4_PARAMS)
    # r1 (100, B): s = 10.00 - 20.00 = -10.00; r2 (200, A): B as_of = r1 (r3 has the same ts but comes later)
    #   -> s = 10.10 - 20.00 = -9.90; r3: s = 10.10 - 20.10 = -10.00; z(r3) = (-10 + 9.9667)/0.04714 = -0.7071
    # r4 (300, A): s = 10.30 - 20.10 = -9.80 (B still r3); window [-9.90, -10.00, -9.80]: mu -9.90,
    #   sigma sqrt(0.02/3) = 0.08165, z = 1.2247 > 1.2 -> SHORT. Q_A = floor(0.5*10,000/(10.30 + 20.10)) = 164,
    #   Q_B = 164. A SELL 164 limit ceil(1030 - 2) -> 10.28; B BUY 164 limit from r3: floor(2010 + 2) -> 20.12.
    #   (a ts-based as_of sees the later B rows: s = -10.00, -10.00, -9.90 on r2..r4, z = 1.4142, Q_A = 163)
    # r5 (300, B): s = -9.90, z = 0; pending. r6 (400, A): SELL 164 -> 100@10.29 (L = 1), 64 cancelled;
    #   cash 11,029; equity 11,029 - 100*10.30 = 9,999.00. r7 (400, B): BUY 164 -> 164@20.11, cash 7,730.96;
    #   s = 10.30 - 20.10 = -9.80, window [-9.90, -9.90, -9.80] -> z = 1.4142 (SHORT, no exit).
    assert r["final_cash"] == pytest.approx(7_730.96, abs=1e-9)
    assert (r["final_position_a"], r["final_position_b"]) == (-100, 164)
    # unrealised: 100*(10.29 - 10.30) + 164*(20.10 - 20.11) = -1.00 - 1.64 = -2.64; realised 0
    assert r["realized_pnl"] == 0.0 and r["unrealized_pnl"] == pytest.approx(-2.64, abs=1e-9)
    assert r["final_equity"] == pytest.approx(7_730.96 - 1_030.00 + 164 * 20.10, abs=1e-9)  # 9,997.36
    assert r["equity_curve"] == pytest.approx([10_000] * 7 + [9_999.00, 9_997.36], abs=1e-9)
    assert r["max_drawdown"] == pytest.approx(2.64, abs=1e-9)
    assert (r["n_entries"], r["n_exits"], r["n_orders"], r["n_fills"]) == (1, 0, 2, 2)
    assert (r["filled_qty_a"], r["filled_qty_b"], r["fill_vwap_a"], r["fill_vwap_b"]) == (100, 164, 10.29, 20.11)
    assert r["final_z"] == pytest.approx(2 ** 0.5, abs=1e-9)


def test_v3_delta_hedge():
    r = backtest_delta_hedge(V3_BOOK, V3_DELTA, **V3_PARAMS)
    # t 1000: net 1,180 -> q = 100·floor(590/100) = 500 SELL, limit ceil(5000 − 2) = 49.98, due 1020
    #   r1 (1015) too early; r2 (1030): 300@49.99 + 200@49.98, cash 124,993, t_fill = 1000
    # t 1100, 1200: gap < 250 -> skipped; t 1300: BUY 200 limit 49.98 due 1320; t 1400 in flight
    # r4 (1420): FOK BUY 200 <= 49.98 finds only 100 -> killed (nothing consumed, t_fill stays 1000)
    # t 1500: gap 500 -> BUY 200 limit 49.98 due 1520 -> r5: 150@49.97 + 50@49.98, realised
    #   150·0.02 + 50·0.01 = 3.50, cash 114,998.50, position −300
    assert r["final_cash"] == pytest.approx(114_998.50, abs=1e-9)
    assert r["final_position"] == -300
    assert r["realized_pnl"] == pytest.approx(3.50, abs=1e-9)
    assert r["unrealized_pnl"] == pytest.approx(100 * 0.03 + 200 * 0.02, abs=1e-9)  # 7.00
    assert r["final_equity"] == pytest.approx(114_998.50 - 300 * 49.96, abs=1e-9)  # 100,010.50
    assert r["equity_curve"] == pytest.approx([100_000, 100_000, 100_000, 99_993, 100_013, 100_013, 100_010.50])
    assert r["max_drawdown"] == pytest.approx(7.00, abs=1e-9)
    assert (r["final_option_delta"], r["final_net_delta"]) == (100, -200)
    assert (r["n_hedges_sent"], r["n_hedges_filled"], r["n_hedges_killed"]) == (3, 2, 1)
    assert (r["n_fills"], r["filled_qty"]) == (4, 700)


def _one_row_book():
    # bids 9.99×100, 9.98×200, 9.97×300 | asks 10.01×100, 10.02×200, 10.03×300 (one symbol, three rows)
    rows = [(t, [(9.99, 100), (9.98, 200), (9.97, 300)], [(10.01, 100), (10.02, 200), (10.03, 300)]) for t in (1, 2, 3)]
    return BookData(book(rows, symbol="X"))


def test_synthetic_book_walk_consumption_persists():
    sb = SyntheticBook(_one_row_book())
    # buy 250 at market on row 0: 100@10.01 + 150@10.02 (two fills, two lots)
    assert sb.walk(0, True, 250) == [(1001, 100), (1002, 150)]
    # row 2 (same raw sizes): ask 10.01 is used up, 10.02 has 200 − 150 = 50 -> best ask 10.02
    assert sb.level_sizes(2, "ask") == [(1001, 0), (1002, 50), (1003, 300)]
    assert sb.best(2) == (999, 1002)
    # bid side untouched by buys
    assert sb.level_sizes(2, "bid") == [(999, 100), (998, 200), (997, 300)]
    # stats: ask size 50 + 300 = 350, vwap (10.02·50 + 10.03·300)/350
    bs, bv, as_, av = sb.stats(2)
    assert (bs, as_) == (600, 350) and av == pytest.approx((10.02 * 50 + 10.03 * 300) / 350)
    # limit from the synthetic book: m = (999 + 1002)/2 = 1000.5, s = 3; buy k=1 -> floor(1003.5) = 1003
    assert sb.limit_price(2, True, 1.0) == 1003 and sb.limit_price(2, False, 1.0) == math.ceil(1000.5 - 3)


def test_fok_killed_consumes_nothing_and_cash_cap():
    sb = SyntheticBook(_one_row_book())
    # FOK sell 400 within 9.98: available 100 + 200 = 300 < 400 -> killed, nothing consumed
    assert sb.available(0, False, 998) == 300
    assert sb.consumed == {}
    # cash cap: 1,500 cash buys floor(1500/10.01) = 149 > 100 -> 100@10.01 (cash 499),
    # then floor(499/10.02) = 49 at 10.02, then floor(0.02/10.03) = 0 -> stop
    assert sb.walk(0, True, 1000, cash=1500.0) == [(1001, 100), (1002, 49)]


def test_limit_price_in_currency_float_edge():
    # 30.87/0.01 = 3086.9999999999995 in binary floating point: ticks must come from rint
    df = book([(1, [(30.86, 100)], [(30.87, 100)])], symbol="X")
    b = BookData(df)
    assert b.ask_tk[0, 0] == 3087 and b.bid_tk[0, 0] == 3086
    # m = 3086.5, s = 1, k = 0.75: buy floor(3087.25 + 1e-6) = 3087, sell ceil(3085.75 − 1e-6) = 3086
    sb = SyntheticBook(b)
    assert sb.limit_price(0, True, 0.75) == 3087 and sb.limit_price(0, False, 0.75) == 3086


def test_fifo_vs_lifo_and_drawdown_example():
    f = Fifo()
    f.fill(100, 10.0)
    f.fill(100, 11.0)
    # selling 100 at 12 closes the OLDEST lot (10.00): +200 (LIFO would give +100)
    assert f.fill(-100, 12.0) == pytest.approx(200.0)
    # selling 150 at 12 closes 100@11 (+100) and opens a short lot of 50 at 12
    assert f.fill(-150, 12.0) == pytest.approx(100.0)
    assert f.position == -50 and list(f.lots) == [[-50, 12.0]]
    assert f.unrealized(11.5) == pytest.approx(25.0)
    # spec §9.7.6 example: C0 = 100, points 95, 97, 96 -> 5
    assert max_drawdown(100, [95, 97, 96]) == 5


def test_equity_identity_on_random_books():
    from quantgym.envs.market_bench.data import synthetic_book

    df = synthetic_book(3000, levels=3, seed=5)
    ts = df["ts_event"].to_numpy()
    rng = np.random.default_rng(1)
    sched = pd.DataFrame({"ts_event": np.sort(rng.integers(ts[0], ts[-1], 40)),
                          "side": rng.choice(["BUY", "SELL"], 40), "qty": rng.integers(1, 40, 40) * 100})
    r = backtest_scheduled(df, sched, 1e6)
    assert r["final_equity"] == pytest.approx(1e6 + r["realized_pnl"] + r["unrealized_pnl"], abs=1e-6)
    assert r["filled_qty"] + r["unfilled_qty"] == sched["qty"].sum()


def test_forward_fill_records_is_the_last_record_at_or_before_each_row():
    from quantgym.envs.market_bench.book import forward_fill_records

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, m = int(rng.integers(1, 40)), int(rng.integers(0, 15))
        rows = np.sort(rng.integers(0, n, m))  # several records on one row: the last wins
        vals = rng.standard_normal(m)
        want = [next((float(vals[i]) for i in range(m - 1, -1, -1) if rows[i] <= j), 7.5) for j in range(n)]
        got = forward_fill_records(n, rows, vals, 7.5)
        assert got.dtype == np.float64 and got.tolist() == want
