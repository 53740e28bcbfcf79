"""Backtest-overfitting diagnostics of a research loop: Deflated Sharpe Ratio and PBO by CSCV.

A research loop tries ``N`` candidate strategies on one research window and keeps the best-looking
one. Its research Sharpe ratio is then the *maximum* of ``N`` noisy estimates and is biased upward.
Two classical diagnostics measure how much of it survives selection:

- :func:`deflated_sharpe_ratio` (Bailey & López de Prado 2014, "The Deflated Sharpe Ratio:
  Correcting for Selection Bias, Backtest Overfitting and Non-Normality", *Journal of Portfolio
  Management* 40(5)): the probability that the selected strategy's true Sharpe ratio exceeds the
  Sharpe ratio one would expect from the best of ``N`` skill-less trials, given the dispersion of
  the trials' Sharpe ratios, the length of the track record and the skewness / kurtosis of the
  selected strategy's returns. It is the Probabilistic Sharpe Ratio (:func:`probabilistic_sharpe_ratio`,
  Bailey & López de Prado 2012) against the benchmark :func:`expected_max_sharpe`.
- :func:`pbo_cscv` (Bailey, Borwein, López de Prado & Zhu 2017, "The Probability of Backtest
  Overfitting", *Journal of Computational Finance* 20(4)): split the ``T × N`` matrix of the
  candidates' returns into ``S`` row blocks; for every one of the ``C(S, S/2)`` ways to pick half of
  the blocks as in-sample, find the in-sample best candidate and its relative rank among the
  candidates out of sample. PBO is the share of splits where that rank is at or below the median
  (logit ≤ 0): the in-sample winner is no better than a typical candidate out of sample.

Units: Sharpe ratios here are **per period** (mean / standard deviation of per-period returns, not
annualised), as in both papers; multiply by ``sqrt(periods per year)`` only for display. Returns are
simple per-period returns as decimals. Everything is vectorised numpy (``scipy.stats.norm`` for the
normal distribution). Nothing here names a task.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

#: Euler–Mascheroni constant (the expected maximum of Gaussian draws, Bailey & López de Prado 2014 eq. 6).
EULER_GAMMA = 0.5772156649015329


def per_period_sharpe(returns: Any) -> np.ndarray | float:
    """Per-period Sharpe ratio ``mean / std (ddof 1)`` of each column (no risk-free rate, not annualised).

    Parameters
    ----------
    returns : array-like (T,) or (T, N)
        Per-period simple returns, decimals.

    Returns
    -------
    float or ndarray (N,)
        ``NaN`` where ``T < 2`` or the standard deviation is zero or not finite.
    """
    a = np.asarray(returns, dtype=np.float64)
    one = a.ndim == 1
    a = a.reshape(a.shape[0], -1)
    t = a.shape[0]
    if t < 2:
        out = np.full(a.shape[1], np.nan)
    else:
        sd = a.std(axis=0, ddof=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(np.isfinite(sd) & (sd > 0), a.mean(axis=0) / np.where(sd > 0, sd, 1.0), np.nan)
    return float(out[0]) if one else out


def expected_max_sharpe(n_trials: int, var_sharpe: float) -> float:
    """Expected maximum Sharpe ratio of ``n_trials`` skill-less trials (the DSR benchmark ``SR_0``).

    ``SR_0 = sqrt(V) · ((1 − γ) Φ⁻¹(1 − 1/N) + γ Φ⁻¹(1 − 1/(N e)))`` with γ the Euler–Mascheroni
    constant (Bailey & López de Prado 2014, eq. 6 and the False Strategy Theorem).

    Parameters
    ----------
    n_trials : int
        Number of independent trials ``N`` (≥ 2; with one trial the formula has no meaning).
    var_sharpe : float
        Variance ``V`` of the trials' Sharpe ratios, in the squared unit of the Sharpe ratios used
        (per period here).

    Returns
    -------
    float
        ``SR_0`` in the unit of ``sqrt(var_sharpe)``.

    Raises
    ------
    ValueError
        ``n_trials < 2`` or a negative / non-finite ``var_sharpe``.
    """
    from scipy.stats import norm

    n = int(n_trials)
    if n < 2:
        raise ValueError(f"expected_max_sharpe needs n_trials >= 2, got {n_trials!r}")
    v = float(var_sharpe)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"var_sharpe must be finite and >= 0, got {var_sharpe!r}")
    z = (1.0 - EULER_GAMMA) * norm.ppf(1.0 - 1.0 / n) + EULER_GAMMA * norm.ppf(1.0 - 1.0 / (n * math.e))
    return float(math.sqrt(v) * z)


def probabilistic_sharpe_ratio(sr: Any, sr_benchmark: Any, n_obs: int, skew: float, kurtosis: float) -> Any:
    """Probabilistic Sharpe Ratio: ``P(true SR > sr_benchmark)`` given an estimate ``sr``.

    ``PSR = Φ((ŜR − SR*) · sqrt(T − 1) / sqrt(1 − γ₃ ŜR + (γ₄ − 1)/4 · ŜR²))``
    (Bailey & López de Prado 2012; 2014 eq. 9 with ``SR* = SR_0`` gives the DSR).

    Parameters
    ----------
    sr, sr_benchmark : float or ndarray
        Estimated and benchmark Sharpe ratios, **per period** (broadcast together).
    n_obs : int
        Number of returns ``T`` behind ``sr``.
    skew : float
        Skewness ``γ₃`` of the returns.
    kurtosis : float
        Kurtosis ``γ₄`` of the returns (Pearson, **not** excess: 3 for a normal distribution).

    Returns
    -------
    float or ndarray
        Probabilities in [0, 1]; NaN where ``T < 2`` or the variance term is not positive.
    """
    from scipy.stats import norm

    sr_a = np.asarray(sr, dtype=np.float64)
    b = np.asarray(sr_benchmark, dtype=np.float64)
    var_term = 1.0 - skew * sr_a + (kurtosis - 1.0) / 4.0 * sr_a ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (sr_a - b) * math.sqrt(max(int(n_obs) - 1, 0)) / np.sqrt(np.where(var_term > 0, var_term, np.nan))
    out = norm.cdf(z)
    if int(n_obs) < 2:
        out = np.full_like(out, np.nan)
    return float(out) if np.ndim(out) == 0 else out


def deflated_sharpe_ratio(returns: Any, trial_sharpes: Any, n_trials: int | None = None) -> dict[str, Any]:
    """Deflated Sharpe Ratio of a selected strategy (Bailey & López de Prado 2014).

    Parameters
    ----------
    returns : array-like (T,)
        Per-period simple returns (decimals) of the **selected** strategy over the period on which it
        was selected. Non-finite entries are dropped.
    trial_sharpes : array-like (M,)
        Per-period Sharpe ratios of the trials (the selected one included) on the same period;
        their variance (ddof 1) is ``V``. Non-finite entries are dropped.
    n_trials : int, optional
        Number of independent trials ``N`` (default: the number of finite ``trial_sharpes``; pass a
        larger number when more trials were run than have a Sharpe ratio).

    Returns
    -------
    dict
        ``dsr`` (probability in [0, 1]), ``psr0`` (PSR against 0: the probability that the true
        Sharpe ratio is positive, ignoring selection), ``sr`` and ``sr0`` (the estimate and the
        expected maximum of ``N`` skill-less trials, per period), ``n_trials``, ``var_trial_sharpes``,
        ``n_obs``, ``skew``, ``kurtosis`` (Pearson) and ``reason``: ``None`` when ``dsr`` is defined,
        else one line saying why it is NaN (fewer than 2 trials, fewer than 3 returns, zero
        volatility). Never raises on short or degenerate inputs.
    """
    r = np.asarray(returns, dtype=np.float64).ravel()
    r = r[np.isfinite(r)]
    ts = np.asarray(trial_sharpes, dtype=np.float64).ravel()
    ts = ts[np.isfinite(ts)]
    n = int(n_trials) if n_trials is not None else int(ts.size)
    t = int(r.size)
    out: dict[str, Any] = {"dsr": math.nan, "psr0": math.nan, "sr": math.nan, "sr0": math.nan, "n_trials": n,
                           "var_trial_sharpes": math.nan, "n_obs": t, "skew": math.nan, "kurtosis": math.nan,
                           "reason": None}
    if t < 3:
        out["reason"] = f"{t} return(s): the Sharpe ratio and its moments need at least 3"
        return out
    sd = r.std(ddof=1)
    if not (math.isfinite(sd) and sd > 0):
        out["reason"] = "zero volatility: the selected strategy's Sharpe ratio is undefined"
        return out
    from scipy import stats

    skew = float(stats.skew(r))  # population moments (bias=True): m3 / m2^1.5
    kurt = float(stats.kurtosis(r, fisher=False))  # Pearson: m4 / m2^2
    sr = float(r.mean() / sd)
    out.update(sr=sr, skew=skew, kurtosis=kurt, psr0=probabilistic_sharpe_ratio(sr, 0.0, t, skew, kurt))
    if n < 2 or ts.size < 2:
        out["reason"] = (f"{min(n, int(ts.size))} trial(s) with a Sharpe ratio: the DSR needs at least 2 "
                         "(psr0 still applies)")
        return out
    v = float(ts.var(ddof=1))
    sr0 = expected_max_sharpe(n, v)
    out.update(var_trial_sharpes=v, sr0=sr0, dsr=probabilistic_sharpe_ratio(sr, sr0, t, skew, kurt))
    return out


def _combination_masks(n_blocks: int) -> np.ndarray:
    """Boolean (C(S, S/2), S): row c marks the in-sample blocks of split c (lexicographic order)."""
    half = n_blocks // 2
    combos = np.array(list(combinations(range(n_blocks), half)), dtype=np.intp)
    masks = np.zeros((combos.shape[0], n_blocks), dtype=bool)
    masks[np.arange(combos.shape[0])[:, None], combos] = True
    return masks


def pbo_cscv(returns: Any, n_blocks: int = 16) -> dict[str, Any]:
    """Probability of Backtest Overfitting by combinatorially symmetric cross-validation (CSCV).

    Bailey, Borwein, López de Prado & Zhu (2017), §2: the ``T × N`` matrix ``M`` of the ``N``
    candidates' per-period returns is cut into ``S`` (even) row blocks of equal size; for each of the
    ``C(S, S/2)`` combinations ``J`` of ``S/2`` blocks, the training set is the rows of ``J`` and the
    test set the rows of its complement. The candidate ``n*`` with the highest training Sharpe ratio
    (per period, ``mean/std``, ddof 1; 0 when the std is 0) gets its test rank ``r`` among the ``N``
    test Sharpe ratios (1 = worst, ``N`` = best; ties take the average rank), relative rank
    ``ω = r / (N + 1)`` and logit ``λ = ln(ω / (1 − ω))``. ``PBO = #{λ ≤ 0} / C(S, S/2)``.

    ``T`` need not be a multiple of ``S``: the first ``T mod S`` rows (the oldest) are dropped so the
    blocks have equal size, as the paper requires. Ties for the in-sample best go to the lowest
    column index.

    Parameters
    ----------
    returns : array-like (T, N)
        Per-period simple returns (decimals) of the ``N`` candidates on a common calendar, oldest
        first. Rows with a non-finite entry are dropped first.
    n_blocks : int
        ``S``, even, ≥ 2 (the paper uses 16: 12,870 splits).

    Returns
    -------
    dict
        ``pbo`` (probability in [0, 1]), ``logits`` (ndarray (C,) of λ, in the order of
        :func:`itertools.combinations`), ``n_splits`` (C), ``n_blocks``, ``block_rows``,
        ``n_candidates``, ``n_obs`` (rows used), ``dropped_rows`` (non-finite and remainder rows) and ``reason`` (``None`` when
        ``pbo`` is defined, else why it is NaN: fewer than 2 candidates, or fewer than 2 rows per
        block). Never raises on short inputs.

    Raises
    ------
    ValueError
        ``returns`` not two-dimensional, or ``n_blocks`` odd or < 2.
    """
    m = np.asarray(returns, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"returns must be a (T, N) matrix, got shape {m.shape}")
    s = int(n_blocks)
    if s < 2 or s % 2:
        raise ValueError(f"n_blocks must be an even int >= 2, got {n_blocks!r}")
    t_all = m.shape[0]
    m = m[np.isfinite(m).all(axis=1)]
    t, n = m.shape
    out: dict[str, Any] = {"pbo": math.nan, "logits": np.empty(0), "n_splits": 0, "n_blocks": s, "block_rows": 0,
                           "n_candidates": int(n), "n_obs": 0, "dropped_rows": int(t_all), "reason": None}
    if n < 2:
        out["reason"] = f"{n} candidate(s): PBO needs at least 2"
        return out
    rows = t // s
    if rows < 2:
        out["reason"] = f"{t} common finite rows: {s} blocks need at least 2 rows each ({2 * s})"
        return out
    drop = t - rows * s
    m = m[drop:]
    blocks = m.reshape(s, rows, n)
    bsum = blocks.sum(axis=1)  # (S, N)
    bsq = (blocks ** 2).sum(axis=1)
    masks = _combination_masks(s).astype(np.float64)  # (C, S)
    half_rows = rows * (s // 2)

    def sharpe(sum_: np.ndarray, sq: np.ndarray) -> np.ndarray:
        mean = sum_ / half_rows
        var = np.maximum((sq - half_rows * mean ** 2) / (half_rows - 1), 0.0)
        sd = np.sqrt(var)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(sd > 0, mean / np.where(sd > 0, sd, 1.0), 0.0)

    tot, totsq = bsum.sum(axis=0), bsq.sum(axis=0)
    in_sum, in_sq = masks @ bsum, masks @ bsq  # (C, N)
    sr_in = sharpe(in_sum, in_sq)
    sr_out = sharpe(tot - in_sum, totsq - in_sq)
    best = np.argmax(sr_in, axis=1)
    perf = sr_out[np.arange(best.size), best][:, None]
    rank = (sr_out < perf).sum(axis=1) + ((sr_out == perf).sum(axis=1) + 1) / 2.0
    w = rank / (n + 1.0)
    logits = np.log(w / (1.0 - w))
    out.update(pbo=float(np.mean(logits <= 0)), logits=logits, n_splits=int(logits.size), block_rows=int(rows),
               n_obs=int(rows * s), dropped_rows=int(t_all - rows * s))
    return out


__all__ = ["EULER_GAMMA", "per_period_sharpe", "expected_max_sharpe", "probabilistic_sharpe_ratio",
           "deflated_sharpe_ratio", "pbo_cscv"]
