"""The point-in-time view of Quant-Arena: the only object agent code sees.

Spec quant_arena.md §2 (no look-ahead), §10.3 (point-in-time view and adjusted prices),
§10.4 (sandbox hand-off: what the child holds).

:func:`build_buffer` (host side) cuts rows ``lo..hi`` of an
:class:`~quantgym.envs.quant_arena.data.ArenaDataset` into a payload block;
:class:`ViewBuffer` (child side) grows by one row per decision date, and
:class:`PITView` is built on it, so nothing the view can reach contains a row after
the decision date (a copy, never a slice of the panel). :func:`make_view` is the
host-side shortcut for tests, notebooks and docs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .data import INTRADAY_TABLES, ArenaDataset
from .exchange import price_limits

#: Fields served by :meth:`PITView.history` (spec §10.3).
VIEW_FIELDS = ("open", "high", "low", "close", "volume", "adj_open", "adj_high", "adj_low", "adj_close",
               "suspended", "in_csi300", "up_limit", "down_limit")


class LookAheadError(LookupError):
    """A read past the decision date of a point-in-time view (spec §2, §10.3)."""


# ---------------------------------------------------------------------- the point-in-time view
def build_buffer(ds: ArenaDataset, lo: int, hi: int) -> dict[str, Any]:
    """Rows ``lo..hi`` (inclusive) of everything the view needs, as a payload block.

    The adjustment factor is rebased to 1.0 on the first row of each stock inside the
    block (its level is never exposed, §10.4). Limits are included (known at each
    day's open). Arrays are fresh copies.
    """
    up, down, _ = price_limits(ds)
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
        date = int(date) if isinstance(date, (int, np.integer)) else str(date)  # int: a blind relative day
        self._dates.append(date)
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
    date : pandas.Timestamp or int
        The decision date t (the agent runs after its close); in blind mode the relative trading
        day (0 = the window's first decision date, negative = warm-up; docs/blind.md).
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
        d = buf._dates[self._t]
        self.date = d if isinstance(d, int) else pd.Timestamp(d)
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
        days = self._buf._dates[lo:self._t + 1]
        idx = (pd.Index(days, dtype=np.int64, name="day") if isinstance(self.date, int)
               else pd.DatetimeIndex(days, name="date"))
        return pd.DataFrame(vals, index=idx, columns=self.symbols, copy=False)

    def intraday(self, table: str, date: Any = None) -> pd.DataFrame:
        """Intraday table of a day ≤ :attr:`date` (spec §10.3).

        Parameters
        ----------
        table : {"snapshots", "trades", "orders"}
        date : date-like, optional
            Default :attr:`date`. In blind mode a relative trading day (``int``, ≤ :attr:`date`); the
            tables are blinded like the history (docs/blind.md: aliases, time of day, rebased prices and
            relative sizes).

        Raises
        ------
        LookAheadError
            ``date`` after the decision date (the message names both dates).
        KeyError
            No such table for that date in this dataset.
        """
        if isinstance(self.date, int):
            return self._blind_intraday(table, date)
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

    def _blind_intraday(self, table: str, date: Any) -> pd.DataFrame:
        """:meth:`intraday` in blind mode: ``date`` is a relative trading day (docs/blind.md)."""
        from quantgym.blind import day_label

        d = self.date if date is None else date
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise KeyError(f"blind mode: date is a relative trading day (an int such as view.date - 1), got {d!r}")
        if int(d) > self.date:
            raise LookAheadError(f"intraday read of {day_label(d)} is after the decision day {day_label(self.date)}")
        if table not in INTRADAY_TABLES:
            raise KeyError(f"unknown intraday table {table!r}; available: {', '.join(INTRADAY_TABLES)}")
        day = self._buf._intraday.get(str(int(d)))
        if not day or table not in day:
            have = ", ".join(day_label(int(k)) for k in sorted(self._buf._intraday, key=int)) or "none"
            raise KeyError(f"no intraday table {table!r} for {day_label(d)} in this view (intraday days: {have})")
        return day[table].copy()

    def __repr__(self) -> str:
        day = self.date if isinstance(self.date, int) else self.date.date()
        return f"PITView(date={day}, symbols={len(self.symbols)})"


def make_view(ds: ArenaDataset, date: Any, max_lookback: int = 242) -> PITView:
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


__all__ = ["PITView", "ViewBuffer", "LookAheadError", "make_view", "build_buffer", "BLOCK_ARRAYS", "VIEW_FIELDS"]
