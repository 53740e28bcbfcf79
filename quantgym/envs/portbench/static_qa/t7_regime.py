"""T7 Regime detection (complexity 4; spec §9.2).

Shown: SPY start/end price and trailing return of the context, annualised volatility, all macro
values (no regime line). Asked: the regime (bull/bear/sideways/crisis) and, per asset class, the
allocation direction. Truth: the pair's §1.9 label at ``d - 1`` and the §9.2 direction table
(:data:`~quantgym.envs.portbench.static_qa.config.T7_DIRECTIONS`). Answer
``"Regime: bull; Allocations: equities: increase, bonds: decrease, …"``. Paper mode asks for
"increase, decrease, or maintain" as the repo does (the scorer gives "maintain" nothing there);
clean mode asks for increase/decrease/neutral and maps maintain/hold to neutral when scoring.
"""

from __future__ import annotations

from quantgym.envs.portbench.static_qa.base import TemplateOutput, ann_vol, fmt_macro, rnd
from quantgym.envs.portbench.static_qa.config import T7_DIRECTIONS

TEMPLATE = "T7"
SEED_OFFSET = 6  # unused: T7 always uses the regime ticker (QAConfig.regime_ticker, SPY)


def select(rng, pools, config):
    """§9.2 T7 uses the regime ticker (``QAConfig.regime_ticker``, SPY; the context refuses a universe
    without it)."""
    return [config.regime_ticker]


def allocation_string(regime: str) -> str:
    """``"equities: increase, bonds: decrease, …"`` for ``regime`` (§9.2 table, class order §1.1)."""
    return ", ".join(f"{c}: {d}" for c, d in T7_DIRECTIONS[regime].items())


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T7 pair; None if the indicator lacks context prices."""
    a = assets[0]
    if not ctx.has_prices([a]):
        return None
    p, r = ctx.prices(a), ctx.returns(a)
    trailing = float(p[-1] / p[0] - 1.0)
    vol = ann_vol(r)
    regime = ctx.regime
    alloc = allocation_string(regime)
    answer = f"Regime: {regime}; Allocations: {alloc}"
    choices = "increase, decrease, or maintain the current allocation" if fidelity == "paper" else \
        "increase, decrease or neutral (keep) the current allocation"
    question = (
        f"Market indicator: {a}\n"
        f"Price history ({ctx.n_rows} days): start={p[0]:.2f}, end={p[-1]:.2f}, trailing_return={trailing:+.2%}\n"
        f"Annualized volatility: {vol:.2%}\n"
        f"Macro indicators: {fmt_macro(ctx.macro_dict())}\n\n"
        f"Part A: Identify the current market regime. Choose from: bull, bear, sideways, crisis.\n\n"
        f"Part B: For each of the six asset classes (equities, bonds, commodities, real_estate, "
        f"cryptocurrency, cash), recommend whether to {choices}."
    )
    summary = (f"Regime: {regime}. {a} trailing return: {trailing:+.1%}, annualized vol: {vol:.1%}. "
               f"Allocation: {alloc}.")
    explanation = f"§1.9 regime at the previous close: {regime}; directions from the §9.2 table."
    return TemplateOutput(question, answer, None, summary, explanation,
                          {"regime": regime, "directions": dict(T7_DIRECTIONS[regime]),
                           "trailing_return": rnd(trailing), "annualized_vol": rnd(vol)})
