"""Ground truth and scores of the five stages S1–S5 (spec §4, clean mode).

Every function reads a :class:`~quantgym.envs.portbench.market.MarketSnapshot` (and,
for the ex-post oracle only, forward returns handed in by the env). Ground truth
never depends on the agent's outputs (§4.0). Arrays are over the universe (N) in
canonical order; only the available set ``A_d`` counts in means (§11.6).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize, nnls

from quantgym.envs.portbench.config import PortBenchScoringConfig
from quantgym.envs.portbench.market import ASSET_CLASSES, MarketSnapshot
from quantgym.envs.portbench.profiles import InvestorProfile
from quantgym.metrics import max_drawdown

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
    return float(np.clip(1.0 - mae / 2.0, 0.0, 1.0))


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
_BLAS = None
_BLAS_DEFAULT = 1


def _single_thread_blas():
    """Context limiting BLAS to one thread (speed only; same numbers).

    SLSQP makes hundreds of tiny BLAS calls; with a multi-threaded OpenBLAS on a busy machine each
    call waits for worker threads, which made the oracle 10–100× slower than single-threaded
    (docs/performance.md). A run that fails under the limit is repeated without it, so the oracle
    returns what it returned before the limit existed (all 94 bench decision rows identical).
    Without threadpoolctl (a scikit-learn dependency) this is a no-op.
    """
    return _blas_limit(1)


def _blas_limit(n: int | None):
    """BLAS thread limit context: ``n`` threads, or None = the process's default (captured at first use)."""
    global _BLAS, _BLAS_DEFAULT
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
            _BLAS_DEFAULT = max([lib.num_threads for lib in _BLAS.select(user_api="blas").lib_controllers] or [1])
        except Exception:  # noqa: BLE001 - optional speed-up only
            _BLAS = False
    if not _BLAS:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=_BLAS_DEFAULT if n is None else n, user_api="blas")


def max_sharpe(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray | None:
    """Long-only maximum of ``wᵀμ / sqrt(wᵀΣw + 1e−10)``, ``Σw = 1`` (spec §4.3 step 4, §8.6).

    Parameters
    ----------
    mu : (n,) expected returns (daily decimals); sigma : (n, n) covariance (PSD, may be singular).

    Returns
    -------
    (n,) weights ≥ 0 summing to 1 (not rounded); ``None`` if the inputs are not finite or no
    solution exists.

    Notes
    -----
    Solved exactly (§11.9: the problem, not the code, is normative). On the simplex
    ``(1ᵀw)² = 1``, so the objective equals ``wᵀμ / sqrt(wᵀΣ'w)`` with ``Σ' = Σ + 1e−10·11ᵀ``.
    When ``max μ > 0`` the maximiser is ``y/1ᵀy`` for the non-negative least-squares solution of
    ``min_{y ≥ 0} ‖A y‖² + (μᵀy − 1)²`` with ``AᵀA = Σ'`` (for a fixed direction the best scale
    makes this increasing in the direction's variance per unit of μ, so its minimiser is the
    max-Sharpe direction). SciPy's SLSQP, used by the repo, stops far from this optimum on many
    real windows (e.g. Black–Litterman posteriors: Sharpe 1.1 vs the optimum 10.1); it is kept only
    for ``max μ ≤ 0``, where the maximum is a least-negative ratio.
    """
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    n = mu.size
    if n == 0 or not (np.all(np.isfinite(mu)) and np.all(np.isfinite(sigma))):
        return None
    if mu.max() <= 0:
        return _max_sharpe_slsqp(mu, sigma)
    s = sigma + 1e-10
    lam, vec = np.linalg.eigh(0.5 * (s + s.T))
    a = (vec * np.sqrt(np.clip(lam, 0.0, None))).T  # aᵀa = Σ'
    lhs = np.vstack([a, mu[None, :]])
    rhs = np.zeros(n + 1)
    rhs[-1] = 1.0
    y, _ = nnls(lhs, rhs, maxiter=50 * (n + 1))
    tot = y.sum()
    if not np.isfinite(tot) or tot <= 0:
        return None
    return y / tot


def _max_sharpe_slsqp(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray | None:
    """SLSQP from equal weight (ftol 1e−9, 500 iterations) with analytic gradients (the repo's solver)."""
    n = mu.size

    def neg_sharpe(w):
        return -(w @ mu) / np.sqrt(w @ sigma @ w + 1e-10)

    def grad(w):
        q = w @ sigma @ w + 1e-10
        sq = np.sqrt(q)
        return -(mu / sq - (w @ mu) * (sigma @ w) / (q * sq))

    res = minimize(
        neg_sharpe, np.full(n, 1.0 / n), jac=grad, method="SLSQP", bounds=[(0.0, 1.0)] * n,
        constraints=({"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones_like(w)},),
        options={"ftol": 1e-9, "maxiter": 500},
    )
    if not res.success or not np.all(np.isfinite(res.x)):
        return None
    w = np.clip(res.x, 0.0, None)
    tot = w.sum()
    return w / tot if tot > 0 else None


def max_sharpe_weights(x: np.ndarray) -> np.ndarray | None:
    """:func:`max_sharpe` on the sample mean and covariance (ddof 1, no rf) of returns ``x`` (T, n)."""
    n = x.shape[1]
    return max_sharpe(x.mean(axis=0), np.cov(x, rowvar=False, ddof=1).reshape(n, n))


def s3_truth(
    snap: MarketSnapshot,
    s2_star: np.ndarray,
    oracle: str = "lookback",
    forward_returns: np.ndarray | None = None,
) -> np.ndarray:
    """S3 ground-truth weights ``w*`` of the configured oracle (spec §4.3, §11.7, §11.9).

    1. Eligible set ``B`` = truth buys in ``A_d``; if empty, all of ``A_d``.
    2. Data: ``lookback`` → the snapshot's window returns; ``ex_post`` → ``forward_returns``
       (scoring only); ``equal_weight`` → none.
    3. Inner-join on dates; < 2 series or < 2 rows → ``round4(1/|B|)`` on ``B``.
    4. Max-Sharpe (:func:`max_sharpe_weights`); if ``max μ ≤ 0`` on ``B`` (clean mode) or the
       solver fails → equal weight on ``B``. Clip, renormalise, round 4.

    Returns
    -------
    (N,) weights, 0 outside ``B``.
    """
    n = snap.available.size
    avail = snap.available
    b = np.flatnonzero(avail & (s2_star == BUY))
    if b.size == 0:
        b = np.flatnonzero(avail)
    w = np.zeros(n)
    if b.size == 0:
        return w
    ew = round(1.0 / b.size, 4)
    if oracle == "equal_weight":
        w[b] = ew
        return w
    if oracle == "lookback":
        x = snap.returns[:, b]
    elif oracle == "ex_post":
        x = (forward_returns if forward_returns is not None else np.empty((0, n)))[:, b]
    else:
        raise ValueError(f"unknown oracle {oracle!r}; choose 'lookback', 'ex_post' or 'equal_weight'")
    x = x[np.isfinite(x).all(axis=1)]
    if b.size < 2 or x.shape[0] < 2 or x.mean(axis=0).max() <= 0:
        w[b] = ew
        return w
    sol = max_sharpe_weights(x)
    if sol is None:
        w[b] = ew
        return w
    w[b] = np.round(sol, 4)
    return w


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
    denominator is 0).
    """
    k = len(ASSET_CLASSES)
    cw = np.bincount(snap.class_id, weights=np.where(snap.available, weights, 0.0), minlength=k)
    intra = snap.intra
    use_i = np.isfinite(intra) & (cw > 0)
    i_score = float(np.clip(1.0 - (cw[use_i] * np.maximum(intra[use_i], 0.0)).sum(), 0.0, 1.0))
    active = np.flatnonzero(cw > 0)
    h = 1.0
    if active.size >= 2:
        ww = np.outer(cw[active], cw[active])
        rho = snap.inter[np.ix_(active, active)]
        mask = ~np.eye(active.size, dtype=bool) & np.isfinite(rho)
        den = ww[mask].sum()
        if den > 0:
            rho_w = (ww[mask] * rho[mask]).sum() / den
            h = float(np.clip((1.0 - rho_w) / 2.0, 0.0, 1.0))
    return CorrelationScore(
        i_score, h, 0.5 * i_score + 0.5 * h,
        {ASSET_CLASSES[c]: float(cw[c]) for c in range(k) if cw[c] > 0},
    )


def s3_score(weights: np.ndarray, truth: np.ndarray, snap: MarketSnapshot, alpha: float = 0.5) -> dict:
    """``S3 = α·A + (1 − α)·C`` with ``A = clip(1 − MAE/2, 0, 1)`` over ``A_d`` (spec §4.3).

    Returns a dict with ``score``, ``accuracy``, ``mae``, ``intra``, ``inter``, ``corr``.
    """
    avail = snap.available
    mae = float(np.abs(weights[avail] - truth[avail]).mean()) if avail.any() else 0.0
    acc = float(np.clip(1.0 - mae / 2.0, 0.0, 1.0))
    cs = correlation_score(weights, snap)
    score = acc if alpha >= 1 else alpha * acc + (1.0 - alpha) * cs.score
    return {"score": float(score), "accuracy": acc, "mae": mae, "intra": cs.intra, "inter": cs.inter,
            "corr": cs.score, "class_weights": cs.class_weights}


# --------------------------------------------------------------------------------------- S4
def turnover(target: np.ndarray, current: np.ndarray, min_trade: float = 1e-6) -> float:
    """``τ = Σ |w^T − w^0|`` over assets with ``|Δ| ≥ 1e−6`` (spec §4.4)."""
    d = np.abs(np.asarray(target) - np.asarray(current))
    return float(d[d >= min_trade].sum())


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
    return float(np.clip(1.0 - abs(a - b) / max(a, b, 1e-4), 0.0, 1.0))


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
                cfg: PortBenchScoringConfig = PortBenchScoringConfig(), include_start: bool = True) -> RiskReport:
    """VaR, drawdown and drift of ``weights`` on the snapshot window, and the alerts (spec §4.5).

    ``p_t = Σ_i w_i r_{i,t}`` (missing = 0); ``VaR = q_0.05(p)``, ``DD`` = clean-mode MDD (``P_0 = 1``)
    if more than 10 observations, else 0; ``drift = max_{A_d} |w_i − 1/n|``, ``n = |A_d|``. Alerts:
    ``var_breach`` (VaR < limit; action reduce), ``drawdown`` (DD < −tolerance; rebalance),
    ``weight_drift`` (drift > 0.05; rebalance); ``trigger`` = any rebalance alert. Rounded to 6.
    ``include_start=False`` (paper mode, §11.9): the DD path starts at the first return.
    """
    var_limit = profile.var_limit if profile else -0.02
    tol = profile.max_drawdown if profile else 0.10
    r = np.nan_to_num(snap.returns, nan=0.0)
    p = r @ np.where(snap.available, weights, 0.0)
    if p.size > cfg.s5_min_obs:
        var = round(float(np.quantile(p, 0.05)), 6)
        dd = round(max_drawdown(p, include_start=include_start), 6)
    else:
        var, dd = 0.0, 0.0
    avail = snap.available
    n = int(avail.sum())
    drift = round(float(np.abs(weights[avail] - 1.0 / n).max()), 6) if n else 0.0
    alerts = []
    if var < var_limit:
        alerts.append("var_breach")
    if dd < -tol:
        alerts.append("drawdown")
    if drift > cfg.drift_limit:
        alerts.append("weight_drift")
    trigger = "drawdown" in alerts or "weight_drift" in alerts
    return RiskReport(var, dd, drift, alerts, trigger)


def s5_score(agent: RiskReport, truth: RiskReport) -> float:
    """``S5 = 0.5·1[trigger match] + 0.5·clip(1 − (e_V + e_D)/2, 0, 1)`` (spec §4.5).

    ``e_V = |VaR̂ − VaR*| / max(|VaR*|, 1e−6)``, ``e_D`` likewise for the drawdown.
    """
    e_v = abs(agent.var - truth.var) / max(abs(truth.var), 1e-6)
    e_d = abs(agent.drawdown - truth.drawdown) / max(abs(truth.drawdown), 1e-6)
    return float(0.5 * (agent.trigger == truth.trigger) + 0.5 * np.clip(1.0 - (e_v + e_d) / 2.0, 0.0, 1.0))
