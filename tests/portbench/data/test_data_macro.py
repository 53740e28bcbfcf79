"""Macro keys with publication lags and plateau collapse (spec §1.4, §11.8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.universe import (
    MACRO_KEYS,
    MACRO_SOURCES,
    collapse_plateaus,
    lagged_asof,
    macro_observations,
)
from quantgym.envs.portbench.data import PortBenchData

K = {k: j for j, k in enumerate(MACRO_KEYS)}


def _prices(days):
    return pd.DataFrame({"SPY": np.linspace(100, 110, len(days))}, index=days)


def test_macro_keys_order_and_sources():
    assert MACRO_KEYS == (
        "fed_funds_rate", "cpi_yoy", "unemployment", "gdp_growth_qoq", "t10y2y_spread", "t10y3m_spread",
        "breakeven_10y", "hy_oas", "ig_oas", "ted_spread", "mortgage_30y", "dgs_3m", "dgs_2y", "dgs_10y",
        "dgs_30y", "real_yield_10y", "vix",
    )
    lags = {m.key: m.lag_days for m in MACRO_SOURCES}
    assert lags["cpi_yoy"] == 45 and lags["unemployment"] == 45 and lags["gdp_growth_qoq"] == 120
    assert all(v == 1 for k, v in lags.items() if k not in ("cpi_yoy", "unemployment", "gdp_growth_qoq"))


def test_collapse_plateaus_keeps_first_date_of_each_run():
    idx = pd.date_range("2024-01-01", periods=7, freq="D")
    s = pd.Series([1.0, 1.0, 2.0, 2.0, np.nan, 2.0, 1.0], index=idx)
    out = collapse_plateaus(s)
    # runs (NaN dropped first): 1.0 from Jan 1, 2.0 from Jan 3 (Jan 4 and Jan 6 repeat it), 1.0 from Jan 7
    assert list(out.index.day) == [1, 3, 7]
    assert out.tolist() == [1.0, 2.0, 1.0]


def test_monthly_lag_45_days():
    # UNRATE-like monthly series: Jan 2024 = 3.7, Feb 2024 = 3.9 (FRED dates: the 1st).
    obs = macro_observations(pd.Series([3.7, 3.9], index=pd.to_datetime(["2024-01-01", "2024-02-01"])))
    dates = pd.to_datetime(["2024-02-14", "2024-02-15", "2024-03-16", "2024-03-17"])
    # Jan 1 + 45 days = Feb 15; Feb 1 + 45 days = Mar 17 (2024 is a leap year: Feb 1 + 28 = Feb 29,
    # + 29 = Mar 1, + 45 = Mar 17). So: NaN before Feb 15, Jan's 3.7 until Mar 16, Feb's 3.9 from Mar 17.
    got = lagged_asof(obs, 45, dates)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], [3.7, 3.7, 3.9])


def test_daily_forward_filled_table_gives_same_values_as_monthly():
    # The same monthly CPI, once native monthly, once forward-filled onto every day (the repo's
    # layout). Plateau collapse + first-of-month extraction must give identical cpi_yoy values.
    months = pd.date_range("2023-01-01", "2024-06-01", freq="MS")
    cpi = pd.Series(300.0 * 1.003 ** np.arange(len(months)), index=months)
    cpi.iloc[3] = cpi.iloc[2]  # an unchanged month (a genuine plateau)
    daily = cpi.reindex(pd.date_range("2023-01-01", "2024-06-30", freq="D")).ffill()
    days = pd.bdate_range("2024-01-02", "2024-09-30")
    a = PortBenchData.from_frames(_prices(days), {"SPY": "equity"}, macro=pd.DataFrame({"CPIAUCSL": cpi}))
    b = PortBenchData.from_frames(_prices(days), {"SPY": "equity"}, macro=pd.DataFrame({"CPIAUCSL": daily}))
    np.testing.assert_array_equal(a.macro[:, K["cpi_yoy"]], b.macro[:, K["cpi_yoy"]])
    np.testing.assert_array_equal(a.macro_mask, b.macro_mask)


def test_cpi_yoy_is_decimal_with_lag_and_gap():
    # CPI 2023-01 .. 2024-12 with Oct 2024 missing (like the 2025 shutdown gap in the data).
    months = pd.date_range("2023-01-01", "2024-12-01", freq="MS")
    cpi = pd.Series(np.linspace(300.0, 323.0, len(months)), index=months)
    cpi["2024-10-01"] = np.nan
    days = pd.bdate_range("2024-01-02", "2025-02-28")
    d = PortBenchData.from_frames(_prices(days), {"SPY": "equity"}, macro=pd.DataFrame({"CPIAUCSL": cpi}))
    v = d.frame("macro")["cpi_yoy"]
    # First yoy is Jan 2024 = CPI(2024-01)/CPI(2023-01) - 1 = 312/300 - 1 = 0.04 (a decimal, not 4.0),
    # usable from Jan 1 + 45 = Feb 15 2024.
    assert np.isnan(v["2024-02-14"])
    assert v["2024-02-15"] == pytest.approx(312.0 / 300.0 - 1.0)
    # Sep 2024 yoy (Sep 1 + 45 = Oct 16) = 320/308 - 1; the missing Oct obs never appears, so Sep's
    # value holds until Nov's is published (Nov 1 + 45 = Dec 16).
    assert v["2024-12-13"] == pytest.approx(320.0 / 308.0 - 1.0)
    assert v["2024-12-16"] == pytest.approx(322.0 / 310.0 - 1.0)


def test_gdp_qoq_is_decimal_with_120_day_lag():
    q = pd.Series([100.0, 101.0, 101.0], index=pd.to_datetime(["2023-01-01", "2023-04-01", "2023-07-01"]))
    days = pd.bdate_range("2023-07-03", "2024-01-31")
    d = PortBenchData.from_frames(_prices(days), {"SPY": "equity"}, macro=pd.DataFrame({"GDPC1": q}))
    v = d.frame("macro")["gdp_growth_qoq"]
    # Q2 change 101/100 - 1 = 0.01, dated 2023-04-01, + 120 days = 2023-07-30 (a Sunday): NaN on
    # Fri Jul 28, 0.01 on Mon Jul 31. Q3 change = 0 (dated Jul 1, usable Oct 29).
    assert np.isnan(v["2023-07-28"])
    assert v["2023-07-31"] == pytest.approx(0.01)
    assert v["2023-10-30"] == 0.0


def test_daily_series_lag_one_day_and_vix():
    days = pd.bdate_range("2024-01-01", "2024-01-12")  # Mon 1 .. Fri 12
    cal = pd.date_range("2024-01-01", "2024-01-12", freq="D")
    dff = pd.Series(np.arange(len(cal), dtype=float), index=cal)  # DFF has weekend rows; value = day - 1
    vix = pd.Series(np.arange(len(days), dtype=float) + 10, index=days)
    px = _prices(days)
    px["^VIX"] = vix
    d = PortBenchData.from_frames(px, {"SPY": "equity", "^VIX": "equity"}, macro=pd.DataFrame({"DFF": dff}))
    m = d.frame("macro")
    assert "^VIX" not in d.tickers  # macro only, never traded
    # value at d = observation of d - 1 day: Mon Jan 8 shows Sunday Jan 7's DFF (= 6)
    assert m.loc["2024-01-08", "fed_funds_rate"] == 6.0
    assert np.isnan(m.loc["2024-01-01", "fed_funds_rate"])
    # VIX lag 1: Mon Jan 8 shows Fri Jan 5's close (obs + 1 day = Sat <= Mon); Tue Jan 9 shows Mon's
    assert m.loc["2024-01-08", "vix"] == vix["2024-01-05"]
    assert m.loc["2024-01-09", "vix"] == vix["2024-01-08"]
    # the unlagged close is in data.vix
    np.testing.assert_array_equal(d.vix, vix.to_numpy())


def test_missing_series_stay_nan():
    days = pd.bdate_range("2024-01-02", periods=5)
    d = PortBenchData.from_frames(_prices(days), {"SPY": "equity"})
    assert np.isnan(d.macro).all() and not d.macro_mask.any()
    assert d.meta["macro_series"]["ted_spread"] == {"series": "TEDRATE", "available": False}
