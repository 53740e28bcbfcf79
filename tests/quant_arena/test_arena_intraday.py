"""Quant-Arena intraday data: the a_share_l2 readers, which real Level-2
stock-days the bundled dataset serves, the look-ahead guarantees over them (in-process and
sandboxed), a user's own intraday tables, and the intraday example strategy.

The reader tests need the unshipped a_share_l2 folder (skipped without it); the user-data
tests do not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.data import a_share_l2 as l2
from quantgym.data.sse_l2 import load_sse_l2_day
from quantgym.envs.quant_arena.config import ArenaConfig, ArenaSandboxLimits
from quantgym.envs.quant_arena.data import (BUNDLED_DIR, ArenaDataset, attach_real_intraday, load_dataset,
                                            real_intraday, real_intraday_index)
from quantgym.envs.quant_arena.prompts import task_brief
from quantgym.envs.quant_arena.examples import example_source
from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.pit import LookAheadError, make_view

L2 = l2.a_share_l2_dir()
needs_l2 = pytest.mark.shared_data("a_share_l2")
SHORT = ArenaConfig(sandbox=ArenaSandboxLimits(day_seconds=5.0, eval_seconds=120.0, cpu_seconds=120.0,
                                               memory_mb=4096))

#: what the bundled 800-stock universe serves with the a_share_l2 folder (checked by hand against
#: symbols.csv: 11 of the 47 real stock-days are in the universe, plus the shipped SH600519 day)
SERVED = {
    "2021-12-01": {"snapshots": ["SH600258", "SH600332", "SH601689", "SH603369"]},
    "2022-06-01": {"snapshots": ["SZ000400", "SZ300122", "SZ300274"]},
    "2023-02-01": {"orders": ["SH600519"], "snapshots": ["SH600519"], "trades": ["SH600000", "SH600519", "SZ000001"]},
    "2023-02-07": {"orders": ["SH600519"], "snapshots": ["SH600519"], "trades": ["SH600519"]},
    "2023-07-11": {"orders": ["SH600536"], "trades": ["SH600536"]},
}


@pytest.fixture(scope="module")
def tables():
    """Every a_share_l2 table, read once."""
    if L2 is None:
        pytest.skip("the a_share_l2 folder (not shipped) is not available")
    return {
        "orders_sh": l2.read_l2_orders("sh_20230711"), "orders_519": l2.read_l2_orders("sh600519_20230201"),
        "trades_sh": l2.read_l2_trades("sh_20230711"), "trades_519": l2.read_l2_trades("sh600519_20230201"),
        "tape": l2.read_l2_trade_tape(with_cancels=True),
        "snap_sz": l2.read_l2_snapshots_for_intraday("sz_20220601"),
        "snap_sh30": l2.read_l2_snapshots_for_intraday("sh_20211201"),
        "snap_519": l2.read_l2_snapshots_for_intraday("sh600519_20230201"),
    }


# ---------------------------------------------------------------------- readers
@needs_l2
def test_readers_row_counts_schema_and_catalog(tables):
    t = tables
    # row counts of the folder's PROVENANCE.md
    assert len(t["orders_sh"]) == 149_359 and len(t["trades_sh"]) == 109_616
    assert len(t["snap_sz"]) == 20_980 and len(t["snap_sh30"]) == 32_972
    assert (len(t["orders_519"]), len(t["snap_519"]), len(t["trades_519"])) == (54_735, 5_109, 27_135)
    fills, cancels = t["tape"]
    assert len(fills) + len(cancels) == 166_811 + 14_872 and len(cancels) == 32_996
    # the column set and order of the bundled day's tables (quantgym.data.sse_l2)
    ref = load_sse_l2_day()
    for k in ("orders_sh", "orders_519"):
        assert list(t[k].columns) == list(ref["orders"].columns)
    for k in ("trades_sh", "trades_519"):
        assert list(t[k].columns) == list(ref["trades"].columns)
    assert list(fills.columns) == list(ref["trades"].columns)
    for k in ("snap_sz", "snap_sh30", "snap_519"):
        assert list(t[k].columns) == list(ref["snapshots"].columns)
        assert str(t[k]["time"].dt.tz) == "Asia/Shanghai"
    # every stock-day of the catalogue is in the files, and nothing else
    seen = set()
    for k, date, table in (("orders_sh", "2023-07-11", "orders"), ("trades_sh", "2023-07-11", "trades"),
                           ("snap_sz", "2022-06-01", "snapshots"), ("snap_sh30", "2021-12-01", "snapshots"),
                           ("orders_519", "2023-02-01", "orders"), ("trades_519", "2023-02-01", "trades"),
                           ("snap_519", "2023-02-01", "snapshots")):
        df = t[k]
        assert set(df["time"].dt.strftime("%Y-%m-%d")) == {date}
        seen |= {(date, table, s) for s in df["symbol"].unique()}
    seen |= {("2023-02-01", "trades", s) for s in fills["symbol"].unique()}
    assert seen == {(d, tb, s) for d, tb, s, _, _ in l2.CATALOG}


@needs_l2
def test_readers_units_match_the_daily_panel(tables, bundled):
    t = tables
    fills, _ = t["tape"]
    # trade quantities (shares) sum to the panel's daily volume; the panel stores volume as float32
    vol = {("2023-07-11", "SH600536"): t["trades_sh"], ("2023-02-01", "SH600519"): t["trades_519"],
           ("2023-02-01", "SH600000"): fills, ("2023-02-01", "SZ000001"): fills}
    for (d, s), df in vol.items():
        q = int(df.loc[df["symbol"] == s, "qty"].sum())
        v = bundled.fields["volume"][bundled.index_of(d), int(np.searchsorted(bundled.symbols, s))]
        assert abs(q - v) <= 4, (d, s, q, v)
    assert int(fills.loc[fills["symbol"] == "SZ000001", "qty"].sum()) == 165_342_148
    assert int(t["trades_519"]["qty"].sum()) == 3_397_389
    # the full-day snapshots end on the day's volume, open, high, low and close
    for df, d in ((t["snap_sz"], "2022-06-01"), (t["snap_519"], "2023-02-01")):
        last = df.groupby("symbol").last()
        for s in last.index.intersection(bundled.symbols):
            i, j = bundled.index_of(d), int(np.searchsorted(bundled.symbols, s))
            assert abs(last.loc[s, "total_volume"] - bundled.fields["volume"][i, j]) <= 4
            for a, b in (("open_px", "open"), ("high_px", "high"), ("low_px", "low"), ("last_px", "close")):
                assert last.loc[s, a] == pytest.approx(bundled.fields[b][i, j], abs=1e-9), (s, a)
    # prices in CNY for the stock and date (PROVENANCE: 600519 1,811-1,859; 600000 about 7.4)
    assert t["trades_519"]["price"].between(1811, 1859).all()
    assert fills.loc[fills["symbol"] == "SH600000", "price"].between(7.3, 7.45).all()
    # empty book levels: NaN price and size 0; the 30-stock file stops at 10:30 local
    s = t["snap_sh30"]
    assert ((s["bid_sz_09"] == 0) == s["bid_px_09"].isna()).all()
    assert s["time"].max() == pd.Timestamp("2021-12-01 10:30", tz="Asia/Shanghai")
    assert t["snap_sz"]["num_trades"].isna().all() and t["snap_sz"]["num_trades"].dtype == np.float64
    for k in ("orders_sh", "orders_519"):
        assert set(t[k]["side"]) == {"B", "S"} and set(t[k]["ord_type"]) == {"A", "D"}


@needs_l2
def test_every_trade_names_an_order_and_the_aggressor_rule_matches_the_sse_flag(tables):
    o, tr = tables["orders_sh"], tables["trades_sh"]
    adds = set(o.loc[o["ord_type"] == "A", "order_no"])
    # the resting (passive) side of a continuous-trading trade is an order added before
    passive = np.where(tr["side"] == "B", tr["ask_order_no"], np.where(tr["side"] == "S", tr["bid_order_no"], -1))
    passive = passive[passive > 0]
    assert len(passive) > 100_000 and all(x in adds for x in passive)
    # the SZSE tape has no aggressor flag; the rule used for it (later order = aggressor in continuous
    # trading, N in the auctions) reproduces the SSE tape's own flag on every row
    raw = l2._read("tape_20230201", None, dtype={"TradeBSFlag": str, "ExecType": str})
    raw = raw[raw["Market"] == "SH"]
    cont = l2.continuous_mask(l2._local_ns("2023-02-01", raw["TradeTime"]), "2023-02-01")
    inferred = np.where(cont, np.where(raw["BidApplSeqNum"] > raw["OfferApplSeqNum"], "B", "S"), "N")
    assert (inferred == raw["TradeBSFlag"].to_numpy()).all()


def test_l2_dir_argument_must_hold_the_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no a_share_l2 zip files"):
        l2.a_share_l2_dir(tmp_path)
    with pytest.raises(KeyError, match="unknown snapshots source"):
        l2.read_l2_snapshots_for_intraday("nope")


# ---------------------------------------------------------------------- what the bundled dataset serves
@pytest.fixture(scope="module")
def bundled_l2():
    """The bundled dataset with the a_share_l2 folder asked for (``l2_dir``)."""
    if L2 is None:
        pytest.skip("the a_share_l2 folder (not shipped) is not available")
    return load_dataset(l2_dir=L2)


def test_the_default_serves_the_shipped_day_only_whatever_lies_on_disk(bundled, monkeypatch):
    """One call, one environment: load_dataset() never looks for the folder by itself, and its
    brief keeps the earlier wording (recorded transcripts replay by prompt hash)."""
    monkeypatch.delenv(l2.ENV_VAR, raising=False)
    assert load_dataset() is bundled
    assert bundled.intraday_days() == {"2023-02-07": {t: ["SH600519"] for t in ("orders", "snapshots", "trades")}}
    assert bundled.notes == []
    text, facts = task_brief(ArenaConfig(), "iterative", 5, bundled)
    assert "(bundled: SH600519 on 2023-02-07 only). Reading after view.date raises LookAheadError." in text
    assert facts["intraday_days"] == bundled.intraday_days()


@needs_l2
def test_the_folder_is_served_when_asked_through_the_environment_variable(monkeypatch):
    monkeypatch.setenv(l2.ENV_VAR, str(L2))
    assert load_dataset() is load_dataset(l2_dir=L2)


@needs_l2
def test_bundled_dataset_serves_the_real_stock_days_of_its_universe(bundled_l2):
    bundled = bundled_l2
    assert bundled.intraday_days() == SERVED
    text, _ = task_brief(ArenaConfig(), "iterative", 5, bundled)
    assert "2022-06-01 snapshots SZ000400 SZ300122 SZ300274" in " ".join(text.split())
    assert bundled.notes == []
    loaded = bundled.intraday()
    assert {d: {k: sorted(v["symbol"].unique()) for k, v in sorted(t.items())} for d, t in loaded.items()} == SERVED
    for d, tabs in loaded.items():
        for k, df in tabs.items():  # every row belongs to its date (local time)
            assert set(df["time"].dt.strftime("%Y-%m-%d")) == {d}, (d, k)
    # all of them lie inside the default windows' reach: warm-up 2021-01-01 .. research end 2023-12-29
    assert min(SERVED) >= "2021-01-01" and max(SERVED) <= "2023-12-31"


def test_without_the_folder_only_the_shipped_day_is_served_and_it_is_said(monkeypatch):
    monkeypatch.setattr(l2, "a_share_l2_dir", lambda path=None: None)
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet", filters=[("symbol", "in", ["SH600519", "SH600000"])])
    ds = ArenaDataset.from_frame(df)
    with pytest.warns(UserWarning, match="a_share_l2 folder was not found"):
        attach_real_intraday(ds)
    assert ds.intraday_days() == {"2023-02-07": {t: ["SH600519"] for t in ("orders", "snapshots", "trades")}}
    assert len(ds.notes) == 1 and "only the shipped Level-2 day" in ds.notes[0]
    assert sorted(ds.intraday()) == ["2023-02-07"]


# ---------------------------------------------------------------------- look-ahead guarantees
LOOKAHEAD_PROBE = """
import numpy as np
import pandas as pd
FEATURES = ['x']
SERVED = %r
def compute_features(view):
    today = str(view.date.date())
    for d, tabs in SERVED.items():
        for table in ('snapshots', 'trades', 'orders'):
            if d > today:
                try:
                    view.intraday(table, d)
                except Exception as e:
                    assert type(e).__name__ == 'LookAheadError', repr(e)
                    continue
                raise AssertionError('read %%s %%s on %%s' %% (table, d, today))
            if d != today:  # earlier days: read once, on their own date (keeps the probe fast)
                continue
            try:
                df = view.intraday(table, d)
            except KeyError:
                assert table not in tabs, (d, table, today)
                continue
            assert table in tabs and sorted(df['symbol'].unique()) == tabs[table], (d, table)
            day = pd.to_datetime(df['ts_event'], unit='ns', utc=True).dt.tz_convert('Asia/Shanghai')
            assert (day.dt.strftime('%%Y-%%m-%%d') == d).all()
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return features['x']
"""


@pytest.fixture(scope="module")
def l2_slice(bundled):
    """Stocks with 2023 Level-2 days (and two without), 2022-12-01 .. 2023-07-31, real intraday attached."""
    syms = ["SH600000", "SH600519", "SH600536", "SZ000001", "SH601318", "SZ000858"]
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet", filters=[("symbol", "in", syms)])
    df = df[(df["date"] >= pd.Timestamp("2022-12-01").date()) & (df["date"] <= pd.Timestamp("2023-07-31").date())]
    ds = ArenaDataset.from_frame(df.reset_index(drop=True), info=bundled.info.reset_index(), name="l2-slice")
    return attach_real_intraday(ds)


@needs_l2
@pytest.mark.parametrize("executor", ["inprocess", "sandbox"])
def test_no_later_intraday_day_is_readable(l2_slice, executor):
    served = l2_slice.intraday_days()
    assert sorted(served) == ["2023-02-01", "2023-02-07", "2023-07-11"]
    r = evaluate_submission(LOOKAHEAD_PROBE % (served,), l2_slice, "2023-01-20", "2023-07-14", SHORT, executor=executor)
    assert r.status == "ok" and r.n_errors == 0, r.errors[:2]


@needs_l2
def test_payload_holds_no_intraday_day_after_the_window(l2_slice):
    from quantgym.envs.quant_arena.account import window_rows
    from quantgym.envs.quant_arena.handoff import build_payload

    d0, n = window_rows(l2_slice, "2023-01-20", "2023-02-06")
    p = build_payload(l2_slice, d0, n)
    last = p["block"]["dates"][-1]
    assert last < "2023-02-07" and sorted(p["intraday"]) == ["2023-02-01"]
    v = make_view(l2_slice, "2023-02-06")
    with pytest.raises(LookAheadError, match="2023-02-07.*2023-02-06"):
        v.intraday("orders", "2023-02-07")
    assert len(v.intraday("orders", "2023-02-01")) == 54_735


# ---------------------------------------------------------------------- a user's own intraday tables
def _user_panel(intraday):
    days, syms = ["2024-03-01", "2024-03-04", "2024-03-05"], ["SH600000", "SZ000001"]
    df = pd.DataFrame({"date": np.repeat(days, 2), "symbol": syms * 3, "open": 10.0, "high": 10.0, "low": 10.0,
                       "close": 10.0, "volume": 1e6})
    return ArenaDataset.from_frame(df, intraday=intraday, name="user")


def test_user_intraday_in_the_documented_schema():
    ts = pd.Timestamp("2024-03-04 09:30:01", tz="Asia/Shanghai").value
    trades = pd.DataFrame({"ts_event": np.array([ts, ts + 10**9], dtype=np.int64), "symbol": ["SH600000", "SZ000001"],
                           "price": [10.01, 9.99], "qty": [100, 300], "side": ["B", "S"]})
    ds = _user_panel({"2024-03-04": {"trades": trades}})
    assert ds.intraday_days() == {"2024-03-04": {"trades": ["SH600000", "SZ000001"]}}
    with pytest.raises(LookAheadError, match="2024-03-04.*2024-03-01"):
        make_view(ds, "2024-03-01").intraday("trades", "2024-03-04")
    got = make_view(ds, "2024-03-04").intraday("trades")
    pd.testing.assert_frame_equal(got, trades)
    got.loc[0, "qty"] = -1  # a copy
    later = make_view(ds, "2024-03-05")
    assert later.intraday("trades", "2024-03-04")["qty"].tolist() == [100, 300]
    with pytest.raises(KeyError, match="no intraday table 'trades' for 2024-03-05"):
        later.intraday("trades")
    with pytest.raises(KeyError, match="no intraday table 'snapshots'"):
        later.intraday("snapshots", "2024-03-04")


@pytest.mark.parametrize("bad, msg", [
    ({"2024-03-04": {"quotes": pd.DataFrame({"ts_event": [1], "symbol": ["SH600000"]})}}, "unknown table 'quotes'"),
    ({"2024-03-04": {"trades": pd.DataFrame({"symbol": ["SH600000"]})}}, r"missing column\(s\) \['ts_event'\]"),
    ({"day 4": {"trades": pd.DataFrame({"ts_event": [1], "symbol": ["SH600000"]})}}, "is not a date"),
])
def test_user_intraday_schema_errors_are_one_line(bad, msg):
    ds = _user_panel(bad)
    with pytest.raises(ValueError, match=msg) as e:
        ds.intraday()
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------------- the intraday example strategy
@needs_l2
def test_intraday_example_uses_level2_where_it_exists(bundled_l2):
    bundled = bundled_l2
    import types

    ex, low = types.ModuleType("ex"), types.ModuleType("low")
    exec(example_source("intraday_flow"), ex.__dict__)
    exec(example_source("low_volatility"), low.__dict__)
    expect = {"2021-12-01": ({"SH600258", "SH600332", "SH601689", "SH603369"}, set()),
              "2022-06-01": ({"SZ000400", "SZ300122", "SZ300274"}, set()),
              "2023-02-01": ({"SH600519"}, {"SH600000", "SH600519", "SZ000001"}),
              "2023-07-11": (set(), {"SH600536"}), "2023-02-02": (set(), set())}
    for d, (rv_syms, ofi_syms) in expect.items():
        v = make_view(bundled, d)
        f = ex.compute_features(v)
        assert set(f["rv_intraday"].dropna().index) == rv_syms, d
        assert set(f["ofi"].dropna().index) == ofi_syms, d
        assert f["ofi"].dropna().between(-1, 1).all()
        s, base = ex.score(f, v), low.score(low.compute_features(v), v)
        changed = set(s.index[~np.isclose(s, base, equal_nan=True, rtol=0, atol=0)])
        assert changed == rv_syms | ofi_syms, d  # elsewhere exactly the low-volatility score
    # the realised volatility is on the daily scale of vol_20d (600519 on 2023-02-07: 0.0112 vs 0.0155)
    f = ex.compute_features(make_view(bundled, "2023-02-07"))
    assert 0.5 < f["rv_intraday"]["SH600519"] / f["vol_20d"]["SH600519"] < 1.5


@needs_l2
def test_intraday_example_runs_in_the_sandbox(l2_slice):
    # the example plus a guard: on the Level-2 days the intraday features must be non-empty in the child
    src = example_source("intraday_flow") + """
_example_score = score
def score(features, view):
    day = str(view.date.date())
    if day in ('2023-02-01', '2023-02-07', '2023-07-11') and not features['ofi'].notna().any():
        raise AssertionError('no order-flow feature on ' + day)
    if day in ('2023-02-01', '2023-02-07') and not features['rv_intraday'].notna().any():
        raise AssertionError('no realised volatility on ' + day)
    return _example_score(features, view)
"""
    r = evaluate_submission(src, l2_slice, "2023-01-20", "2023-07-14", SHORT)
    assert r.status == "ok" and r.n_errors == 0, r.errors[:2]
    assert r.metrics is not None and np.isfinite(r.S)


def test_real_intraday_index_follows_the_panel_rows(monkeypatch):
    # a stock without a row on a Level-2 date is not served that date
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet", filters=[("symbol", "in", ["SH600519"])])
    ds = ArenaDataset.from_frame(df[df["date"] != pd.Timestamp("2023-02-07").date()].reset_index(drop=True))
    monkeypatch.setattr(l2, "a_share_l2_dir", lambda path=None: None)
    assert real_intraday_index(ds) == {}
    loader, index, notes = real_intraday(ds)
    assert index == {} and loader() == {} and notes


@needs_l2
def test_a_user_panel_with_stocks_outside_the_universe_gets_their_days():
    # SZ300288 is not in the default universe; a user panel holding it serves its 2022-06-01 snapshots
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet", filters=[("symbol", "in", ["SZ300122"])])
    df = df[df["date"] <= pd.Timestamp("2022-06-30").date()].reset_index(drop=True)
    mine = df.assign(symbol="SZ300288")  # a hand-made row set for the missing stock (same dates)
    ds = attach_real_intraday(ArenaDataset.from_frame(pd.concat([df, mine], ignore_index=True)))
    assert ds.intraday_days() == {"2022-06-01": {"snapshots": ["SZ300122", "SZ300288"]}}
    snaps = make_view(ds, "2022-06-01").intraday("snapshots")
    assert snaps.groupby("symbol").size().to_dict() == {"SZ300122": 4906, "SZ300288": 3423}
