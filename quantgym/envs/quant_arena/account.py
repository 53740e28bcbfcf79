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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .config import ArenaCostModel, ExecutionModel, ImpactModel
from .data import ArenaDataset
from .exchange import book_inputs, order_fees, price_limits, walk_book


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
    if idx.size == 0:
        return idx
    order = idx[np.lexsort((idx, -scores[idx]))]
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
    sig, adv = book_inputs(ds, np.arange(d0, d0 + n), impact)
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
        sel = select_top(scores[kk], has_row[t], top_n)
        selected = np.zeros(N, dtype=bool)
        selected[sel] = True
        sig_k, adv_k = sig[kk], adv[kk]
        up_d, down_d = up[d], down[d]
        B = S = fees_sum = stamp_sum = imp_sum = 0.0

        # 3. sells: exits first, then trims, each in symbol order
        exits = np.flatnonzero(held & ~selected)
        with np.errstate(invalid="ignore"):
            val_open = shares * np.where(tr_d, openp, np.nan)
            trims = np.flatnonzero(selected & held & (val_open > (1.0 + band) * vstar))
        for j, is_exit in [(j, True) for j in exits] + [(j, False) for j in trims]:
            if not tr_d[j]:
                cnt["blocked_sell"][kk] += 1
                continue
            P = float(openp[j])
            dn = float(down_d[j])
            if math.isfinite(dn) and P <= dn:
                cnt["blocked_sell"][kk] += 1
                continue
            if is_exit:
                want = float(shares[j])
            else:
                want = lot * math.floor((float(val_open[j]) - vstar) / (lot * P) + 1e-12)
                if want <= 0:
                    continue
            assert bought_day[j] < k, "T+1 violated"  # sells always precede buys of the same day
            filled, value = walk_book(-1, want, P, float(sig_k[j]), float(adv_k[j]), dn, impact)
            if filled <= 0:
                cnt["partial"][kk] += 1
                continue
            if filled < want - 1e-9:
                cnt["partial"][kk] += 1
            c1, c2, c3 = order_fees(value, -1, day, cost)
            cash += value - c1 - c2 - c3
            left = float(shares[j]) - filled
            shares[j] = 0.0 if (is_exit and abs(left) < 1e-9) else left
            S += value
            fees_sum += c1 + c2 + c3
            stamp_sum += c3
            imp_sum += filled * P - value
            cnt["n_sells"][kk] += 1
            if trades is not None:
                trades.append({"date": str(day), "symbol": str(ds.symbols[j]), "side": "sell", "exit": is_exit,
                               "want": want, "filled": filled, "value": value, "price": P, "commission": c1,
                               "transfer": c2, "stamp": c3, "impact": filled * P - value})

        # 4. buys in selection order (greedy on cash)
        for j in sel:
            if not tr_d[j]:
                cnt["blocked_buy"][kk] += 1
                continue
            P = float(openp[j])
            value_held = float(shares[j]) * P
            if value_held >= (1.0 - band) * vstar:
                continue
            u = float(up_d[j])
            if math.isfinite(u) and P >= u:
                cnt["blocked_buy"][kk] += 1
                continue
            want = lot * math.floor(min(vstar - value_held, cash) / (lot * P) + 1e-12)
            if want <= 0:
                continue
            filled, value = walk_book(+1, want, P, float(sig_k[j]), float(adv_k[j]), u, impact)
            filled = lot * math.floor(filled / lot + 1e-12)
            while filled > 0:
                _, value = walk_book(+1, filled, P, float(sig_k[j]), float(adv_k[j]), u, impact)
                c1, c2, c3 = order_fees(value, +1, day, cost)
                if value + c1 + c2 + c3 <= cash + 1e-9:
                    break
                filled -= lot
            if filled <= 0:
                continue
            if filled < want:
                cnt["partial"][kk] += 1
            cash -= value + c1 + c2 + c3
            shares[j] += filled
            bought_day[j] = k
            B += value
            fees_sum += c1 + c2 + c3
            imp_sum += value - filled * P
            cnt["n_buys"][kk] += 1
            if trades is not None:
                trades.append({"date": str(day), "symbol": str(ds.symbols[j]), "side": "buy", "exit": False,
                               "want": want, "filled": filled, "value": value, "price": P, "commission": c1,
                               "transfer": c2, "stamp": c3, "impact": value - filled * P})
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
        out["bought"][kk], out["sold"][kk] = B, S
        out["fees"][kk], out["stamp"][kk], out["impact"][kk] = fees_sum, stamp_sum, imp_sum
    return AccountResult(dates=ds.dates[d0:d0 + n + 1].copy(), nav=nav, cash=cash_path, position_value=posv,
                         final_shares=shares, stale=stale, trades=trades, **out, **cnt)


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
