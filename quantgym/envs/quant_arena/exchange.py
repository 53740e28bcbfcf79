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

def _book_series(ds: ArenaDataset) -> tuple[np.ndarray, np.ndarray]:
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


def _trailing(x: np.ndarray, rows: np.ndarray, w: int, cols: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The trailing windows ``x[t−w+1 .. t, cols]`` of each t in ``rows``: the positions of ``rows`` in
    a span of rows and ``w`` slices of the span (oldest first), each (span, len(cols)); NaN before row 0."""
    lo, hi = int(rows.min()) - w + 1, int(rows.max()) + 1
    blk = np.full((hi - lo, cols.size), np.nan)
    blk[max(0, -lo):] = x[max(lo, 0):hi][:, cols]
    return rows - lo - (w - 1), [blk[k:k + blk.shape[0] - w + 1] for k in range(w)]


def _window_std_count(x: np.ndarray, rows: np.ndarray, w: int, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Count of values and ``np.nanstd(window, axis=0, ddof=1)`` of each trailing window (NaN below 2 values).

    numpy's own steps (sum over the window from its oldest row on, mean, squared deviations, sum), so
    the same bits as ``np.nanstd`` on each window, without building a (rows, window, cols) block.
    """
    pos, parts = _trailing(x, rows, w, cols)
    miss = [np.isnan(p) for p in parts]
    vals = [np.where(m, 0.0, p) for m, p in zip(miss, parts)]
    cnt = sum((~m).astype(np.int64) for m in miss)
    tot = vals[0].copy()
    for v in vals[1:]:
        tot += v
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = tot / cnt
        ss = None
        for m, v in zip(miss, vals):
            d = v - avg
            d[m] = 0.0
            d *= d
            ss = d if ss is None else ss + d
        var = ss / (cnt - 1)
    return cnt[pos], np.sqrt(np.where(cnt > 1, var, np.nan))[pos]


def _window_mean(x: np.ndarray, rows: np.ndarray, w: int, cols: np.ndarray) -> np.ndarray:
    """Mean of the non-NaN values of each trailing window (0 if none): ``nansum / count``, numpy's order."""
    pos, parts = _trailing(x, rows, w, cols)
    cnt = sum((~np.isnan(p)).astype(np.int64) for p in parts)
    tot = np.where(np.isnan(parts[0]), 0.0, parts[0])
    for p in parts[1:]:
        tot += np.where(np.isnan(p), 0.0, p)
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), 0.0)[pos]


def book_inputs(ds: ArenaDataset, rows: np.ndarray, impact: ImpactModel, cols: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """σ and ADV of the simulated book at decision rows ``rows`` (spec §10.8).

    σ = std (ddof 1) of the daily log returns of ``adj_close`` over the last
    ``vol_window`` panel days up to t on which the stock is tradable and has a
    row the day before (≥ ``vol_min_obs`` returns, else ``vol_default``);
    ADV = mean volume over the tradable days among the last ``adv_window`` days
    (0 if none).

    ``cols`` (optional): only these columns (the account asks for the day's orders only).

    Returns
    -------
    sigma, adv : ndarray (len(rows), N or len(cols)) float64
    """
    rows = np.asarray(rows, dtype=np.int64)
    W, Wa = int(impact.vol_window), int(impact.adv_window)
    lr, vol = _book_series(ds)
    cols = np.arange(ds.N) if cols is None else np.asarray(cols, dtype=np.int64)
    if rows.size == 0:
        return np.empty((0, cols.size)), np.empty((0, cols.size))
    cnt, s = _window_std_count(lr, rows, W, cols)
    s = np.where((np.minimum(rows + 1, W) > 1)[:, None], s, np.nan)          # a one-row window has no std
    sig = np.where((cnt >= impact.vol_min_obs) & np.isfinite(s) & (s > 0), s, impact.vol_default)
    return sig, _window_mean(vol, rows, Wa, cols)


def _r2v(x: np.ndarray) -> np.ndarray:
    """:func:`r2` on a float64 array (the same operations, so the same bits)."""
    return np.floor(x * 100.0 + 0.5 + 1e-9) / 100.0


# ---------------------------------------------------------------------- book and fees
# The order-level functions are vectorised over orders (arrays of one day's orders); the scalar
# forms (book_params, walk_book, order_fees) are the spec's one-order statements and call them.
def book_params_many(P: np.ndarray, sigma: np.ndarray, adv: np.ndarray, impact: ImpactModel
                     ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`book_params` of many orders: Δ (CNY, rounded to 10 decimals) and q (shares), float64 arrays."""
    tick = impact.tick
    ticks = np.maximum(1.0, np.floor(impact.k_spacing * sigma * P / tick + 0.5))
    delta = tick * ticks
    q = 100.0 * np.maximum(1.0, np.floor(impact.k_depth * adv * delta / (sigma * P) / 100.0))
    # Python's round(Δ, 10) (correctly rounded): with a 0.01 tick and fewer than 1e6 ticks, round(0.01·t, 10)
    # is the double nearest to t/100, which IEEE division gives; otherwise once per distinct tick count
    if tick == 0.01 and ticks.size and ticks.max() < 1e6:
        return ticks / 100.0, q
    uniq, inv = np.unique(ticks, return_inverse=True)
    return np.array([round(tick * t, 10) for t in uniq.tolist()], dtype=np.float64)[inv].reshape(delta.shape), q


def book_params(P: float, sigma: float, adv: float, impact: ImpactModel) -> tuple[float, float]:
    """Level spacing Δ (CNY) and depth q (shares) of the simulated book (spec §10.8).

    ``Δ = 0.01·max(1, floor(k_s·σ·P/0.01 + 0.5))``;
    ``q = 100·max(1, floor(k_d·ADV·Δ/(σ·P)/100))``.

    Examples
    --------
    >>> book_params(37.85, 0.025, 4_000_000, ImpactModel())   # §10.16 A
    (0.01, 800.0)
    """
    d, q = book_params_many(np.array([P], dtype=np.float64), np.array([sigma], dtype=np.float64),
                            np.array([adv], dtype=np.float64), impact)
    return float(d[0]), float(q[0])


def book_levels(side: int, P: np.ndarray, sigma: np.ndarray, adv: np.ndarray, limit: np.ndarray,
                impact: ImpactModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spacing Δ, depth q and number of levels L of one side of many simulated books (spec §10.8).

    ``L = min(levels, floor(room/Δ + ½))``: level k exists iff (k − ½)Δ ≤ room, the distance from P to
    the limit (buy: up-limit; sell: down-limit, and sell levels below 0.01 do not exist).
    """
    delta, q = book_params_many(P, sigma, adv, impact)
    fin = np.isfinite(limit)
    if side > 0:
        room = np.where(fin, limit - P, np.inf)
    else:
        room = P - np.where(fin, np.maximum(limit, impact.tick), impact.tick)
    with np.errstate(invalid="ignore"):
        L = np.where(np.isfinite(room), np.minimum(float(impact.levels),
                                                   np.maximum(0.0, np.floor(room / delta + 0.5 + 1e-9))),
                     float(impact.levels))
    return delta, q, L


def fill_value(side: int, qty: np.ndarray, P: np.ndarray, levels: tuple[np.ndarray, np.ndarray, np.ndarray] | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Shares filled and their value for orders of ``qty`` shares on books ``levels`` (:func:`book_levels`;
    None: no impact, everything fills at P). Orders of ``qty <= 0`` fill nothing."""
    ok = qty > 0
    if levels is None:
        return np.where(ok, qty, 0.0), np.where(ok, qty * P, 0.0)
    delta, q, L = levels
    filled = np.minimum(qty, L * q)
    j = np.floor(filled / q + 1e-12)
    rem = filled - j * q
    value = q * (j * P + side * delta * j * j / 2.0) + rem * (P + side * (j + 0.5) * delta)
    return np.where(ok, filled, 0.0), np.where(ok, value, 0.0)


def walk_book_many(side: int, qty: np.ndarray, P: np.ndarray, sigma: np.ndarray, adv: np.ndarray,
                   limit: np.ndarray, impact: ImpactModel) -> tuple[np.ndarray, np.ndarray]:
    """:func:`walk_book` of many orders of one side: ``(filled, value)`` float64 arrays.

    All arguments but ``side`` and ``impact`` are float64 arrays of one shape (one entry per order).
    """
    qty = np.asarray(qty, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    return fill_value(side, qty, P, book_levels(side, P, sigma, adv, limit, impact) if impact.enabled else None)


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
    f, v = walk_book_many(side, *(np.array([x], dtype=np.float64) for x in (qty, P, sigma, adv, limit)),
                          impact=impact)
    return float(f[0]), float(v[0])


def order_fees_many(value: np.ndarray, side: int, day: Any, cost: ArenaCostModel
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`order_fees` of many orders of one side on one day: (commission, transfer, stamp) arrays."""
    value = np.asarray(value, dtype=np.float64)
    zero = np.zeros_like(value)
    if not cost.enabled:
        return zero, zero, zero
    pos = value > 0
    comm = np.where(pos, np.maximum(cost.commission_min, _r2v(cost.commission_rate * value)), 0.0)
    transfer = np.where(pos, _r2v(cost.transfer_rate(day) * value), 0.0)
    stamp = np.where(pos, _r2v(cost.stamp_rate(day) * value), 0.0) if side < 0 else zero
    return comm, transfer, stamp


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
    c1, c2, c3 = order_fees_many(np.array([value], dtype=np.float64), side, day, cost)
    return float(c1[0]), float(c2[0]), float(c3[0])


__all__ = ["r2", "price_limits", "book_inputs", "book_params", "walk_book", "order_fees", "book_params_many",
           "book_levels", "fill_value", "walk_book_many", "order_fees_many"]
