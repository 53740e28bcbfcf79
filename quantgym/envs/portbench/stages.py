"""Ground truth and scores of the five stages S1–S5 (spec §4, clean mode).

Every function reads a :class:`~quantgym.envs.portbench.market.MarketSnapshot` (and,
for the ex-post oracle only, forward returns handed in by the env). Ground truth
never depends on the agent's outputs (§4.0). Arrays are over the universe (N) in
canonical order; only the available set ``A_d`` counts in means (§11.6).
"""

from __future__ import annotations


from dataclasses import dataclass, field

import numpy as np

from quantgym.envs.portbench.ceps import clip_float
from quantgym.envs.portbench.config import PortBenchScoringConfig
from quantgym.envs.portbench.execution import _turnover_sum
from quantgym.envs.portbench.market import ASSET_CLASSES, MarketSnapshot
from quantgym.envs.portbench.optimize import max_sharpe_weights
from quantgym.envs.portbench.profiles import InvestorProfile, _class_sums
from quantgym.jit import njit, np_sum
from quantgym.metrics import max_drawdown, quantile_linear

SELL, HOLD, BUY = 0, 1, 2
SIGNAL_NAMES = ("sell", "hold", "buy")


# --------------------------------------------------------------------------------------- S1
def s1_truth(trailing_return: np.ndarray, available: np.ndarray, scale: float = 0.10) -> np.ndarray:
    """S1 truth ``v*_i = clip(R_i / 0.10, −1, 1)`` on ``A_d`` (0 elsewhere) (spec §4.1).

    Examples
    --------
    >>> s1_truth(np.array([0.15, -0.05, 0.01]), np.array([True, True, True])).round(6).tolist()
    [1.0, -0.5, 0.1]
    """
    return np.where(available, np.clip(trailing_return / scale, -1.0, 1.0), 0.0)


def s1_score(views: np.ndarray, truth: np.ndarray, available: np.ndarray) -> float:
    """``S1 = clip(1 − mean_{A_d} |v̂ − v*| / 2, 0, 1)``; empty ``A_d`` → 1 (spec §4.1).

    Examples
    --------
    >>> round(s1_score(np.array([0.8, 0, 0.1]), np.array([1, -0.5, 0.1]), np.ones(3, bool)), 6)
    0.883333
    """
    if not available.any():
        return 1.0
    mae = np.abs(views[available] - truth[available]).mean()
    return clip_float(1.0 - mae / 2.0, 0.0, 1.0)


# --------------------------------------------------------------------------------------- S2
def s2_truth(v_star: np.ndarray, threshold: float = 0.2) -> np.ndarray:
    """S2 truth from S1 truth: buy if ``v* > 0.2``, sell if ``v* < −0.2``, else hold (spec §4.2).

    Returns codes 0 sell, 1 hold, 2 buy.
    """
    return np.where(v_star > threshold, BUY, np.where(v_star < -threshold, SELL, HOLD)).astype(np.int64)


def s2_score(signals: np.ndarray, truth: np.ndarray, available: np.ndarray) -> float:
    """Share of ``A_d`` with the right signal; empty → 1 (spec §4.2)."""
    if not available.any():
        return 1.0
    return float((signals[available] == truth[available]).mean())


# --------------------------------------------------------------------------------------- S3
#: the note of an S3 oracle that fell back to equal weight because the solver failed (spec §4.3)
ORACLE_SOLVER_FALLBACK = "S3 oracle: max-Sharpe solver failed; equal weight on the truth buys (§4.3)"


def s3_truth(snap: MarketSnapshot, s2_star: np.ndarray, *args, **kwargs) -> np.ndarray:
    """S3 ground-truth weights ``w*`` of the configured oracle (spec §4.3, §11.7, §11.9): the weights of
    :func:`s3_oracle` (same arguments)."""
    return s3_oracle(snap, s2_star, *args, **kwargs)[0]


def s3_oracle(
    snap: MarketSnapshot,
    s2_star: np.ndarray,
    oracle: str = "lookback",
    forward_returns: np.ndarray | None = None,
    *,
    ew_if_nonpositive_mu: bool = True,
) -> tuple[np.ndarray, str | None]:
    """S3 ground-truth weights ``w*`` of the configured oracle (spec §4.3, §11.7, §11.9) and its fallback note.

    1. Eligible set ``B`` = truth buys in ``A_d``; if empty, all of ``A_d``.
    2. Data: ``lookback`` → the snapshot's window returns; ``ex_post`` → ``forward_returns``
       (scoring only); ``equal_weight`` → none.
    3. Inner-join on dates; < 2 series or < 2 rows → ``round4(1/|B|)`` on ``B``.
    4. Max-Sharpe (:func:`~.optimize.max_sharpe_weights`); if ``max μ ≤ 0`` on ``B`` (clean mode, §11.9;
       ``ew_if_nonpositive_mu=False``, paper flag ``s3_solver_nonpositive_mu``: the solver's answer) or
       the solver fails → equal weight on ``B``. Clip, renormalise, round 4.

    Returns
    -------
    (N,) weights, 0 outside ``B``; and :data:`ORACLE_SOLVER_FALLBACK` when the solver failed (step 4), else
    None (the rules of steps 1–3 and §11.9 are the oracle's definition, not a fallback).
    """
    n = snap.available.size
    avail = snap.available
    b = np.flatnonzero(avail & (s2_star == BUY))
    if b.size == 0:
        b = np.flatnonzero(avail)
    w = np.zeros(n)
    if b.size == 0:
        return w, None
    ew = round(1.0 / b.size, 4)
    if oracle == "equal_weight":
        w[b] = ew
        return w, None
    if oracle == "lookback":
        x = snap.returns[:, b]
    elif oracle == "ex_post":
        x = (forward_returns if forward_returns is not None else np.empty((0, n)))[:, b]
    else:
        raise ValueError(f"unknown oracle {oracle!r}; choose 'lookback', 'ex_post' or 'equal_weight'")
    x = x[np.isfinite(x).all(axis=1)]
    if b.size < 2 or x.shape[0] < 2 or (ew_if_nonpositive_mu and x.mean(axis=0).max() <= 0):
        w[b] = ew
        return w, None
    sol = max_sharpe_weights(x)
    if sol is None:
        w[b] = ew
        return w, ORACLE_SOLVER_FALLBACK
    w[b] = np.round(sol, 4)
    return w, None


@njit
def s12_parts(views, v_star, signals, s_star, available):
    """S1's ``mean_{A_d} |v̂ − v*|`` and S2's share of right signals (:func:`s1_score`, :func:`s2_score` before
    their final step) in one compiled pass (speed only): numpy's mean = its pairwise sum
    (:func:`quantgym.jit.np_sum`) over the available entries divided by their count. Returns
    ``(n_available, mae, share)`` (0, 0.0, 0.0 for an empty ``A_d``)."""
    n = views.shape[0]
    buf = np.empty(n)
    k, right = 0, 0
    for i in range(n):
        if available[i]:
            buf[k] = abs(views[i] - v_star[i])
            k += 1
            if signals[i] == s_star[i]:
                right += 1
    if k == 0:
        return 0, 0.0, 0.0
    return k, np_sum(buf, 0, k) / k, right / k


@dataclass
class CorrelationScore:
    """Parts of the two-layer correlation score (spec §4.3)."""

    intra: float
    inter: float
    score: float
    class_weights: dict = field(default_factory=dict)


def correlation_score(weights: np.ndarray, snap: MarketSnapshot) -> CorrelationScore:
    """Two-layer correlation score ``C = 0.5·I + 0.5·H`` (spec §4.3, NaN rules §11.9).

    ``I = clip(1 − Σ_c W_c·max(ρ̄_c, 0), 0, 1)`` over classes with ≥ 2 available members and
    ``W_c > 0``; ``H = clip((1 − ρ̄_w)/2, 0, 1)`` with ``ρ̄_w`` the class-weight-weighted mean
    inter-class correlation over active classes (``H = 1`` if fewer than 2 are active or the
    denominator is 0). The sums run in one kernel (:func:`_correlation_sums`) with numpy's order.
    """
    k = len(ASSET_CLASSES)
    cw = np.zeros(k)
    s_i, n_active, den, num = _correlation_sums(np.asarray(weights, dtype=np.float64), snap.available, snap.class_id,
                                     snap.intra, snap.inter, cw)
    i_score, h, score = correlation_parts(s_i, n_active, den, num)
    return CorrelationScore(i_score, h, score, {ASSET_CLASSES[c]: v for c, v in enumerate(cw.tolist()) if v > 0})


def correlation_parts(s_i: float, n_active: int, den: float, num: float) -> tuple[float, float, float]:
    """``(I, H, C)`` of :func:`correlation_score` from its sums (:func:`_correlation_sums`)."""
    i_score = clip_float(1.0 - s_i, 0.0, 1.0)
    h = 1.0
    if n_active >= 2 and den > 0:
        h = clip_float((1.0 - num / den) / 2.0, 0.0, 1.0)
    return i_score, h, 0.5 * i_score + 0.5 * h


@njit
def _correlation_sums(weights, available, class_id, intra, inter, cw):
    """The sums of :func:`correlation_score` (a kernel, :mod:`quantgym.jit`; speed only), as numpy forms them:
    ``cw`` (written) = ``np.bincount(class_id, weights=where(A_d, w, 0))`` (in index order); ``Σ_c W_c·max(ρ̄_c, 0)``
    over finite ``ρ̄_c`` with ``W_c > 0`` (class order); over the active classes' off-diagonal finite ``ρ̄_cd``
    in row-major order, ``den = Σ W_c·W_d`` and ``num = Σ W_c·W_d·ρ̄_cd`` (numpy's pairwise sums). Returns
    ``(Σ_I, n_active, den, num)``."""
    for i in range(weights.shape[0]):
        cw[class_id[i]] += weights[i] if available[i] else 0.0
    k = cw.shape[0]
    s_i = 0.0
    for c in range(k):
        if cw[c] > 0 and np.isfinite(intra[c]):
            s_i += cw[c] * max(intra[c], 0.0)
    active = np.empty(k, dtype=np.int64)
    na = 0
    for c in range(k):
        if cw[c] > 0:
            active[na] = c
            na += 1
    ww = np.empty(k * k)
    wr = np.empty(k * k)
    m = 0
    for a in range(na):
        for b in range(na):
            rho = inter[active[a], active[b]]
            if a != b and np.isfinite(rho):
                x = cw[active[a]] * cw[active[b]]
                ww[m] = x
                wr[m] = x * rho
                m += 1
    return s_i, na, np_sum(ww, 0, m), np_sum(wr, 0, m)


def s3_score(weights: np.ndarray, truth: np.ndarray, snap: MarketSnapshot, alpha: float = 0.5) -> dict:
    """``S3 = α·A + (1 − α)·C`` with ``A = clip(1 − MAE/2, 0, 1)`` over ``A_d`` (spec §4.3).

    Returns a dict with ``score``, ``accuracy``, ``mae``, ``intra``, ``inter``, ``corr``.
    """
    avail = snap.available
    if (type(weights) is np.ndarray and type(truth) is np.ndarray and weights.dtype == np.float64
            and truth.dtype == np.float64 and weights.ndim == 1):  # one kernel, the same float (speed only)
        mae = _mae_available(weights, truth, avail, np.empty(weights.shape[0]))
    else:
        mae = float(np.abs(weights[avail] - truth[avail]).mean()) if avail.any() else 0.0
    cs = correlation_score(weights, snap)
    score, acc = s3_value(mae, cs.score, alpha)
    return {"score": score, "accuracy": acc, "mae": mae, "intra": cs.intra, "inter": cs.inter,
            "corr": cs.score, "class_weights": cs.class_weights}


def s3_value(mae: float, corr: float, alpha: float) -> tuple[float, float]:
    """``(S3, A)`` of :func:`s3_score` from the MAE over ``A_d`` and the correlation score ``C``."""
    acc = clip_float(1.0 - mae / 2.0, 0.0, 1.0)
    return float(acc if alpha >= 1 else alpha * acc + (1.0 - alpha) * corr), acc


@njit
def _mae_available(weights, truth, available, buf):
    """``float(np.abs(weights[A] − truth[A]).mean())`` (0.0 for an empty ``A``), a kernel (:mod:`quantgym.jit`):
    the differences in index order into ``buf``, numpy's pairwise sum (:func:`~quantgym.jit.np_sum`) over
    their count, as ``ndarray.mean`` divides."""
    k = 0
    for i in range(weights.shape[0]):
        if available[i]:
            buf[k] = abs(weights[i] - truth[i])
            k += 1
    if k == 0:
        return 0.0
    return np_sum(buf, 0, k) / k


@njit
def score_parts(w_hat, w0, w_truth, w_star, available, class_id, intra, inter, eq, defensive, min_trade, n_classes,
                out):
    """The sums of one scored decision in one compiled call (speed only: the kernels of the functions named here,
    so the same floats): ``τ̂`` and ``τ*``, the :func:`~.execution.turnover` of ``w_hat`` and of ``w_truth`` from
    ``w0`` (spec §4.4); S3's MAE of ``w_hat`` against ``w_star`` (:func:`s3_score`); the sums of
    :func:`correlation_score` of ``w_hat``; PAS's class sums of ``w_hat`` (:func:`~.profiles.pas_step`, ``eq`` and
    ``defensive`` its class masks). ``out`` (2N): scratch in its first N; its last N get ``where(A_d, w_hat, 0)``,
    the weights of S5's portfolio returns (:func:`risk_report`). Returns ``(τ̂, τ*, MAE, Σ_I, n_active, den, num,
    Σ_equity, Σ_defensive)``."""
    n = w_hat.shape[0]
    buf = out[:n]
    tau_hat = _turnover_sum(w_hat, w0, min_trade, buf)
    tau_star = _turnover_sum(w_truth, w0, min_trade, buf)
    mae = _mae_available(w_hat, w_star, available, buf)
    s_i, n_active, den, num = _correlation_sums(w_hat, available, class_id, intra, inter, np.zeros(n_classes))
    e, b = _class_sums(w_hat, eq, defensive, buf)
    for i in range(n):
        out[n + i] = w_hat[i] if available[i] else 0.0
    return tau_hat, tau_star, mae, s_i, n_active, den, num, e, b


# --------------------------------------------------------------------------------------- S4
def s4_score(tau_hat: float, tau_star: float) -> float:
    """``S4 = clip(1 − |τ̂ − τ*| / max(τ̂, τ*, 1e−4), 0, 1)``, both rounded to 4 (spec §4.4).

    Examples
    --------
    >>> round(s4_score(0.2, 1.0), 6)
    0.2
    >>> s4_score(0.0, 0.0)
    1.0
    """
    a, b = round(tau_hat, 4), round(tau_star, 4)
    return clip_float(1.0 - abs(a - b) / max(a, b, 1e-4), 0.0, 1.0)


# --------------------------------------------------------------------------------------- S5
@dataclass
class RiskReport:
    """S5 risk monitoring of one weight vector (spec §4.5)."""

    var: float
    drawdown: float
    drift: float
    alerts: list[str]
    trigger: bool

    def as_dict(self) -> dict:
        return {"var": self.var, "drawdown": self.drawdown, "drift": self.drift, "alerts": list(self.alerts),
                "trigger": self.trigger}


def risk_report(weights: np.ndarray, snap: MarketSnapshot, profile: InvestorProfile | None,
                config: PortBenchScoringConfig = PortBenchScoringConfig(), include_start: bool = True,
                masked: np.ndarray | None = None) -> RiskReport:
    """VaR, drawdown and drift of ``weights`` on the snapshot window, and the alerts (spec §4.5).

    ``p_t = Σ_i w_i r_{i,t}`` (missing = 0); ``VaR = q_0.05(p)``, ``DD`` = clean-mode MDD (``P_0 = 1``)
    if more than 10 observations, else 0; ``drift = max_{A_d} |w_i − 1/n|``, ``n = |A_d|``. Alerts:
    ``var_breach`` (VaR < limit; action reduce), ``drawdown`` (DD < −tolerance; rebalance),
    ``weight_drift`` (drift > 0.05; rebalance); ``trigger`` = any rebalance alert. Rounded to 6.
    ``include_start=False`` (paper mode, §11.9): the DD path starts at the first return. ``masked``: the
    float64 ``where(A_d, weights, 0)`` when the caller has it already (:func:`score_parts`; speed only).
    """
    var_limit = profile.var_limit if profile else -0.02
    tol = profile.max_drawdown if profile else 0.10
    # the window with missing = 0 (cached per row by the view's snapshots; speed only)
    r = snap.loader("returns0") if snap.loader is not None else np.nan_to_num(snap.returns, nan=0.0)
    avail = snap.available
    p = r @ (np.where(avail, weights, 0.0) if masked is None else masked)
    w = np.asarray(weights, dtype=np.float64)
    ok, var, dd, drift = _risk_numbers(p, w, avail, 0.05, config.s5_min_obs, include_start)
    if not ok:  # a non-finite portfolio return: numpy's own functions (their rules for NaN)
        var = quantile_linear(p, 0.05) if p.size > config.s5_min_obs else 0.0
        dd = max_drawdown(p, include_start=include_start) if p.size > config.s5_min_obs else 0.0
        n = int(avail.sum())
        drift = float(np.abs(weights[avail] - 1.0 / n).max()) if n else 0.0
    var, dd, drift = round(var, 6), round(dd, 6), round(drift, 6)
    alerts = []
    if var < var_limit:
        alerts.append("var_breach")
    if dd < -tol:
        alerts.append("drawdown")
    if drift > config.drift_limit:
        alerts.append("weight_drift")
    trigger = "drawdown" in alerts or "weight_drift" in alerts
    return RiskReport(var, dd, drift, alerts, trigger)




@njit
def _risk_numbers(p, weights, available, q, min_obs, include_start):
    """The S5 numbers of :func:`risk_report` before rounding, in one compiled pass (a kernel,
    :mod:`quantgym.jit`; speed only): ``VaR = quantile_linear(p, q)`` and ``DD = max_drawdown(p)`` (0 for at most
    ``min_obs`` returns) and ``drift = max_{A_d} |w_i − 1/n|`` (0 for an empty ``A_d``).

    The same floats as those numpy functions: the quantile's two order statistics (a sort finds the same values
    as numpy's partition) and its interpolation; the drawdown's running product, running peak and
    ``path/peak − 1`` in order. Returns ``(ok, var, dd, drift)``; ``ok`` False (nothing computed) when a portfolio
    return is not finite, where numpy's NaN rules apply instead.
    """
    n = p.shape[0]
    for i in range(n):
        if not np.isfinite(p[i]):
            return False, 0.0, 0.0, 0.0
    var, dd = 0.0, 0.0
    if n > min_obs:
        vi = (n - 1) * q
        lo = int(np.floor(vi))
        srt = np.sort(p)
        x0, x1 = srt[lo], srt[lo + 1]
        t = vi - lo
        diff = x1 - x0
        var = x1 - diff * (1 - t) if t >= 0.5 else x0 + diff * t
        acc, peak = 1.0, 1.0
        dd = 0.0 if include_start else np.inf
        for i in range(n):
            acc = acc * (1.0 + p[i])
            if i == 0 and not include_start:
                peak = acc
            elif acc > peak:
                peak = acc
            x = acc / peak - 1.0
            if x < dd:
                dd = x
    m = 0
    for i in range(available.shape[0]):
        if available[i]:
            m += 1
    drift = 0.0
    if m:
        ew = 1.0 / m
        for i in range(available.shape[0]):
            if available[i]:
                x = abs(weights[i] - ew)
                if x > drift:
                    drift = x
    return True, var, dd, drift


def s5_score(agent: RiskReport, truth: RiskReport) -> float:
    """``S5 = 0.5·1[trigger match] + 0.5·clip(1 − (e_V + e_D)/2, 0, 1)`` (spec §4.5).

    ``e_V = |VaR̂ − VaR*| / max(|VaR*|, 1e−6)``, ``e_D`` likewise for the drawdown.
    """
    e_v = abs(agent.var - truth.var) / max(abs(truth.var), 1e-6)
    e_d = abs(agent.drawdown - truth.drawdown) / max(abs(truth.drawdown), 1e-6)
    return float(0.5 * (agent.trigger == truth.trigger) + 0.5 * clip_float(1.0 - (e_v + e_d) / 2.0, 0.0, 1.0))
