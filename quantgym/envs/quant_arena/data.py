"""Quant-Arena data: the panel and its loaders.

One module on purpose: :class:`ArenaDataset` and every loader that builds one (parquet, Qlib folder,
bundled panel, real intraday days) check the one schema that the class defines.

Spec: quant_arena.md §2, §10.1 (data facts), §10.3 (adjusted prices), §10.10 (market
reference). The rules priced off the panel live elsewhere: price limits and the σ/ADV
inputs of the simulated book in :mod:`~quantgym.envs.quant_arena.exchange` (§10.6,
§10.8), the point-in-time view agents see in :mod:`~quantgym.envs.quant_arena.pit`
(§10.3, §10.4).

An :class:`ArenaDataset` holds a daily panel as wide ``(T, N)`` float64 arrays (dates
× symbols, symbols ascending) so the cash account is vectorised numpy. It is built
from a long DataFrame in the documented parquet schema::

    date, symbol, open, high, low, close, volume, adj_factor, suspended, in_csi300 [, st]

(prices raw CNY, volume shares, ``adj_factor`` a backward cumulative factor,
``suspended``/``in_csi300``/``st`` booleans), plus optional static ``info``
(``industry``, ``board``, ``list_date``), an optional market reference series and
optional intraday tables. :func:`load_dataset` reads the bundled default
universe, a user parquet file/folder in that schema, or a qlib-format directory.

Intraday tables (``view.intraday``) are ``{date_iso: {table: DataFrame}}`` with ``table`` in
:data:`INTRADAY_TABLES`, in the schema of :mod:`quantgym.data.sse_l2` (``ts_event`` UTC ns,
``time``, ``symbol`` as in the panel, prices CNY, quantities shares; see docs/quant_arena.md).
The bundled dataset serves the shipped SH600519 day (2023-02-07); given the a_share_l2 folder
(``load_dataset(l2_dir=...)`` or ``$QUANTGYM_A_SHARE_L2``; not shipped, vendor unknown) it serves
every real Level-2 stock-day of its universe (:func:`real_intraday`): 11 more on 2021-12-01,
2022-06-01, 2023-02-01 and 2023-07-11. It never looks for the folder by itself, so one call gives
one environment on every machine.

Longer than 500 lines as one job, a valid panel: the class, the checks that define its schema
(:meth:`ArenaDataset.from_frame`, the intraday day check) and every loader that fills it (parquet, Qlib folder,
bundled panel, real Level-2 days) change together when the schema does.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

#: Folder of the bundled data (written by :mod:`quantgym.envs.quant_arena.build_data`).
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "data" / "bundled" / "quant_arena"

#: Raw fields stored per (date, symbol).
RAW_FIELDS = ("open", "high", "low", "close", "volume", "adj_factor", "in_csi300")
#: Intraday tables a dataset may carry.
INTRADAY_TABLES = ("snapshots", "trades", "orders")
#: Columns every intraday table must have (the rest of the schema: docs/quant_arena.md).
INTRADAY_REQUIRED = ("ts_event", "symbol")


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
class ArenaDataset:
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
    intraday_loader : callable or None
        Zero-argument callable returning ``{date_iso: {table: DataFrame}}`` (loaded lazily).
    intraday_index : dict or None
        ``{date_iso: {table: [symbols]}}`` of what the loader serves, known without loading
        (the bundled dataset); ``None`` ⇒ computed from the loaded tables.
    notes : list of str
        Facts about the data a run must record (e.g. "the a_share_l2 folder was not found").
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
    intraday_index: dict[str, dict[str, list[str]]] | None = None
    notes: list[str] = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frame(cls, df: pd.DataFrame, info: pd.DataFrame | None = None, reference: pd.DataFrame | None = None,
                   name: str = "custom", intraday: dict | Callable | None = None) -> "ArenaDataset":
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
            ``{date_iso: {table: DataFrame}}`` or a zero-argument callable returning it;
            ``table`` in :data:`INTRADAY_TABLES`, each frame with at least ``ts_event`` (int64
            UTC ns) and ``symbol`` (the panel's symbols), ideally the full schema of
            :mod:`quantgym.data.sse_l2`. Checked when first loaded (ValueError).

        Raises
        ------
        ValueError
            Missing required columns, duplicate (date, symbol) rows, non-positive prices, high < low or a
            negative volume (the rows named).
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
        _refuse_rows(df, d, sym, df["high"].to_numpy(dtype=np.float64) < df["low"].to_numpy(dtype=np.float64),
                     "high < low", ("high", "low"))
        _refuse_rows(df, d, sym, df["volume"].to_numpy(dtype=np.float64) < 0, "a negative volume", ("volume",))
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
        """``{date_iso: {table: DataFrame}}`` of the intraday tables (may be empty).

        Raises
        ------
        ValueError
            A date that is not ``YYYY-MM-DD``, a table name outside :data:`INTRADAY_TABLES` or a
            frame without the columns of :data:`INTRADAY_REQUIRED`.
        """
        if "intraday" not in self._cache:
            raw = dict(self.intraday_loader()) if self.intraday_loader else {}
            self._cache["intraday"] = {_check_intraday_day(d, t): t for d, t in raw.items()}
        return self._cache["intraday"]

    def intraday_days(self) -> dict[str, dict[str, list[str]]]:
        """``{date_iso: {table: sorted symbols}}`` of the intraday tables served (for briefs and docs); a new
        dict each call (it goes into ``info``, which an agent may change)."""
        if self.intraday_index is not None:
            return {d: {k: list(v) for k, v in t.items()} for d, t in self.intraday_index.items()}
        return {d: {k: sorted(pd.unique(v["symbol"].astype(str))) for k, v in sorted(t.items())}
                for d, t in sorted(self.intraday().items())}

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

    def truncate(self, end: Any) -> "ArenaDataset":
        """A new dataset holding only the days ≤ ``end`` (copies; used for research, §10.2)."""
        e = np.datetime64(pd.Timestamp(end).date(), "D")
        k = int(np.searchsorted(self.dates, e, side="right"))
        ref = None if self.reference is None else self.reference[self.reference["date"] <= pd.Timestamp(e)].copy()
        loader = self.intraday_loader
        cut = None
        if loader is not None:
            cut = lambda: {d: t for d, t in loader().items() if np.datetime64(d, "D") <= e}  # noqa: E731
        index = None
        if self.intraday_index is not None:
            index = {d: t for d, t in self.intraday_index.items() if np.datetime64(d, "D") <= e}
        return ArenaDataset(dates=self.dates[:k].copy(), symbols=self.symbols.copy(),
                         fields={n: a[:k].copy() for n, a in self.fields.items()}, has_row=self.has_row[:k].copy(),
                         suspended=self.suspended[:k].copy(), info=self.info.copy(),
                         st=None if self.st is None else self.st[:k].copy(), reference=ref, name=self.name,
                         intraday_loader=cut, intraday_index=index, notes=list(self.notes))

    # ------------------------------------------------------------------ derived series
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
def _refuse_rows(df: pd.DataFrame, d: np.ndarray, sym: np.ndarray, bad: np.ndarray, what: str,
                 cols: tuple[str, ...], k: int = 3) -> None:
    """Raise a one-line ValueError naming the first ``k`` rows (date, symbol, ``cols``) where ``bad`` and their count."""
    rows = np.flatnonzero(bad)
    if rows.size:
        shown = "; ".join(f"{d[r]} {sym[r]} " + " ".join(f"{c} {float(df[c].iloc[r]):g}" for c in cols) for r in rows[:k])
        raise ValueError(f"panel has {rows.size} row(s) with {what}: {shown}{'; ...' if rows.size > k else ''}")


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


def _check_intraday_day(date: Any, tables: Any) -> str:
    """Validate one day of user intraday tables; returns the ISO date (one-line ValueError)."""
    try:
        iso = str(pd.Timestamp(str(date)).date())
    except ValueError:
        raise ValueError(f"intraday date {date!r} is not a date (use 'YYYY-MM-DD')") from None
    if not isinstance(tables, dict):
        raise ValueError(f"intraday {iso}: expected {{table: DataFrame}}, got {type(tables).__name__}")
    for k, v in tables.items():
        if k not in INTRADAY_TABLES:
            raise ValueError(f"intraday {iso}: unknown table {k!r}; tables: {', '.join(INTRADAY_TABLES)}")
        miss = [c for c in INTRADAY_REQUIRED if not isinstance(v, pd.DataFrame) or c not in v.columns]
        if miss:
            raise ValueError(f"intraday {iso} {k}: missing column(s) {miss} (schema: docs/quant_arena.md)")
    return iso


@functools.lru_cache(maxsize=4)
def _real_intraday_cached(symbols: tuple, dates: tuple, folder: str | None) -> dict:
    from quantgym.data.a_share_l2 import load_l2_days
    from quantgym.data.sse_l2 import SSE_DAY, SSE_SYMBOL, load_sse_l2_day  # ships with the package

    out: dict[str, dict[str, pd.DataFrame]] = {}
    if "SH" + SSE_SYMBOL in symbols and SSE_DAY in dates:
        day = load_sse_l2_day()
        for t in day.values():
            t["symbol"] = "SH" + SSE_SYMBOL  # the panel's symbol style
        out[SSE_DAY] = day
    if folder is not None:
        out.update(load_l2_days(symbols, dates, folder))
    return out


def _default_intraday() -> dict[str, dict[str, pd.DataFrame]]:
    """The shipped Level-2 day only (SH600519, 2023-02-07), symbol in the panel's style."""
    from quantgym.data.sse_l2 import SSE_DAY, SSE_SYMBOL

    return _real_intraday_cached(("SH" + SSE_SYMBOL,), (SSE_DAY,), None)


def real_intraday_index(ds: ArenaDataset, path: str | Path | None = None) -> dict[str, dict[str, list[str]]]:
    """``{date_iso: {table: symbols}}`` of the real Level-2 stock-days that ``ds`` covers.

    A stock-day is served when the stock has a row in ``ds`` on that date: the bundled
    SH600519 day (2023-02-07) and the :data:`quantgym.data.a_share_l2.CATALOG` entries when the
    a_share_l2 folder is found (``path``, else :func:`~quantgym.data.a_share_l2.a_share_l2_dir`;
    ``path=False``: no folder, the shipped day only).
    """
    from quantgym.data.a_share_l2 import CATALOG, a_share_l2_dir
    from quantgym.data.sse_l2 import SSE_DAY, SSE_SYMBOL

    folder = None if path is False else a_share_l2_dir(path)
    cands = [(SSE_DAY, t, "SH" + SSE_SYMBOL) for t in INTRADAY_TABLES]
    if folder is not None:
        cands += [(d, t, s) for d, t, s, _, _ in CATALOG]
    pos = {str(d): i for i, d in enumerate(ds.dates.astype("datetime64[D]").astype(str))}
    col = {s: j for j, s in enumerate(ds.symbols)}
    out: dict[str, dict[str, set]] = {}
    for d, t, s in cands:
        if d in pos and s in col and ds.has_row[pos[d], col[s]]:
            out.setdefault(d, {}).setdefault(t, set()).add(s)
    return {d: {t: sorted(v) for t, v in sorted(tabs.items())} for d, tabs in sorted(out.items())}


def real_intraday(ds: ArenaDataset, path: str | Path | None = None) -> tuple[Callable, dict, list[str]]:
    """Attach-ready real Level-2 tables for ``ds``: ``(loader, index, notes)``.

    ``loader()`` returns ``{date_iso: {table: DataFrame}}`` for the stock-days of
    :func:`real_intraday_index` (cached per process; the a_share_l2 files are read only for the
    stock-days ``ds`` covers, ≈ 10 s for the bundled universe). ``notes`` says, once, when
    the a_share_l2 folder was not found (only the shipped day is served then). Use it for a
    user panel as ``loader, index, notes = real_intraday(ds)`` and
    ``ArenaDataset.from_frame(df, ..., intraday=loader)``, or call :func:`attach_real_intraday`.
    """
    from quantgym.data.a_share_l2 import ENV_VAR, a_share_l2_dir

    folder = None if path is False else a_share_l2_dir(path)
    index = real_intraday_index(ds, False if folder is None else folder)
    syms = tuple(sorted({s for t in index.values() for v in t.values() for s in v}))
    dates = tuple(sorted(index))
    key = None if folder is None else str(folder)
    notes = []
    if folder is None and path is not False:
        notes.append("intraday: the a_share_l2 folder was not found (pass l2_dir= or set $" + ENV_VAR + "); "
                     "only the shipped Level-2 day (SH600519, 2023-02-07) is served")
    return functools.partial(_real_intraday_cached, syms, dates, key), index, notes


def attach_real_intraday(ds: ArenaDataset, path: str | Path | None = None) -> ArenaDataset:
    """``ds`` serving the real Level-2 stock-days it covers (:func:`real_intraday`); notes are warned once."""
    loader, index, notes = real_intraday(ds, path)
    ds.intraday_loader, ds.intraday_index = loader, index
    ds.notes = list(ds.notes) + notes
    ds._cache.pop("intraday", None)
    for n in notes:
        warnings.warn(n, stacklevel=2)
    return ds


@functools.lru_cache(maxsize=2)
def _bundled(l2_dir: str | None = None) -> ArenaDataset:
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    info = pd.read_csv(BUNDLED_DIR / "symbols.csv", dtype={"symbol": str})
    ref = pd.read_csv(BUNDLED_DIR / "market_reference.csv")
    ds = ArenaDataset.from_frame(df, info=info, reference=ref, name="bundled-default-800")
    # no folder asked for: the shipped day only, the documented default (nothing missing, no note)
    attach_real_intraday(ds, False if l2_dir is None else l2_dir)
    for a in ds.fields.values():
        a.setflags(write=False)
    ds.has_row.setflags(write=False)
    ds.suspended.setflags(write=False)
    return ds


def load_dataset(data: Any = None, *, l2_dir: str | Path | None = None) -> ArenaDataset:
    """Load a Quant-Arena dataset.

    Parameters
    ----------
    data : None, ArenaDataset, DataFrame, str or Path
        ``None``: the bundled 800-stock default universe (cached, read-only); with ``l2_dir`` (or
        ``$QUANTGYM_A_SHARE_L2``) it serves the real Level-2 stock-days of its universe
        (:func:`real_intraday`).
        A :class:`ArenaDataset`: returned as is. A DataFrame: long panel in the
        documented schema. A path to a ``.parquet`` file: long panel (a
        ``symbols.csv`` and ``market_reference.csv`` next to it are used when
        present). A directory: either a qlib-format folder (``calendars/day.txt``)
        or a folder with ``daily*.parquet`` [+ ``symbols.csv``, ``market_reference.csv``].
        User panels get no intraday tables unless asked (:func:`attach_real_intraday`).
    l2_dir : str or Path, optional
        Folder of the a_share_l2 zip files for the bundled dataset, else ``$QUANTGYM_A_SHARE_L2``.
        Neither given: the shipped Level-2 day only (SH600519, 2023-02-07), whatever lies on disk,
        so that the same call gives the same environment (and the same brief) on every machine.
        Given but holding none of the files: ``FileNotFoundError``.

    Raises
    ------
    FileNotFoundError, ValueError
        Unreadable path or schema violation.
    """
    if data is None:
        from quantgym.data.a_share_l2 import ENV_VAR, a_share_l2_dir

        asked = l2_dir if l2_dir is not None else (os.environ.get(ENV_VAR) or None)
        return _bundled(None if asked is None else str(a_share_l2_dir(asked)))
    if isinstance(data, ArenaDataset):
        return data
    if isinstance(data, pd.DataFrame):
        return ArenaDataset.from_frame(data)
    p = Path(data)
    if not p.exists():
        raise FileNotFoundError(f"no dataset at {p}")
    if p.is_dir() and (p / "calendars" / "day.txt").exists():
        return ArenaDataset.from_frame(_read_qlib_dir(p), name=f"qlib:{p.name}")
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
    return ArenaDataset.from_frame(df, info=info, reference=ref, name=f"file:{file.name}")


__all__ = ["ArenaDataset", "load_dataset", "board_of", "real_intraday", "real_intraday_index", "attach_real_intraday",
           "RAW_FIELDS", "INTRADAY_TABLES", "INTRADAY_REQUIRED", "BUNDLED_DIR"]
