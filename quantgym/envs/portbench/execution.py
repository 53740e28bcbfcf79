"""PortBench execution: the one pure trade-and-cost function and its fallbacks (spec §4.3, §4.4, §6.3, §11.6).

Used by the clean simulator (:meth:`~quantgym.envs.portbench.simulator.PortfolioSimulator.trade`, which
the paper simulator inherits unchanged), the env (S3 fallback, S4 turnover, paper executed weights) and
the batched vector env (:mod:`quantgym.envs.portbench.vector`). Everything is in portfolio weights
(fractions of NAV, long-only) and NAV currency units; no prices are needed because the simulator
tracks drifted weights, not share holdings.

- :func:`execute_trade`: trade from the current weights to a target at the close (§6.3);
- :func:`turnover`: ``τ = Σ|Δw|`` over the traded entries (§4.4);
- :func:`fallback_weights`: the S3 fallback of an invalid or refused answer (§11.6);
- :func:`cash_cost_drag` / :func:`cash_key`: paper mode's executed weights (``PaperFidelity.cash_cost_drag``,
  §4.4 paper), the one place where paper execution differs from clean mode; it is applied to the target
  before the trade because S5 also scores the executed weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from quantgym.jit import njit, np_sum

__all__ = ["Execution", "execute_trade", "turnover", "fallback_weights", "cash_cost_drag", "cash_key",
           "trade_into"]


@dataclass(frozen=True)
class Execution:
    """Result of :func:`execute_trade` (shapes for a batch of ``B`` portfolios over ``N`` assets).

    Attributes
    ----------
    weights : numpy.ndarray, shape (N,) or (B, N), float64
        Post-trade weights: the target normalised to sum 1, or the current weights where the target
        sums to <= 0 (see ``kept``).
    nav : float or numpy.ndarray, shape (B,)
        NAV after the cost, currency units.
    cost : float or numpy.ndarray, shape (B,)
        ``K = rate · τ · NAV_before``, currency units.
    turnover : float or numpy.ndarray, shape (B,)
        ``τ = Σ|Δw|`` over the traded entries.
    delta : numpy.ndarray, shape (N,) or (B, N)
        Signed ``target − current`` (for order records).
    traded : numpy.ndarray, shape (N,) or (B, N), bool
        ``|Δw| ≥ min_trade``.
    kept : bool or numpy.ndarray, shape (B,), bool
        Fallback flag: the target summed to <= 0, so the current weights were kept (the cost is still
        charged on ``τ``).
    """

    weights: np.ndarray
    nav: float | np.ndarray
    cost: float | np.ndarray
    turnover: float | np.ndarray
    delta: np.ndarray
    traded: np.ndarray
    kept: bool | np.ndarray


def turnover(target: np.ndarray, current: np.ndarray, min_trade: float = 1e-6) -> float:
    """``τ = Σ |w^T − w^0|`` over assets with ``|Δ| ≥ min_trade`` (spec §4.4; 1-D, float).

    Two 1-D float64 arrays of one length go through one kernel (:func:`_turnover_sum`, numpy's summation
    order: the same float); anything else through numpy."""
    if (type(target) is np.ndarray and type(current) is np.ndarray and target.dtype == np.float64
            and current.dtype == np.float64 and target.ndim == 1 and target.shape == current.shape):
        return _turnover_sum(target, current, min_trade, np.empty(target.shape[0]))
    d = np.abs(np.asarray(target) - np.asarray(current))
    return float(d[d >= min_trade].sum())


@njit
def _turnover_sum(target, current, min_trade, buf):
    """``float(d[d >= min_trade].sum())`` with ``d = |target − current|`` (a kernel, :mod:`quantgym.jit`): the
    kept ``d`` in index order into ``buf``, then numpy's pairwise sum of them (:func:`~quantgym.jit.np_sum`)."""
    k = 0
    for i in range(target.shape[0]):
        d = abs(target[i] - current[i])
        if d >= min_trade:
            buf[k] = d
            k += 1
    return np_sum(buf, 0, k)


def execute_trade(weights: np.ndarray, target: np.ndarray, nav: float | np.ndarray, rate: float,
                  min_trade: float = 1e-6) -> Execution:
    """Trade from ``weights`` to ``target`` at the close (spec §6.3): cost ``K = rate·τ·NAV``.

    Parameters
    ----------
    weights : array, shape (N,) or (B, N)
        Current (drifted) weights.
    target : array, same shape
        Target weights (already validated and rounded by the caller, §4.3).
    nav : float, or array of shape (B,) for a batch
        NAV before the trade, currency units.
    rate : float
        Cost as a fraction of traded notional (``PortBenchCostModel.rate``: 15 bps = 0.0015 by default).
    min_trade : float
        ``|Δw|`` below this is not traded and costs nothing (§4.4: 1e-6).

    Returns
    -------
    Execution

    Notes
    -----
    One rule for both shapes; the summation of ``τ`` keeps each caller's historical floating-point
    order so every NAV stays bit-identical: a single portfolio (1-D) sums only the traded entries (the
    order of :func:`turnover`), a batch sums each row with the untraded entries as zeros. The two are
    the same number up to the last ulp.
    """
    if np.ndim(target) == 1:
        target = np.asarray(target, dtype=np.float64)
        delta = target - weights
        traded = np.abs(delta) >= min_trade
        tau = float(np.abs(delta[traded]).sum())
        cost = rate * tau * nav
        tot = target.sum()
        kept = not tot > 0
        new = weights if kept else target / tot
        return Execution(new, nav - cost, cost, tau, delta, traded, kept)
    delta = target - weights
    absd = np.abs(delta)
    traded = absd >= min_trade
    tau = np.where(traded, absd, 0.0).sum(axis=1)
    cost = rate * tau * nav
    ts = target.sum(axis=1)
    ok = ts > 0
    if ok.all():  # the general rule below when every target is kept (speed only)
        return Execution(target / ts[:, None], nav - cost, cost, tau, delta, traded, ~ok)
    new = np.where(ok[:, None], target / np.where(ok, ts, 1.0)[:, None], weights)
    return Execution(new, nav - cost, cost, tau, delta, traded, ~ok)


@njit
def trade_into(hist, h, target, rate, min_trade, returns0, t0, m, trades, j):
    """:func:`execute_trade` (1-D) at the close of row ``t0``, then marking to market on the following
    rows (spec §6.2–§6.3), in one compiled pass over a simulator's preallocated history (a kernel,
    :mod:`quantgym.jit`; speed only).

    The arithmetic of the numpy code it replaces, in the same order (``τ`` and every weight sum are
    numpy's pairwise sums, :func:`quantgym.jit.np_sum`), so NAVs and weights are bit-identical.

    Parameters
    ----------
    hist : (H, N + 1) float64, row ``i``: weights (:N) and NAV (N) at a close; row ``h − 1`` holds the current
        weights and NAV (replaced by those after the trade), rows ``h .. h + m − 1`` receive the marked days
        (rows ``t0 + 1 .. t0 + m``); the last row is scratch space (``h + m < H − 1``).
    target : (N,) float64 target weights. ``rate``, ``min_trade``: :func:`execute_trade`.
    returns0 : (T, N) float64 daily returns, missing = 0. ``t0``: the trade's row.
    trades : (K, N + 5) float64, row ``j`` receives Δw (:N), τ, cost, NAV after, NAV before and ``t0``.

    Returns
    -------
    tau, cost : float, turnover and cost of the trade.
    """
    n = target.shape[0]
    cur = hist[h - 1]
    buf = hist[hist.shape[0] - 1]
    rec = trades[j]
    k = 0
    for i in range(n):  # |Δw| of the traded entries, in order (numpy's delta[traded])
        ad = abs(target[i] - cur[i])
        if ad >= min_trade:
            buf[k] = ad
            k += 1
    tau = np_sum(buf, 0, k)
    nav = cur[n]
    cost = rate * tau * nav
    tot = np_sum(target, 0, n)
    for i in range(n):
        rec[i] = target[i] - cur[i]
    if tot > 0:
        for i in range(n):
            cur[i] = target[i] / tot
    v = nav - cost
    cur[n] = v
    rec[n], rec[n + 1], rec[n + 2], rec[n + 3], rec[n + 4] = tau, cost, v, nav, t0
    for d in range(1, m + 1):
        r = returns0[t0 + d]
        prev = hist[h - 2 + d]
        row = hist[h - 1 + d]
        for i in range(n):
            buf[i] = prev[i] * (1.0 + r[i])
        g = np_sum(buf, 0, n)
        v *= g
        row[n] = v
        for i in range(n):
            row[i] = buf[i] / g if g > 0 else prev[i]
    return tau, cost


def fallback_weights(current: np.ndarray, available: np.ndarray) -> np.ndarray:
    """S3 fallback (spec §11.6): current weights with unavailable assets set to 0, renormalised.

    If nothing available is held, equal weight over the available set; if nothing is available,
    zeros.

    Parameters
    ----------
    current : array, shape (N,) or (B, N)
        Current (drifted) weights.
    available : bool array, same shape
        The availability set ``A_d``.

    Returns
    -------
    numpy.ndarray, same shape, float64
    """
    if np.ndim(current) == 1:
        w = np.where(available, current, 0.0)
        if w.sum() <= 0:
            w = available.astype(np.float64)
        return w / w.sum() if w.sum() > 0 else w
    fb = np.where(available, current, 0.0)
    sm = fb.sum(axis=1)
    fb = np.where((sm <= 0)[:, None], available.astype(np.float64), fb)
    sm = fb.sum(axis=1)
    return np.divide(fb, sm[:, None], out=fb.copy(), where=sm[:, None] > 0)


def cash_key(tickers: Sequence[str], classes: Sequence[str]) -> int | None:
    """Column of the paper's cash key: the first ticker containing ``BIL``, else the first cash asset."""
    cash = next((i for i, t in enumerate(tickers) if "BIL" in t), None)
    if cash is None:
        cash = next((i for i, c in enumerate(classes) if c == "cash"), None)
    return cash


def cash_cost_drag(weights: np.ndarray, tau: float, rate: float, cash: int | None) -> np.ndarray:
    """Paper executed weights (spec §4.4 paper, ``cash_cost_drag``): the cash key reduced by
    ``K/NAV = rate·τ`` (floored at 0), then every weight rounded to 4 decimals.

    Parameters
    ----------
    weights : array, shape (N,)
        Target weights.
    tau : float
        Turnover of the target (:func:`turnover`).
    rate : float
        Cost rate (fraction of traded notional).
    cash : int or None
        Column of the cash key (:func:`cash_key`); None = no cash asset (only the rounding applies).
    """
    out = np.array(weights, dtype=np.float64)
    if cash is not None:
        out[cash] = max(out[cash] - rate * tau, 0.0)
    return np.round(out, 4)
