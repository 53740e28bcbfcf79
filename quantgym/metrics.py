"""Financial metrics shared by every task.

All functions take daily simple returns ``r`` (1-D array, decimals, one per
trading day after the start) unless stated. Conventions follow
spec portbench §7.1 (docs/spec/portbench.md; the paper's and its code's): 252 trading days,
risk-free 4 % annual constant subtracted from the *arithmetic* annualised mean,
sample standard deviation (ddof = 1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

TRADING_DAYS = 252
RISK_FREE = 0.04


def _arr(r: Any) -> np.ndarray:
    a = np.asarray(r, dtype=np.float64).ravel()
    return a


def total_return(r: Any) -> float:
    """``Π(1 + r_t) − 1`` (decimal; spec portbench §7.1)."""
    a = _arr(r)
    return float(np.prod(1.0 + a) - 1.0) if a.size else 0.0


def cagr(r: Any, periods_per_year: int = TRADING_DAYS) -> float:
    """``(Π(1 + r_t))^{252/N} − 1``; ``−1`` if the product ≤ 0; ``0`` if ``N < 2`` (PortBench §7.1)."""
    a = _arr(r)
    if a.size < 2:
        return 0.0
    g = float(np.prod(1.0 + a))
    if g <= 0:
        return -1.0
    return g ** (periods_per_year / a.size) - 1.0


def volatility(r: Any, periods_per_year: int = TRADING_DAYS) -> float:
    """Annualised volatility ``std(r)·√252`` (ddof 1); 0 if ``N < 2``."""
    a = _arr(r)
    if a.size < 2:
        return 0.0
    return float(np.std(a, ddof=1) * math.sqrt(periods_per_year))


def sharpe(r: Any, rf: float = RISK_FREE, periods_per_year: int = TRADING_DAYS, *,
           finite_only: bool = False, form: str = "annual") -> float:
    """Sharpe ratio ``(mean(r)·252 − rf) / (std(r)·√252)`` (spec portbench §7.1).

    Arithmetic daily mean, annual risk-free ``rf`` (default 4 %), ddof 1.
    Returns 0 if ``N < 2`` or the volatility is zero.

    Parameters
    ----------
    r : array-like (N,)
        Per-period values (daily returns, decimals; or a daily signal series such as RankIC).
    rf : float
        Annual risk-free rate subtracted from the annualised mean (``form="annual"`` only).
    periods_per_year : int
        252 (PortBench), 242 (Quant-Arena's A-share calendar).
    finite_only : bool
        Drop NaN/inf values first (Quant-Arena's signal series: long-short spread, RankIC).
    form : {"annual", "ratio"}
        ``"annual"``: ``(mean·n − rf) / (std·√n)``, 0 unless that volatility is finite and non-zero
        (PortBench §7.1, Quant-Arena SR_L). ``"ratio"``: ``mean / std · √n``, 0 unless ``std > 0``
        (Quant-Arena §10.11 signal Sharpe and information ratio). Equal in exact arithmetic; they
        round differently in the last bit, so each task keeps its own (numbers stay bit-identical).

    Raises
    ------
    ValueError
        ``form="ratio"`` with a non-zero ``rf``, or an unknown ``form``.

    Examples
    --------
    >>> round(sharpe([0.01, -0.005, 0.002, 0.003]), 4)
    6.0558
    """
    a = _arr(r)
    if finite_only:
        a = a[np.isfinite(a)]
    if form == "ratio":
        if rf:
            raise ValueError(f"sharpe(form='ratio') takes no risk-free rate, got rf={rf!r}")
        if a.size < 2:
            return 0.0
        sd = float(np.std(a, ddof=1))
        return float(a.mean() / sd * math.sqrt(periods_per_year)) if sd > 0 else 0.0
    if form != "annual":
        raise ValueError(f"sharpe: unknown form {form!r} (use 'annual' or 'ratio')")
    vol = volatility(a, periods_per_year)
    if a.size < 2 or vol == 0.0 or not np.isfinite(vol):
        return 0.0
    return float((a.mean() * periods_per_year - rf) / vol)


def sortino(r: Any, rf: float = RISK_FREE, periods_per_year: int = TRADING_DAYS) -> float:
    """Sortino: Sharpe's numerator over ``std(r[r<0])·√252`` (ddof 1; PortBench §7.1).

    ``+inf`` with no negative day, ``NaN`` with exactly one, 0 if that std is 0.
    """
    a = _arr(r)
    if a.size < 2:
        return 0.0
    neg = a[a < 0]
    if neg.size == 0:
        return math.inf
    if neg.size == 1:
        return math.nan
    dd = float(np.std(neg, ddof=1) * math.sqrt(periods_per_year))
    if dd == 0.0:
        return 0.0
    return float((a.mean() * periods_per_year - rf) / dd)


def drawdown_path(r: Any, include_start: bool = True) -> np.ndarray:
    """Drawdown series ``P_k / max_{j≤k} P_j − 1`` of the compounded path.

    ``include_start=True`` prepends ``P_0 = 1`` (clean mode: the starting NAV is a
    peak); ``False`` starts the path at the first return (paper mode).
    """
    a = _arr(r)
    path = np.cumprod(1.0 + a)
    if include_start:
        path = np.concatenate([[1.0], path])
    if path.size == 0:
        return path
    peak = np.maximum.accumulate(path)
    return path / peak - 1.0


def max_drawdown(r: Any, include_start: bool = True) -> float:
    """Maximum drawdown, a number ≤ 0 (spec portbench §7.1).

    Examples
    --------
    >>> round(max_drawdown([0.10, -0.20, 0.05]), 6)
    -0.2
    >>> max_drawdown([-0.05, 0.01], include_start=False)
    0.0
    """
    dd = drawdown_path(r, include_start)
    return float(dd.min()) if dd.size else 0.0


def calmar(r: Any, include_start: bool = True) -> float:
    """``CAGR / |MDD|`` (0 if ``MDD = 0``)."""
    mdd = max_drawdown(r, include_start)
    return 0.0 if mdd == 0 else cagr(r) / abs(mdd)


def quantile_linear(a: np.ndarray, q: float) -> float:
    """``np.quantile(a, q)`` (method ``"linear"``, Hyndman & Fan type 7) of a 1-D float array, as a float.

    The same float as numpy's, computed the way numpy 1.22+ does (one partition with numpy's own
    ``kth`` set, then its two-sided interpolation) without its per-call overhead (speed only: the S5
    VaR is taken twice per PortBench decision). Falls back to ``np.quantile`` for
    fewer than 2 values, non-finite values and ``q`` outside ``[0, 1)``; tests compare the two on
    random, tied and signed-zero samples.

    Examples
    --------
    >>> quantile_linear(np.array([0.3, -0.1, 0.2, 0.0]), 0.05)
    -0.085
    """
    n = a.size
    vi = (n - 1) * q
    lo = math.floor(vi) if 0.0 <= q < 1.0 else -1
    if not 0 <= lo < n - 1 or a.ndim != 1 or not np.isfinite(a).all():
        return float(np.quantile(a, q))
    part = np.partition(a, np.unique(np.array([0, -1, lo, lo + 1])))
    x0, x1 = float(part[lo]), float(part[lo + 1])
    t = vi - lo
    diff = x1 - x0
    return x1 - diff * (1 - t) if t >= 0.5 else x0 + diff * t


def historical_var(r: Any, confidence: float = 0.95) -> float:
    """Historical VaR ``q_{1−c}(r)`` (a return, usually negative; numpy linear quantile,
    :func:`quantile_linear`)."""
    a = _arr(r)
    return quantile_linear(a, 1.0 - confidence) if a.size else 0.0


def historical_cvar(r: Any, confidence: float = 0.95) -> float:
    """Mean of the returns ≤ the historical VaR."""
    a = _arr(r)
    if not a.size:
        return 0.0
    v = historical_var(a, confidence)
    return float(a[a <= v].mean())


def nav_returns(nav: Any) -> np.ndarray:
    """Daily simple returns of a NAV curve (length ``len(nav) − 1``)."""
    n = _arr(nav)
    return n[1:] / n[:-1] - 1.0


def performance_summary(r: Any, include_start: bool = True, rf: float = RISK_FREE) -> dict[str, float]:
    """All PortBench §7.1 metrics of a daily return series in one dict (decimals)."""
    return {
        "total_return": total_return(r),
        "cagr": cagr(r),
        "volatility": volatility(r),
        "sharpe": sharpe(r, rf),
        "sortino": sortino(r, rf),
        "max_drawdown": max_drawdown(r, include_start),
        "calmar": calmar(r, include_start),
        "var_95": historical_var(r),
        "cvar_95": historical_cvar(r),
        "n_days": int(_arr(r).size),
    }
