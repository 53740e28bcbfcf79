"""PortBench universe and macro keys, with their per-series rules (spec ``portbench.md`` §1.1, §1.2, §1.4, §11.8).

* §1.1/§1.2 -- the six asset classes and the 80-instrument clean-mode universe
  in canonical order (``ASSET_CLASSES``, ``UNIVERSE``, ``CANONICAL_TICKERS``);
* §11.8 -- mapping of the data's class labels to §1.1's (``CLASS_LABEL_MAP``);
* §1.4 -- the 17 macro keys (``MACRO_SOURCES``, ``MACRO_KEYS``) with their publication lags,
  transforms and plateau collapse (:func:`macro_observations`, :func:`lagged_asof`).

The loader (:mod:`quantgym.envs.portbench.data`) applies these rules to the raw tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ASSET_CLASSES",
    "UNIVERSE",
    "CANONICAL_TICKERS",
    "MACRO_KEYS",
    "MACRO_SOURCES",
    "FRED_IDS",
    "CLASS_LABEL_MAP",
    "VIX_TICKER",
    "CRYPTO_CLOSE_OPTIONS",
    "MacroSource",
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


def to_class_label(label: str) -> str:
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


def order_tickers(tickers: Sequence[str], classes: Mapping[str, str]) -> tuple[str, ...]:
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
