"""Sanity of the bundled real data and of the loader (spec §1.2–§1.5, §11.7, §11.8)."""

from __future__ import annotations

import importlib.resources
import json
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.universe import ASSET_CLASSES, CANONICAL_TICKERS, MACRO_KEYS, UNIVERSE
from quantgym.envs.portbench.data import (
    PortBenchData,
    PortBenchDataWarning,
    load_portbench_data,
    load_portbench_market,
)
from quantgym.envs.portbench.availability import availability_matrix, market_regime
from quantgym.envs.portbench.raw import load_portbench_raw
from quantgym.envs.portbench.raw import bundled_portbench_path


@pytest.fixture(scope="module")
def data() -> PortBenchData:
    return load_portbench_data()


def test_universe_constants():
    assert len(CANONICAL_TICKERS) == 80 and len(set(CANONICAL_TICKERS)) == 80
    assert {c: len(v) for c, v in UNIVERSE.items()} == {
        "equities": 25, "bonds": 15, "commodities": 16, "real_estate": 10, "cryptocurrency": 10, "cash": 4,
    }
    assert tuple(UNIVERSE) == ASSET_CLASSES
    assert CANONICAL_TICKERS[:3] == ("SPY", "QQQ", "IWM") and CANONICAL_TICKERS[-1] == "ICSH"
    assert "^VIX" not in CANONICAL_TICKERS
    assert load_portbench_market is load_portbench_data


def test_bundle_files_and_size():
    root = bundled_portbench_path()
    names = {p.name for p in root.iterdir()}
    assert {"prices.parquet", "assets.csv", "macro.parquet", "provenance.json", "PROVENANCE.md"} <= names
    with importlib.resources.as_file(root) as folder:
        total = sum(p.stat().st_size for p in folder.iterdir())
    assert total < 6 * 1024 * 1024
    prov = json.loads((root / "provenance.json").read_text())
    assert prov["window"] == ["2014-01-01", "2025-12-31"]
    assert "TEDRATE" in prov["macro"]["absent"]


def test_bundled_data_shape_and_calendar(data):
    assert data.tickers == CANONICAL_TICKERS  # all 80 present (BNB/MATIC end early but exist)
    assert data.asset_class == tuple(c for c in ASSET_CLASSES for _ in UNIVERSE[c])
    assert data.dates[0] == pd.Timestamp("2014-01-02") and data.dates[-1] == pd.Timestamp("2025-12-31")
    assert data.n_dates == 3018 and data.prices.shape == (3018, 80) and data.macro.shape == (3018, 17)
    assert not data.dates.has_duplicates and data.dates.is_monotonic_increasing
    assert (data.dates.day_of_week < 5).all()
    for holiday in ["2024-01-15", "2024-07-04", "2024-12-25", "2020-04-10"]:  # MLK, July 4, Xmas, Good Friday
        assert pd.Timestamp(holiday) not in data.dates
    # SPY has a real price on every trading day (it defines the calendar)
    assert data.real_price[:, data.ticker_index["SPY"]].all()


def test_spy_2024_total_return(data):
    px = data.frame("prices")["SPY"]
    r = data.frame("returns")["SPY"]
    total = px["2024-12-31"] / px["2023-12-29"] - 1
    assert 0.24 < total < 0.26  # SPY 2024 total return with dividends ~ +24.9 %
    assert np.prod(1 + r["2024"]) - 1 == pytest.approx(total, rel=1e-12)


def test_crypto_alignment_and_early_ends(data):
    raw = pd.read_parquet(bundled_portbench_path() / "prices.parquet")
    btc = data.frame("prices")["BTC-USD"]
    # prior_day: the price on NYSE Mon 2024-03-04 is the close of UTC Sun 2024-03-03
    assert btc["2024-03-04"] == raw.loc["2024-03-03", "BTC-USD"]
    r = data.frame("returns")["BTC-USD"]
    # Monday return compounds the UTC Fri, Sat and Sun moves: close(Sun)/close(Thu) - 1
    assert r["2024-03-04"] == pytest.approx(raw.loc["2024-03-03", "BTC-USD"] / raw.loc["2024-02-29", "BTC-USD"] - 1)
    cov = data.meta["ticker_coverage"]
    # BNB's source ends 2025-02-19 (UTC) -> last real NYSE price Thu 2025-02-20; MATIC ends 2025-03-18 -> 03-19
    assert cov["BNB-USD"]["last_date"] == "2025-02-20"
    assert cov["MATIC-USD"]["last_date"] == "2025-03-19"
    bnb = data.frame("prices")["BNB-USD"]
    assert bnb["2025-02-25"] == bnb["2025-02-20"] and np.isnan(bnb["2025-02-26"])  # 3-day fill, then NaN
    same = load_portbench_data(crypto_close="same_day")
    assert same.frame("prices").loc["2024-03-04", "BTC-USD"] == raw.loc["2024-03-04", "BTC-USD"]


def test_no_pnl_lost_over_full_history(data):
    # compounding every finite return reproduces last/first real price for every asset
    for j, t in enumerate(data.tickers):
        real = np.flatnonzero(data.real_price[:, j])
        ratio = data.prices[real[-1], j] / data.prices[real[0], j]
        assert np.nanprod(1 + data.returns[:, j]) == pytest.approx(ratio, rel=1e-9), t
    # non-crypto daily moves are plausible
    nc = [j for j, c in enumerate(data.asset_class) if c != "cryptocurrency"]
    assert np.nanmax(np.abs(data.returns[:, nc])) < 1.0


def test_availability_on_real_data(data):
    A = availability_matrix(data)
    idx = data.ticker_index
    t = data.index_at("2015-04-01")
    # early 2015: no ETH..MATIC yet, no XLRE/INDS/SGOV/CSHI -> 67 of 80 (spec §1.2: 67-68)
    assert A[t].sum() == 67
    assert not A[t, idx["XLRE"]] and A[t, idx["BTC-USD"]]
    assert A[data.index_at("2024-01-02")].all()
    assert not A[data.index_at("2025-06-02"), idx["BNB-USD"]]


def test_macro_on_real_data(data):
    m = data.frame("macro")
    assert list(m.columns) == list(MACRO_KEYS)
    assert m["ted_spread"].isna().all()  # TEDRATE is not in the data (§11.8)
    row = m.loc["2024-06-03"]
    # cpi_yoy at 2024-06-03 is the April 2024 value (Apr 1 + 45 = May 16 <= Jun 3 < May 1 + 45):
    # CPIAUCSL 313.023 / 302.845 - 1 = 0.03361 (a decimal)
    assert row["cpi_yoy"] == pytest.approx(313.023 / 302.845 - 1, abs=1e-6)
    assert 0.0 < row["fed_funds_rate"] < 6.0 and 3.0 < row["unemployment"] < 5.0
    assert -0.05 < row["gdp_growth_qoq"] < 0.05
    # every available key is defined through 2025 once its history has started
    late = m.loc["2016-01-04":]
    assert late.drop(columns="ted_spread").notna().all().all()
    assert market_regime(data, data.index_at("2020-03-23")) == "crisis"


def test_from_frames_equals_load(data):
    src = load_portbench_raw()
    raw, assets, macro = src["prices"], src["assets"], src["macro"]
    assert raw.shape == (4302, 81) and pd.Timestamp("2024-03-02") in raw.index  # crypto Saturday
    assert set(assets["class_label"]) == set(ASSET_CLASSES)
    assert src["provenance"]["window"] == ["2014-01-01", "2025-12-31"]
    d2 = PortBenchData.from_frames(
        raw, dict(zip(assets.ticker, assets.asset_class)), macro=macro, tickers=CANONICAL_TICKERS
    )
    assert d2.tickers == data.tickers and d2.dates.equals(data.dates)
    for f in ("prices", "returns", "real_price", "macro", "vix"):
        np.testing.assert_array_equal(getattr(d2, f), getattr(data, f))


def test_load_user_directory_missing_tickers_and_cache(tmp_path, data):
    root = bundled_portbench_path()
    raw = pd.read_parquet(root / "prices.parquet").drop(columns=["SGOV", "DOT-USD"])
    raw.to_parquet(tmp_path / "prices.parquet")
    with (root / "assets.csv").open("rb") as fh:
        (tmp_path / "assets.csv").write_bytes(fh.read())
    with pytest.warns(PortBenchDataWarning, match="DOT-USD, SGOV"):
        d = load_portbench_data(tmp_path)
    assert d.n_assets == 78 and "SGOV" not in d.tickers
    assert np.isnan(d.macro[:, :16]).all()  # no macro.parquet -> FRED keys NaN, vix from ^VIX
    assert np.isfinite(d.macro[-1, 16])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PortBenchDataWarning)
        assert load_portbench_data(tmp_path) is d  # cached
        sub = load_portbench_data(tmp_path, universe=["TLT", "SPY", "BTC-USD"])
    assert sub.tickers == ("SPY", "TLT", "BTC-USD")  # canonical order
    np.testing.assert_array_equal(sub.returns[:, 1], data.returns[:, data.ticker_index["TLT"]])
    assert load_portbench_data() is data


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_portbench_data(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="prices.parquet"):
        load_portbench_data(tmp_path)
    with pytest.raises(ValueError, match="crypto_close"):
        load_portbench_data(crypto_close="next_day")
    root = bundled_portbench_path()
    shutil.copyfile(str(root / "prices.parquet"), tmp_path / "prices.parquet")
    pd.DataFrame({"ticker": ["SPY"], "klass": ["equity"]}).to_csv(tmp_path / "assets.csv", index=False)
    with pytest.raises(ValueError, match="asset_class"):
        load_portbench_data(tmp_path)
