"""Strategy 1 reference: scheduled market-order execution (spec §4.1, §9.8).

Each schedule order (taken in (``ts_event``, file order)) executes as a market order against
the first book row at or after its time, walking the synthetic book (several levels, partial
fills when exhausted, buys capped by cash). FIFO realised P&L, unrealised P&L at the raw mid,
equity curve, max drawdown and the synthetic-book statistics of the last row.
"""

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.book import BookData, Fifo, SyntheticBook, forward_fill_records, max_drawdown  # quantgym-internal


def backtest_scheduled(book, schedule, c0, trace=None):
    """Run strategy 1 on a raw book.

    Parameters
    ----------
    book : BookData, DataFrame or path
        ``book.csv`` of one symbol (spec §9.1).
    schedule : DataFrame or path
        ``schedule.csv``: ``ts_event`` (ns), ``side`` (``BUY``/``SELL``), ``qty`` (shares > 0).
    c0 : float
        Starting cash (currency of the book).
    trace : list, optional
        If given, receives every ``cash / px`` of the cash cap (builder checks, spec §9.14).

    Returns
    -------
    dict
        The 13 keys of spec §9.11 (S1) plus ``equity_curve`` (list: C0, then one point per row).
    """
    bk = book if isinstance(book, BookData) else BookData(book)
    sch = schedule if isinstance(schedule, pd.DataFrame) else pd.read_csv(schedule)
    order = np.argsort(sch["ts_event"].to_numpy(dtype=np.int64), kind="stable")
    sb = SyntheticBook(bk)
    sb.trace = trace
    led = Fifo()
    cash = float(c0)
    n_fills = filled = unfilled = 0
    rec_rows, rec_cash, rec_pos = [], [], []
    ts_col, side_col, qty_col = sch["ts_event"].tolist(), sch["side"].tolist(), sch["qty"].tolist()
    for i in order:
        t = int(ts_col[i])
        buy = str(side_col[i]).strip().upper() == "BUY"
        qty = int(qty_col[i])
        row = int(np.searchsorted(bk.ts, t, side="left"))  # first_at_or_after (one symbol)
        if row >= bk.n:
            unfilled += qty  # expired: no fill, no consumption
            continue
        fills = sb.walk(row, buy, qty, cash=cash if buy else None)
        got = 0
        for p, f in fills:
            px = p / 100
            if buy:
                cash = cash - px * f
            else:
                cash = cash + px * f
            led.fill(f if buy else -f, px)
            n_fills += 1
            got += f
        filled += got
        unfilled += qty - got
        rec_rows.append(row)
        rec_cash.append(cash)
        rec_pos.append(led.position)
    cash_path = forward_fill_records(bk.n, rec_rows, rec_cash, float(c0))
    pos_path = forward_fill_records(bk.n, rec_rows, rec_pos, 0.0)
    curve = cash_path + pos_path * bk.mid
    mark = float(bk.mid[-1])
    bid_size, bid_vwap, ask_size, ask_vwap = sb.stats(bk.n - 1)
    points = curve.tolist()  # the equity curve: C0, then one point per row
    points.insert(0, float(c0))
    return {
        "final_cash": cash,
        "final_position": float(led.position),
        "realized_pnl": float(led.realized),
        "unrealized_pnl": led.unrealized(mark),
        "final_equity": cash + led.position * mark,
        "max_drawdown": max_drawdown(c0, curve),
        "n_fills": float(n_fills),
        "filled_qty": float(filled),
        "unfilled_qty": float(unfilled),
        "syn_bid_size": bid_size,
        "syn_ask_size": ask_size,
        "syn_bid_vwap": bid_vwap,
        "syn_ask_vwap": ask_vwap,
        "equity_curve": points,
    }
