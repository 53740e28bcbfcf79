"""Point in time: data after a date never changes what is known at that date (§1.7, §11.6, §11.7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantgym.envs.portbench.universe import CANONICAL_TICKERS
from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.raw import bundled_portbench_path


@pytest.fixture(scope="module")
def raw():
    root = bundled_portbench_path()
    prices = pd.read_parquet(root / "prices.parquet")
    assets = pd.read_csv(root / "assets.csv")
    macro = pd.read_parquet(root / "macro.parquet")
    return prices, dict(zip(assets.ticker, assets.asset_class)), macro


@pytest.mark.parametrize("cut", ["2015-08-21", "2020-03-20", "2022-11-09"])
@pytest.mark.parametrize("crypto_close", ["prior_day", "same_day"])
def test_garbage_after_cut_leaves_rows_up_to_cut_unchanged(raw, cut, crypto_close):
    prices, classes, macro = raw
    rng = np.random.default_rng(7)
    c = pd.Timestamp(cut)
    p2, m2 = prices.copy(), macro.copy()
    # replace every price and macro observation dated after the cut with garbage (NaN stays NaN,
    # so the calendar is unchanged and the arrays keep their shape)
    later = p2.index > c
    p2.loc[later] = p2.loc[later].where(p2.loc[later].isna(), rng.uniform(1, 1e4, size=p2.loc[later].shape))
    later = m2.index > c
    m2.loc[later] = m2.loc[later].where(m2.loc[later].isna(), rng.uniform(-50, 50, size=m2.loc[later].shape))
    kw = dict(macro=None, tickers=CANONICAL_TICKERS, crypto_close=crypto_close)
    a = PortBenchData.from_frames(prices, classes, **{**kw, "macro": macro})
    b = PortBenchData.from_frames(p2, classes, **{**kw, "macro": m2})
    t = a.index_at(cut)
    assert b.dates.equals(a.dates) and a.dates[t] == c
    for f in ("prices", "returns", "real_price", "macro", "vix"):
        np.testing.assert_array_equal(getattr(a, f)[: t + 1], getattr(b, f)[: t + 1], err_msg=f)
    # and the garbage does reach the rows after the cut (the test is not vacuous)
    assert not np.array_equal(a.returns[t + 1 :], b.returns[t + 1 :], equal_nan=True)
    assert not np.array_equal(a.macro[t + 2 :], b.macro[t + 2 :], equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.floats(-0.5, 1.0), min_size=5, max_size=40),
    holes=st.lists(st.booleans(), min_size=40, max_size=40),
    limit=st.integers(0, 4),
)
def test_returns_never_lose_pnl(steps, holes, limit):
    n = len(steps)
    days = pd.bdate_range("2024-01-01", periods=n)
    px = 100 * np.cumprod(1 + np.asarray(steps))
    obs = pd.Series(px, index=days)
    obs[np.asarray(holes[:n]) & (np.arange(n) > 0)] = np.nan  # first day always observed
    d = PortBenchData.from_frames(
        pd.DataFrame({"SPY": np.ones(n), "X": obs}, index=days), {"SPY": "equity", "X": "bond"}, ffill_limit=limit
    )
    r, p, real = d.returns[:, 1], d.prices[:, 1], d.real_price[:, 1]
    last = np.flatnonzero(real)[-1]
    # product of finite returns = last real price / first price
    assert np.nanprod(1 + r) == pytest.approx(obs.dropna().iloc[-1] / obs.iloc[0], rel=1e-9)
    # filled days: return 0 and price = last real price; never more than `limit` in a row
    filled = np.isfinite(p) & ~real
    assert (r[filled] == 0).all()
    run = 0
    for k in range(n):
        run = run + 1 if filled[k] else 0
        assert run <= limit
    # NaN price <=> NaN return, except the very first observation (no earlier price)
    assert (np.isnan(r) == (np.isnan(p) | (np.arange(n) == 0))).all()
    assert last >= 0
