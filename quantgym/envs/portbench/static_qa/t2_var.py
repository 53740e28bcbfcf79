"""T2 Risk assessment (complexity 1; spec §9.2).

Shown: count, mean, std, min and max of the context's daily returns, the regime. Asked: the 1-day
95 % historical VaR as a decimal. Truth: ``q_0.05(returns)`` (numpy linear quantile, ≥ 20 returns).
Answer ``"%.4f"`` (negative); the scorer compares with the unrounded truth (``answer_numeric``).
"""

from __future__ import annotations

import numpy as np

from quantgym.envs.portbench.static_qa.base import TemplateOutput, pick_single, rnd

TEMPLATE = "T2"
SEED_OFFSET = 1
select = pick_single


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T2 pair; None if fewer than ``config.min_var_returns`` returns."""
    a = assets[0]
    if not ctx.has_prices([a]):
        return None
    r = ctx.returns(a)
    if r.size < config.min_var_returns:
        return None
    q = float(np.quantile(r, config.var_level))
    question = (
        f"Asset: {a}\n"
        f"Daily returns (past {ctx.n_rows} trading days): count={r.size}, mean={r.mean():.6f}, "
        f"std={np.std(r, ddof=1):.6f}, min={r.min():.6f}, max={r.max():.6f}\n"
        f"Market regime: {ctx.regime}\n\n"
        f"Estimate the 1-day 95% historical Value-at-Risk of {a}: the 5th percentile of its daily returns, "
        f"as a decimal return."
    )
    summary = f"{a}: {r.size} daily returns, std {np.std(r, ddof=1):.4f}. Market regime: {ctx.regime}."
    explanation = f"5% empirical quantile (linear interpolation) of {r.size} daily returns = {q:.6f}."
    return TemplateOutput(question, f"{q:.4f}", q, summary, explanation,
                          {"var95": rnd(q, 8), "n_returns": int(r.size)})
