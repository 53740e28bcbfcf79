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
from typing import TYPE_CHECKING, Any

import numpy as np

from quantgym.jit import njit

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

def book_series(ds: ArenaDataset) -> tuple[np.ndarray, np.ndarray]:
    """Daily log returns of ``adj_close`` (NaN where not counted) and tradable volume, (T, N); cached."""
    if "book_series" in ds._cache:
        return ds._cache["book_series"]
    adjc = ds.fields["close"] * ds.fields["adj_factor"]
    tr = ds.tradable
    with np.errstate(invalid="ignore", divide="ignore"):
        lr = np.full_like(adjc, np.nan)
        lr[1:] = np.log(adjc[1:] / ds.ffill("close")[:-1] / ds.ffill("adj_factor")[:-1])
    lr_ok = tr.copy()
    lr_ok[1:] &= ds.has_row[:-1]
    lr_ok[0] = False
    out = (np.where(lr_ok & np.isfinite(lr), lr, np.nan), np.where(tr, ds.fields["volume"], np.nan))
    ds._cache["book_series"] = out
    return out


# ---------------------------------------------------------------------- order-level kernels
# One order at a time, as scalars: the cash account's compiled day loop (account.py) calls these, and so do
# the spec's one-order forms below (book_params, walk_book, order_fees) and book_inputs. They are compiled
# with quantgym.jit (QUANTGYM_JIT=0 runs them interpreted, same numbers). No numpy reductions: every sum
# is an explicit loop in the written order; np.floor (not math.floor, which is an int and fails on NaN);
# divisions that can meet a zero are guarded (interpreted Python would raise where numpy gives inf/NaN).
@njit
def nan_maximum(a: float, b: float) -> float:
    """``np.maximum`` of two floats (NaN if either is NaN; ``a`` on a tie)."""
    if a != a or a >= b:
        return a
    return b


@njit
def nan_minimum(a: float, b: float) -> float:
    """``np.minimum`` of two floats (NaN if either is NaN; ``a`` on a tie)."""
    if a != a or a <= b:
        return a
    return b


@njit
def _r2s(x: float) -> float:
    """:func:`r2` of one float (the same operations, so the same bits)."""
    return np.floor(x * 100.0 + 0.5 + 1e-9) / 100.0


@njit
def _round10(x: float) -> float:
    """Python's ``round(x, 10)`` (correctly rounded, ties to even) for ``0 ≤ x < 2**52/1e10``.

    ``x·10¹⁰`` is split exactly into ``p + e`` (Dekker's product; 10¹⁰ has 24 significant bits), the
    integer nearest to it is found from the fraction of ``p`` and the sign of ``e``, and the IEEE
    quotient ``z/10¹⁰`` is the double nearest to the decimal, as CPython's rounding returns.
    """
    p = x * 1e10
    if not p < 4503599627370496.0:  # 2**52 (and NaN): no tick is that wide; keep x
        return x
    c = 134217729.0 * x  # Veltkamp split of x (1e10 needs none)
    xh = c - (c - x)
    xl = x - xh
    e = (xh * 1e10 - p) + xl * 1e10  # x·1e10 = p + e exactly
    z = np.floor(p)
    fr = p - z  # exact
    # fr is a multiple of ulp(p) and |e| ≤ ulp(p)/2: only fr = ½ needs e to decide (and ties go to even)
    if fr > 0.5 or (fr == 0.5 and (e > 0.0 or (e == 0.0 and z % 2.0 == 1.0))):
        z += 1.0
    return z / 1e10


@njit
def _window_sums(x: np.ndarray, t: int, w: int, tot: np.ndarray, cnt: np.ndarray) -> None:
    """Per column of ``x`` (T, M), the sum (NaN as 0.0, from the oldest row on, as numpy's nansum over the
    window) and count of the non-NaN values of rows ``t−w+1 .. t`` into ``tot``, ``cnt`` (M,); rows before 0
    count as missing."""
    M = x.shape[1]
    if w < 1:
        tot[:] = 0.0
        cnt[:] = 0
    for r in range(t - w + 1, t + 1):
        first = r == t - w + 1
        for j in range(M):
            v = x[r, j] if r >= 0 else np.nan
            if v == v:
                c = 1
            else:
                c = 0
                v = 0.0
            if first:
                tot[j] = v
                cnt[j] = c
            else:
                tot[j] = tot[j] + v
                cnt[j] = cnt[j] + c


@njit
def sigma_adv_rows(lr: np.ndarray, vol: np.ndarray, t0: int, n: int, W: int, min_obs: int, vol_default: float,
                   Wa: int) -> np.ndarray:
    """σ and ADV of every column of ``lr``, ``vol`` (T, M) (:func:`book_series`) at decision rows
    ``t0 .. t0+n−1`` (spec §10.8): (n, M, 2), ``[k, j]`` = (σ, ADV) at row ``t0 + k``.

    σ: ``np.nanstd(ddof=1)`` of ``lr[t−W+1 .. t]`` in numpy's own steps (sum from the oldest row, mean,
    squared deviations summed from the oldest row), if at least ``min_obs`` values and positive, else
    ``vol_default``; rows before 0 count as missing. ADV: the non-NaN mean of ``vol[t−Wa+1 .. t]`` (0 if
    none). Each cell's operations are the same and in the same order whatever the columns around it; the
    columns are the inner loop.
    """
    M = lr.shape[1]
    out = np.empty((n, M, 2))
    tot = np.empty(M)
    cnt = np.empty(M, dtype=np.int64)
    tot_v = np.empty(M)
    cnt_v = np.empty(M, dtype=np.int64)
    avg = np.empty(M)
    ss = np.zeros(M)
    for k in range(n):
        t = t0 + k
        _window_sums(lr, t, W, tot, cnt)
        _window_sums(vol, t, Wa, tot_v, cnt_v)
        spread = min(t + 1, W) > 1
        if spread:
            for j in range(M):
                avg[j] = tot[j] / cnt[j] if cnt[j] > 0 else 0.0
            for r in range(t - W + 1, t + 1):
                first = r == t - W + 1
                for j in range(M):
                    x = lr[r, j] if r >= 0 else np.nan
                    dv = 0.0
                    if x == x:
                        dv = x - avg[j]
                        dv *= dv
                    ss[j] = dv if first else ss[j] + dv
        for j in range(M):
            sd = np.nan
            if spread and cnt[j] > 1:
                sd = math.sqrt(ss[j] / (cnt[j] - 1))
            out[k, j, 0] = sd if (cnt[j] >= min_obs and math.isfinite(sd) and sd > 0) else vol_default
            out[k, j, 1] = tot_v[j] / cnt_v[j] if cnt_v[j] > 0 else 0.0
    return out


@njit
def sigma_adv_kernel(lr: np.ndarray, vol: np.ndarray, t: int, j: int, W: int, min_obs: int, vol_default: float,
                     Wa: int) -> tuple[float, float]:
    """σ and ADV of column ``j`` of ``lr``, ``vol`` (T, N) at decision row ``t`` (spec §10.8;
    :func:`book_inputs` of one cell): :func:`sigma_adv_rows` of that column and row."""
    c = sigma_adv_rows(lr[:, j:j + 1], vol[:, j:j + 1], t, 1, W, min_obs, vol_default, Wa)
    return c[0, 0, 0], c[0, 0, 1]


@njit
def _book_inputs_kernel(lr: np.ndarray, vol: np.ndarray, rows: np.ndarray, W: int, min_obs: int,
                        vol_default: float, Wa: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sigma_adv_rows` of every row of ``rows``: two (len(rows), M) arrays."""
    M = lr.shape[1]
    sig = np.empty((rows.size, M))
    adv = np.empty((rows.size, M))
    for a in range(rows.size):
        c = sigma_adv_rows(lr, vol, rows[a], 1, W, min_obs, vol_default, Wa)
        for b in range(M):
            sig[a, b], adv[a, b] = c[0, b, 0], c[0, b, 1]
    return sig, adv


@njit
def _book_params(P: float, sigma: float, adv: float, k_s: float, k_d: float, tick: float) -> tuple[float, float]:
    """:func:`book_params`: Δ (CNY, ``round(tick·ticks, 10)``) and q (shares) of one book."""
    ticks = nan_maximum(1.0, np.floor(k_s * sigma * P / tick + 0.5))
    q = 100.0 * nan_maximum(1.0, np.floor(k_d * adv * (tick * ticks) / (sigma * P) / 100.0))
    return _round10(tick * ticks), q


@njit
def book_levels_kernel(side: int, P: float, sigma: float, adv: float, limit: float, levels: int, k_s: float,
                       k_d: float, tick: float) -> tuple[float, float, float]:
    """Spacing Δ, depth q and number of levels L of one side of one simulated book (spec §10.8).

    ``L = min(levels, floor(room/Δ + ½))``: level k exists iff (k − ½)Δ ≤ room, the distance from P to
    the limit (buy: up-limit; sell: down-limit, and sell levels below ``tick`` do not exist); NaN
    limit = none.
    """
    delta, q = _book_params(P, sigma, adv, k_s, k_d, tick)
    fin = math.isfinite(limit)
    if side > 0:
        room = limit - P if fin else np.inf
    else:
        room = P - (nan_maximum(limit, tick) if fin else tick)
    L = float(levels)
    if math.isfinite(room):
        L = nan_minimum(float(levels), nan_maximum(0.0, np.floor(room / delta + 0.5 + 1e-9)))
    return delta, q, L


@njit
def fill_kernel(side: int, qty: float, P: float, delta: float, q: float, L: float,
                impact_on: bool) -> tuple[float, float]:
    """Shares filled and their value (CNY) for an order of ``qty`` shares on a book (Δ, q, L)
    (:func:`book_levels_kernel`; ``impact_on`` False: everything fills at P). ``qty <= 0`` fills nothing."""
    if not qty > 0:
        return 0.0, 0.0
    if not impact_on:
        return qty, qty * P
    filled = nan_minimum(qty, L * q)
    j = np.floor(filled / q + 1e-12)
    rem = filled - j * q
    return filled, q * (j * P + side * delta * j * j / 2.0) + rem * (P + side * (j + 0.5) * delta)


@njit
def fees_kernel(value: float, side: int, cost_on: bool, commission_rate: float, commission_min: float,
                transfer_rate: float, stamp_rate: float) -> tuple[float, float, float]:
    """Commission, transfer fee and stamp duty (CNY) of one order of ``value`` (spec §10.9; rates of its day)."""
    if not cost_on or not value > 0:
        return 0.0, 0.0, 0.0
    comm = nan_maximum(commission_min, _r2s(commission_rate * value))
    return comm, _r2s(transfer_rate * value), (_r2s(stamp_rate * value) if side < 0 else 0.0)


def impact_args(impact: ImpactModel) -> tuple:
    """The :class:`ImpactModel` as the kernels' argument tuple:
    ``(enabled, levels, k_spacing, k_depth, tick, vol_window, vol_min_obs, vol_default, adv_window)``."""
    return (bool(impact.enabled), int(impact.levels), float(impact.k_spacing), float(impact.k_depth),
            float(impact.tick), int(impact.vol_window), int(impact.vol_min_obs), float(impact.vol_default),
            int(impact.adv_window))


def book_inputs(ds: ArenaDataset, rows: np.ndarray, impact: ImpactModel, cols: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """σ and ADV of the simulated book at decision rows ``rows`` (spec §10.8).

    σ = std (ddof 1) of the daily log returns of ``adj_close`` over the last
    ``vol_window`` panel days up to t on which the stock is tradable and has a
    row the day before (≥ ``vol_min_obs`` returns, else ``vol_default``);
    ADV = mean volume over the tradable days among the last ``adv_window`` days
    (0 if none). The account reads them from a per-window table of the same kernel
    (:func:`sigma_adv_rows`; :func:`~quantgym.envs.quant_arena.account.day_cells`).

    ``cols`` (optional): only these columns.

    Returns
    -------
    sigma, adv : ndarray (len(rows), N or len(cols)) float64
    """
    rows = np.asarray(rows, dtype=np.int64)
    lr, vol = book_series(ds)
    cols = np.arange(ds.N) if cols is None else np.asarray(cols, dtype=np.int64)
    if rows.size == 0 or cols.size == 0:
        return np.empty((rows.size, cols.size)), np.empty((rows.size, cols.size))
    _, _, _, _, _, W, min_obs, vol_default, Wa = impact_args(impact)
    if cols.size < ds.N or np.any(cols != np.arange(ds.N)):
        lr, vol = lr[:, cols], vol[:, cols]
    return _book_inputs_kernel(lr, vol, rows, W, min_obs, vol_default, Wa)


# ---------------------------------------------------------------------- one order (the spec's statements)
def book_params(P: float, sigma: float, adv: float, impact: ImpactModel) -> tuple[float, float]:
    """Level spacing Δ (CNY) and depth q (shares) of the simulated book (spec §10.8).

    ``Δ = 0.01·max(1, floor(k_s·σ·P/0.01 + 0.5))``;
    ``q = 100·max(1, floor(k_d·ADV·Δ/(σ·P)/100))``.

    Examples
    --------
    >>> book_params(37.85, 0.025, 4_000_000, ImpactModel())   # §10.16 A
    (0.01, 800.0)
    """
    d, q = _book_params(float(P), float(sigma), float(adv), float(impact.k_spacing), float(impact.k_depth),
                        float(impact.tick))
    return float(d), float(q)


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
    on, levels, k_s, k_d, tick = impact_args(impact)[:5]
    delta, q, L = (book_levels_kernel(int(side), float(P), float(sigma), float(adv), float(limit), levels, k_s, k_d,
                                      tick) if on else (0.0, 0.0, 0.0))
    f, v = fill_kernel(int(side), float(qty), float(P), delta, q, L, on)
    return float(f), float(v)


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
    c1, c2, c3 = fees_kernel(float(value), int(side), bool(cost.enabled), float(cost.commission_rate),
                       float(cost.commission_min), float(cost.transfer_rate(day)), float(cost.stamp_rate(day)))
    return float(c1), float(c2), float(c3)


__all__ = ["r2", "price_limits", "book_inputs", "book_params", "walk_book", "order_fees", "impact_args", "book_series",
           "sigma_adv_rows", "sigma_adv_kernel", "book_levels_kernel", "fill_kernel", "fees_kernel", "nan_maximum", "nan_minimum"]
