"""Data, point-in-time view and bundled universe (spec quant_arena.md §10.1, §10.3, §10.6, §10.8)."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from quantgym._util import shared_data_dir
from quantgym.envs.quant_arena.config import ImpactModel
from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset
from quantgym.envs.quant_arena.exchange import book_inputs, price_limits
from quantgym.envs.quant_arena.pit import VIEW_FIELDS, LookAheadError, make_view

from .conftest import make_panel

SHARED = shared_data_dir() / "quant_arena" / "daily.parquet"


def _ex_date_panel() -> ArenaDataset:
    # stock A: close 20.00 with f = 1.00, then an ex-date (f 1.05) opening at 19.10; B plain
    d = ["2024-03-01", "2024-03-04", "2024-03-05", "2024-03-06", "2024-03-07"]
    rows = [
        {"date": d[0], "symbol": "SH600000", "open": 19.80, "close": 20.00, "adj_factor": 1.00},
        {"date": d[1], "symbol": "SH600000", "open": 20.00, "close": 20.00, "adj_factor": 1.00},
        {"date": d[2], "symbol": "SH600000", "open": 19.10, "close": 19.20, "adj_factor": 1.05},
        {"date": d[3], "symbol": "SH600000", "open": 19.30, "close": 19.50, "adj_factor": 1.05},
        {"date": d[4], "symbol": "SH600000", "open": 19.60, "close": 19.40, "adj_factor": 1.10},
    ]
    rows += [{"date": x, "symbol": "SZ000001", "open": 10.0 + i, "close": 10.5 + i} for i, x in enumerate(d)]
    return make_panel(rows, info={"SH600000": {"list_date": "2001-01-01"}, "SZ000001": {"list_date": "1991-04-03"}})


def test_adjusted_prices_point_in_time():
    ds = _ex_date_panel()
    v = make_view(ds, "2024-03-06")
    adj = v.history("adj_close", 10)["SH600000"]
    raw = v.history("close", 10)["SH600000"]
    # (ii) last row equals the raw row
    assert adj.iloc[-1] == raw.iloc[-1] == 19.50
    # forward-adjusted as of t: 20.00 * 1.00/1.05 before the ex-date; the later factor 1.10 is never used
    assert adj.iloc[0] == pytest.approx(20.00 / 1.05)
    # (iii) adjusted returns across the ex-date equal (close*adj_factor).pct_change()
    full = ds.fields["close"][:4, 0] * ds.fields["adj_factor"][:4, 0]
    assert np.allclose(adj.pct_change().to_numpy()[1:], pd.Series(full).pct_change().to_numpy()[1:])
    # limits on the ex-date: base r2(20.00*1.00/1.05) = r2(19.0476) = 19.05 -> up 20.96 (not 22.00)
    up, down, base = price_limits(ds)
    assert base[2, 0] == 19.05 and up[2, 0] == 20.96 and down[2, 0] == 17.15
    assert v.history("up_limit", 3)["SH600000"].tolist() == [22.0, 20.96, pytest.approx(19.2 * 1.1, abs=0.006)]


def test_view_unchanged_by_later_rows_and_factors():
    # (i) change every row and factor after t: every view output at t is unchanged
    ds = _ex_date_panel()
    t = "2024-03-05"
    v1 = make_view(ds, t)
    ds2 = _ex_date_panel()
    for name, a in ds2.fields.items():
        a[3:] = a[3:] * 1.37 + 0.5
    ds2.suspended[3:] = True
    v2 = make_view(ds2, t)
    for f in VIEW_FIELDS:
        pd.testing.assert_frame_equal(v1.history(f, 242), v2.history(f, 242))
    assert list(v1.symbols) == list(v2.symbols) and v1.date == v2.date


def test_view_shape_fields_and_errors():
    ds = _ex_date_panel()
    v = make_view(ds, "2024-03-05")
    h = v.history("close", 2)
    assert list(h.index.strftime("%Y-%m-%d")) == ["2024-03-04", "2024-03-05"]
    assert list(h.columns) == ["SH600000", "SZ000001"] and h.dtypes.eq(np.float64).all()
    assert len(v.history("close", 242)) == 3  # min(lookback, available)
    h.iloc[0, 0] = -1.0  # a returned frame is a copy
    assert v.history("close", 2).iloc[0, 0] == 20.00
    for bad in (0, 243, 2.5, "5", True):
        with pytest.raises(ValueError, match="lookback"):
            v.history("close", bad)
    with pytest.raises(KeyError, match="unknown field"):
        v.history("adj_factor", 5)  # the factor level is never exposed
    with pytest.raises(KeyError, match="no intraday"):
        v.intraday("trades")
    with pytest.raises(LookAheadError, match="2024-03-06.*2024-03-05"):
        v.intraday("trades", "2024-03-06")
    assert list(v.info.columns) == ["industry", "board", "list_date"]
    assert v.info.loc["SZ000001", "board"] == "main"


def test_suspended_flag_includes_zero_volume_and_missing_rows():
    rows = [
        {"date": "2024-03-01", "symbol": "SH600000", "open": 10.0, "close": 10.0},
        {"date": "2024-03-04", "symbol": "SH600000", "open": 10.0, "close": 10.0, "volume": 0},  # not flagged
        {"date": "2024-03-04", "symbol": "SZ300999", "open": 30.0, "close": 31.0},  # listed on 03-04
    ]
    ds = make_panel(rows)
    assert ds.suspended[1, 0] and not ds.tradable[1, 0]
    v = make_view(ds, "2024-03-04")
    s = v.history("suspended", 2)
    assert s.loc["2024-03-04", "SH600000"] == 1.0
    assert np.isnan(s.loc["2024-03-01", "SZ300999"])  # NaN before the first row
    v0 = make_view(ds, "2024-03-01")
    assert list(v0.symbols) == ["SH600000"]  # symbols with a row on view.date
    # the listing day has no limits
    up, _, _ = price_limits(ds)
    assert np.isnan(up[1, 1])


def test_registration_ipo_five_free_rows():
    dates = [str(d.date()) for d in pd.bdate_range("2024-03-01", periods=8)]
    rows = [{"date": d, "symbol": "SH688999", "open": 50.0, "close": 50.0} for d in dates]
    rows += [{"date": d, "symbol": "SH600999", "open": 5.0, "close": 5.0} for d in dates]
    ds = make_panel(rows, info={"SH688999": {"list_date": dates[0]}, "SH600999": {"list_date": dates[0]}})
    up, _, _ = price_limits(ds)
    assert list(ds.symbols) == ["SH600999", "SH688999"]
    assert np.isnan(up[:5, 1]).all() and up[5, 1] == 60.0       # STAR: 20 %, first 5 rows free
    assert np.isnan(up[:5, 0]).all() and up[5, 0] == 5.5        # main board listed after 2023-04-10


def test_bundled_universe(bundled):
    assert bundled.N == 800 and bundled.T == 969
    assert (BUNDLED_DIR / "daily_default.parquet").stat().st_size <= 15 * 2**20
    first = bundled.dates < np.datetime64("2022-01-01")
    assert (bundled.fields["in_csi300"][first] == 1).any(axis=0).sum() == 317
    assert "SH600519" in bundled.symbols
    assert set(bundled.info["board"]) <= {"main", "chinext", "star"}
    assert "name" not in bundled.info.columns
    # §10.8 calibration inputs for 600519 at t = 2023-02-06: σ = 0.015527, ADV = 2,916,841
    t = bundled.index_of("2023-02-06")
    j = int(np.searchsorted(bundled.symbols, "SH600519"))
    sig, adv = book_inputs(bundled, [t], ImpactModel())
    assert sig[0, j] == pytest.approx(0.015527, abs=1e-6) and adv[0, j] == pytest.approx(2_916_841, abs=1)
    # spot check: 600519 close 1524.00 on 2024-12-31
    assert bundled.fields["close"][bundled.index_of("2024-12-31"), j] == 1524.00


def test_bundled_intraday_through_the_view(bundled):
    v = make_view(bundled, "2023-02-07")
    tr = v.intraday("trades")
    assert int(tr["qty"].sum()) == 2_432_171  # equals the daily volume of 600519
    with pytest.raises(LookAheadError):
        make_view(bundled, "2023-02-06").intraday("trades", "2023-02-07")


def test_load_dataset_from_parquet_path(tmp_path):
    ds = _ex_date_panel()
    df = pd.DataFrame({"date": np.repeat(ds.dates, 2), "symbol": np.tile(ds.symbols, ds.T),
                       "open": ds.fields["open"].ravel(), "high": ds.fields["high"].ravel(),
                       "low": ds.fields["low"].ravel(), "close": ds.fields["close"].ravel(),
                       "volume": ds.fields["volume"].ravel(), "adj_factor": ds.fields["adj_factor"].ravel(),
                       "suspended": ds.suspended.ravel(), "in_csi300": False})
    p = tmp_path / "daily.parquet"
    df.to_parquet(p)
    ds2 = load_dataset(p)
    assert np.array_equal(ds2.fields["close"], ds.fields["close"])
    with pytest.raises(ValueError, match="missing required column"):
        ArenaDataset.from_frame(df.drop(columns=["open"]))
    with pytest.raises(ValueError, match="duplicate"):
        ArenaDataset.from_frame(pd.concat([df, df.iloc[:1]]))
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "nope.parquet")


def test_truncate_removes_later_rows(bundled):
    r = bundled.truncate("2023-12-31")
    assert str(r.dates[-1]) == "2023-12-29"
    assert r.reference_returns().index.max() <= pd.Timestamp("2023-12-31")
    assert all(d <= "2023-12-31" for d in r.intraday())


@pytest.mark.slow
@pytest.mark.shared_data("quant_arena")
def test_build_script_reproduces_the_bundled_universe(tmp_path):
    from quantgym.envs.quant_arena.build_data import build

    out = build(SHARED.parent, tmp_path)
    assert out["n_symbols"] == 800 and out["n_csi300_2021"] == 317
    a = pd.read_parquet(tmp_path / "daily_default.parquet")
    b = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    pd.testing.assert_frame_equal(a, b)
    assert (tmp_path / "market_reference.csv").read_text() == (BUNDLED_DIR / "market_reference.csv").read_text()


def test_st_flag_uses_five_percent_on_the_main_board():
    # §10.16 C: base 10.05 -> ST main board 10.55 / 9.55; ST on ChiNext keeps 20 %
    rows = []
    for s in ("SH600000", "SZ300001"):
        rows.append({"date": "2024-03-01", "symbol": s, "open": 10.0, "close": 10.05, "st": True})
        rows.append({"date": "2024-03-04", "symbol": s, "open": 10.0, "close": 10.0, "st": True})
    ds = make_panel(rows, info={"SH600000": {"list_date": "2000-01-04"}, "SZ300001": {"list_date": "2010-01-04"}})
    up, down, _ = price_limits(ds)
    assert (up[1, 0], down[1, 0]) == (10.55, 9.55)
    assert (up[1, 1], down[1, 1]) == (12.06, 8.04)


def test_qlib_directory_loader(tmp_path):
    # a two-stock qlib folder: float32 bins whose first value is the calendar start index; prices adjusted
    cal = ["2024-03-01", "2024-03-04", "2024-03-05"]
    (tmp_path / "calendars").mkdir()
    (tmp_path / "calendars" / "day.txt").write_text("\n".join(cal) + "\n")
    (tmp_path / "instruments").mkdir()
    (tmp_path / "instruments" / "csi300.txt").write_text("SH600000\t2024-03-04\t2024-12-31\n")
    raw = {"SH600000": ([10.0, 10.1, 10.2], [1.0, 1.0, 2.0], 0), "SZ000001": ([5.0, 5.5], [3.0, 3.0], 1)}
    for sym, (px, fac, start) in raw.items():
        d = tmp_path / "features" / sym.lower()
        d.mkdir(parents=True)
        for f in ("open", "high", "low", "close"):
            np.array([start] + [p * k for p, k in zip(px, fac)], dtype="<f4").tofile(d / f"{f}.day.bin")
        np.array([start] + [1000.0] * len(px), dtype="<f4").tofile(d / "volume.day.bin")
        np.array([start] + fac, dtype="<f4").tofile(d / "factor.day.bin")
    ds = load_dataset(tmp_path)
    assert list(ds.symbols) == ["SH600000", "SZ000001"]
    assert ds.fields["close"][:, 0].tolist() == [10.0, 10.1, 10.2]          # raw = adjusted / factor
    assert np.isnan(ds.fields["close"][0, 1]) and ds.fields["close"][2, 1] == 5.5
    assert ds.fields["in_csi300"][:, 0].tolist() == [0.0, 1.0, 1.0]


@pytest.mark.slow
@pytest.mark.shared_data("quant_arena")
def test_limit_anchors_on_the_full_panel():
    # §10.6: 18.3 buy-blocked and 4.8 sell-blocked stocks per day in 2024, 116 sell-blocked on 2024-02-06;
    # 110 ex-date closes sit exactly on the computed up-limit
    ds = load_dataset(SHARED)
    assert ds.N == 5086 and ds.info["list_date"].notna().sum() == 5085
    up, down, _ = price_limits(ds)
    o, tr = ds.fields["open"], ds.tradable
    y = ds.dates >= np.datetime64("2024-01-01")
    with np.errstate(invalid="ignore"):
        bb = ((o >= up) & tr)[y].sum(axis=1)
        sb = ((o <= down) & tr)[y].sum(axis=1)
        f = ds.fields["adj_factor"]
        ex = np.zeros_like(tr)
        ex[1:] = (f[1:] != f[:-1]) & ds.has_row[1:] & ds.has_row[:-1]
        on_up = ((np.abs(ds.fields["close"] - up) < 1e-9) & ex).sum()
    assert round(bb.mean(), 1) == 18.3 and round(sb.mean(), 1) == 4.8
    assert sb[int(np.flatnonzero(ds.dates[y] == np.datetime64("2024-02-06"))[0])] == 116
    assert on_up == 110


def test_book_inputs_of_some_columns_are_those_of_all_columns_and_of_nanstd(bundled):
    # the account asks for the selected names only; the windows reach back before the panel's first row
    imp = ImpactModel()
    rows = np.array([0, 3, 25, 400, bundled.T - 1])
    cols = np.array([5, 17, 399, 799])
    sig, adv = book_inputs(bundled, rows, imp)
    sig_c, adv_c = book_inputs(bundled, rows, imp, cols)
    np.testing.assert_array_equal(sig_c, sig[:, cols])
    np.testing.assert_array_equal(adv_c, adv[:, cols])
    lr = np.log(bundled.fields["close"] * bundled.fields["adj_factor"])
    t, j = 400, 399
    win = np.diff(lr[t - 20:t + 1, j])
    ok = bundled.tradable[t - 19:t + 1, j] & bundled.has_row[t - 20:t, j]
    assert sig[3, j] == pytest.approx(np.std(win[ok], ddof=1) if ok.sum() >= 10 else 0.03, rel=1e-12)


def _sigma_adv_cell(lr, vol, t, W, min_obs, vol_default, Wa):
    # spec §10.8 for one stock, written out: sums from the oldest row (NaN as 0.0, rows before 0 missing)
    def window(x, w):
        vals = [x[r] if r >= 0 else np.nan for r in range(t - w + 1, t + 1)]
        tot, cnt = 0.0, 0
        for i, v in enumerate(vals):
            cnt += v == v
            tot = (v if v == v else 0.0) if i == 0 else tot + (v if v == v else 0.0)
        return vals, tot, cnt

    vals, tot, cnt = window(lr, W)
    sd = np.nan
    if cnt > 1 and min(t + 1, W) > 1:
        ss = 0.0
        for i, v in enumerate(vals):
            d = v - tot / cnt
            dv = d * d if v == v else 0.0
            ss = dv if i == 0 else ss + dv
        sd = np.sqrt(ss / (cnt - 1))
    _, tot_v, cnt_v = window(vol, Wa)
    return (sd if cnt >= min_obs and np.isfinite(sd) and sd > 0 else vol_default), (tot_v / cnt_v if cnt_v else 0.0)


@pytest.mark.parametrize("W, min_obs, Wa", [(20, 10, 20), (5, 3, 12), (1, 1, 1)])
def test_sigma_adv_rows_is_the_spec_per_cell(W, min_obs, Wa):
    # the account reads σ and ADV of a window's (row, stock) cells from one table computed with the stocks in the
    # inner loop: each cell is the one-stock rule of §10.8, bit for bit (NaN gaps, rows before the panel, −0.0)
    from quantgym.envs.quant_arena.exchange import sigma_adv_rows

    rng = np.random.default_rng(W)
    T, M = 40, 7
    lr = rng.normal(scale=0.02, size=(T, M))
    vol = rng.integers(0, 10**6, size=(T, M)).astype(float)
    lr[rng.random((T, M)) < 0.3] = np.nan
    vol[rng.random((T, M)) < 0.3] = np.nan
    lr[:, 3] = np.nan
    lr[5:, 4] = -0.0
    vol[:, 4] = -0.0
    for t0, n in [(0, T), (W + 2, 5)]:
        got = sigma_adv_rows(lr, vol, t0, n, W, min_obs, 0.03, Wa)
        for k in range(n):
            for j in range(M):
                want = _sigma_adv_cell(lr[:, j], vol[:, j], t0 + k, W, min_obs, 0.03, Wa)
                assert np.array(want).tobytes() == got[k, j].tobytes(), (t0 + k, j)
