"""T5 Multi-asset optimisation (complexity 3; spec §9.2, restricted variant T5_r).

Shown: annualised means (``252·mean``), the annualised covariance matrix (``252·`` sample covariance,
6 decimals), rf 4 %, long-only sum-to-one, the regime. Truth: on the dates common to all four assets
(≥ 30), ``max (wᵀμ - rf) / sqrt(wᵀΣw)`` by SLSQP from ``1/n`` (ftol 1e-9, 500 iterations, equal weight
on failure), clipped, renormalised, round 4. Clean mode solves with analytic gradients
(:func:`quantgym.envs.portbench.optimize.max_sharpe` on ``μ - rf``, since ``Σw = 1``; §11.9 accepts any
solver reaching the optimum) and uses equal weight when no asset has a positive excess mean
(``QAConfig.t5_nonpositive_ew``). Paper mode runs the repo's gradient-free SLSQP.

T5_r removes the covariance header and matrix lines (§9.2). ``answer_numeric`` = the optimal Sharpe.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from quantgym.envs.portbench.static_qa.base import TemplateOutput, fmt_weights, pick_four, rnd
from quantgym.envs.portbench.optimize import max_sharpe

TEMPLATE = "T5"
SEED_OFFSET = 4
COV_HEADER = "Covariance matrix (annualized):"


def restrict(question: str) -> str:
    """T5_r (§9.2): the question without the covariance header and the matrix line after it."""
    lines = question.split("\n")
    out, skip = [], False
    for ln in lines:
        if skip:
            skip = False
            continue
        if ln == COV_HEADER:
            skip = True
            continue
        out.append(ln)
    return "\n".join(out)


def select(rng, pools, config):
    """§9.2 T5: one ticker each from equities, crypto and two random other classes."""
    return pick_four(rng, pools)


def _paper_slsqp(mu: np.ndarray, cov: np.ndarray, rf: float) -> np.ndarray | None:
    """The repo's SLSQP: gradient-free, objective 0 when the volatility is below 1e-12."""
    n = mu.size

    def neg_sharpe(w):
        vol = np.sqrt(w @ cov @ w)
        return 0.0 if vol < 1e-12 else -(w @ mu - rf) / vol

    res = minimize(neg_sharpe, np.full(n, 1.0 / n), method="SLSQP", bounds=[(0.0, 1.0)] * n,
                   constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0}],
                   options={"ftol": 1e-9, "maxiter": 500})
    if not res.success:
        return None
    w = np.clip(res.x, 0.0, 1.0)
    return w / w.sum() if w.sum() > 0 else None


def max_sharpe_rf(mu: np.ndarray, cov: np.ndarray, rf: float = 0.04, fidelity: str = "clean",
                  nonpositive_ew: bool = True) -> tuple[np.ndarray, bool]:
    """Long-only max-Sharpe weights with a risk-free rate (spec §9.2 T5).

    Parameters
    ----------
    mu : (n,) annualised mean returns (decimals).
    cov : (n, n) annualised covariance.
    rf : annual risk-free rate.
    fidelity : ``"clean"`` (analytic-gradient SLSQP, EW if ``max(μ - rf) ≤ 0`` and ``nonpositive_ew``)
        or ``"paper"`` (the repo's gradient-free SLSQP).

    Returns
    -------
    (w, solved) : unrounded weights (n,) summing to 1, and whether the optimiser produced them
        (False -> equal weight).
    """
    n = mu.size
    ew = np.full(n, 1.0 / n)
    if fidelity == "paper":
        w = _paper_slsqp(mu, cov, rf)
    elif nonpositive_ew and np.max(mu - rf) <= 0:
        w = None
    else:
        w = max_sharpe(mu - rf, cov)
    return (ew, False) if w is None else (w, True)


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T5 pair; None if fewer than ``config.t5_min_common`` common dates."""
    if len(set(assets)) != len(assets) or not ctx.has_prices(assets):
        return None
    R = np.column_stack([ctx.return_rows(a) for a in assets])
    R = R[np.isfinite(R).all(axis=1)]
    if R.shape[0] < config.t5_min_common:
        return None
    mu = R.mean(axis=0) * 252.0
    cov = np.cov(R, rowvar=False, ddof=1) * 252.0
    rf = config.t5_rf
    w_opt, solved = max_sharpe_rf(mu, cov, rf, fidelity, config.t5_nonpositive_ew)
    w4 = [round(float(x), 4) for x in w_opt]
    port_ret = float(w_opt @ mu)
    port_vol = float(np.sqrt(max(float(w_opt @ cov @ w_opt), 0.0)))  # round-off on a singular Σ
    sharpe = (port_ret - rf) / port_vol if port_vol > 0 else 0.0
    answer = fmt_weights(assets, w4)
    means = ", ".join(f"{a}:{m:.4f}" for a, m in zip(assets, mu))
    matrix = "[" + ", ".join("[" + ", ".join(f"{x:.6f}" for x in row) + "]" for row in cov) + "]"
    question = (
        f"Assets: {', '.join(assets)}\n"
        f"Annualized mean returns: {means}\n"
        f"{COV_HEADER}\n{matrix}\n"
        f"Risk-free rate: {rf:.2%}\n"
        f"Constraints: weights sum to 1, all weights ≥ 0\n"
        f"Market regime: {ctx.regime}\n\n"
        f"Compute the portfolio weights that maximize the Sharpe ratio for the above assets."
    )
    summary = (f"{len(assets)}-asset optimization. Max-Sharpe: {sharpe:.3f}. "
               f"Portfolio: return={port_ret:.2%}, vol={port_vol:.2%}. Weights: {answer}.")
    explanation = (f"max (wᵀμ - {rf}) / sqrt(wᵀΣw), long-only, Σw = 1, on {R.shape[0]} common dates"
                   f"{'' if solved else ' (equal weight: no positive-excess optimum / solver failure)'}; "
                   f"return {port_ret:.4f}, vol {port_vol:.4f}, Sharpe {sharpe:.4f}.")
    return TemplateOutput(question, answer, rnd(sharpe), summary, explanation,
                          {"weights": dict(zip(assets, w4)), "sharpe_ratio": rnd(sharpe),
                           "portfolio_return": rnd(port_ret), "portfolio_vol": rnd(port_vol),
                           "n_common": int(R.shape[0]), "optimizer_success": bool(solved)})
