"""End-to-end anchors: bench numbers recomputed here from the raw bundled prices with plain numpy.

The golden outputs (tests/test_outputs_unchanged.py) are written by quantgym itself; these numbers
are not. Each anchor rebuilds a PortBench baseline's clean-mode backtest from
``quantgym/data/bundled/portbench/prices.parquet`` by the rules of docs/spec/portbench.md, in a plain
loop that shares no code with the package:

- §1.3/§11.6: NYSE days = the days with a SPY price; prices forward-filled at most 3 trading days;
  return ``P_t / P_last - 1`` on a real price (``P_last`` the last real price before it), 0 on a
  filled day; §11.7: the crypto price on day ``t`` is the close of UTC day ``t - 1``;
- §11.6: ``A_d`` = a price at ``d`` and >= 20 finite returns in the 60 return rows ending at ``d``;
- §6.1: NAV 1 held in equal weight over ``A`` at the close of the last trading day before the
  period; §6.2: each day marks to market (no return: 0) and drifts the weights, then trades on a
  rebalance date (§2.1 clean mode: the first trading day of each month; the last trading day of each
  week) to the baseline's weights rounded to 6 decimals (§8), as S3 weights normalised and rounded to 4
  (§4.3), at cost ``0.0015 * sum |dw| * NAV`` over ``|dw| >= 1e-6``, then holds the target
  renormalised to sum 1 (§4.4, §6.3);
- §7.1: Sharpe ``(mean(r) * 252 - 0.04) / (std(r, ddof=1) * sqrt(252))``, total return, max drawdown
  on the path with ``P_0 = 1`` prepended.

A change in the package that moves one of these numbers fails here whatever the golden file says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import quantgym

BUNDLE = Path(quantgym.__file__).parent / "data" / "bundled" / "portbench"
SIXTY_FORTY = {**dict.fromkeys(("SPY", "QQQ", "IWM", "VTI", "EEM", "ACWI"), 0.10),
               **dict.fromkeys(("TLT", "IEF", "BIL", "LQD", "HYG"), 0.08)}  # spec §8.2, clean mode


@pytest.fixture(scope="module")
def market():
    """(calendar, tickers, filled prices, returns) built from the raw bundle with pandas I/O and numpy."""
    px = pd.read_parquet(BUNDLE / "prices.parquet")
    if "date" in px.columns:
        px = px.set_index("date")
    assets = pd.read_csv(BUNDLE / "assets.csv", dtype=str)
    cls = dict(zip(assets["ticker"], assets["asset_class"]))
    tickers = [t for t in px.columns if t != "^VIX" and t in cls]
    cal = px.index[px["SPY"].notna().to_numpy()]
    cols = []
    for t in tickers:
        s = px[t].dropna()
        if cls[t] == "crypto":
            s.index = s.index + pd.Timedelta(days=1)
        cols.append(s.reindex(cal).to_numpy(float))
    raw = np.column_stack(cols)
    T, N = raw.shape
    filled, ret = raw.copy(), np.full((T, N), np.nan)
    last_real, last_seen, gap = np.full(N, np.nan), np.full(N, np.nan), np.zeros(N, int)
    for t in range(T):
        for i in range(N):
            if np.isfinite(raw[t, i]):
                ret[t, i] = raw[t, i] / last_real[i] - 1.0  # NaN before the first real price
                last_real[i] = last_seen[i] = raw[t, i]
                gap[i] = 0
            else:
                gap[i] += 1
                if np.isfinite(last_seen[i]) and gap[i] <= 3:
                    filled[t, i], ret[t, i] = last_seen[i], 0.0
    assert len(tickers) == 80  # the §1.2 clean-mode universe
    return cal, tickers, filled, ret


def _backtest(market, start, end, freq, target):
    cal, tickers, filled, ret = market

    def available(t):
        return np.isfinite(filled[t]) & (np.isfinite(ret[max(0, t - 59):t + 1]).sum(axis=0) >= 20)

    rows = np.flatnonzero((cal >= pd.Timestamp(start)) & (cal <= pd.Timestamp(end)))
    days = cal[rows]
    if freq == "monthly":
        key = days.year * 100 + days.month
        rebalance = {rows[k] for k in range(len(rows)) if k == 0 or key[k] != key[k - 1]}
    else:  # weekly: the last trading day of each calendar week (Monday-Sunday)
        key = (days - pd.to_timedelta(days.day_of_week, unit="D")).to_numpy()
        rebalance = {rows[k] for k in range(len(rows)) if k == len(rows) - 1 or key[k] != key[k + 1]}
    w = equal_weight(available(rows[0] - 1), tickers)  # §6.1: the start is equal weight for every agent
    nav, navs = 1.0, [1.0]
    for t in rows:
        grown = w * (1.0 + np.nan_to_num(ret[t], nan=0.0))
        nav *= grown.sum()
        w = grown / grown.sum()
        if t in rebalance:
            new = np.round(target(available(t), tickers), 6)  # §8: baseline outputs rounded to 6 decimals
            new = np.round(new / new.sum(), 4)  # §4.3: S3 weights normalised to sum 1, rounded to 4
            dw = np.abs(new - w)
            nav -= 0.0015 * dw[dw >= 1e-6].sum() * nav
            w = new / new.sum()  # §6.3
        navs.append(nav)
    navs = np.asarray(navs)
    r = navs[1:] / navs[:-1] - 1.0
    path = np.concatenate([[1.0], np.cumprod(1.0 + r)])
    return {"sharpe": (r.mean() * 252 - 0.04) / (r.std(ddof=1) * np.sqrt(252)),
            "total_return": navs[-1] - 1.0,
            "max_drawdown": (path / np.maximum.accumulate(path) - 1.0).min(),
            "volatility": r.std(ddof=1) * np.sqrt(252),
            "n_days": len(r), "n_rebalances": len(rebalance)}


def equal_weight(avail, tickers):
    return avail / avail.sum()


def sixty_forty(avail, tickers):
    w = np.array([SIXTY_FORTY.get(t, 0.0) for t in tickers]) * avail
    return w / w.sum()


#: (baseline key, period name, start, end, frequency, target, the numpy result rounded: sharpe,
#: total return %, max drawdown %) -- the rounded values pin the numpy reference itself
ANCHORS = [
    ("equal_weight", "normal_2024", "2024-01-01", "2024-12-31", "monthly", equal_weight, (1.164, 18.88, -7.01)),
    ("sixty_forty", "normal_2024", "2024-01-01", "2024-12-31", "monthly", sixty_forty, None),
    ("equal_weight", "covid_2020", "2020-02-01", "2020-05-31", "weekly", equal_weight, (-0.344, -3.86, None)),
]


@pytest.mark.parametrize("key, period, start, end, freq, target, rounded", ANCHORS,
                         ids=[f"{a[0]}-{a[1]}" for a in ANCHORS])
def test_baseline_metrics_equal_a_numpy_backtest_of_the_raw_prices(market, key, period, start, end, freq, target,
                                                                   rounded):
    from quantgym.envs.portbench.baselines import make_baseline
    from quantgym.evaluation import evaluate

    want = _backtest(market, start, end, freq, target)
    if rounded is not None:
        sharpe, ret_pct, mdd_pct = rounded
        assert round(want["sharpe"], 3) == sharpe and round(100 * want["total_return"], 2) == ret_pct
        assert mdd_pct is None or round(100 * want["max_drawdown"], 2) == mdd_pct
    got = evaluate("PortBench-Balanced-v0", make_baseline(key), period=period).metrics
    assert got["n_days"] == want["n_days"] and got["n_rebalances"] == want["n_rebalances"]
    for k in ("sharpe", "total_return", "max_drawdown", "volatility"):
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k


# ---------------------------------------------------------------------------------------- Quant-Arena
@pytest.mark.shared_data("quant_arena/daily.parquet")
def test_quant_arena_market_reference_2024_from_the_full_daily_panel():
    """Spec quant_arena §10.10: ``ref_k`` = mean over the stocks tradable on day k (a row, volume > 0, not
    suspended) with a row on the previous panel day of ``adj_close_k / adj_close_{k-1} - 1``, compounded from
    1 at the last day before 2024. Recomputed from the full raw panel (the shipped series and every run's
    market column derive from it) and compared with the spec's anchors and with the bench's reference."""
    from quantgym._util import shared_data_dir
    from quantgym.envs.quant_arena.data import load_dataset
    from quantgym.envs.quant_arena.executor import reference_only

    cols = ["date", "symbol", "close", "adj_factor", "volume", "suspended"]
    p = pd.read_parquet(shared_data_dir() / "quant_arena" / "daily.parquet", columns=cols)
    p = p.sort_values(["symbol", "date"], kind="mergesort")
    days, code = np.unique(pd.to_datetime(p["date"]).to_numpy(), return_inverse=True)
    sym = p["symbol"].to_numpy()
    adj = p["close"].to_numpy(np.float64) * p["adj_factor"].to_numpy().astype(np.float64)
    prev = np.zeros(len(p), bool)
    prev[1:] = (sym[1:] == sym[:-1]) & (code[1:] == code[:-1] + 1)
    ret = np.full(len(p), np.nan)
    ret[1:] = adj[1:] / adj[:-1] - 1.0
    ok = prev & ~p["suspended"].to_numpy() & (p["volume"].to_numpy() > 0) & np.isfinite(ret)
    n = np.bincount(code[ok], minlength=len(days))
    ref = np.bincount(code[ok], weights=ret[ok], minlength=len(days)) / np.maximum(n, 1)
    inside = (days >= np.datetime64("2024-01-01")) & (days <= np.datetime64("2024-12-31"))
    path = np.concatenate([[1.0], np.cumprod(1.0 + ref[inside])])
    r = path[1:] / path[:-1] - 1.0
    want = {"total_return": path[-1] - 1.0, "arr": path[-1] ** (242 / r.size) - 1.0,
            "max_drawdown": (path / np.maximum.accumulate(path) - 1.0).min(),
            "sharpe": r.mean() / r.std(ddof=1) * np.sqrt(242)}
    # the spec's anchors (§10.10): end 1.0434, low 0.7022 on 2024-02-05, max drawdown -29.88 %, ARR 4.34 %
    assert round(path[-1], 4) == 1.0434 and round(path.min(), 4) == 0.7022
    assert str(days[inside][np.argmin(path[1:])])[:10] == "2024-02-05"
    assert round(100 * want["max_drawdown"], 2) == -29.88 and round(100 * want["arr"], 2) == 4.34
    assert 5005 <= n[inside].min() and n[inside].max() <= 5075
    got = reference_only(load_dataset(), "2024-01-01", "2024-12-31")
    assert got["n_days"] == r.size
    for k, v in want.items():  # the shipped series keeps 10 significant digits a day
        assert got[k] == pytest.approx(v, rel=1e-8, abs=1e-10), k
