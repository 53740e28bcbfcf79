"""Readers of the shipped real LOB files into the book schema (spec market_bench §9.2)."""

import numpy as np
import pandas as pd
import pytest

from quantgym._util import shared_data_dir
from quantgym.data.sse_l2 import load_sse_l2_day
from quantgym.envs.market_bench.data import real_book, source_path
from quantgym.envs.market_bench.lob import (book_columns, clean_book, lobster_time_to_ns, read_databento_mbp,
                                           read_lobster, sse_book)


def _msft_raw():
    return read_lobster(source_path("msft_message"), source_path("msft_orderbook"), symbol="MSFT", date="2012-06-21")


def test_lobster_time_is_exact_decimal():
    # 35999.954513652 s -> 35,999 * 1e9 + 954,513,652 ns (never through float)
    assert lobster_time_to_ns(["35999.954513652", "36000.1", "36000"]).tolist() == [
        35_999_954_513_652, 36_000_100_000_000, 36_000_000_000_000]


def test_lobster_msft_counts_units_and_times():
    raw = _msft_raw()
    assert raw.shape == (1000, 2 + 4 * 10)  # derived top-10 file: 10 levels
    assert len(raw.drop_duplicates(subset=["symbol", "ts_event"], keep="last")) == 893  # step (b)
    b = clean_book(raw, 3)
    assert len(b) == 692  # step (d), spec §9.2.5
    assert list(b.columns) == book_columns(3)
    # 2012-06-21 00:00 New York = 1,340,251,200,000,000,000 ns; first message 35999.954513652 s
    assert b["ts_event"].iloc[0] == 1_340_287_199_954_513_652
    assert b["ts_event"].iloc[-1] == 1_340_287_202_746_898_622
    # USD (LOBSTER integer / 10,000): first raw mid 30.885
    assert (b["bid_px_00"].iloc[0] + b["ask_px_00"].iloc[0]) / 2 == pytest.approx(30.885, abs=1e-12)
    assert b["bid_px_00"].between(30.8, 30.9).all() and b["ask_px_00"].between(30.8, 30.9).all()
    assert (b["bid_px_00"] < b["ask_px_00"]).all()
    assert (b["bid_px_00"] > b["bid_px_01"]).all() and (b["ask_px_00"] < b["ask_px_01"]).all()
    assert (b[[c for c in b.columns if "_sz_" in c]] >= 1).all().all()


def test_lobster_tsla_sample():
    t = read_lobster(source_path("tsla_message"), source_path("tsla_orderbook"))
    assert t["symbol"].iloc[0] == "TSLA" and len(t) == 50
    assert len(clean_book(t, 3)) == 26  # spec §9.2.5
    assert t["ask_px_00"].between(213.0, 214.0).all()


def test_sse_day_tables_units():
    d = load_sse_l2_day()
    assert {k: len(v) for k, v in d.items()} == {"snapshots": 5146, "trades": 18685, "orders": 45764}
    s, t = d["snapshots"], d["trades"]
    # shares (not x1000): traded volume matches the last snapshot's cumulative volume, 2,432,171 shares
    assert int(t["qty"].sum()) == 2_432_171 == int(s["total_volume"].iloc[-1])
    # CNY (not x1000): traded prices 1787.73 .. 1808.80
    assert t["price"].min() == pytest.approx(1787.73) and t["price"].max() == pytest.approx(1808.80)
    assert set(t["side"]) == {"B", "S", "N"} and set(d["orders"]["ord_type"]) == {"A", "D"}
    assert str(s["time"].dt.tz) == "Asia/Shanghai"
    # first snapshot DataTimeStamp 84521 = 08:45:21 Asia/Shanghai = 00:45:21 UTC = 1,675,730,721 s
    assert s["ts_event"].iloc[0] == 1_675_730_721_000_000_000
    assert s["ts_event"].iloc[0] == int(pd.Timestamp("2023-02-07 08:45:21", tz="Asia/Shanghai").value)


def test_sse_book_window_and_cleaning():
    b = clean_book(sse_book(levels=10), 3)
    assert len(b) == 4635  # spec §9.2.5
    local = pd.to_datetime(b["ts_event"], utc=True).dt.tz_convert("Asia/Shanghai")
    assert str(local.iloc[0].time()) == "09:30:00" and str(local.iloc[-1].time()) == "14:56:58"
    assert (local.dt.hour < 12).sum() == 2361 and (local.dt.hour >= 13).sum() == 2274
    assert (b["bid_px_00"].iloc[0] + b["ask_px_00"].iloc[0]) / 2 == pytest.approx(1806.87)
    assert (b["bid_px_00"] < b["ask_px_00"]).all()
    assert real_book("sse_morning").shape[0] == 2361 and real_book("sse_afternoon").shape[0] == 2274
    assert real_book("sse_day").shape[0] == 4635 and real_book("msft").shape[0] == 692


def test_clean_book_steps_on_a_tiny_book():
    # rows: crossed (dropped by a), duplicate ts (keep last, b), repeat of the previous state (d)
    df = pd.DataFrame({
        "ts_event": [1, 2, 3, 3, 4], "symbol": ["X"] * 5,
        "bid_px_00": [10.0, 10.2, 10.0, 10.0, 10.0], "bid_sz_00": [5, 5, 7, 5, 5],
        "ask_px_00": [10.1, 10.1, 10.1, 10.1, 10.1], "ask_sz_00": [5, 5, 5, 5, 5],
    })
    out = clean_book(df, 1)
    # row 1 crossed -> dropped; ts 3 keeps its last row (size 5); that equals row 0 -> dropped; ts 4 also equal
    assert out["ts_event"].tolist() == [1]


def test_databento_mbp10_fixture():
    pytest.importorskip("databento")
    b = read_databento_mbp(source_path("dbn_nvda"))
    assert len(b) == 4 and b["symbol"].iloc[0] == "NVDA"
    assert b["ts_event"].dtype == np.int64 and b["ts_event"].iloc[0] > 1_600_000_000 * 10**9
    c = clean_book(b, 3)
    assert len(c) == 2 and (c["bid_px_00"] < c["ask_px_00"]).all()
    q = read_databento_mbp(source_path("dbn_qqq"))
    assert len(clean_book(q, 3)) == 0  # clear records and one-sided books are dropped by step (a)


def test_paper_preprocess_keeps_prices_randomises_sizes():
    from quantgym.envs.market_bench.data import paper_preprocess

    raw = _msft_raw()
    a = paper_preprocess(raw, np.random.default_rng(1))
    b = clean_book(raw, 3)
    assert list(a.columns) == book_columns(3) and len(a) == 692
    px = [c for c in a.columns if "_px_" in c]
    pd.testing.assert_frame_equal(a[px], b[px])  # prices (so raw mids and spreads) untouched
    sz = a[[c for c in a.columns if "_sz_" in c]].to_numpy()
    assert sz.min() >= 100 and sz.max() <= 2000 and not (sz % 100).any()


@pytest.mark.shared_data("quant_arena")
def test_bundled_sse_tables_match_the_raw_source():
    src = shared_data_dir() / "quant_arena" / "intraday" / "sse_600519_20230207"
    raw, shipped = load_sse_l2_day(src), load_sse_l2_day()
    for key in ("snapshots", "trades", "orders"):
        pd.testing.assert_frame_equal(raw[key].reset_index(drop=True), shipped[key].reset_index(drop=True),
                                      check_dtype=False)
