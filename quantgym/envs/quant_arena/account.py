"""The cash account of Quant-Arena: the sealed backtester's state (spec quant_arena.md §4, §10.2, §10.5, §10.7).

Input: a dataset (:class:`~quantgym.envs.quant_arena.data.ArenaDataset`), a window and
a score matrix ``(n, N)`` — one row per decision date ``D_0..D_{n−1}``, one column per
dataset symbol, NaN = not eligible. Output: an :class:`AccountResult` with the NAV
path and the daily trading aggregates. Agent code is not involved: this runs in the
host on already validated scores.

Order of operations on execution day ``d = D_{k+1}`` (§10.7): corporate actions →
``NAV_open`` → sells (exits, then trims; symbol order) → buys (selection order,
greedy on cash) → mark at the close. Orders are sized here in lots of
``ExecutionModel.lot`` shares; the exchange (:mod:`~quantgym.envs.quant_arena.exchange`)
prices them: price limits (§10.6), the simulated book walk (§10.8) and fees (§10.9).
Everything is per order in plain Python floats (a few thousand orders a year);
everything per stock and day is vectorised numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .config import ArenaCostModel, ExecutionModel, ImpactModel
from .data import ArenaDataset
from .exchange import book_inputs, book_levels, fill_value, order_fees_many, price_limits


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
                cost: ArenaCostModel | None = None, impact: ImpactModel | None = None,
                record_trades: bool = False) -> AccountResult:
    """Simulate the cash account over execution days D_1..D_n (spec §10.7).

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
        Defaults = spec (``qa-v1``).
    record_trades : bool
        Keep a per-order log in ``AccountResult.trades`` (tests, diagnostics).

    Returns
    -------
    AccountResult

    Raises
    ------
    ValueError
        Shape mismatch or a window beyond the panel.
    AssertionError
        Internal invariants (cash never negative, T+1) — a bug, never agent input.
    """
    ex = execution or ExecutionModel()
    cost = cost or ArenaCostModel()
    impact = impact or ImpactModel()
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (n, ds.N):
        raise ValueError(f"scores must have shape {(n, ds.N)}, got {scores.shape}")
    if d0 < 0 or d0 + n >= ds.T:
        raise ValueError("window runs past the panel")
    if np.isinf(scores).any():
        raise ValueError("scores must be finite or NaN")
    O, C, F = ds.fields["open"], ds.ffill("close"), ds.ffill("adj_factor")
    has_row, trad = ds.has_row, ds.tradable
    up, down, base = price_limits(ds)
    if not ex.limits:
        up = np.full_like(up, np.nan)
        down = np.full_like(down, np.nan)
    N = ds.N
    top_n, band, lot = int(ex.top_n), float(ex.rebalance_band), float(ex.lot)
    cash = float(ex.initial_capital)
    shares = np.zeros(N)
    bought_day = np.full(N, -1)
    out = {k: np.zeros(n) for k in ("nav_open", "bought", "sold", "fees", "stamp", "impact")}
    cnt = {k: np.zeros(n, dtype=np.int64) for k in ("n_buys", "n_sells", "blocked_buy", "blocked_sell", "partial",
                                                      "n_held")}
    nav = np.empty(n + 1)
    cash_path = np.empty(n + 1)
    posv = np.empty(n + 1)
    nav[0], cash_path[0], posv[0] = cash, cash, 0.0
    trades: list[dict] | None = [] if record_trades else None
    stale: list[dict] = []
    # the selections depend on the scores only; every traded name is selected on some day (a sell is of a
    # name bought earlier), so σ and ADV are needed for the union of the selections only: one call
    sels = [select_top(scores[kk], has_row[d0 + kk], top_n) for kk in range(n)]
    book_cols = np.unique(np.concatenate(sels)) if n else np.zeros(0, dtype=np.int64)
    col_pos = np.full(N, -1)
    col_pos[book_cols] = np.arange(book_cols.size)
    sig_all, adv_all = book_inputs(ds, np.arange(d0, d0 + n), impact, book_cols)
    for k in range(1, n + 1):
        d, t = d0 + k, d0 + k - 1
        day = ds.dates[d]
        kk = k - 1
        held = shares > 0
        # 1. corporate actions (§10.7.1)
        if held.any():
            ratio = F[d] / F[d - 1]
            ratio = np.where(np.isfinite(ratio), ratio, 1.0)
            shares = np.where(held, shares * ratio, shares)
        tr_d = trad[d]
        openp = O[d]
        pmark = np.where(tr_d, openp, np.where(np.isfinite(base[d]), base[d], C[d - 1]))
        # 2. NAV_open and the slot value
        nav_open = cash + float(np.dot(shares[held], pmark[held])) if held.any() else cash
        vstar = nav_open / top_n
        out["nav_open"][kk] = nav_open
        sel = sels[kk]
        selected = np.zeros(N, dtype=bool)
        selected[sel] = True
        # 3. sells: exits first, then trims, each in symbol order
        exits = np.flatnonzero(held & ~selected)
        with np.errstate(invalid="ignore"):
            val_open = shares * np.where(tr_d, openp, np.nan)
            trims = np.flatnonzero(selected & held & (val_open > (1.0 + band) * vstar))
        pos = col_pos[np.concatenate([exits, trims, sel])]
        sig_k, adv_k = sig_all[kk, pos], adv_all[kk, pos]
        day_acc = _Day(day, cost, trades, ds.symbols)
        ns = exits.size + trims.size
        cash = _sells(day_acc, cash, shares, exits, trims, val_open, vstar, tr_d, openp, down[d], sig_k[:ns],
                      adv_k[:ns], bought_day, k, lot, impact, cnt, kk)
        # 4. buys in selection order (greedy on cash)
        cash = _buys(day_acc, cash, shares, sel, vstar, tr_d, openp, up[d], sig_k[ns:], adv_k[ns:], bought_day, k,
                     band, lot, impact, cnt, kk)
        assert cash >= -1e-6, f"cash went negative ({cash}) on {day}"
        cash = max(cash, 0.0)
        # 5. mark at the close
        held = shares > 0
        pv = float(np.dot(shares[held], C[d][held])) if held.any() else 0.0
        nav[k], cash_path[k], posv[k] = cash + pv, cash, pv
        cnt["n_held"][kk] = int(held.sum())
        gone = held & ~has_row[d]
        if gone.any():
            for j in np.flatnonzero(gone):
                stale.append({"date": str(day), "symbol": str(ds.symbols[j]), "shares": float(shares[j]),
                              "last_close": float(C[d][j])})
        out["bought"][kk], out["sold"][kk] = day_acc.B, day_acc.S
        out["fees"][kk], out["stamp"][kk], out["impact"][kk] = day_acc.fees, day_acc.stamp, day_acc.impact
    return AccountResult(dates=ds.dates[d0:d0 + n + 1].copy(), nav=nav, cash=cash_path, position_value=posv,
                         final_shares=shares, stale=stale, trades=trades, **out, **cnt)


def _acc(start: float, values: np.ndarray) -> float:
    """``start`` plus each of ``values`` in turn, left to right (the order of the orders)."""
    for v in values.tolist():
        start += v
    return start


class _Day:
    """One execution day's running sums (traded values, fees, stamp, impact) and the trade log."""

    def __init__(self, day: Any, cost: ArenaCostModel, trades: list[dict] | None, symbols: np.ndarray):
        self.day, self.cost, self.trades, self.symbols = day, cost, trades, symbols
        self.date = day.astype("datetime64[D]").astype(object)  # datetime.date: the fee schedule's key
        self.B = self.S = self.fees = self.stamp = self.impact = 0.0

    def book(self, side: int, cols: np.ndarray, want: np.ndarray, filled: np.ndarray, value: np.ndarray,
             P: np.ndarray, fees: tuple[np.ndarray, np.ndarray, np.ndarray], exit_: np.ndarray | None = None) -> None:
        """Add filled orders (in execution order) to the day's sums and the trade log."""
        c1, c2, c3 = fees
        if side > 0:
            self.B = _acc(self.B, value)
            imp = value - filled * P
        else:
            self.S = _acc(self.S, value)
            imp = filled * P - value
        self.fees = _acc(self.fees, c1 + c2 + c3)
        if side < 0:
            self.stamp = _acc(self.stamp, c3)
        self.impact = _acc(self.impact, imp)
        if self.trades is not None:
            ex = exit_.tolist() if exit_ is not None else [False] * cols.size
            for i, j in enumerate(cols.tolist()):
                self.trades.append({"date": str(self.day), "symbol": str(self.symbols[j]),
                                    "side": "buy" if side > 0 else "sell", "exit": bool(ex[i]),
                                    "want": float(want[i]), "filled": float(filled[i]), "value": float(value[i]),
                                    "price": float(P[i]), "commission": float(c1[i]), "transfer": float(c2[i]),
                                    "stamp": float(c3[i]), "impact": float(imp[i])})


def _sells(acc: _Day, cash: float, shares: np.ndarray, exits: np.ndarray, trims: np.ndarray, val_open: np.ndarray,
           vstar: float, tr_d: np.ndarray, openp: np.ndarray, down_d: np.ndarray, sig: np.ndarray, adv: np.ndarray,
           bought_day: np.ndarray, k: int, lot: float, impact: ImpactModel, cnt: dict, kk: int) -> float:
    """Step 3 of §10.7 for one day, all sells at once (they do not depend on each other); returns cash.

    Exits then trims, each in symbol order; ``sig``/``adv`` hold the exits' then the trims' book inputs.
    """
    cols = np.concatenate([exits, trims])
    if cols.size == 0:
        return cash
    is_exit = np.arange(cols.size) < exits.size
    P, dn = openp[cols], down_d[cols]
    blocked = ~tr_d[cols] | (np.isfinite(dn) & (P <= dn))
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(is_exit, shares[cols], lot * np.floor((val_open[cols] - vstar) / (lot * P) + 1e-12))
    go = ~blocked & (is_exit | (want > 0))
    cnt["blocked_sell"][kk] += int(blocked.sum())
    assert (bought_day[cols[go]] < k).all(), "T+1 violated"  # sells always precede buys of the same day
    lv = book_levels(-1, P[go], sig[go], adv[go], dn[go], impact) if impact.enabled else None
    filled, value = fill_value(-1, want[go], P[go], lv)
    i_go = np.flatnonzero(go)
    none = filled <= 0
    cnt["partial"][kk] += int(none.sum()) + int((~none & (filled < want[go] - 1e-9)).sum())
    f = ~none
    i_f, filled, value = i_go[f], filled[f], value[f]
    if i_f.size == 0:
        return cash
    c = cols[i_f]
    fees = order_fees_many(value, -1, acc.date, acc.cost)
    cash = _acc(cash, value - fees[0] - fees[1] - fees[2])
    left = shares[c] - filled
    shares[c] = np.where(is_exit[i_f] & (np.abs(left) < 1e-9), 0.0, left)
    cnt["n_sells"][kk] += int(i_f.size)
    acc.book(-1, c, want[i_f], filled, value, P[i_f], fees, is_exit[i_f])
    return cash


def _buys(acc: _Day, cash: float, shares: np.ndarray, sel: np.ndarray, vstar: float, tr_d: np.ndarray,
          openp: np.ndarray, up_d: np.ndarray, sig: np.ndarray, adv: np.ndarray, bought_day: np.ndarray, k: int,
          band: float, lot: float, impact: ImpactModel, cnt: dict, kk: int) -> float:
    """Step 4 of §10.7 for one day: buys in selection order, greedy on cash; returns cash.

    Each buy depends on the cash the earlier ones left. The orders are priced all at once with the cash
    of the first pending one; the longest prefix whose outcome that cash does not decide (each order's
    want below the cash left before it, and affordable at once) is booked, and the next order is priced
    again with the exact cash (the §10.7 lot-by-lot retry where it is not affordable at once).
    """
    if sel.size == 0:
        return cash
    P = openp[sel]
    u = up_d[sel]
    value_held = shares[sel] * P
    tradable = tr_d[sel]
    room = value_held < (1.0 - band) * vstar
    blocked = ~tradable | (room & np.isfinite(u) & (P >= u))
    cnt["blocked_buy"][kk] += int(blocked.sum())
    act = np.flatnonzero(tradable & room & ~blocked)
    if act.size == 0:
        return cash
    sel, P, u, need = sel[act], P[act], u[act], (vstar - value_held)[act]
    lv = book_levels(+1, P, sig[act], adv[act], u, impact) if impact.enabled else None
    while sel.size:
        c = cash
        with np.errstate(invalid="ignore", divide="ignore"):
            want = np.maximum(lot * np.floor(np.minimum(need, c) / (lot * P) + 1e-12), 0.0)
        f1 = np.where(want > 0, want if lv is None else np.minimum(want, lv[2] * lv[1]), 0.0)  # the walk's fill
        filled = lot * np.floor(f1 / lot + 1e-12)
        value = fill_value(+1, filled, P, lv)[1]
        fees = order_fees_many(value, +1, acc.date, acc.cost)
        total = value + fees[0] + fees[1] + fees[2]
        if filled[0] > 0 and not total[0] <= c + 1e-9:  # §10.7: one lot less until affordable (all at once)
            tries = filled[0] - lot * np.arange(1, int(round(filled[0] / lot)) + 1)
            tries = tries[tries > 0]
            k = tries.size
            if k:
                lv0 = None if lv is None else tuple(np.repeat(x[:1], k) for x in lv)
                v0 = fill_value(+1, tries, np.repeat(P[:1], k), lv0)[1]
                fe0 = order_fees_many(v0, +1, acc.date, acc.cost)
                t0 = v0 + fe0[0] + fe0[1] + fe0[2]
                ok0 = np.flatnonzero(t0 <= c + 1e-9)
                k = int(ok0[0]) + 1 if ok0.size else 0
            if k:
                i = k - 1
                filled[0], value[0], total[0] = tries[i], v0[i], t0[i]
                for x, y in zip(fees, fe0):
                    x[0] = y[i]
            else:
                filled[0] = 0.0
        execd = filled > 0
        left = np.subtract.accumulate(np.concatenate(([c], np.where(execd, total, 0.0))))  # cash -= total
        before = left[:-1]
        ok = ~execd | (((need <= before) | (before == c)) & (total <= before + 1e-9))
        ok[0] = True
        stop = int(np.argmin(ok)) if not ok.all() else sel.size
        e = np.flatnonzero(execd[:stop])
        if e.size:
            cols = sel[e]
            cnt["partial"][kk] += int((filled[e] < want[e]).sum())
            shares[cols] += filled[e]
            bought_day[cols] = k
            cnt["n_buys"][kk] += int(e.size)
            acc.book(+1, cols, want[e], filled[e], value[e], P[e], tuple(x[e] for x in fees))
        cash = float(left[stop])
        sel, P, need = sel[stop:], P[stop:], need[stop:]
        lv = None if lv is None else tuple(x[stop:] for x in lv)
    return cash


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


__all__ = ["AccountResult", "run_account", "select_top", "window_rows", "labels", "reference_path"]
