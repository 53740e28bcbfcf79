"""Quant-Arena data: the panel loader, price limits and the point-in-time view.

Spec: quant_arena.md §2, §10.1 (data facts), §10.3 (view, adjusted prices),
§10.6 (price limits), §10.8 (σ and ADV of the simulated book).

A :class:`QADataset` holds a daily panel as wide ``(T, N)`` float64 arrays (dates
× symbols, symbols ascending) so the evaluator is vectorised numpy. It is built
from a long DataFrame in the documented parquet schema::

    date, symbol, open, high, low, close, volume, adj_factor, suspended, in_csi300 [, st]

(prices raw CNY, volume shares, ``adj_factor`` a backward cumulative factor,
``suspended``/``in_csi300``/``st`` booleans), plus optional static ``info``
(``industry``, ``board``, ``list_date``), an optional market reference series and
optional intraday tables. :func:`load_dataset` reads the bundled default
universe, a user parquet file/folder in that schema, or a qlib-format directory.

:class:`PITView` is the only object agent code sees. It is built on a private
buffer that holds **only rows up to the decision date** (a copy), so nothing it
can reach contains a later row (§10.3, §10.4).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

#: Folder of the bundled data (written by :mod:`quantgym.data.build_quant_arena`).
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "data" / "bundled" / "quant_arena"

#: Raw fields stored per (date, symbol).
RAW_FIELDS = ("open", "high", "low", "close", "volume", "adj_factor", "in_csi300")
#: Fields served by :meth:`PITView.history` (spec §10.3).
VIEW_FIELDS = ("open", "high", "low", "close", "volume", "adj_open", "adj_high", "adj_low", "adj_close",
               "suspended", "in_csi300", "up_limit", "down_limit")
#: Intraday tables a dataset may carry.
INTRADAY_TABLES = ("snapshots", "trades", "orders")

_CHINEXT_20PCT_FROM = np.datetime64("2020-08-24")
_MAIN_REGISTRATION_FROM = np.datetime64("2023-04-10")


class LookAheadError(LookupError):
    """A read past the decision date of a point-in-time view (spec §2, §10.3)."""


def r2(x: Any) -> Any:
    """Round half up to the cent: ``floor(x*100 + 0.5 + 1e-9)/100`` (spec §10 preamble)."""
    return np.floor(np.asarray(x, dtype=np.float64) * 100.0 + 0.5 + 1e-9) / 100.0


def board_of(symbol: str) -> str:
    """Board of a qlib-style symbol (§10.6): ``main``, ``chinext``, ``star`` or ``bse``."""
    code = symbol[2:]
    if symbol.startswith("BJ"):
        return "bse"
    if symbol.startswith("SZ") and code[:3] in ("300", "301"):
        return "chinext"
    if symbol.startswith("SH") and code[:3] in ("688", "689"):
        return "star"
    return "main"


@dataclass
class QADataset:
    """A daily panel in wide form (spec §10.1).

    Attributes
    ----------
    dates : ndarray, shape (T,), datetime64[D]
        Trading days, ascending.
    symbols : ndarray, shape (N,), str
        Symbols, ascending (``SH600000`` < ``SZ000001``).
    fields : dict[str, ndarray (T, N) float64]
        ``open high low close`` (CNY, raw), ``volume`` (shares), ``adj_factor``
        (backward factor), ``in_csi300`` (1.0/0.0); NaN where the stock has no row.
    has_row : ndarray (T, N) bool
        The stock has a row that day.
    suspended : ndarray (T, N) bool
        ``suspended`` or ``volume == 0`` on a row (§10.1); False where no row.
    st : ndarray (T, N) bool or None
        Optional point-in-time ST flag (5 % limits on the main board).
    info : DataFrame
        Index = symbols; columns ``industry`` (2026 snapshot), ``board``, ``list_date``.
    reference : DataFrame or None
        Market reference ``date (datetime64), ret, n`` (§10.10); ``None`` ⇒ computed
        from this panel on demand.
    name : str
        Label written into records.
    """

    dates: np.ndarray
    symbols: np.ndarray
    fields: dict[str, np.ndarray]
    has_row: np.ndarray
    suspended: np.ndarray
    info: pd.DataFrame
    st: np.ndarray | None = None
    reference: pd.DataFrame | None = None
    name: str = "custom"
    intraday_loader: Callable[[], dict[str, dict[str, pd.DataFrame]]] | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frame(cls, df: pd.DataFrame, info: pd.DataFrame | None = None, reference: pd.DataFrame | None = None,
                   name: str = "custom", intraday: dict | Callable | None = None) -> "QADataset":
        """Build from a long DataFrame in the documented schema.

        Parameters
        ----------
        df : DataFrame
            Columns ``date, symbol, open, high, low, close, volume, adj_factor,
            suspended, in_csi300`` and optionally ``st``, ``industry``. One row per
            (date, symbol). Missing ``adj_factor`` ⇒ 1.0; missing ``suspended`` ⇒
            False; missing ``in_csi300`` ⇒ False.
        info : DataFrame, optional
            Static fields indexed (or with a column) by symbol: ``industry``,
            ``board``, ``list_date``. Missing ``board`` is derived from the code;
            missing ``list_date`` is left NaT (the first row is then treated as the
            listing day for the limit rules, §10.6).
        reference : DataFrame, optional
            ``date, ret, n``; default ``None`` = computed from this panel.
        intraday : dict or callable, optional
            ``{date_iso: {table: DataFrame}}`` or a zero-argument callable returning it.

        Raises
        ------
        ValueError
            Missing required columns, duplicate (date, symbol) rows or non-positive prices.
        """
        required = {"date", "symbol", "open", "high", "low", "close", "volume"}
        missing = required - set(df.columns)
        if missing:
            raise ValueError(f"panel is missing required column(s) {sorted(missing)}; "
                             "schema: date, symbol, open, high, low, close, volume, adj_factor, suspended, in_csi300")
        d = pd.to_datetime(df["date"]).to_numpy().astype("datetime64[D]")
        sym = df["symbol"].astype(str).to_numpy()
        dates = np.unique(d)
        symbols = np.unique(sym)
        ti = np.searchsorted(dates, d)
        si = np.searchsorted(symbols, sym)
        T, N = len(dates), len(symbols)
        has_row = np.zeros((T, N), dtype=bool)
        has_row[ti, si] = True
        if has_row.sum() != len(df):
            raise ValueError("panel has duplicate (date, symbol) rows")
        fields = {}
        for name_ in RAW_FIELDS:
            a = np.full((T, N), np.nan)
            if name_ in df.columns:
                a[ti, si] = df[name_].to_numpy(dtype=np.float64)
            elif name_ == "adj_factor":
                a[ti, si] = 1.0
            elif name_ == "in_csi300":
                a[ti, si] = 0.0
            fields[name_] = a
        px = fields["open"][has_row], fields["close"][has_row]
        if np.any(~(px[0] > 0)) or np.any(~(px[1] > 0)):
            raise ValueError("panel has non-positive or missing open/close prices")
        if np.any(~(fields["adj_factor"][has_row] > 0)):
            raise ValueError("adj_factor must be > 0 on every row")
        susp = np.zeros((T, N), dtype=bool)
        if "suspended" in df.columns:
            susp[ti, si] = df["suspended"].to_numpy(dtype=bool)
        susp |= has_row & ~(fields["volume"] > 0)
        st = None
        if "st" in df.columns:
            st = np.zeros((T, N), dtype=bool)
            st[ti, si] = df["st"].to_numpy(dtype=bool)
        inf = pd.DataFrame(index=pd.Index(symbols, name="symbol"))
        if info is not None:
            info = info.set_index("symbol") if "symbol" in info.columns else info
            inf = inf.join(info[[c for c in ("industry", "board", "list_date") if c in info.columns]])
        elif "industry" in df.columns:
            inf["industry"] = df.groupby("symbol", observed=True)["industry"].first().reindex(symbols).astype(object)
        if "industry" not in inf:
            inf["industry"] = None
        if "board" not in inf or inf["board"].isna().any():
            inf["board"] = [board_of(s) for s in symbols]
        inf["list_date"] = pd.to_datetime(inf["list_date"]) if "list_date" in inf else pd.NaT
        if reference is not None:
            reference = reference.copy()
            reference["date"] = pd.to_datetime(reference["date"])
        loader = intraday if callable(intraday) or intraday is None else (lambda v=intraday: v)
        return cls(dates=dates, symbols=symbols, fields=fields, has_row=has_row, suspended=susp, info=inf[
            ["industry", "board", "list_date"]], st=st, reference=reference, name=name, intraday_loader=loader)

    # ------------------------------------------------------------------ basic accessors
    @property
    def T(self) -> int:
        return len(self.dates)

    @property
    def N(self) -> int:
        return len(self.symbols)

    @property
    def tradable(self) -> np.ndarray:
        """(T, N) bool: a row, ``volume > 0`` and not suspended (§10.1)."""
        if "tradable" not in self._cache:
            self._cache["tradable"] = self.has_row & ~self.suspended
        return self._cache["tradable"]

    def index_of(self, date: Any) -> int:
        """Row index of an exact panel date. Raises ``KeyError`` if not a panel day."""
        d = np.datetime64(pd.Timestamp(date).date(), "D")
        i = int(np.searchsorted(self.dates, d))
        if i >= self.T or self.dates[i] != d:
            raise KeyError(f"{pd.Timestamp(date).date()} is not a trading day of this panel")
        return i

    def intraday(self) -> dict[str, dict[str, pd.DataFrame]]:
        """``{date_iso: {table: DataFrame}}`` of the intraday tables (may be empty)."""
        if "intraday" not in self._cache:
            self._cache["intraday"] = dict(self.intraday_loader()) if self.intraday_loader else {}
        return self._cache["intraday"]

    def ffill(self, name: str) -> np.ndarray:
        """Field forward-filled along time per stock (last row carried; NaN before the first row)."""
        key = "ffill_" + name
        if key not in self._cache:
            a = self.fields[name]
            idx = np.where(self.has_row, np.arange(self.T)[:, None], 0)
            np.maximum.accumulate(idx, axis=0, out=idx)
            out = a[idx, np.arange(self.N)[None, :]]
            started = np.maximum.accumulate(self.has_row, axis=0)
            self._cache[key] = np.where(started, out, np.nan)
        return self._cache[key]

    def truncate(self, end: Any) -> "QADataset":
        """A new dataset holding only the days ≤ ``end`` (copies; used for research, §10.2)."""
        e = np.datetime64(pd.Timestamp(end).date(), "D")
        k = int(np.searchsorted(self.dates, e, side="right"))
        ref = None if self.reference is None else self.reference[self.reference["date"] <= pd.Timestamp(e)].copy()
        loader = self.intraday_loader
        cut = None
        if loader is not None:
            cut = lambda: {d: t for d, t in loader().items() if np.datetime64(d, "D") <= e}  # noqa: E731
        return QADataset(dates=self.dates[:k].copy(), symbols=self.symbols.copy(),
                         fields={n: a[:k].copy() for n, a in self.fields.items()}, has_row=self.has_row[:k].copy(),
                         suspended=self.suspended[:k].copy(), info=self.info.copy(),
                         st=None if self.st is None else self.st[:k].copy(), reference=ref, name=self.name,
                         intraday_loader=cut)

    # ------------------------------------------------------------------ derived series
    def limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Daily price limits and base prices (spec §10.6).

        Returns
        -------
        up, down, base : ndarray (T, N) float64, CNY
            ``base_d = r2(close_{d-1}·f_{d-1}/f_d)`` (previous row of the stock); with
            ``m = round(base·100)`` and rate ``p`` %: ``up = (m(100+p)+50)//100`` cents,
            ``down = (m(100−p)+50)//100``. NaN on limit-free days (first listing day;
            first 5 rows of STAR, ChiNext listed ≥ 2020-08-24, main board listed
            ≥ 2023-04-10) and where there is no previous row. ``base`` is NaN only
            without a previous row.
        """
        if "limits" in self._cache:
            return self._cache["limits"]
        T, N = self.T, self.N
        c_ff, f_ff = self.ffill("close"), self.ffill("adj_factor")
        prev_c = np.vstack([np.full((1, N), np.nan), c_ff[:-1]])
        prev_f = np.vstack([np.full((1, N), np.nan), f_ff[:-1]])
        with np.errstate(invalid="ignore"):
            base = np.where(self.has_row, r2(prev_c * prev_f / self.fields["adj_factor"]), np.nan)
        board = self.info["board"].to_numpy()
        dcol = self.dates[:, None]
        p = np.full((T, N), 10.0)
        p[:, board == "star"] = 20.0
        p[:, board == "bse"] = 30.0
        chi = board == "chinext"
        p[:, chi] = np.where(dcol >= _CHINEXT_20PCT_FROM, 20.0, 10.0)
        if self.st is not None:
            p = np.where(self.st & (board == "main")[None, :], 5.0, p)
        # limit-free first rows of a listing (counted on the stock's own rows)
        nrow = np.cumsum(self.has_row, axis=0)  # 1 on the first row
        ld = self.info["list_date"].to_numpy(dtype="datetime64[D]")
        first_row = np.array([self.dates[np.argmax(self.has_row[:, j])] if self.has_row[:, j].any()
                              else np.datetime64("NaT") for j in range(N)], dtype="datetime64[D]")
        ld = np.where(np.isnat(ld), first_row, ld)
        is_listing = ~np.isnat(ld) & (ld >= self.dates[0])
        free_days = np.where(is_listing, 1, 0)
        five = is_listing & ((board == "star") | (chi & (ld >= _CHINEXT_20PCT_FROM))
                             | ((board == "main") & (ld >= _MAIN_REGISTRATION_FROM)))
        free_days = np.where(five, 5, free_days)
        free = self.has_row & (nrow <= free_days[None, :])
        with np.errstate(invalid="ignore"):
            m = np.round(base * 100.0)
            up = np.floor((m * (100.0 + p) + 50.0) / 100.0) / 100.0
            down = np.floor((m * (100.0 - p) + 50.0) / 100.0) / 100.0
        up[free] = np.nan
        down[free] = np.nan
        out = (up, down, base)
        self._cache["limits"] = out
        return out

    def book_inputs(self, rows: np.ndarray, impact: Any) -> tuple[np.ndarray, np.ndarray]:
        """σ and ADV of the simulated book at decision rows ``rows`` (spec §10.8).

        σ = std (ddof 1) of the daily log returns of ``adj_close`` over the last
        ``vol_window`` panel days up to t on which the stock is tradable and has a
        row the day before (≥ ``vol_min_obs`` returns, else ``vol_default``);
        ADV = mean volume over the tradable days among the last ``adv_window`` days
        (0 if none).

        Returns
        -------
        sigma, adv : ndarray (len(rows), N) float64
        """
        rows = np.asarray(rows, dtype=np.int64)
        W = int(impact.vol_window)
        adjc = self.fields["close"] * self.fields["adj_factor"]
        tr = self.tradable
        with np.errstate(invalid="ignore", divide="ignore"):
            lr = np.full_like(adjc, np.nan)
            lr[1:] = np.log(adjc[1:] / self.ffill("close")[:-1] / self.ffill("adj_factor")[:-1])
        lr_ok = tr.copy()
        lr_ok[1:] &= self.has_row[:-1]
        lr_ok[0] = False
        lr = np.where(lr_ok & np.isfinite(lr), lr, np.nan)
        sig = np.empty((len(rows), self.N))
        adv = np.empty((len(rows), self.N))
        Wa = int(impact.adv_window)
        vol = np.where(tr, self.fields["volume"], np.nan)
        for i, t in enumerate(rows):
            blk = lr[max(0, t - W + 1): t + 1]
            cnt = np.isfinite(blk).sum(axis=0)
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                s = np.nanstd(blk, axis=0, ddof=1) if blk.shape[0] > 1 else np.full(self.N, np.nan)
            s = np.where((cnt >= impact.vol_min_obs) & np.isfinite(s) & (s > 0), s, impact.vol_default)
            sig[i] = s
            vb = vol[max(0, t - Wa + 1): t + 1]
            vc = np.isfinite(vb).sum(axis=0)
            adv[i] = np.where(vc > 0, np.nansum(vb, axis=0) / np.maximum(vc, 1), 0.0)
        return sig, adv

    def reference_returns(self) -> pd.Series:
        """Daily market reference returns indexed by date (§10.10).

        The shipped full-market series when the dataset has one; otherwise computed
        from this panel: mean over stocks tradable on day k with a row on day k−1 of
        ``adj_close_k/adj_close_{k−1} − 1``.
        """
        if "ref" in self._cache:
            return self._cache["ref"]
        if self.reference is not None:
            s = pd.Series(self.reference["ret"].to_numpy(float), index=pd.DatetimeIndex(self.reference["date"]))
        else:
            adjc = self.fields["close"] * self.fields["adj_factor"]
            ok = self.tradable[1:] & self.has_row[:-1]
            with np.errstate(invalid="ignore", divide="ignore"):
                r = adjc[1:] / adjc[:-1] - 1.0
            ok &= np.isfinite(r)
            n = ok.sum(axis=1)
            ret = np.where(n > 0, np.where(ok, r, 0.0).sum(axis=1) / np.maximum(n, 1), 0.0)
            s = pd.Series(ret, index=pd.DatetimeIndex(self.dates[1:]))
        self._cache["ref"] = s
        return s


# ---------------------------------------------------------------------- loading
def _read_qlib_dir(path: Path) -> pd.DataFrame:
    """Read a qlib-format directory (calendars/day.txt, features/<sym>/<field>.day.bin).

    Source prices are adjusted (raw × factor) as in qlib's CN collectors; raw
    prices are recovered as ``adjusted / factor`` rounded to the cent. ``in_csi300``
    comes from ``instruments/csi300.txt`` when present.
    """
    cal = pd.to_datetime(pd.read_csv(path / "calendars" / "day.txt", header=None)[0]).to_numpy()
    rows = []
    csi: dict[str, list[tuple[np.datetime64, np.datetime64]]] = {}
    ip = path / "instruments" / "csi300.txt"
    if ip.exists():
        for line in ip.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                csi.setdefault(parts[0].upper(), []).append((np.datetime64(parts[1]), np.datetime64(parts[2])))
    for fdir in sorted((path / "features").iterdir()):
        sym = fdir.name.upper()
        cols = {}
        for f in ("open", "high", "low", "close", "volume", "factor"):
            fp = fdir / f"{f}.day.bin"
            if not fp.exists():
                break
            a = np.fromfile(fp, dtype="<f4")
            start = int(a[0])
            cols[f] = (start, a[1:].astype(np.float64))
        else:
            start, fac = cols["factor"]
            n = len(fac)
            d = cal[start:start + n]
            fr = pd.DataFrame({"date": d, "symbol": sym})
            for f in ("open", "high", "low", "close"):
                fr[f] = np.round(cols[f][1][:n] / fac, 2)
            vol = cols["volume"][1][:n]
            fr["volume"] = np.nan_to_num(vol, nan=0.0)
            fr["adj_factor"] = fac
            fr["suspended"] = ~(vol > 0)
            m = np.zeros(n, dtype=bool)
            for a0, a1 in csi.get(sym, []):
                m |= (d >= a0) & (d <= a1)
            fr["in_csi300"] = m
            rows.append(fr.dropna(subset=["open", "close", "adj_factor"]))
    if not rows:
        raise ValueError(f"no qlib feature folders with open/high/low/close/volume/factor under {path}")
    return pd.concat(rows, ignore_index=True)


def _parse_dates(x: pd.Series) -> pd.Series:
    """Dates given as ``YYYY-MM-DD`` or ``YYYYMMDD`` (e.g. Tushare's ``list_date``); unparsable → NaT."""
    v = x.astype(str).str.replace(r"\.0$", "", regex=True)
    compact = v.str.fullmatch(r"\d{8}")
    out = pd.to_datetime(v.where(~compact), errors="coerce", format="%Y-%m-%d")
    out[compact] = pd.to_datetime(v[compact], errors="coerce", format="%Y%m%d")
    return out


def _default_intraday() -> dict[str, dict[str, pd.DataFrame]]:
    try:
        from quantgym.data.sse_l2 import SSE_DAY, load_sse_l2_day
    except ImportError:  # pragma: no cover - reader not installed
        return {}
    return {SSE_DAY: load_sse_l2_day()}


@functools.lru_cache(maxsize=1)
def _bundled() -> QADataset:
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    info = pd.read_csv(BUNDLED_DIR / "symbols.csv", dtype={"symbol": str})
    ref = pd.read_csv(BUNDLED_DIR / "market_reference.csv")
    ds = QADataset.from_frame(df, info=info, reference=ref, name="bundled-default-800", intraday=_default_intraday)
    for a in ds.fields.values():
        a.setflags(write=False)
    ds.has_row.setflags(write=False)
    ds.suspended.setflags(write=False)
    return ds


def load_dataset(data: Any = None) -> QADataset:
    """Load a Quant-Arena dataset.

    Parameters
    ----------
    data : None, QADataset, DataFrame, str or Path
        ``None``: the bundled 800-stock default universe (cached, read-only).
        A :class:`QADataset`: returned as is. A DataFrame: long panel in the
        documented schema. A path to a ``.parquet`` file: long panel (a
        ``symbols.csv`` and ``market_reference.csv`` next to it are used when
        present). A directory: either a qlib-format folder (``calendars/day.txt``)
        or a folder with ``daily*.parquet`` [+ ``symbols.csv``, ``market_reference.csv``].

    Raises
    ------
    FileNotFoundError, ValueError
        Unreadable path or schema violation.
    """
    if data is None:
        return _bundled()
    if isinstance(data, QADataset):
        return data
    if isinstance(data, pd.DataFrame):
        return QADataset.from_frame(data)
    p = Path(data)
    if not p.exists():
        raise FileNotFoundError(f"no dataset at {p}")
    if p.is_dir() and (p / "calendars" / "day.txt").exists():
        return QADataset.from_frame(_read_qlib_dir(p), name=f"qlib:{p.name}")
    if p.is_dir():
        cands = sorted(p.glob("daily*.parquet"))
        if not cands:
            raise FileNotFoundError(f"{p} holds neither calendars/day.txt (qlib) nor daily*.parquet")
        folder, file = p, cands[0]
    else:
        folder, file = p.parent, p
    df = pd.read_parquet(file)
    info = pd.read_csv(folder / "symbols.csv", dtype={"symbol": str}) if (folder / "symbols.csv").exists() else None
    if info is not None and "board" not in info.columns and "market" in info.columns:
        info = info.drop(columns=["market"])
    if info is not None and "list_date" in info.columns:
        info["list_date"] = _parse_dates(info["list_date"])
    ref = pd.read_csv(folder / "market_reference.csv") if (folder / "market_reference.csv").exists() else None
    return QADataset.from_frame(df, info=info, reference=ref, name=f"file:{file.name}")


# ---------------------------------------------------------------------- the point-in-time view
def build_buffer(ds: QADataset, lo: int, hi: int) -> dict[str, Any]:
    """Rows ``lo..hi`` (inclusive) of everything the view needs, as a payload block.

    The adjustment factor is rebased to 1.0 on the first row of each stock inside the
    block (its level is never exposed, §10.4). Limits are included (known at each
    day's open). Arrays are fresh copies.
    """
    up, down, _ = ds.limits()
    sl = slice(lo, hi + 1)
    f = ds.fields["adj_factor"][sl].copy()
    ffirst = np.full(ds.N, np.nan)
    hr = ds.has_row[sl]
    anyrow = hr.any(axis=0)
    first = np.argmax(hr, axis=0)
    ffirst[anyrow] = f[first[anyrow], np.arange(ds.N)[anyrow]]
    f = f / ffirst[None, :]
    blk = {
        "dates": ds.dates[sl].astype("datetime64[D]").astype(str).tolist(),
        "symbols": ds.symbols.tolist(),
        "open": ds.fields["open"][sl].copy(), "high": ds.fields["high"][sl].copy(),
        "low": ds.fields["low"][sl].copy(), "close": ds.fields["close"][sl].copy(),
        "volume": ds.fields["volume"][sl].copy(), "factor": f,
        "suspended": np.where(hr, ds.suspended[sl].astype(np.float64), np.nan),
        "in_csi300": ds.fields["in_csi300"][sl].copy(),
        "up_limit": up[sl].copy(), "down_limit": down[sl].copy(),
        "has_row": hr.copy(),
    }
    return blk


BLOCK_ARRAYS = ("open", "high", "low", "close", "volume", "factor", "suspended", "in_csi300", "up_limit",
                 "down_limit", "has_row")


class ViewBuffer:
    """Growing buffer of visible rows (trusted side; one per evaluation, §10.4).

    ``append(block, i)`` copies row ``i`` of a payload block into the buffer. Only
    appended rows exist in the buffer; :meth:`view` hands a :class:`PITView` over
    the rows appended so far.
    """

    __slots__ = ("_arr", "_dates", "_n", "_symbols", "_info", "_intraday", "_max_lookback", "_cap")

    def __init__(self, symbols: list[str], capacity: int, info: pd.DataFrame, max_lookback: int = 242):
        N = len(symbols)
        self._symbols = np.asarray(symbols)
        self._cap = capacity
        self._arr = {k: (np.zeros((capacity, N), dtype=bool) if k == "has_row" else np.full((capacity, N), np.nan))
                     for k in BLOCK_ARRAYS}
        self._dates: list[str] = []
        self._n = 0
        self._info = info
        self._intraday: dict[str, dict[str, pd.DataFrame]] = {}
        self._max_lookback = int(max_lookback)

    def append(self, block: dict[str, Any], i: int, intraday: dict[str, pd.DataFrame] | None = None) -> None:
        """Copy row ``i`` of ``block`` (a :func:`build_buffer` dict) into the buffer."""
        self.append_row({k: block[k][i] for k in BLOCK_ARRAYS}, block["dates"][i], intraday)

    def append_row(self, row: dict[str, np.ndarray], date: str, intraday: dict | None = None) -> None:
        """Append one day: ``row`` maps every name of :data:`BLOCK_ARRAYS` to an (N,) array."""
        if self._n >= self._cap:
            raise RuntimeError("view buffer full")
        for k in BLOCK_ARRAYS:
            self._arr[k][self._n] = row[k]
        self._dates.append(str(date))
        if intraday:
            self._intraday[str(date)] = intraday
        self._n += 1

    def view(self) -> "PITView":
        """A :class:`PITView` at the last appended date."""
        return PITView(self)


class PITView:
    """Point-in-time data interface handed to agent code (spec §3, §10.3).

    Attributes
    ----------
    date : pandas.Timestamp
        The decision date t (the agent runs after its close).
    symbols : pandas.Index
        Symbols with a row on ``date`` (suspended ones included), ascending.
    info : DataFrame
        Index = ``symbols``; ``industry`` (2026 snapshot, not point in time),
        ``board`` (main/chinext/star/bse), ``list_date``.

    Notes
    -----
    Adjusted prices are forward-adjusted **as of the decision date**:
    ``adj_x[s] = x[s]·f[s]/f[t]`` for s ≤ t, so the last row equals the raw row and
    only corporate actions in (s, t] enter; later factors are never used (§10.3).
    """

    __slots__ = ("_buf", "_t", "_cols", "date", "symbols")

    def __init__(self, buf: ViewBuffer):
        self._buf = buf
        self._t = buf._n - 1
        if self._t < 0:
            raise LookAheadError("the view has no rows yet")
        self._cols = np.flatnonzero(buf._arr["has_row"][self._t])
        self.date = pd.Timestamp(buf._dates[self._t])
        self.symbols = pd.Index(buf._symbols[self._cols], name="symbol")

    @property
    def info(self) -> pd.DataFrame:
        """Static fields of :attr:`symbols` (a copy)."""
        return self._buf._info.reindex(self.symbols).copy()

    @property
    def fields(self) -> tuple[str, ...]:
        """Names accepted by :meth:`history`."""
        return VIEW_FIELDS

    @property
    def max_lookback(self) -> int:
        """Longest lookback served (L_max = 242 by default)."""
        return self._buf._max_lookback

    def history(self, field: str, lookback: int) -> pd.DataFrame:
        """History of ``field`` over the last ``lookback`` days ending at :attr:`date`.

        Parameters
        ----------
        field : str
            One of :data:`VIEW_FIELDS`: ``open high low close`` (raw CNY), ``volume``
            (shares), ``adj_open adj_high adj_low adj_close`` (CNY, forward-adjusted
            as of ``date``), ``suspended`` (1.0/0.0), ``in_csi300`` (1.0/0.0),
            ``up_limit``/``down_limit`` (CNY; NaN on limit-free days).
        lookback : int
            1 ≤ lookback ≤ :attr:`max_lookback`.

        Returns
        -------
        DataFrame, shape (min(lookback, available), len(symbols)), float64
            Index = dates (ascending, last = :attr:`date`), columns = :attr:`symbols`;
            NaN where a stock has no row. A copy.

        Raises
        ------
        ValueError
            ``lookback`` not an int in 1..max_lookback.
        KeyError
            Unknown field.
        """
        if isinstance(lookback, bool) or not isinstance(lookback, (int, np.integer)):
            raise ValueError(f"lookback must be an int in 1..{self.max_lookback}, got {lookback!r}")
        if not 1 <= int(lookback) <= self.max_lookback:
            raise ValueError(f"lookback must be an int in 1..{self.max_lookback}, got {lookback}")
        if field not in VIEW_FIELDS:
            raise KeyError(f"unknown field {field!r}; available: {', '.join(VIEW_FIELDS)}")
        lo = max(0, self._t - int(lookback) + 1)
        A = self._buf._arr
        rows = slice(lo, self._t + 1)
        cols = self._cols
        if field.startswith("adj_"):
            raw = A[field[4:]][rows][:, cols]
            f = A["factor"][rows][:, cols]
            vals = raw * (f / f[-1][None, :])
        else:
            vals = A[field][rows][:, cols].copy()
        idx = pd.DatetimeIndex(self._buf._dates[lo:self._t + 1], name="date")
        return pd.DataFrame(vals, index=idx, columns=self.symbols, copy=False)

    def intraday(self, table: str, date: Any = None) -> pd.DataFrame:
        """Intraday table of a day ≤ :attr:`date` (spec §10.3).

        Parameters
        ----------
        table : {"snapshots", "trades", "orders"}
        date : date-like, optional
            Default :attr:`date`.

        Raises
        ------
        LookAheadError
            ``date`` after the decision date (the message names both dates).
        KeyError
            No such table for that date in this dataset.
        """
        d = self.date if date is None else pd.Timestamp(date)
        if d.normalize() > self.date:
            raise LookAheadError(f"intraday read of {d.date()} is after the decision date {self.date.date()}")
        if table not in INTRADAY_TABLES:
            raise KeyError(f"unknown intraday table {table!r}; available: {', '.join(INTRADAY_TABLES)}")
        day = self._buf._intraday.get(str(d.date()))
        if not day or table not in day:
            have = sorted(self._buf._intraday) or "none"
            raise KeyError(f"no intraday table {table!r} for {d.date()} in this dataset (intraday days: {have})")
        return day[table].copy()

    def __repr__(self) -> str:
        return f"PITView(date={self.date.date()}, symbols={len(self.symbols)})"


def make_view(ds: QADataset, date: Any, max_lookback: int = 242) -> PITView:
    """A host-side :class:`PITView` of ``ds`` at ``date`` (for tests, notebooks and docs).

    Only the ``max_lookback`` rows ending at ``date`` are copied into the view's buffer.
    """
    t = ds.index_of(date)
    lo = max(0, t - max_lookback + 1)
    blk = build_buffer(ds, lo, t)
    buf = ViewBuffer(blk["symbols"], t - lo + 1, ds.info, max_lookback)
    intr = ds.intraday()
    for i in range(t - lo + 1):
        buf.append(blk, i, intr.get(blk["dates"][i]))
    return buf.view()


__all__ = ["QADataset", "PITView", "ViewBuffer", "LookAheadError", "load_dataset", "make_view", "build_buffer",
           "board_of", "r2", "VIEW_FIELDS", "INTRADAY_TABLES", "BUNDLED_DIR"]
