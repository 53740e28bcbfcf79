"""CEPS, the cross-stage error propagation score (spec §5)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def clip_float(x: float, lo: float, hi: float) -> float:
    """``float(np.clip(x, lo, hi))`` of one number without numpy's per-call overhead: numpy's result (NaN kept,
    then ``lo if x < lo else x``, then ``hi if v > hi else v``), the same float, signed zeros included (tested)."""
    x = float(x)
    if x != x:
        return x
    v = lo if x < lo else x
    return hi if v > hi else v


def ceps(stage_scores: Sequence[float | None], lam: float = 0.1, ndigits: int | None = 4) -> float:
    """CEPS of one step: ``clip(mean(σ) − λ·Σ_t max(σ_t − σ_{t+1}, 0), 0, 1)`` (spec §5).

    Parameters
    ----------
    stage_scores : the five stage scores σ_1..σ_5 in [0, 1]; ``None``/NaN (a missing stage) counts as 0.
    lam : drop penalty λ (default 0.1).
    ndigits : rounding of the result (the repo rounds to 4); ``None`` for no rounding.

    Examples
    --------
    >>> ceps([0.792, 0.506, 0.714, 0.086, 0.480])
    0.4242
    >>> ceps([0.516] * 5)
    0.516
    """
    s = [0.0 if (x is None or not math.isfinite(x)) else float(x) for x in stage_scores]
    if not s:
        return 0.0
    if len(s) < 8:  # numpy's arithmetic in plain floats (speed only; the five stages of a step)
        # numpy sums fewer than 8 values in order onto 0.0; np.maximum(d, 0.0) keeps d when d >= 0 (-0.0 too)
        drops, total = 0.0, 0.0
        for a, b in zip(s[:-1], s[1:]):
            d = a - b
            drops += d if d >= 0.0 else 0.0
        for x in s:
            total += x
        mean = total / len(s)
    else:
        a = np.array(s, dtype=np.float64)
        drops, mean = np.maximum(a[:-1] - a[1:], 0.0).sum(), a.mean()
    value = clip_float(mean - lam * drops, 0.0, 1.0)
    return round(value, ndigits) if ndigits is not None else value


def run_ceps(step_ceps: Sequence[float]) -> float:
    """A run's CEPS = mean of its per-step CEPS (not CEPS of mean stage scores; §5). NaN if empty."""
    a = np.asarray(list(step_ceps), dtype=np.float64)
    return float(a.mean()) if a.size else float("nan")


def ceps_tier(mean_ceps: float) -> str:
    """CEPS tier of a window: ≥ 0.8 A, ≥ 0.6 B, ≥ 0.4 C, else D (§7.2 diagnostics)."""
    if not np.isfinite(mean_ceps):
        return "D"
    return "A" if mean_ceps >= 0.8 else "B" if mean_ceps >= 0.6 else "C" if mean_ceps >= 0.4 else "D"
