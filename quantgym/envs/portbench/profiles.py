"""Investor profiles, the Profile Alignment Score (PAS) and AdaptScore (spec §3)."""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from quantgym.jit import njit, np_sum


@dataclass(frozen=True)
class InvestorProfile:
    """Aggregate constraints of one profile (spec §3.1). They are *not* enforced on the weights;
    they enter the prompt, S5's alert thresholds, PAS and the stress gate."""

    name: str
    max_equity_crypto: float  # cap on equities + cryptocurrency
    min_bonds_cash: float  # floor on bonds + cash
    max_drawdown: float  # drawdown tolerance (positive decimal)
    var_limit: float  # 1-day 95 % VaR limit (negative decimal)
    #: what the prompt tells the agent; "" renders it from the three limits above. A given text must state
    #: each of them as a percentage ("40%"), so the prompt never tells limits other than the scored ones
    description: str = ""

    def __post_init__(self) -> None:
        if not self.description:
            return
        for field_name in ("max_equity_crypto", "min_bonds_cash", "max_drawdown"):
            pct = f"{round(100 * getattr(self, field_name), 6):g}%"
            if pct not in self.description:
                raise ValueError(f"InvestorProfile {self.name!r}: the description must state {field_name} as "
                                 f"{pct!r} (or be empty to render it from the limits)")

    def prompt_block(self) -> str:
        """``[INVESTOR PROFILE] <description>`` block prepended to the news text (§3.1); an empty
        description is rendered from the profile's limits."""
        text = self.description or (
            f"{self.name.capitalize()} investor: at most {round(100 * self.max_equity_crypto, 6):g}% in equities and "
            f"cryptocurrency combined, at least {round(100 * self.min_bonds_cash, 6):g}% in bonds and cash, and the "
            f"portfolio drawdown must stay within {round(100 * self.max_drawdown, 6):g}%.")
        return f"[INVESTOR PROFILE] {text}"


PROFILES: dict[str, InvestorProfile] = {
    "conservative": InvestorProfile(
        "conservative", 0.40, 0.40, 0.10, -0.01,
        "Conservative investor: at most 40% in equities and cryptocurrency combined, at least 40% in bonds "
        "and cash, and the portfolio drawdown must stay within 10%.",
    ),
    "balanced": InvestorProfile(
        "balanced", 0.65, 0.20, 0.20, -0.02,
        "Balanced investor: at most 65% in equities and cryptocurrency combined, at least 20% in bonds and "
        "cash, and drawdowns of up to 20% are acceptable.",
    ),
    "aggressive": InvestorProfile(
        "aggressive", 0.90, 0.05, 0.35, -0.04,
        "Aggressive investor: up to 90% in equities and cryptocurrency combined, only 5% minimum in bonds "
        "and cash, and drawdowns of up to 35% are acceptable.",
    ),
}

#: classes on the equity side of PAS in clean mode (§3.2; paper mode adds real_estate)
PAS_EQUITY_CLASSES_CLEAN = ("equities", "cryptocurrency")
PAS_EQUITY_CLASSES_PAPER = ("equities", "cryptocurrency", "real_estate")
PAS_DEFENSIVE_CLASSES = ("bonds", "cash")


def get_profile(name: str | InvestorProfile) -> InvestorProfile:
    """Look up a profile by name (case-insensitive). Raises ``ValueError`` for an unknown name."""
    if isinstance(name, InvestorProfile):
        return name
    key = str(name).lower()
    if key not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    return PROFILES[key]


def pas_step(
    weights: Sequence[float] | np.ndarray,
    classes: Sequence[str],
    var: float,
    profile: InvestorProfile,
    equity_classes: Sequence[str] = PAS_EQUITY_CLASSES_CLEAN,
) -> float:
    """Profile Alignment Score of one rebalance step (spec §3.2).

    Parameters
    ----------
    weights : (N,) the agent's S3 weights (decimals).
    classes : (N,) §1.1 class label per weight.
    var : the agent's S5 portfolio VaR (a negative decimal).
    profile : the investor profile.
    equity_classes : classes on the equity side (clean: equities + cryptocurrency).

    Returns
    -------
    float in [0, 1], rounded to 6 decimals: ``(s_E + s_B + s_V) / 3``.

    Examples
    --------
    >>> p = PROFILES["conservative"]
    >>> pas_step([0.5, 0.1, 0.3, 0.1], ["equities", "real_estate", "bonds", "commodities"], -0.015, p)
    0.666667
    """
    w = np.asarray(weights, dtype=np.float64)
    eq, defensive = pas_masks(classes, equity_classes)
    if w.ndim == 1 and w.shape == eq.shape:  # one kernel, the same floats (speed only)
        e, b = _class_sums(w, eq, defensive, np.empty(w.shape[0]))
    else:
        e = float(w[eq].sum())
        b = float(w[defensive].sum())
    return pas_value(e, b, var, profile)


def pas_value(e: float, b: float, var: float, profile: InvestorProfile) -> float:
    """PAS of :func:`pas_step` from the weight on the equity side ``e``, on bonds and cash ``b`` and the VaR."""
    cap, floor, lim = profile.max_equity_crypto, profile.min_bonds_cash, profile.var_limit
    s_e = max(1.0 - max(e - cap, 0.0) / cap, 0.0)
    s_b = 1.0 if floor == 0 else min(b / floor, 1.0)
    s_v = max(1.0 + min(var - lim, 0.0) / abs(lim), 0.0)
    return round((s_e + s_b + s_v) / 3.0, 6)


def pas_masks(classes: Sequence[str], equity_classes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(equity-side, defensive) boolean masks of PAS over ``classes`` (cached: do not modify)."""
    last = _LAST_MASKS
    if classes is last[0] and equity_classes is last[1]:  # the env's step: the same tuples every call
        return last[2]
    masks = _class_masks(tuple(classes), tuple(equity_classes))
    if type(classes) is tuple and type(equity_classes) is tuple:
        globals()["_LAST_MASKS"] = (classes, equity_classes, masks)
    return masks


#: (classes, equity classes, masks) of the last :func:`pas_step` call (immutable tuples; speed only)
_LAST_MASKS: tuple = (None, None, None)


@njit
def _class_sums(w, eq, defensive, buf):
    """``(float(w[eq].sum()), float(w[defensive].sum()))`` in numpy's summation order (a kernel,
    :mod:`quantgym.jit`: each selection in index order into ``buf``, then :func:`~quantgym.jit.np_sum`)."""
    k = 0
    for i in range(w.shape[0]):
        if eq[i]:
            buf[k] = w[i]
            k += 1
    e = np_sum(buf, 0, k)
    k = 0
    for i in range(w.shape[0]):
        if defensive[i]:
            buf[k] = w[i]
            k += 1
    return e, np_sum(buf, 0, k)


@functools.lru_cache(maxsize=64)
def _class_masks(classes: tuple, equity_classes: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(equity-side, defensive) boolean masks over ``classes`` (cached: a universe has one class tuple)."""
    cls = np.asarray(classes)
    return np.isin(cls, list(equity_classes)), np.isin(cls, list(PAS_DEFENSIVE_CLASSES))


def adapt_score(pas_by_profile: Mapping[str, float] | Sequence[float]) -> float:
    """AdaptScore: population std (ddof 0) of the run PAS of the three profiles (spec §3.3).

    Examples
    --------
    >>> round(adapt_score([0.72, 0.85, 0.90]), 6)
    0.075865
    """
    vals = list(pas_by_profile.values()) if isinstance(pas_by_profile, Mapping) else list(pas_by_profile)
    return float(np.std(np.asarray(vals, dtype=np.float64), ddof=0))
