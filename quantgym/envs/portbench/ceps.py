"""CEPS, the cross-stage error propagation score (spec §5)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


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
    s = np.array([0.0 if (x is None or not np.isfinite(x)) else float(x) for x in stage_scores], dtype=np.float64)
    if s.size == 0:
        return 0.0
    drops = np.maximum(s[:-1] - s[1:], 0.0).sum()
    value = float(np.clip(s.mean() - lam * drops, 0.0, 1.0))
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
