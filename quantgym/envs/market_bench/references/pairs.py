"""Strategy 2 reference: pairs mean-reversion with cooldown, IOC limits and order delay (spec §4.2, §9.9).

Signal on every row once both symbols have had one: s = mid_A − β·mid_B (raw mids of the
``as_of`` rows), z over the last W spreads (population std, ddof = 0). FLAT → SHORT when
z > z_in, → LONG when z < −z_in (per-direction cooldown after an exit); LONG/SHORT → FLAT when
|z| < z_out. Decisions only while no leg order is pending. Orders: IOC limits from the leg's
synthetic book, matched at ``first_at_or_after(leg, t + delay)``.

The spread/z series and the as-of lookups depend on the input only and are vectorised; the
loop visits decision and matching events only (spec §9 implementation note).
"""

import math

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.book import BookData, Fifo, SyntheticBook, forward_fill_records, max_drawdown  # quantgym-internal

FLAT, LONG, SHORT = 0, 1, -1


def pairs_zscore(book, beta, window, symbol_a="KO", symbol_b="PEP"):
    """Spread and z-score on every row (spec §9.9.2).

    Returns
    -------
    (mid_a, mid_b, asof_a, asof_b, z) : float64[N] ×2, int64[N] ×2, float64[N]
        Raw as-of mids (NaN before a symbol's first row), as-of row indices (-1 before) and
        z (NaN while undefined: before both symbols, warm-up of W−1 spreads, σ <= 1e-12).
    """
    a, b = book.code(symbol_a), book.code(symbol_b)
    asof_a, asof_b = book.asof_rows(a), book.asof_rows(b)
    mid_a = np.where(asof_a >= 0, book.mid[np.maximum(asof_a, 0)], np.nan)
    mid_b = np.where(asof_b >= 0, book.mid[np.maximum(asof_b, 0)], np.nan)
    return mid_a, mid_b, asof_a, asof_b, spread_zscore(mid_a, mid_b, asof_a, asof_b, beta, window)


def spread_zscore(mid_a, mid_b, asof_a, asof_b, beta, window):
    """z of the spread mid_A − β·mid_B over the last W spreads from the first row with both symbols (§9.9.2)."""
    z = np.full(len(mid_a), np.nan)
    both = np.flatnonzero((asof_a >= 0) & (asof_b >= 0))
    if len(both):
        first = int(both[0])
        spread = mid_a[first:] - beta * mid_b[first:]
        roll = pd.Series(spread).rolling(int(window), min_periods=int(window))  # MUTATION-POINT window
        mu = roll.mean().to_numpy()
        sd = roll.std(ddof=0).to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            zz = np.where(sd > 1e-12, (spread - mu) / sd, np.nan)
        z[first:] = zz
    return z


def _next(idx, j):
    """Smallest element of sorted ``idx`` that is >= j, or a huge sentinel."""
    i = int(idx.searchsorted(j, side="left"))
    return int(idx[i]) if i < len(idx) else 1 << 62


def backtest_pairs(book, beta, window, z_in, z_out, cooldown_ns, k, delay_ns, alloc, c0,
                   symbol_a="KO", symbol_b="PEP", trace=None):
    """Run strategy 2 on a two-symbol raw book.

    Parameters
    ----------
    book : BookData, DataFrame or path
        ``book.csv`` holding both symbols (A = ``symbol_a``, B = ``symbol_b``).
    beta, window, z_in, z_out : float, int, float, float
        Hedge ratio β, window W (spreads), entry and exit thresholds.
    cooldown_ns, delay_ns : int
        Re-entry cooldown per direction and order-to-exchange delay (ns).
    k : float
        Limit = synthetic mid ± k·synthetic spread (§9.6.4).
    alloc, c0 : float
        Fraction of equity per entry and starting cash.
    trace : list, optional
        If given, receives ``alloc·E/(mid_A + β·mid_B)`` of every entry decision (builder checks).

    Returns
    -------
    dict
        The 16 keys of spec §9.11 (S2) plus ``equity_curve``.
    """
    bk = book if isinstance(book, BookData) else BookData(book)
    a, b = bk.code(symbol_a), bk.code(symbol_b)
    mid_a, mid_b, asof_a, asof_b, z = pairs_zscore(bk, beta, window, symbol_a, symbol_b)
    ts = bk.ts
    n = bk.n
    with np.errstate(invalid="ignore"):
        up = np.flatnonzero(z > z_in)
        dn = np.flatnonzero(z < -z_in)
        ex = np.flatnonzero(np.abs(z) < z_out)
    sb = SyntheticBook(bk)
    led = {a: Fifo(), b: Fifo()}
    cash = float(c0)
    state = FLAT
    t_exit = {LONG: None, SHORT: None}
    n_entries = n_exits = n_orders = n_fills = 0
    qty = {a: 0, b: 0}
    notional = {a: 0.0, b: 0.0}
    rec_rows, rec_cash, rec_pa, rec_pb = [], [], [], []

    def cool_start(direction, j):
        te = t_exit[direction]
        if te is None:
            return j
        return max(j, int(ts.searchsorted(te + cooldown_ns, side="left")))

    def next_decision(j):
        """First row >= j where a decision is taken (§9.9.3-§9.9.4): z beyond the threshold of the
        current state, no cooldown, and both legs' synthetic books with two non-empty sides.
        Candidate rows come from the vectorised z arrays in chunks; only they are checked."""
        chunk = 16
        while j < n:
            if state == FLAT:
                cu = up[up.searchsorted(cool_start(SHORT, j)):][:chunk]
                cd = dn[dn.searchsorted(cool_start(LONG, j)):][:chunk]
                limit = min(int(cu[-1]) if len(cu) == chunk else n, int(cd[-1]) if len(cd) == chunk else n)
                cands = np.sort(np.concatenate([cu, cd]))
            else:
                cands = ex[ex.searchsorted(j):][:chunk]
                limit = int(cands[-1]) if len(cands) == chunk else n
            for c, r_a, r_b in zip(cands.tolist(), asof_a[cands].tolist(), asof_b[cands].tolist()):
                if c > limit:
                    break
                if sb.best(r_a) is not None and sb.best(r_b) is not None:
                    return c
            j = limit + 1
            chunk = min(chunk * 4, 4096)
        return n

    j = 0
    while j < n:
        jd = next_decision(j)
        if jd >= n:
            break
        new_state = FLAT if state != FLAT else (SHORT if z[jd] > z_in else LONG)
        ra, rb = int(asof_a[jd]), int(asof_b[jd])
        if new_state == FLAT:
            target = {a: 0, b: 0}
        else:
            equity = cash + led[a].position * mid_a[jd] + led[b].position * mid_b[jd]
            raw_q = alloc * equity / (mid_a[jd] + beta * mid_b[jd])
            if trace is not None:
                trace.append(raw_q)
            q_a = int(math.floor(raw_q + 1e-9))
            if q_a == 0:
                j = jd + 1
                continue
            q_b = int(math.floor(beta * q_a + 0.5))
            target = {a: q_a, b: -q_b} if new_state == LONG else {a: -q_a, b: q_b}
        t = int(ts[jd])
        if new_state == FLAT:
            t_exit[state] = t
            n_exits += 1
        else:
            n_entries += 1
        state = new_state
        orders = []
        for leg, r in ((a, ra), (b, rb)):
            q = target[leg] - led[leg].position
            if q == 0:
                continue
            buy = q > 0
            limit = sb.limit_price(r, buy, k)
            m = bk.first_at_or_after(leg, t + delay_ns)  # MUTATION-POINT s2-delay
            n_orders += 1
            orders.append((m, leg, buy, abs(q), limit))
        if not orders:
            j = jd + 1
            continue
        if any(o[0] < 0 for o in orders):
            # an order with no matching row stays pending to the end: no further decisions;
            # the other leg's order still executes
            pass
        for m, leg, buy, q, limit in sorted((o for o in orders if o[0] >= 0), key=lambda o: o[0]):
            for tk, f in sb.walk(m, buy, q, limit=limit):
                px = tk / 100
                cash = cash - px * f if buy else cash + px * f
                led[leg].fill(f if buy else -f, px)
                n_fills += 1
                qty[leg] += f
                notional[leg] += px * f
            rec_rows.append(m)
            rec_cash.append(cash)
            rec_pa.append(led[a].position)
            rec_pb.append(led[b].position)
        if any(o[0] < 0 for o in orders):
            break
        j = max(o[0] for o in orders)  # decisions resume on the last matching row, after its matching

    cash_path = forward_fill_records(n, rec_rows, rec_cash, float(c0))
    pa = forward_fill_records(n, rec_rows, rec_pa, 0.0)
    pb = forward_fill_records(n, rec_rows, rec_pb, 0.0)
    curve = cash_path + pa * np.nan_to_num(mid_a) + pb * np.nan_to_num(mid_b)
    return pairs_metrics(c0, curve, mid_a, mid_b, z, cash=cash, pos_a=led[a].position, pos_b=led[b].position,
                         realized=led[a].realized + led[b].realized,
                         unrealized_at=lambda ma, mb: led[a].unrealized(ma) + led[b].unrealized(mb),
                         counts=(n_entries, n_exits, n_orders, n_fills), qty=(qty[a], qty[b]),
                         notional=(notional[a], notional[b]))


def pairs_metrics(c0, curve, mid_a, mid_b, z, *, cash, pos_a, pos_b, realized, unrealized_at, counts, qty, notional):
    """The §9.11 (S2) metrics from the loop's final state and the equity curve (float64[N], one point per row).

    ``unrealized_at(mark_a, mark_b)``: unrealised P&L of the open lots at the last raw mids;
    ``counts`` = (entries, exits, orders, fills); ``qty``/``notional``: filled shares and Σ px·shares per leg.
    """
    n_entries, n_exits, n_orders, n_fills = counts
    ma = float(mid_a[-1]) if np.isfinite(mid_a[-1]) else 0.0
    mb = float(mid_b[-1]) if np.isfinite(mid_b[-1]) else 0.0
    defined = np.flatnonzero(np.isfinite(z))
    points = curve.tolist()  # the equity curve: C0, then one point per row
    points.insert(0, float(c0))
    return {
        "final_cash": cash,
        "final_position_a": float(pos_a),
        "final_position_b": float(pos_b),
        "realized_pnl": float(realized),
        "unrealized_pnl": unrealized_at(ma, mb),
        "final_equity": cash + pos_a * ma + pos_b * mb,
        "max_drawdown": max_drawdown(c0, curve),
        "n_entries": float(n_entries),
        "n_exits": float(n_exits),
        "n_orders": float(n_orders),
        "n_fills": float(n_fills),
        "filled_qty_a": float(qty[0]),
        "filled_qty_b": float(qty[1]),
        "fill_vwap_a": notional[0] / qty[0] if qty[0] else 0.0,
        "fill_vwap_b": notional[1] / qty[1] if qty[1] else 0.0,
        "final_z": float(z[defined[-1]]) if len(defined) else 0.0,
        "equity_curve": points,
    }
