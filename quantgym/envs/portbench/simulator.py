"""NAV accounting: the clean-mode day loop, costs and rebalancing (spec §6).

The trade itself (§6.3 cost and fallback) is the pure :func:`~quantgym.envs.portbench.execution.execute_trade`.

The simulator holds the portfolio truth (NAV, drifted weights, trade history); the
env composes it with snapshots, the agent's action and the scorer. No I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from quantgym.envs.portbench.config import PortBenchCostModel, Period, proportional_costs
from quantgym.envs.portbench.execution import execute_trade, trade_into
from quantgym.models import ImportableModel, build_model, fee_parts


def rebalance_rows(dates: pd.DatetimeIndex, start: str, end: str, freq: str) -> np.ndarray:
    """Row indices of the decision dates in ``[start, end]`` (spec §2.1, clean mode).

    monthly = first trading day of each month; weekly = last trading day of each (ISO) week;
    daily = every trading day. Computed on the whole calendar, then restricted to the period,
    so a period starting mid-month does not make its first day a "first of month".
    """
    d = pd.DatetimeIndex(dates)
    if freq == "daily":
        sel = np.ones(len(d), dtype=bool)
    elif freq == "monthly":
        ym = d.year * 12 + d.month
        sel = np.r_[True, ym[1:] != ym[:-1]]
    elif freq == "weekly":
        iso = d.isocalendar()
        wk = iso["year"].to_numpy() * 100 + iso["week"].to_numpy()
        sel = np.r_[wk[1:] != wk[:-1], True]
    else:
        raise ValueError(f"unknown rebalance frequency {freq!r}")
    inside = (d >= pd.Timestamp(start)) & (d <= pd.Timestamp(end))
    return np.flatnonzero(sel & inside)


_STAMPS: dict[tuple, tuple[np.ndarray, list]] = {}


def _timestamps(dates: pd.DatetimeIndex) -> list:
    """``list(dates)`` (pandas Timestamps), cached per calendar (speed only: no pandas indexing per day)."""
    v = dates.asi8
    key = (len(v), int(v[0]), int(v[-1])) if len(v) else (0,)
    hit = _STAMPS.get(key)
    if hit is not None and np.array_equal(hit[0], v):
        return hit[1]
    if len(_STAMPS) > 16:
        _STAMPS.clear()
    _STAMPS[key] = (v.copy(), list(dates))
    return _STAMPS[key][1]


class Orders(Sequence):
    """The per-asset orders of one rebalance, held as arrays (spec §6.3).

    A read-only sequence of order dicts (``asset``, ``side`` "buy"/"sell", ``delta_w``, ``notional``
    (currency units), ``price_adj_bps`` (+slippage for a buy, − for a sell), ``commission``, ``cost``),
    built on first access; the arrays themselves are the attributes below (``k`` traded assets, in
    canonical order). Costs are ``|Δw|·NAV_before`` times the cost model's rates, or the fees a user fee
    model charged (``fees``: one per traded asset; no price adjustment).

    Attributes
    ----------
    index : (k,) int, columns of the traded assets (``|Δw| ≥ min_trade``; ``traded`` None: computed from
        ``delta`` and ``costs.min_trade`` on first use).
    delta_w : (k,) float, signed weight change.
    notional, commission, cost : (k,) float, currency units (computed on access).
    """

    __slots__ = ("_delta", "_traded", "_nav", "_costs", "_tickers", "_dicts", "_fees")

    def __init__(self, delta: np.ndarray, traded: np.ndarray, nav_before: float, costs: PortBenchCostModel,
                 tickers=None, fees: np.ndarray | None = None):
        self._delta, self._traded, self._nav, self._costs, self._tickers = delta, traded, nav_before, costs, tickers
        self._fees = fees
        self._dicts: list[dict] | None = None

    @property
    def index(self) -> np.ndarray:
        return np.flatnonzero(self._mask())

    def _mask(self) -> np.ndarray:
        if self._traded is None:
            self._traded = np.abs(self._delta) >= self._costs.min_trade
        return self._traded

    @property
    def delta_w(self) -> np.ndarray:
        return self._delta[self.index]

    @property
    def notional(self) -> np.ndarray:
        return np.abs(self.delta_w) * self._nav

    @property
    def commission(self) -> np.ndarray:
        return self._fees if self._fees is not None else self.notional * (self._costs.commission_bps / 1e4)

    @property
    def cost(self) -> np.ndarray:
        if self._fees is not None:
            return self._fees
        return self.notional * (self._costs.slippage_bps / 1e4 + self._costs.commission_bps / 1e4)

    def to_list(self) -> list[dict]:
        """The orders as a list of dicts (a new list each call)."""
        return [dict(o) for o in self._list()]

    def _list(self) -> list[dict]:
        if self._dicts is None:
            c = self._costs
            slip, comm = c.slippage_bps / 1e4, c.commission_bps / 1e4
            idx = self.index
            d = self._delta[idx]
            notional = np.abs(d) * self._nav
            bps = float(c.slippage_bps)
            ii = idx.tolist()
            names = [self._tickers[i] for i in ii] if self._tickers else ii
            comms = (notional * comm if self._fees is None else self._fees).tolist()
            costs = (notional * (slip + comm) if self._fees is None else self._fees).tolist()
            self._dicts = [
                {"asset": a, "side": "buy" if b else "sell", "delta_w": dw, "notional": nt,
                 "price_adj_bps": bps if b else -bps, "commission": cm, "cost": cs}
                for a, b, dw, nt, cm, cs in zip(names, (d > 0).tolist(), d.tolist(), notional.tolist(), comms, costs)
            ]
        return self._dicts

    def __len__(self) -> int:
        return int(np.count_nonzero(self._mask()))

    def __getitem__(self, i):
        return self._list()[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, Orders):
            other = other._list()
        return isinstance(other, (list, tuple)) and self._list() == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Orders({self._list()!r})"


def by_ticker(w: np.ndarray, tickers, w_pos: np.ndarray | None = None, available_tickers: tuple | None = None) -> dict:
    """``{ticker: weight}`` of the positive entries of ``w`` (N,), canonical order. ``tickers``: (N,) object
    array of the tickers; ``w_pos`` / ``available_tickers``: the positive entries and their tickers, if known
    (when there is one per available asset, ``w`` is 0 elsewhere)."""
    if w_pos is not None and available_tickers is not None and w_pos.size == len(available_tickers):
        return dict(zip(available_tickers, w_pos.tolist()))
    idx = (w > 0).nonzero()[0]
    return dict(zip(tickers[idx].tolist(), w[idx].tolist()))


class TickerWeights(Mapping):
    """A decision's target weights by ticker (``info["weights"]``): a read-only mapping ``{ticker: weight}``
    of the positive weights (fractions of NAV, summing to 1), canonical ticker order.

    Built from the weight vector on first access (speed only: an agent that never reads it does not pay
    for an 80-entry dict per step); equal to the dict (``==``), and ``dict(m)`` / :meth:`to_dict` give one.
    ``quantgym.results.to_jsonable`` writes it as a JSON object."""

    __slots__ = ("_w", "_tickers", "_w_pos", "_avail", "_d")

    def __init__(self, w: np.ndarray, tickers, w_pos: np.ndarray | None = None, available_tickers: tuple | None = None):
        self._w, self._tickers, self._w_pos, self._avail = w, tickers, w_pos, available_tickers
        self._d: dict | None = None

    def _dict(self) -> dict:
        d = self._d
        if d is None:
            d = self._d = by_ticker(self._w, self._tickers, self._w_pos, self._avail)
        return d

    def __getitem__(self, ticker: str) -> float:
        return self._dict()[ticker]

    def __iter__(self):
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def to_dict(self) -> dict:
        """The weights as a new dict."""
        return dict(self._dict())

    copy = to_dict

    def __eq__(self, other) -> bool:
        if isinstance(other, TickerWeights):
            other = other._dict()
        return self._dict() == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TickerWeights({self._dict()!r})"

    def __reduce__(self):
        return (dict, (self._dict(),))  # pickled (e.g. to a SubprocVecEnv parent) as the plain dict


_PERIOD_ROWS: dict[tuple, tuple[np.ndarray, tuple[int, int, np.ndarray]]] = {}


def period_rows(dates: pd.DatetimeIndex, period: Period) -> tuple[int, int, np.ndarray]:
    """(first row, last row, decision rows) of ``period`` on the calendar ``dates``, cached per calendar and
    period (speed only: a reset does not recompute the calendar rules; the decision rows are read-only).

    Raises ``ValueError`` if the period has no trading day in the data or none before it."""
    v = dates.asi8
    key = (len(v), int(v[0]) if len(v) else 0, int(v[-1]) if len(v) else 0, str(period.start), str(period.end),
           period.freq)
    hit = _PERIOD_ROWS.get(key)
    if hit is not None and np.array_equal(hit[0], v):
        return hit[1]
    inside = np.flatnonzero((dates >= pd.Timestamp(period.start)) & (dates <= pd.Timestamp(period.end)))
    if inside.size == 0:
        raise ValueError(
            f"period {period.name} ({period.start}..{period.end}) has no trading day in the data "
            f"({dates[0].date()}..{dates[-1].date()})"
        )
    first, last = int(inside[0]), int(inside[-1])
    if first == 0:
        raise ValueError(f"period {period.name} starts at the first date of the data: no history before it")
    rows = rebalance_rows(dates, period.start, period.end, period.freq)
    rows.flags.writeable = False
    if len(_PERIOD_ROWS) > 64:
        _PERIOD_ROWS.clear()
    _PERIOD_ROWS[key] = (v.copy(), (first, last, rows))
    return first, last, rows




@dataclass
class Trade:
    """One rebalance: date, turnover τ, total cost, NAV after, per-asset orders (:class:`Orders`)."""

    date: pd.Timestamp
    turnover: float
    cost: float
    nav_after: float
    orders: Sequence = field(default_factory=list)


def equal_weight_start(view):
    """The simulators' initial weights (§6.1): ``init(row)`` = equal weight over the assets of ``view``
    available at ``row``."""
    def init(row: int) -> np.ndarray:
        a = view.available_at(row)
        w = np.zeros(view.n_assets)
        if a.any():
            w[a] = 1.0 / a.sum()
        return w

    return init


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class PortfolioSimulator:
    """Clean-mode NAV sandbox for one period (spec §6.1–§6.3).

    Parameters
    ----------
    dates : trading calendar of the dataset.
    returns0 : (T, N) daily simple returns with missing = 0.
    period : the evaluation window.
    initial_weights_fn : callable(row) -> (N,) initial weights (equal weight over ``A`` at the row
        before the period start, §6.1).
    costs : the cost model (15 bps of traded notional by default), or an
        :class:`~quantgym.models.ImportableModel` / object with :class:`~quantgym.models.FeeModel`'s
        ``order_fee``: each traded asset's order (notional ``|Δw|·NAV``) is then priced by it, in Python.
    initial_nav : starting NAV in currency units.

    Raises
    ------
    ValueError
        If the period has no trading day in the data or no trading day before it.
    """

    def __init__(self, dates, returns0, period: Period, initial_weights_fn,
                 costs: PortBenchCostModel | ImportableModel, initial_nav: float, tickers=None):
        self.dates = pd.DatetimeIndex(dates)
        self.returns0 = returns0
        self.period = period
        model = build_model(costs, PortBenchCostModel)
        #: a user fee model (None: the spec's proportional costs, compiled)
        self.fee_model = None if isinstance(model, PortBenchCostModel) else model
        costs = proportional_costs(model)
        self.costs = costs
        self._rate, self._min_trade = float(costs.rate), float(costs.min_trade)
        self.initial_nav = float(initial_nav)
        self.tickers = tickers
        self.first_row, self.last_row, self.decision_rows = period_rows(self.dates, period)
        self.t = self.first_row - 1
        w0 = np.asarray(initial_weights_fn(self.t), dtype=np.float64)
        n = self._n = int(w0.shape[0])
        # the episode's history in one preallocated block (speed only: no per-day objects to keep and free):
        # row i = the end-of-day weights (:N) and NAV (N) of the i-th recorded day, the last row a scratch row
        # of the compiled trade (execution.trade_into); ``_h`` rows are recorded
        cap = self.last_row - self.t + 1
        self._hist = np.empty((cap + 1, n + 1))
        self._hist[0, :n] = w0
        self._hist[0, n] = self.initial_nav
        self._h = 1
        # one Timestamp per row, built once per calendar and shared (speed only: no pandas indexing per day)
        self._stamps = _timestamps(self.dates)
        self.nav_dates: list[pd.Timestamp] = [self._stamps[self.t]]
        self._trades: list[Trade] = []
        # the trades of trade_and_advance not yet built as Trade objects, one preallocated row each (speed only;
        # see :attr:`trades`): Δw (:N), then τ, cost, NAV after, NAV before, row
        self._tr = np.empty((cap + 1, n + 5))
        self._n_tr = self._tr_built = 0
        self._total_cost = 0.0
        self._n_costs = 0

    # the history as views of the preallocated block (read-only use; the simulator writes it)
    @property
    def nav(self) -> float:
        """NAV at the current day's close (currency units; after the trade on a decision date)."""
        return self._hist[self._h - 1, self._n]

    @property
    def weights(self) -> np.ndarray:
        """(N,) current drifted weights (a read-only view of the history: copy before keeping)."""
        return _read_only(self._hist[self._h - 1, : self._n])

    @property
    def nav_history(self) -> np.ndarray:
        """(days + 1,) NAV at each recorded close, the initial NAV first (a read-only view)."""
        return _read_only(self._hist[: self._h, self._n])

    @property
    def weight_history(self) -> np.ndarray:
        """(days + 1, N) end-of-day weights, the initial weights first (a read-only view)."""
        return _read_only(self._hist[: self._h, : self._n])

    @property
    def total_cost(self) -> float:
        """Sum of the trading costs so far (currency units)."""
        return np.float64(self._total_cost) if self._n_costs else self._total_cost

    def _add_cost(self, cost: float) -> None:
        self._total_cost += cost
        self._n_costs += 1

    def _push_day(self) -> np.ndarray:
        """The next history row (grown when full: a subclass may record more days than the period has)."""
        h = self._h
        if h + 1 >= self._hist.shape[0]:
            self._hist = np.concatenate([self._hist, np.empty_like(self._hist)])
        self._h = h + 1
        return self._hist[h]

    @property
    def trades(self) -> list[Trade]:
        """The rebalances so far, oldest first (:class:`Trade`); the same list object for the whole
        episode, brought up to date on each read."""
        n_tr, i = self._n_tr, self._tr_built
        if i < n_tr:
            stamps, costs, tickers, tr, n = self._stamps, self.costs, self.tickers, self._tr, self._n
            for j in range(i, n_tr):
                row = tr[j]
                self._trades.append(Trade(stamps[int(row[n + 4])], float(row[n]), row[n + 1], row[n + 2],
                                          Orders(row[:n], None, row[n + 3], costs, tickers)))
            self._tr_built = n_tr
        return self._trades

    @property
    def n_trades(self) -> int:
        """``len(self.trades)`` without building the Trade objects."""
        return len(self._trades) + self._n_tr - self._tr_built

    @property
    def done(self) -> bool:
        return self.t >= self.last_row

    def marks_to_market(self, t: int) -> bool:
        """Whether day ``t``'s returns are applied to the held portfolio (always, in clean mode)."""
        return True

    def advance_to(self, row: int) -> None:
        """Mark to market day by day up to and including ``row`` (§6.2 step 1)."""
        row = min(row, self.last_row)
        n = self._n
        for t in range(self.t + 1, row + 1):
            prev = self._hist[self._h - 1]
            cur = self._push_day()
            if self.marks_to_market(t):
                growth = prev[:n] * (1.0 + self.returns0[t])
                g = growth.sum()
                cur[n] = prev[n] * g
                cur[:n] = growth / g if g > 0 else prev[:n]
            else:
                cur[:] = prev
            self.t = t
            self.nav_dates.append(self._stamps[t])

    def trade(self, target: np.ndarray) -> Trade:
        """Trade to ``target`` at the close of the current day (§6.3): cost ``K = rate·τ·NAV``
        (:func:`~quantgym.envs.portbench.execution.execute_trade`)."""
        nav_before = self.nav
        ex = execute_trade(self.weights.copy(), target, nav_before, self.costs.rate, self.costs.min_trade)
        tau, cost = ex.turnover, ex.cost
        fees = None
        if self.fee_model is not None:  # a user fee model: one order per traded asset on |Δw|·NAV
            day = str(self._stamps[self.t].date())
            fees = np.array([sum(fee_parts(self.fee_model, abs(dw) * nav_before, 1 if dw > 0 else -1, day))
                             for dw in ex.delta[ex.traded].tolist()], dtype=np.float64)
            cost = float(fees.sum())
            ex = dataclasses.replace(ex, nav=nav_before - cost, cost=cost)
        self._add_cost(cost)
        # the end-of-day record holds the post-trade NAV and weights (§6.2 step 3)
        cur = self._hist[self._h - 1]
        cur[: self._n] = ex.weights
        cur[self._n] = ex.nav
        # per-asset orders as arrays; the order dicts are built only if read (speed only)
        orders = Orders(ex.delta, ex.traded, nav_before, self.costs, self.tickers, fees)
        tr = Trade(self._stamps[self.t], tau, cost, self.nav, orders)
        self.trades.append(tr)  # (the property: the rows of trade_and_advance first, so the order is kept)
        return tr

    def _trade_row(self) -> int:
        """The index of the next preallocated trade row (grown when full)."""
        j = self._n_tr
        if j >= self._tr.shape[0]:
            self._tr = np.concatenate([self._tr, np.empty_like(self._tr)])
        return j

    def lean_ready(self) -> bool:
        """Whether :meth:`trade_and_advance` takes the compiled path (no user fee model, every day marked)."""
        return self.fee_model is None and type(self).marks_to_market is PortfolioSimulator.marks_to_market

    def trade_and_advance(self, target: np.ndarray, row: int) -> Trade:
        """:meth:`trade` to ``target`` at the close of the current day, then :meth:`advance_to` ``row``: the
        same state and :class:`Trade`, the arithmetic in one compiled pass
        (:func:`~quantgym.envs.portbench.execution.trade_into`; speed only). A subclass that does not
        mark every day (:meth:`marks_to_market`), or one with a user fee model, runs the two methods."""
        if not self.lean_ready():
            tr = self.trade(target)
            self.advance_to(row)
            return tr
        row = min(row, self.last_row)
        t, n, m = self.t, self._n, max(row - self.t, 0)
        if type(target) is not np.ndarray or target.dtype != np.float64:
            target = np.asarray(target, dtype=np.float64)
        h = self._h
        if h + m >= self._hist.shape[0]:
            self._hist = np.concatenate([self._hist, np.empty((h + m + 1, n + 1))])
        j = self._trade_row()
        tau, cost = trade_into(self._hist, h, target, self._rate, self._min_trade, self.returns0, t, m, self._tr, j)
        self._advanced(t, row, m, cost)
        r = self._tr[j]
        return Trade(self._stamps[t], tau, r[n + 1], r[n + 2], Orders(r[:n], None, r[n + 3], self.costs,
                                                                      self.tickers))

    def _advanced(self, t: int, row: int, m: int, cost: float) -> None:
        """The bookkeeping after :func:`~quantgym.envs.portbench.execution.trade_into` traded at row ``t`` and
        marked ``m`` days up to ``row``."""
        self._n_tr += 1
        self._total_cost += cost
        self._n_costs += 1
        if m:
            self._h += m
            self.nav_dates.extend(self._stamps[t + 1 : row + 1])
            self.t = row

    def nav_series(self) -> pd.Series:
        """NAV curve in currency units, one point per trading day plus the initial point."""
        return pd.Series(self.nav_history, index=pd.DatetimeIndex(self.nav_dates), name="nav")

    def daily_returns(self) -> np.ndarray:
        n = self.nav_history
        return n[1:] / n[:-1] - 1.0
