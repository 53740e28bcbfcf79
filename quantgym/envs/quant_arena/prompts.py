"""Prompt and feedback text of Quant-Arena (spec quant_arena.md §5, §9, §10.14).

:func:`task_brief` is the brief ``reset()`` returns (text and the same facts as a dict);
:func:`research_feedback` is the bounded feedback dict of one research candidate and
:func:`feedback_text` renders it as the observation. Each renders in the prompt styles of
:data:`quantgym.spaces.PROMPT_STYLES` (``full`` is the reference; ``compact`` and
``minimal`` are shorter). The environment itself is :mod:`~quantgym.envs.quant_arena.env`.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from typing import Any

import numpy as np

from quantgym.spaces import check_prompt_style

from .blinding import blind_years
from .config import ARENA_VERSION, ArenaConfig
from .data import ArenaDataset
from .executor import WindowResult
from .pit import VIEW_FIELDS

#: Research feedback window keys (spec §10.14).
FEEDBACK_WINDOW_KEYS = ("arr", "reference_arr", "excess_arr", "rankic_mean", "rankic_ir", "ls_sharpe", "turnover",
                        "coverage", "active_days", "n_ic_days")


def round6(x: Any) -> Any:
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return round(float(x), 6) if math.isfinite(float(x)) else None
    if isinstance(x, dict):
        return {k: round6(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [round6(v) for v in x]
    return x


def research_feedback(res: WindowResult, candidate: int, budget_left: int, blind: bool = False) -> dict:
    """The bounded feedback of one research candidate (spec §5, §10.14).

    Keys: ``candidate, budget_left, status, years, window, errors, n_errors``. ``years``
    and ``window`` are ``None`` when the status is not ``ok``. Errors: the first 20
    ``{date, phase, type, message (≤ 500 chars)}``, the first 3 with ``traceback``
    (last 2,000 chars). Floats rounded to 6 decimals. Nothing else (no Sharpe,
    drawdown, exposure, daily path, per-stock data or stdout). ``blind`` (docs/blind.md): the calendar
    years of ``years`` become ``year 1``, ``year 2``, ... (the error dates are relative days already).
    """
    errs = []
    for i, e in enumerate(res.errors[:20]):
        d = {k: e.get(k) for k in ("date", "phase", "type")}
        d["message"] = str(e.get("message", ""))[:500]
        if i < 3 and e.get("traceback"):
            d["traceback"] = str(e["traceback"])[-2000:]
        errs.append(d)
    ok = res.status == "ok" and res.metrics is not None
    return round6({
        "candidate": candidate,
        "budget_left": budget_left,
        "status": res.status,
        "years": (blind_years(res.years) if blind else res.years) if ok else None,
        "window": {k: res.metrics[k] for k in FEEDBACK_WINDOW_KEYS} if ok else None,
        "errors": errs,
        "n_errors": res.n_errors,
    })


#: research feedback kept by the short styles [project choice]: errors shown, characters per message,
#: tracebacks shown, characters per traceback (its last whole lines within that many characters)
FEEDBACK_LIMITS = {"compact": (10, 300, 3, 800), "minimal": (3, 50, 1, 300)}


def _tail_lines(text: str, max_chars: int) -> str:
    """The last whole lines of ``text`` within ``max_chars`` (the last ``max_chars`` characters if even
    the last line is longer)."""
    text = text.rstrip("\n")
    if len(text) <= max_chars:
        return text
    out: list[str] = []
    total = 0
    for line in reversed(text.split("\n")):
        add = len(line) + (1 if out else 0)
        if total + add > max_chars:
            break
        out.append(line)
        total += add
    return "\n".join(reversed(out)) if out else text[-max_chars:]


_MARKER_LINE = re.compile(r"^[ \t]*[~^]+[ \t~^]*$\n?", re.M)


def _short_errors(errors: list, style: str) -> list[dict]:
    """The first errors with cut messages and tracebacks (Python 3.11+ ``^~~`` marker lines removed)."""
    n_err, n_msg, n_tb, n_tb_chars = FEEDBACK_LIMITS[style]
    out, shown = [], 0
    for e in (errors or [])[:n_err]:
        d = {k: v for k, v in e.items() if k != "traceback"}
        d["message"] = str(d.get("message", ""))[:n_msg]
        tb = e.get("traceback")
        if tb and shown < n_tb:
            tb = _MARKER_LINE.sub("", str(tb))
            d["traceback"] = _tail_lines(tb, n_tb_chars)
            shown += 1
        out.append(d)
    return out


def _kv(d: dict | None) -> str:
    return "n/a" if d is None else ", ".join(f"{k} {'n/a' if v is None else v}" for k, v in d.items())


def feedback_text(fb: dict, style: str = "full") -> str:
    """The observation text of a research feedback dict (:func:`research_feedback`) in ``style``.

    ``full``: ``json.dumps(fb)`` (the reference observation). ``compact``: the same dict as JSON without
    spaces, ``errors`` cut to the first 10, messages to 300 characters, the tracebacks of the first 3
    to their last lines within 800 characters. ``minimal``: the same keys and numbers as short text
    lines (``candidate``, ``years``, ``window``, ``errors``), the first 3 errors with 50-character
    messages (consecutive equal ones on one line) and the last lines of the first traceback within
    300 characters.
    Both drop the ``^~~`` marker lines of tracebacks; ``n_errors`` always counts every error.

    Raises
    ------
    ValueError
        Unknown ``style``.
    """
    if check_prompt_style(style) == "full":
        return json.dumps(fb, ensure_ascii=False)
    errs = _short_errors(fb.get("errors") or [], style)
    if style == "compact":
        return json.dumps({**fb, "errors": errs}, ensure_ascii=False, separators=(",", ":"))
    years = fb.get("years") or None
    if years is None:
        year_line = "years: n/a"
    else:  # one header of the per-year keys, then the values per year
        cols = list(next(iter(years.values())) or {})
        year_line = f"years ({', '.join(cols)}): " + "; ".join(
            f"{y} " + " ".join("n/a" if (v or {}).get(c) is None else str(v[c]) for c in cols) for y, v in years.items())
    lines = [f"candidate {fb.get('candidate')}: status {fb.get('status')}, budget_left {fb.get('budget_left')}",
             year_line,
             "window: " + _kv(fb.get("window")),
             f"n_errors {fb.get('n_errors', 0)}" + (f", first {len(errs)}:" if errs else "")]
    groups: list[tuple[list, tuple]] = []  # consecutive errors with the same phase, type and message: one line
    for e in errs:
        key = (e.get("phase"), e.get("type"), e.get("message"))
        if groups and groups[-1][1] == key:
            groups[-1][0].append(e.get("date"))
        else:
            groups.append(([e.get("date")], key))
    lines += [f"- {', '.join(map(str, dates))} {ph} {ty}: {msg}" for dates, (ph, ty, msg) in groups]
    lines += [f"traceback (last lines):\n{e['traceback']}" for e in errs if "traceback" in e]
    return "\n".join(lines)


#: the price-limit clause of the brief per style, with limits (``ExecutionModel.limits``) and without
_LIMITS_TEXT = {
    "full": ("daily price limits (a stock at its up-limit at\nthe open cannot be bought, at its down-limit cannot be "
             "sold; suspended stocks cannot trade)", "no daily price limits (suspended stocks cannot trade)"),
    "compact": ("price limits (no buy at the up-limit, no sell at the down-limit at the open; suspended stocks do not "
                "trade)", "no price limits (suspended stocks do not trade)"),
    "minimal": ("price limits (no buy at up-limit, no sell at down-limit at the open; suspended: no trade)",
                "no price limits (suspended: no trade)"),
}


def trading_rules(config: ArenaConfig, style: str = "full") -> dict[str, str]:
    """The brief's trading rules rendered from the config the run is scored with (spec §9, §10.5–§10.9).

    ``fees``: the cost model's ``describe(style)`` (:func:`quantgym.models.describe_model`; ``"no fees (costs
    switched off)"`` for :meth:`ArenaCostModel.off`); ``impact``: the impact model's; ``costs``: both in one
    clause (``"no trading costs ..."`` when both are off); ``limits``: the price-limit clause
    (``ExecutionModel.limits``).
    """
    from quantgym.models import describe_model

    fees, impact = describe_model(config.cost, style=style), describe_model(config.impact, style=style)
    off = fees.startswith("no ") and impact.startswith("no ")
    return {"fees": fees, "impact": impact, "limits": _LIMITS_TEXT[style][0 if config.execution.limits else 1],
            "costs": "no trading costs (no fees; fills in full at the open)" if off else f"costs ({fees}, {impact})"}


def _final_score(config: ArenaConfig) -> str:
    """``0.5*S_in (research) + 0.5*S_out (sealed)`` with the scoring config's weights (spec §10.12)."""
    s = config.scoring
    return f"{s.w_in:g}*S_in (research) + {s.w_out:g}*S_out (sealed)"


def task_brief(config: ArenaConfig, mode: str, max_candidates: int, ds: ArenaDataset,
               style: str = "full", blind: bool = False) -> tuple[str, dict]:
    """The task brief returned by ``reset()`` (spec §9): text and the same facts as a dict.

    ``style`` (:data:`quantgym.spaces.PROMPT_STYLES`): ``full`` is the reference brief; ``compact`` says
    the same in terser wording (objective, windows, budget, track, interface, imports, limits, the view
    API, the example); ``minimal`` also drops the example. The facts dict does not depend on it.
    ``blind`` (docs/blind.md): no date, year, period or dataset name, no stock code; the windows as
    trading-day counts and the blinded view (:func:`_blind_view`). Raises ``ValueError`` for an unknown style.
    """
    w = config.windows
    from quantgym.sandbox import DEFAULT_ALLOWED_IMPORTS

    if check_prompt_style(style) != "full":
        return (_short_brief(config, mode, max_candidates, ds, style, blind),
                task_brief(config, mode, max_candidates, ds, blind=blind)[1])

    budget = max_candidates if mode == "iterative" else 1
    rules = trading_rules(config, "full")
    facts = {
        "task": "quant_arena", "version": ARENA_VERSION, "mode": mode, "budget": budget,
        "windows": {"warmup_start": w.warmup_start, "research": [w.research_start, w.research_end],
                    "sealed": [w.sealed_start, w.sealed_end]},
        "allowed_imports": list(DEFAULT_ALLOWED_IMPORTS), "view_fields": list(VIEW_FIELDS),
        "max_lookback": w.max_lookback, "max_features": config.scoring.max_features, "top_n": config.execution.top_n,
        "dataset": ds.name, "n_symbols": ds.N, "intraday_days": ds.intraday_days(), "data_notes": list(ds.notes),
    }
    if blind:
        facts.update(windows=window_days(config, ds), dataset="blind", intraday_days={}, data_notes=[], blind=True)
    feedback_txt = ("After each candidate you see: calendar-year returns of the account and the market "
                    "reference in the research window, ARR, excess ARR, mean RankIC, its IR, long-short quintile "
                    "Sharpe, turnover, coverage, active days, and the execution errors (with tracebacks). "
                    "Nothing else.") if mode == "iterative" else (
                    "One-shot track: your single submission is evaluated on the research and the sealed "
                    "windows without any feedback; the episode then ends with the final scores.")
    text = f"""# Quant-Arena ({ARENA_VERSION}, {mode} track)

## Objective
Write a Python module that scores every stock every trading day; higher = more attractive.
Each day the top {config.execution.top_n} scores are bought at the next day's open (each slot = 1/{config.execution.top_n} of
the account's value; fewer eligible names leave the rest in cash), long only, in a cash account
with lots of {config.execution.lot} shares, {rules["fees"]},
{rules["impact"]}, and {rules["limits"]}.
Goal: beat the equal-weight market after costs in the sealed window that you never see.
Score 0-100: mostly excess annual return over the market, then Sharpe, RankIC, its IR,
long-short Sharpe, low turnover, scaled up a little by feature diversity.

## Windows and budget
- {_windows_line(config, ds, blind)}
- Budget: {budget} candidate(s). Every submission consumes one, whatever its outcome.
- {feedback_txt}
- Iterative track: action = source text (a candidate) or {{"freeze": k}} (k = 1-based candidate
  index, None = latest). Freezing runs the sealed evaluation once and ends the episode.
  Final score S = {_final_score(config)}.

## Submission interface
The module must define:
- FEATURES: list of at most {config.scoring.max_features} unique feature names (strings).
- compute_features(view) -> dict[name, pandas.Series]   (index = stock symbols, names from FEATURES)
- score(features, view) -> pandas.Series                  (index = view.symbols; NaN = not eligible;
  ±inf is invalid: the date becomes a day error)
Your code runs once per decision date, after its close, and sees only rows up to that date.
Allowed imports: {", ".join(DEFAULT_ALLOWED_IMPORTS)}. No file, network or process access.
Limits: {config.sandbox.day_seconds:g} s wall per decision date, {config.sandbox.memory_mb} MiB memory.

## The view (point in time)
{_blind_view(w.max_lookback, "full") if blind else _named_view_full(w.max_lookback, ds)}

## Example
```python
import numpy as np
import pandas as pd

FEATURES = ["vol_20d"]

def compute_features(view):
    px = view.history("adj_close", 21)
    vol = np.log(px).diff().iloc[1:].std(ddof=1, skipna=False)
    vol[view.history("suspended", 1).iloc[-1] == 1.0] = np.nan
    return {{"vol_20d": vol}}

def score(features, view):
    return -features["vol_20d"]
```
{_data_line(ds, blind)}
"""
    return text, facts


def window_days(config: ArenaConfig, ds: ArenaDataset) -> dict[str, int]:
    """The windows of a blind brief as trading-day counts: warm-up rows before the research window,
    research and sealed decision days (docs/blind.md)."""
    from .account import window_rows

    w = config.windows
    d_in, n_in = window_rows(ds, w.research_start, w.research_end)
    _, n_out = window_rows(ds, w.sealed_start, w.sealed_end)
    warm = int(np.searchsorted(ds.dates, np.datetime64(str(w.warmup_start)[:10], "D")))
    return {"warmup_days": int(max(0, d_in - warm)), "research_days": int(n_in), "sealed_days": int(n_out)}


def _windows_line(config: ArenaConfig, ds: ArenaDataset, blind: bool, short: bool = False) -> str:
    """The brief's windows sentence: dates when named, trading-day counts when blind (``short``: compact/minimal)."""
    w = config.windows
    d = window_days(config, ds) if blind else {}
    if short and not blind:
        return (f"Windows: warm-up from {w.warmup_start}; research {w.research_start}..{w.research_end}; sealed "
                f"{w.sealed_start}..{w.sealed_end} (evaluated once, after you freeze).")
    if short:
        return (f"Windows (blind: dates hidden): warm-up {d['warmup_days']} trading days; research "
                f"{d['research_days']} decision days; sealed {d['sealed_days']} decision days after it (evaluated "
                "once, after you freeze).")
    if not blind:
        return (f"Warm-up history from {w.warmup_start}; research window {w.research_start} .. {w.research_end};\n"
                f"  sealed window {w.sealed_start} .. {w.sealed_end} (evaluated once, after you freeze).")
    return (f"Blind mode: dates, stock codes and price levels are hidden. Warm-up history of {d['warmup_days']}\n"
            f"  trading days; research window of {d['research_days']} decision days; sealed window of "
            f"{d['sealed_days']} decision days\n  after it (evaluated once, after you freeze).")


def _named_view_full(max_lookback: int, ds: ArenaDataset) -> str:
    return f"""- view.date: the decision date (pandas.Timestamp); view.symbols: stocks with a row that day
  (suspended included), ascending, e.g. 'SH600519', 'SZ000001'.
- view.history(field, lookback) -> DataFrame (dates x view.symbols, last row = view.date),
  lookback 1..{max_lookback}. Fields: {", ".join(VIEW_FIELDS)}.
  open/high/low/close are raw CNY; volume in shares; adj_* are forward-adjusted as of view.date
  (last row = raw); suspended and in_csi300 are 1.0/0.0; up_limit/down_limit in CNY.
- view.info: DataFrame (index = view.symbols) with industry (2026 snapshot), board, list_date.
{_intraday_api_full(ds)}"""


def _blind_view(max_lookback: int, style: str) -> str:
    """The view section of a blind brief (docs/blind.md)."""
    if style == "full":
        return f"""- view.date: the decision day (int: trading days from the window's first decision day, 0;
  warm-up history is negative); view.symbols: stocks with a row that day (suspended included),
  ascending aliases that keep the board, e.g. 'MB417' (main), 'GE023' (ChiNext), 'SR04' (STAR).
- view.history(field, lookback) -> DataFrame (days x view.symbols, index = day, last row =
  view.date), lookback 1..{max_lookback}. Fields: {", ".join(VIEW_FIELDS)}.
  open/high/low/close and up_limit/down_limit are rebased: one constant factor per stock and window,
  so returns, ratios and ranks are exact but price levels mean nothing; volume is in relative units
  (one factor per stock); adj_* are forward-adjusted as of view.date (last row = the rebased raw row);
  suspended and in_csi300 are 1.0/0.0.
- view.info: DataFrame (index = view.symbols) with industry and board.
- view.intraday(table, date=view.date) -> DataFrame of one day: 'snapshots' | 'trades' | 'orders' (all its
  stocks, column symbol = alias) where the dataset has Level-2 data (KeyError elsewhere); date is a day
  (int <= view.date). Blinded like the history: ts_event = ns since 00:00 UTC of that day (local time is
  UTC+8), time = local time of day; prices by the stock's factor, sizes in its relative volume units."""
    return ("View (blind: dates, codes and price levels hidden): view.date (int trading day, 0 = the window's first "
            "decision day, warm-up negative); view.symbols (stocks with a row that day, suspended included, "
            "ascending aliases keeping the board, e.g. 'MB417'); view.history(field, lookback) -> DataFrame (days x "
            f"view.symbols, last row = view.date), lookback 1..{max_lookback}, fields {', '.join(VIEW_FIELDS)}; "
            "prices and limits rebased by one factor per stock (returns and ranks exact, levels meaningless), "
            "volume relative, adj_* forward-adjusted as of view.date, suspended/in_csi300 1.0/0.0. view.info: "
            "DataFrame (index view.symbols): industry, board. view.intraday(table, date=view.date): 'snapshots'|"
            "'trades'|'orders' of one day (int <= view.date) where the dataset has Level-2 data (KeyError elsewhere), "
            "column symbol = alias, ts_event ns since 00:00 UTC of that day, time local time of day, prices and "
            "sizes scaled like the history.")


def _data_line(ds: ArenaDataset, blind: bool) -> str:
    if blind:
        return f"Data: {ds.N} A-share stocks; survivorship: stocks delisted before the data's end are absent."
    return f"Data: {ds.name} ({ds.N} stocks); survivorship: stocks delisted before 2026 are absent."


def _shipped_only(ds: ArenaDataset) -> bool:
    """True when ``ds`` serves exactly the shipped Level-2 day (the bundled default)."""
    from quantgym.data.sse_l2 import SSE_DAY, SSE_SYMBOL

    return ds.intraday_days() == {SSE_DAY: {t: ["SH" + SSE_SYMBOL] for t in ("orders", "snapshots", "trades")}}


def _intraday_api_full(ds: ArenaDataset) -> str:
    """The brief's ``view.intraday`` lines. The bundled default (the shipped day only) keeps the
    wording of earlier versions byte for byte, so recorded transcripts (replayed by prompt hash,
    examples/llm_floor/) still replay; any other dataset lists every day it serves."""
    if _shipped_only(ds):
        return ("- view.intraday(table, date): 'snapshots' | 'trades' | 'orders' where the dataset has them\n"
                "  (bundled: SH600519 on 2023-02-07 only). Reading after view.date raises LookAheadError.")
    return ("- view.intraday(table, date=view.date) -> DataFrame of one day (all its stocks; column symbol):\n"
            "  'snapshots' (10-level book, every 3 s), 'trades' or 'orders' (tick by tick); prices CNY,\n"
            "  quantities shares, ts_event UTC ns, time Asia/Shanghai. Served (KeyError on other days):\n"
            + textwrap.fill(intraday_text(ds) + ".", 96, initial_indent="  ", subsequent_indent="  ")
            + "\n  Reading after view.date raises LookAheadError.")


def _intraday_api_short(ds: ArenaDataset) -> str:
    """:func:`_intraday_api_full` for the compact and minimal briefs."""
    if _shipped_only(ds):
        return ("view.intraday(table, date): 'snapshots'|'trades'|'orders' (bundled: SH600519 on 2023-02-07 only); "
                "reading after view.date raises LookAheadError.")
    return ("view.intraday(table, date): 'snapshots'|'trades'|'orders' of one day (column symbol; CNY, shares, "
            f"ts_event UTC ns); served: {intraday_text(ds)}; KeyError on other days; "
            "reading after view.date raises LookAheadError.")


def intraday_text(ds: ArenaDataset) -> str:
    """One line naming every intraday (date, table, symbols) the dataset serves (for the brief).

    E.g. ``"2021-12-01 snapshots SH600258 SH600332 (09:15-10:30 only); 2023-02-07 orders,
    snapshots, trades SH600519"``; ``"none"`` when the dataset has no intraday tables.
    """
    from quantgym.data.a_share_l2 import CATALOG

    note = {(d, t, s): n for d, t, s, _, n in CATALOG if n}
    parts = []
    for d, tabs in ds.intraday_days().items():
        groups: dict[tuple, list[str]] = {}
        for t, syms in tabs.items():
            groups.setdefault(tuple(syms), []).append(t)
        for syms, tables in groups.items():
            extra = sorted({note[(d, t, x)] for t in tables for x in syms if (d, t, x) in note})
            parts.append(f"{d} {', '.join(tables)} {' '.join(syms)}" + (f" ({'; '.join(extra)})" if extra else ""))
    return "; ".join(parts) or "none"


def _short_brief(config: ArenaConfig, mode: str, max_candidates: int, ds: ArenaDataset, style: str,
                 blind: bool = False) -> str:
    """The compact / minimal brief (see :func:`task_brief`)."""
    from quantgym.sandbox import DEFAULT_ALLOWED_IMPORTS

    w, n, lot = config.windows, config.execution.top_n, config.execution.lot
    rules = trading_rules(config, style)
    budget = max_candidates if mode == "iterative" else 1
    if mode == "iterative" and style == "compact":
        track = (f"Budget: {budget} candidate(s); every submission uses one. After each you see only: research-window "
                 "calendar-year returns (account, market reference), ARR, excess ARR, mean RankIC, its IR, long-short "
                 "quintile Sharpe, turnover, coverage, active days, execution errors (with tracebacks).\n"
                 'Action: source text (a candidate) or {"freeze": k} (k = 1-based candidate index, None = latest); '
                 f"freezing runs the sealed evaluation once and ends the episode. S = {_final_score(config)}.")
    elif mode == "iterative":
        track = (f"Budget: {budget} candidates, one per submission. Feedback: research-window yearly returns "
                 "(account, market), ARR, excess ARR, RankIC mean and IR, long-short Sharpe, turnover, coverage, "
                 "active days, errors.\n"
                 'Action: source text (a candidate) or {"freeze": k} (k = 1-based candidate, None = latest): runs '
                 f"the sealed evaluation once, ends the episode. S = {_final_score(config)}.")
    else:
        track = ("Budget: 1 candidate (one-shot track): your single submission is evaluated on the research and "
                 "sealed windows without feedback; the episode then ends with the final scores.")
    if style == "compact":
        task = (f"Task: a Python module that scores every stock every trading day (higher = more attractive). Each "
                f"day the top {n} are bought at the next open (1/{n} of account value each; fewer eligible names "
                f"leave cash), long only, cash account, lots of {lot}, {rules['fees']}, {rules['impact']}, "
                f"{rules['limits']}. Goal: beat the equal-weight market after costs in the "
                "sealed window you never see. Score 0-100: mostly excess annual return, then Sharpe, RankIC, its "
                "IR, long-short Sharpe, low turnover, a little feature diversity.")
    else:
        task = (f"Task: a Python module scoring every stock each trading day (higher = better). Daily the top {n} "
                f"are bought at the next open (1/{n} of account value each, rest cash), long only, cash account, "
                f"lots of {lot}, {rules['costs']}, {rules['limits']}. Goal: "
                "beat the equal-weight market after costs in the unseen sealed window. Score 0-100: mostly excess "
                "annual return, then Sharpe, RankIC, IR, long-short Sharpe, low turnover, feature diversity.")
    lines = [
        f"# Quant-Arena ({ARENA_VERSION}, {mode} track)",
        task,
        _windows_line(config, ds, blind, short=True),
        track,
        f"Interface: FEATURES = list of <= {config.scoring.max_features} unique names (str); "
        "compute_features(view) -> dict[name, pandas.Series] (index = stock symbols, names from FEATURES); "
        "score(features, view) -> pandas.Series (index = view.symbols; NaN = not eligible; +-inf = a day error). "
        "Runs once per decision date after its close; sees rows up to that date only.",
        f"Allowed imports: {', '.join(DEFAULT_ALLOWED_IMPORTS)}. No file, network or process access. "
        f"Limits: {config.sandbox.day_seconds:g} s wall per date, {config.sandbox.memory_mb} MiB.",
        _blind_view(w.max_lookback, style) if blind else (
        "View: view.date (pandas.Timestamp); view.symbols (stocks with a row that day, suspended included, "
        "ascending, e.g. 'SH600519'); view.history(field, lookback) -> DataFrame (dates x view.symbols, last "
        f"row = view.date), lookback 1..{w.max_lookback}, fields {', '.join(VIEW_FIELDS)}; open/high/low/close "
        "raw CNY, volume shares, adj_* forward-adjusted as of view.date, suspended/in_csi300 1.0/0.0, "
        "up_limit/down_limit CNY. view.info: DataFrame (index view.symbols): industry, board, list_date. "
        + _intraday_api_short(ds)),
    ]
    if style == "compact":
        lines.append("Example:\n```python\nimport numpy as np\n\nFEATURES = [\"vol_20d\"]\n\n"
                     "def compute_features(view):\n    px = view.history(\"adj_close\", 21)\n"
                     "    vol = np.log(px).diff().iloc[1:].std(ddof=1, skipna=False)\n"
                     "    vol[view.history(\"suspended\", 1).iloc[-1] == 1.0] = np.nan\n"
                     "    return {\"vol_20d\": vol}\n\ndef score(features, view):\n"
                     "    return -features[\"vol_20d\"]\n```")
    lines.append(f"Data: {ds.N} A-share stocks; stocks delisted before the data's end are absent." if blind
                 else f"Data: {ds.name} ({ds.N} stocks); stocks delisted before 2026 are absent.")
    return "\n".join(lines) + "\n"


__all__ = ["task_brief", "trading_rules", "intraday_text", "research_feedback", "feedback_text", "FEEDBACK_WINDOW_KEYS", "FEEDBACK_LIMITS"]
