"""The paper-mode day loop and a direct-allocation backtest runner (spec §2.1, §6.1–§6.3, §7.1, §8).

:class:`PaperSimulator` is the clean :class:`~quantgym.envs.portbench.simulator.PortfolioSimulator`
with the day-loop flags of a :class:`~quantgym.envs.portbench.paper.config.PaperFidelity`:

* ``skip_start_decision`` -- the period's start date (even a weekend or holiday) carries the initial
  NAV with ``round6(1/N)`` on every universe asset; the returns start on the first calendar day
  after it; a rebalance date equal to the start date is skipped (2024 on the Mon–Fri calendar:
  first decision 2024-02-01, 11 decisions, 261 returns);
* ``weekly_friday`` -- weekly decisions on every Friday of the calendar (``W-FRI``);
* ``no_mtm_on_rebalance`` -- on a decision row the old portfolio's return of that day is not
  applied (the snapshot and the trade happen *instead of* marking to market).

:func:`run_direct` runs one classical baseline (spec §8) through snapshots and this loop, exactly
as the repo's batch runner does for the published baseline rows (no S1–S5, §4.6).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from quantgym.envs.portbench.config import PortBenchConfig, Period, resolve_period
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.envs.portbench.simulator import PortfolioSimulator, equal_weight_start, rebalance_rows
from quantgym.metrics import performance_summary


def paper_decision_rows(dates: pd.DatetimeIndex, period: Period, flags: PaperFidelity) -> np.ndarray:
    """Decision rows of ``period`` under the schedule flags (spec §2.1).

    Clean: :func:`~quantgym.envs.portbench.simulator.rebalance_rows` (first trading day of the month,
    last of the week). ``weekly_friday``: every Friday row in ``[start, end]`` for weekly periods.
    ``skip_start_decision``: a decision dated exactly on the start date is dropped.
    """
    d = pd.DatetimeIndex(dates)
    if flags.weekly_friday and period.freq == "weekly":
        inside = (d >= pd.Timestamp(period.start)) & (d <= pd.Timestamp(period.end))
        rows = np.flatnonzero(inside & (d.day_of_week == 4))
    else:
        rows = rebalance_rows(d, period.start, period.end, period.freq)
    if flags.skip_start_decision:
        rows = rows[d[rows] != pd.Timestamp(period.start)]
    return rows


class PaperSimulator(PortfolioSimulator):
    """:class:`PortfolioSimulator` with the paper day-loop flags (see the module docstring).

    Parameters are the parent's plus ``flags``. With every flag off it is the clean simulator.
    """

    def __init__(self, dates, returns0, period: Period, initial_weights_fn, costs, initial_nav: float,
                 tickers=None, flags: PaperFidelity | None = None):
        self.flags = flags or PaperFidelity()
        fl = self.flags
        if fl.skip_start_decision:
            n = len(tickers) if tickers is not None else np.asarray(returns0).shape[1]
            init_fn = lambda row: np.full(n, round(1.0 / n, 6))  # noqa: E731  (§6.1 paper: every asset)
        else:
            init_fn = initial_weights_fn
        super().__init__(dates, returns0, period, init_fn, costs, initial_nav, tickers)
        start = pd.Timestamp(period.start)
        if fl.skip_start_decision:
            # the start date carries the initial NAV; returns begin on the first calendar day after it
            first_after = int(self.dates.searchsorted(start, side="right"))
            if first_after >= len(self.dates) or first_after > self.last_row:
                raise ValueError(f"period {period.name}: no calendar day after its start date")
            self.t = first_after - 1
            self.first_row = first_after
            self.nav_dates = [start]
        self.decision_rows = paper_decision_rows(self.dates, period, fl)
        self.decision_rows = self.decision_rows[self.decision_rows > self.t]
        self._decision_set = set(int(r) for r in self.decision_rows)

    def marks_to_market(self, t: int) -> bool:
        """Decision rows skip marking when ``no_mtm_on_rebalance`` is on (§6.2 paper mode: the old
        portfolio's return of a rebalance day is lost)."""
        return not (self.flags.no_mtm_on_rebalance and t in self._decision_set)


@dataclass
class DirectResult:
    """One direct-allocation backtest: metrics (§7.1, page units) and the NAV curve."""

    agent: str
    period: str
    fidelity: str
    metrics: dict
    nav: pd.Series
    n_decisions: int
    first_decision: str | None
    seconds: float
    weights: list = field(default_factory=list)
    #: (decision date, reason) of every decision where the baseline fell back (its ``step_record``)
    fallbacks: list = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        m = self.metrics
        return {"agent": self.agent, "period": self.period, "fidelity": self.fidelity, "sharpe": m["sharpe"],
                "ret_pct": m["ret_pct"], "maxdd_pct": m["maxdd_pct"], "vol_pct": m["vol_pct"],
                "n_returns": int(len(self.nav) - 1), "n_decisions": self.n_decisions,
                "first_decision": self.first_decision}


def make_view(data, config: PortBenchConfig):
    """The market view for ``config``: the paper view when a snapshot flag is on, else the clean one."""
    from quantgym.envs.portbench.market import MarketView
    from quantgym.envs.portbench.paper.market import PaperMarketView

    if config.paper.own_calendar_windows or config.paper.nan_corr_propagate:
        return PaperMarketView(data, config)
    return MarketView(data, config)


def make_simulator(view, period: Period, config: PortBenchConfig) -> PaperSimulator:
    """A :class:`PaperSimulator` over ``view`` (initial weights: EW over ``A`` before the start, §6.1)."""
    return PaperSimulator(view.dates, view.returns0, period, equal_weight_start(view), config.costs, config.initial_nav,
                          view.tickers, config.paper)


#: paper flags that change the market data itself (they are applied when the data are built)
DATA_FLAGS = ("universe", "log_returns_equities", "winsorize", "weekday_calendar", "own_calendar_windows")


def paper_data_for(flags: PaperFidelity, data=None):
    """Market data for ``flags``: ``data`` if given; the clean bundle if no data flag is on; else paper data.

    Raises
    ------
    ValueError
        ``data`` given with flags that change the data (:data:`DATA_FLAGS`) that ``data`` was not built with:
        they would silently apply nothing (build it with
        :func:`quantgym.envs.portbench.paper.data.build_paper_data`, see docs/fidelity.md).
    """
    if data is not None:
        want = [f for f in DATA_FLAGS if getattr(flags, f) not in (None, False)]
        built = getattr(data, "flags", None)  # a PaperPortBenchData knows the flags it was built with
        missing = [f for f in want if built is None or getattr(built, f) != getattr(flags, f)]
        if missing:
            raise ValueError(f"paper flag(s) {', '.join(missing)} change the market data and cannot be applied to "
                             "data= after it was built; build it with quantgym.envs.portbench.paper.data."
                             "build_paper_data(flags, raw=...) from your tables (docs/fidelity.md), or leave them off")
        return data
    if flags.custom_data:
        from quantgym.envs.portbench.paper.data import load_paper_data

        return load_paper_data(flags)
    from quantgym.envs.portbench.data import load_portbench_data

    return load_portbench_data()


def run_direct(agent, period: str | dict | Period, flags: PaperFidelity | None = None, data=None,
               config: PortBenchConfig | None = None, keep_weights: bool = False) -> DirectResult:
    """Backtest one classical baseline (spec §8) under ``flags`` as the repo's batch runner does.

    At every decision row: build the snapshot (:class:`PaperMarketView` or the clean view), call the
    baseline's ``allocate(returns window, available)`` and trade at the close (15 bps of ``τ·NAV``);
    mark to market in between (:class:`PaperSimulator`). Metrics: :func:`quantgym.metrics.performance_summary`
    with rf 4 % and MaxDD with (clean) or without (``mdd_no_start_peak``) the starting peak.

    Parameters
    ----------
    agent : baseline key or display name (``equal_weight`` … ``black_litterman``), or a baseline instance.
    period : period name, alias, dict or :class:`Period`.
    flags : PaperFidelity (default: clean mode).
    data : optional market data (default: :func:`paper_data_for`).
    config : optional base config (costs, lookback, …); its ``paper`` field is replaced by ``flags``.

    Returns
    -------
    DirectResult
    """
    from quantgym.envs.portbench.baselines import make_baseline

    t0 = time.perf_counter()
    flags = flags or PaperFidelity()
    config = (config or PortBenchConfig()).replace(paper=flags, fidelity="paper" if flags.any else "clean")
    per = resolve_period(period)
    data = paper_data_for(flags, data)
    view = make_view(data, config)
    sim = make_simulator(view, per, config)
    pol = make_baseline(agent) if isinstance(agent, str) else agent
    pol.tickers = tuple(view.tickers)
    pol.paper = flags
    weights, fallbacks = [], []
    for row in sim.decision_rows:
        sim.advance_to(int(row))
        snap = view.snapshot(int(row), sim.weights, sim.nav / sim.initial_nav)
        pol._notes = []
        w = np.asarray(pol.allocate(np.array(snap.returns), np.array(snap.available)), dtype=np.float64)
        if keep_weights:
            weights.append((str(snap.decision_date.date()), w))
        rec = pol.step_record()
        if rec:
            fallbacks.append((str(snap.decision_date.date()), rec["fallback"]))
        sim.trade(w)
    sim.advance_to(sim.last_row)
    r = sim.daily_returns()
    perf = dict(performance_summary(r, include_start=not flags.mdd_no_start_peak, rf=config.rf))
    perf.update({"ret_pct": 100 * perf["total_return"], "maxdd_pct": 100 * perf["max_drawdown"],
                 "vol_pct": 100 * perf["volatility"]})
    first = str(view.dates[sim.decision_rows[0]].date()) if sim.decision_rows.size else None
    return DirectResult(pol.name, per.name, "paper" if flags.any else "clean", perf, sim.nav_series(),
                        int(sim.decision_rows.size), first, time.perf_counter() - t0, weights, fallbacks)


__all__ = ["PaperSimulator", "paper_decision_rows", "run_direct", "DirectResult", "make_view", "make_simulator",
           "paper_data_for"]
