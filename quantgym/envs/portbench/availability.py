"""PortBench availability and market-regime rules (spec ``portbench.md`` §11.6, §1.9).

* §11.6 -- the availability set ``A_d`` (a price at ``d`` and >= 20 valid returns in the
  60-row window): :func:`available_mask` for one row, :func:`availability_matrix` for all rows;
* §1.9 -- the SPY-based market regime label (:func:`market_regime`, labels :data:`REGIME_LABELS`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from quantgym.envs.portbench.data import PortBenchData

__all__ = ["REGIME_LABELS", "available_mask", "availability_matrix", "market_regime"]

#: §1.9 regime labels, in the order of the observation's ``regime`` Discrete(4).
REGIME_LABELS: tuple[str, ...] = ("bull", "bear", "sideways", "crisis")


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


def market_regime(data: PortBenchData, t_index: int, ticker: str = "SPY", days: int = 126) -> str:
    """§1.9 market regime label at trading-day row ``t_index``.

    ``g = P(last <= d) / P(first >= d - days calendar days) - 1`` on ``ticker``'s prices (``days`` =
    ``PortBenchConfig.regime_days``, 126);
    ``crisis`` if ``g < -0.20``, ``bear`` if ``g < -0.05``, ``bull`` if ``g > 0.10``,
    else ``sideways``. Returns ``"sideways"`` if no price is available (g undefined).
    """
    j = data.ticker_index.get(ticker)
    if j is None:
        raise ValueError(f"{ticker} is not in the universe; the §1.9 regime needs it")
    t = int(t_index) % data.n_dates
    px = data.prices[: t + 1, j]
    d = data.dates[t]
    if int(days) < 1:
        raise ValueError(f"regime_days must be >= 1, got {days!r}")
    lo = int(data.dates.searchsorted(d - pd.Timedelta(days=int(days)), side="left"))
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
