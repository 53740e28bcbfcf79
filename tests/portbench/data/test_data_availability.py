"""§11.6 availability mask and the §1.9 regime helper."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.availability import availability_matrix, available_mask, market_regime


def _data():
    days = pd.bdate_range("2024-01-01", periods=100)
    rng = np.random.default_rng(0)
    spy = pd.Series(100 * np.cumprod(1 + rng.normal(0, 0.01, 100)), index=days)
    new = pd.Series(np.nan, index=days)
    new.iloc[70:] = 50 + np.arange(30.0)  # listed on row 70: first return on row 71
    gap = pd.Series(20.0 + np.arange(100.0), index=days)
    gap.iloc[80:90] = np.nan  # 10-day gap: rows 80-82 filled, 83-89 NaN
    raw = pd.DataFrame({"SPY": spy, "NEW": new, "GAP": gap})
    return PortBenchData.from_frames(raw, {"SPY": "equity", "NEW": "equity", "GAP": "bond"})


def test_available_mask_new_listing():
    d = _data()
    j = d.ticker_index["NEW"]
    # NEW has valid returns on rows 71..t; 20 of them first on row 90 (71..90)
    assert not available_mask(d, 89)[j]
    assert available_mask(d, 90)[j]
    # a stricter minimum moves the date accordingly (25 returns: row 95)
    assert not available_mask(d, 94, min_obs=25)[j] and available_mask(d, 95, min_obs=25)[j]


def test_available_mask_gap_and_window():
    d = _data()
    j = d.ticker_index["GAP"]
    # rows 80..82 are forward-filled (price present) -> available; 83..89 no price -> unavailable
    assert available_mask(d, 82)[j]
    assert not available_mask(d, 83)[j] and not available_mask(d, 89)[j]
    # row 90: a real price again, and the 60-row window 31..90 has 60 - 7 = 53 valid returns
    assert available_mask(d, 90)[j]
    # SPY's first return is row 1; with lookback 60 and min_obs 20 it is available from row 20
    s = d.ticker_index["SPY"]
    assert not available_mask(d, 19)[s] and available_mask(d, 20)[s]
    # §1.6 90-calendar-day cap: at row 90 (Mon 2024-05-06) it allows rows dated >= 2024-02-06
    # (row 26); the 60-row window (rows 31..90, from 2024-02-13) is inside it, so nothing changes
    assert available_mask(d, 90, window_days=90)[s]
    # a 10-day cap keeps rows >= 2024-04-26 (rows 84..90: 7 returns < 20) -> nobody is available
    assert not available_mask(d, 90, window_days=10).any()
    # a window shorter than min_obs can never be enough
    assert not available_mask(d, 99, lookback=10, min_obs=20).any()


def test_availability_matrix_matches_pointwise_mask():
    d = _data()
    A = availability_matrix(d)
    assert A.shape == (d.n_dates, d.n_assets) and A.dtype == bool
    for t in range(d.n_dates):
        np.testing.assert_array_equal(A[t], available_mask(d, t))
    assert np.array_equal(available_mask(d, -1), A[-1])
    with pytest.raises(IndexError):
        available_mask(d, d.n_dates)


def test_market_regime_thresholds():
    days = pd.bdate_range("2023-01-02", "2023-12-29")
    # At the last day d = Fri 2023-12-29 the window starts at the first trading day >= d - 126
    # calendar days = Fri 2023-08-25. Price 100 up to and including Aug 25, then 100*f, so
    # g = f - 1: crisis if g < -0.20, bear if g < -0.05, bull if g > 0.10, else sideways (§1.9).
    cases = [(0.75, "crisis"), (0.90, "bear"), (0.96, "sideways"), (1.05, "sideways"), (1.20, "bull")]
    for f, label in cases:
        px = pd.Series(100.0, index=days)
        px[px.index > "2023-08-25"] = 100.0 * f
        d = PortBenchData.from_frames(pd.DataFrame({"SPY": px}), {"SPY": "equity"})
        assert market_regime(d, -1) == label, f
    # on Aug 25 itself the window is Apr 21..Aug 25 at a flat price: g = 0 -> sideways
    assert market_regime(d, d.index_at("2023-08-25")) == "sideways"
