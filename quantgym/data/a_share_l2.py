"""Reader of the real A-share Level-2 10-level **snapshot** files (SZSE and SSE), as tidy book tables.

Source: the development repository's ``shared/data/a_share_l2/`` (from the public repository
dolphindb/Tutorials_CN, commit 35282f623b8f, Apache-2.0 for the repository; **the original data
vendor is not stated there**). Because the vendor and its terms are unknown, these files are not
shipped in the wheel: the reader takes the folder as an argument (or ``QUANTGYM_A_SHARE_L2``, else
``<clone>/../shared/data/a_share_l2``). See docs/data.md, "A-share Level-2 samples".

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
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

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


def data_dir(path: str | Path | None = None) -> Path:
    """The folder of the A-share Level-2 files: ``path``, else ``$QUANTGYM_A_SHARE_L2``, else
    ``<clone>/../shared/data/a_share_l2`` (the development layout).

    Raises
    ------
    FileNotFoundError
        One line naming what to pass, if the folder does not exist.
    """
    if path is None:
        path = os.environ.get(ENV_VAR) or Path(__file__).resolve().parents[3] / "shared" / "data" / "a_share_l2"
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"A-share Level-2 folder {p} not found: pass its path (data_dir=...) or set "
                                f"{ENV_VAR} to the folder holding {SNAPSHOT_FILES['szse_20220601']['zip']}")
    return p


def _local_ns(date: str, times: pd.Series) -> np.ndarray:
    """Local ``HH:MM:SS[.fff]`` (or ``YYYY.MM.DDTHH:MM:SS.fff``) on ``date`` -> UTC ns."""
    t = times.astype(str).str.replace('"', "", regex=False)
    t = t.str.split("T").str[-1]
    tod = pd.to_timedelta(t).to_numpy().astype("timedelta64[ns]").astype(np.int64)
    return int(pd.Timestamp(date, tz=_TZ).value) + tod


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
        Folder of the zips (see :func:`data_dir`).
    symbols : list of str, optional
        Keep these symbols (with suffix, e.g. ``["300274.SZ"]``), in source order.

    Raises
    ------
    ValueError
        Unknown ``file`` key or a symbol not in the file. ``FileNotFoundError``: see :func:`data_dir`.
    """
    if file not in SNAPSHOT_FILES:
        raise ValueError(f"unknown snapshot file {file!r}; choose from {sorted(SNAPSHOT_FILES)}")
    f = SNAPSHOT_FILES[file]
    with zipfile.ZipFile(data_dir(path) / f["zip"]) as z, z.open(f["member"]) as fh:
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


__all__ = ["ENV_VAR", "LEVELS", "CONTINUOUS", "SNAPSHOT_FILES", "data_dir", "continuous_mask", "read_snapshots"]
