"""The simulated exchange of Quant-Arena: price limits, order-book walk, fees.

Spec quant_arena.md §10.6 (price limits), §10.8 (simulated order book and impact: σ and
ADV inputs, level spacing and depth, the walk), §10.9 (fees per order), and the
cent-rounding rule of the §10 preamble. In Qlib's split this is the *exchange*: it
knows the market's rules and prices one order; the cash account
(:mod:`~quantgym.envs.quant_arena.account`) decides the orders, sizes them in lots of
``ExecutionModel.lot`` shares and books cash and positions.

Everything here is host-side and deterministic; agent code never reaches it.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import ArenaCostModel, ImpactModel

if TYPE_CHECKING:
    from .data import ArenaDataset

_CHINEXT_20PCT_FROM = np.datetime64("2020-08-24")
_MAIN_REGISTRATION_FROM = np.datetime64("2023-04-10")


def r2(x: Any) -> Any:
    """Round half up to the cent: ``floor(x*100 + 0.5 + 1e-9)/100`` (spec §10 preamble)."""
    return np.floor(np.asarray(x, dtype=np.float64) * 100.0 + 0.5 + 1e-9) / 100.0


# ---------------------------------------------------------------------- price limits and book inputs
def price_limits(ds: ArenaDataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Daily price limits and base prices (spec §10.6).

    Returns
    -------
    up, down, base : ndarray (T, N) float64, CNY
        ``base_d = r2(close_{d-1}·f_{d-1}/f_d)`` (previous row of the stock); with
        ``m = round(base·100)`` and rate ``p`` %: ``up = (m(100+p)+50)//100`` cents,
        ``down = (m(100−p)+50)//100``. NaN on limit-free days (first listing day;
        first 5 rows of STAR, ChiNext listed ≥ 2020-08-24, main board listed
        ≥ 2023-04-10) and where there is no previous row. ``base`` is NaN only
        without a previous row.
    """
    if "limits" in ds._cache:
        return ds._cache["limits"]
    T, N = ds.T, ds.N
    c_ff, f_ff = ds.ffill("close"), ds.ffill("adj_factor")
    prev_c = np.vstack([np.full((1, N), np.nan), c_ff[:-1]])
    prev_f = np.vstack([np.full((1, N), np.nan), f_ff[:-1]])
    with np.errstate(invalid="ignore"):
        base = np.where(ds.has_row, r2(prev_c * prev_f / ds.fields["adj_factor"]), np.nan)
    board = ds.info["board"].to_numpy()
    dcol = ds.dates[:, None]
    p = np.full((T, N), 10.0)
    p[:, board == "star"] = 20.0
    p[:, board == "bse"] = 30.0
    chi = board == "chinext"
    p[:, chi] = np.where(dcol >= _CHINEXT_20PCT_FROM, 20.0, 10.0)
    if ds.st is not None:
        p = np.where(ds.st & (board == "main")[None, :], 5.0, p)
    # limit-free first rows of a listing (counted on the stock's own rows)
    nrow = np.cumsum(ds.has_row, axis=0)  # 1 on the first row
    ld = ds.info["list_date"].to_numpy(dtype="datetime64[D]")
    first_row = np.array([ds.dates[np.argmax(ds.has_row[:, j])] if ds.has_row[:, j].any()
                          else np.datetime64("NaT") for j in range(N)], dtype="datetime64[D]")
    ld = np.where(np.isnat(ld), first_row, ld)
    is_listing = ~np.isnat(ld) & (ld >= ds.dates[0])
    free_days = np.where(is_listing, 1, 0)
    five = is_listing & ((board == "star") | (chi & (ld >= _CHINEXT_20PCT_FROM))
                         | ((board == "main") & (ld >= _MAIN_REGISTRATION_FROM)))
    free_days = np.where(five, 5, free_days)
    free = ds.has_row & (nrow <= free_days[None, :])
    with np.errstate(invalid="ignore"):
        m = np.round(base * 100.0)
        up = np.floor((m * (100.0 + p) + 50.0) / 100.0) / 100.0
        down = np.floor((m * (100.0 - p) + 50.0) / 100.0) / 100.0
    up[free] = np.nan
    down[free] = np.nan
    out = (up, down, base)
    ds._cache["limits"] = out
    return out

def book_inputs(ds: ArenaDataset, rows: np.ndarray, impact: ImpactModel) -> tuple[np.ndarray, np.ndarray]:
    """σ and ADV of the simulated book at decision rows ``rows`` (spec §10.8).

    σ = std (ddof 1) of the daily log returns of ``adj_close`` over the last
    ``vol_window`` panel days up to t on which the stock is tradable and has a
    row the day before (≥ ``vol_min_obs`` returns, else ``vol_default``);
    ADV = mean volume over the tradable days among the last ``adv_window`` days
    (0 if none).

    Returns
    -------
    sigma, adv : ndarray (len(rows), N) float64
    """
    rows = np.asarray(rows, dtype=np.int64)
    W = int(impact.vol_window)
    adjc = ds.fields["close"] * ds.fields["adj_factor"]
    tr = ds.tradable
    with np.errstate(invalid="ignore", divide="ignore"):
        lr = np.full_like(adjc, np.nan)
        lr[1:] = np.log(adjc[1:] / ds.ffill("close")[:-1] / ds.ffill("adj_factor")[:-1])
    lr_ok = tr.copy()
    lr_ok[1:] &= ds.has_row[:-1]
    lr_ok[0] = False
    lr = np.where(lr_ok & np.isfinite(lr), lr, np.nan)
    sig = np.empty((len(rows), ds.N))
    adv = np.empty((len(rows), ds.N))
    Wa = int(impact.adv_window)
    vol = np.where(tr, ds.fields["volume"], np.nan)
    for i, t in enumerate(rows):
        blk = lr[max(0, t - W + 1): t + 1]
        cnt = np.isfinite(blk).sum(axis=0)
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            s = np.nanstd(blk, axis=0, ddof=1) if blk.shape[0] > 1 else np.full(ds.N, np.nan)
        s = np.where((cnt >= impact.vol_min_obs) & np.isfinite(s) & (s > 0), s, impact.vol_default)
        sig[i] = s
        vb = vol[max(0, t - Wa + 1): t + 1]
        vc = np.isfinite(vb).sum(axis=0)
        adv[i] = np.where(vc > 0, np.nansum(vb, axis=0) / np.maximum(vc, 1), 0.0)
    return sig, adv


def _r2(x: float) -> float:
    return math.floor(x * 100.0 + 0.5 + 1e-9) / 100.0


# ---------------------------------------------------------------------- book and fees
def book_params(P: float, sigma: float, adv: float, impact: ImpactModel) -> tuple[float, float]:
    """Level spacing Δ (CNY) and depth q (shares) of the simulated book (spec §10.8).

    ``Δ = 0.01·max(1, floor(k_s·σ·P/0.01 + 0.5))``;
    ``q = 100·max(1, floor(k_d·ADV·Δ/(σ·P)/100))``.

    Examples
    --------
    >>> book_params(37.85, 0.025, 4_000_000, ImpactModel())   # §10.16 A
    (0.01, 800.0)
    """
    tick = impact.tick
    delta = tick * max(1, math.floor(impact.k_spacing * sigma * P / tick + 0.5))
    q = 100.0 * max(1, math.floor(impact.k_depth * adv * delta / (sigma * P) / 100.0))
    return round(delta, 10), q


def walk_book(side: int, qty: float, P: float, sigma: float, adv: float, limit: float,
              impact: ImpactModel) -> tuple[float, float]:
    """Walk the simulated book for one order (spec §10.8).

    Parameters
    ----------
    side : +1 (buy) or −1 (sell)
    qty : float
        Shares wanted (may be fractional for a full exit).
    P : float
        Reference price = raw open of the execution day (CNY), the book's mid.
    sigma, adv : float
        Daily log-return volatility and average daily volume (shares) up to t.
    limit : float
        Up-limit (buy) or down-limit (sell) of the day in CNY; NaN = no limit.
        Levels beyond it (and sell levels below 0.01) do not exist.
    impact : ImpactModel

    Returns
    -------
    filled, value : float
        Shares filled (≤ qty; a partial fill drops the rest) and their value in CNY
        (Σ level price × size). Impact = ``value − filled·P`` (buy) or
        ``filled·P − value`` (sell).
    """
    if qty <= 0:
        return 0.0, 0.0
    if not impact.enabled:
        return qty, qty * P
    delta, q = book_params(P, sigma, adv, impact)
    L = impact.levels
    if side > 0:
        room = (limit - P) if math.isfinite(limit) else math.inf
    else:
        lo = max(limit, impact.tick) if math.isfinite(limit) else impact.tick
        room = P - lo
    if math.isfinite(room):
        # level k exists iff (k − ½)Δ ≤ room
        L = min(L, max(0, math.floor(room / delta + 0.5 + 1e-9)))
    filled = min(qty, L * q)
    j = math.floor(filled / q + 1e-12)
    rem = filled - j * q
    value = q * (j * P + side * delta * j * j / 2.0) + rem * (P + side * (j + 0.5) * delta)
    return filled, value


def order_fees(value: float, side: int, day: Any, cost: ArenaCostModel) -> tuple[float, float, float]:
    """Commission, transfer fee and stamp duty of one order (spec §10.9), CNY.

    Commission ``max(5.00, r2(0.00025·value))``; transfer ``r2(rate·value)`` (0.00002
    before 2022-04-29, 0.00001 from then); stamp ``r2(rate·value)`` on sells only
    (0.001 before 2023-08-28, 0.0005 on and after). ``day`` = execution day.

    Examples
    --------
    >>> order_fees(2956.50, -1, "2023-08-25", ArenaCostModel())  # §10.16 B
    (5.0, 0.03, 2.96)
    >>> order_fees(2956.50, -1, "2023-08-28", ArenaCostModel())
    (5.0, 0.03, 1.48)
    """
    if not cost.enabled or value <= 0:
        return 0.0, 0.0, 0.0
    comm = max(cost.commission_min, _r2(cost.commission_rate * value))
    transfer = _r2(cost.transfer_rate(day) * value)
    stamp = _r2(cost.stamp_rate(day) * value) if side < 0 else 0.0
    return comm, transfer, stamp


__all__ = ["r2", "price_limits", "book_inputs", "book_params", "walk_book", "order_fees"]
