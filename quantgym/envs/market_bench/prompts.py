"""Prompt rendering of a Market-Bench round (spec §5, §9.15): the view an LLM agent gets.

One template per strategy: the rules of §9.1, §9.4-§9.7 and the strategy's own section worded
as instructions, the round's parameters with units, the instrument and currency ("synthetic
data" for the pairs rounds), the input files and columns, the entry point and the exact metric
keys of §9.11, the allowed imports and the time limit.
"""

from __future__ import annotations

from typing import Any

from quantgym.envs.market_bench.config import ALLOWED_IMPORTS, METRIC_KEYS, PATH_KEY

TITLES = {
    "scheduled": "Strategy 1 - scheduled market-order execution",
    "pairs": "Strategy 2 - pairs mean-reversion (z-score, cooldown, IOC limit orders, order delay)",
    "delta_hedge": "Strategy 3 - delta hedging (FOK limit orders, exchange delay, minimum hedge gap)",
}


def ns_words(ns: int) -> str:
    """``120000000`` -> ``"120,000,000 ns (120 ms)"``."""
    ns = int(ns)
    if ns % 1_000_000_000 == 0:
        w = f"{ns // 1_000_000_000} s"
    elif ns % 1_000_000 == 0:
        w = f"{ns // 1_000_000} ms"
    elif ns % 1_000 == 0:
        w = f"{ns // 1_000} us"
    else:
        w = f"{ns} ns"
    return f"{ns} ns ({w})"


def _levels_cols(L: int) -> str:
    return ", ".join(f"bid_px_{i:02d}, bid_sz_{i:02d}, ask_px_{i:02d}, ask_sz_{i:02d}" for i in range(L))


COMMON_RULES = """\
## Input data rules
- `book.csv` has a header row and the columns, in this order: `ts_event, symbol, {levels_cols}`
  (L = {L} levels per side; level 00 is the best).
- `ts_event` is an int64: nanoseconds since the Unix epoch, UTC. Rows are sorted by `ts_event`;
  the file order is the processing order.
- Prices are in {currency}. Prices are multiples of 0.01; key them by integer ticks
  (`round(px / 0.01)`), never by float. Sizes are integer shares.
- Guaranteed: all L levels are present on both sides; bid prices strictly decrease and ask
  prices strictly increase with the level index; `bid_px_00 < ask_px_00`.
- The file is the RAW book: your own fills never change it. Raw mid = (`bid_px_00` + `ask_px_00`)/2
  and raw spread = `ask_px_00` - `bid_px_00` of the row.

## Time and event order
- first_at_or_after(X, t) = the row of symbol X with the smallest `ts_event` >= t (inclusive).
  If there is none, the order expires: no fill, no consumption; it still counts as sent, and it
  stays pending (in flight) until the end of the data.
- as_of(X, t) = the row of symbol X with the largest `ts_event` <= t.
- Process the rows in one loop in file order. At each row: (a) it becomes its symbol's current
  raw book; (b) that symbol's orders due by then are matched against it, in schedule/send order,
  each one seeing the liquidity consumed by the ones before; (c) marks and signals are computed
  and the equity point is recorded; (d) decisions may send new orders. An order is never matched
  on the row where it was decided.

## Synthetic book (you must track the liquidity your own trades remove)
- consumed[(symbol, side, price_ticks)] = total quantity your own fills took at that side and
  price since the start. It starts empty, only grows, NEVER decays or resets, and applies to
  every later row whatever the raw size at that price does (grows, shrinks, leaves the top
  levels and comes back).
- Buys take the ask side, sells take the bid side.
- Synthetic size of a level = max(0, raw size - consumed[symbol, side, price]).
- Synthetic best bid (ask) = the first level (lowest index) with synthetic size > 0. Synthetic
  mid = (best bid + best ask)/2, synthetic spread = best ask - best bid. If a side has no level
  with synthetic size > 0, the synthetic mid and spread are undefined.

## Matching
- Walk: a buy visits ask levels 00..L-1 of the match row, skips levels of synthetic size 0,
  stops at the first level priced above its limit (a market order has no limit), and at each
  level fills f = min(remaining, synthetic size) at that level's price, then consumed += f. A
  sell mirrors this on the bid side (stops at the first level priced below its limit). Each
  (order, level) with f > 0 is ONE fill and ONE FIFO lot.
{matching_extra}
## Accounting
- Cash starts at C0. Buy fill: cash -= px*f; sell fill: cash += px*f. No fees, commissions,
  borrow cost, interest or rebates. Short selling allowed (without limit).
- FIFO lots per symbol: a queue of open lots (qty, price), all of one sign. A fill of signed
  quantity q (+ buy, - sell) at price p first closes opposite-sign lots from the OLDEST:
  m = min(|q|, lot qty); realised += m*(p - lot price) when closing a long lot, m*(lot price - p)
  when closing a short one. The rest of q opens a new lot at the back (a sell larger than the
  long position closes it and opens a short).
- Unrealised P&L = sum over open lots of qty*(mark - price) (long) or qty*(price - mark) (short),
  with mark = the RAW mid of the symbol's as_of row (never the synthetic mid).
- Equity = cash + sum of position*raw mid (= C0 + realised + unrealised).
- Equity curve: point 0 = C0 (before the first row), then one point per row of `book.csv`, after
  that row's fills, in file order{curve_extra}. Grid points, orders and fills add no points.
- max_drawdown = max over the points of (running peak - equity), running peak = max(C0, points
  so far); currency units, >= 0. Example: C0 = 100, points 95, 97, 96 -> 5.
"""

MATCHING = {
    "scheduled": "- Market orders: fill what the walk gives; the remainder is cancelled (never carried).\n",
    "pairs": (
        "- IOC limit orders: fill what the walk gives within the limit; the remainder is cancelled.\n"
        "- Limit prices come from the SYNTHETIC book of the decision time (as_of the order's symbol,\n"
        "  with the consumption up to that moment). In ticks, with b, a the synthetic best bid/ask,\n"
        "  m = (a + b)/2, s = a - b: buy limit = floor(m + k*s + 1e-6), sell limit = ceil(m - k*s - 1e-6).\n"
    ),
    "delta_hedge": (
        "- FOK limit orders: sum the synthetic sizes of the levels within the limit; if the sum is\n"
        "  less than the quantity the order is KILLED (no fill, no consumption); otherwise walk (it\n"
        "  fills exactly the quantity).\n"
        "- Limit prices come from the SYNTHETIC book of the decision time (as_of, with the\n"
        "  consumption up to that moment). In ticks, with b, a the synthetic best bid/ask,\n"
        "  m = (a + b)/2, s = a - b: buy limit = floor(m + k*s + 1e-6), sell limit = ceil(m - k*s - 1e-6).\n"
    ),
}

STRATEGY_RULES = {
    "scheduled": """\
## Strategy rules (scheduled market orders)
- `schedule.csv` (columns `ts_event, side, qty`; side `BUY`/`SELL`; qty int > 0) lists market
  orders. Take them in (`ts_event`, file order); each executes as a market order against
  first_at_or_after(`ts_event`); several orders on one row execute in that order.
- Cash rule: a buy may not make cash negative. At each level with synthetic size > 0,
  f = min(remaining, synthetic size, floor(cash/px + 1e-9)) with the cash left at that point;
  when floor(cash/px + 1e-9) is 0 the walk stops and the rest is cancelled. Sells are never capped.
- unfilled_qty = sum of (requested - filled) over all orders: expired, book exhausted or cash-capped.
- Book statistics on the LAST row of the file after all fills: syn_bid_size = sum of the L bid
  levels' synthetic sizes; syn_bid_vwap = sum(px*synthetic size)/syn_bid_size (0.0 when the size
  is 0); the same for the ask side.
""",
    "pairs": """\
## Strategy rules (pairs, leg A = {symbol_a}, leg B = {symbol_b})
- Signal, on every row, after its matching: once both symbols have had a row,
  s = mid_A - beta*mid_B with the raw mids of the as_of rows of A and B. Append s to a window of
  the last W values (current one included); every row appends, whichever symbol it belongs to
  and even if no mid changed. When the window holds W values: mu = mean, sigma = population
  standard deviation, ddof = 0 (numpy's default, not pandas'), z = (s - mu)/sigma if
  sigma > 1e-12, else undefined. While z is undefined nothing is decided.
- State FLAT, LONG (long spread: +A, -B) or SHORT (-A, +B); starts FLAT. A decision is taken on
  a row only when z is defined and no order of either leg is pending (sent, neither matched nor
  expired; an order with no matching row stays pending to the end):
  FLAT: if z > z_in and no SHORT cooldown -> SHORT; else if z < -z_in and no LONG cooldown -> LONG.
  The cooldown of direction D is active while t < t_exit(D) + cooldown, t_exit(D) = time of the
  last exit decision out of D (none at start); it never blocks the other direction.
  LONG or SHORT: if |z| < z_out -> FLAT, and t_exit(old state) = t.
  Strict comparisons; no stop-loss; no direct LONG<->SHORT flip.
- Entry size: E = equity at this row; Q_A = floor(alloc*E/(mid_A + beta*mid_B) + 1e-9) with raw
  mids; Q_B = floor(beta*Q_A + 0.5). Targets: LONG (+Q_A, -Q_B), SHORT (-Q_A, +Q_B), exit (0, 0).
  A decision (entry or exit) is skipped, leaving state, cooldown and counters unchanged, if
  either leg's synthetic book has an empty side, and an entry also if Q_A = 0.
- Orders: per leg (A first), q = target - current position; if q != 0 an IOC limit order for |q|
  shares is sent at t, priced from that leg's synthetic book, matched at
  first_at_or_after(leg, t + delay). The state changes at the decision, whatever the fills.
- Partial or zero fills leave unbalanced legs or a residual; no repair order is sent; the next
  decision's orders (target - position) absorb them. One cash account for both symbols; no cash
  check (cash may go negative).
- In the equity curve both symbols are marked at their as_of raw mids (a symbol with no row yet
  has position 0).
""",
    "delta_hedge": """\
## Strategy rules (delta hedging)
- `option_delta.csv` (columns `ts_event, option_delta`; int, shares-equivalent): option_delta(t)
  = the value of the last row with `ts_event` <= t (+1,000 = the options book behaves like 1,000
  shares long). The options' own P&L is not tracked; every P&L figure is the stock leg's.
- Grid: t_n = t_0 + n*interval for n = 0, 1, ... while t_n <= the last book `ts_event`;
  t_0 = the first book `ts_event`. At equal time the row is processed before the grid point.
- At t_n: net = option_delta(t_n) + position (after every fill matched on rows with
  `ts_event` <= t_n); q = lot*floor(|fraction*net|/lot + 1e-9); side SELL if net > 0, BUY if
  net < 0. A FOK order for q shares is sent unless: q = 0; or a hedge is in flight (sent, neither
  matched nor expired; a hedge with no matching row stays in flight to the end); or
  t_n - t_fill < min_gap, where t_fill = the send time of the last hedge that FILLED (killed and
  expired hedges never count; none at start); or the synthetic book of as_of(t_n) has an empty
  side. A skipped grid point changes nothing.
- The limit comes from the synthetic book of as_of(t_n); the order is matched by FOK at
  first_at_or_after(t_n + delay). An expired hedge counts as killed.
- final_option_delta = option_delta(last book `ts_event`); final_net_delta = that + final
  position. No cash check; cash may go negative.
""",
}

METRIC_DOC = {
    "scheduled": ("final_cash, final_position (shares), realized_pnl, unrealized_pnl, final_equity, "
                  "max_drawdown, n_fills (level fills), filled_qty (sum |fill|), unfilled_qty, syn_bid_size, "
                  "syn_ask_size, syn_bid_vwap, syn_ask_vwap"),
    "pairs": ("final_cash, final_position_a, final_position_b, realized_pnl and unrealized_pnl (both legs "
              "summed), final_equity, max_drawdown, n_entries, n_exits (decisions taken), n_orders (leg orders "
              "sent, expired included), n_fills, filled_qty_a, filled_qty_b, fill_vwap_a, fill_vwap_b "
              "(sum px*|f| / sum |f| over all fills of the leg, both sides; 0.0 without fills), final_z "
              "(last defined z; 0.0 if none)"),
    "delta_hedge": ("final_cash, final_position, final_option_delta, final_net_delta, realized_pnl, "
                    "unrealized_pnl, final_equity, max_drawdown, n_hedges_sent, n_hedges_filled, n_hedges_killed "
                    "(sent = filled + killed), n_fills, filled_qty"),
}


def params_block(strategy: str, params: dict[str, Any], currency: str) -> str:
    """The round's parameters with units, one per line."""
    p = params
    lines = []
    if strategy == "scheduled":
        lines.append(f"- C0 (starting cash) = {p['c0']} {currency}")
        lines.append("- the order schedule is the file `schedule.csv`")
    elif strategy == "pairs":
        lines += [
            f"- leg A symbol = {p['symbol_a']}, leg B symbol = {p['symbol_b']}",
            f"- beta = {p['beta']}", f"- W (window, number of spread values) = {p['window']}",
            f"- z_in (entry threshold) = {p['z_in']}", f"- z_out (exit threshold) = {p['z_out']}",
            f"- cooldown = {ns_words(p['cooldown_ns'])}", f"- k (limit = mid +/- k*spread) = {p['k']}",
            f"- delay (order to exchange) = {ns_words(p['delay_ns'])}",
            f"- alloc (fraction of equity per entry) = {p['alloc']}", f"- C0 (starting cash) = {p['c0']} {currency}",
        ]
    else:
        lines += [
            f"- C0 (starting cash) = {p['c0']} {currency}", f"- interval (grid step) = {ns_words(p['interval_ns'])}",
            f"- delay (exchange delay) = {ns_words(p['delay_ns'])}", f"- fraction (of the net delta hedged) = {p['fraction']}",
            f"- lot = {p['lot']} shares", f"- min_gap (minimum time between hedges) = {ns_words(p['min_gap_ns'])}",
            f"- k (limit = mid +/- k*spread) = {p['k']}",
        ]
    return "\n".join(lines)


def render_prompt(strategy: str, params: dict[str, Any], meta: dict[str, Any], input_files: dict[str, str],
                  time_limit_s: float, levels: int) -> str:
    """The full prompt of a round (spec §9.15)."""
    currency = meta.get("currency", "currency units")
    synthetic = bool(meta.get("synthetic"))
    data_line = (f"SYNTHETIC DATA: the book is generated by a seeded random process; the symbols "
                 f"{params.get('symbol_a', 'KO')} and {params.get('symbol_b', 'PEP')} are labels only."
                 if synthetic else
                 f"Data: {meta.get('instrument', 'user-supplied book')}; currency {currency}."
                 + (" Level sizes are randomised (100..2,000 shares); prices are the real ones." if meta.get("source") else ""))
    if strategy == "delta_hedge" and not synthetic:
        data_line += " The option-delta series is a seeded random walk (synthetic)."
    cols = {"book.csv": f"ts_event, symbol, {_levels_cols(levels)}",
            "schedule.csv": "ts_event, side, qty", "option_delta.csv": "ts_event, option_delta"}
    files = "\n".join(f"- `{n}` (columns: {cols.get(n, '?')}): {path}" for n, path in input_files.items())
    keys = METRIC_KEYS[strategy]
    rnd = meta.get("round")
    head = (f"# Market-Bench {meta.get('task_version', '')} - {TITLES[strategy]}"
            + (f", round {rnd}" if rnd else "") + "\n\n"
            "Write a Python backtester for the strategy below. It must follow every rule exactly: your\n"
            "metrics are compared with a verified reference implementation (mean absolute error).\n\n"
            f"{data_line}\n\n## Parameters\n{params_block(strategy, params, currency)}\n\n## Input files\n{files}\n\n")
    body = COMMON_RULES.format(levels_cols=_levels_cols(levels), L=levels, currency=currency,
                               matching_extra=MATCHING[strategy],
                               curve_extra="" if strategy != "pairs" else " (both symbols marked at their as_of raw mids)")
    strat = STRATEGY_RULES[strategy].format(symbol_a=params.get("symbol_a", "A"), symbol_b=params.get("symbol_b", "B"))
    contract = (
        "## Output contract\n"
        "Define a function `run_backtest(inputs: dict[str, str]) -> dict[str, float]`. `inputs` maps each\n"
        "input file name (e.g. \"book.csv\") to its path; read the files from there. Return ONE dict (a JSON\n"
        "object) holding every key below as a number (counts as numbers too; currency = the round's\n"
        f"currency, quantities in shares). Do not round. Keys ({len(keys)}): {', '.join(keys)}.\n"
        f"Meaning: {METRIC_DOC[strategy]}.\n"
        f"Optional: also return `{PATH_KEY}` (list of floats: C0, then one equity point per book row); it is\n"
        "compared with the reference path (correlation, reported beside the score). Extra keys are ignored.\n"
        "A missing, non-numeric or non-finite value makes the attempt FAILED.\n\n"
        "## Environment\n"
        f"Allowed imports: {', '.join(ALLOWED_IMPORTS)}. Anything else (network, subprocesses, writing\n"
        f"files, other modules) fails the attempt. Execution time limit: {time_limit_s:g} s of CPU time.\n"
        "Your code runs in a separate process; only the input files above are readable. Reply with the\n"
        "complete Python source.\n"
    )
    return head + body + "\n" + strat + "\n" + contract
