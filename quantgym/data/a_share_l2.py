"""Readers of the real A-share Level-2 samples: the 10-level **snapshot** files as tidy book tables
(:func:`read_snapshots`), and every file (orders, trades, trade tapes, snapshots) in the intraday schema.
One module on purpose: both reader families read the same zip files through the same folder lookup
(:func:`data_dir`) and Shanghai-clock helpers (:func:`continuous_mask`).

Source: the public repository dolphindb/Tutorials_CN, commit 35282f623b8f (Apache-2.0 for the
repository; **the original data vendor is not stated there**). The readers take the folder of the
published zip files as an argument (``path=``), else ``$QUANTGYM_A_SHARE_L2``, else
``a_share_l2`` in the maintainers' raw-data folder (:func:`quantgym._util.shared_data_dir`). The package ships one compact
extract, :data:`BUNDLED_SNAPSHOTS` (two SZSE stocks of 2022-06-01, the Market-Bench v2 pair), which
:func:`read_snapshots` serves when no folder is found. See docs/data.md, "A-share Level-2 samples".

Snapshot files (zip name -> key of :data:`SNAPSHOT_FILES`)
----------------------------------------------------------
- ``szse_20220601``: ``script_orderBookSnapshotEngine_tick.zip``: SZSE 3-second snapshots of
  000400, 300122, 300274, 300288, 300918 on 2022-06-01, full day (20,980 rows);
- ``sse_20211201``: ``data_Real-Time_Stock_Price_Increase_Calculation_20211201snapshot_30stocks.zip``:
  SSE snapshots of 30 stocks on 2021-12-01, 09:15-10:30 (32,972 rows);
- ``sse_600519_20230201``: ``data_dolphinscheduler_integration_20230201.zip`` (``snapshot.csv``):
  SSE snapshots of 600519 on 2023-02-01 (5,109 rows).

The returned table (one row per snapshot, source order)
-------------------------------------------------------
- ``ts_event``: int64 ns since the Unix epoch, **UTC** (the local Asia/Shanghai time, UTC+8);
- ``symbol``: the security code with its exchange suffix (``300274.SZ``, ``600519.SH``);
- ``phase``: the source's trading-phase field as text (SZSE ``TradingPhaseCode`` 1-6, SSE
  ``InstrumentStatus`` OCALL/TRADE/...); ``continuous``: bool, the source says trading/continuous
  **and** the local time is in [09:30:00, 11:30:00] or [13:00:00, 14:57:00) (the exchanges'
  continuous auctions; SSE's ``TRADE`` also covers the 09:25-09:29 post-auction rows);
- ``last_px`` (CNY, NaN if 0), ``volume`` (cumulative shares traded);
- for level i = 0..9 (0 = best): ``bid_px_0i, bid_sz_0i, ask_px_0i, ask_sz_0i``; prices CNY
  rounded to 0.01 (the sources store floats such as 8.179999999), sizes int64 shares; an empty
  level (price 0 or missing) has price NaN and size 0.

Tick orders, tick trades, trade tapes and snapshots in the intraday schema
--------------------------------------------------------------------------
:func:`read_l2_orders`, :func:`read_l2_trades`, :func:`read_l2_trade_tape` and
:func:`read_l2_snapshots_for_intraday` (and :func:`load_l2_days`, by date and table, for the
stock-days of :data:`CATALOG`) read every file of the folder into the intraday schema of
:mod:`quantgym.data.sse_l2` (the Quant-Arena ``view.intraday`` tables).
:func:`a_share_l2_dir` is :func:`data_dir` for callers that go on without the folder (``None``).

Every table is converted to the tidy intraday schema of :mod:`quantgym.data.sse_l2` (the
reader of the bundled 600519 day), so one strategy reads every day the same way:

- ``ts_event``: int64 ns since the epoch, UTC (the local Asia/Shanghai record time);
  ``time``: the same instant as ``datetime64[ns, Asia/Shanghai]``;
- prices float64 **CNY** (the sources' float text rounded to 0.001; 0 → NaN);
  quantities int64 **shares**; values float64 CNY;
- ``symbol``: exchange prefix + code, ``"SH600536"`` / ``"SZ000001"`` (the Quant-Arena panel
  style; :mod:`~quantgym.data.sse_l2` writes the bare code ``"600519"`` of its one-stock file);
- ``side``: orders ``"B"``/``"S"``; trades the aggressor ``"B"``/``"S"``, ``"N"`` in a call auction;
  ``ord_type`` ``"A"`` add / ``"D"`` delete;
- a field a source does not carry is a float64 column of NaN (e.g. ``num_trades`` of the
  SZSE snapshots), so the column set is the same on every day.

Sources (``SOURCES``; row counts as in the folder's PROVENANCE.md):

============  ==========  =========================================================  ==========
key           date        content                                                    tables
============  ==========  =========================================================  ==========
sh_20230711   2023-07-11  SSE tick orders + trades, 600536 600961 600761 605580      orders,
                          601825, 09:15-15:00                                         trades
sz_20220601   2022-06-01  SZSE 3-second 10-level snapshots, 000400 300122 300274      snapshots
                          300288 300918, full day
sh_20211201   2021-12-01  SSE 10-level snapshots of 30 stocks, 09:15-10:30 only       snapshots
tape_20230201 2023-02-01  trade tapes of 000001.SZ and 600000.SH                      trades
sh600519_...  2023-02-01  orders, snapshots and trades of 600519                      all three
============  ==========  =========================================================  ==========

Field mapping (source column → schema column) is given in each reader's docstring.

Longer than 500 lines as one job, reading one published folder: both reader families catalogue the same zip files
and source columns (:data:`SNAPSHOT_FILES`, :data:`SOURCES`), two descriptions of one folder that must not drift
apart.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from quantgym.data.sse_l2 import exchange_time

#: Environment variable naming the folder of the A-share Level-2 files.
ENV_VAR = "QUANTGYM_A_SHARE_L2"
#: Book levels per side in every snapshot file.
LEVELS = 10
_TZ = "Asia/Shanghai"
#: Continuous-auction windows (local time; start, end, end inclusive) shared by SSE and SZSE.
CONTINUOUS = (("09:30:00", "11:30:00", True), ("13:00:00", "14:57:00", False))

# key -> what it is (desc), zip name, member, date, time column, symbol column, suffix, phase column, the phase
# values of trading, last/volume columns, level price/size column patterns (levels 1- or 0-based: base)
SNAPSHOT_FILES: dict[str, dict] = {
    "szse_20220601": dict(
        desc="SZSE Level-2 3-second 10-level snapshots", zip="script_orderBookSnapshotEngine_tick.zip", member="tick.csv", date="2022-06-01", time="MDTime",
        symbol="SecurityID", suffix="", phase="TradingPhaseCode", trading=("3",), last="LastPx",
        volume="TotalVolumeTrade", bid_px="BuyPrice{}", bid_sz="BuyOrderQty{}", ask_px="SellPrice{}",
        ask_sz="SellOrderQty{}", base=1),
    "sse_20211201": dict(
        desc="SSE Level-2 10-level snapshots", zip="data_Real-Time_Stock_Price_Increase_Calculation_20211201snapshot_30stocks.zip",
        member="20211201snapshot_30stocks.csv", date="2021-12-01", time="DateTime", symbol="SecurityID",
        suffix=".SH", phase="InstrumentStatus", trading=("TRADE",), last="LastPx", volume="TotalVolumeTrade",
        bid_px="BidPrice{}", bid_sz="BidOrderQty{}", ask_px="OfferPrice{}", ask_sz="OfferOrderQty{}", base=0),
    "sse_600519_20230201": dict(
        desc="SSE Level-2 10-level snapshots", zip="data_dolphinscheduler_integration_20230201.zip", member="20230201/snapshot.csv", date="2023-02-01",
        time="UpdateTime", symbol="SecurityID", suffix=".SH", phase="InstruStatus", trading=("TRADE",),
        last="LastPrice", volume="TradVolume", bid_px="BidPrice{}", bid_sz="BidVolume{}", ask_px="AskPrice{}",
        ask_sz="AskVolume{}", base=1),
}


#: Where the zip files are published (the one-line "how to get the data" of every missing-folder error).
SOURCE_REPO = "github.com/dolphindb/Tutorials_CN (commit 35282f623b8f)"
#: Folder of the shipped extract(s).
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled" / "a_share_l2"
#: Shipped extracts of snapshot files: key of :data:`SNAPSHOT_FILES` -> (file in :data:`BUNDLED_DIR`,
#: symbols). Each holds every row of those symbols as :func:`read_snapshots` returns them from the zip
#: (built by ``python -m quantgym.data.a_share_l2 --shared RAW``; a test checks it equals the
#: zip's read where the folder exists).
BUNDLED_SNAPSHOTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "szse_20220601": ("szse_20220601_300274_300122.parquet", ("300274.SZ", "300122.SZ")),
}


def data_dir(path: str | Path | None = None) -> Path:
    """The folder of the A-share Level-2 files: ``path``, else ``$QUANTGYM_A_SHARE_L2``, else
    ``a_share_l2`` in the maintainers' raw-data folder (:func:`quantgym._util.shared_data_dir`).

    Raises
    ------
    FileNotFoundError
        One line naming what to pass and where the files are published, if the folder does not exist.
    """
    if path is None:
        from quantgym._util import shared_data_dir

        path = os.environ.get(ENV_VAR) or shared_data_dir() / "a_share_l2"
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"A-share Level-2 folder {p} not found (not shipped: vendor terms unknown): "
                                f"download the zip files from {SOURCE_REPO} and pass their folder (path=/data_dir=) "
                                f"or set {ENV_VAR}")
    return p


def _bundled_snapshots(file: str, symbols: list[str] | None) -> pd.DataFrame | None:
    """The shipped extract of ``file`` restricted to ``symbols`` (source order), or ``None`` when no
    extract covers them."""
    if file not in BUNDLED_SNAPSHOTS:
        return None
    name, have = BUNDLED_SNAPSHOTS[file]
    if symbols is None or not set(symbols) <= set(have):
        return None
    df = pd.read_parquet(BUNDLED_DIR / name)
    return df[df["symbol"].isin(symbols).to_numpy()].reset_index(drop=True)


def _clock_ns(clock: pd.Series) -> np.ndarray:
    """Local ``HH:MM:SS[.fffffffff]`` -> ns since midnight (int64; string slicing, about 5x faster
    than ``pd.to_timedelta`` on the 100k-row files)."""
    c = clock.astype(str)
    part = [c.str.slice(a, b).astype(np.int64).to_numpy() for a, b in ((0, 2), (3, 5), (6, 8))]
    frac = c.str.slice(9).str.ljust(9, "0").str.slice(0, 9).astype(np.int64).to_numpy()
    return (part[0] * 3600 + part[1] * 60 + part[2]) * 1_000_000_000 + frac


def _local_ns(date: str, times: pd.Series) -> np.ndarray:
    """Local ``HH:MM:SS[.fff]`` (or ``YYYY.MM.DDTHH:MM:SS.fff``) on ``date`` -> UTC ns."""
    t = times.astype(str).str.replace('"', "", regex=False)
    t = t.str.split("T").str[-1]
    return int(pd.Timestamp(date, tz=_TZ).value) + _clock_ns(t)


def continuous_mask(ts_event: np.ndarray, date: str) -> np.ndarray:
    """bool: local time of ``ts_event`` (UTC ns) on ``date`` within :data:`CONTINUOUS`."""
    tod = np.asarray(ts_event, dtype=np.int64) - int(pd.Timestamp(date, tz=_TZ).value)
    keep = np.zeros(tod.shape, dtype=bool)
    for start, end, incl in CONTINUOUS:
        lo, hi = (pd.Timedelta(x).value for x in (start, end))
        keep |= (tod >= lo) & ((tod <= hi) if incl else (tod < hi))
    return keep


def read_snapshots(file: str = "szse_20220601", *, path: str | Path | None = None,
                   symbols: list[str] | None = None) -> pd.DataFrame:
    """One snapshot file of :data:`SNAPSHOT_FILES` as the tidy table of the module docstring.

    Parameters
    ----------
    file : str
        Key of :data:`SNAPSHOT_FILES`.
    path : path, optional
        Folder of the zips (see :func:`data_dir`). Without it and without a folder found, the shipped
        extract (:data:`BUNDLED_SNAPSHOTS`) serves ``file`` when it holds every one of ``symbols``.
    symbols : list of str, optional
        Keep these symbols (with suffix, e.g. ``["300274.SZ"]``), in source order.

    Raises
    ------
    ValueError
        Unknown ``file`` key or a symbol not in the file. ``FileNotFoundError``: no folder (see
        :func:`data_dir`) and no shipped extract that covers ``symbols``.
    """
    if file not in SNAPSHOT_FILES:
        raise ValueError(f"unknown snapshot file {file!r}; choose from {sorted(SNAPSHOT_FILES)}")
    f = SNAPSHOT_FILES[file]
    try:
        folder = data_dir(path)
    except FileNotFoundError as exc:
        shipped = None if path is not None else _bundled_snapshots(file, symbols)
        if shipped is not None:
            return shipped
        if path is None and file in BUNDLED_SNAPSHOTS:
            raise FileNotFoundError(f"{exc} (the package ships {file} for {', '.join(BUNDLED_SNAPSHOTS[file][1])} "
                                    "only: pass symbols=[...] among them)") from None
        raise
    with zipfile.ZipFile(folder / f["zip"]) as z, z.open(f["member"]) as fh:
        raw = pd.read_csv(fh, dtype={f["symbol"]: str, f["phase"]: str})
    sym = raw[f["symbol"]].str.zfill(6) + f["suffix"]
    if symbols is not None:
        missing = sorted(set(symbols) - set(sym))
        if missing:
            raise ValueError(f"symbols {missing} not in {file} (has {sorted(set(sym))})")
        keep = sym.isin(symbols).to_numpy()
        raw, sym = raw[keep].reset_index(drop=True), sym[keep].reset_index(drop=True)
    ts = _local_ns(f["date"], raw[f["time"]])
    phase = raw[f["phase"]].astype(str)
    last = raw[f["last"]].to_numpy(dtype=float)
    out: dict[str, object] = {
        "ts_event": ts, "symbol": sym.to_numpy(dtype=object), "phase": phase.to_numpy(dtype=object),
        "continuous": phase.isin(f["trading"]).to_numpy() & continuous_mask(ts, f["date"]),
        "last_px": np.where(last > 0, np.round(last, 2), np.nan),
        "volume": raw[f["volume"]].fillna(0).to_numpy(dtype=np.int64),
    }
    for i in range(LEVELS):
        for side in ("bid", "ask"):
            px = raw[f[f"{side}_px"].format(i + f["base"])].to_numpy(dtype=float)
            sz = raw[f[f"{side}_sz"].format(i + f["base"])].to_numpy(dtype=float)
            ok = np.isfinite(px) & (px > 0) & np.isfinite(sz) & (sz > 0)
            out[f"{side}_px_{i:02d}"] = np.where(ok, np.round(np.where(ok, px, 0.0), 2), np.nan)
            out[f"{side}_sz_{i:02d}"] = np.where(ok, sz, 0).astype(np.int64)
    cols = ["ts_event", "symbol", "phase", "continuous", "last_px", "volume"]
    cols += [c for i in range(LEVELS) for c in (f"bid_px_{i:02d}", f"bid_sz_{i:02d}", f"ask_px_{i:02d}", f"ask_sz_{i:02d}")]
    return pd.DataFrame(out)[cols]


#: key -> (zip file, member, date, exchange of the codes ("SH"/"SZ"/None = in the file))
SOURCES = {
    "sh_20230711_orders": ("script_orderBookSnapshotEngine_SHorders.zip", "SHorders.csv", "2023-07-11", None),
    "sh_20230711_trades": ("script_orderBookSnapshotEngine_SHtrans.zip", "SHtrans.csv", "2023-07-11", None),
    "sz_20220601": ("script_orderBookSnapshotEngine_tick.zip", "tick.csv", "2022-06-01", None),
    "sh_20211201": ("data_Real-Time_Stock_Price_Increase_Calculation_20211201snapshot_30stocks.zip",
                    "20211201snapshot_30stocks.csv", "2021-12-01", "SH"),
    "tape_20230201": ("data_DolphinDB_Python_Parser_Intro_for_Quantitative_Finance_tradeData.zip",
                      "tradeData.csv", "2023-02-01", None),
    "sh600519_20230201_orders": ("data_dolphinscheduler_integration_20230201.zip", "20230201/entrust.csv",
                                 "2023-02-01", "SH"),
    "sh600519_20230201_trades": ("data_dolphinscheduler_integration_20230201.zip", "20230201/trade.csv",
                                 "2023-02-01", "SH"),
    "sh600519_20230201_snapshots": ("data_dolphinscheduler_integration_20230201.zip", "20230201/snapshot.csv",
                                    "2023-02-01", "SH"),
}

_SH5 = ["SH600536", "SH600761", "SH600961", "SH601825", "SH605580"]
_SZ5 = ["SZ000400", "SZ300122", "SZ300274", "SZ300288", "SZ300918"]
_SH30 = ["SH600103", "SH600107", "SH600133", "SH600251", "SH600258", "SH600311", "SH600332", "SH600446",
         "SH600480", "SH600566", "SH600983", "SH601116", "SH601369", "SH601689", "SH601958", "SH603258",
         "SH603299", "SH603369", "SH603421", "SH603602", "SH603663", "SH603677", "SH603687", "SH603689",
         "SH605128", "SH605303", "SH688218", "SH688233", "SH688339", "SH688378"]

#: Every stock-day of the folder: (date, table, symbol, source key, note). A test checks it
#: against the files; callers can plan (e.g. filter to a universe) without reading them.
CATALOG: tuple[tuple[str, str, str, str, str], ...] = tuple(
    [("2021-12-01", "snapshots", s, "sh_20211201", "09:15-10:30 only") for s in _SH30]
    + [("2022-06-01", "snapshots", s, "sz_20220601", "") for s in _SZ5]
    + [("2023-02-01", "trades", s, "tape_20230201", "") for s in ("SH600000", "SZ000001")]
    + [("2023-02-01", t, "SH600519", f"sh600519_20230201_{t}", "") for t in ("orders", "snapshots", "trades")]
    + [("2023-07-11", t, s, f"sh_20230711_{t}", "") for t in ("orders", "trades") for s in _SH5]
)


def a_share_l2_dir(path: str | Path | None = None) -> Path | None:
    """:func:`data_dir` for callers that go on without the folder: ``None`` when it is missing.

    A folder counts when it holds at least one zip file of :data:`SOURCES`.

    Raises
    ------
    FileNotFoundError
        ``path`` given but it holds none of the files.
    """
    names = {z for z, _, _, _ in SOURCES.values()}
    try:
        p = data_dir(path)
    except FileNotFoundError:
        if path is not None:
            raise
        return None
    if any((p / n).exists() for n in names):
        return p
    if path is not None:
        raise FileNotFoundError(f"no a_share_l2 zip files in {p}")
    return None


# ---------------------------------------------------------------------- helpers
def _read(key: str, path: str | Path | None, **kw) -> pd.DataFrame:
    folder = data_dir(path)
    zname, member, _, _ = SOURCES[key]
    zp = folder / zname
    if not zp.exists():
        raise FileNotFoundError(f"{zname} not found in {folder}")
    with zipfile.ZipFile(zp) as z, z.open(member) as fh:
        return pd.read_csv(io.BytesIO(fh.read()), **kw)


def _px(x: pd.Series) -> np.ndarray:
    v = np.round(pd.to_numeric(x, errors="coerce").to_numpy(dtype=np.float64), 3)
    return np.where((v == 0) | ~np.isfinite(v), np.nan, v)


def _qty(x: pd.Series) -> np.ndarray:
    return pd.to_numeric(x, errors="coerce").fillna(0).to_numpy().astype(np.int64)


def _sym(codes: pd.Series, exchange: str | None) -> np.ndarray:
    """Source codes (``600536.SH``, ``600000`` + market, ``1``) -> ``SH600536``."""
    c = codes.astype(str)
    if exchange is None:  # "600536.SH"
        code, ex = c.str.split(".", n=1).str[0], c.str.split(".", n=1).str[1]
        return (ex.str.upper() + code.str.zfill(6)).to_numpy(dtype=object)
    return (exchange + c.str.zfill(6)).to_numpy(dtype=object)


def _side(x: pd.Series, mapping: dict) -> np.ndarray:
    return x.map(mapping).fillna("N").to_numpy(dtype=object)


def _frame(cols: dict) -> pd.DataFrame:
    df = pd.DataFrame(cols)
    df.insert(1, "time", exchange_time(df["ts_event"].to_numpy()).to_numpy())
    return df.sort_values(["ts_event", "symbol"], kind="stable").reset_index(drop=True)


def _keep(df: pd.DataFrame, symbols: Iterable[str] | None) -> pd.DataFrame:
    if symbols is None:
        return df
    return df[df["symbol"].isin(set(symbols))].reset_index(drop=True)


# ---------------------------------------------------------------------- readers
def read_l2_orders(source: str = "sh_20230711", path: str | Path | None = None,
                   symbols: Iterable[str] | None = None) -> pd.DataFrame:
    """Tick orders (adds and deletes) in the schema of :func:`quantgym.data.sse_l2.convert_orders`.

    Parameters
    ----------
    source : {"sh_20230711", "sh600519_20230201"}
        ``sh_20230711``: SSE orders of five stocks on 2023-07-11 (149,359 rows);
        ``sh600519_20230201``: 600519 on 2023-02-01 (54,735 rows).
    path : folder of the zip files (default :func:`a_share_l2_dir`).
    symbols : iterable of str, optional
        Keep only these symbols (``"SH600536"`` style).

    Returns
    -------
    DataFrame sorted by (``ts_event``, ``symbol``), source order within: ``ts_event``, ``time``,
    ``symbol``, ``order_no``, ``price`` (CNY), ``qty`` (shares), ``side`` (B/S), ``ord_type``
    (A/D), ``biz_index``, ``channel``, ``appl_seq``.

    Mapping: ``sh_20230711`` MDTime→ts_event, SecurityID→symbol, OrderNO→order_no,
    OrderPrice→price, OrderQty→qty, OrderBSFlag 1/2→B/S, OrderType 2/10→A/D,
    ApplSeqNum (the channel's joint order+trade sequence)→biz_index, ChannelNo→channel,
    OrderIndex→appl_seq. ``sh600519_20230201`` OrderTime, OrderNO, OrderPrice, Balance→qty,
    OrderBSFlag, OrderType, BizIndex, OrderChannel, OrderIndex→appl_seq.

    Raises
    ------
    FileNotFoundError: folder or zip missing. KeyError: unknown ``source``.
    """
    if source == "sh_20230711":
        key = "sh_20230711_orders"
        r = _read(key, path)
        cols = {"ts_event": _local_ns(SOURCES[key][2], r["MDTime"]), "symbol": _sym(r["SecurityID"], None),
                "order_no": _qty(r["OrderNO"]), "price": _px(r["OrderPrice"]), "qty": _qty(r["OrderQty"]),
                "side": _side(r["OrderBSFlag"], {1: "B", 2: "S"}),
                "ord_type": r["OrderType"].map({2: "A", 10: "D"}).to_numpy(dtype=object),
                "biz_index": _qty(r["ApplSeqNum"]), "channel": _qty(r["ChannelNo"]), "appl_seq": _qty(r["OrderIndex"])}
    elif source == "sh600519_20230201":
        key = "sh600519_20230201_orders"
        r = _read(key, path, dtype={"SecurityID": str})
        cols = {"ts_event": _local_ns(SOURCES[key][2], r["OrderTime"]), "symbol": _sym(r["SecurityID"], "SH"),
                "order_no": _qty(r["OrderNO"]), "price": _px(r["OrderPrice"]), "qty": _qty(r["Balance"]),
                "side": r["OrderBSFlag"].to_numpy(dtype=object), "ord_type": r["OrderType"].to_numpy(dtype=object),
                "biz_index": _qty(r["BizIndex"]), "channel": _qty(r["OrderChannel"]), "appl_seq": _qty(r["OrderIndex"])}
    else:
        raise KeyError(f"unknown orders source {source!r}; available: sh_20230711, sh600519_20230201")
    return _keep(_frame(cols), symbols)


def read_l2_trades(source: str = "sh_20230711", path: str | Path | None = None,
                   symbols: Iterable[str] | None = None) -> pd.DataFrame:
    """Tick trades in the schema of :func:`quantgym.data.sse_l2.convert_trades`.

    Parameters
    ----------
    source : {"sh_20230711", "sh600519_20230201"}
        ``sh_20230711``: SSE trades of five stocks on 2023-07-11 (109,616 rows; every trade
        names an order of :func:`read_l2_orders`); ``sh600519_20230201``: 600519 on 2023-02-01
        (27,135 rows; the quantities sum to the day's volume, 3,397,389 shares).
    path, symbols : as :func:`read_l2_orders`.

    Returns
    -------
    DataFrame: ``ts_event``, ``time``, ``symbol``, ``price`` (CNY), ``qty`` (shares), ``side``
    (aggressor B/S, N = call auction), ``bid_order_no``, ``ask_order_no``, ``biz_index``,
    ``channel``, ``appl_seq``.

    Mapping: ``sh_20230711`` MDTime, SecurityID, TradePrice, TradeQty, TradeBSFlag 1/2/0→B/S/N,
    TradeBuyNo/TradeSellNo→bid/ask_order_no, ApplSeqNum→biz_index, ChannelNo,
    TradeIndex→appl_seq. ``sh600519_20230201`` TradTime, TradPrice, TradVolume,
    TradeBSFlag B/S/N, TradeBuyNo, TradeSellNo, BizIndex, TradeChan, TradeIndex→appl_seq.
    """
    if source == "sh_20230711":
        key = "sh_20230711_trades"
        r = _read(key, path)
        cols = {"ts_event": _local_ns(SOURCES[key][2], r["MDTime"]), "symbol": _sym(r["SecurityID"], None),
                "price": _px(r["TradePrice"]), "qty": _qty(r["TradeQty"]),
                "side": _side(r["TradeBSFlag"], {1: "B", 2: "S", 0: "N"}),
                "bid_order_no": _qty(r["TradeBuyNo"]), "ask_order_no": _qty(r["TradeSellNo"]),
                "biz_index": _qty(r["ApplSeqNum"]), "channel": _qty(r["ChannelNo"]), "appl_seq": _qty(r["TradeIndex"])}
    elif source == "sh600519_20230201":
        key = "sh600519_20230201_trades"
        r = _read(key, path, dtype={"SecurityID": str})
        cols = {"ts_event": _local_ns(SOURCES[key][2], r["TradTime"]), "symbol": _sym(r["SecurityID"], "SH"),
                "price": _px(r["TradPrice"]), "qty": _qty(r["TradVolume"]),
                "side": r["TradeBSFlag"].to_numpy(dtype=object),
                "bid_order_no": _qty(r["TradeBuyNo"]), "ask_order_no": _qty(r["TradeSellNo"]),
                "biz_index": _qty(r["BizIndex"]), "channel": _qty(r["TradeChan"]), "appl_seq": _qty(r["TradeIndex"])}
    else:
        raise KeyError(f"unknown trades source {source!r}; available: sh_20230711, sh600519_20230201")
    return _keep(_frame(cols), symbols)


def read_l2_trade_tape(path: str | Path | None = None, symbols: Iterable[str] | None = None,
                       with_cancels: bool = False) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Trade tapes of 600000.SH and 000001.SZ on 2023-02-01 in the trades schema.

    The SZSE tape mixes fills (ExecType F, 133,815 rows) and cancels (ExecType 4, 32,996 rows,
    price 0): the trades table holds the **fills only**; the fill quantities of each stock sum
    to its daily volume (600000 18,659,542; 000001 165,342,148 shares). SZSE rows carry no
    aggressor flag: ``side`` is inferred as ``"B"`` when the bid order arrived after the ask
    order (larger application sequence number: the incoming order is the aggressor),
    else ``"S"``, inside continuous trading (:func:`continuous_mask`),
    and ``"N"`` outside it (call auctions). On the SSE tape (which has the flag) the same rule
    agrees with it on every continuous-trading row (a test checks this). SZSE has no
    ``biz_index``: it is the ApplSeqNum (already the channel's joint sequence there).

    Mapping: TradeTime→ts_event, SecurityID + Market→symbol, TradePrice→price,
    TradeQty→qty, BidApplSeqNum/OfferApplSeqNum→bid/ask_order_no, BizIndex (SSE) or
    ApplSeqNum (SZSE)→biz_index, ChannelNo→channel, ApplSeqNum→appl_seq.

    Parameters
    ----------
    path, symbols : as :func:`read_l2_orders`.
    with_cancels : bool
        Also return the SZSE cancels as a second frame (``ts_event``, ``time``, ``symbol``,
        ``qty``, ``side`` of the cancelled order, ``order_no``).
    """
    r = _read("tape_20230201", path, dtype={"TradeBSFlag": str, "ExecType": str})
    sym = (r["Market"].astype(str) + r["SecurityID"].astype(str).str.zfill(6)).to_numpy(dtype=object)
    ts = _local_ns(SOURCES["tape_20230201"][2], r["TradeTime"])
    sz = r["Market"].eq("SZ").to_numpy()
    cancel = sz & r["ExecType"].eq("4").to_numpy()
    bid, ask = _qty(r["BidApplSeqNum"]), _qty(r["OfferApplSeqNum"])
    cont = continuous_mask(ts, SOURCES["tape_20230201"][2])
    inferred = np.where(cont, np.where(bid > ask, "B", "S"), "N").astype(object)
    flag = r["TradeBSFlag"].to_numpy(dtype=object)
    side = np.where(sz, inferred, flag)
    biz = np.where(sz, _qty(r["ApplSeqNum"]), _qty(r["BizIndex"]))
    cols = {"ts_event": ts, "symbol": sym, "price": _px(r["TradePrice"]), "qty": _qty(r["TradeQty"]),
            "side": side, "bid_order_no": bid, "ask_order_no": ask, "biz_index": biz,
            "channel": _qty(r["ChannelNo"]), "appl_seq": _qty(r["ApplSeqNum"])}
    full = pd.DataFrame(cols)
    trades = _keep(_frame({k: v[~cancel] for k, v in cols.items()}), symbols)
    if not with_cancels:
        return trades
    c = full[cancel]
    canc = _frame({"ts_event": c["ts_event"].to_numpy(), "symbol": c["symbol"].to_numpy(),
                   "qty": c["qty"].to_numpy(), "side": np.where(c["bid_order_no"] > 0, "B", "S").astype(object),
                   "order_no": np.where(c["bid_order_no"] > 0, c["bid_order_no"], c["ask_order_no"])})
    return trades, _keep(canc, symbols)


#: Source columns of each snapshot file (the mapping of :func:`read_l2_snapshots_for_intraday`):
#: time column, phase column and its codes,
#: totals, (prev close, last, open, high, low), weighted (price, size) per side, and the level
#: columns (``base``: the number of the best level in the column names).
_SNAPSHOT_COLUMNS = {
    "sz_20220601": dict(
        key="sz_20220601", time="MDTime", phase="TradingPhaseCode",
        phases={1: 1, 2: 2, 3: 2, 4: 3, 5: 4, 6: 5}, num_trades=None, volume="TotalVolumeTrade",
        value="TotalValueTrade", prices=("PreClosePx", "LastPx", "OpenPx", "HighPx", "LowPx"),
        bid_weight=("WeightedAvgBidPx", "TotalBidQty"), ask_weight=("WeightedAvgOfferPx", "TotalOfferQty"),
        bid_px="BuyPrice{}", bid_sz="BuyOrderQty{}", ask_px="SellPrice{}", ask_sz="SellOrderQty{}", base=1),
    "sh_20211201": dict(
        key="sh_20211201", time="DateTime", phase="InstrumentStatus", phases={"OCALL": 1, "TRADE": 2},
        num_trades="NumTrades", volume="TotalVolumeTrade", value="TotalValueTrade",
        prices=("PreClosePx", "LastPx", "OpenPx", "HighPx", "LowPx"),
        bid_weight=("WeightedAvgBidPx", "TotalBidQty"), ask_weight=("WeightedAvgOfferPx", "TotalOfferQty"),
        bid_px="BidPrice{}", bid_sz="BidOrderQty{}", ask_px="OfferPrice{}", ask_sz="OfferOrderQty{}", base=0,
        drop=("BidOrders", "OfferOrders")),
    "sh600519_20230201": dict(
        key="sh600519_20230201_snapshots", time="UpdateTime", phase="InstruStatus",
        phases={"START": 0, "OCALL": 1, "TRADE": 2, "CCALL": 4, "CLOSE": 5, "ENDTR": 5}, num_trades="TradNumber",
        volume="TradVolume", value="Turnover",
        prices=("PreCloPrice", "LastPrice", "OpenPrice", "HighPrice", "LowPrice"),
        bid_weight=("WAvgBidPri", "TotalBidVol"), ask_weight=("WAvgAskPri", "TotalAskVol"),
        bid_px="BidPrice{}", bid_sz="BidVolume{}", ask_px="AskPrice{}", ask_sz="AskVolume{}", base=1),
}


def read_l2_snapshots_for_intraday(source: str, path: str | Path | None = None,
                                   symbols: Iterable[str] | None = None) -> pd.DataFrame:
    """10-level snapshots in the schema of :func:`quantgym.data.sse_l2.convert_snapshots`.

    Parameters
    ----------
    source : {"sz_20220601", "sh_20211201", "sh600519_20230201"}
        ``sz_20220601``: SZSE 3-second snapshots of five stocks, 2022-06-01, 09:15-15:02
        (20,980 rows); ``sh_20211201``: SSE snapshots of 30 stocks, 2021-12-01,
        **09:15-10:30 only** (32,972 rows); ``sh600519_20230201``: 600519, 2023-02-01,
        08:45-15:40 (5,109 rows).
    path, symbols : as :func:`read_l2_orders`.

    Returns
    -------
    DataFrame sorted by (``ts_event``, ``symbol``), one row per snapshot, the columns of
    :func:`~quantgym.data.sse_l2.convert_snapshots` in the same order: ``ts_event``, ``time``,
    ``symbol``, ``trading_phase`` (0 start, 1 opening auction, 2 trading — 09:25 to the closing
    auction, the lunch break included as on SSE —, 3 break, 4 closing auction, 5 closed),
    ``num_trades``, ``total_volume`` (shares, cumulative), ``total_value`` (CNY, cumulative),
    ``prev_close``, ``last_px``, ``open_px``, ``high_px``, ``low_px`` (CNY, NaN when 0),
    ``bid_weight_px``, ``bid_weight_size``, ``ask_weight_px``, ``ask_weight_size``, then
    ``bid_px_0i``, ``bid_sz_0i``, ``ask_px_0i``, ``ask_sz_0i`` for i = 0..9 (empty level: NaN
    price, size 0). ``num_trades`` is all-NaN (float) for ``sz_20220601`` (not in the source).

    Mapping: ``sz_20220601`` MDTime; TradingPhaseCode 1→1, 2 (09:25-09:30)→2, 3→2, 4→3,
    5→4, 6→5; TotalVolumeTrade, TotalValueTrade, PreClosePx, LastPx, OpenPx, HighPx, LowPx,
    WeightedAvgBidPx/TotalBidQty, WeightedAvgOfferPx/TotalOfferQty,
    BuyPrice{i+1}/BuyOrderQty{i+1}, SellPrice{i+1}/SellOrderQty{i+1}. ``sh_20211201`` DateTime;
    InstrumentStatus OCALL→1, TRADE→2; NumTrades, the same totals and weights,
    BidPrice{i}/BidOrderQty{i}, OfferPrice{i}/OfferOrderQty{i}. ``sh600519_20230201``
    UpdateTime; InstruStatus START→0, OCALL→1, TRADE→2, CCALL→4, CLOSE/ENDTR→5; TradNumber,
    TradVolume, Turnover, PreCloPrice, LastPrice, OpenPrice, HighPrice, LowPrice,
    WAvgBidPri/TotalBidVol, WAvgAskPri/TotalAskVol, BidPrice{i+1}/BidVolume{i+1},
    AskPrice{i+1}/AskVolume{i+1}.
    """
    if source not in _SNAPSHOT_COLUMNS:
        raise KeyError(f"unknown snapshots source {source!r}; available: {', '.join(_SNAPSHOT_COLUMNS)}")
    c = _SNAPSHOT_COLUMNS[source]
    key = c["key"]
    drop = c.get("drop")
    r = _read(key, path, dtype={"SecurityID": str}, usecols=(lambda x: not x.startswith(drop)) if drop else None)
    ts = _local_ns(SOURCES[key][2], r[c["time"]])
    sym = _sym(r["SecurityID"], SOURCES[key][3])
    cols = {"ts_event": ts, "symbol": sym,
            "trading_phase": r[c["phase"]].map(c["phases"]).to_numpy(dtype=np.int64),
            "num_trades": _qty(r[c["num_trades"]]) if c["num_trades"] else np.full(len(r), np.nan),
            "total_volume": _qty(r[c["volume"]]), "total_value": r[c["value"]].to_numpy(np.float64)}
    for out_name, src in zip(("prev_close", "last_px", "open_px", "high_px", "low_px"), c["prices"]):
        cols[out_name] = _px(r[src])
    for side, (px_col, sz_col) in (("bid", c["bid_weight"]), ("ask", c["ask_weight"])):
        cols[f"{side}_weight_px"], cols[f"{side}_weight_size"] = _px(r[px_col]), _qty(r[sz_col])
    for i in range(LEVELS):
        for side in ("bid", "ask"):
            px = _px(r[c[side + "_px"].format(i + c["base"])])
            cols[f"{side}_px_{i:02d}"] = px
            cols[f"{side}_sz_{i:02d}"] = np.where(np.isnan(px), 0, _qty(r[c[side + "_sz"].format(i + c["base"])]))
    return _keep(_frame(cols), symbols)  # insertion order = the sse_l2 column order


_TABLE_READERS = {
    "sh_20230711_orders": lambda p, s: read_l2_orders("sh_20230711", p, s),
    "sh_20230711_trades": lambda p, s: read_l2_trades("sh_20230711", p, s),
    "sz_20220601": lambda p, s: read_l2_snapshots_for_intraday("sz_20220601", p, s),
    "sh_20211201": lambda p, s: read_l2_snapshots_for_intraday("sh_20211201", p, s),
    "tape_20230201": lambda p, s: read_l2_trade_tape(p, s),
    "sh600519_20230201_orders": lambda p, s: read_l2_orders("sh600519_20230201", p, s),
    "sh600519_20230201_trades": lambda p, s: read_l2_trades("sh600519_20230201", p, s),
    "sh600519_20230201_snapshots": lambda p, s: read_l2_snapshots_for_intraday("sh600519_20230201", p, s),
}


def load_l2_days(symbols: Iterable[str] | None = None, dates: Iterable[str] | None = None,
                 path: str | Path | None = None) -> dict[str, dict[str, pd.DataFrame]]:
    """Every stock-day of :data:`CATALOG` for ``symbols`` and ``dates``, by date and table.

    Tables of one date and kind from several sources are concatenated and sorted by
    (``ts_event``, ``symbol``) (e.g. 2023-02-01 ``trades``: the tapes of SH600000 and
    SZ000001 and the trades of SH600519). Only the files with a wanted stock-day are read.

    Returns
    -------
    ``{date_iso: {table: DataFrame}}`` (empty when nothing matches).
    """
    want = None if symbols is None else set(symbols)
    wdates = None if dates is None else {str(pd.Timestamp(d).date()) for d in dates}
    rows = [c for c in CATALOG if (want is None or c[2] in want) and (wdates is None or c[0] in wdates)]
    out: dict[str, dict[str, list]] = {}
    for key in dict.fromkeys(c[3] for c in rows):
        syms = sorted({c[2] for c in rows if c[3] == key})
        date, table = next((c[0], c[1]) for c in rows if c[3] == key)
        out.setdefault(date, {}).setdefault(table, []).append(_TABLE_READERS[key](path, syms))
    return {d: {t: (fs[0] if len(fs) == 1 else pd.concat(fs, ignore_index=True)
                    .sort_values(["ts_event", "symbol"], kind="stable").reset_index(drop=True))
                for t, fs in tabs.items()} for d, tabs in sorted(out.items())}


def write_bundled(shared: str | Path, dest: str | Path = BUNDLED_DIR) -> list[Path]:
    """Write the shipped extracts (:data:`BUNDLED_SNAPSHOTS`) from ``shared``/a_share_l2 (the zips).

    Parquet, zstd level 19; the columns and dtypes of :func:`read_snapshots`. Returns the written paths.
    """
    out = []
    for key, (name, symbols) in BUNDLED_SNAPSHOTS.items():
        df = read_snapshots(key, path=Path(shared) / "a_share_l2", symbols=list(symbols))
        target = Path(dest) / name
        df.to_parquet(target, compression="zstd", compression_level=19, index=False)
        out.append(target)
    return out


__all__ = ["ENV_VAR", "LEVELS", "CONTINUOUS", "SNAPSHOT_FILES", "BUNDLED_SNAPSHOTS", "write_bundled", "data_dir", "continuous_mask", "read_snapshots",
           "read_l2_orders", "read_l2_trades", "read_l2_trade_tape", "read_l2_snapshots_for_intraday",
           "load_l2_days", "a_share_l2_dir", "CATALOG", "SOURCES"]


if __name__ == "__main__":  # python -m quantgym.data.a_share_l2 --shared RAW
    import argparse

    from quantgym._util import shared_data_dir

    _ap = argparse.ArgumentParser(description="write the shipped A-share Level-2 extract(s)")
    _ap.add_argument("--shared", default=str(shared_data_dir()))
    for _p in write_bundled(_ap.parse_args().shared):
        print(_p)
