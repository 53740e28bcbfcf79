"""PortBench market data: the point-in-time panel and its cached loader (spec ``portbench.md`` §1.3, §11.6, §11.7).

Longer than 500 lines as one job, building a valid panel: its schema (:class:`PortBenchData`), the one constructor
that checks tables against it (:meth:`PortBenchData.from_frames`) and the cached loader that calls it.

This module turns the raw daily tables (Yahoo adjusted closes on a mixed
calendar that contains crypto weekend days, plus FRED series on their
observation dates; read by :mod:`quantgym.envs.portbench.raw`) into the
point-in-time arrays the PortBench environment consumes, following
the PortBench spec (docs/spec/portbench.md):

* §1.3/§11.6 -- the NYSE trading calendar, the <= 3-trading-day forward fill of
  prices and simple returns computed from the filled prices (0 on a filled
  day, ``P_t / P_last - 1`` on the first real price after any gap, so no P&L is
  lost and crypto weekend moves are compounded into the next trading day);
* §11.7 -- crypto close alignment (the price on NYSE day ``t`` is the close of
  UTC day ``t - 1``);
* §1.4 -- the 17 macro keys with publication lags and plateau collapse (rules in
  :mod:`quantgym.envs.portbench.universe`, with the §1.1/§1.2 universe and the §11.8 labels).

The §11.6 availability set and the §1.9 regime label are in
:mod:`quantgym.envs.portbench.availability`.

Everything here is real data: the bundle under ``quantgym/data/bundled/portbench``
is written by :mod:`quantgym.envs.portbench.build_data` from the maintainers' raw snapshot
(see ``docs/data.md`` for provenance, coverage, gaps and licence notes).
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import (
    ASSET_CLASSES,
    CANONICAL_TICKERS,
    CRYPTO_CLOSE_OPTIONS,
    MACRO_KEYS,
    MACRO_SOURCES,
    VIX_TICKER,
    order_tickers,
    to_class_label,
    lagged_asof,
    macro_observations,
)
from quantgym.envs.portbench.raw import read_source, bundled_portbench_path

__all__ = [
    "PortBenchData",
    "PortBenchDataWarning",
    "load_portbench_data",
    "load_portbench_market",
    "as_portbench_data",
    "not_traded_notes",
    "warn_once",
]

class PortBenchDataWarning(UserWarning):
    """Data-quality warning of the PortBench loader (e.g. universe tickers missing)."""


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------


def clean_index(obj: pd.DataFrame | pd.Series, what: str, notes: list[str] | None = None) -> pd.DataFrame | pd.Series:
    """Return a copy with a naive, day-normalised, ascending, duplicate-free DatetimeIndex; each change made
    to get there (dates parsed from text, a time zone converted to UTC and dropped, times of day dropped, rows
    sorted) is appended to ``notes`` as one line."""
    notes = [] if notes is None else notes
    out = obj.copy()
    raw = out.index
    not_dates = (f"{what}: the index is not dates ({type(raw).__name__} of {raw.dtype}, e.g. "
                 f"{[str(v) for v in raw[:3]]}); expected a DatetimeIndex or a 'date' column (docs/data.md §7)")
    if not isinstance(raw, pd.DatetimeIndex):
        if len(raw) and (pd.api.types.is_numeric_dtype(raw.dtype) or pd.api.types.is_bool_dtype(raw.dtype)):
            raise ValueError(not_dates)  # integers would be read as nanoseconds after 1970-01-01
        try:
            idx = pd.DatetimeIndex(pd.to_datetime(raw))
        except (ValueError, TypeError, OverflowError):
            raise ValueError(not_dates) from None
        if len(raw):  # an empty frame has nothing to parse (and nothing to say)
            kind = "text" if pd.api.types.infer_dtype(raw, skipna=True) == "string" else f"{raw.dtype} values"
            notes.append(f"{what}: the index held {kind} (e.g. {str(raw[0])!r}), parsed as dates")
    else:
        idx = raw
    if idx.tz is not None:
        notes.append(f"{what}: the index was timezone-aware ({idx.tz}), converted to UTC and the zone dropped")
        idx = idx.tz_convert("UTC").tz_localize(None)
    day = idx.normalize().as_unit("ns")
    if len(idx) and (day != idx).any():
        notes.append(f"{what}: the index had times of day, dropped (each row is its date)")
    idx = day
    if idx.has_duplicates:
        dups = idx[idx.duplicated()].unique()[:5]
        raise ValueError(f"{what}: duplicate dates in the index, e.g. {[str(d.date()) for d in dups]}")
    if not idx.is_monotonic_increasing:
        notes.append(f"{what}: the rows were not in date order, sorted")
    out.index = idx
    out.index.name = "date"
    return out.sort_index()


def numeric_columns(frame: pd.DataFrame, what: str, notes: list[str]) -> pd.DataFrame:
    """``frame`` as float columns (:func:`pandas.to_numeric`, anything else NaN); text columns and the values
    that are not numbers are appended to ``notes`` as one line."""
    text = [str(c) for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c].dtype)]
    out = frame.apply(pd.to_numeric, errors="coerce").astype(float)
    if text:
        lost = int(out.isna().to_numpy().sum() - frame.isna().to_numpy().sum())
        notes.append(f"{what}: {len(text)} column(s) held text ({_few(text, 4)}), read as numbers"
                     + (f"; {lost} value(s) that are not numbers became NaN (no value)" if lost else ""))
    return out


def _few(names: Sequence[str], k: int = 6) -> str:
    """The first ``k`` names, comma-separated, with the count of the rest (``"none"`` when empty)."""
    names = list(names)
    if not names:
        return "none"
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def read_only_array(a: np.ndarray) -> np.ndarray:
    """A C-contiguous, read-only copy (or view) of ``a``: the data arrays the envs share never change."""
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class PortBenchData:
    """Clean-mode market data on the NYSE trading calendar (spec §1.3, §11.6, §11.7).

    All arrays are read-only (the loader caches one instance per path and options;
    copy before modifying). ``T`` = number of trading days, ``N`` = number of tickers,
    ``M = 17`` macro keys.

    Attributes
    ----------
    dates : pandas.DatetimeIndex, shape (T,)
        NYSE trading days, ascending, naive: the days with a SPY price in the source
        (user data without SPY: days on which any non-crypto asset has a price).
    tickers : tuple of str, length N
        Universe in canonical order (§1.2; extra user tickers after the canonical
        ones of their class).
    asset_class : tuple of str, length N
        §1.1 class label of each ticker.
    prices : numpy.ndarray, shape (T, N), float64
        Adjusted close on trading day ``t`` after the <= ``ffill_limit``-trading-day
        forward fill (§11.6); NaN = no price (before listing, after a longer gap, after
        the source ends plus the fill). Crypto: the close of UTC day ``t - 1`` (§11.7),
        unless ``crypto_close="same_day"``.
    returns : numpy.ndarray, shape (T, N), float64
        Simple returns (§11.6): on a day with a real price ``P_t / P_last - 1`` with
        ``P_last`` the last real price before ``t`` (any distance back); 0.0 on a
        forward-filled day; NaN where there is no price at ``t`` or no earlier price.
    real_price : numpy.ndarray, shape (T, N), bool
        True where the price at ``t`` is a real (unfilled) observation.
    macro : numpy.ndarray, shape (T, 17), float64
        §1.4 values in :data:`MACRO_KEYS` order with publication lags applied; NaN
        where no usable observation exists or the series is missing (TEDRATE).
    vix : numpy.ndarray, shape (T,), float64
        ^VIX close on each trading day (unlagged, NaN if missing); macro only.
    meta : dict
        Provenance and vintage (source, build date, per-series first/last dates, options).
    """

    dates: pd.DatetimeIndex
    tickers: tuple[str, ...]
    asset_class: tuple[str, ...]
    prices: np.ndarray
    returns: np.ndarray
    real_price: np.ndarray
    macro: np.ndarray
    vix: np.ndarray
    meta: dict = field(default_factory=dict)
    #: one line per normalisation :meth:`from_frames` applied to the user's frames (text dates or values parsed,
    #: a time zone dropped, rows sorted), said once as a :class:`PortBenchDataWarning`; empty for clean input
    notes: tuple[str, ...] = ()

    # -- shape helpers ---------------------------------------------------------------------
    @property
    def n_assets(self) -> int:
        """Number of tickers ``N``."""
        return len(self.tickers)

    @property
    def n_dates(self) -> int:
        """Number of trading days ``T``."""
        return len(self.dates)

    @functools.cached_property
    def class_ids(self) -> np.ndarray:
        """Class id per ticker (position in :data:`ASSET_CLASSES`), shape (N,), int64, read-only."""
        return read_only_array(np.array([ASSET_CLASSES.index(c) for c in self.asset_class], dtype=np.int64))

    @functools.cached_property
    def ticker_index(self) -> dict[str, int]:
        """Mapping ticker -> column position."""
        return {t: i for i, t in enumerate(self.tickers)}

    @property
    def asset_class_map(self) -> dict[str, str]:
        """Mapping ticker -> §1.1 class label (the snapshot's ``asset_class_map``)."""
        return dict(zip(self.tickers, self.asset_class))

    @functools.cached_property
    def macro_mask(self) -> np.ndarray:
        """``isfinite(macro)``, shape (T, 17), bool, read-only (§11.8 ``macro_mask``)."""
        return read_only_array(np.isfinite(self.macro))

    # -- date helpers ----------------------------------------------------------------------
    def index_at(self, date: Any) -> int:
        """Row of the last trading day <= ``date``.

        Raises
        ------
        KeyError
            If ``date`` is before the first trading day.
        """
        ts = pd.Timestamp(date)
        pos = int(self.dates.searchsorted(ts, side="right")) - 1
        if pos < 0:
            raise KeyError(f"{ts.date()} is before the first trading day {self.dates[0].date()}")
        return pos

    def window(self, start: Any = None, end: Any = None) -> slice:
        """Row slice of the trading days in ``[start, end]`` (inclusive; None = open end)."""
        lo = 0 if start is None else int(self.dates.searchsorted(pd.Timestamp(start), side="left"))
        hi = self.n_dates if end is None else int(self.dates.searchsorted(pd.Timestamp(end), side="right"))
        return slice(lo, hi)

    def frame(self, name: str) -> pd.DataFrame:
        """Labelled DataFrame of ``"prices"``, ``"returns"``, ``"real_price"`` or ``"macro"``."""
        if name in ("prices", "returns", "real_price"):
            return pd.DataFrame(np.array(getattr(self, name)), index=self.dates, columns=list(self.tickers))
        if name == "macro":
            return pd.DataFrame(np.array(self.macro), index=self.dates, columns=list(MACRO_KEYS))
        raise ValueError(f"unknown frame {name!r}; expected 'prices', 'returns', 'real_price' or 'macro'")

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_frames(
        cls,
        prices: pd.DataFrame,
        asset_class: Mapping[str, str],
        macro: pd.DataFrame | None = None,
        vix: pd.Series | None = None,
        tickers: Sequence[str] | None = None,
        crypto_close: str = "prior_day",
        ffill_limit: int = 3,
        meta: dict | None = None,
    ) -> "PortBenchData":
        """Apply every clean-mode rule to raw inputs in the documented schema.

        Parameters
        ----------
        prices : pandas.DataFrame
            Wide raw daily table: DatetimeIndex (may contain crypto weekend days),
            one float column per ticker, NaN where there is no quote. Adjusted closes
            (crypto: UTC-day closes). A ``"^VIX"`` column is used as the VIX source
            when ``vix`` is None and is never traded.
        asset_class : mapping
            ticker -> class label, §1.1's (``equities``...) or the data's
            (``equity``, ``bond``, ``commodity``, ``crypto``, ``real_estate``,
            ``cash``; mapped by :data:`CLASS_LABEL_MAP`).
        macro : pandas.DataFrame, optional
            Wide raw FRED table: columns = FRED ids, index = observation dates,
            native units. Missing ids give all-NaN macro columns.
        vix : pandas.Series, optional
            Raw ^VIX closes; defaults to ``prices["^VIX"]`` if present.
        tickers : sequence of str, optional
            Universe; default = every priced column with a class except ^VIX. Tickers
            without a price column are dropped with a :class:`PortBenchDataWarning`.
            The result is in canonical order.
        crypto_close : {"prior_day", "same_day"}
            §11.7 crypto alignment: ``prior_day`` uses the close of UTC day ``t - 1``
            on NYSE day ``t``; ``same_day`` the naive same-date close.
        ffill_limit : int
            Maximum consecutive trading days a price is carried forward (§11.6: 3).
        meta : dict, optional
            Provenance merged into :attr:`meta`.

        Returns
        -------
        PortBenchData

        Raises
        ------
        ValueError
            Duplicate dates, an unknown class label, a ticker without a class, a bad
            option, or no trading days.
        """
        if crypto_close not in CRYPTO_CLOSE_OPTIONS:
            raise ValueError(f"crypto_close must be one of {CRYPTO_CLOSE_OPTIONS}, got {crypto_close!r}")
        if int(ffill_limit) < 0:
            raise ValueError(f"ffill_limit must be >= 0, got {ffill_limit}")
        if not isinstance(prices, pd.DataFrame):
            raise ValueError("prices must be a pandas DataFrame (wide: one column per ticker)")
        notes: list[str] = []
        raw = numeric_columns(clean_index(prices, "prices", notes), "prices", notes)
        raw.columns = [str(c) for c in raw.columns]
        vals = raw.to_numpy()
        bad = ~np.isnan(vals) & ~(np.isfinite(vals) & (vals > 0))  # NaN means "no price"; the rest must be > 0
        if bad.any():
            rows, cols = np.nonzero(bad)
            where = ", ".join(f"{raw.columns[c]} {raw.index[r].date()} = {vals[r, c]:g}"
                              for r, c in list(zip(rows, cols))[:3])
            raise ValueError(f"prices must be positive and finite (NaN or empty = no price): {int(bad.sum())} "
                             f"bad value(s), e.g. {where}")
        classes = {str(t): to_class_label(c) for t, c in asset_class.items()}

        # ---- universe ----------------------------------------------------------------------
        if tickers is None:
            cand = [t for t in raw.columns if t != VIX_TICKER and t in classes]
        else:
            cand = [str(t) for t in tickers]
            missing = [t for t in cand if t not in raw.columns or not raw[t].notna().any()]
            if missing:
                warnings.warn(
                    f"PortBench data: {len(missing)} universe ticker(s) have no prices and are dropped: "
                    + ", ".join(missing),
                    PortBenchDataWarning,
                    stacklevel=2,
                )
            cand = [t for t in cand if t not in missing]
        noclass = [t for t in cand if t not in classes]
        if noclass:
            raise ValueError(f"no asset class given for ticker(s): {noclass}")
        if VIX_TICKER in cand:
            raise ValueError("^VIX is a macro indicator in clean mode and cannot be in the tradable universe")
        order = order_tickers(cand, classes)
        if not order and tickers:
            raise ValueError(f"empty universe: none of universe=[{_few([str(t) for t in tickers])}] has prices in "
                             "the data; name tickers that do (a PortBench env also needs SPY, the §1.9 regime "
                             "ticker, or PortBenchConfig(regime_ticker=...))")
        if not order:
            priced = [t for t in raw.columns if t != VIX_TICKER and raw[t].notna().any()]
            raise ValueError(
                f"empty universe: no ticker has both prices and an asset class (priced: {_few(priced)}; with a class: "
                f"{_few([t for t in classes if t != VIX_TICKER])}); name the tickers to trade with universe=[...] and "
                "give each an asset_class; a PortBench env also needs SPY, the §1.9 regime ticker (or "
                "PortBenchConfig(regime_ticker=...))"
            )
        cls_of = tuple(classes[t] for t in order)

        # ---- calendar (§1.3 clean mode: NYSE days) -----------------------------------------
        noncrypto = [t for t in raw.columns if classes.get(t) not in (None, "cryptocurrency") and t != VIX_TICKER]
        if "SPY" in raw.columns and raw["SPY"].notna().any():
            cal = raw.index[raw["SPY"].notna().to_numpy()]
            cal_rule = "days with a SPY price"
        elif noncrypto and raw[noncrypto].notna().any().any():
            cal = raw.index[raw[noncrypto].notna().any(axis=1).to_numpy()]
            cal_rule = "days on which any non-crypto asset has a price"
        else:
            raise ValueError("cannot build the trading calendar: no SPY and no non-crypto prices")
        dates = pd.DatetimeIndex(cal, name="date")

        # ---- prices on the calendar ----------------------------------------------------------
        cols = []
        for t, c in zip(order, cls_of):
            s = raw[t].dropna()
            if c == "cryptocurrency" and crypto_close == "prior_day":
                s = s.copy()
                s.index = s.index + pd.Timedelta(days=1)  # close of UTC day D is known on D+1
            cols.append(s.reindex(dates))
        obs = pd.concat(cols, axis=1, keys=list(order)) if cols else pd.DataFrame(index=dates)
        obs = obs.astype(float)
        real = obs.notna().to_numpy()
        filled = obs.ffill(limit=int(ffill_limit)) if ffill_limit > 0 else obs
        p = filled.to_numpy(dtype=float)

        # ---- returns (§11.6) -----------------------------------------------------------------
        last_real = obs.ffill().shift(1).to_numpy(dtype=float)  # last real price strictly before t
        with np.errstate(divide="ignore", invalid="ignore"):
            r_real = p / last_real - 1.0
        # real day: P_t / P_last - 1 (NaN if there is no earlier real price); filled day: 0;
        # no price: NaN
        ret = np.where(real, r_real, np.where(np.isfinite(p), 0.0, np.nan))

        # ---- VIX -----------------------------------------------------------------------------
        if vix is None and VIX_TICKER in raw.columns:
            vix = raw[VIX_TICKER]
        vix_raw = pd.Series(dtype=float) if vix is None else clean_index(pd.Series(vix, dtype=float), "vix", notes)
        vix_arr = vix_raw.reindex(dates).to_numpy(dtype=float) if len(vix_raw) else np.full(len(dates), np.nan)

        # ---- macro (§1.4) ---------------------------------------------------------------------
        mac = None if macro is None else numeric_columns(clean_index(macro, "macro", notes), "macro", notes)
        macro_arr = np.full((len(dates), len(MACRO_KEYS)), np.nan)
        series_meta: dict[str, dict] = {}
        for j, src in enumerate(MACRO_SOURCES):
            if src.series == VIX_TICKER:
                rawser = vix_raw
            elif mac is not None and src.series in mac.columns:
                rawser = mac[src.series].astype(float)
            else:
                series_meta[src.key] = {"series": src.series, "available": False}
                continue
            ob = macro_observations(rawser, src.transform)
            macro_arr[:, j] = lagged_asof(ob, src.lag_days, dates)
            rs = rawser.dropna()
            series_meta[src.key] = {
                "series": src.series,
                "available": bool(len(rs)),
                "lag_days": src.lag_days,
                "transform": src.transform,
                "first_obs": None if rs.empty else str(rs.index[0].date()),
                "last_obs": None if rs.empty else str(rs.index[-1].date()),
            }

        # ---- meta ----------------------------------------------------------------------------
        coverage = {}
        for k, t in enumerate(order):
            fin = np.flatnonzero(real[:, k])
            coverage[t] = {
                "first_date": str(dates[fin[0]].date()) if fin.size else None,
                "last_date": str(dates[fin[-1]].date()) if fin.size else None,
                "n_real": int(fin.size),
            }
        m = dict(meta or {})
        m.update(
            {
                "calendar": cal_rule,
                "crypto_close": crypto_close,
                "ffill_limit": int(ffill_limit),
                "first_date": str(dates[0].date()) if len(dates) else None,
                "last_date": str(dates[-1].date()) if len(dates) else None,
                "macro_series": series_meta,
                "ticker_coverage": coverage,
            }
        )
        out = cls(
            dates=dates,
            tickers=order,
            asset_class=cls_of,
            prices=read_only_array(p),
            returns=read_only_array(ret.astype(float)),
            real_price=read_only_array(real.astype(bool)),
            macro=read_only_array(macro_arr),
            vix=read_only_array(vix_arr),
            meta=m,
            notes=tuple(notes),
        )
        for note in out.notes:
            warn_once(f"PortBench data: {note}")
        return out


# ----------------------------------------------------------------------------------------------
# loader
# ----------------------------------------------------------------------------------------------


def _own_universe(prices: pd.DataFrame, classes: Mapping[str, str]) -> tuple[list[str], dict[str, list[str]]]:
    """A user directory's own universe (docs/data.md §7): every ticker of ``prices.parquet`` (``^VIX`` aside)
    with at least one price and an ``asset_class`` in ``assets.csv``; and what is left out, by reason
    (``no_class``: priced without a class; ``no_prices``: in ``assets.csv`` without any price)."""
    cols = [str(c) for c in prices.columns]
    has = prices.apply(pd.to_numeric, errors="coerce").notna().any(axis=0).to_numpy()  # as from_frames reads them
    priced = [t for t, h in zip(cols, has) if h and t != VIX_TICKER]
    have = set(priced)
    left = {"no_class": [t for t in priced if t not in classes],
            "no_prices": [t for t in classes if t not in have and t != VIX_TICKER]}
    return [t for t in priced if t in classes], {k: v for k, v in left.items() if v}


def load_from_root(root, source: str, universe: tuple[str, ...] | None, crypto_close: str,
                   bundled: bool = False) -> PortBenchData:
    """Read a data directory (or the bundle) and build :class:`PortBenchData` (uncached).

    ``universe`` None: the 80 tickers of §1.2 for the bundle, the directory's own universe
    (:func:`_own_universe`) for a user directory."""
    prices, assets, macro, prov = read_source(root)
    classes = dict(zip(assets["ticker"].astype(str), assets["asset_class"].astype(str)))
    meta: dict[str, Any] = {"source": source, "provenance": prov}
    if universe is None and bundled:  # the bundle: §1.2's universe
        tickers = list(CANONICAL_TICKERS)
    elif universe is None:
        tickers, left_out = _own_universe(prices, classes)
        meta["universe"] = "own"
        if left_out:
            meta["not_traded"] = left_out
    else:
        tickers = list(universe)
    missing_cls = [t for t in tickers if t in prices.columns and t not in classes]
    if missing_cls:
        raise ValueError(f"{source}: assets.csv has no asset_class for {missing_cls}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PortBenchDataWarning)
        return PortBenchData.from_frames(
            prices, classes, macro=macro, tickers=tickers, crypto_close=crypto_close, meta=meta
        )


def _stamp(root: Path) -> tuple:
    """Modification stamps of the schema files (so a refreshed directory is re-read)."""
    out = []
    for f in ("prices.parquet", "assets.csv", "macro.parquet", "provenance.json"):
        try:
            st = (root / f).stat()
            out.append((f, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((f, None, None))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _load_cached(key: str, stamp: tuple, universe: tuple[str, ...] | None, crypto_close: str) -> PortBenchData:
    if key == "<bundled>":
        return load_from_root(
            bundled_portbench_path(), "quantgym bundled data (quantgym/data/bundled/portbench)", universe, crypto_close,
            bundled=True,
        )
    return load_from_root(Path(key), key, universe, crypto_close)


def load_portbench_data(
    path: str | os.PathLike | None = None,
    *,
    universe: Sequence[str] | None = None,
    crypto_close: str = "prior_day",
) -> PortBenchData:
    """Load PortBench market data and apply the clean-mode rules.

    Parameters
    ----------
    path : str or os.PathLike, optional
        None -> the bundled package data. Otherwise a directory in the documented
        schema (the same as the raw snapshot's): ``prices.parquet`` (wide,
        index ``date``, one column per ticker, crypto weekend rows allowed),
        ``assets.csv`` (columns ``ticker``, ``asset_class`` at least), optional
        ``macro.parquet`` (wide, FRED ids, index = observation date), optional
        ``provenance.json``. ``volume.parquet`` may be present and is ignored.
    universe : sequence of str, optional
        Tickers to trade. Default: the bundle's 80 of §1.2; a directory's own
        universe, i.e. every ticker of ``prices.parquet`` (``^VIX`` aside) with a
        price and an ``asset_class`` (the tickers left out for want of either are
        listed in one :class:`PortBenchDataWarning` each and in
        ``meta["not_traded"]``). Tickers given here without prices are dropped with
        a :class:`PortBenchDataWarning` that lists them (never replaced). Each
        warning is said once per process.
    crypto_close : {"prior_day", "same_day"}
        §11.7 crypto close alignment.

    Returns
    -------
    PortBenchData
        Cached per (resolved path, file stamps, universe, crypto_close) in this
        process (a refreshed directory is re-read); its arrays are read-only. What was
        normalised in the files (text dates, a time zone, unsorted rows) is in
        :attr:`PortBenchData.notes`, each line said once as a :class:`PortBenchDataWarning`.

    Raises
    ------
    FileNotFoundError
        If the directory or a required file does not exist.
    ValueError
        On a schema error (see :meth:`PortBenchData.from_frames`).
    """
    if crypto_close not in CRYPTO_CLOSE_OPTIONS:
        raise ValueError(f"crypto_close must be one of {CRYPTO_CLOSE_OPTIONS}, got {crypto_close!r}")
    uni = None if universe is None else tuple(str(t) for t in universe)
    if path is None:
        data = _load_cached("<bundled>", (), uni, crypto_close)
    else:
        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"PortBench data directory not found: {root}")
        data = _load_cached(str(root), _stamp(root), uni, crypto_close)
    src = data.meta.get("source")
    for note in data.notes:
        warn_once(f"PortBench data ({src}): {note}")
    if data.meta.get("universe") == "own":
        for note in not_traded_notes(data):
            warn_once(f"PortBench data ({src}): {note}")
        return data
    dropped = [t for t in (CANONICAL_TICKERS if uni is None else uni) if t not in data.tickers]
    if dropped:
        warn_once(f"PortBench data ({src}): {len(dropped)} universe ticker(s) have no prices and are dropped: "
                   + ", ".join(dropped))
    return data


def not_traded_notes(data: "PortBenchData", limit: int | None = None) -> list[str]:
    """One line per reason why tickers of a user directory are not in its own universe (``meta["not_traded"]``;
    empty for the bundle or an explicit ``universe``); ``limit`` shortens each list to that many names."""
    why = {"no_class": "no asset_class in assets.csv", "no_prices": "no prices in prices.parquet"}
    return [f"{len(ts)} ticker(s) not traded ({why[k]}): " + (", ".join(ts) if limit is None else _few(ts, limit))
            for k, ts in (data.meta.get("not_traded") or {}).items()]


#: the warning registry of :func:`warn_once` (Python's default filter shows a message once per registry)
_WARNED: dict = {}


def warn_once(message: str, category: type[Warning] = PortBenchDataWarning) -> None:
    """Warn from one fixed location (this module, shown as one line), so that Python's default warning
    filter says a given message once per process, however often the same data is loaded (every env built
    on it) or an episode on it starts; a filter such as ``"always"`` shows every one."""
    warnings.warn_explicit(message, category, __name__, 0, module=__name__, registry=_WARNED)


#: Alias: the market-data name of the same loader.
load_portbench_market = load_portbench_data


def as_portbench_data(data: Any) -> "PortBenchData":
    """Resolve an env's ``data=`` argument: None -> the bundled data, a :class:`PortBenchData` as is,
    a path -> :func:`load_portbench_data` (schema in docs/data.md).

    Raises
    ------
    ValueError
        For any other type.
    """
    if data is None:
        return load_portbench_data()
    if isinstance(data, PortBenchData):
        return data
    if isinstance(data, (str, os.PathLike)):
        return load_portbench_data(data)
    raise ValueError(
        "data= must be None (bundled real data), a PortBenchData object or a directory path in the documented "
        f"schema (docs/data.md); got {type(data).__name__}"
    )
