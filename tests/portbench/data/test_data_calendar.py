"""Clean-mode calendar, forward fill and returns (spec §1.3, §11.6, §11.7, §11.8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.universe import CLASS_LABEL_MAP
from quantgym.envs.portbench.data import PortBenchData, PortBenchDataWarning

# NYSE days of the toy calendar: Thu 4, Fri 5, Mon 8, Tue 9, Wed 10 Jan 2024, then
# Thu 11, Fri 12, (Mon 15 = Martin Luther King day, closed), Tue 16 Jan 2024.
NYSE = pd.to_datetime(
    ["2024-01-04", "2024-01-05", "2024-01-08", "2024-01-09", "2024-01-10", "2024-01-11", "2024-01-12", "2024-01-16"]
)
ALL_DAYS = pd.date_range("2024-01-03", "2024-01-16", freq="D")  # crypto trades every day


def _raw():
    """Raw wide table on the mixed calendar: SPY on NYSE days only, BTC every UTC day."""
    spy = pd.Series(np.arange(len(NYSE), dtype=float) + 400.0, index=NYSE)
    # BTC UTC closes: Wed 3 = 80 (first row), Thu 4 = 90, Fri 5 = 100, Sat 6 = 110, Sun 7 = 121,
    # Mon 8 = 133.1, Tue 9 = 146.41, Wed 10 = 150, Thu 11 = 151, ..., Mon 15 = 155, Tue 16 = 156.
    btc_vals = [80.0, 90.0, 100.0, 110.0, 121.0, 133.1, 146.41] + [150.0 + k for k in range(7)]
    btc = pd.Series(btc_vals, index=ALL_DAYS)
    raw = pd.DataFrame({"SPY": spy, "BTC-USD": btc}).reindex(ALL_DAYS)
    raw.index.name = "date"
    return raw


CLASSES = {"SPY": "equity", "BTC-USD": "crypto"}


def test_calendar_drops_weekends_and_holidays():
    d = PortBenchData.from_frames(_raw(), CLASSES)
    # the calendar is the set of days with a SPY price: Sat 6, Sun 7, Sat 13, Sun 14 and the
    # MLK holiday Mon 15 are not trading days although BTC has rows on them
    assert list(d.dates) == list(NYSE)
    assert d.meta["calendar"] == "days with a SPY price"
    assert d.tickers == ("SPY", "BTC-USD")
    assert d.asset_class == ("equities", "cryptocurrency")


def test_crypto_weekend_compounded_prior_day():
    d = PortBenchData.from_frames(_raw(), CLASSES, crypto_close="prior_day")
    px = d.frame("prices")["BTC-USD"]
    r = d.frame("returns")["BTC-USD"]
    # prior_day (§11.7): NYSE day t carries the close of UTC day t-1.
    #   Thu 4 <- Wed 3 close 80, Fri 5 <- Thu 4 close 90, Mon 8 <- Sun 7 close 121,
    #   Tue 9 <- Mon 8 close 133.1, Wed 10 <- Tue 9 close 146.41.
    assert px["2024-01-04"] == 80.0 and px["2024-01-05"] == 90.0
    assert px["2024-01-08"] == 121.0 and px["2024-01-09"] == 133.1
    # Thu 4 is the first price: no earlier price -> NaN return.
    assert np.isnan(r["2024-01-04"])
    # Fri 5: 90/80 - 1 = 0.125.
    assert r["2024-01-05"] == pytest.approx(0.125)
    # Mon 8: 121/90 - 1 = 0.34444... = (100/90)(110/100)(121/110) - 1: the UTC Fri, Sat and
    # Sun moves are compounded into Monday, nothing is lost.
    assert r["2024-01-08"] == pytest.approx(121.0 / 90.0 - 1.0)
    assert r["2024-01-08"] == pytest.approx((100 / 90) * 1.1 * 1.1 - 1.0)
    # Tue 9: 133.1/121 - 1 = 0.10.
    assert r["2024-01-09"] == pytest.approx(0.10)
    # Over the MLK weekend: Tue 16 <- Mon 15 close 155; Fri 12 <- Thu 11 close 151, so
    # Tue 16 return = 155/151 - 1 (UTC Fri 12 .. Mon 15 compounded).
    assert r["2024-01-16"] == pytest.approx(155.0 / 151.0 - 1.0)
    # Product of daily returns equals the price ratio (no P&L lost).
    assert np.prod(1 + r.iloc[1:]) == pytest.approx(px.iloc[-1] / px.iloc[0])


def test_crypto_weekend_compounded_same_day():
    d = PortBenchData.from_frames(_raw(), CLASSES, crypto_close="same_day")
    r = d.frame("returns")["BTC-USD"]
    # same_day: Fri 5 = 100, Mon 8 = 133.1 -> 133.1/100 - 1 = 1.1^3 - 1 = 0.331.
    assert r["2024-01-08"] == pytest.approx(0.331)
    # Thu 4 = 90 and Wed 3 is not a trading day -> first price, return NaN.
    assert np.isnan(r["2024-01-04"])
    assert r["2024-01-05"] == pytest.approx(100 / 90 - 1)


def test_equity_has_no_weekend_effect():
    d = PortBenchData.from_frames(_raw(), CLASSES)
    r = d.frame("returns")["SPY"]
    # SPY 400, 401, ... on consecutive trading days: Mon 8 return = 402/401 - 1.
    assert r["2024-01-08"] == pytest.approx(402 / 401 - 1)
    assert d.real_price[:, 0].all()


def test_ffill_at_most_three_days_then_nan_and_return_after_gap():
    days = pd.bdate_range("2024-03-04", periods=10)  # Mon 4 .. Fri 15 March 2024
    spy = pd.Series(100.0 + np.arange(10), index=days)
    # TLT: real prices on rows 0, 1, then missing on rows 2..6 (5 days), real again on row 7..9.
    tlt = pd.Series([50.0, 51.0, np.nan, np.nan, np.nan, np.nan, np.nan, 56.1, 57.0, 57.0], index=days)
    d = PortBenchData.from_frames(pd.DataFrame({"SPY": spy, "TLT": tlt}), {"SPY": "equities", "TLT": "bonds"})
    j = d.ticker_index["TLT"]
    p, r, real = d.prices[:, j], d.returns[:, j], d.real_price[:, j]
    # rows 2, 3, 4 carry 51.0 forward (<= 3 trading days), rows 5, 6 are NaN
    np.testing.assert_array_equal(p[2:5], [51.0, 51.0, 51.0])
    assert np.isnan(p[5:7]).all()
    np.testing.assert_array_equal(real, [1, 1, 0, 0, 0, 0, 0, 1, 1, 1])
    # returns: NaN (first), 51/50-1 = 0.02, 0 on the three filled days, NaN without a price,
    # then 56.1/51 - 1 = 0.10 (P_t / P_last: the move over the gap is kept), 57/56.1 - 1, 0.
    assert np.isnan(r[0])
    assert r[1] == pytest.approx(0.02)
    np.testing.assert_array_equal(r[2:5], [0.0, 0.0, 0.0])
    assert np.isnan(r[5:7]).all()
    assert r[7] == pytest.approx(0.10)
    assert r[8] == pytest.approx(57.0 / 56.1 - 1)
    assert r[9] == 0.0  # a real unchanged price is a real 0 return
    # nothing lost: compounding the finite returns gives the total price change
    assert np.nanprod(1 + r) == pytest.approx(57.0 / 50.0)


def test_after_source_end_filled_three_days_then_nan():
    days = pd.bdate_range("2024-03-04", periods=8)
    spy = pd.Series(100.0 + np.arange(8), index=days)
    gld = pd.Series([10.0, 11.0] + [np.nan] * 6, index=days)
    d = PortBenchData.from_frames(pd.DataFrame({"SPY": spy, "GLD": gld}), {"SPY": "equity", "GLD": "commodity"})
    p = d.frame("prices")["GLD"].to_numpy()
    assert np.isfinite(p[:5]).all() and np.isnan(p[5:]).all()


def test_calendar_without_spy_uses_any_non_crypto_price():
    days = pd.date_range("2024-01-03", "2024-01-10", freq="D")
    tlt = pd.Series([1.0, 2, 3, np.nan, np.nan, 4, 5, 6], index=days)  # Sat 6 / Sun 7 missing
    btc = pd.Series(np.arange(8.0) + 10, index=days)
    d = PortBenchData.from_frames(pd.DataFrame({"TLT": tlt, "BTC-USD": btc}), {"TLT": "bond", "BTC-USD": "crypto"})
    assert list(d.dates) == [x for x in days if x.day_of_week < 5]
    assert d.meta["calendar"] == "days on which any non-crypto asset has a price"


def test_label_mapping_and_errors():
    assert CLASS_LABEL_MAP == {
        "equity": "equities", "bond": "bonds", "commodity": "commodities",
        "crypto": "cryptocurrency", "real_estate": "real_estate", "cash": "cash",
    }
    days = pd.bdate_range("2024-01-02", periods=5)
    raw = pd.DataFrame({c: np.linspace(1, 2, 5) for c in ["BIL", "VNQ", "GLD", "TLT", "SPY"]}, index=days)
    labels = {"BIL": "cash", "VNQ": "real_estate", "GLD": "commodity", "TLT": "bond", "SPY": "equity"}
    d = PortBenchData.from_frames(raw, labels)
    # canonical order: equities, bonds, commodities, real_estate, cryptocurrency, cash
    assert d.tickers == ("SPY", "TLT", "GLD", "VNQ", "BIL")
    assert d.asset_class == ("equities", "bonds", "commodities", "real_estate", "cash")
    np.testing.assert_array_equal(d.class_ids, [0, 1, 2, 3, 5])
    # §1.1 labels are accepted as well and give the same result
    d2 = PortBenchData.from_frames(raw, {k: CLASS_LABEL_MAP[v] for k, v in labels.items()})
    assert d2.asset_class == d.asset_class
    with pytest.raises(ValueError, match="unknown asset class label"):
        PortBenchData.from_frames(raw, {**labels, "GLD": "metal"})
    with pytest.raises(ValueError, match="crypto_close"):
        PortBenchData.from_frames(raw, labels, crypto_close="utc")


def test_duplicate_dates_rejected():
    days = pd.DatetimeIndex(["2024-01-02", "2024-01-03", "2024-01-03"])
    with pytest.raises(ValueError, match="duplicate dates"):
        PortBenchData.from_frames(pd.DataFrame({"SPY": [1.0, 2.0, 3.0]}, index=days), {"SPY": "equity"})


def test_unsorted_input_is_sorted_and_missing_ticker_warns():
    days = pd.bdate_range("2024-01-02", periods=4)
    raw = pd.DataFrame({"SPY": [1.0, 2.0, 3.0, 4.0]}, index=days)[::-1]
    with pytest.warns(PortBenchDataWarning) as caught:
        d = PortBenchData.from_frames(raw, {"SPY": "equity", "QQQ": "equity"}, tickers=["SPY", "QQQ"])
    said = [str(w.message) for w in caught]
    assert any("not in date order" in m for m in said) and any("QQQ" in m for m in said), said
    assert d.tickers == ("SPY",)
    assert d.dates.is_monotonic_increasing
    np.testing.assert_allclose(d.returns[1:, 0], [1.0, 0.5, 1 / 3])


def test_arrays_are_read_only_and_frames_labelled():
    d = PortBenchData.from_frames(_raw(), CLASSES)
    with pytest.raises(ValueError):
        d.prices[0, 0] = 1.0
    f = d.frame("prices")
    assert list(f.columns) == ["SPY", "BTC-USD"] and f.index.equals(d.dates)
    assert d.frame("macro").shape == (len(NYSE), 17)
    with pytest.raises(ValueError, match="unknown frame"):
        d.frame("volume")
    assert d.index_at("2024-01-07") == 1  # Sunday -> last trading day <= it is Fri 5
    assert d.window("2024-01-06", "2024-01-09") == slice(2, 4)
