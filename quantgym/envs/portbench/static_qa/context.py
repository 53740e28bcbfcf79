"""Point-in-time QA contexts, splits and candidate-date order (spec §9.1).

A :class:`QAContext` for decision date ``d`` exposes, per question asset, the prices and returns of
the trading rows dated in ``[d - 1 - 90 days, d - 1]`` (last 60 rows), the macro vector and the
§1.9 regime at ``d - 1``. Nothing dated ``>= d`` enters a context (checked in
:meth:`QAContext.validate_pit`); only :meth:`QAData.future_prices` (T1 ground truth) reads rows
``>= d`` and its output never reaches a prompt.
"""

from __future__ import annotations

import datetime as _dt
import random
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import ASSET_CLASSES, MACRO_KEYS
from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.availability import market_regime
from quantgym.envs.portbench.market import check_regime_ticker
from quantgym.envs.portbench.static_qa.config import QAConfig

SPLIT_NAMES: tuple[str, ...] = ("train", "val", "test")


def _year_end(d: _dt.date) -> _dt.date:
    return _dt.date(d.year, 12, 31)


def compute_splits(data: PortBenchData, config: QAConfig) -> tuple[tuple[str, _dt.date, _dt.date], ...]:
    """The train/val/test windows (spec §9.1).

    Rule: from the span ``[start, end]`` (``start`` = ``max(config.data_start, first data date)``,
    ``end`` = last data date), train ends at the year end of ``start + 70 %`` of the span, val at
    the year end of ``start + 85 %``, test runs to ``end`` (the repo's ``QAConfig.from_date_range``).
    On the bundle: train 2015-01-01..2022-12-31, val 2023-01-01..2024-12-31, test 2025-01-01..2025-12-31.

    Returns
    -------
    tuple of (name, start, end) with :class:`datetime.date` bounds (inclusive).
    """
    if config.splits is not None:
        return tuple((str(n), pd.Timestamp(s).date(), pd.Timestamp(e).date()) for n, s, e in config.splits)
    first = data.dates[0].date()
    start = first if config.data_start is None else max(pd.Timestamp(config.data_start).date(), first)
    end = data.dates[-1].date()
    total = (end - start).days
    if total < 3 * 365:
        raise ValueError(f"QA splits need at least 3 years of data; got {start}..{end}")
    tr_raw = start + _dt.timedelta(days=int(total * config.train_frac))
    va_raw = start + _dt.timedelta(days=int(total * (config.train_frac + config.val_frac)))
    tr_end, va_end = _year_end(tr_raw), _year_end(va_raw)
    return (
        ("train", start, tr_end),
        ("val", tr_end + _dt.timedelta(days=1), va_end),
        ("test", va_end + _dt.timedelta(days=1), end),
    )


def candidate_order(data: PortBenchData, config: QAConfig) -> list[tuple[_dt.date, str]]:
    """§9.1 candidate decision dates in generation order.

    Weekdays (Mon–Fri) of each split; the paper puts dates with SPY or BTC text first, but the
    bundle has no text (§11.8), so each split is a single bucket; each bucket is shuffled with
    ``random.Random(config.shuffle_seed + split_index)``; the splits are interleaved round-robin
    (train, val, test, train, ...), a split that runs out is skipped.

    Returns
    -------
    list of (date, split name)
    """
    buckets = []
    for k, (name, s, e) in enumerate(compute_splits(data, config)):
        days = [ts.date() for ts in pd.bdate_range(s, e)]
        random.Random(config.shuffle_seed + k).shuffle(days)
        buckets.append((name, days))
    out: list[tuple[_dt.date, str]] = []
    longest = max((len(b) for _, b in buckets), default=0)
    for i in range(longest):
        for name, days in buckets:
            if i < len(days):
                out.append((days[i], name))
    return out


class QAData:
    """Read-only arrays of a :class:`PortBenchData` prepared for QA contexts (one per data object)."""

    def __init__(self, data: PortBenchData, config: QAConfig):
        self.data = data
        self.config = config
        self.dates64 = pd.DatetimeIndex(data.dates).as_unit("ns").asi8
        self.prices = np.asarray(data.prices, dtype=np.float64)
        self.returns = np.asarray(data.returns, dtype=np.float64)
        self.macro = np.asarray(data.macro, dtype=np.float64)
        self.tickers = tuple(data.tickers)
        self.index = {t: i for i, t in enumerate(self.tickers)}
        self.pools: dict[str, tuple[str, ...]] = {
            c: tuple(t for t, k in zip(data.tickers, data.asset_class) if k == c) for c in ASSET_CLASSES
        }
        # §1.9: the regime is labelled on SPY (config.regime_ticker); a universe without it is refused
        check_regime_ticker(config.regime_ticker, self.tickers, data.asset_class, config_name="QAConfig")
        self.regime_ticker = config.regime_ticker
        self._regime_cache: dict[int, str] = {}

    # -- rows ----------------------------------------------------------------------------------
    @staticmethod
    def _ns(d: _dt.date) -> int:
        return pd.Timestamp(d).as_unit("ns").value

    def window_rows(self, d: _dt.date) -> tuple[int, int]:
        """Rows ``[lo, hi)`` dated in ``[d - 1 - window_days, d - 1]``, at most ``lookback`` of them."""
        hi = int(np.searchsorted(self.dates64, self._ns(d), side="left"))
        first = self._ns(d - _dt.timedelta(days=1 + self.config.window_days))
        lo = max(int(np.searchsorted(self.dates64, first, side="left")), hi - self.config.lookback)
        return lo, hi

    def regime_at_row(self, t: int) -> str:
        """§1.9 regime at trading row ``t`` (``sideways`` without an equity to measure it on)."""
        if t < 0 or self.regime_ticker is None:
            return "sideways"
        r = self._regime_cache.get(t)
        if r is None:
            r = market_regime(self.data, t, self.regime_ticker)
            self._regime_cache[t] = r
        return r

    def future_prices(self, ticker: str, d: _dt.date) -> np.ndarray:
        """Finite prices of ``ticker`` on rows dated in ``[d, d + horizon_days]`` (T1 truth only, §9.2)."""
        j = self.index[ticker]
        lo = int(np.searchsorted(self.dates64, self._ns(d), side="left"))
        end = self._ns(d + _dt.timedelta(days=self.config.horizon_days))
        hi = int(np.searchsorted(self.dates64, end, side="right"))
        p = self.prices[lo:hi, j]
        return p[np.isfinite(p)]

    def context(self, d: _dt.date) -> "QAContext":
        """The §9.1 context of decision date ``d``."""
        lo, hi = self.window_rows(d)
        t_prev = hi - 1  # last trading row <= d - 1
        macro = self.macro[t_prev] if t_prev >= 0 else np.full(len(MACRO_KEYS), np.nan)
        return QAContext(self, d, lo, hi, self.regime_at_row(t_prev), macro)


@dataclass
class QAContext:
    """Point-in-time context of one decision date (spec §9.1).

    Attributes
    ----------
    qd : QAData
    decision_date : datetime.date
    lo, hi : int
        Context rows ``[lo, hi)`` (all dated ``<= d - 1``).
    regime : str
        §1.9 label at ``d - 1``.
    macro : numpy.ndarray, shape (17,)
        §1.4 values at the last trading day ``<= d - 1`` (NaN = missing).
    """

    qd: QAData
    decision_date: _dt.date
    lo: int
    hi: int
    regime: str
    macro: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def n_rows(self) -> int:
        return self.hi - self.lo

    def dates(self) -> pd.DatetimeIndex:
        """Dates of the context rows."""
        return pd.DatetimeIndex(self.qd.data.dates[self.lo:self.hi])

    def price_rows(self, ticker: str) -> np.ndarray:
        """Prices of ``ticker`` on the context rows (NaN = no price), shape (n_rows,)."""
        return self.qd.prices[self.lo:self.hi, self.qd.index[ticker]]

    def return_rows(self, ticker: str) -> np.ndarray:
        """Returns of ``ticker`` on the context rows (NaN = none), shape (n_rows,)."""
        return self.qd.returns[self.lo:self.hi, self.qd.index[ticker]]

    def prices(self, ticker: str) -> np.ndarray:
        """Finite context prices of ``ticker``, oldest first."""
        p = self.price_rows(ticker)
        return p[np.isfinite(p)]

    def returns(self, ticker: str) -> np.ndarray:
        """Finite context returns of ``ticker``, oldest first."""
        r = self.return_rows(ticker)
        return r[np.isfinite(r)]

    def has_prices(self, tickers) -> bool:
        """§9.1: every question asset has at least ``min_prices`` context prices."""
        need = self.qd.config.min_prices
        return all(t in self.qd.index and np.isfinite(self.price_rows(t)).sum() >= need for t in tickers)

    def macro_dict(self) -> dict[str, float]:
        """Macro values by §1.4 key; missing keys (e.g. ``ted_spread``, absent from the bundle) omitted."""
        return {k: float(v) for k, v in zip(MACRO_KEYS, self.macro) if np.isfinite(v)}

    def validate_pit(self) -> None:
        """Raise ``ValueError`` if a context row is dated on or after the decision date (§9.1)."""
        if self.n_rows and self.qd.dates64[self.hi - 1] >= self.qd._ns(self.decision_date):
            raise ValueError(f"point-in-time violation: context row dated >= {self.decision_date}")
