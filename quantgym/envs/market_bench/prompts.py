"""Prompt rendering of a Market-Bench round (spec §5, §9.15): the view an LLM agent gets.

Longer than 500 lines as one job, the text of every round: one place to read what the agent is told.

One template per strategy: the rules of §9.1, §9.4-§9.7 and the strategy's own section worded
as instructions, the round's parameters with units, the instrument and currency ("synthetic
data" for the pairs rounds), the input files and columns, the entry point and the exact metric
keys of §9.11, the allowed imports and the time limit.

Long because most of it is prompt text: three strategies' instructions in three styles.
"""

from __future__ import annotations

from typing import Any

from quantgym.envs.market_bench.config import ALLOWED_IMPORTS, METRIC_KEYS, PATH_KEY
from quantgym.spaces import check_prompt_style

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
                  time_limit_s: float, levels: int, style: str = "full", wall_limit_s: float | None = None) -> str:
    """The prompt of a round (spec §9.15) in ``style`` (:data:`quantgym.spaces.PROMPT_STYLES`).

    ``full`` is the reference prompt. ``compact`` and ``minimal`` keep every rule that changes the
    reference output (parameters, files and columns, metric keys and their meaning, entry point,
    allowed imports, time limits) in terser wording, each stated once. ``time_limit_s`` is the CPU-time
    limit and ``wall_limit_s`` the wall-clock one (both stated: under load the wall limit can fire first). Compact keeps markdown sections,
    the file paths, the data guarantees, the drawdown example and the optional ``equity_curve`` key;
    minimal drops those (the paths reach ``run_backtest`` through ``inputs``), writes one labelled line
    per section and durations in their exact largest unit (``30 s``).

    Raises
    ------
    ValueError
        Unknown ``style``.
    """
    if check_prompt_style(style) != "full":
        return _render_short(strategy, params, meta, input_files, time_limit_s, levels, style, wall_limit_s)
    currency = meta.get("currency", "currency units")
    synthetic = bool(meta.get("synthetic"))
    data_line = (f"SYNTHETIC DATA: the book is generated by a seeded random process; the symbols "
                 f"{params.get('symbol_a', 'KO')} and {params.get('symbol_b', 'PEP')} are labels only."
                 if synthetic else
                 f"Data: {meta.get('instrument', 'user-supplied book')}; currency {currency}."
                 + (" Level sizes are randomised (100..2,000 shares); prices are the real ones." if meta.get("source") else ""))
    if strategy == "delta_hedge" and not synthetic:
        data_line += " The option-delta series is a seeded random walk (synthetic)."
    if meta.get("data_note"):  # task set v2: real data named, what was randomised, the equal-timestamp rule
        data_line = meta["data_note"]
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
        f"files, other modules) fails the attempt. {_limits_full(time_limit_s, wall_limit_s)}\n"
        "Your code runs in a separate process; only the input files above are readable. Reply with the\n"
        "complete Python source.\n"
    )
    return head + body + "\n" + strat + "\n" + contract


# ------------------------------------------------------------------------------ compact / minimal styles
# Every rule that changes the reference output, as (section, compact wording, minimal wording); a
# minimal wording of None drops a compact-only extra (data guarantees, raw spread, the example).
# Sections are headings in compact and line labels in minimal; the column list and the metric keys
# are stated once (the full prompt states both twice).
_Rule = tuple[str, str, "str | None"]
_COMMON_SHORT: tuple[_Rule, ...] = (
    ("Data",
     "`book.csv`: header row; columns `ts_event, symbol`, then per level i = 00..{Lm1}: "
     "`bid_px_i, bid_sz_i, ask_px_i, ask_sz_i` (L = {L} levels per side; 00 = best).",
     "book.csv: header; columns ts_event, symbol, then per level i = 00..{Lm1}: bid_px_i, bid_sz_i, ask_px_i, "
     "ask_sz_i (L = {L}; 00 = best)."),
    ("Data",
     "`ts_event`: int64 ns since the Unix epoch (UTC); rows sorted by it; process the rows in file order.",
     "ts_event: int ns (UTC), sorted; process rows in file order."),
    ("Data",
     "Prices in {currency}, multiples of 0.01: key them by integer ticks (`round(px / 0.01)`), never by float. "
     "Sizes: integer shares.",
     "Prices {currency}: key them by integer ticks round(px/0.01), never by float; sizes int shares."),
    ("Data",
     "Guaranteed: all L levels on both sides; bid prices strictly decrease and ask prices strictly increase "
     "with the level; `bid_px_00 < ask_px_00`.", None),
    ("Data",
     "The file is the RAW book (your fills never change it). Raw mid = (`bid_px_00` + `ask_px_00`)/2; raw "
     "spread = `ask_px_00` - `bid_px_00`.",
     "The file is the RAW book (own fills never change it); raw mid = (bid_px_00+ask_px_00)/2."),
    ("Time",
     "first_at_or_after(X, t) = the row of symbol X with the smallest `ts_event` >= t; if none, the order "
     "expires: no fill, no consumption; it counts as sent and stays pending to the end of the data. "
     "as_of(X, t) = the row of X with the largest `ts_event` <= t.",
     "first_at_or_after(X,t) = X's row with min ts_event >= t (none: the order expires: no fill, counts as "
     "sent, pending to the end); as_of(X,t) = X's row with max ts_event <= t."),
    ("Time",
     "Per row, in file order: (a) it becomes its symbol's raw book; (b) that symbol's orders due by then "
     "match against it in schedule/send order, each seeing the liquidity consumed by the earlier ones; "
     "(c) marks, signals and the equity point; (d) decisions may send orders. An order never matches on "
     "the row where it was decided.",
     "Per row: (a) it becomes its symbol's raw book; (b) that symbol's due orders match in schedule/send order, "
     "each seeing earlier consumption; (c) marks, signals, equity point; (d) decisions send orders (never "
     "matched on their decision row)."),
    ("Synthetic book",
     "consumed[(symbol, side, price_ticks)] = total quantity of your own fills at that side and price since "
     "the start: it only grows (NEVER decays or resets) and applies to every later row, whatever the raw size "
     "does. Buys take the ask side, sells the bid side.",
     "consumed[(symbol,side,tick)] += own fill qty (buys take asks, sells bids); never decays or resets; "
     "applies to all later rows."),
    ("Synthetic book",
     "Synthetic size = max(0, raw size - consumed[symbol, side, price]). Synthetic best bid (ask) = the "
     "lowest-index level with synthetic size > 0; synthetic mid = (best bid + best ask)/2, synthetic spread = "
     "best ask - best bid; undefined if a side has no such level.",
     "Syn size = max(0, raw size - consumed); syn best bid/ask = lowest-index level with syn size > 0; "
     "syn mid = (bb+ba)/2, syn spread = ba-bb; undefined if a side has none."),
    ("Matching",
     "Walk: a buy visits ask levels 00..L-1 of the match row, skips synthetic size 0, stops at the first "
     "level priced above its limit (market orders: no limit), fills f = min(remaining, synthetic size) at the "
     "level's price, then consumed += f; a sell mirrors this on the bids (stops at the first level below its "
     "limit). Each (order, level) with f > 0 is ONE fill and ONE FIFO lot.",
     "Walk: a buy visits ask levels 00..L-1 of the match row, skips syn size 0, stops at the first level above "
     "its limit, fills f = min(remaining, syn size) at the level price, consumed += f; sells mirror on bids. "
     "Each (order, level) with f > 0 = one fill = one FIFO lot."),
)
_LIMIT_SHORT = ("Limit prices come from the SYNTHETIC book at decision time (as_of{of}, with the consumption so "
                "far); in ticks, with b, a = synthetic best bid/ask, m = (a + b)/2, s = a - b: buy limit = "
                "floor(m + k*s + 1e-6), sell limit = ceil(m - k*s - 1e-6).")
_LIMIT_MIN = ("Limit from the syn book at decision (as_of{of}, consumption so far), in ticks, b,a = syn best "
              "bid/ask, m = (a+b)/2, s = a-b: buy floor(m+k*s+1e-6), sell ceil(m-k*s-1e-6).")
_MATCHING_SHORT: dict[str, tuple[_Rule, ...]] = {
    "scheduled": (("Matching", "Market orders fill what the walk gives; the rest is cancelled (never carried).",
                   "Market orders: fill what the walk gives, cancel the rest."),),
    "pairs": (("Matching", "IOC limit orders fill what the walk gives within the limit; the rest is cancelled. "
               + _LIMIT_SHORT.format(of=" the order's symbol"),
               "IOC: fill what the walk gives within the limit, cancel the rest. "
               + _LIMIT_MIN.format(of=" of the order's symbol")),),
    "delta_hedge": (("Matching", "FOK limit orders: if the synthetic sizes of the levels within the limit sum to "
                     "less than the quantity, the order is KILLED (no fill, no consumption); otherwise walk (it "
                     "fills exactly the quantity). " + _LIMIT_SHORT.format(of=""),
                     "FOK: if the syn sizes within the limit sum to less than the quantity the order is KILLED "
                     "(no fill, no consumption), else walk. " + _LIMIT_MIN.format(of="")),),
}
_ACCOUNTING_SHORT: tuple[_Rule, ...] = (
    ("Accounting",
     "Cash starts at C0; buy fill cash -= px*f, sell fill cash += px*f. No fees, commissions, borrow cost, "
     "interest or rebates. Short selling allowed (no limit).",
     "cash = C0; buy: cash -= px*f, sell: cash += px*f; No fees or interest; Short selling allowed."),
    ("Accounting",
     "FIFO lots per symbol (open lots (qty, price), all of one sign): a fill of signed quantity q (+ buy, "
     "- sell) at p closes opposite-sign lots oldest first: m = min(|q|, lot qty), realised += m*(p - lot "
     "price) for a long lot, m*(lot price - p) for a short one; the rest of q opens a new lot at the back.",
     "FIFO lots per symbol (one sign): fill q (+buy/-sell) at p closes opposite lots oldest first: "
     "m = min(|q|, lot qty), realised += m*(p - lot px) (long lot) or m*(lot px - p) (short); the rest opens "
     "a lot at the back."),
    ("Accounting",
     "Unrealised P&L = sum over open lots of qty*(mark - price) (long) or qty*(price - mark) (short), mark = "
     "the RAW mid of the symbol's as_of row. Equity = cash + sum of position*raw mid.",
     "Unrealised = sum qty*(mark - px) long, qty*(px - mark) short; mark = raw mid of the as_of row. "
     "Equity = cash + sum position*raw mid."),
    ("Accounting",
     "Equity curve: point 0 = C0, then one point per `book.csv` row after its fills{curve_extra}; grid "
     "points, orders and fills add none. max_drawdown = max over the points of (running peak - equity), "
     "running peak = max(C0, points so far); >= 0.",
     "Curve: C0, then one point per book row after its fills{curve_extra}. max_drawdown = max(running peak "
     "- equity), peak = max(C0, points so far)."),
    ("Accounting", "Example: C0 = 100, points 95, 97, 96 -> max_drawdown 5.", None),
)
_STRATEGY_SHORT: dict[str, tuple[_Rule, ...]] = {
    "scheduled": (
        ("Strategy",
         "`schedule.csv` (columns `ts_event, side, qty`; side `BUY`/`SELL`; qty int > 0): market orders taken in "
         "(`ts_event`, file order), each executed at first_at_or_after(`ts_event`); several on one row execute "
         "in that order.",
         "schedule.csv (columns ts_event, side BUY/SELL, qty int > 0): market orders in (ts_event, file order), "
         "each at first_at_or_after(ts_event); several on a row execute in that order."),
        ("Strategy",
         "Cash rule: a buy may not make cash negative: at each level with synthetic size > 0, f = min(remaining, "
         "synthetic size, floor(cash/px + 1e-9)) with the cash left then; when floor(cash/px + 1e-9) = 0 the walk "
         "stops and the rest is cancelled. Sells are never capped.",
         "Cash rule (buys only): at each level with syn size > 0, f = min(remaining, syn size, "
         "floor(cash/px + 1e-9)) with the cash left; if floor(cash/px + 1e-9) = 0 the walk stops, the rest is "
         "cancelled."),
        ("Strategy",
         "unfilled_qty = sum of (requested - filled) over all orders (expired, book exhausted or cash-capped).",
         "unfilled_qty = sum (requested - filled) over all orders."),
        ("Strategy",
         "On the LAST row after all fills: syn_bid_size = sum of the L bid levels' synthetic sizes, syn_bid_vwap "
         "= sum(px*synthetic size)/syn_bid_size (0.0 if the size is 0); the same for the ask side.",
         "On the LAST row after all fills: syn_bid_size = sum of the L bid syn sizes, syn_bid_vwap = "
         "sum(px*syn size)/syn_bid_size (0.0 if 0); same for asks."),
    ),
    "pairs": (
        ("Strategy",
         "Signal, on every row after its matching, once both symbols have had a row: s = mid_A - beta*mid_B "
         "(raw mids of the as_of rows of A = {symbol_a} and B = {symbol_b}), appended on every row (whichever "
         "symbol, even if no mid changed) to a window of the last W values. With W values: mu = mean, sigma = "
         "population std (ddof = 0, numpy's default), z = (s - mu)/sigma if sigma > 1e-12, else undefined; "
         "while z is undefined nothing is decided.",
         "Signal (every row after matching, once both symbols had a row): s = mid_A - beta*mid_B (raw as_of "
         "mids), appended every row to a window of the last W. When full: mu = mean, sigma = population std "
         "(ddof = 0), z = (s-mu)/sigma if sigma > 1e-12 else undefined (no decision)."),
        ("Strategy",
         "State FLAT (start), LONG (long spread: +A, -B) or SHORT (-A, +B). A decision is taken only when z is "
         "defined and no order of either leg is pending (sent, neither matched nor expired). FLAT: if z > z_in "
         "and no SHORT cooldown -> SHORT; else if z < -z_in and no LONG cooldown -> LONG. The cooldown of D is "
         "active while t < t_exit(D) + cooldown, t_exit(D) = time of the last exit decision out of D (none at "
         "start); it never blocks the other direction. LONG or SHORT: if |z| < z_out -> FLAT and t_exit(old "
         "state) = t. Strict comparisons; no stop-loss; no direct LONG<->SHORT flip.",
         "State FLAT (start), LONG (+A,-B), SHORT (-A,+B). Decide only if z is defined and no order of either "
         "leg is pending (sent, not matched or expired). FLAT: z > z_in and no SHORT cooldown -> SHORT; elif "
         "z < -z_in and no LONG cooldown -> LONG. Cooldown(D) active while t < t_exit(D) + cooldown (t_exit = "
         "last exit out of D; none at start); never blocks the other side. LONG/SHORT: |z| < z_out -> FLAT, "
         "t_exit(old) = t. Strict comparisons; no stop-loss; no LONG<->SHORT flip."),
        ("Strategy",
         "Entry size: E = equity at this row; Q_A = floor(alloc*E/(mid_A + beta*mid_B) + 1e-9) (raw mids); "
         "Q_B = floor(beta*Q_A + 0.5). Targets: LONG (+Q_A, -Q_B), SHORT (-Q_A, +Q_B), exit (0, 0). A decision "
         "is skipped (state, cooldown and counters unchanged) if either leg's synthetic book has an empty side; "
         "an entry also if Q_A = 0.",
         "Entry: E = equity now; Q_A = floor(alloc*E/(mid_A+beta*mid_B) + 1e-9) (raw mids); Q_B = "
         "floor(beta*Q_A + 0.5); targets LONG (+Q_A,-Q_B), SHORT (-Q_A,+Q_B), exit (0,0). Skip a decision "
         "(nothing changes) if either leg's syn book has an empty side, an entry also if Q_A = 0."),
        ("Strategy",
         "Orders: per leg, A first, q = target - position; if q != 0 an IOC limit order for |q| shares is sent "
         "at t (limit from that leg's synthetic book), matched at first_at_or_after(leg, t + delay). The state "
         "changes at the decision, whatever the fills; no repair orders (the next decision's target - position "
         "absorbs residuals). One cash account; no cash check.",
         "Orders per leg, A first: q = target - position; if q != 0 an IOC order for |q| at t (limit from that "
         "leg's syn book), matched at first_at_or_after(leg, t+delay). State changes at the decision whatever "
         "the fills; no repair orders. One cash account; no cash check."),
    ),
    "delta_hedge": (
        ("Strategy",
         "`option_delta.csv` (columns `ts_event, option_delta`; int shares-equivalent): option_delta(t) = value "
         "of the last row with `ts_event` <= t (+1,000 = like 1,000 shares long). Only the stock leg's P&L is "
         "tracked.",
         "option_delta.csv (columns ts_event, option_delta; int shares): option_delta(t) = last row with "
         "ts_event <= t. P&L = stock leg only."),
        ("Strategy",
         "Grid: t_n = t_0 + n*interval (n = 0, 1, ...) while t_n <= the last book `ts_event`; t_0 = the first "
         "book `ts_event`. At equal time the row is processed before the grid point.",
         "Grid: t_n = t_0 + n*interval while t_n <= last book ts_event, t_0 = first book ts_event; a row at "
         "equal time comes first."),
        ("Strategy",
         "At t_n: net = option_delta(t_n) + position (after every fill matched on rows with `ts_event` <= t_n); "
         "q = lot*floor(|fraction*net|/lot + 1e-9); SELL if net > 0, BUY if net < 0. A FOK order for q shares "
         "is sent unless: q = 0; or a hedge is in flight (sent, neither matched nor expired); or t_n - t_fill < "
         "min_gap, t_fill = send time of the last hedge that FILLED (killed and expired ones never count; none "
         "at start); or the synthetic book of as_of(t_n) has an empty side. A skipped grid point changes "
         "nothing.",
         "At t_n: net = option_delta(t_n) + position (fills on rows <= t_n); q = lot*floor(|fraction*net|/lot "
         "+ 1e-9); SELL if net > 0, BUY if net < 0. Send a FOK order for q unless q = 0, a hedge is in flight "
         "(sent, not matched or expired), t_n - t_fill < min_gap (t_fill = send time of the last FILLED hedge; "
         "none at start) or the syn book of as_of(t_n) has an empty side; a skipped point changes nothing."),
        ("Strategy",
         "The limit comes from the synthetic book of as_of(t_n); FOK match at first_at_or_after(t_n + delay). "
         "An expired hedge counts as killed. final_option_delta = option_delta(last book `ts_event`); "
         "final_net_delta = that + final position. No cash check.",
         "Limit from the syn book of as_of(t_n); match at first_at_or_after(t_n + delay); expired = killed. "
         "final_option_delta = option_delta(last book ts_event); final_net_delta = that + final position. "
         "No cash check."),
    ),
}
#: what the metric glossary (METRIC_DOC) adds to the key names, without repeating them (short styles)
_METRIC_NOTES = {
    "scheduled": "quantities in shares; n_fills = level fills; filled_qty = sum |fill|",
    "pairs": ("pnl over both legs; n_entries, n_exits = decisions; n_orders = leg orders sent (expired included); "
              "fill_vwap_a/b = sum px*|f| / sum |f| over the leg's fills (0.0 if none); final_z = last defined z "
              "(0.0 if none)"),
    "delta_hedge": "n_hedges_sent = n_hedges_filled + n_hedges_killed",
}


def _duration(ns: int, style: str) -> str:
    """``ns_words`` (compact) or only its exact largest unit, e.g. ``"30 s"`` (minimal)."""
    return ns_words(ns) if style == "compact" else ns_words(ns).split(" (", 1)[1].rstrip(")")


def _params_short(strategy: str, p: dict[str, Any], currency: str, style: str) -> str:
    if strategy == "scheduled":
        items = [f"C0={p['c0']} {currency}"]
    elif strategy == "pairs":
        items = [f"A={p['symbol_a']}", f"B={p['symbol_b']}", f"beta={p['beta']}", f"W={p['window']}",
                 f"z_in={p['z_in']}", f"z_out={p['z_out']}", f"cooldown={_duration(p['cooldown_ns'], style)}",
                 f"k={p['k']}", f"delay={_duration(p['delay_ns'], style)}",
                 f"alloc{' (equity fraction per entry)' if style == 'compact' else ''}={p['alloc']}",
                 f"C0={p['c0']} {currency}"]
    else:
        items = [f"C0={p['c0']} {currency}", f"interval={_duration(p['interval_ns'], style)}",
                 f"delay={_duration(p['delay_ns'], style)}", f"fraction={p['fraction']}", f"lot={p['lot']} shares",
                 f"min_gap={_duration(p['min_gap_ns'], style)}", f"k={p['k']}"]
    return "; ".join(items)


def _limits_full(cpu: float, wall: float | None) -> str:
    if wall is None:
        return f"Execution time limit: {cpu:g} s of CPU time."
    return (f"Execution time limits: {cpu:g} s of CPU time and {wall:g} s of wall-clock time, whichever comes\n"
            "first (on a busy machine the wall-clock limit can be reached first).")


def _render_short(strategy: str, params: dict[str, Any], meta: dict[str, Any], input_files: dict[str, str],
                  time_limit_s: float, levels: int, style: str, wall_limit_s: float | None = None) -> str:
    compact = style == "compact"
    currency = meta.get("currency", "currency units")
    if meta.get("synthetic"):
        data_line = (f"SYNTHETIC DATA: a seeded random book; {params.get('symbol_a', 'KO')} and "
                     f"{params.get('symbol_b', 'PEP')} are labels only.")
    else:
        data_line = f"Data: {meta.get('instrument', 'user-supplied book')}; {currency}."
        if meta.get("source") and compact:
            data_line += " Level sizes randomised (100..2,000 shares); real prices."
        if strategy == "delta_hedge":
            data_line += " Option delta: a seeded random walk."
    if meta.get("data_note"):  # task set v2 (every style states the real data and what was randomised)
        data_line = meta["data_note"]
    rnd = meta.get("round")
    title = TITLES[strategy].split(" - ", 1)[1] if compact else strategy
    head = (f"# Market-Bench {meta.get('task_version', '')} - {title}" + (f", round {rnd}" if rnd else "")
            + ("\nWrite a Python backtester that follows every rule exactly: its metrics are compared with a "
               "reference implementation.\n" if compact else
               "\nWrite a Python backtester; follow every rule exactly (metrics are compared with a reference).\n")
            + data_line)
    fmt = {"L": levels, "Lm1": f"{levels - 1:02d}", "currency": currency,
           "curve_extra": (" (both symbols at their as_of raw mids; no row yet: position 0)" if strategy == "pairs"
                           else ""),
           "symbol_a": params.get("symbol_a", "A"), "symbol_b": params.get("symbol_b", "B")}
    keys = METRIC_KEYS[strategy]
    if compact:
        files = "; ".join(f"`{n}`: {path}" for n, path in input_files.items())
        out_lines = [
            f"Define `run_backtest(inputs: dict[str, str]) -> dict[str, float]` (inputs: file name, e.g. "
            f"\"book.csv\", -> path). Return one dict with every key as an unrounded number (currency {currency}, "
            f"shares); a missing, non-numeric or non-finite value makes the attempt FAILED. Keys ({len(keys)}): "
            f"{', '.join(keys)}. Notes: {_METRIC_NOTES[strategy]}.",
            f"Optional: `{PATH_KEY}` (C0, then one equity point per book row; correlation reported). Extra keys "
            "are ignored.",
            f"Allowed imports: {', '.join(ALLOWED_IMPORTS)}; anything else (network, subprocesses, writing files, "
            f"other modules) fails. Time limits: {time_limit_s:g} s of CPU time"
            + ("" if wall_limit_s is None else f" and {wall_limit_s:g} s wall clock, whichever comes first")
            + "; separate process; only the input "
            "files are readable. Reply with the complete Python source.",
        ]
    else:  # the paths reach run_backtest through ``inputs``
        files = ", ".join(input_files)
        out_lines = [
            f"def run_backtest(inputs: dict[str, str]) -> dict[str, float], inputs: file name -> path. Return "
            f"every key as an unrounded number (missing, non-numeric or non-finite: FAILED): {', '.join(keys)}. "
            f"Notes: {_METRIC_NOTES[strategy]}.",
            f"Allowed imports: {', '.join(ALLOWED_IMPORTS)}; nothing else (no network, subprocesses, file "
            f"writes). CPU limit {time_limit_s:g} s"
            + ("" if wall_limit_s is None else f", wall {wall_limit_s:g} s") + ". Reply with the complete Python source.",
        ]
    parts = [head, ("## Parameters\n" if compact else "Parameters: ") + _params_short(strategy, params, currency, style),
             ("## Input files\n" if compact else "Files: ") + files]
    entries = _COMMON_SHORT + _MATCHING_SHORT[strategy] + _ACCOUNTING_SHORT + _STRATEGY_SHORT[strategy]
    sections: dict[str, list[str]] = {}
    for sec, text_c, text_m in entries:
        text = text_c if compact else text_m
        if text is not None:
            sections.setdefault(sec, []).append(text.format(**fmt))
    for sec, texts in sections.items():
        parts.append(f"## {sec}\n" + "\n".join(f"- {t}" for t in texts) if compact else f"{sec}: " + " ".join(texts))
    parts.append(("## Output contract\n" + "\n".join(out_lines)) if compact else "Output: " + " ".join(out_lines))
    return ("\n\n" if compact else "\n").join(parts) + "\n"
