"""A tiny hand-made PortBench panel for the QA template formula tests (synthetic, seeded, labelled)."""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pandas as pd

from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.static_qa.config import QAConfig
from quantgym.envs.portbench.static_qa.context import QAData

CLASSES = {"SPY": "equities", "TLT": "bonds", "GLD": "commodities", "VNQ": "real_estate",
           "BTC-USD": "cryptocurrency", "BIL": "cash"}
DATES = pd.bdate_range("2021-01-04", "2021-08-31")
#: decision date of the tests; context rows = business days dated 2021-03-02 .. 2021-05-31, last 60
D = _dt.date(2021, 6, 1)


def window_rows() -> np.ndarray:
    """Row positions of the §9.1 context of ``D`` (last 60 business days in [D - 91 days, D - 1])."""
    lo = DATES.searchsorted(pd.Timestamp(D) - pd.Timedelta(days=91))
    hi = DATES.searchsorted(pd.Timestamp(D))
    return np.arange(max(lo, hi - 60), hi)


def make_panel(returns: dict[str, np.ndarray]) -> PortBenchData:
    """Prices ``100·Π(1 + r)`` from per-row returns (row 0's return is ignored), SYNTHETIC test data."""
    cols = {}
    for t, r in returns.items():
        r = np.asarray(r, float).copy()
        r[0] = 0.0
        cols[t] = 100.0 * np.cumprod(1.0 + r)
    prices = pd.DataFrame(cols, index=DATES)
    return PortBenchData.from_frames(prices, {t: CLASSES[t] for t in returns}, crypto_close="same_day",
                                     meta={"source": "synthetic test panel"})


def alternating(a: float, phase: int = 0) -> np.ndarray:
    """``+a, -a, +a, ...`` on every row (``-a`` first if ``phase`` is 1)."""
    s = np.where((np.arange(len(DATES)) + phase) % 2 == 0, a, -a)
    return s.astype(float)


def context(data: PortBenchData, cfg: QAConfig | None = None):
    qd = QAData(data, cfg or QAConfig())
    return qd.context(D)
