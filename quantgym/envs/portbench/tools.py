"""PortBench's toolbox (tool mode, ``tools=True``; docs/tools.md): the data of a decision read on demand.

Six tools, declared once with :func:`quantgym.tools.tool`:

- ``list_universe``: every asset's id, name and class, and whether it is available at the decision date;
- ``asset_stats``: return and annualised volatility of chosen assets over a chosen window;
- ``correlation``: the pairwise correlation of chosen assets over a chosen window;
- ``macro_series``: the §1.4 macro series over a window (publication lags applied);
- ``portfolio``: the current (drifted) weights and the NAV before trading;
- ``investor_profile``: the §3.1 profile the decision is scored against.

Point in time by construction: every tool reads the env's :class:`~quantgym.envs.portbench.market.MarketView`
through the decision row's window (``row_cache(t)["window"]``: its last row is the decision date's, or the
previous close with ``as_of="previous_close"``) and rows before it, never a later row (a test fills every
later row with garbage and compares every tool's answer, tests/portbench/test_pb_tools.py). A window is in
trading days back from the decision date, the decision day included, as the snapshot window (spec §1.6).

Blind mode (docs/blind.md) applies to every result: assets by their episode alias in the prompt's alias order,
no names, relative trading days instead of dates, macro series as z-scores over the window instead of
levels; returns, volatilities, correlations, weights and the NAV are shown as in named mode (they name no
window). An asset is answered by its id in the prompt (its alias when blind); a real ticker is then unknown.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from quantgym.envs.portbench.config import PortBenchToolsConfig
from quantgym.envs.portbench.universe import MACRO_KEYS
from quantgym.tools import BudgetState, TaskTools, Toolbox, ToolArgumentError, parse_tool_call, tool

SQRT252 = math.sqrt(252.0)
#: stage names of the stagewise protocol
_STAGES = ("S1", "S2", "S3")


@functools.lru_cache(maxsize=4)
def asset_names(path: str) -> dict[str, str]:
    """Ticker → long name from an ``assets.csv`` with a ``name`` column (the bundled data has one); {} without."""
    import csv
    from pathlib import Path

    f = Path(path) / "assets.csv"
    if not f.is_file():
        return {}
    with f.open(newline="", encoding="utf-8") as fh:
        return {r["ticker"]: r["name"].strip() for r in csv.DictReader(fh) if r.get("ticker") and r.get("name")}


def _pct(x: float, digits: int = 2) -> str:
    return "n/a" if x != x else f"{100 * x:+.{digits}f}%"


class PortBenchTools(TaskTools):
    """The toolbox of one PortBench env (``env.unwrapped.toolbox``), its per-stage budget and its call log
    (:class:`quantgym.tools.TaskTools`; PortBench has no answer tools: the stage answer is the usual action).

    ``env``: the :class:`~quantgym.envs.portbench.env.PortBenchEnv`; the tools read its current snapshot,
    view and blind view when called, so one toolbox serves every stage and episode. The log's records carry
    ``decision_index`` and ``stage`` beside the :class:`~quantgym.tools.ToolResult`'s fields.
    """

    config_class = PortBenchToolsConfig

    def __init__(self, env, config: PortBenchToolsConfig | dict | None = None):
        super().__init__(env, config)
        self.budget = self.config.budget
        self._stage_key: tuple | None = None
        self._episode = 0

    def _build(self) -> Toolbox:
        return Toolbox(self._tools())

    # ------------------------------------------------------------------------------ env side
    def reset(self) -> None:
        super().reset()
        self._episode += 1
        self._stage_key = None

    def stage_state(self) -> BudgetState:
        """The budget state of the current stage (reset when a new stage or decision starts)."""
        env = self.env
        key = (self._episode, env.decision_k, env.stage)
        if key != self._stage_key:
            self._stage_key = key
            self.state.reset()
        return self.state

    def note(self) -> str:
        """The brief's ``[TOOLS]`` line (:func:`~quantgym.envs.portbench.prompts.tools_note`)."""
        from quantgym.envs.portbench.prompts import tools_note

        return tools_note(self.toolbox.names, self.budget.calls, self.budget.chars)

    def info(self) -> dict[str, Any]:
        """``info["tools"]`` (the OpenAI ``tools=`` list) and ``info["tool_budget"]`` of the current stage."""
        schemas = self.__dict__.get("_schemas")
        if schemas is None:
            schemas = self._schemas = self.toolbox.schemas()
        return {"tools": schemas, "tool_budget": self.stage_state().to_dict()}

    def step(self, name: Any, arguments: Any):
        """One tool call as an env step: the result as the observation's ``prompt``, reward 0, no advance."""
        env = self.env
        self.stage_state()
        result = self.run(name, arguments, decision_index=env.decision_k, stage=_STAGES[env.stage])
        obs = env._obs(prompt=result.content)
        info = env._base_info()
        info.pop("tools", None)  # the schemas are given at a stage start
        info["tool"] = result.to_dict()
        return obs, 0.0, False, False, info

    # ------------------------------------------------------------------------------ reading the view
    def _row(self) -> tuple[Any, int]:
        """(the row cache of the decision, ``hi``: one past the last row the decision may read)."""
        env = self.env
        if env.snapshot is None:
            raise RuntimeError("call reset() before a tool")
        parts = env.view.row_cache(int(env.snapshot.t))
        return parts, int(parts["window"][1])

    def _window(self, window: int, hi: int) -> int:
        """The first row of a ``window``-day window ending at row ``hi − 1`` (checked against the bounds)."""
        if window < 2 or window > self.config.max_window:
            raise ToolArgumentError(f"window must be 2..{self.config.max_window} trading days, got {window}")
        return max(0, hi - window)

    def _order(self) -> np.ndarray:
        """Universe positions in the order the agent sees them (the prompt's alias order when blind)."""
        b = self.env._blind
        return b.order if b is not None else np.arange(self.env.n_assets)

    def _ids(self) -> tuple[str, ...]:
        """The id of each universe position (its alias when blind, else its ticker)."""
        b = self.env._blind
        return b.aliases.aliases if b is not None else self.env.view.tickers

    def _resolve(self, assets: list[str], available_only: bool = False) -> list[int]:
        """Universe positions of ``assets`` (ids as the agent sees them); [] means every available asset."""
        env = self.env
        avail = env.snapshot.available
        if not assets:  # none given: every available asset
            return [int(i) for i in self._order() if avail[i]]
        index = {a: i for i, a in enumerate(self._ids())}
        unknown = [a for a in assets if a not in index]
        if unknown:
            raise ToolArgumentError(f"unknown asset id(s) {', '.join(map(repr, unknown[:5]))}: use the ids of "
                                    "list_universe")
        out = list(dict.fromkeys(index[a] for a in assets))
        if available_only:
            out = [i for i in out if avail[i]]
        return out

    def _day(self, row: int, hi: int) -> str:
        """A row's label: its date, or its trading day relative to the decision day when blind."""
        if self.env._blind is not None:
            from quantgym.blind import day_label

            return day_label(row - (hi - 1))
        days = self.__dict__.get("_iso_days")
        if days is None or len(days) != len(self.env.view.dates):  # the view's dates as text, once
            days = self._iso_days = np.datetime_as_string(self.env.view.dates.values, unit="D").tolist()
        return days[row]

    def _span(self, lo: int, hi: int) -> str:
        return f"{hi - lo} trading days, {self._day(lo, hi)} to {self._day(hi - 1, hi)}"

    # ------------------------------------------------------------------------------ the tools
    def _tools(self) -> list:
        this = self

        @tool
        def list_universe() -> str:
            """The tradable universe: each asset's id (use it in answers and tool calls), name, asset class and
            whether it is available at the decision date (a price and enough history; only available assets are
            scored and traded)."""
            env = this.env
            this._row()
            blind = env._blind is not None
            names = {} if blind or not _is_bundled(env.data) else asset_names(_bundled_dir())
            ids, avail = this._ids(), env.snapshot.available
            lines = [f"{int(avail.sum())} of {env.n_assets} assets available. id | "
                     + ("class | available" if blind else "name | class | available")]
            for i in this._order().tolist():
                cells = [ids[i]] + ([] if blind else [names.get(ids[i], ids[i])]) + [
                    env.view.classes[i], "yes" if avail[i] else "no"]
                lines.append(" | ".join(cells))
            return "\n".join(lines)

        @tool
        def asset_stats(assets: list[str] = (), window: int = 60) -> str:
            """Return and volatility of chosen assets over the last `window` trading days up to the decision date:
            the compounded return over the window, the annualised volatility of the daily returns (sample
            standard deviation times sqrt(252)) and the number of daily returns observed.

            Parameters
            ----------
            assets : list[str]
                Asset ids from list_universe; none (an empty list) means every available asset.
            window : int
                Trading days back from the decision date, the decision day included (2 to the tool bound).
            """
            parts, hi = this._row()
            lo = this._window(window, hi)
            idx = this._resolve(assets)
            avail, ids = this.env.snapshot.available, this._ids()
            win = this.env.view.returns[lo:hi, idx]
            fin = np.isfinite(win)
            growth = np.prod(np.where(fin, 1.0 + win, 1.0), axis=0) - 1.0
            cnt = fin.sum(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(fin, win, 0.0).sum(axis=0) / cnt
                var = np.where(fin, (win - mean) ** 2, 0.0).sum(axis=0) / (cnt - 1)
            vol = np.where(cnt > 1, np.sqrt(var), np.nan) * SQRT252
            lines = [f"window: {this._span(lo, hi)}", "id | return | ann. volatility | daily returns"]
            for i, g, v, c in zip(idx, growth.tolist(), vol.tolist(), cnt.tolist()):
                if not avail[i]:
                    lines.append(f"{ids[i]} | not available at the decision date")
                    continue
                lines.append(f"{ids[i]} | {_pct(g)} | {_pct(v, 1).lstrip('+')} | {c}")
            return "\n".join(lines)

        @tool
        def correlation(assets: list[str], window: int = 60) -> str:
            """Pearson correlation of the daily returns of chosen assets over the last `window` trading days up to
            the decision date (pairwise over the days both assets have a return; n/a with fewer than two).

            Parameters
            ----------
            assets : list[str]
                Two or more asset ids from list_universe (available ones; others are left out).
            window : int
                Trading days back from the decision date, the decision day included (2 to the tool bound).
            """
            from quantgym.envs.portbench.correlation import pairwise_corr

            parts, hi = this._row()
            lo = this._window(window, hi)
            idx = this._resolve(assets, available_only=True)
            if len(idx) < 2:
                raise ToolArgumentError("give at least two available asset ids")
            ids = this._ids()
            corr = pairwise_corr(np.ascontiguousarray(this.env.view.returns[lo:hi, idx]))
            names = [ids[i] for i in idx]
            lines = [f"window: {this._span(lo, hi)}", "id | " + " ".join(names)]
            cell = "{:+.2f}".format
            for name, row in zip(names, corr.tolist()):  # NaN prints as "+nan": n/a
                lines.append(name + " | " + " ".join(map(cell, row)).replace("+nan", "n/a"))
            return "\n".join(lines)

        @tool
        def macro_series(series: list[str] = (), window: int = 21, every: int = 1) -> str:
            """Macro series (FRED rates, spreads, inflation, labour, VIX) as known on each trading day of the last
            `window` days up to the decision date, publication lags applied; one row per `every`-th day counted
            back from the decision day. Blind mode shows each value as its z-score over the window.

            Parameters
            ----------
            series : list[str]
                Series keys (fed_funds_rate, cpi_yoy, unemployment, gdp_growth_qoq, t10y2y_spread, t10y3m_spread,
                breakeven_10y, hy_oas, ig_oas, ted_spread, mortgage_30y, dgs_3m, dgs_2y, dgs_10y, dgs_30y,
                real_yield_10y, vix); none (an empty list) means all of them.
            window : int
                Trading days back from the decision date, the decision day included (2 to the tool bound).
            every : int
                Show every n-th trading day (1 = daily, 5 = weekly, 21 = monthly).
            """
            parts, hi = this._row()
            lo = this._window(window, hi)
            if every < 1:
                raise ToolArgumentError(f"every must be >= 1, got {every}")
            keys = list(series) or list(MACRO_KEYS)
            unknown = [k for k in keys if k not in MACRO_KEYS]
            if unknown:
                raise ToolArgumentError(f"unknown series {', '.join(map(repr, unknown[:5]))}; keys: "
                                        + ", ".join(MACRO_KEYS))
            cols = [MACRO_KEYS.index(k) for k in dict.fromkeys(keys)]
            vals = np.array(this.env.view.macro[lo:hi, cols], dtype=np.float64)
            blind = this.env._blind is not None
            if blind:  # each value as its z-score over the window's rows (never a level; docs/blind.md)
                fin = np.isfinite(vals)
                cnt = fin.sum(axis=0)
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = np.where(fin, vals, 0.0).sum(axis=0) / cnt
                    std = np.sqrt(np.where(fin, (vals - mean) ** 2, 0.0).sum(axis=0) / cnt)
                    ok = std > 1e-12 * np.maximum(1.0, np.abs(mean))
                    vals = np.where(ok, (vals - mean) / np.where(ok, std, 1.0), np.where(fin, 0.0, np.nan))
            rows = list(range(hi - 1, lo - 1, -every))[::-1]
            cell = ("{:+.1f}" if blind else "{:.4g}").format
            head = ("values: z-scores over the window" if blind else "values: levels as published "
                    "(rates and spreads in percent, *_yoy and *_qoq as decimals)")
            lines = [f"window: {this._span(lo, hi)}; {head}; n/a = no value known yet",
                     "day | " + " ".join(MACRO_KEYS[c] for c in cols)]
            table = vals[np.array(rows, dtype=np.int64) - lo].tolist()
            for r, row in zip(rows, table):  # NaN prints as "nan" / "+nan": n/a
                lines.append(this._day(r, hi) + " | " + " ".join(map(cell, row)).replace("+nan", "nan").replace(
                    "nan", "n/a"))
            return "\n".join(lines)

        @tool
        def portfolio() -> str:
            """The current portfolio before this decision's trade: the NAV (currency units) and the weights,
            drifted with the returns since the last trade (assets held above 0.05%)."""
            env = this.env
            this._row()
            snap, ids = env.snapshot, this._ids()
            nav = snap.nav * env.config.initial_nav
            w = snap.current_weights
            held = [i for i in this._order().tolist() if w[i] > 5e-4]
            lines = [f"NAV {nav:,.2f} ({100 * (snap.nav - 1):+.2f}% since the start of the period)",
                     f"holdings ({len(held)} assets): " + ", ".join(f"{ids[i]} {w[i]:.4f}" for i in held)]
            not_avail = [ids[i] for i in held if not snap.available[i]]
            if not_avail:
                lines.append("held but not available now (sold at the trade): " + ", ".join(not_avail))
            return "\n".join(lines)

        @tool
        def investor_profile() -> str:
            """The investor profile this portfolio is managed for (spec §3.1): the equity-and-crypto cap, the
            bonds-and-cash floor and the drawdown tolerance it is scored against."""
            env = this.env
            p = env.profile
            def pct(x: float) -> str:
                return f"{round(100 * x, 6):g}%"

            return (f"{env._profile_block}\nlimits: equities + cryptocurrency <= {pct(p.max_equity_crypto)}, "
                    f"bonds + cash >= {pct(p.min_bonds_cash)}, max drawdown {pct(p.max_drawdown)}, "
                    f"one-day 95% VaR limit {pct(p.var_limit)}")

        return [list_universe, asset_stats, correlation, macro_series, portfolio, investor_profile]


def _is_bundled(data) -> bool:
    """Whether ``data`` is the bundled dataset (whose assets.csv names the assets)."""
    return str((getattr(data, "meta", None) or {}).get("source", "")).startswith("quantgym bundled data")


def _bundled_dir() -> str:
    from quantgym.envs.portbench.raw import bundled_portbench_path

    return str(bundled_portbench_path())


__all__ = ["PortBenchTools", "asset_names", "parse_tool_call"]
