"""T1 Return prediction (complexity 1; spec §9.2).

Shown: start/end price, cumulative return and annualised volatility of the context, the macro dict,
the regime (and news where a text corpus exists — the bundle has none, §11.8). Asked: direction over
the next 21 trading days. Truth: ``g = P_k / P_0 - 1`` with ``P_0`` the first price on/after ``d`` and
``P_k`` the price ``min(21, n - 1)`` rows after it among the ``n`` prices dated in ``[d, d + 31 days]``;
``positive`` if ``g > 0.01``, ``negative`` if ``g < -0.01``, else ``flat``. Answer: one word.
Clean mode [project choice] skips a date whose horizon is cut short by the end of the data (fewer than
21 rows after ``P_0`` and the data end before ``d + 31 days``); paper mode labels it from the rows left.
"""

from __future__ import annotations

import datetime as _dt

from quantgym.envs.portbench.static_qa.base import TemplateOutput, ann_vol, fmt_macro, pick_single, rnd

TEMPLATE = "T1"
SEED_OFFSET = 0
select = pick_single


def direction_label(g: float, band: float = 0.01) -> str:
    """§9.2: ``positive`` if ``g > band``, ``negative`` if ``g < -band``, else ``flat``."""
    if g > band:
        return "positive"
    if g < -band:
        return "negative"
    return "flat"


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T1 pair for ``assets[0]`` at ``ctx.decision_date``; None if the date fails."""
    a = assets[0]
    if not ctx.has_prices([a]):
        return None
    fut = ctx.qd.future_prices(a, ctx.decision_date)
    if fut.size < 2:
        return None
    if fidelity == "clean" and fut.size <= config.horizon_rows:
        # [project choice] clean mode: a horizon cut short by the END OF THE DATA (not by the 31-day
        # window) is no ground truth; the repo labels such dates from the few rows left
        last = ctx.qd.data.dates[-1].date()
        if last < ctx.decision_date + _dt.timedelta(days=config.horizon_days):
            return None
    k = min(config.horizon_rows, fut.size - 1)
    g = float(fut[k] / fut[0] - 1.0)
    answer = direction_label(g, config.flat_band)
    p, r = ctx.prices(a), ctx.returns(a)
    hist = float(p[-1] / p[0] - 1.0)
    vol = ann_vol(r)
    n = ctx.n_rows
    question = (
        f"Asset: {a}\n"
        f"Historical prices (past {n} trading days): start={p[0]:.2f}, end={p[-1]:.2f}, "
        f"cumulative_return={hist:+.1%}, annualized_volatility={vol:.1%}\n"
        f"Macro context: {fmt_macro(ctx.macro_dict())}\n"
        f"Market regime: {ctx.regime}\n\n"
        f"Predict whether the return of {a} over the next {config.horizon_rows} trading days will be: "
        f"positive (>+1%), negative (<-1%), or flat (within ±1%)."
    )
    summary = (f"{a} over past {n} days: cumulative return {hist:+.1%}, annualized vol {vol:.1%}. "
               f"Market regime: {ctx.regime}.")
    explanation = (f"P_0={fut[0]:.4f} (first price on/after {ctx.decision_date}), P_{k}={fut[k]:.4f}; "
                   f"forward return {g:+.4%} -> '{answer}' (band ±{config.flat_band:.0%}).")
    return TemplateOutput(question, answer, rnd(g), summary, explanation,
                          {"future_return": rnd(g), "horizon_rows": k, "hist_return": rnd(hist),
                           "annualized_vol": rnd(vol), "direction": answer})
