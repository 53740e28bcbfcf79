"""The Quant-Arena Gymnasium environment (spec quant_arena.md §9, §10.14).

Registered ids: ``QuantArena-v0`` (``mode="iterative"``) and ``QuantArena-OneShot-v0``
(``mode="oneshot"``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import gymnasium as gym
import numpy as np

from quantgym.spaces import AnyText, InvalidActionError, check_prompt_style

from .arena import WindowResult, evaluate_submission, source_hash
from .config import (QA_VERSION, ArenaConfig, ArenaCostModel, ExecutionModel, ImpactModel, ArenaSandboxLimits, ArenaScoringConfig,
                     Windows)
from .data import VIEW_FIELDS, QADataset, load_dataset
from .metrics import total_score
from .records import RunRecorder

#: Longest submission (characters) the action space accepts.
MAX_SOURCE_CHARS = 200_000
#: Longest observation text.
MAX_OBS_CHARS = 1_000_000
#: Research feedback window keys (spec §10.14).
FEEDBACK_WINDOW_KEYS = ("arr", "reference_arr", "excess_arr", "rankic_mean", "rankic_ir", "ls_sharpe", "turnover",
                        "coverage", "active_days", "n_ic_days")

_TRUNC_CACHE: dict[tuple[int, str], QADataset] = {}

#: The action types the env accepts (named in :class:`InvalidActionError` messages).
EXPECTED_ACTIONS = "source text (str) or {'freeze': k} (dict; k = 1-based candidate index or None)"


def _truncated(ds: QADataset, end: str) -> QADataset:
    key = (id(ds), end)
    if key not in _TRUNC_CACHE:
        if len(_TRUNC_CACHE) > 8:
            _TRUNC_CACHE.clear()
        _TRUNC_CACHE[key] = ds.truncate(end)
    return _TRUNC_CACHE[key]


def _r6(x: Any) -> Any:
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return round(float(x), 6) if math.isfinite(float(x)) else None
    if isinstance(x, dict):
        return {k: _r6(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_r6(v) for v in x]
    return x


def research_feedback(res: WindowResult, candidate: int, budget_left: int) -> dict:
    """The bounded feedback of one research candidate (spec §5, §10.14).

    Keys: ``candidate, budget_left, status, years, window, errors, n_errors``. ``years``
    and ``window`` are ``None`` when the status is not ``ok``. Errors: the first 20
    ``{date, phase, type, message (≤ 500 chars)}``, the first 3 with ``traceback``
    (last 2,000 chars). Floats rounded to 6 decimals. Nothing else (no Sharpe,
    drawdown, exposure, daily path, per-stock data or stdout).
    """
    errs = []
    for i, e in enumerate(res.errors[:20]):
        d = {k: e.get(k) for k in ("date", "phase", "type")}
        d["message"] = str(e.get("message", ""))[:500]
        if i < 3 and e.get("traceback"):
            d["traceback"] = str(e["traceback"])[-2000:]
        errs.append(d)
    ok = res.status == "ok" and res.metrics is not None
    return _r6({
        "candidate": candidate,
        "budget_left": budget_left,
        "status": res.status,
        "years": res.years if ok else None,
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


def task_brief(cfg: ArenaConfig, mode: str, max_candidates: int, ds: QADataset,
               style: str = "full") -> tuple[str, dict]:
    """The task brief returned by ``reset()`` (spec §9): text and the same facts as a dict.

    ``style`` (:data:`quantgym.spaces.PROMPT_STYLES`): ``full`` is the reference brief; ``compact`` says
    the same in terser wording (objective, windows, budget, track, interface, imports, limits, the view
    API, the example); ``minimal`` also drops the example. The facts dict does not depend on it.
    Raises ``ValueError`` for an unknown style.
    """
    w = cfg.windows
    from quantgym.sandbox import DEFAULT_ALLOWED_IMPORTS

    if check_prompt_style(style) != "full":
        return _short_brief(cfg, mode, max_candidates, ds, style), task_brief(cfg, mode, max_candidates, ds)[1]

    budget = max_candidates if mode == "iterative" else 1
    facts = {
        "task": "quant_arena", "version": QA_VERSION, "mode": mode, "budget": budget,
        "windows": {"warmup_start": w.warmup_start, "research": [w.research_start, w.research_end],
                    "sealed": [w.sealed_start, w.sealed_end]},
        "allowed_imports": list(DEFAULT_ALLOWED_IMPORTS), "view_fields": list(VIEW_FIELDS),
        "max_lookback": w.max_lookback, "max_features": cfg.scoring.max_features, "top_n": cfg.execution.top_n,
        "dataset": ds.name, "n_symbols": ds.N,
    }
    feedback_txt = ("After each candidate you see: calendar-year returns of the account and the market "
                    "reference in the research window, ARR, excess ARR, mean RankIC, its IR, long-short quintile "
                    "Sharpe, turnover, coverage, active days, and the execution errors (with tracebacks). "
                    "Nothing else.") if mode == "iterative" else (
                    "One-shot track: your single submission is evaluated on the research and the sealed "
                    "windows without any feedback; the episode then ends with the final scores.")
    text = f"""# Quant-Arena ({QA_VERSION}, {mode} track)

## Objective
Write a Python module that scores every stock every trading day; higher = more attractive.
Each day the top {cfg.execution.top_n} scores are bought at the next day's open (each slot = 1/{cfg.execution.top_n} of
the account's value; fewer eligible names leave the rest in cash), long only, in a cash account
with lots of 100 shares, commission (2.5 bp, min 5 CNY), transfer fee, sell-side stamp duty,
market impact from a simulated order book, and daily price limits (a stock at its up-limit at
the open cannot be bought, at its down-limit cannot be sold; suspended stocks cannot trade).
Goal: beat the equal-weight market after costs in the sealed window that you never see.
Score 0-100: mostly excess annual return over the market, then Sharpe, RankIC, its IR,
long-short Sharpe, low turnover, scaled up a little by feature diversity.

## Windows and budget
- Warm-up history from {w.warmup_start}; research window {w.research_start} .. {w.research_end};
  sealed window {w.sealed_start} .. {w.sealed_end} (evaluated once, after you freeze).
- Budget: {budget} candidate(s). Every submission consumes one, whatever its outcome.
- {feedback_txt}
- Iterative track: action = source text (a candidate) or {{"freeze": k}} (k = 1-based candidate
  index, None = latest). Freezing runs the sealed evaluation once and ends the episode.
  Final score S = 0.5*S_in (research) + 0.5*S_out (sealed).

## Submission interface
The module must define:
- FEATURES: list of at most {cfg.scoring.max_features} unique feature names (strings).
- compute_features(view) -> dict[name, pandas.Series]   (index = stock symbols, names from FEATURES)
- score(features, view) -> pandas.Series                  (index = view.symbols; NaN = not eligible;
  ±inf is invalid: the date becomes a day error)
Your code runs once per decision date, after its close, and sees only rows up to that date.
Allowed imports: {", ".join(DEFAULT_ALLOWED_IMPORTS)}. No file, network or process access.
Limits: {cfg.sandbox.day_seconds:g} s wall per decision date, {cfg.sandbox.memory_mb} MiB memory.

## The view (point in time)
- view.date: the decision date (pandas.Timestamp); view.symbols: stocks with a row that day
  (suspended included), ascending, e.g. 'SH600519', 'SZ000001'.
- view.history(field, lookback) -> DataFrame (dates x view.symbols, last row = view.date),
  lookback 1..{w.max_lookback}. Fields: {", ".join(VIEW_FIELDS)}.
  open/high/low/close are raw CNY; volume in shares; adj_* are forward-adjusted as of view.date
  (last row = raw); suspended and in_csi300 are 1.0/0.0; up_limit/down_limit in CNY.
- view.info: DataFrame (index = view.symbols) with industry (2026 snapshot), board, list_date.
- view.intraday(table, date): 'snapshots' | 'trades' | 'orders' where the dataset has them
  (bundled: SH600519 on 2023-02-07 only). Reading after view.date raises LookAheadError.

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
Data: {ds.name} ({ds.N} stocks); survivorship: stocks delisted before 2026 are absent.
"""
    return text, facts


def _short_brief(cfg: ArenaConfig, mode: str, max_candidates: int, ds: QADataset, style: str) -> str:
    """The compact / minimal brief (see :func:`task_brief`)."""
    from quantgym.sandbox import DEFAULT_ALLOWED_IMPORTS

    w, n = cfg.windows, cfg.execution.top_n
    budget = max_candidates if mode == "iterative" else 1
    if mode == "iterative" and style == "compact":
        track = (f"Budget: {budget} candidate(s); every submission uses one. After each you see only: research-window "
                 "calendar-year returns (account, market reference), ARR, excess ARR, mean RankIC, its IR, long-short "
                 "quintile Sharpe, turnover, coverage, active days, execution errors (with tracebacks).\n"
                 'Action: source text (a candidate) or {"freeze": k} (k = 1-based candidate index, None = latest); '
                 "freezing runs the sealed evaluation once and ends the episode. S = 0.5*S_in (research) + 0.5*S_out "
                 "(sealed).")
    elif mode == "iterative":
        track = (f"Budget: {budget} candidates, one per submission. Feedback: research-window yearly returns "
                 "(account, market), ARR, excess ARR, RankIC mean and IR, long-short Sharpe, turnover, coverage, "
                 "active days, errors.\n"
                 'Action: source text (a candidate) or {"freeze": k} (k = 1-based candidate, None = latest): runs '
                 "the sealed evaluation once, ends the episode. S = 0.5*S_in (research) + 0.5*S_out (sealed).")
    else:
        track = ("Budget: 1 candidate (one-shot track): your single submission is evaluated on the research and "
                 "sealed windows without feedback; the episode then ends with the final scores.")
    if style == "compact":
        task = (f"Task: a Python module that scores every stock every trading day (higher = more attractive). Each "
                f"day the top {n} are bought at the next open (1/{n} of account value each; fewer eligible names "
                "leave cash), long only, cash account, lots of 100, commission 2.5 bp (min 5 CNY), transfer fee, "
                "sell stamp duty, order-book impact, price limits (no buy at the up-limit, no sell at the down-limit "
                "at the open; suspended stocks do not trade). Goal: beat the equal-weight market after costs in the "
                "sealed window you never see. Score 0-100: mostly excess annual return, then Sharpe, RankIC, its "
                "IR, long-short Sharpe, low turnover, a little feature diversity.")
    else:
        task = (f"Task: a Python module scoring every stock each trading day (higher = better). Daily the top {n} "
                f"are bought at the next open (1/{n} of account value each, rest cash), long only, cash account, "
                "lots of 100, costs (commission 2.5 bp min 5 CNY, transfer fee, sell stamp duty, order-book impact), "
                "price limits (no buy at up-limit, no sell at down-limit at the open; suspended: no trade). Goal: "
                "beat the equal-weight market after costs in the unseen sealed window. Score 0-100: mostly excess "
                "annual return, then Sharpe, RankIC, IR, long-short Sharpe, low turnover, feature diversity.")
    lines = [
        f"# Quant-Arena ({QA_VERSION}, {mode} track)",
        task,
        f"Windows: warm-up from {w.warmup_start}; research {w.research_start}..{w.research_end}; sealed "
        f"{w.sealed_start}..{w.sealed_end} (evaluated once, after you freeze).",
        track,
        f"Interface: FEATURES = list of <= {cfg.scoring.max_features} unique names (str); "
        "compute_features(view) -> dict[name, pandas.Series] (index = stock symbols, names from FEATURES); "
        "score(features, view) -> pandas.Series (index = view.symbols; NaN = not eligible; +-inf = a day error). "
        "Runs once per decision date after its close; sees rows up to that date only.",
        f"Allowed imports: {', '.join(DEFAULT_ALLOWED_IMPORTS)}. No file, network or process access. "
        f"Limits: {cfg.sandbox.day_seconds:g} s wall per date, {cfg.sandbox.memory_mb} MiB.",
        "View: view.date (pandas.Timestamp); view.symbols (stocks with a row that day, suspended included, "
        "ascending, e.g. 'SH600519'); view.history(field, lookback) -> DataFrame (dates x view.symbols, last "
        f"row = view.date), lookback 1..{w.max_lookback}, fields {', '.join(VIEW_FIELDS)}; open/high/low/close "
        "raw CNY, volume shares, adj_* forward-adjusted as of view.date, suspended/in_csi300 1.0/0.0, "
        "up_limit/down_limit CNY. view.info: DataFrame (index view.symbols): industry, board, list_date. "
        "view.intraday(table, date): 'snapshots'|'trades'|'orders' (bundled: SH600519 on 2023-02-07 only); "
        "reading after view.date raises LookAheadError.",
    ]
    if style == "compact":
        lines.append("Example:\n```python\nimport numpy as np\n\nFEATURES = [\"vol_20d\"]\n\n"
                     "def compute_features(view):\n    px = view.history(\"adj_close\", 21)\n"
                     "    vol = np.log(px).diff().iloc[1:].std(ddof=1, skipna=False)\n"
                     "    vol[view.history(\"suspended\", 1).iloc[-1] == 1.0] = np.nan\n"
                     "    return {\"vol_20d\": vol}\n\ndef score(features, view):\n"
                     "    return -features[\"vol_20d\"]\n```")
    lines.append(f"Data: {ds.name} ({ds.N} stocks); stocks delisted before 2026 are absent.")
    return "\n".join(lines) + "\n"


class QuantArenaEnv(gym.Env):
    """
    ## Description
    The sealed quant research loop of Quant-Arena (spec ``quant_arena.md``). One
    episode = one research run: the agent submits up to 5 candidate strategies
    (Python source), sees bounded research feedback for each, freezes one, and the
    environment evaluates it once on the sealed window (default 2024) that the agent
    never observed. Agent code runs in :mod:`quantgym.sandbox` (separate process,
    limits, no file/network access; data reaches it only through the view).

    ## Action Space
    ``AnyText(200_000)``: the source text of a candidate. The freeze action
    ``{"freeze": k}`` (k = 1-based candidate index, ``None`` = latest) is a dict, outside
    the Text space. Any other type, or a dict other than ``{"freeze": k}``, raises
    :class:`InvalidActionError` (a ``ValueError`` naming the expected action types; also a
    ``TypeError`` as in spec §10.14), and so does a freeze index that names no evaluated
    candidate (``{"freeze": 9}`` with no candidate included). ``{"freeze": None}`` with no
    candidate ends the run with S = 0 (§10.14).

    ## Observation Space
    ``AnyText(1_000_000)``: ``reset`` returns the task brief (markdown); a research
    step returns the JSON text of the feedback dict (spec §10.14; also in
    ``info["feedback"]``); the final step returns the JSON text of the final scores.

    ## Rewards
    Research step: S_in of the candidate (0–100; 0 if its status is not ``ok``).
    Final step: total ``S = 0.5·S_in + 0.5·S_out`` of the frozen candidate.

    ## Starting State
    No candidate; budget 5 (one-shot: 1).

    ## Episode End
    Terminates on freeze, on a submit after the 5th candidate (acts as freeze of the
    latest), or — one-shot — on the first submit. Never truncates.

    ## Arguments
    mode : {"iterative", "oneshot"}
    data : None | QADataset | DataFrame | path — None = bundled 800-stock universe.
    research_start, research_end, sealed_start, sealed_end, warmup_start : str — window kwargs
        (or ``windows=Windows(...)``).
    cost, impact, execution, scoring, sandbox : config objects (``ArenaCostModel.off()`` and
        ``ImpactModel.off()`` switch costs/impact off).
    record_dir : path — folder of the JSONL run records (default: system temp); ``False``: no record.
    max_candidates : int — research budget (5).
    executor : {"sandbox", "inprocess"} — ``inprocess`` is for trusted code only (tests).
    agent, model, framework : str — labels written into the record.
    prompt_style : {"full", "compact", "minimal"} — the rendering of the brief and the research
        feedback text (:data:`quantgym.spaces.PROMPT_STYLES`; :func:`task_brief`, :func:`feedback_text`;
        ``info["prompt_style"]``); ``info["feedback"]`` and the record keep the full dict.
        :meth:`render_prompt` re-renders the current observation in any style.

    ## Costs & Execution
    Top-75 slots of NAV_open/75, next-day open, lots of 100, cash account, band 0.25,
    commission 2.5 bp min 5 CNY, transfer fee, stamp duty 10 bp → 5 bp on 2023-08-28,
    impact from a 10-level simulated book, limit-locks and suspensions (spec §10.5–§10.9).

    ## Data & Point-in-time
    The agent's view holds only rows up to the decision date; research evaluations
    never receive a row after the research end (spec §10.2–§10.4).

    ## Scoring
    ``qa-v1``: logistic transforms of excess ARR, Sharpe, RankIC, IR, long-short
    Sharpe, turnover; Q weights 0.60/0.20/0.05×4; S = 100·Q·(0.9 + 0.1·D) (spec §6, §10.12).

    ## Version History
    v0: first release (scoring ``qa-v1``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, mode: str = "iterative", data: Any = None, *, windows: Windows | None = None,
                 research_start: str | None = None, research_end: str | None = None,
                 sealed_start: str | None = None, sealed_end: str | None = None, warmup_start: str | None = None,
                 max_lookback: int | None = None, cost: ArenaCostModel | None = None, impact: ImpactModel | None = None,
                 execution: ExecutionModel | None = None, scoring: ArenaScoringConfig | None = None,
                 sandbox: ArenaSandboxLimits | None = None, record_dir: Any = None, max_candidates: int = 5,
                 executor: str = "sandbox", agent: str | None = None, model: str | None = None,
                 framework: str | None = None, render_mode: str | None = None, prompt_style: str = "full",
                 config: ArenaConfig | None = None):
        if mode not in ("iterative", "oneshot"):
            raise ValueError(f"mode must be 'iterative' or 'oneshot', got {mode!r}")
        if executor not in ("sandbox", "inprocess"):
            raise ValueError(f"executor must be 'sandbox' or 'inprocess', got {executor!r}")
        if not isinstance(max_candidates, int) or max_candidates < 1:
            raise ValueError("max_candidates must be a positive int")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if config is not None and not isinstance(config, ArenaConfig):
            raise TypeError(f"config must be an ArenaConfig, got {type(config).__name__}")
        base = config if config is not None else ArenaConfig()  # the kwargs below are shortcuts into it
        w = windows or base.windows
        over = {k: v for k, v in dict(research_start=research_start, research_end=research_end,
                                      sealed_start=sealed_start, sealed_end=sealed_end, warmup_start=warmup_start,
                                      max_lookback=max_lookback).items() if v is not None}
        if over:
            import dataclasses

            w = dataclasses.replace(w, **over)
        for name, obj, typ in (("cost", cost, ArenaCostModel), ("impact", impact, ImpactModel),
                               ("execution", execution, ExecutionModel), ("scoring", scoring, ArenaScoringConfig),
                               ("sandbox", sandbox, ArenaSandboxLimits)):
            if obj is not None and not isinstance(obj, typ):
                raise TypeError(f"{name} must be a {typ.__name__}, got {type(obj).__name__}")
        self.cfg = ArenaConfig(cost=cost or base.cost, impact=impact or base.impact,
                               execution=execution or base.execution, scoring=scoring or base.scoring,
                               sandbox=sandbox or base.sandbox, windows=w)
        self.mode = mode
        self.prompt_style = check_prompt_style(prompt_style)
        self._data_arg = data
        self.dataset = load_dataset(data)
        self.max_candidates = max_candidates
        self.executor = executor
        self.record_dir = record_dir
        self.labels = {"agent": agent, "model": model, "framework": framework}
        self.render_mode = render_mode
        self.action_space = AnyText(MAX_SOURCE_CHARS)
        self.observation_space = AnyText(MAX_OBS_CHARS)
        # window sanity on this panel (raises a clear ValueError now, not mid-episode)
        from .evaluator import window_rows

        window_rows(self.dataset, w.research_start, w.research_end)
        window_rows(self.dataset, w.sealed_start, w.sealed_end)
        self._recorder: RunRecorder | None = None
        self._candidates: list[dict] = []
        self._done = True
        self._final: dict | None = None
        self._brief: tuple[str, dict] | None = None
        self._sealed_result: WindowResult | None = None
        self._current: tuple[str, Any] | None = None  # ("brief", None) | ("feedback", dict) | ("final", dict)

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        st = self.__dict__.copy()
        if self._data_arg is None or isinstance(self._data_arg, (str, bytes)) or hasattr(self._data_arg, "__fspath__"):
            st["dataset"] = None  # reloaded from its source on unpickle
        return st

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        if self.dataset is None:
            self.dataset = load_dataset(self._data_arg)

    # ------------------------------------------------------------------ helpers
    def _research_data(self) -> QADataset:
        return _truncated(self.dataset, self.cfg.windows.research_end)

    def _sealed_data(self) -> QADataset:
        return _truncated(self.dataset, self.cfg.windows.sealed_end)

    def _record(self, event: str, **fields: Any) -> None:
        if self._recorder is not None:
            self._recorder.write(event, **fields)

    def _evaluate(self, source: str, phase: str) -> WindowResult:
        w = self.cfg.windows
        if phase == "research":
            return evaluate_submission(source, self._research_data(), w.research_start, w.research_end, self.cfg,
                                       phase="research", executor=self.executor)
        return evaluate_submission(source, self._sealed_data(), w.sealed_start, w.sealed_end, self.cfg,
                                   phase="sealed", executor=self.executor)

    @property
    def record_path(self):
        """Path of the current run's JSONL record (None when records are off)."""
        return None if self._recorder is None else self._recorder.path

    @property
    def candidates(self) -> list[dict]:
        """Evaluated candidates of the current run: ``index, source, sha256, research`` (WindowResult)."""
        return list(self._candidates)

    @property
    def sealed_result(self) -> WindowResult | None:
        """The sealed evaluation of the frozen candidate (None until the episode has ended)."""
        return self._sealed_result if self._done else None

    @property
    def budget_left(self) -> int:
        """Candidates the agent may still submit."""
        cap = self.max_candidates if self.mode == "iterative" else 1
        return max(0, cap - len(self._candidates))

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start a run; returns the task brief (text) and ``info`` with the same facts as a dict."""
        super().reset(seed=seed)
        if not self._done and self._recorder is not None:
            self._record("cancelled", reason="reset before the episode ended",
                         candidates=len(self._candidates))
        self._candidates = []
        self._done = False
        self._final = None
        self._sealed_result = None
        self._recorder = None if self.record_dir is False else RunRecorder(self.record_dir)
        text, facts = task_brief(self.cfg, self.mode, self.max_candidates, self.dataset, self.prompt_style)
        self._brief = (text, facts)
        self._current = ("brief", None)
        self._record("brief", mode=self.mode, seed=seed, labels=self.labels, config=self.cfg.to_dict(), brief=text,
                     facts=facts, dataset=self.dataset.name, prompt_style=self.prompt_style)
        info = {"brief": facts, "budget_left": self.budget_left,
                "record_path": None if self._recorder is None else str(self._recorder.path),
                "prompt_style": self.prompt_style}
        return text, info

    def render_prompt(self, style: str | None = None) -> str:
        """The current observation text re-rendered in ``style`` (None: the env's ``prompt_style``).

        After ``reset()`` the task brief (:func:`task_brief`), after a research step the feedback
        (:func:`feedback_text`), after the final step the final-scores JSON (the same in every style).
        Reads the state only: no budget, record, RNG or score changes. Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.prompt_style if style is None else check_prompt_style(style)
        if self._current is None:
            raise RuntimeError("call reset() before render_prompt()")
        kind, payload = self._current
        if kind == "brief":
            return task_brief(self.cfg, self.mode, self.max_candidates, self.dataset, style)[0]
        if kind == "feedback":
            return feedback_text(payload, style)
        return json.dumps(payload, ensure_ascii=False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        """Submit a candidate (str) or freeze (``{"freeze": k}``); see the class docstring."""
        if self._done:
            raise RuntimeError("the episode has ended; call reset() first")
        if isinstance(action, dict):
            if set(action) != {"freeze"}:
                raise InvalidActionError(f"action must be {EXPECTED_ACTIONS}; got a dict with keys "
                                         f"{sorted(map(str, action))}")
            return self._freeze(action["freeze"])
        if not isinstance(action, str):
            raise InvalidActionError(f"action must be {EXPECTED_ACTIONS}, got {type(action).__name__}")
        if len(action) > MAX_SOURCE_CHARS:
            raise ValueError(f"submission longer than {MAX_SOURCE_CHARS} characters")
        if self.mode == "oneshot":
            return self._oneshot(action)
        if self.budget_left == 0:
            self._record("submit_over_budget", source=action, source_sha256=source_hash(action),
                         note="not evaluated; acts as freeze of the latest candidate")
            return self._freeze(None)
        k = len(self._candidates) + 1
        res = self._evaluate(action, "research")
        cand = {"index": k, "source": action, "sha256": source_hash(action), "research": res}
        self._candidates.append(cand)
        fb = research_feedback(res, k, self.budget_left)
        reward = float(res.S) if res.status == "ok" else 0.0
        self._record("candidate", candidate=k, source=action, source_sha256=cand["sha256"], feedback=fb,
                     reward=reward, research=res.to_record())
        info = {"feedback": fb, "candidate": k, "budget_left": self.budget_left, "status": res.status,
                "prompt_style": self.prompt_style}
        self._current = ("feedback", fb)
        return feedback_text(fb, self.prompt_style), reward, False, False, info

    def _oneshot(self, source: str) -> tuple[str, float, bool, bool, dict]:
        res = self._evaluate(source, "research")
        cand = {"index": 1, "source": source, "sha256": source_hash(source), "research": res}
        self._candidates.append(cand)
        self._record("candidate", candidate=1, source=source, source_sha256=cand["sha256"], feedback=None,
                     reward=None, research=res.to_record())
        return self._finish(cand)

    def _freeze(self, k: Any) -> tuple[str, float, bool, bool, dict]:
        n = len(self._candidates)
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= n):
            if n == 0:
                raise InvalidActionError(
                    f"freeze index {k!r} names no candidate: none has been evaluated yet; submit a candidate "
                    "(source text) first, or step({'freeze': None}) to end the run with S = 0")
            raise InvalidActionError(f"freeze index must be an int in 1..{n} or None, got {k!r}")
        if not self._candidates:
            self._record("freeze", candidate=None, note="no candidate: S = 0")
            final = {"S": 0.0, "S_in": 0.0, "S_out": 0.0, "frozen_candidate": None, "status_research": None,
                     "status_sealed": None, "research": None, "sealed": None, "note": "freeze with no candidate"}
            return self._end(final)
        if k is None:
            k = len(self._candidates)
        cand = self._candidates[int(k) - 1]
        self._record("freeze", candidate=int(k), source_sha256=cand["sha256"])
        return self._finish(cand)

    def _finish(self, cand: dict) -> tuple[str, float, bool, bool, dict]:
        res_in: WindowResult = cand["research"]
        res_out = self._evaluate(cand["source"], "sealed")
        self._record("sealed", candidate=cand["index"], source_sha256=cand["sha256"], sealed=res_out.to_record())
        s_in = float(res_in.S) if res_in.status == "ok" else 0.0
        s_out = float(res_out.S) if res_out.status == "ok" else 0.0
        final = {"S": total_score(s_in, s_out, self.cfg.scoring), "S_in": s_in, "S_out": s_out,
                 "frozen_candidate": cand["index"], "source_sha256": cand["sha256"],
                 "status_research": res_in.status, "status_sealed": res_out.status,
                 "message_research": res_in.message, "message_sealed": res_out.message,
                 "research": res_in.metrics, "sealed": res_out.metrics,
                 "research_years": res_in.years, "sealed_years": res_out.years,
                 "sealed_errors": research_feedback(res_out, cand["index"], 0)["errors"],
                 "version": self.cfg.scoring.version}
        self._sealed_result = res_out
        return self._end(final)

    def _end(self, final: dict) -> tuple[str, float, bool, bool, dict]:
        self._done = True
        final = _r6(final)
        self._final = final
        self._current = ("final", final)
        self._record("final", **final)
        info = json.loads(json.dumps(final))  # a fresh copy (no shared objects between calls)
        info["prompt_style"] = self.prompt_style
        return json.dumps(final, ensure_ascii=False), float(final["S"]), True, False, info

    def log_event(self, event: str = "model_call", **fields: Any) -> None:
        """Append an event to the run's record (spec §7: e.g. every model call of the agent).

        Parameters
        ----------
        event : str
            Event name, default ``"model_call"``.
        **fields
            JSON-able fields (e.g. ``prompt=..., response=..., model=..., tokens=...``).
        """
        if self._recorder is None:
            return
        self._record(str(event), **fields)

    def render(self) -> str | None:
        """``ansi``: a short text status of the run."""
        if self.render_mode != "ansi":
            return None
        lines = [f"Quant-Arena {self.mode}: {len(self._candidates)} candidate(s), budget left {self.budget_left}"]
        for c in self._candidates:
            r = c["research"]
            lines.append(f"  #{c['index']} {c['sha256'][:10]} research {r.status} S_in={r.S:.2f}")
        if self._final:
            lines.append(f"  final S={self._final['S']} (S_in={self._final['S_in']}, S_out={self._final['S_out']})")
        return "\n".join(lines)

    def close(self) -> None:
        """Mark an unfinished run as cancelled in its record."""
        if not self._done and self._recorder is not None:
            self._record("cancelled", reason="closed before the episode ended", candidates=len(self._candidates))
            self._done = True
        super().close()


__all__ = ["QuantArenaEnv", "InvalidActionError", "research_feedback", "task_brief", "feedback_text"]
