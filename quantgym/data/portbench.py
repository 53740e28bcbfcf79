"""PortBench market data: bundled real data, loader and clean-mode calendar.

This module turns the raw daily tables (Yahoo adjusted closes on a mixed
calendar that contains crypto weekend days, plus FRED series on their
observation dates) into the point-in-time arrays the PortBench environment
consumes, following ``shared/spec/portbench.md``:

* §1.1/§1.2 -- the six asset classes and the 80-instrument clean-mode universe
  in canonical order (``ASSET_CLASSES``, ``UNIVERSE``, ``CANONICAL_TICKERS``);
* §1.3/§11.6 -- the NYSE trading calendar, the <= 3-trading-day forward fill of
  prices and simple returns computed from the filled prices (0 on a filled
  day, ``P_t / P_last - 1`` on the first real price after any gap, so no P&L is
  lost and crypto weekend moves are compounded into the next trading day);
* §11.7 -- crypto close alignment (the price on NYSE day ``t`` is the close of
  UTC day ``t - 1``);
* §1.4 -- the 17 macro keys with publication lags and plateau collapse;
* §11.8 -- mapping of the data's class labels to §1.1's;
* §1.9 -- the SPY-based market regime label (helper :func:`market_regime`).

Everything here is real data: the bundle under ``quantgym/data/bundled/portbench``
is written by :mod:`quantgym.data.build_portbench` from ``shared/data/portbench``
(see ``docs/data.md`` for provenance, coverage, gaps and licence notes).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ASSET_CLASSES",
    "UNIVERSE",
    "CANONICAL_TICKERS",
    "MACRO_KEYS",
    "MACRO_SOURCES",
    "CLASS_LABEL_MAP",
    "VIX_TICKER",
    "CRYPTO_CLOSE_OPTIONS",
    "REGIME_LABELS",
    "MacroSource",
    "PortBenchData",
    "PortBenchDataWarning",
    "load_portbench_data",
    "load_portbench_market",
    "as_portbench_data",
    "load_portbench_raw",
    "bundled_portbench_path",
    "available_mask",
    "availability_matrix",
    "market_regime",
    "collapse_plateaus",
    "macro_observations",
    "lagged_asof",
]

#: §1.1: the six asset-class labels, in the spec's order (class id = position).
ASSET_CLASSES: tuple[str, ...] = ("equities", "bonds", "commodities", "real_estate", "cryptocurrency", "cash")

#: §1.2: clean-mode tradable universe, class -> tickers in canonical order (80 in total).
UNIVERSE: dict[str, tuple[str, ...]] = {
    "equities": (
        "SPY", "QQQ", "IWM", "VTI", "IVV", "EEM", "EFA", "VEA", "FXI", "EWJ", "ACWI",
        "XLK", "XLF", "XLE", "XLV", "XLI", "XLY", "XLP", "XLU", "XLB", "XLRE",
        "MTUM", "VLUE", "QUAL", "USMV",
    ),
    "bonds": (
        "SHV", "SHY", "IEF", "TLT", "TLH", "TIP", "SCHP", "STIP", "LQD", "HYG", "JNK",
        "VCIT", "BNDX", "EMB", "IGOV",
    ),
    "commodities": (
        "GLD", "IAU", "SLV", "PPLT", "PALL", "USO", "UNG", "BNO", "DBA", "CORN", "WEAT",
        "SOYB", "DBC", "PDBC", "DBB", "CPER",
    ),
    "real_estate": ("VNQ", "IYR", "SCHH", "REZ", "MORT", "INDS", "VNQI", "HAUZ", "XHB", "ITB"),
    "cryptocurrency": (
        "BTC-USD", "ETH-USD", "BNB-USD", "SOL-USD", "XRP-USD", "ADA-USD", "AVAX-USD",
        "DOT-USD", "LINK-USD", "MATIC-USD",
    ),
    "cash": ("BIL", "SGOV", "CSHI", "ICSH"),
}

#: The 80 tickers of :data:`UNIVERSE` in canonical order (class order of the §1.2 table).
CANONICAL_TICKERS: tuple[str, ...] = tuple(t for c in ASSET_CLASSES for t in UNIVERSE[c])

#: §11.8: the data's class labels -> §1.1's labels (§1.1 labels map to themselves).
CLASS_LABEL_MAP: dict[str, str] = {
    "equity": "equities",
    "bond": "bonds",
    "commodity": "commodities",
    "crypto": "cryptocurrency",
    "real_estate": "real_estate",
    "cash": "cash",
}

#: Yahoo ticker of the CBOE VIX index (macro only, never traded in clean mode).
VIX_TICKER = "^VIX"

#: Allowed values of the ``crypto_close`` option (§11.7).
CRYPTO_CLOSE_OPTIONS: tuple[str, ...] = ("prior_day", "same_day")

#: §1.9 regime labels, in the order of the observation's ``regime`` Discrete(4).
REGIME_LABELS: tuple[str, ...] = ("bull", "bear", "sideways", "crisis")


@dataclass(frozen=True)
class MacroSource:
    """One §1.4 macro key: its source series, publication lag and transform.

    Attributes
    ----------
    key : str
        The snapshot key (§1.4 table order).
    series : str
        FRED series id, or ``"^VIX"`` for the Yahoo VIX close.
    lag_days : int
        Publication lag in calendar days after the observation's period start.
    transform : str
        ``"level"`` (value as published), ``"yoy"`` (12-month change of the
        monthly series, decimal) or ``"qoq"`` (1-quarter change of the
        quarterly series, decimal).
    """

    key: str
    series: str
    lag_days: int
    transform: str = "level"


#: §1.4: the 17 macro keys in table order, with source series, lag and transform.
MACRO_SOURCES: tuple[MacroSource, ...] = (
    MacroSource("fed_funds_rate", "DFF", 1),
    MacroSource("cpi_yoy", "CPIAUCSL", 45, "yoy"),
    MacroSource("unemployment", "UNRATE", 45),
    MacroSource("gdp_growth_qoq", "GDPC1", 120, "qoq"),
    MacroSource("t10y2y_spread", "T10Y2Y", 1),
    MacroSource("t10y3m_spread", "T10Y3M", 1),
    MacroSource("breakeven_10y", "T10YIE", 1),
    MacroSource("hy_oas", "BAMLH0A0HYM2", 1),
    MacroSource("ig_oas", "BAMLC0A0CM", 1),
    MacroSource("ted_spread", "TEDRATE", 1),
    MacroSource("mortgage_30y", "MORTGAGE30US", 1),
    MacroSource("dgs_3m", "DGS3MO", 1),
    MacroSource("dgs_2y", "DGS2", 1),
    MacroSource("dgs_10y", "DGS10", 1),
    MacroSource("dgs_30y", "DGS30", 1),
    MacroSource("real_yield_10y", "DFII10", 1),
    MacroSource("vix", VIX_TICKER, 1),
)

#: The 17 §1.4 keys in table order (``fed_funds_rate`` ... ``real_yield_10y``, ``vix``).
MACRO_KEYS: tuple[str, ...] = tuple(m.key for m in MACRO_SOURCES)

#: FRED ids needed for §1.4 (TEDRATE included; it is absent from the bundle).
FRED_IDS: tuple[str, ...] = tuple(m.series for m in MACRO_SOURCES if m.series != VIX_TICKER)

_BUNDLE_PACKAGE = "quantgym.data"
_BUNDLE_SUBDIR = ("bundled", "portbench")


class PortBenchDataWarning(UserWarning):
    """Data-quality warning of the PortBench loader (e.g. universe tickers missing)."""


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------


def _to_class_label(label: str) -> str:
    """Map a data class label (``equity``...) or a §1.1 label to the §1.1 label (§11.8)."""
    lab = str(label).strip()
    if lab in ASSET_CLASSES:
        return lab
    low = lab.lower()
    if low in CLASS_LABEL_MAP:
        return CLASS_LABEL_MAP[low]
    if low in ASSET_CLASSES:
        return low
    raise ValueError(
        f"unknown asset class label {label!r}; expected one of {sorted(CLASS_LABEL_MAP)} or {list(ASSET_CLASSES)}"
    )


def _clean_index(obj: pd.DataFrame | pd.Series, what: str) -> pd.DataFrame | pd.Series:
    """Return a copy with a naive, day-normalised, ascending, duplicate-free DatetimeIndex."""
    out = obj.copy()
    idx = pd.DatetimeIndex(pd.to_datetime(out.index))
    if idx.tz is not None:
        idx = idx.tz_convert("UTC").tz_localize(None)
    idx = idx.normalize().as_unit("ns")
    if idx.has_duplicates:
        dups = idx[idx.duplicated()].unique()[:5]
        raise ValueError(f"{what}: duplicate dates in the index, e.g. {[str(d.date()) for d in dups]}")
    out.index = idx
    out.index.name = "date"
    return out.sort_index()


def _order_tickers(tickers: Sequence[str], classes: Mapping[str, str]) -> tuple[str, ...]:
    """Canonical order: by §1.1 class, canonical tickers first in §1.2 order, then others as given."""
    canon_pos = {t: i for i, t in enumerate(CANONICAL_TICKERS)}
    given_pos = {t: i for i, t in enumerate(tickers)}
    key = lambda t: (ASSET_CLASSES.index(classes[t]), canon_pos.get(t, len(canon_pos)), given_pos[t])  # noqa: E731
    return tuple(sorted(dict.fromkeys(tickers), key=key))


def collapse_plateaus(series: pd.Series) -> pd.Series:
    """Keep the first date of each run of equal consecutive values (§1.4).

    Parameters
    ----------
    series : pandas.Series
        Observations indexed by observation date (NaN rows are dropped first).

    Returns
    -------
    pandas.Series
        The series with forward-fill plateaus collapsed: an observation's date is
        the first date of its run of equal values.
    """
    s = series.dropna()
    s = s[np.isfinite(s.to_numpy(dtype=float))]
    s = s.sort_index()
    if s.empty:
        return s.astype(float)
    keep = s.ne(s.shift())
    return s[keep].astype(float)


def _period_change(s: pd.Series, freq: str, periods: int) -> pd.Series:
    """Relative change over ``periods`` of the ``freq`` ("M"/"Q") series, as a decimal.

    The periodic series is the first value of each period (robust to a table that
    forward-fills monthly data onto daily dates); missing periods stay NaN, so a
    change across a gap is NaN, never computed against the wrong base.
    """
    if s.empty:
        return s
    per = s.groupby(s.index.to_period(freq)).first()
    full = per.reindex(pd.period_range(per.index.min(), per.index.max(), freq=freq))
    chg = full / full.shift(periods) - 1.0
    chg.index = chg.index.start_time
    return chg.dropna()


def macro_observations(raw: pd.Series, transform: str = "level") -> pd.Series:
    """Observations of one §1.4 key on their observation (period-start) dates.

    Parameters
    ----------
    raw : pandas.Series
        Raw series indexed by FRED observation date, native units (NaN = no observation).
    transform : {"level", "yoy", "qoq"}
        ``yoy``: 12-month relative change of the monthly series; ``qoq``: 1-quarter
        relative change of the quarterly series; both decimals (§1.4: ``cpi_yoy`` and
        ``gdp_growth_qoq`` are decimals, e.g. 0.029 = 2.9 %).

    Returns
    -------
    pandas.Series
        Plateau-collapsed observations (:func:`collapse_plateaus`), float64.
    """
    s = raw.dropna().astype(float).sort_index()
    if transform == "level":
        pass
    elif transform == "yoy":
        s = _period_change(s, "M", 12)
    elif transform == "qoq":
        s = _period_change(s, "Q", 1)
    else:
        raise ValueError(f"unknown macro transform {transform!r}; expected 'level', 'yoy' or 'qoq'")
    return collapse_plateaus(s)


def lagged_asof(obs: pd.Series, lag_days: int, dates: pd.DatetimeIndex) -> np.ndarray:
    """Value at each date = last observation whose date + ``lag_days`` <= date (§1.4).

    Parameters
    ----------
    obs : pandas.Series
        Observations indexed by observation date, ascending.
    lag_days : int
        Publication lag in calendar days.
    dates : pandas.DatetimeIndex, shape (T,)
        Evaluation dates.

    Returns
    -------
    numpy.ndarray, shape (T,), float64
        NaN where no observation is usable yet.
    """
    out = np.full(len(dates), np.nan)
    if obs.empty:
        return out
    eff = (pd.DatetimeIndex(obs.index) + pd.Timedelta(days=int(lag_days))).as_unit("ns").asi8
    pos = np.searchsorted(eff, pd.DatetimeIndex(dates).as_unit("ns").asi8, side="right") - 1
    ok = pos >= 0
    out[ok] = obs.to_numpy(dtype=float)[pos[ok]]
    return out


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


# ----------------------------------------------------------------------------------------------
# data container
# ----------------------------------------------------------------------------------------------


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
        return _readonly(np.array([ASSET_CLASSES.index(c) for c in self.asset_class], dtype=np.int64))

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
        return _readonly(np.isfinite(self.macro))

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
        raw = _clean_index(prices, "prices").apply(pd.to_numeric, errors="coerce").astype(float)
        raw.columns = [str(c) for c in raw.columns]
        classes = {str(t): _to_class_label(c) for t, c in asset_class.items()}

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
        order = _order_tickers(cand, classes)
        if not order:
            raise ValueError("empty universe: no ticker with prices and an asset class")
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
        vix_raw = pd.Series(dtype=float) if vix is None else _clean_index(pd.Series(vix, dtype=float), "vix")
        vix_arr = vix_raw.reindex(dates).to_numpy(dtype=float) if len(vix_raw) else np.full(len(dates), np.nan)

        # ---- macro (§1.4) ---------------------------------------------------------------------
        mac = None if macro is None else _clean_index(macro, "macro").apply(pd.to_numeric, errors="coerce")
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
        return cls(
            dates=dates,
            tickers=order,
            asset_class=cls_of,
            prices=_readonly(p),
            returns=_readonly(ret.astype(float)),
            real_price=_readonly(real.astype(bool)),
            macro=_readonly(macro_arr),
            vix=_readonly(vix_arr),
            meta=m,
        )


# ----------------------------------------------------------------------------------------------
# availability and regime helpers
# ----------------------------------------------------------------------------------------------


def availability_matrix(data: PortBenchData, lookback: int = 60, min_obs: int = 20) -> np.ndarray:
    """§11.6 availability for every trading day at once.

    ``A[t, i]`` is True iff asset ``i`` has a price at ``t`` (after the <= 3-day fill)
    and at least ``min_obs`` valid (non-NaN) returns among the last ``lookback`` return
    rows ending at ``t`` (rows ``t - lookback + 1 .. t``, fewer at the start).

    Returns
    -------
    numpy.ndarray, shape (T, N), bool
    """
    valid = np.isfinite(np.asarray(data.returns)).astype(np.int64)
    c = np.vstack([np.zeros((1, valid.shape[1]), np.int64), np.cumsum(valid, axis=0)])
    t = np.arange(valid.shape[0])
    lo = np.maximum(t + 1 - int(lookback), 0)
    counts = c[t + 1] - c[lo]
    return np.isfinite(np.asarray(data.prices)) & (counts >= int(min_obs))


def available_mask(
    data: PortBenchData, t_index: int, lookback: int = 60, min_obs: int = 20, window_days: int | None = None
) -> np.ndarray:
    """§11.6 availability set ``A_d`` at trading-day row ``t_index``.

    Parameters
    ----------
    data : PortBenchData
    t_index : int
        Row of the decision date in ``data.dates`` (negative indices allowed).
    lookback : int
        Return rows in the window (``L = 60``).
    min_obs : int
        Minimum valid returns in the window (20).
    window_days : int, optional
        If given, the window also keeps only rows dated >= ``d - window_days`` calendar
        days (the §1.6 snapshot range ``[d - 90, d]``); default: rows only.

    Returns
    -------
    numpy.ndarray, shape (N,), bool
        True iff the asset has a price at ``t`` and >= ``min_obs`` non-NaN returns in
        rows ``t - lookback + 1 .. t``.

    Raises
    ------
    IndexError
        If ``t_index`` is out of range.
    """
    T = data.n_dates
    t = int(t_index)
    if t < 0:
        t += T
    if not 0 <= t < T:
        raise IndexError(f"t_index {t_index} out of range for {T} trading days")
    lo = max(0, t + 1 - int(lookback))
    if window_days is not None:
        first = data.dates[t] - pd.Timedelta(days=int(window_days))
        lo = max(lo, int(data.dates.searchsorted(first, side="left")))
    n_valid = np.isfinite(data.returns[lo : t + 1]).sum(axis=0)
    return np.isfinite(data.prices[t]) & (n_valid >= int(min_obs))


def market_regime(data: PortBenchData, t_index: int, ticker: str = "SPY") -> str:
    """§1.9 market regime label at trading-day row ``t_index``.

    ``g = P(last <= d) / P(first >= d - 126 calendar days) - 1`` on ``ticker``'s prices;
    ``crisis`` if ``g < -0.20``, ``bear`` if ``g < -0.05``, ``bull`` if ``g > 0.10``,
    else ``sideways``. Returns ``"sideways"`` if no price is available (g undefined).
    """
    j = data.ticker_index.get(ticker)
    if j is None:
        raise ValueError(f"{ticker} is not in the universe; the §1.9 regime needs it")
    t = int(t_index) % data.n_dates
    px = data.prices[: t + 1, j]
    d = data.dates[t]
    lo = int(data.dates.searchsorted(d - pd.Timedelta(days=126), side="left"))
    seg = px[lo:]
    fin = np.flatnonzero(np.isfinite(seg))
    if fin.size == 0:
        return "sideways"
    g = seg[fin[-1]] / seg[fin[0]] - 1.0
    if g < -0.20:
        return "crisis"
    if g < -0.05:
        return "bear"
    if g > 0.10:
        return "bull"
    return "sideways"


# ----------------------------------------------------------------------------------------------
# loader
# ----------------------------------------------------------------------------------------------


def bundled_portbench_path():
    """The bundled data directory as an :mod:`importlib.resources` Traversable."""
    res = importlib.resources.files(_BUNDLE_PACKAGE)
    for part in _BUNDLE_SUBDIR:
        res = res / part
    return res


def _read_source(root) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, dict]:
    """Read prices / assets / optional macro / optional provenance from a dir or Traversable."""
    prices_f = root / "prices.parquet"
    assets_f = root / "assets.csv"
    if not prices_f.is_file() or not assets_f.is_file():
        raise FileNotFoundError(
            f"{root}: expected prices.parquet and assets.csv (schema in docs/data.md)"
        )
    with prices_f.open("rb") as fh:
        prices = pd.read_parquet(fh)
    with assets_f.open("rb") as fh:
        assets = pd.read_csv(fh, dtype=str)
    for col in ("ticker", "asset_class"):
        if col not in assets.columns:
            raise ValueError(f"{assets_f}: missing required column {col!r}")
    macro = None
    macro_f = root / "macro.parquet"
    if macro_f.is_file():
        with macro_f.open("rb") as fh:
            macro = pd.read_parquet(fh)
    prov: dict = {}
    prov_f = root / "provenance.json"
    if prov_f.is_file():
        prov = json.loads(prov_f.read_text(encoding="utf-8"))
    if "date" in prices.columns:
        prices = prices.set_index("date")
    if macro is not None and "date" in macro.columns:
        macro = macro.set_index("date")
    return prices, assets, macro, prov


def _load_from_root(root, source: str, universe: tuple[str, ...] | None, crypto_close: str) -> PortBenchData:
    """Read a data directory (or the bundle) and build :class:`PortBenchData` (uncached)."""
    prices, assets, macro, prov = _read_source(root)
    classes = dict(zip(assets["ticker"].astype(str), assets["asset_class"].astype(str)))
    tickers = list(CANONICAL_TICKERS) if universe is None else list(universe)
    missing_cls = [t for t in tickers if t in prices.columns and t not in classes]
    if missing_cls:
        raise ValueError(f"{source}: assets.csv has no asset_class for {missing_cls}")
    meta = {"source": source, "provenance": prov}
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
        return _load_from_root(
            bundled_portbench_path(), "quantgym bundled data (quantgym/data/bundled/portbench)", universe, crypto_close
        )
    return _load_from_root(Path(key), key, universe, crypto_close)


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
        schema (the same as ``shared/data/portbench``): ``prices.parquet`` (wide,
        index ``date``, one column per ticker, crypto weekend rows allowed),
        ``assets.csv`` (columns ``ticker``, ``asset_class`` at least), optional
        ``macro.parquet`` (wide, FRED ids, index = observation date), optional
        ``provenance.json``. ``volume.parquet`` may be present and is ignored.
    universe : sequence of str, optional
        Tickers to trade (default: the 80 of §1.2). Tickers without prices are
        dropped with a :class:`PortBenchDataWarning` that lists them (never replaced).
    crypto_close : {"prior_day", "same_day"}
        §11.7 crypto close alignment.

    Returns
    -------
    PortBenchData
        Cached per (resolved path, file stamps, universe, crypto_close) in this
        process (a refreshed directory is re-read); its arrays are read-only.

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
    dropped = [t for t in (CANONICAL_TICKERS if uni is None else uni) if t not in data.tickers]
    if dropped:
        warnings.warn(
            f"PortBench data ({data.meta.get('source')}): {len(dropped)} universe ticker(s) have no prices "
            "and are dropped: " + ", ".join(dropped),
            PortBenchDataWarning,
            stacklevel=2,
        )
    return data


#: Alias named in issue 2.
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


def load_portbench_raw(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The raw tables behind :func:`load_portbench_data`, before any clean-mode rule.

    For paper mode (own calendars per class, §1.3) and for inspection. Not cached;
    returns fresh, writable copies.

    Parameters
    ----------
    path : str or os.PathLike, optional
        None -> bundled data; else a directory in the documented schema.

    Returns
    -------
    dict
        ``prices``: wide raw price table on the mixed calendar (crypto weekend rows
        included), index ``date``; ``assets``: the assets table (str columns) with an
        extra ``class_label`` column holding the §1.1 label; ``macro``: wide raw FRED
        table on observation dates, or None; ``provenance``: dict.
    """
    if path is None:
        root = bundled_portbench_path()
    else:
        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"PortBench data directory not found: {root}")
    prices, assets, macro, prov = _read_source(root)
    assets = assets.copy()
    assets["class_label"] = [_to_class_label(c) for c in assets["asset_class"]]
    return {"prices": prices, "assets": assets, "macro": macro, "provenance": prov}
