"""Strategy 3 reference: delta hedging with FOK limits, exchange delay and minimum gap (spec §4.3, §9.10).

On the grid t_n = t_0 + n·Δ (t_0 = first book row, t_n <= last row; the row is processed first
at equal time): net = option_delta(t_n) + position, q = lot·floor(|f·net|/lot + 1e-9), a FOK
order towards flat priced from the synthetic book ``as_of(t_n)``, matched at
``first_at_or_after(t_n + d)``. Skipped when q = 0, a hedge is in flight, t_n − t_fill < g
(t_fill = send time of the last *filled* hedge) or a synthetic side is empty.
"""

import math

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.book import BookData, Fifo, SyntheticBook, forward_fill_records, max_drawdown  # quantgym-internal


def backtest_delta_hedge(book, option_delta, c0, interval_ns, delay_ns, fraction, lot, min_gap_ns, k):
    """Run strategy 3.

    Parameters
    ----------
    book : BookData, DataFrame or path
        ``book.csv`` of one symbol.
    option_delta : DataFrame or path
        ``option_delta.csv``: ``ts_event`` (ns), ``option_delta`` (int, shares-equivalent).
    c0 : float
        Starting cash. interval_ns, delay_ns, min_gap_ns: Δ, d, g in ns. fraction: f.
        lot: shares per lot. k: limit bracket in spreads.

    Returns
    -------
    dict
        The 13 keys of spec §9.11 (S3) plus ``equity_curve``.
    """
    bk = book if isinstance(book, BookData) else BookData(book)
    od = option_delta if isinstance(option_delta, pd.DataFrame) else pd.read_csv(option_delta)
    d_ts = od["ts_event"].to_numpy(dtype=np.int64)
    d_val = od["option_delta"].to_numpy(dtype=np.int64)
    ts = bk.ts
    t0, t_last = int(ts[0]), int(ts[-1])
    grid = t0 + np.arange((t_last - t0) // int(interval_ns) + 1, dtype=np.int64) * int(interval_ns)
    di = np.searchsorted(d_ts, grid, side="right") - 1
    od_grid = np.where(di >= 0, d_val[np.maximum(di, 0)], 0)
    match_rows = np.searchsorted(ts, grid + int(delay_ns), side="left")  # MUTATION-POINT s3-delay
    asof_rows = np.searchsorted(ts, grid, side="right") - 1  # as_of(t_n)

    sb = SyntheticBook(bk)
    led = Fifo()
    cash = float(c0)
    sent = filled_h = killed = n_fills = filled_qty = 0
    t_fill = None
    pending = None  # (match row or -1, send time, qty, buy, limit)
    rec_rows, rec_cash, rec_pos = [], [], []

    def settle(p):
        nonlocal cash, filled_h, killed, n_fills, filled_qty, t_fill
        row, t_sent, q, buy, limit = p
        if row < 0 or sb.available(row, buy, limit) < q:
            killed += 1  # killed (or expired): nothing consumed, t_fill unchanged
            return
        for tk, f in sb.walk(row, buy, q, limit=limit):
            px = tk / 100
            cash = cash + px * f if not buy else cash - px * f
            led.fill(f if buy else -f, px)
            n_fills += 1
            filled_qty += f
        filled_h += 1
        t_fill = t_sent
        rec_rows.append(row)
        rec_cash.append(cash)
        rec_pos.append(led.position)

    for n in range(len(grid)):
        t = int(grid[n])
        if pending is not None and pending[0] >= 0 and ts[pending[0]] <= t:
            settle(pending)
            pending = None
        if pending is not None:
            continue  # a hedge is in flight (an order with no matching row stays in flight)
        net = int(od_grid[n]) + led.position
        q = lot * int(math.floor(abs(fraction * net) / lot + 1e-9))
        if q == 0:
            continue
        if t_fill is not None and t - t_fill < min_gap_ns:
            continue
        r = int(asof_rows[n])
        if sb.best(r) is None:
            continue
        buy = net < 0  # MUTATION-POINT hedge-sign
        limit = sb.limit_price(r, buy, k)
        m = int(match_rows[n])  # first_at_or_after(t_n + d)
        sent += 1
        pending = (m if m < bk.n else -1, t, q, buy, limit)
    if pending is not None:
        settle(pending)

    cash_path = forward_fill_records(bk.n, rec_rows, rec_cash, float(c0))
    pos_path = forward_fill_records(bk.n, rec_rows, rec_pos, 0.0)
    curve = cash_path + pos_path * bk.mid
    mark = float(bk.mid[-1])
    di_last = int(np.searchsorted(d_ts, t_last, side="right")) - 1
    final_od = int(d_val[di_last]) if di_last >= 0 else 0
    points = curve.tolist()  # the equity curve: C0, then one point per row
    points.insert(0, float(c0))
    return {
        "final_cash": cash,
        "final_position": float(led.position),
        "final_option_delta": float(final_od),
        "final_net_delta": float(final_od + led.position),
        "realized_pnl": float(led.realized),
        "unrealized_pnl": led.unrealized(mark),
        "final_equity": cash + led.position * mark,
        "max_drawdown": max_drawdown(c0, curve),
        "n_hedges_sent": float(sent),
        "n_hedges_filled": float(filled_h),
        "n_hedges_killed": float(killed),
        "n_fills": float(n_fills),
        "filled_qty": float(filled_qty),
        "equity_curve": points,
    }
