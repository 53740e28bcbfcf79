"""Limit-order-book readers into the one Market-Bench book schema (spec market_bench §2, §9.2).

Book schema (one row per snapshot): ``ts_event`` (int64 ns since the Unix epoch, UTC),
``symbol`` (str), then for level i = 0..L-1 (0 = best) ``bid_px_0i, bid_sz_0i, ask_px_0i,
ask_sz_0i`` (Databento MBP-10 naming; prices float64 in currency units, sizes int64 shares).
An empty level is written as price NaN and size 0.

Readers
-------
- :func:`read_lobster`: LOBSTER message + order-book pair (prices USD x 10,000; §9.2.1).
- :func:`read_databento_mbp`: Databento MBP-10 DBN files through the optional ``databento``
  client (``pip install quantgym[databento]``; §9.2.3).
- :func:`sse_book`: the SSE Level-2 600519 snapshots (:mod:`quantgym.data.sse_l2`), continuous
  trading only (§9.2.2).
- :func:`clean_book`: the cleaning steps (a)-(d) of §9.2.4.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

# LOBSTER's price scale (integer = USD x 10,000) and empty-level dummies, defined in the data layer
from quantgym.data.lobster import EMPTY_ASK as LOBSTER_EMPTY_ASK
from quantgym.data.lobster import EMPTY_BID as LOBSTER_EMPTY_BID
from quantgym.data.lobster import PRICE_SCALE as LOBSTER_PRICE_SCALE

_NY = "America/New_York"


def book_columns(levels: int) -> list[str]:
    """Column names of the book schema with ``levels`` levels (``ts_event, symbol, bid_px_00, ...``)."""
    cols = ["ts_event", "symbol"]
    for i in range(levels):
        cols += [f"bid_px_{i:02d}", f"bid_sz_{i:02d}", f"ask_px_{i:02d}", f"ask_sz_{i:02d}"]
    return cols


def n_levels(book: pd.DataFrame) -> int:
    """Number of levels L of a book-schema frame (count of ``bid_px_NN`` columns)."""
    return sum(1 for c in book.columns if re.fullmatch(r"bid_px_\d\d", c))


def lobster_time_to_ns(times: list[str] | np.ndarray) -> np.ndarray:
    """LOBSTER ``Time`` strings (seconds after midnight) -> int64 ns, exactly (never via float).

    ``"35999.954513652"`` -> 35,999,954,513,652 (integer part x 1e9 + fraction right-padded
    to 9 digits, spec §9.2.1).
    """
    out = np.empty(len(times), dtype=np.int64)
    for j, t in enumerate(times):
        t = str(t).strip()
        whole, _, frac = t.partition(".")
        if len(frac) > 9:
            raise ValueError(f"LOBSTER time {t!r} has more than 9 decimals")
        out[j] = int(whole) * 1_000_000_000 + int((frac or "0").ljust(9, "0"))
    return out


def _lobster_date_symbol(path: Path) -> tuple[str, str]:
    m = re.match(r"([A-Za-z.]+)_(\d{4}-\d{2}-\d{2})_", path.name)
    if not m:
        raise ValueError(f"cannot infer symbol/date from LOBSTER file name {path.name!r}; pass symbol= and date=")
    return m.group(1), m.group(2)


def read_lobster(message_path: str | Path, orderbook_path: str | Path, *, date: str | None = None,
                 symbol: str | None = None, levels: int | None = None) -> pd.DataFrame:
    """Read a LOBSTER message/order-book pair into the book schema (spec §9.2.1).

    Parameters
    ----------
    message_path, orderbook_path : path
        The two LOBSTER CSVs (no header). Row i of the order book is the book after message i;
        only the message ``Time`` column is read.
    date : str, optional
        Trading day ``YYYY-MM-DD`` (default: parsed from the file name, ``SYM_YYYY-MM-DD_...``).
    symbol : str, optional
        Symbol label (default: parsed from the file name).
    levels : int, optional
        Keep the first ``levels`` levels (default: all levels of the file).

    Returns
    -------
    DataFrame in the book schema, one row per message (not cleaned; see :func:`clean_book`).
    ``ts_event`` = UTC ns of 00:00 America/New_York on ``date`` + the message time. Prices:
    USD (integer / 10,000); sizes: shares; empty levels (ask 9999999999, bid -9999999999) ->
    NaN price and size 0.

    Raises
    ------
    ValueError
        If the two files have different row counts or an odd column layout.
    """
    message_path, orderbook_path = Path(message_path), Path(orderbook_path)
    sym0, date0 = _lobster_date_symbol(orderbook_path) if (date is None or symbol is None) else (symbol, date)
    date, symbol = date or date0, symbol or sym0
    msg = pd.read_csv(message_path, header=None, usecols=[0], dtype=str)
    ob = pd.read_csv(orderbook_path, header=None, dtype=np.int64).to_numpy()
    if len(msg) != len(ob):
        raise ValueError(f"LOBSTER pair has {len(msg)} messages but {len(ob)} book rows")
    return lobster_book_frame(lobster_time_to_ns(msg[0].to_numpy()), ob, date=date, symbol=symbol, levels=levels)


def lobster_book_frame(time_ns: np.ndarray, ob: np.ndarray, *, date: str, symbol: str,
                       levels: int | None = None) -> pd.DataFrame:
    """LOBSTER order-book rows (int64 array (n, 4K), LOBSTER column order and units, e.g. a file or
    :func:`quantgym.data.lobster.rebuild_book`'s ``book``) -> book schema (spec §9.2.1).

    ``time_ns``: the messages' times as ns after midnight New York (:func:`lobster_time_to_ns`);
    ``ts_event`` = UTC ns of 00:00 America/New_York on ``date`` + ``time_ns``. Empty levels (ask
    9999999999, bid -9999999999) -> NaN price, size 0. ``levels``: keep the first L (default all K).
    """
    if ob.shape[1] % 4:
        raise ValueError(f"LOBSTER order book has {ob.shape[1]} columns, not a multiple of 4")
    file_levels = ob.shape[1] // 4
    L = file_levels if levels is None else min(int(levels), file_levels)
    midnight = int(pd.Timestamp(date, tz=_NY).value)
    out: dict[str, object] = {
        "ts_event": midnight + np.asarray(time_ns, dtype=np.int64),
        "symbol": np.full(len(ob), symbol, dtype=object),
    }
    for i in range(L):
        ap, asz, bp, bsz = (ob[:, 4 * i + k] for k in range(4))
        a_empty, b_empty = ap >= LOBSTER_EMPTY_ASK, bp <= LOBSTER_EMPTY_BID
        out[f"bid_px_{i:02d}"] = np.where(b_empty, np.nan, bp / LOBSTER_PRICE_SCALE)
        out[f"bid_sz_{i:02d}"] = np.where(b_empty, 0, bsz).astype(np.int64)
        out[f"ask_px_{i:02d}"] = np.where(a_empty, np.nan, ap / LOBSTER_PRICE_SCALE)
        out[f"ask_sz_{i:02d}"] = np.where(a_empty, 0, asz).astype(np.int64)
    return pd.DataFrame(out)


def read_databento_mbp(path: str | Path, *, symbol: str | None = None, levels: int | None = None) -> pd.DataFrame:
    """Read a Databento MBP-10 DBN file (zstd or plain) into the book schema (spec §9.2.3).

    Needs the optional ``databento`` client (``pip install quantgym[databento]``); it reads
    the file offline (``DBNStore.from_file(path).to_df()``).

    Parameters
    ----------
    path : path
        ``*.mbp-10.dbn[.zst]``.
    symbol : str, optional
        Symbol label (default: the ``symbol`` column of the decoded frame, else the file stem).
    levels : int, optional
        Keep the first ``levels`` levels (default 10).

    Returns
    -------
    DataFrame in the book schema, one row per record in file order (not cleaned). Prices: float
    USD; an undefined price (NaN, or the DBN undefined sentinel) -> NaN and size 0. Clear
    (``R``) records leave an empty book; :func:`clean_book` step (a) drops them.

    Raises
    ------
    ImportError
        With the install hint, if ``databento`` is not installed.
    """
    try:
        import databento as db
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("reading Databento DBN files needs the optional client: "
                          "pip install 'quantgym[databento]'") from exc
    import warnings

    store = db.DBNStore.from_file(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the client's own pandas deprecation warnings
        df = store.to_df(price_type="float", pretty_ts=False, map_symbols=True)
    df = df.reset_index()
    L = 10 if levels is None else min(int(levels), 10)
    ts = df["ts_event"]
    ts = ts.astype("int64").to_numpy() if not hasattr(ts.dtype, "tz") else ts.to_numpy().astype("datetime64[ns]").astype(np.int64)
    if symbol is None:
        symbol = str(df["symbol"].iloc[0]) if "symbol" in df and len(df) and pd.notna(df["symbol"].iloc[0]) else Path(path).name.split(".")[0]
    out: dict[str, object] = {"ts_event": ts.astype(np.int64), "symbol": np.full(len(df), symbol, dtype=object)}
    for i in range(L):
        for side in ("bid", "ask"):
            px = pd.to_numeric(df[f"{side}_px_{i:02d}"], errors="coerce").to_numpy(dtype=float)
            sz = df[f"{side}_sz_{i:02d}"].to_numpy(dtype=np.int64)
            bad = ~np.isfinite(px) | (px <= 0) | (px > 1e12)
            out[f"{side}_px_{i:02d}"] = np.where(bad, np.nan, px)
            out[f"{side}_sz_{i:02d}"] = np.where(bad, 0, sz).astype(np.int64)
    return pd.DataFrame(out)[book_columns(L)]


#: Continuous-trading windows of the SSE day kept for Market-Bench (local time, §9.2.2).
SSE_WINDOWS = (("09:30:00", "11:30:00", True), ("13:00:00", "14:57:00", False))  # (start, end, end inclusive)


def sse_book(snapshots: pd.DataFrame | None = None, *, levels: int = 10) -> pd.DataFrame:
    """SSE 600519 snapshots -> book schema, continuous trading only (spec §9.2.2).

    Keeps rows with ``trading_phase == 2`` and local time in [09:30:00, 11:30:00] ∪
    [13:00:00, 14:57:00) (drops the post-auction 09:25-09:29 rows, the frozen lunch rows and
    the all-zero 14:57:00 row). Not cleaned otherwise (see :func:`clean_book`).

    Parameters
    ----------
    snapshots : DataFrame, optional
        ``load_sse_l2_day()["snapshots"]`` (default: loaded from the bundled tables).
    levels : int
        Levels to keep (1..10).
    """
    from quantgym.data.sse_l2 import SSE_DAY, load_sse_l2_day

    snaps = load_sse_l2_day()["snapshots"] if snapshots is None else snapshots
    ts = snaps["ts_event"].to_numpy(dtype=np.int64)
    day0 = int(pd.Timestamp(SSE_DAY, tz="Asia/Shanghai").value)
    tod = ts - day0

    def _ns(hms: str) -> int:
        h, m, s = (int(x) for x in hms.split(":"))
        return (h * 3600 + m * 60 + s) * 1_000_000_000

    keep = np.zeros(len(snaps), dtype=bool)
    for start, end, incl in SSE_WINDOWS:
        keep |= (tod >= _ns(start)) & ((tod <= _ns(end)) if incl else (tod < _ns(end)))
    keep &= snaps["trading_phase"].to_numpy() == 2
    out = snaps.loc[keep, book_columns(levels)].reset_index(drop=True)
    out["symbol"] = out["symbol"].astype(object)
    return out


def clean_book(book: pd.DataFrame, levels: int) -> pd.DataFrame:
    """Cleaning steps (a)-(d) of spec §9.2.4, in this order.

    (a) drop rows with an empty level 0 on either side or ``bid_px_00 >= ask_px_00``;
    (b) per (symbol, ``ts_event``) keep the last row in source order;
    (c) keep the top ``levels`` levels;
    (d) drop a row whose L-level prices and raw sizes equal those of the previous kept row of
    the same symbol.

    Returns a new frame (index reset), rows in source order.
    """
    b = book.reset_index(drop=True)
    bp, ap = b["bid_px_00"].to_numpy(dtype=float), b["ask_px_00"].to_numpy(dtype=float)
    ok = np.isfinite(bp) & np.isfinite(ap) & (b["bid_sz_00"].to_numpy() > 0) & (b["ask_sz_00"].to_numpy() > 0)
    ok &= np.where(ok, bp < ap, False)
    b = b[ok]
    b = b[~b.duplicated(subset=["symbol", "ts_event"], keep="last")]
    b = b[book_columns(levels)].reset_index(drop=True)
    vals = b.drop(columns=["ts_event"])
    same = vals.groupby("symbol", sort=False).shift(1)
    eq = (vals.drop(columns=["symbol"]).eq(same) | (vals.drop(columns=["symbol"]).isna() & same.isna())).all(axis=1)
    eq &= same.notna().any(axis=1)
    return b[~eq.to_numpy()].reset_index(drop=True)


__all__ = ["book_columns", "n_levels", "lobster_time_to_ns", "read_lobster", "lobster_book_frame", "read_databento_mbp", "sse_book",
           "clean_book", "SSE_WINDOWS"]
