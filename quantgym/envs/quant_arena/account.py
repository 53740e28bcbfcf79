"""The cash account of Quant-Arena: the sealed backtester's state (spec quant_arena.md §4, §10.2, §10.5, §10.7).

Longer than 500 lines as one job, the cash account's state and its compiled day kernel, which must stay in
step.

Input: a dataset (:class:`~quantgym.envs.quant_arena.data.ArenaDataset`), a window and
a score matrix ``(n, N)`` — one row per decision date ``D_0..D_{n−1}``, one column per
dataset symbol, NaN = not eligible. Output: an :class:`AccountResult` with the NAV
path and the daily trading aggregates. Agent code is not involved: this runs in the
host on already validated scores.

One module on purpose: the day loop, its compiled kernels and the interpreted path a user fee or impact
model runs on must stay side by side, so both paths keep the same operations in the same order.

Order of operations on execution day ``d = D_{k+1}`` (§10.7): corporate actions →
``NAV_open`` → sells (exits, then trims; symbol order) → buys (selection order,
greedy on cash) → mark at the close. Orders are sized here in lots of
``ExecutionModel.lot`` shares; the exchange (:mod:`~quantgym.envs.quant_arena.exchange`)
prices them: price limits (§10.6), the simulated book walk (§10.8) and fees (§10.9).
The selections come from one numpy sort of every day's scores (:func:`score_order`, shared with the
signal metrics); the day loop (:func:`_account_days`) is one compiled kernel (:mod:`quantgym.jit`; ``QUANTGYM_JIT=0`` runs the same source as plain
Python, same bits), because each day depends on the cash and positions the previous
one left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from quantgym.jit import interpreted, njit
from quantgym.models import ImportableModel, build_model, fee_parts, impact_fill

from .config import ArenaCostModel, ExecutionModel, ImpactModel, _date
from .data import ArenaDataset
from .exchange import (book_levels_kernel, book_series, fees_kernel, fill_kernel, impact_args, nan_maximum, nan_minimum,
                       price_limits, sigma_adv_rows)


# ---------------------------------------------------------------------- windows and selection
def window_rows(ds: ArenaDataset, start: Any, end: Any) -> tuple[int, int]:
    """Row of D_0 and number of execution days n of the window [start, end] (spec §10.2).

    Execution days D_1..D_n are the panel days inside the window; D_0 is the last
    panel day before ``start``.

    Raises
    ------
    ValueError
        No panel day inside the window, or none before it.
    """
    s = np.datetime64(pd.Timestamp(start).date(), "D")
    e = np.datetime64(pd.Timestamp(end).date(), "D")
    i1 = int(np.searchsorted(ds.dates, s, side="left"))
    i2 = int(np.searchsorted(ds.dates, e, side="right"))
    if i2 <= i1:
        raise ValueError(f"no trading day of the panel inside [{start}, {end}]")
    if i1 == 0:
        raise ValueError(f"the window [{start}, {end}] needs at least one panel day before it (D_0)")
    return i1 - 1, i2 - i1


def select_top(scores: np.ndarray, eligible: np.ndarray, top_n: int) -> np.ndarray:
    """Column indices of the selected names, in selection order (spec §10.5).

    Eligible = in the view and finite score; order by score descending, ties by
    symbol ascending (= column order); the first ``min(top_n, eligible)``.

    Examples
    --------
    Columns SH600000, SH600519, SZ000002, SZ300750 with scores 1.0, 0.5, 1.0, NaN (§10.5):

    >>> select_top(np.array([1.0, 0.5, 1.0, np.nan]), np.ones(4, bool), 2)
    array([0, 2])
    """
    idx = np.flatnonzero(eligible & np.isfinite(scores))
    if idx.size > top_n > 0:  # only names at or above the top_n-th score can be selected (ties kept)
        v = scores[idx]
        idx = idx[v >= np.partition(v, idx.size - top_n)[idx.size - top_n]]
    if idx.size == 0:
        return idx
    order = idx[np.argsort(-scores[idx], kind="stable")]  # score desc, ties by column (idx ascending)
    return order[:top_n]


class ScoreOrder(NamedTuple):
    """:func:`score_order`'s result: every row's finite scores in selection order."""

    #: (D, N) int32: row i's columns with a finite score in that order in ``order[i, :count[i]]`` (the rest
    #: of the row is unspecified)
    order: np.ndarray
    #: (D,) int64: finite scores per row
    count: np.ndarray
    #: (D, N) uint8: ``tie[i, x]`` is 1 where ``order[i, x]``'s score equals ``order[i, x − 1]``'s
    #: (x < count[i]), else 0
    tie: np.ndarray


def score_order(scores: np.ndarray) -> ScoreOrder:
    """Every row's finite scores in selection order (score descending, ties by column; spec §10.5, §10.11).

    Parameters
    ----------
    scores : ndarray (D, N) float64

    Returns
    -------
    ScoreOrder
        ``order``, ``count`` and ``tie`` (D, N), (D,), (D, N).

    The same order as a stable ascending argsort of ``−score``, by one numpy sort of 32-bit keys: per row,
    ``u`` = the order-preserving bit pattern of ``−score`` (``−0.0`` as ``0.0``), its offset from the row's
    smallest ``u`` shifted right until it fits in ``31 − b`` bits, then the column in the lowest ``b`` bits
    (``2**b >= N``); keys whose upper bits tie are then ordered by the score and the column
    (:func:`_score_order_fix`). 32-bit keys sort in well under half the time of 64-bit ones. A row where
    more than ``_LONG_RUN`` keys out of order share their upper bits (scores bunched far from the row's
    extremes, e.g. beside one outlier) is sorted again by 64-bit keys, the same construction with ``63 − b``
    upper bits (:func:`_wide_keys`), which leaves few ties; a row where that still happens (scores a few
    units in the last place apart) by numpy's stable argsort of ``−score``.
    """
    s = np.ascontiguousarray(scores, dtype=np.float64)
    D, N = s.shape
    b = max(int(N - 1).bit_length(), 1)
    if b > 30:
        raise ValueError(f"score_order: {N} columns do not fit a 32-bit sort key")
    comp, count = _score_keys(s, b)
    comp.sort(axis=1)
    order = np.empty((D, N), dtype=np.int32)
    tie = np.zeros((D, N), dtype=np.uint8)
    redo = _score_order_fix(comp, s, np.arange(D), count, order, tie, np.uint32((1 << b) - 1), _LONG_RUN)
    if redo.any():
        rows = np.flatnonzero(redo)
        wide = _wide_keys(s, rows, b)
        wide.sort(axis=1)
        order2 = np.empty((rows.size, N), dtype=np.int32)
        tie2 = np.zeros((rows.size, N), dtype=np.uint8)
        again = _score_order_fix(wide, s, rows, count, order2, tie2, np.uint64((1 << b) - 1), _LONG_RUN)
        for r in np.flatnonzero(again):  # still a long run out of order (scores a few ulps apart): numpy's own
            i = rows[r]
            fin = np.flatnonzero(np.isfinite(s[i]))
            o = fin[np.argsort(-s[i, fin], kind="stable")]
            v = s[i, o]
            order2[r, :o.size] = o
            tie2[r] = 0
            tie2[r, 1:o.size] = v[1:] == v[:-1]
        order[rows], tie[rows] = order2, tie2
    return ScoreOrder(order, count, tie)


#: keys sharing their 32-bit sort key's upper bits in one run, beyond which :func:`score_order` sorts the row
#: by 64-bit keys (an insertion sort of such a run would grow with its square)
_LONG_RUN = 48


@njit(inline="always")
def _neg_bits(v: float, key: np.ndarray, bits: np.ndarray) -> np.uint64:
    """The order-preserving bit pattern of ``−v`` (``−0.0`` as ``0.0``) as an unsigned integer: equal for equal
    scores, larger for a lower score (``key``, ``bits``: a one-float scratch array and its uint64 view)."""
    key[0] = -v + 0.0
    x = bits[0]
    return ~x if x >> np.uint64(63) else x | (np.uint64(1) << np.uint64(63))


@njit(inline="always")
def _row_keys(s: np.ndarray, i: int, b: int, width: int, out: np.ndarray, u: np.ndarray, key: np.ndarray,
              bits: np.ndarray) -> int:
    """Row ``i`` of ``s``'s sort keys into ``out`` (N,) (uint32 or uint64, ``width`` bits): ``(u − min u of the
    row) >> shift`` (``u`` = :func:`_neg_bits`, kept in the scratch row ``u`` (N,); the smallest shift that
    leaves at most ``width − 1 − b`` bits) in the upper bits and the column in the lowest ``b`` bits; all bits
    set where the score is not finite (above every finite key). Returns the row's finite count."""
    N = s.shape[1]
    none = ~np.uint64(0)
    lo = none
    hi = np.uint64(0)
    m = 0
    for j in range(N):
        v = s[i, j]
        if math.isfinite(v):
            x = _neg_bits(v, key, bits)
            u[j] = x
            lo = min(lo, x)
            hi = max(hi, x)
            m += 1
        else:
            u[j] = none
    sh = np.uint64(0)
    if m:
        cap = np.uint64(1) << np.uint64(width - 1 - b)
        while (hi - lo) >> sh >= cap:
            sh += np.uint64(1)
    for j in range(N):
        x = u[j]
        out[j] = none if x == none else (((x - lo) >> sh) << np.uint64(b)) | np.uint64(j)
    return m


@njit
def _score_keys(s: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`score_order`'s 32-bit keys of ``s`` (D, N) (:func:`_row_keys`, ``31 − b`` upper bits) and the
    finite count per row."""
    D, N = s.shape
    comp = np.empty((D, N), dtype=np.uint32)
    count = np.zeros(D, dtype=np.int64)
    u = np.empty(N, dtype=np.uint64)
    key = np.empty(1)
    bits = key.view(np.uint64)
    for i in range(D):
        count[i] = _row_keys(s, i, b, 32, comp[i], u, key, bits)
    return comp, count


@njit
def _wide_keys(s: np.ndarray, rows: np.ndarray, b: int) -> np.ndarray:
    """:func:`score_order`'s 64-bit keys (:func:`_row_keys`, ``63 − b`` upper bits) of the rows ``rows`` of
    ``s``: uint64 (len(rows), N)."""
    out = np.empty((rows.size, s.shape[1]), dtype=np.uint64)
    u = np.empty(s.shape[1], dtype=np.uint64)
    key = np.empty(1)
    bits = key.view(np.uint64)
    for r in range(rows.size):
        _row_keys(s, rows[r], b, 64, out[r], u, key, bits)
    return out


@njit
def _score_order_fix(comp: np.ndarray, s: np.ndarray, rows: np.ndarray, count: np.ndarray, order: np.ndarray,
                     tie: np.ndarray, low: Any, long_run: int) -> np.ndarray:
    """The columns of :func:`score_order`'s sorted keys ``comp`` (uint32 or uint64; the column in the bits of
    ``low``, of the same type; row ``r`` is that of row ``rows[r]`` of the scores ``s``) into ``order`` (the
    first ``count[rows[r]]`` of each row) and the equal-score flags into ``tie`` (zeros on entry); each run of
    keys whose upper bits tie (in column order, the keys' low bits) is ordered by score descending, staying
    in column order where the scores are equal, by an insertion sort (a run already in order, e.g. of equal
    scores, is left as it is). Returns the rows (indices into ``rows``) left undone because a run out of
    order was longer than ``long_run`` (bool)."""
    redo = np.zeros(rows.size, dtype=np.bool_)
    for r in range(rows.size):
        i = rows[r]
        m = count[i]
        row = order[r]
        si = s[i]
        for x in range(m):
            row[x] = comp[r, x] & low
        x = 1
        while x < m:
            if (comp[r, x] ^ comp[r, x - 1]) > low:  # the upper bits differ
                x += 1
                continue
            x0 = x - 1  # a run x0..x−1 of equal upper bits: by score (stable), then flag equal scores
            while x < m and (comp[r, x] ^ comp[r, x - 1]) <= low:
                x += 1
            done = True  # already in order (equal scores: in column order)
            for z in range(x0 + 1, x):
                if si[row[z]] > si[row[z - 1]]:
                    done = False
                    break
            if done:
                pass
            elif x - x0 > long_run:
                redo[r] = True
                break
            else:
                for z in range(x0 + 1, x):
                    j = row[z]
                    w = z
                    while w > x0 and si[row[w - 1]] < si[j]:
                        row[w] = row[w - 1]
                        w -= 1
                    row[w] = j
            for z in range(x0 + 1, x):
                if si[row[z]] == si[row[z - 1]]:
                    tie[r, z] = 1
    return redo


@njit
def _select_days(order: np.ndarray, count: np.ndarray, has_row: np.ndarray, top_n: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`select_top` of every day at once from :func:`score_order`: ``(sel_idx, sel_ptr)``, day k's
    selection (eligible = ``has_row[k]`` and a finite score) in selection order at
    ``sel_idx[sel_ptr[k]:sel_ptr[k + 1]]``."""
    n = order.shape[0]
    cap = max(top_n, 0)
    sel_idx = np.empty(n * cap, dtype=np.int64)
    sel_ptr = np.zeros(n + 1, dtype=np.int64)
    used = 0
    for k in range(n):
        m = 0
        for x in range(count[k]):
            if m == cap:
                break
            j = order[k, x]
            if has_row[k, j]:
                sel_idx[used + m] = j
                m += 1
        used += m
        sel_ptr[k + 1] = used
    return sel_idx[:used], sel_ptr


# ---------------------------------------------------------------------- the account
@dataclass
class AccountResult:
    """Daily path of one evaluation (spec §10.7, §10.11).

    Arrays of length n+1 are indexed by D_0..D_n (index 0 = start, all cash); arrays
    of length n by execution day D_1..D_n.
    """

    dates: np.ndarray                 # (n+1,) datetime64[D]
    nav: np.ndarray                   # (n+1,) CNY at the close
    cash: np.ndarray                  # (n+1,)
    position_value: np.ndarray        # (n+1,) marked at the close
    nav_open: np.ndarray              # (n,)
    bought: np.ndarray                # (n,) CNY at fill prices
    sold: np.ndarray                  # (n,)
    fees: np.ndarray                  # (n,) commission + transfer + stamp
    stamp: np.ndarray                 # (n,)
    impact: np.ndarray                # (n,) CNY
    n_buys: np.ndarray                # (n,)
    n_sells: np.ndarray               # (n,)
    blocked_buy: np.ndarray           # (n,) selected buys skipped: suspended or limit-up at open
    blocked_sell: np.ndarray          # (n,) sells skipped: suspended or limit-down at open
    partial: np.ndarray               # (n,) orders cut by the book depth or a limit
    n_held: np.ndarray                # (n,) names held at the close
    final_shares: np.ndarray          # (N,)
    stale: list[dict] = field(default_factory=list)   # held names whose rows ended (user panels)
    trades: list[dict] | None = None  # per-order log when requested

    @property
    def returns(self) -> np.ndarray:
        """Daily NAV returns r_k, k = 1..n."""
        return self.nav[1:] / self.nav[:-1] - 1.0


def run_account(ds: ArenaDataset, d0: int, n: int, scores: np.ndarray, *, execution: ExecutionModel | None = None,
                cost: ArenaCostModel | ImportableModel | None = None,
                impact: ImpactModel | ImportableModel | None = None, record_trades: bool = False,
                order: ScoreOrder | None = None) -> AccountResult:
    """Simulate the cash account over execution days D_1..D_n (spec §10.7).

    The selections (§10.5) are made here from :func:`score_order` (all days at once); the day loop
    itself is :func:`_account_days`, a compiled kernel (:mod:`quantgym.jit`).

    Parameters
    ----------
    ds : ArenaDataset
        The panel (for research: truncated at the research end, §10.2).
    d0 : int
        Row of D_0 in ``ds``; D_k = row ``d0 + k``.
    n : int
        Number of execution days.
    scores : ndarray, shape (n, ds.N), float64
        Row j = scores decided after the close of D_j, traded at the open of D_{j+1}.
        NaN = not eligible. Must already be validated (finite or NaN).
    execution, cost, impact : configs
        Defaults = spec (``qa-v1``). ``cost`` may also be an :class:`~quantgym.models.ImportableModel` (or
        any object with :class:`~quantgym.models.FeeModel`'s ``order_fee``): the day loop then runs
        interpreted with that model pricing each order (slower; the book walk stays compiled), and a
        float fee is booked as commission. ``impact`` likewise (:class:`~quantgym.models.MarketImpactModel`'s
        ``fill``): it fills each order in place of the simulated book, given the book's σ and ADV.
    record_trades : bool
        Keep a per-order log in ``AccountResult.trades`` (tests, diagnostics).
    order : ScoreOrder, optional
        :func:`score_order` of ``scores`` when the caller has it (computed here otherwise).

    Returns
    -------
    AccountResult

    Raises
    ------
    ValueError
        Shape mismatch or a window beyond the panel; a fee model that cannot be built (one line).
    AssertionError
        Internal invariants (cash never negative, T+1) — a bug, never agent input.
    """
    ex = execution or ExecutionModel()
    cost = build_model(cost or ArenaCostModel(), ArenaCostModel)
    impact = build_model(impact or ImpactModel(), ImpactModel, "fill")
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (n, ds.N):
        raise ValueError(f"scores must have shape {(n, ds.N)}, got {scores.shape}")
    if d0 < 0 or d0 + n >= ds.T:
        raise ValueError("window runs past the panel")
    if np.isinf(scores).any():
        raise ValueError("scores must be finite or NaN")
    top_n = int(ex.top_n)
    so = score_order(scores) if order is None else ScoreOrder(*order)
    sel_idx, sel_ptr = _select_days(so.order, so.count, ds.has_row[d0:d0 + n], top_n)
    days = ds.dates[d0 + 1:d0 + n + 1]
    user = {}  # the kernel's helpers that a user model replaces (the loop then runs interpreted)
    if isinstance(cost, ArenaCostModel):  # the spec's fees (§10.9), compiled
        rates = _day_rates(cost, days)
        fee_args = (bool(cost.enabled), float(cost.commission_rate), float(cost.commission_min))
    else:  # a user fee model prices each order
        rates, fee_args = np.zeros((n, 2)), (True, 0.0, 0.0)
        user["_day_fees"] = _model_fees(cost, [str(d) for d in days])
    imp_args = impact_args(impact if isinstance(impact, ImpactModel) else ImpactModel())
    if not isinstance(impact, ImpactModel):  # a user impact model fills each order (σ, ADV of §10.8 given)
        user["_order_book"], user["_book_fill"], user["_book_depth"] = _model_book(impact, [str(d) for d in days])
    cells = day_cells(ds, d0, n, bool(ex.limits), imp_args)
    kernel = interpreted(_account_days, **user) if user else _account_days
    daily, counts, path, shares, trades_buf, n_trades, stale_buf, n_stale, err, err_day = kernel(
        d0, n, sel_idx, sel_ptr, cells, ds.tradable, ds.has_row, rates, top_n, float(ex.rebalance_band),
        float(ex.lot), float(ex.initial_capital), imp_args, fee_args, bool(record_trades))
    if err:
        day = ds.dates[d0 + err_day]
        raise AssertionError(f"cash went negative ({path[1, err_day]}) on {day}" if err == 1
                             else f"T+1 violated on {day}")
    syms = ds.symbols
    trades = None
    if record_trades:
        trades = [{"date": str(ds.dates[d0 + int(r[0])]), "symbol": str(syms[int(r[1])]),
                   "side": "buy" if r[2] > 0 else "sell", "exit": bool(r[3]), "want": r[4], "filled": r[5],
                   "value": r[6], "price": r[7], "commission": r[8], "transfer": r[9], "stamp": r[10],
                   "impact": r[11]} for r in trades_buf[:n_trades].tolist()]
    C = ds.ffill("close")
    stale = [{"date": str(ds.dates[d0 + int(k)]), "symbol": str(syms[int(j)]), "shares": sh,
              "last_close": float(C[d0 + int(k), int(j)])} for k, j, sh in stale_buf[:n_stale].tolist()]
    return AccountResult(dates=ds.dates[d0:d0 + n + 1].copy(), nav=path[0], cash=path[1], position_value=path[2],
                         nav_open=daily[0], bought=daily[1], sold=daily[2], fees=daily[3], stamp=daily[4],
                         impact=daily[5], n_buys=counts[0], n_sells=counts[1], blocked_buy=counts[2],
                         blocked_sell=counts[3], partial=counts[4], n_held=counts[5], final_shares=shares,
                         stale=stale, trades=trades)


def _day_rates(cost: ArenaCostModel, days: np.ndarray) -> np.ndarray:
    """(n, 2) transfer-fee and stamp-duty rates of ``cost`` on each execution day (datetime64[D]): the
    model's ``transfer_rate``/``stamp_rate`` per day, or the same two-rate rule as one comparison per day
    when they are the spec's (:class:`ArenaCostModel`'s own methods)."""
    if (type(cost).transfer_rate is ArenaCostModel.transfer_rate
            and type(cost).stamp_rate is ArenaCostModel.stamp_rate):
        tc = np.datetime64(_date(cost.transfer_change), "D")
        sc = np.datetime64(_date(cost.stamp_change), "D")
        days = np.asarray(days, dtype="datetime64[D]")
        return np.column_stack([np.where(days < tc, float(cost.transfer_rate_before), float(cost.transfer_rate_after)),
                                np.where(days < sc, float(cost.stamp_rate_before), float(cost.stamp_rate_after))])
    return np.array([[cost.transfer_rate(d), cost.stamp_rate(d)] for d in days.astype(object)],
                    dtype=np.float64).reshape(len(days), 2)


# ---------------------------------------------------------------------- the day loop (compiled)
# Fields of day_cells, one 64-byte record per (execution day, stock): what the day loop reads of a stock it visits.
_OPEN, _CLOSE, _RATIO, _MARK_OPEN, _UP, _DOWN, _SIGMA, _ADV = range(8)


def day_cells(ds: ArenaDataset, d0: int, n: int, limits: bool, imp: tuple) -> np.ndarray:
    """Per execution day D_1..D_n and stock, what the day loop reads (spec §10.6–§10.8): a read-only
    (n, N, 8) float64 array, row ``k − 1`` for day ``d = d0 + k``, fields ``_OPEN`` (raw open), ``_CLOSE``
    (close, forward-filled), ``_RATIO`` (``F[d]/F[d−1]`` of the forward-filled adjustment factor, NaN where
    ``F[d−1]`` is 0), ``_MARK_OPEN`` (the open's price for NAV_open: the open if tradable, else the base price,
    else the previous close), ``_UP``, ``_DOWN`` (price limits; NaN without ``limits``), ``_SIGMA``, ``_ADV``
    (:func:`~quantgym.envs.quant_arena.exchange.sigma_adv_rows` at the decision rows; 0 with impact off). Each value is the
    same operation on the same inputs as in the loop; gathered so that a stock's day is one cache line
    (the loop visits a hundred-odd stocks a day out of N, in no order the CPU can foresee). Cached on the
    dataset per window, limits setting and impact windows: every candidate of a window reads the same."""
    key = ("day_cells", int(d0), int(n), bool(limits), *imp)
    if key in ds._cache:
        return ds._cache[key]
    N = ds.N
    flat = np.empty(n * N * 8 + 8)
    off = (-flat.ctypes.data % 64) // 8  # 64-byte aligned records
    cells = flat[off:off + n * N * 8].reshape(n, N, 8)
    up, down, base = price_limits(ds)
    if imp[0]:
        lr, vol = book_series(ds)
        sa = sigma_adv_rows(lr, vol, d0, n, *imp[5:])
    else:
        sa = np.zeros((n, N, 2))
    _fill_cells(cells, d0, ds.fields["open"], ds.ffill("close"), ds.ffill("adj_factor"), ds.tradable, base, up, down,
                bool(limits), sa)
    cells.setflags(write=False)
    ds._cache[key] = cells
    return cells


@njit
def _fill_cells(cells: np.ndarray, d0: int, O: np.ndarray, C: np.ndarray, F: np.ndarray, trad: np.ndarray,
                base: np.ndarray, up: np.ndarray, down: np.ndarray, limits: bool, sa: np.ndarray) -> None:
    """:func:`day_cells`' fields from the (T, N) panels (``C``, ``F`` forward-filled) and the σ/ADV table ``sa``
    (n, N, 2)."""
    n, N = cells.shape[0], cells.shape[1]
    for k in range(n):
        d = d0 + 1 + k
        for j in range(N):
            cells[k, j, _OPEN] = O[d, j]
            cells[k, j, _CLOSE] = C[d, j]
            cells[k, j, _RATIO] = F[d, j] / F[d - 1, j] if F[d - 1, j] != 0 else np.nan
            cells[k, j, _MARK_OPEN] = O[d, j] if trad[d, j] else (base[d, j] if math.isfinite(base[d, j]) else
                                                                  C[d - 1, j])
            cells[k, j, _UP] = up[d, j] if limits else np.nan
            cells[k, j, _DOWN] = down[d, j] if limits else np.nan
            cells[k, j, _SIGMA] = sa[k, j, 0]
            cells[k, j, _ADV] = sa[k, j, 1]



@njit
def _day_fees(value: float, side: int, kk: int, fee: tuple, rates: np.ndarray) -> tuple[float, float, float]:
    """Fees of one order on execution day index ``kk`` under the :class:`ArenaCostModel` passed as ``fee``
    (``(enabled, commission_rate, commission_min)``) and ``rates`` (the day's transfer and stamp rates)."""
    return fees_kernel(value, side, fee[0], fee[1], fee[2], rates[kk, 0], rates[kk, 1])


def _model_fees(model: object, days: list[str]):
    """:func:`_day_fees` of a user fee model (:class:`quantgym.models.FeeModel`): ``model.order_fee(value,
    side, day)``; a float is the commission, a 3-tuple ``(commission, transfer, stamp)``."""
    def day_fees(value, side, kk, _fee, _rates):  # noqa: ANN001, ANN202 - the kernel's helper signature
        return fee_parts(model, value, side, days[kk]) if value > 0 else (0.0, 0.0, 0.0)

    return day_fees


@njit
def _order_book(side: int, P: float, limit: float, kk: int, j: int, cells: np.ndarray, imp: tuple
                ) -> tuple[float, float, float]:
    """The simulated book ``(Δ, q, L)`` of one order of column ``j`` on execution day index ``kk`` (spec §10.8;
    its σ and ADV are in ``cells[kk, j]``, :func:`day_cells`; ``imp`` =
    :func:`~quantgym.envs.quant_arena.exchange.impact_args`); ``(0, 0, 0)`` with impact off."""
    imp_on, levels, k_s, k_d, tick = imp[:5]
    if not imp_on:
        return 0.0, 0.0, 0.0
    return book_levels_kernel(side, P, cells[kk, j, _SIGMA], cells[kk, j, _ADV], limit, levels, k_s, k_d, tick)


@njit
def _book_fill(side: int, qty: float, P: float, book: tuple, imp: tuple) -> tuple[float, float]:
    """Shares filled and their value (CNY) for ``qty`` shares on the book of :func:`_order_book`."""
    return fill_kernel(side, qty, P, book[0], book[1], book[2], imp[0])


@njit
def _book_depth(side: int, qty: float, P: float, book: tuple, imp: tuple) -> float:
    """Shares of ``qty`` the book of :func:`_order_book` fills (:func:`_book_fill`'s first value, without
    pricing them)."""
    return (nan_minimum(qty, book[1] * book[2]) if imp[0] else qty) if qty > 0 else 0.0


def _model_book(model: object, dates: list[str]):
    """:func:`_order_book`, :func:`_book_fill` and :func:`_book_depth` of a user impact model
    (:class:`quantgym.models.MarketImpactModel`): the "book" is the order's σ, ADV, limit and execution
    day index (``dates`` = the execution days), and ``model.fill(side, qty, price, sigma, adv, limit, day)``
    fills it."""
    def order_book(side, P, limit, kk, j, cells, _imp):  # noqa: ANN001, ANN202 - the kernel's helper signature
        return cells[kk, j, _SIGMA], cells[kk, j, _ADV], limit, kk

    def book_fill(side, qty, P, book, _imp):  # noqa: ANN001, ANN202
        return impact_fill(model, side, qty, P, book[0], book[1], book[2], dates[book[3]]) if qty > 0 else (0.0, 0.0)

    def book_depth(side, qty, P, book, _imp):  # noqa: ANN001, ANN202
        return book_fill(side, qty, P, book, _imp)[0]

    return order_book, book_fill, book_depth

# Field indices of the kernel's outputs.
_NAV_OPEN, _BOUGHT, _SOLD, _FEES, _STAMP, _IMPACT = range(6)               # daily (6, n) float64, CNY
_N_BUYS, _N_SELLS, _BLOCKED_BUY, _BLOCKED_SELL, _PARTIAL, _N_HELD = range(6)  # counts (6, n) int64
_TRADE_COLS = 12  # k, column, side (±1), exit, want, filled, value, price, commission, transfer, stamp, impact


@njit
def _grow(buf: np.ndarray, used: int) -> np.ndarray:
    """``buf`` if it has a free row, else a copy with twice the rows (append-only logs)."""
    if used < buf.shape[0]:
        return buf
    out = np.empty((2 * buf.shape[0], buf.shape[1]))
    out[:used] = buf[:used]
    return out


@njit
def _log(buf: np.ndarray, used: int, k: int, j: int, side: int, is_exit: bool, want: float, filled: float,
         value: float, P: float, c1: float, c2: float, c3: float, imp: float) -> np.ndarray:
    """Row ``used`` of the trade log (grown if full)."""
    buf = _grow(buf, used)
    buf[used, 0], buf[used, 1], buf[used, 2], buf[used, 3] = k, j, side, 1.0 if is_exit else 0.0
    buf[used, 4], buf[used, 5], buf[used, 6], buf[used, 7] = want, filled, value, P
    buf[used, 8], buf[used, 9], buf[used, 10], buf[used, 11] = c1, c2, c3, imp
    return buf


@njit
def _account_days(d0, n, sel_idx, sel_ptr, cells, trad, has_row, rates, top_n, band, lot, cash0, imp, fee,
                  record):  # noqa: ANN001 - a numba kernel: the types are in the docstring
    """The cash account's day loop: execution days D_1..D_n in order (spec §10.7, §10.8, §10.9).

    Each day depends on the cash and positions the previous one left, so the days run in sequence;
    within a day the orders are booked one by one in execution order (sells: exits then trims, each in
    column order; buys in selection order, greedy on cash, one lot less until affordable), and every
    running sum (cash, the day's traded values, fees, stamp, impact) adds them in that order.

    Parameters
    ----------
    d0, n : int
        Row of D_0 and number of execution days; day k = 1..n is panel row ``d = d0 + k`` and its
        orders were decided at row ``t = d − 1``.
    sel_idx, sel_ptr : int64 (Σ, ), (n+1, )
        The selections (§10.5), day k's in selection order at ``sel_idx[sel_ptr[k−1]:sel_ptr[k]]``.
    cells : float64 (n, N, 8)
        What day k = 1..n (row ``k − 1``) reads of each stock (:func:`day_cells`): open, close, the
        adjustment factor's ratio to the day before, the open's mark for NAV_open, up and down limits,
        the book's σ and ADV.
    trad, has_row : bool (T, N)
    rates : float64 (n, 2)
        Transfer-fee and stamp-duty rates in force on each execution day.
    top_n, band, lot, cash0 : int, float, float, float
        ``ExecutionModel`` (slots, rebalance band, lot in shares, initial capital in CNY).
    imp, fee : tuples
        :func:`~quantgym.envs.quant_arena.exchange.impact_args`; ``(enabled, commission_rate,
        commission_min)`` of the ``ArenaCostModel`` (read by :func:`_day_fees`, the one fee call).
    record : bool
        Fill the trade log.

    Returns
    -------
    daily : float64 (6, n)     NAV_open, bought, sold, fees, stamp, impact per day (CNY)
    counts : int64 (6, n)      buys, sells, blocked buys, blocked sells, partial fills, names held
    path : float64 (3, n+1)    NAV, cash, position value at the close of D_0..D_n
    shares : float64 (N, )     final holdings
    trades, n_trades           trade log rows (``_TRADE_COLS`` columns) and how many are used
    stale, n_stale             (k, column, shares) of held names whose rows ended, and how many
    err, err_day : int         0, or 1 (cash negative) / 2 (T+1) and the day k where it happened
    """
    N = cells.shape[1]
    daily = np.zeros((6, n))
    counts = np.zeros((6, n), dtype=np.int64)
    path = np.empty((3, n + 1))
    shares = np.zeros(N)
    bought_day = np.full(N, -1)
    hl = np.empty(N, dtype=np.int64)  # the held names (shares > 0) in column order, nhl of them
    nhl = 0
    hl2 = np.empty(N, dtype=np.int64)  # the next day's list, built at the close
    bought = np.empty(N, dtype=np.int64)  # the day's bought columns
    selected = np.zeros(N, dtype=np.bool_)
    xs = np.empty(N)  # the held names' shares and prices, gathered for np.dot (numpy's BLAS order)
    ps = np.empty(N)
    trades = np.empty((1024 if record else 1, _TRADE_COLS))
    stale = np.empty((16, 3))
    n_trades = 0
    n_stale = 0
    cash = cash0
    path[0, 0], path[1, 0], path[2, 0] = cash, cash, 0.0
    for k in range(1, n + 1):
        d = d0 + k
        kk = k - 1
        B = S = fees = stamp = impact = 0.0
        # 1. corporate actions (§10.7.1), 2. NAV_open at the open (base price if not tradable)
        nh = 0
        for x in range(nhl):  # every name with shares > 0 (buys are the only way in), column order
            j = hl[x]
            r = cells[kk, j, _RATIO]
            shares[j] = shares[j] * (r if math.isfinite(r) else 1.0)
            xs[nh] = shares[j]
            ps[nh] = cells[kk, j, _MARK_OPEN]
            nh += 1
        nav_open = cash + np.dot(xs[:nh], ps[:nh]) if nh else cash
        vstar = nav_open / top_n
        daily[_NAV_OPEN, kk] = nav_open
        sel = sel_idx[sel_ptr[kk]:sel_ptr[k]]
        for j in sel:
            selected[j] = True
        # 3. sells: exits (held, not selected) then trims (selected, worth more than (1+b)V*), column order
        hi_band = (1.0 + band) * vstar
        for pass_ in range(2):
            is_exit = pass_ == 0
            for x in range(nhl):  # the names held at the open
                j = hl[x]
                if selected[j] != (not is_exit):
                    continue
                P = cells[kk, j, _OPEN]
                val_open = shares[j] * P if trad[d, j] else np.nan
                if not is_exit and not val_open > hi_band:
                    continue
                dn = cells[kk, j, _DOWN]
                if not trad[d, j] or (math.isfinite(dn) and P <= dn):
                    counts[_BLOCKED_SELL, kk] += 1
                    continue
                want = shares[j] if is_exit else lot * np.floor((val_open - vstar) / (lot * P) + 1e-12)
                if not (is_exit or want > 0):
                    continue
                if bought_day[j] >= k:
                    return daily, counts, path, shares, trades, n_trades, stale, n_stale, 2, k
                book = _order_book(-1, P, dn, kk, j, cells, imp)
                filled, value = _book_fill(-1, want, P, book, imp)
                if filled <= 0:
                    counts[_PARTIAL, kk] += 1
                    continue
                if filled < want - 1e-9:
                    counts[_PARTIAL, kk] += 1
                c1, c2, c3 = _day_fees(value, -1, kk, fee, rates)
                cash += value - c1 - c2 - c3
                left = shares[j] - filled
                shares[j] = 0.0 if is_exit and abs(left) < 1e-9 else left
                counts[_N_SELLS, kk] += 1
                S += value
                fees += c1 + c2 + c3
                stamp += c3
                impact += filled * P - value
                if record:
                    trades = _log(trades, n_trades, k, j, -1, is_exit, want, filled, value, P, c1, c2, c3,
                                  filled * P - value)
                    n_trades += 1
        # 4. buys in selection order, greedy on cash: worth less than (1−b)V*, one lot less until affordable
        lo_band = (1.0 - band) * vstar
        nb = 0
        for j in sel:
            selected[j] = False  # (reset for the next day)
            P = cells[kk, j, _OPEN]
            u = cells[kk, j, _UP]
            value_held = shares[j] * P
            room = value_held < lo_band
            if not trad[d, j] or (room and math.isfinite(u) and P >= u):
                counts[_BLOCKED_BUY, kk] += 1
                continue
            if not room:
                continue
            need = vstar - value_held
            want = nan_maximum(lot * np.floor(nan_minimum(need, cash) / (lot * P) + 1e-12), 0.0)
            if not want > 0:  # not a lot's cash left: nothing fills (the book is not needed)
                continue
            book = _order_book(+1, P, u, kk, j, cells, imp)
            f1 = _book_depth(+1, want, P, book, imp)  # the walk's fill
            top = lot * np.floor(f1 / lot + 1e-12)
            lots = int(round(top / lot))
            filled = top
            for i in range(lots + 1):  # the walk's fill, then one lot less at a time until affordable
                filled = top - lot * i if i else top
                if not filled > 0:
                    filled = 0.0
                    break
                value = _book_fill(+1, filled, P, book, imp)[1]
                c1, c2, c3 = _day_fees(value, +1, kk, fee, rates)
                total = value + c1 + c2 + c3
                if total <= cash + 1e-9:
                    break
            else:
                filled = 0.0
            if filled > 0:
                if filled < want:
                    counts[_PARTIAL, kk] += 1
                shares[j] += filled
                bought_day[j] = k
                bought[nb] = j
                nb += 1
                counts[_N_BUYS, kk] += 1
                cash -= total
                B += value
                fees += c1 + c2 + c3
                impact += value - filled * P
                if record:
                    trades = _log(trades, n_trades, k, j, +1, False, want, filled, value, P, c1, c2, c3,
                                  value - filled * P)
                    n_trades += 1
        if not cash >= -1e-6:
            path[1, k] = cash
            return daily, counts, path, shares, trades, n_trades, stale, n_stale, 1, k
        if cash < 0.0:
            cash = 0.0
        # 5. mark at the close: the names with shares > 0 among the open's and the day's buys, column order
        for x in range(1, nb):  # the buys in column order (insertion sort)
            j = bought[x]
            y = x
            while y > 0 and bought[y - 1] > j:
                bought[y] = bought[y - 1]
                y -= 1
            bought[y] = j
        nh = 0
        a = b = 0
        last = -1
        while a < nhl or b < nb:
            if b == nb or (a < nhl and hl[a] <= bought[b]):
                j = hl[a]
                a += 1
            else:
                j = bought[b]
                b += 1
            if j == last:
                continue
            last = j
            if shares[j] > 0:
                hl2[nh] = j
                xs[nh] = shares[j]
                ps[nh] = cells[kk, j, _CLOSE]
                nh += 1
                if not has_row[d, j]:
                    stale = _grow(stale, n_stale)
                    stale[n_stale, 0], stale[n_stale, 1], stale[n_stale, 2] = k, j, shares[j]
                    n_stale += 1
        hl, hl2 = hl2, hl
        nhl = nh
        pv = np.dot(xs[:nh], ps[:nh]) if nh else 0.0
        path[0, k], path[1, k], path[2, k] = cash + pv, cash, pv
        counts[_N_HELD, kk] = nh
        daily[_BOUGHT, kk], daily[_SOLD, kk], daily[_FEES, kk] = B, S, fees
        daily[_STAMP, kk], daily[_IMPACT, kk] = stamp, impact
    return daily, counts, path, shares, trades, n_trades, stale, n_stale, 0, 0


def labels(ds: ArenaDataset, d0: int, n: int) -> np.ndarray:
    """RankIC labels for decision dates D_0..D_{n−2} (spec §10.11).

    ``y_t = adj_open(t+2)/adj_open(t+1) − 1`` if the stock is tradable on both days,
    else NaN; t+2 ≤ D_n always holds for these rows.

    Returns
    -------
    ndarray, shape (n−1, N)
    """
    if n < 2:
        return np.empty((0, ds.N))
    O, f = ds.fields["open"], ds.fields["adj_factor"]
    a = slice(d0 + 1, d0 + n)      # t+1 for t = D_0..D_{n-2}
    b = slice(d0 + 2, d0 + n + 1)  # t+2
    ok = ds.tradable[a] & ds.tradable[b]
    with np.errstate(invalid="ignore", divide="ignore"):
        y = (O[b] * f[b]) / (O[a] * f[a]) - 1.0
    return np.where(ok, y, np.nan)


def reference_path(ds: ArenaDataset, d0: int, n: int) -> np.ndarray:
    """Market reference NAV over D_0..D_n, compounded from 1 (spec §10.10).

    Raises
    ------
    ValueError
        The reference series lacks one of the execution days.
    """
    ref = ds.reference_returns()
    days = pd.DatetimeIndex(ds.dates[d0 + 1:d0 + n + 1])
    r = ref.reindex(days)
    if r.isna().any():
        raise ValueError(f"market reference missing on {r.index[r.isna()][0].date()}")
    return np.concatenate([[1.0], np.cumprod(1.0 + r.to_numpy())])


__all__ = ["AccountResult", "run_account", "select_top", "score_order", "ScoreOrder", "window_rows", "labels", "reference_path"]
