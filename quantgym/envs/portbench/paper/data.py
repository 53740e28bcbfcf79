"""Paper-mode data transformation (spec §1.2–§1.4, §6.2, §11.1; Appendix A).

:func:`build_paper_data` turns the raw tables of :func:`quantgym.envs.portbench.raw.load_portbench_raw`
(plus the 18-stock bundle of :mod:`.build_data`) into a :class:`PaperPortBenchData` according to
the data flags of a :class:`~quantgym.envs.portbench.paper.config.PaperFidelity`:

* ``universe`` -- the §11.1 paper universes (``^VIX`` traded as an equity);
* ``log_returns_equities`` -- ``ln(P_t/P_{t-1})`` for equities, consumed as simple;
* ``winsorize`` -- full-sample 1st/99th percentile clipping of prices and returns of the non-cash
  classes (percentiles over the repo's data span from ``winsor_start``), and of the 12
  ``bonds.csv`` macro keys and ``vix`` (§1.4);
* ``weekday_calendar`` -- the Mon–Fri ``pandas.bdate_range`` calendar: the day-loop return of an
  asset on date ``t`` is its last own-calendar return in ``[t − 7 days, t]`` (an exchange holiday
  repeats the previous trading day's return, crypto weekend returns are never applied); crypto
  closes are same-day UTC closes (the repo's naive alignment).

Without ``weekday_calendar`` the clean NYSE calendar and clean returns of
:meth:`PortBenchData.from_frames` are used, and the return flags act on them. The result also
carries every asset's own-calendar returns and prices (``own_returns``/``own_prices`` on the union
of all raw dates) for the own-calendar snapshot windows of :mod:`.market`.
"""

from __future__ import annotations

import functools
import importlib.resources
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import (
    CANONICAL_TICKERS,
    MACRO_KEYS,
    MACRO_SOURCES,
    UNIVERSE,
    VIX_TICKER,
    to_class_label,
    lagged_asof,
    macro_observations,
)
from quantgym.envs.portbench.data import PortBenchData, PortBenchDataWarning, clean_index, read_only_array
from quantgym.envs.portbench.raw import load_portbench_raw
from quantgym.envs.portbench.paper.config import PAPER_STOCKS, PaperFidelity

#: §1.4: keys read from the repo's ``bonds.csv`` (winsorised with that file) -- plus ``vix`` (equities.csv)
WINSORISED_MACRO_KEYS: tuple[str, ...] = (
    "t10y2y_spread", "t10y3m_spread", "breakeven_10y", "hy_oas", "ig_oas", "ted_spread", "mortgage_30y",
    "dgs_3m", "dgs_2y", "dgs_10y", "dgs_30y", "real_yield_10y", "vix",
)
#: lower/upper winsorisation quantiles (§1.3)
WINSOR_Q = (0.01, 0.99)
#: a day's return is the last own return at most this many calendar days back (§6.2)
STALE_DAYS = 7


@dataclass(frozen=True, eq=False)
class PaperPortBenchData(PortBenchData):
    """:class:`PortBenchData` of a paper-mode flag set, plus own-calendar tables.

    Attributes (besides the parent's)
    ----------
    own_dates : pandas.DatetimeIndex, shape (U,)
        Union of every asset's own observation dates (crypto weekends included).
    own_returns : numpy.ndarray, shape (U, N)
        Each asset's return on its own calendar (after the log/winsor flags), NaN off its calendar.
    own_prices : numpy.ndarray, shape (U, N)
        Each asset's (winsorised) price on its own calendar, NaN off its calendar.
    flags : PaperFidelity
        The flags the data were built with.
    """

    own_dates: pd.DatetimeIndex = field(default_factory=lambda: pd.DatetimeIndex([]))
    own_returns: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    own_prices: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    flags: PaperFidelity = field(default_factory=PaperFidelity)


def paper_universe(universe: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tickers and §1.1 classes of a paper universe, in the repo's map order (§1.2, §11.1).

    ``None`` → the clean 80; ``"81_crypto"`` → the 80 with ``^VIX`` as the last equity;
    ``"89_no_crypto"`` → 25 equity ETFs, ``^VIX``, bonds, commodities, real estate, cash, then the
    18 stocks of :data:`PAPER_STOCKS` (equities, after ``ICSH``).
    """
    order = ("equities", "bonds", "commodities", "real_estate", "cryptocurrency", "cash")
    tick: list[str] = []
    cls: list[str] = []
    for c in order:
        if c == "cryptocurrency" and universe == "89_no_crypto":
            continue
        tick += list(UNIVERSE[c])
        cls += [c] * len(UNIVERSE[c])
        if c == "equities" and universe is not None:
            tick.append(VIX_TICKER)
            cls.append("equities")
    if universe == "89_no_crypto":
        tick += list(PAPER_STOCKS)
        cls += ["equities"] * len(PAPER_STOCKS)
    if universe is None:
        assert tuple(tick) == CANONICAL_TICKERS
    return tuple(tick), tuple(cls)


def load_paper_stocks() -> pd.DataFrame:
    """Raw adjusted closes of the 18 §11.1 stocks (bundled by :mod:`.build_data`), index ``date``."""
    res = importlib.resources.files("quantgym.data") / "bundled" / "portbench_paper" / "stocks.parquet"
    with res.open("rb") as fh:
        df = pd.read_parquet(fh)
    if "date" in df.columns:
        df = df.set_index("date")
    return df


def _winsor_bounds(df: pd.DataFrame, start: str) -> tuple[pd.Series, pd.Series]:
    """Per-column 1st/99th percentiles (linear interpolation) over rows ≥ ``start``, NaN ignored."""
    sub = df.loc[pd.Timestamp(start):]
    return sub.quantile(WINSOR_Q[0]), sub.quantile(WINSOR_Q[1])


def winsorize_frame(df: pd.DataFrame, start: str = "2015-01-01") -> pd.DataFrame:
    """Clip every column at its full-sample 1st/99th percentiles (spec §1.3, paper mode).

    Parameters
    ----------
    df : wide table (NaN = no observation; NaN stays NaN).
    start : first date of the sample the percentiles are taken over (the repo's data span).

    Examples
    --------
    >>> s = pd.DataFrame({"x": np.arange(101.0)}, index=pd.bdate_range("2015-01-01", periods=101))
    >>> w = winsorize_frame(s)
    >>> float(w["x"].min()), float(w["x"].max())
    (1.0, 99.0)
    """
    if df.empty:
        return df.copy()
    lo, hi = _winsor_bounds(df, start)
    return df.clip(lower=lo, upper=hi, axis=1)


def _own_tables(px: pd.DataFrame, classes: tuple[str, ...], flags: PaperFidelity) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Own-calendar (prices, returns) on the union of raw dates, after the log/winsor flags."""
    rets = {}
    for t, c in zip(px.columns, classes):
        s = px[t].dropna()
        if flags.log_returns_equities and c == "equities":
            r = np.log(s / s.shift(1))
        else:
            r = s / s.shift(1) - 1.0
        rets[t] = r
    own_r = pd.DataFrame(rets).reindex(px.index)[list(px.columns)]
    own_p = px.copy()
    if flags.winsorize:
        noncash = [t for t, c in zip(px.columns, classes) if c != "cash"]
        own_p[noncash] = winsorize_frame(own_p[noncash], flags.winsor_start)
        own_r[noncash] = winsorize_frame(own_r[noncash], flags.winsor_start)
    return own_p, own_r


def _asof_within(own: pd.DataFrame, dates: pd.DatetimeIndex, days: int) -> np.ndarray:
    """Value at each date = the asset's last finite own value dated in ``[t − days, t]``, else NaN."""
    out = np.full((len(dates), own.shape[1]), np.nan)
    d64 = dates.as_unit("ns").asi8
    for j, col in enumerate(own.columns):
        s = own[col].dropna()
        if s.empty:
            continue
        idx = s.index.as_unit("ns").asi8
        pos = np.searchsorted(idx, d64, side="right") - 1
        ok = pos >= 0
        ok[ok] &= (d64[ok] - idx[pos[ok]]) <= np.int64(days) * 86_400_000_000_000
        out[ok, j] = s.to_numpy(dtype=float)[pos[ok]]
    return out


def _macro_on(dates: pd.DatetimeIndex, macro: pd.DataFrame | None, vix: pd.Series, flags: PaperFidelity) -> np.ndarray:
    """§1.4 macro vector on ``dates`` (lags applied); winsorised keys clipped first (paper flag)."""
    mac = None if macro is None else clean_index(macro, "macro").apply(pd.to_numeric, errors="coerce")
    out = np.full((len(dates), len(MACRO_KEYS)), np.nan)
    for j, src in enumerate(MACRO_SOURCES):
        if src.series == VIX_TICKER:
            raw = vix.dropna()
        elif mac is not None and src.series in mac.columns:
            raw = mac[src.series].astype(float).dropna()
        else:
            continue
        if flags.winsorize and src.key in WINSORISED_MACRO_KEYS and len(raw):
            raw = winsorize_frame(raw.to_frame(), flags.winsor_start).iloc[:, 0]
        out[:, j] = lagged_asof(macro_observations(raw, src.transform), src.lag_days, dates)
    return out


def build_paper_data(flags: PaperFidelity, raw: dict | None = None, stocks: pd.DataFrame | None = None,
                     tickers: Sequence[str] | None = None) -> PaperPortBenchData:
    """Build the market data of a paper-mode flag set from raw tables (spec Appendix A).

    Parameters
    ----------
    flags : PaperFidelity
        Only ``universe``, ``log_returns_equities``, ``winsorize``, ``weekday_calendar`` and
        ``winsor_start`` matter here.
    raw : dict, optional
        :func:`load_portbench_raw` output (``prices`` wide raw table on the mixed calendar,
        ``assets`` with ``class_label``, ``macro``); default: the bundled data.
    stocks : pandas.DataFrame, optional
        Raw closes of the §11.1 stocks (default: the bundled ``portbench_paper`` stocks); only
        read for ``universe="89_no_crypto"``.
    tickers : sequence of str, optional
        A custom universe (in this order) instead of ``flags.universe``'s; classes come from
        ``raw["assets"]`` (``class_label`` or ``asset_class``), ``^VIX`` is an equity. For small
        hand-made panels (tests, user data).

    Returns
    -------
    PaperPortBenchData
        ``dates`` = Mon–Fri (``weekday_calendar``) or NYSE days; ``returns`` = the day-loop returns;
        own-calendar tables for the snapshot windows.

    Raises
    ------
    ValueError
        If a universe ticker has no prices or no class.
    """
    raw = load_portbench_raw() if raw is None else raw
    prices = clean_index(raw["prices"], "prices").apply(pd.to_numeric, errors="coerce").astype(float)
    prices.columns = [str(c) for c in prices.columns]
    if tickers is None:
        tickers, classes = paper_universe(flags.universe)
    else:
        a = raw["assets"]
        col = "class_label" if "class_label" in a.columns else "asset_class"
        cmap = {str(t): to_class_label(c) for t, c in zip(a["ticker"], a[col])}
        cmap[VIX_TICKER] = "equities"
        missing_cls = [t for t in tickers if t not in cmap]
        if missing_cls:
            raise ValueError(f"no asset class for {missing_cls}")
        tickers = tuple(str(t) for t in tickers)
        classes = tuple(cmap[t] for t in tickers)
    if flags.universe == "89_no_crypto":
        st = load_paper_stocks() if stocks is None else stocks
        st = clean_index(st, "stocks").astype(float)
        extra = [t for t in st.columns if t not in prices.columns]
        prices = prices.join(st[extra], how="outer")
    missing = [t for t in tickers if t not in prices.columns or not prices[t].notna().any()]
    if missing:
        raise ValueError(f"paper universe {flags.universe!r}: no prices for {missing}")
    vix_raw = prices[VIX_TICKER] if VIX_TICKER in prices.columns else pd.Series(dtype=float)
    px = prices[list(tickers)]
    crypto = [t for t, c in zip(tickers, classes) if c == "cryptocurrency"]
    if not flags.weekday_calendar and crypto:
        # clean alignment (§11.7): the close of UTC day D is known on D + 1
        shifted = px[crypto].copy()
        shifted.index = shifted.index + pd.Timedelta(days=1)
        px = px.drop(columns=crypto).join(shifted, how="outer")[list(tickers)]
    own_p, own_r = _own_tables(px, classes, flags)

    if flags.weekday_calendar:
        dates = pd.bdate_range(prices.index[0], prices.index[-1], name="date")
        ret = _asof_within(own_r, dates, STALE_DAYS)
        p = _asof_within(own_p, dates, STALE_DAYS)
        real = own_p.reindex(dates).notna().to_numpy()
        cal_rule = "Mon-Fri (pandas.bdate_range); day return = last own return in [t-7, t]"
    else:
        # clean calendar and clean returns (§11.6) of every ticker; ^VIX is renamed so from_frames trades it
        alias = {t: (t if t != VIX_TICKER else "VIX_TRADED") for t in tickers}
        cls_map = {alias[t]: c for t, c in zip(tickers, classes)}
        frame = prices[list(tickers)].rename(columns=alias)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PortBenchDataWarning)
            clean = PortBenchData.from_frames(frame, cls_map, tickers=[alias[t] for t in tickers], vix=vix_raw)
        pos = {t: i for i, t in enumerate(clean.tickers)}
        cols = [pos[alias[t]] for t in tickers]
        dates = clean.dates
        ret = np.array(clean.returns)[:, cols]
        p = np.array(clean.prices)[:, cols]
        real = np.array(clean.real_price)[:, cols]
        eq = np.array([c == "equities" for c in classes])
        if flags.log_returns_equities:
            with np.errstate(invalid="ignore", divide="ignore"):
                ret[:, eq] = np.log1p(ret[:, eq])
        if flags.winsorize:
            noncash = np.array([c != "cash" for c in classes])
            rdf = pd.DataFrame(ret[:, noncash], index=dates)
            ret[:, noncash] = winsorize_frame(rdf.where(real[:, noncash]), flags.winsor_start).where(
                real[:, noncash], rdf).to_numpy()
            pdf = pd.DataFrame(p[:, noncash], index=dates)
            lo, hi = _winsor_bounds(px.loc[:, noncash], flags.winsor_start)  # raw own prices
            p[:, noncash] = pdf.clip(lower=lo.to_numpy(), upper=hi.to_numpy(), axis=1).to_numpy()
        cal_rule = clean.meta.get("calendar", "days with a SPY price")
    vix_arr = vix_raw.reindex(dates).to_numpy(dtype=float) if len(vix_raw) else np.full(len(dates), np.nan)
    macro_arr = _macro_on(dates, raw.get("macro"), vix_raw, flags)
    meta = {"source": "paper-mode build (quantgym.envs.portbench.paper.data)", "calendar": cal_rule,
            "paper_flags": flags.to_dict(), "provenance": raw.get("provenance", {})}
    return PaperPortBenchData(
        dates=pd.DatetimeIndex(dates, name="date"), tickers=tuple(tickers), asset_class=tuple(classes),
        prices=read_only_array(p.astype(float)), returns=read_only_array(ret.astype(float)),
        real_price=read_only_array(real.astype(bool)), macro=read_only_array(macro_arr), vix=read_only_array(vix_arr), meta=meta,
        own_dates=pd.DatetimeIndex(own_r.index), own_returns=read_only_array(own_r.to_numpy(dtype=float)),
        own_prices=read_only_array(own_p.to_numpy(dtype=float)), flags=flags,
    )


def _data_key(flags: PaperFidelity) -> PaperFidelity:
    """The part of the flags the data depend on (others reset to clean) -- the cache key."""
    return PaperFidelity(universe=flags.universe, log_returns_equities=flags.log_returns_equities,
                         winsorize=flags.winsorize, weekday_calendar=flags.weekday_calendar,
                         winsor_start=flags.winsor_start)


@functools.lru_cache(maxsize=16)
def _cached(key: PaperFidelity) -> PaperPortBenchData:
    return build_paper_data(key)


def load_paper_data(flags: PaperFidelity) -> PaperPortBenchData:
    """:func:`build_paper_data` on the bundled data, cached per data-relevant flag set."""
    return _cached(_data_key(flags))


__all__ = ["PaperPortBenchData", "build_paper_data", "load_paper_data", "paper_universe", "winsorize_frame",
           "load_paper_stocks", "WINSORISED_MACRO_KEYS"]
