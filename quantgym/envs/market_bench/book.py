"""Shared synthetic-book component of the Market-Bench reference backtesters.

Spec market_bench §3 and §9.4-§9.7: the raw book of ``book.csv`` (integer ticks), the
*synthetic* book = raw size minus the liquidity the backtester's own fills consumed at that
(symbol, side, price) since the start (never decays, never resets), level walks for market /
IOC / FOK orders, limit prices from the synthetic book, FIFO lot accounting, the equity curve
and the maximum drawdown.

This file is also part of the *source* the reference agent submits (it is concatenated with a
strategy module, see :mod:`quantgym.envs.market_bench.agents`), so it imports only modules of
the attempt allow-list (numpy, pandas, math, collections) and nothing from quantgym.
"""

import math
from collections import deque

import numpy as np
import pandas as pd

TICK = 0.01
_SIDES = ("bid", "ask")


class BookData:
    """Raw book of one ``book.csv`` as arrays (spec §9.1).

    Attributes
    ----------
    ts : int64[N]
        ``ts_event`` (ns, UTC), file order.
    sym : int64[N]
        Symbol code of each row (index into ``symbols``, order of first appearance).
    symbols : list[str]
    bid_tk, ask_tk : int64[N, L]
        Level prices in integer ticks (``round(px / 0.01)``, §9.1.3); 0 for an empty level.
    bid_sz, ask_sz : int64[N, L]
        Raw level sizes in shares (0 for an empty level).
    mid : float64[N]
        Raw mid ``(bid_px_00 + ask_px_00) / 2`` in currency (§9.1.6).
    rows_of : dict[int, int64[n_s]]
        Global row indices of each symbol; ``ts_of`` the matching ``ts_event``.
    """

    def __init__(self, df):
        if not isinstance(df, pd.DataFrame):
            df = pd.read_csv(df)
        L = sum(1 for c in df.columns if c.startswith("bid_px_"))
        if L == 0:
            raise ValueError("book has no bid_px_NN columns")
        self.n = len(df)
        self.levels = L
        self.ts = df["ts_event"].to_numpy(dtype=np.int64)
        codes, uniques = pd.factorize(df["symbol"].astype(str), sort=False)  # order of first appearance
        self.symbols = [str(u) for u in uniques]
        self.sym = np.asarray(codes, dtype=np.int64)
        self.bid_tk = np.zeros((self.n, L), dtype=np.int64)
        self.ask_tk = np.zeros((self.n, L), dtype=np.int64)
        self.bid_sz = np.zeros((self.n, L), dtype=np.int64)
        self.ask_sz = np.zeros((self.n, L), dtype=np.int64)
        for i in range(L):
            for side, tk, sz in (("bid", self.bid_tk, self.bid_sz), ("ask", self.ask_tk, self.ask_sz)):
                px = df[f"{side}_px_{i:02d}"].to_numpy(dtype=float)
                size = df[f"{side}_sz_{i:02d}"].to_numpy(dtype=float)
                ok = np.isfinite(px) & np.isfinite(size) & (size > 0)
                tk[:, i] = np.where(ok, np.rint(np.where(ok, px, 0.0) / TICK), 0).astype(np.int64)
                sz[:, i] = np.where(ok, size, 0).astype(np.int64)
        self.mid = (self.bid_tk[:, 0] / 100 + self.ask_tk[:, 0] / 100) / 2 if self.n else np.zeros(0)
        self.rows_of = {s: np.flatnonzero(self.sym == s) for s in range(len(self.symbols))}
        self.ts_of = {s: self.ts[r] for s, r in self.rows_of.items()}

    def code(self, symbol):
        """Symbol code of ``symbol`` (raises ``KeyError`` with the known symbols)."""
        try:
            return self.symbols.index(str(symbol))
        except ValueError:
            raise KeyError(f"symbol {symbol!r} not in book (has {self.symbols})") from None

    def first_at_or_after(self, s, t):
        """Row of symbol ``s`` with the smallest ``ts_event >= t`` (§9.4.1), or -1 (order expires)."""
        i = int(self.ts_of[s].searchsorted(t, side="left"))
        return int(self.rows_of[s][i]) if i < len(self.rows_of[s]) else -1

    def as_of(self, s, t):
        """Row of symbol ``s`` with the largest ``ts_event <= t`` (§9.4.2), or -1."""
        i = int(self.ts_of[s].searchsorted(t, side="right")) - 1
        return int(self.rows_of[s][i]) if i >= 0 else -1

    def asof_rows(self, s):
        """int64[N]: for every row j, the last row <= j (file order) of symbol ``s``; -1 before its first."""
        idx = np.where(self.sym == s, np.arange(self.n), -1)
        return np.maximum.accumulate(idx) if self.n else idx


class SyntheticBook:
    """Raw book net of own consumed liquidity (spec §3, §9.5, §9.6).

    ``consumed[(symbol, side, price_ticks)]`` only grows; the synthetic size of a level is
    ``max(0, raw size - consumed)`` in every later row, whatever the raw size does.
    """

    def __init__(self, book):
        self.book = book
        self.consumed = {}
        self.trace = None  # optional list: the builder checks (spec §9.14) record cash/px here
        self._best = {}  # row -> best(row); valid while ``consumed`` is unchanged (cleared by walk)

    def level_sizes(self, row, side):
        """[(price_ticks, synthetic size)] of the L levels of ``side`` ("bid"/"ask") on ``row``."""
        b = self.book
        tk = (b.bid_tk if side == "bid" else b.ask_tk)[row].tolist()
        sz = (b.bid_sz if side == "bid" else b.ask_sz)[row].tolist()
        s = int(b.sym[row])
        consumed = self.consumed
        out = []
        for p, raw in zip(tk, sz):
            syn = raw - consumed.get((s, side, p), 0)  # MUTATION-POINT consumed
            out.append((p, syn if syn > 0 else 0))
        return out

    def best_price(self, row, side):
        """Price (ticks) of the first level of ``side`` with synthetic size > 0 on ``row``, or ``None``."""
        b = self.book
        s = int(b.sym[row])
        consumed = self.consumed
        for p, raw in zip((b.bid_tk if side == "bid" else b.ask_tk)[row].tolist(),
                          (b.bid_sz if side == "bid" else b.ask_sz)[row].tolist()):
            if raw - consumed.get((s, side, p), 0) > 0:  # MUTATION-POINT consumed-best
                return p
        return None

    def best(self, row):
        """(best bid, best ask) in ticks of the synthetic book (§9.5.4), or ``None`` if a side is empty."""
        if row in self._best:
            return self._best[row]
        bb = self.best_price(row, "bid")
        ba = self.best_price(row, "ask") if bb is not None else None
        out = (bb, ba) if ba is not None else None
        self._best[row] = out
        return out

    def limit_price(self, row, buy, k):
        """Limit in ticks from the synthetic book (§9.6.4): buy floor(m + k·s + 1e-6), sell ceil(m - k·s - 1e-6)."""
        bb, ba = self.best(row)
        m, s = (ba + bb) / 2, ba - bb
        return int(math.floor(m + k * s + 1e-6)) if buy else int(math.ceil(m - k * s - 1e-6))

    def available(self, row, buy, limit):
        """Synthetic size within ``limit`` (ticks) on the side a buy/sell takes (§9.6.3)."""
        total = 0
        for p, q in self.level_sizes(row, "ask" if buy else "bid"):
            if q == 0:
                continue
            if (buy and p > limit) or (not buy and p < limit):
                break
            total += q
        return total

    def walk(self, row, buy, qty, limit=None, cash=None):
        """Walk the synthetic book and consume (§9.6.1, §9.8.2).

        Visits the levels of the opposite side from the best, skips synthetic size 0, stops at
        the first level beyond ``limit`` (ticks; ``None`` = market order). With ``cash`` (buys
        of strategy 1) each level's fill is capped at ``floor(cash / px + 1e-9)`` with the cash
        left at that point, and the walk stops when the cap is 0.

        Returns
        -------
        list of (price_ticks, filled shares), one per level with a fill (= one fill, one lot).
        """
        side = "ask" if buy else "bid"
        s = int(self.book.sym[row])
        fills = []
        remaining = int(qty)
        for p, q in self.level_sizes(row, side):
            if remaining <= 0:
                break
            if q == 0:
                continue
            if limit is not None and ((buy and p > limit) or (not buy and p < limit)):
                break
            f = min(remaining, q)
            if cash is not None and buy:
                px = p / 100
                if self.trace is not None:
                    self.trace.append(cash / px)
                cap = int(math.floor(cash / px + 1e-9))
                if cap <= 0:
                    break
                f = min(f, cap)
                cash = cash - px * f
            key = (s, side, p)
            self.consumed[key] = self.consumed.get(key, 0) + f
            self._best.clear()
            fills.append((p, f))
            remaining -= f
        return fills

    def stats(self, row):
        """Synthetic-book statistics of ``row`` (§9.5.5): (bid size, bid VWAP, ask size, ask VWAP)."""
        out = []
        for side in _SIDES:
            lv = self.level_sizes(row, side)
            size = sum(q for _, q in lv)
            vwap = sum(p / 100 * q for p, q in lv) / size if size > 0 else 0.0
            out += [float(size), float(vwap)]
        return tuple(out)


class Fifo:
    """FIFO lot ledger of one symbol (spec §9.7.2): open lots all of one sign, oldest first."""

    def __init__(self):
        self.lots = deque()  # [signed qty, price]
        self.position = 0
        self.realized = 0.0

    def fill(self, q, px):
        """Apply a fill of signed quantity ``q`` (+ buy, - sell) at ``px`` (currency); returns realised P&L."""
        q = int(q)
        self.position += q
        realized = 0.0
        while q != 0 and self.lots and (self.lots[0][0] > 0) != (q > 0):
            lot = self.lots[0]  # MUTATION-POINT lot-order
            m = min(abs(q), abs(lot[0]))
            if lot[0] > 0:
                realized += m * (px - lot[1])
                lot[0] -= m
                q += m
            else:
                realized += m * (lot[1] - px)
                lot[0] += m
                q -= m
            if lot[0] == 0:
                self.lots.popleft()  # MUTATION-POINT lot-pop
        if q != 0:
            self.lots.append([q, px])
        self.realized += realized
        return realized

    def unrealized(self, mark):
        """Σ over open lots of qty·(mark − price) (long) / |qty|·(price − mark) (short), §9.7.3."""
        return float(sum(lot[0] * (mark - lot[1]) for lot in self.lots))


def forward_fill_records(n, rows, values, initial):
    """Value after each of the ``n`` rows from per-row records (row index, value after that row's fills).

    ``rows`` must be non-decreasing; several records on one row: the last wins. Before the
    first record the value is ``initial``. Vectorised, O(n).
    """
    rows = np.asarray(rows, dtype=np.int64)
    vals = np.asarray(values, dtype=float)
    if len(vals) == 0:
        return np.full(n, float(initial))
    # idx[j] = the last record on a row <= j (-1 before the first), in O(n)
    last = np.append(rows[1:] != rows[:-1], True)
    idx = np.full(n, -1, dtype=np.int64)
    idx[rows[last]] = np.flatnonzero(last)
    np.maximum.accumulate(idx, out=idx)
    return np.where(idx >= 0, vals[np.maximum(idx, 0)], float(initial))


def max_drawdown(c0, points):
    """Max over points of (running peak − equity), running peak = max(C0, points so far) (§9.7.6)."""
    pts = np.concatenate([[float(c0)], np.asarray(points, dtype=float)])
    return float(np.max(np.maximum.accumulate(pts) - pts))
