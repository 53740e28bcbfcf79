"""T4 Pairwise allocation (complexity 2; spec §9.2, restricted variant T4_r).

Shown: per asset daily std and mean, the covariance and correlation, the regime. Asked: long-only
minimum-variance weights. Truth: ``w_1 = (s_2² - c) / (s_1² + s_2² - 2c)`` (0.5 if the denominator is
below 1e-12), ``w_2 = 1 - w_1``, each clamped at 0, renormalised, round 4.

- clean mode [project choice, Appendix A]: the two return series aligned **by date** (rows where both
  exist, at least ``config.t4_min_common``), ``s`` and ``c`` both with ddof 1;
- paper mode: the two series aligned **by position** (equal lengths required), ``s`` population std
  (ddof 0), ``c`` sample covariance (ddof 1).

T4_r removes the line starting ``Covariance(`` (§9.2). Answer ``"w_A=0.1234, w_B=0.8766"``.
Shown precision: paper mode the repo's (std/mean 4 decimals, covariance 6 decimals, which prints a cash
ETF's covariance as 0.000000); clean mode [project choice] std/mean 6 decimals, covariance ``%.4e``.
"""

from __future__ import annotations

import numpy as np

from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.envs.portbench.static_qa.base import TemplateOutput, fmt_weights, rnd
from quantgym.envs.portbench.static_qa.config import NON_TEXT_CLASSES, TEXT_CLASSES

TEMPLATE = "T4"
SEED_OFFSET = 3


def restrict(question: str) -> str:
    """T4_r (§9.2): the question without the line starting ``Covariance(``."""
    return "\n".join(ln for ln in question.split("\n") if not ln.startswith("Covariance("))


def select(rng, pools, config):
    """§9.2 T4: one of equities/crypto, then (50 %) any other class or (50 %) a non-text class."""
    c1 = rng.choice(TEXT_CLASSES)
    if rng.random() < config.t4_other_prob:
        c2 = rng.choice([c for c in ASSET_CLASSES if c != c1])
    else:
        c2 = rng.choice(NON_TEXT_CLASSES)
    p1, p2 = pools.get(c1, ()), pools.get(c2, ())
    if not p1 or not p2:
        return None
    a1, a2 = rng.choice(p1), rng.choice(p2)
    return [a1, a2]


def min_variance_pair(s1: float, s2: float, c: float, degenerate: float = 1e-12) -> tuple[float, float]:
    """§9.2 long-only two-asset minimum-variance weights, rounded to 4 decimals.

    Parameters
    ----------
    s1, s2 : float
        Standard deviations of the two assets (daily decimals).
    c : float
        Their covariance.
    degenerate : float
        Denominator threshold below which the answer is 0.5/0.5.

    Returns
    -------
    (w1, w2) : tuple of float, each in [0, 1], rounded to 4 decimals.
    """
    denom = s1 ** 2 + s2 ** 2 - 2.0 * c
    w1 = 0.5 if denom < degenerate else (s2 ** 2 - c) / denom
    w2 = 1.0 - w1
    w1, w2 = max(0.0, w1), max(0.0, w2)
    tot = w1 + w2
    w1, w2 = (w1 / tot, w2 / tot) if tot > 0 else (0.5, 0.5)
    return round(w1, 4), round(w2, 4)


def pair_moments(ctx, a1: str, a2: str, config, fidelity: str):
    """Aligned returns and (s1, s2, c) per the mode's rule; None if the pair fails."""
    if fidelity == "paper":
        x1, x2 = ctx.returns(a1), ctx.returns(a2)
        if x1.size != x2.size or x1.size < config.t4_min_common:
            return None
        s1, s2 = float(np.std(x1, ddof=0)), float(np.std(x2, ddof=0))
    else:
        r1, r2 = ctx.return_rows(a1), ctx.return_rows(a2)
        m = np.isfinite(r1) & np.isfinite(r2)
        if m.sum() < config.t4_min_common:
            return None
        x1, x2 = r1[m], r2[m]
        s1, s2 = float(np.std(x1, ddof=1)), float(np.std(x2, ddof=1))
    c = float(np.cov(x1, x2, ddof=1)[0, 1])
    return x1, x2, s1, s2, c


def build(ctx, assets, seq, config, fidelity) -> TemplateOutput | None:
    """Build the T4 pair; None if the context or the alignment fails."""
    a1, a2 = assets
    if a1 == a2 or not ctx.has_prices(assets):
        return None
    mom = pair_moments(ctx, a1, a2, config, fidelity)
    if mom is None:
        return None
    x1, x2, s1, s2, c = mom
    corr = c / (s1 * s2) if s1 * s2 > 0 else 0.0
    w1, w2 = min_variance_pair(s1, s2, c, config.t4_degenerate)
    answer = fmt_weights(assets, (w1, w2))
    if fidelity == "paper":  # the repo's precision (a cash ETF's covariance prints as 0.000000)
        sf, mf, cf = f"{s1:.4f}", f"{x1.mean():.4f}", f"{c:.6f}"
        sf2, mf2 = f"{s2:.4f}", f"{x2.mean():.4f}"
    else:  # [project choice] enough digits to compute the answer from the shown numbers
        sf, mf, cf = f"{s1:.6f}", f"{x1.mean():.6f}", f"{c:.4e}"
        sf2, mf2 = f"{s2:.6f}", f"{x2.mean():.6f}"
    question = (
        f"Assets: {a1}, {a2}\n"
        f"{a1} – std={sf}, mean={mf}\n"
        f"{a2} – std={sf2}, mean={mf2}\n"
        f"Covariance({a1},{a2}) = {cf}, Correlation = {corr:.3f}\n"
        f"Market regime: {ctx.regime}\n\n"
        f"Compute the minimum-variance portfolio weights for {a1} and {a2} "
        f"(long-only: weights ≥ 0, sum to 1). Report as w_{a1}, w_{a2}."
    )
    summary = (f"{a1} σ={s1:.4f}, {a2} σ={s2:.4f}, ρ={corr:.3f}. "
               f"Min-variance weights: {a1}={w1:.3f}, {a2}={w2:.3f}.")
    explanation = (f"w1* = (s2² - c) / (s1² + s2² - 2c) with s1={s1:.6f}, s2={s2:.6f}, c={c:.8f} "
                   f"({x1.size} aligned returns); long-only clamp -> {answer}.")
    return TemplateOutput(question, answer, w1, summary, explanation,
                          {"weights": {a1: w1, a2: w2}, "sigma_1": rnd(s1, 8), "sigma_2": rnd(s2, 8),
                           "covariance": rnd(c, 10), "correlation": rnd(corr), "n_aligned": int(x1.size)})
