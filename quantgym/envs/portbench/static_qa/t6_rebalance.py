"""T6 Rebalancing decision (complexity 3; spec §9.2).

Target weights 1/4 each; current weights are generated with ``numpy.random.default_rng(d.toordinal()
+ seq)`` (the repo's salted ``|hash(d)| + seq`` is not reproducible, so both modes use the ordinal):
even ``seq`` draw relative drifts ``N(0, 0.18)``, scaled by 1.5 up to 10 times until the largest
deviation exceeds 5 %; odd ``seq`` draw ``U(-0.0325, 0.0325)``; ``u_i = 0.25·(1 + drift_i)``,
``c_i = clip(u_i / Σu, 0, 1)``. Shown: current vs target weights (4 decimals), threshold 5 %,
round-trip cost 0.10 %, regime. Truth: ``yes`` iff ``max|c - target| > 0.05``; answer
``"yes; sell 0.0612 of XLE"`` (the most deviated asset; sell if overweight) or ``"no"``.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

from quantgym.envs.portbench.static_qa.base import TemplateOutput, fmt_weights, pick_four, rnd

TEMPLATE = "T6"
SEED_OFFSET = 5


def select(rng, pools, config):
    """§9.2 T6: one ticker each from equities, crypto and two random other classes."""
    return pick_four(rng, pools)


def current_weights(d: _dt.date, seq: int, n: int, config) -> np.ndarray:
    """§9.2 T6 drifted weights for decision date ``d`` and sequence number ``seq``, shape (n,)."""
    rng = np.random.default_rng(d.toordinal() + int(seq))
    target = 1.0 / n

    def weights(drift):
        u = target * (1.0 + drift)
        return np.clip(u / u.sum(), 0.0, 1.0)

    if seq % 2 == 0:
        drift = rng.normal(0.0, config.t6_drift_sd, n)
        c = weights(drift)
        for _ in range(config.t6_max_scale):
            if np.max(np.abs(c - target)) > config.t6_threshold:
                break
            drift = drift * config.t6_scale
            c = weights(drift)
    else:
        drift = rng.uniform(-config.t6_uniform, config.t6_uniform, n)
        c = weights(drift)
    return c


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T6 pair; None if an asset lacks context prices."""
    if len(set(assets)) != len(assets) or not ctx.has_prices(assets):
        return None
    n = len(assets)
    c = current_weights(ctx.decision_date, seq, n, config)
    target = np.full(n, 1.0 / n)
    dev = c - target
    j = int(np.argmax(np.abs(dev)))
    maxdev = float(abs(dev[j]))
    yes = maxdev > config.t6_threshold
    side = "sell" if dev[j] > 0 else "buy"
    answer = f"yes; {side} {abs(dev[j]):.4f} of {assets[j]}" if yes else "no"
    question = (
        f"Assets: {', '.join(assets)}\n"
        f"Current portfolio weights: {fmt_weights(assets, c)}\n"
        f"Target portfolio weights: {fmt_weights(assets, target)}\n"
        f"Rebalancing threshold: {config.t6_threshold:.2%} (maximum absolute deviation of any weight from target)\n"
        f"Transaction cost rate (round-trip): {config.t6_cost:.2%}\n"
        f"Market regime: {ctx.regime}\n\n"
        f"Should the portfolio be rebalanced? If yes, name the most deviated asset and the trade "
        f"(sell if overweight, buy if underweight) that brings it back to target."
    )
    summary = (f"Max weight deviation: {maxdev:.4f}, threshold: {config.t6_threshold}. "
               f"Decision: {'yes' if yes else 'no'} (rebalance).")
    explanation = (f"max |current - target| = {maxdev:.4f} ({assets[j]}) "
                   f"{'>' if yes else '<='} {config.t6_threshold:.4f} -> {answer}.")
    return TemplateOutput(question, answer, 1.0 if yes else 0.0, summary, explanation,
                          {"current_weights": {a: rnd(x) for a, x in zip(assets, c)},
                           "target_weights": {a: rnd(x) for a, x in zip(assets, target)},
                           "max_deviation": rnd(maxdev), "decision": "yes" if yes else "no",
                           "asset": assets[j] if yes else None, "side": side if yes else None,
                           "trade": rnd(abs(dev[j]), 4) if yes else None})
