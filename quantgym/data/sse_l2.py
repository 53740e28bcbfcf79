"""Reader of the real SSE Level-2 day of 600519 (Kweichow Moutai), 2023-02-07.

Source: the raw ``quant_arena/intraday/sse_600519_20230207/`` folder (see its
PROVENANCE section; fpga2u/AXOrderBook, commit 31411ec6, MIT). The raw CSVs keep the
exchange's scaled integers (prices CNY x 1000, quantities shares x 1000, value CNY x 100000,
times ``HHMMSS`` / ``HHMMSScc`` Asia/Shanghai). This module converts them into three tidy
tables in plain units, which are also what ``quantgym/data/bundled/sse_600519_20230207/``
ships as parquet (built by :mod:`quantgym.envs.market_bench.build_data`).

Units of every returned table
-----------------------------
- ``ts_event``: int64 nanoseconds since the Unix epoch, **UTC** (the local Asia/Shanghai
  time of the record; Shanghai has no DST, UTC+8).
- ``time``: the same instant as ``datetime64[ns, Asia/Shanghai]`` (for reading).
- prices: float64 **CNY** (e.g. 1808.08); an empty book level has price NaN and size 0.
- quantities / sizes / volumes: int64 **shares**.
- values (turnover): float64 CNY.

Used by Market-Bench (spec market_bench §9.2.2) and by the Quant-Arena intraday view.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: Trading day of the file (Asia/Shanghai).
SSE_DAY = "2023-02-07"
#: Security code of the file.
SSE_SYMBOL = "600519"
#: Number of book levels per side in the snapshot file.
SSE_LEVELS = 10
#: Folder of the shipped parquet tables.
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled" / "sse_600519_20230207"
#: Raw CSV file names (as in the raw ``quant_arena/intraday/sse_600519_20230207`` folder).
RAW_FILES = {
    "snapshots": "600519_20230207_snapshots_L10.csv.gz",
    "trades": "600519_20230207_trades.csv.gz",
    "orders": "600519_20230207_orders.csv.gz",
}
PRICE_SCALE = 1000  # CNY x 1000
QTY_SCALE = 1000  # shares x 1000
VALUE_SCALE = 100_000  # CNY x 100000

_TZ = "Asia/Shanghai"
_DAY_START_UTC_NS = int(pd.Timestamp(SSE_DAY, tz=_TZ).value)  # 00:00 local, as UTC ns


def _hhmmss_to_ns(hhmmss: np.ndarray, hundredths: np.ndarray | None = None) -> np.ndarray:
    """Local ``HHMMSS`` (+ optional hundredths) on :data:`SSE_DAY` -> UTC ns (int64)."""
    v = np.asarray(hhmmss, dtype=np.int64)
    hh, mm, ss = v // 10000, (v // 100) % 100, v % 100
    ns = ((hh * 3600 + mm * 60 + ss) * 1_000_000_000).astype(np.int64)
    if hundredths is not None:
        ns = ns + np.asarray(hundredths, dtype=np.int64) * 10_000_000
    return ns + _DAY_START_UTC_NS


def _qty(x: pd.Series, what: str) -> np.ndarray:
    v = x.to_numpy(dtype=np.int64)
    if np.any(v % QTY_SCALE):
        raise ValueError(f"{what}: quantity not a whole number of shares (x{QTY_SCALE})")
    return v // QTY_SCALE


def _px(x: pd.Series) -> np.ndarray:
    v = x.to_numpy(dtype=np.int64)
    out = v / PRICE_SCALE
    return np.where(v == 0, np.nan, out)


def exchange_time(ts: np.ndarray) -> pd.Series:
    """Nanosecond UTC timestamps as the exchange's local time (Asia/Shanghai)."""
    return pd.Series(pd.to_datetime(ts, unit="ns", utc=True)).dt.tz_convert(_TZ)


def convert_snapshots(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw snapshot CSV (MsgType 111) -> tidy snapshot table.

    Parameters
    ----------
    raw : DataFrame
        The columns of ``600519_20230207_snapshots_L10.csv.gz`` (scaled integers).

    Returns
    -------
    DataFrame, one row per snapshot in file order, columns ``ts_event`` (int64 UTC ns, from
    ``DataTimeStamp`` HHMMSS local), ``time``, ``symbol``, ``trading_phase`` (0 start,
    1 opening auction, 2 continuous, 3 break, 4 closing auction, 5 closed), ``num_trades``,
    ``total_volume`` (shares), ``total_value`` (CNY), ``prev_close``, ``last_px``, ``open_px``,
    ``high_px``, ``low_px``, ``bid_weight_px``, ``ask_weight_px`` (CNY, NaN when 0),
    ``bid_weight_size``, ``ask_weight_size`` (shares), then for i = 0..9 ``bid_px_0i``,
    ``bid_sz_0i``, ``ask_px_0i``, ``ask_sz_0i`` (Databento MBP naming; CNY / shares; empty
    level = NaN price, size 0).
    """
    ts = _hhmmss_to_ns(raw["DataTimeStamp"].to_numpy())
    out = {
        "ts_event": ts,
        "time": exchange_time(ts).to_numpy(),
        "symbol": np.full(len(raw), SSE_SYMBOL, dtype=object),
        "trading_phase": raw["TradingPhase"].to_numpy(dtype=np.int64),
        "num_trades": raw["NumTrades"].to_numpy(dtype=np.int64),
        "total_volume": _qty(raw["TotalVolumeTrade"], "TotalVolumeTrade"),
        "total_value": raw["TotalValueTrade"].to_numpy(dtype=np.int64) / VALUE_SCALE,
        "prev_close": _px(raw["PrevClosePx"]),
        "last_px": _px(raw["LastPx"]),
        "open_px": _px(raw["OpenPx"]),
        "high_px": _px(raw["HighPx"]),
        "low_px": _px(raw["LowPx"]),
        "bid_weight_px": _px(raw["BidWeightPx"]),
        "bid_weight_size": _qty(raw["BidWeightSize"], "BidWeightSize"),
        "ask_weight_px": _px(raw["AskWeightPx"]),
        "ask_weight_size": _qty(raw["AskWeightSize"], "AskWeightSize"),
    }
    for i in range(SSE_LEVELS):
        out[f"bid_px_{i:02d}"] = _px(raw[f"BidLevel[{i}].Price"])
        out[f"bid_sz_{i:02d}"] = _qty(raw[f"BidLevel[{i}].Qty"], f"BidLevel[{i}].Qty")
        out[f"ask_px_{i:02d}"] = _px(raw[f"AskLevel[{i}].Price"])
        out[f"ask_sz_{i:02d}"] = _qty(raw[f"AskLevel[{i}].Qty"], f"AskLevel[{i}].Qty")
    return pd.DataFrame(out)


def convert_trades(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw trade CSV (MsgType 191) -> tidy trades.

    Columns: ``ts_event`` (UTC ns from ``TransactTime`` HHMMSScc), ``time``, ``symbol``,
    ``price`` (CNY), ``qty`` (shares), ``side`` (aggressor: ``"B"`` buyer-initiated,
    ``"S"`` seller-initiated, ``"N"`` auction cross), ``bid_order_no``, ``ask_order_no``
    (match ``order_no`` of the orders table), ``biz_index`` (joint sequence of trades and
    orders), ``channel``, ``appl_seq``.
    """
    tt = raw["TransactTime"].to_numpy(dtype=np.int64)
    ts = _hhmmss_to_ns(tt // 100, tt % 100)
    return pd.DataFrame({
        "ts_event": ts,
        "time": exchange_time(ts).to_numpy(),
        "symbol": np.full(len(raw), SSE_SYMBOL, dtype=object),
        "price": raw["LastPx"].to_numpy(dtype=np.int64) / PRICE_SCALE,
        "qty": _qty(raw["LastQty"], "LastQty"),
        "side": np.array([chr(c) for c in raw["ExecType"].to_numpy(dtype=np.int64)], dtype=object),
        "bid_order_no": raw["BidApplSeqNum"].to_numpy(dtype=np.int64),
        "ask_order_no": raw["OfferApplSeqNum"].to_numpy(dtype=np.int64),
        "biz_index": raw["BizIndex"].to_numpy(dtype=np.int64),
        "channel": raw["ChannelNo"].to_numpy(dtype=np.int64),
        "appl_seq": raw["ApplSeqNum"].to_numpy(dtype=np.int64),
    })


def convert_orders(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw order CSV (MsgType 192) -> tidy order events.

    Columns: ``ts_event`` (UTC ns), ``time``, ``symbol``, ``order_no``, ``price`` (CNY),
    ``qty`` (shares), ``side`` (``"B"``/``"S"``), ``ord_type`` (``"A"`` add, ``"D"`` delete),
    ``biz_index``, ``channel``, ``appl_seq``.
    """
    tt = raw["TransactTime"].to_numpy(dtype=np.int64)
    ts = _hhmmss_to_ns(tt // 100, tt % 100)
    return pd.DataFrame({
        "ts_event": ts,
        "time": exchange_time(ts).to_numpy(),
        "symbol": np.full(len(raw), SSE_SYMBOL, dtype=object),
        "order_no": raw["OrderNo"].to_numpy(dtype=np.int64),
        "price": raw["Price"].to_numpy(dtype=np.int64) / PRICE_SCALE,
        "qty": _qty(raw["OrderQty"], "OrderQty"),
        "side": np.array([chr(c) for c in raw["Side"].to_numpy(dtype=np.int64)], dtype=object),
        "ord_type": np.array([chr(c) for c in raw["OrdType"].to_numpy(dtype=np.int64)], dtype=object),
        "biz_index": raw["BizIndex"].to_numpy(dtype=np.int64),
        "channel": raw["ChannelNo"].to_numpy(dtype=np.int64),
        "appl_seq": raw["ApplSeqNum"].to_numpy(dtype=np.int64),
    })


_CONVERTERS = {"snapshots": convert_snapshots, "trades": convert_trades, "orders": convert_orders}


def _fix_time(df: pd.DataFrame) -> pd.DataFrame:
    # parquet round trip keeps the tz; make sure ``time`` is tz-aware Asia/Shanghai
    if "time" in df and getattr(df["time"].dtype, "tz", None) is None:
        df["time"] = exchange_time(df["ts_event"].to_numpy())
    return df


def load_sse_l2_day(path: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """Load the 600519 SSE Level-2 day (2023-02-07) as tidy tables in CNY and shares.

    Parameters
    ----------
    path : str or Path, optional
        ``None`` (default): the shipped parquet tables in
        ``quantgym/data/bundled/sse_600519_20230207/`` (``snapshots.parquet``,
        ``trades.parquet``, ``orders.parquet``). Otherwise a folder holding either those
        parquet files or the raw ``600519_20230207_{snapshots_L10,trades,orders}.csv.gz``
        (e.g. the raw ``quant_arena/intraday/sse_600519_20230207`` folder), which are converted.

    Returns
    -------
    dict with keys ``"snapshots"`` (5,146 rows, all phases incl. auctions and the close),
    ``"trades"`` (18,685 rows) and ``"orders"`` (45,764 rows), each sorted as in the source
    (time non-decreasing). Columns and units: see :func:`convert_snapshots`,
    :func:`convert_trades`, :func:`convert_orders`. Snapshot ``ts_event`` is the second of the
    latest order (``DataTimeStamp``); 16 snapshots share a second with another one.

    Raises
    ------
    FileNotFoundError
        If the folder holds neither the parquet tables nor the raw CSVs.
    """
    folder = BUNDLED_DIR if path is None else Path(path)
    out: dict[str, pd.DataFrame] = {}
    for key, raw_name in RAW_FILES.items():
        pq, raw = folder / f"{key}.parquet", folder / raw_name
        if pq.exists():
            out[key] = _fix_time(pd.read_parquet(pq))
        elif raw.exists():
            out[key] = _CONVERTERS[key](pd.read_csv(raw))
        else:
            raise FileNotFoundError(
                f"SSE Level-2 table {key!r} not found in {folder}: expected {pq.name} or {raw_name}"
            )
    return out


def write_bundled(src_dir: str | Path, dest_dir: str | Path = BUNDLED_DIR) -> dict[str, Path]:
    """Convert the raw CSVs of ``src_dir`` into parquet tables in ``dest_dir`` (build step)."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    tables = load_sse_l2_day(src_dir)
    paths = {}
    for key, df in tables.items():
        p = dest / f"{key}.parquet"
        df.to_parquet(p, index=False, compression="zstd")
        paths[key] = p
    return paths


__all__ = ["load_sse_l2_day", "convert_snapshots", "convert_trades", "convert_orders", "write_bundled",
           "SSE_DAY", "SSE_SYMBOL", "SSE_LEVELS", "BUNDLED_DIR", "RAW_FILES"]
