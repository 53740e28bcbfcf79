"""T3 Position sizing (complexity 1; spec §9.2).

Shown: mean, std and worst day of the context's daily returns, the 10 % maximum-drawdown limit, the
regime. Asked: the maximum fraction of capital. Truth ``f = min(1, 0.10 / |q_0.01(returns)|)``
(1 if the quantile is 0), round 4. The paper-mode ``context_summary`` leaks VaR99 and ``f`` (§9.3).
"""

from __future__ import annotations

import numpy as np

from quantgym.envs.portbench.static_qa.base import TemplateOutput, pick_single, rnd

TEMPLATE = "T3"
SEED_OFFSET = 2
select = pick_single


def position_fraction(q01: float, limit: float = 0.10) -> float:
    """§9.2 T3: ``min(1, limit / |q01|)``, 1 if ``q01 == 0``, rounded to 4 decimals."""
    f = 1.0 if q01 == 0 else min(1.0, limit / abs(q01))
    return round(f, 4)


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T3 pair; None if fewer than ``config.t3_min_returns`` returns."""
    a = assets[0]
    if not ctx.has_prices([a]):
        return None
    r = ctx.returns(a)
    if r.size < config.t3_min_returns:
        return None
    q01 = float(np.quantile(r, config.t3_var_level))
    f = position_fraction(q01, config.t3_dd_limit)
    question = (
        f"Asset: {a}\n"
        f"Daily returns (past {ctx.n_rows} trading days): mean={r.mean():.6f}, std={np.std(r, ddof=1):.6f}, "
        f"worst day={r.min():.6f}\n"
        f"Maximum drawdown limit: {config.t3_dd_limit:.0%}\n"
        f"Market regime: {ctx.regime}\n\n"
        f"What is the maximum fraction of capital (between 0 and 1) to put into {a} so that a loss equal to "
        f"its 99% one-day historical VaR stays within the drawdown limit?"
    )
    summary = f"{a}: VaR99={q01:.4f}, max position size={f:.4f} (limit {config.t3_dd_limit:.0%})."
    explanation = f"q_0.01 = {q01:.6f}; f = min(1, {config.t3_dd_limit} / |q_0.01|) = {f:.4f}."
    return TemplateOutput(question, f"{f:.4f}", f, summary, explanation,
                          {"var99": rnd(q01, 8), "fraction": f, "n_returns": int(r.size)})
