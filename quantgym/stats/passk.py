"""The unbiased pass@k estimator (Chen et al. 2021) and its interval over rounds.

Chen et al. (2021), "Evaluating Large Language Models Trained on Code" (arXiv:2107.03374), §2.1:
draw ``n ≥ k`` independent samples of a task, count the ``c`` that pass, and estimate the
probability that at least one of ``k`` samples passes by

    pass@k = 1 − C(n − c, k) / C(n, k)

which is unbiased (the mean over all k-subsets of the n samples of "some sample passes"), unlike
``1 − (1 − c/n)^k``. Computed in the product form ``1 − Π_{i = n−c+1}^{n} (1 − k / i)`` (their
numerically stable numpy code): no binomial coefficient is ever formed, so large ``n`` neither
overflows nor loses precision. The same estimator with ``c`` = the number of *correct* samples gives
correct@k.

A benchmark averages the per-task estimates over its tasks (here: rounds).
:func:`estimate_over_rounds` adds a Student-t interval over the rounds (the rounds are the sampled
unit: the interval reflects how much the pass rate varies from round to round, plus the sampling
noise of the ``n`` attempts inside each round), clipped to [0, 1]. With few rounds it is wide, as it
should be. The estimator assumes the ``n`` attempts were fixed in advance and independent: attempts
that stop at the first success, or repair attempts that see the previous error, are not samples of
one distribution, and the estimate is then not defined.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def pass_at_k(n: Any, c: Any, k: int) -> Any:
    """Unbiased pass@k ``1 − C(n − c, k) / C(n, k)`` (Chen et al. 2021), in product form.

    Parameters
    ----------
    n : int or array-like of int
        Attempts (samples) per task, each ``≥ k``.
    c : int or array-like of int
        Passing (or correct) attempts per task, ``0 ≤ c ≤ n``; broadcast with ``n``.
    k : int
        ``k ≥ 1``.

    Returns
    -------
    float or ndarray
        Probability in [0, 1] per task: 1 when ``n − c < k`` (every k-subset holds a pass), 0 when
        ``c = 0``.

    Raises
    ------
    ValueError
        ``k < 1``, some ``n < k``, or ``c`` outside ``[0, n]``.
    """
    k = int(k)
    n_a = np.asarray(n)
    c_a = np.asarray(c)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n_b, c_b = np.broadcast_arrays(n_a.astype(np.int64), c_a.astype(np.int64))
    if np.any(n_b < k):
        raise ValueError(f"pass@{k} needs n >= k attempts per task, got n = {int(n_b.min())}")
    if np.any(c_b < 0) or np.any(c_b > n_b):
        raise ValueError("c must be in [0, n]")
    out = np.empty(n_b.shape, dtype=np.float64)
    for idx in np.ndindex(n_b.shape):
        nn, cc = int(n_b[idx]), int(c_b[idx])
        if nn - cc < k:
            out[idx] = 1.0
        else:
            i = np.arange(nn - cc + 1, nn + 1, dtype=np.float64)
            out[idx] = 1.0 - float(np.prod(1.0 - k / i))
    return float(out) if out.ndim == 0 else out


def estimate_over_rounds(n: Iterable[int], c: Iterable[int], k: int, level: float = 0.95) -> dict[str, Any]:
    """Mean unbiased pass@k (or correct@k) over rounds, with a Student-t interval over the rounds.

    Parameters
    ----------
    n, c : iterables of int, one entry per round
        Attempts and passing (correct) attempts of each round.
    k : int
    level : float
        Two-sided confidence level.

    Returns
    -------
    dict
        ``k``, ``estimate`` (mean of the per-round estimates), ``lo``, ``hi`` (t interval over the
        rounds, clipped to [0, 1]; ``None`` with fewer than 2 rounds), ``sd`` (ddof 1), ``n_rounds``,
        ``per_round`` (list), ``level``, ``reason`` (``None``, or why ``estimate`` is ``None``: no
        round, or a round with fewer than ``k`` attempts).
    """
    from quantgym.stats.repeats import repeat_interval

    n_l, c_l = [int(x) for x in n], [int(x) for x in c]
    if len(n_l) != len(c_l):
        raise ValueError("n and c need one entry per round")
    out: dict[str, Any] = {"k": int(k), "estimate": None, "lo": None, "hi": None, "sd": None, "n_rounds": len(n_l),
                           "per_round": [], "level": level, "reason": None}
    if not n_l:
        out["reason"] = "no round"
        return out
    if min(n_l) < k:
        out["reason"] = f"a round has {min(n_l)} attempt(s): pass@{k} needs n >= {k}"
        return out
    per = np.atleast_1d(pass_at_k(n_l, c_l, k))
    ci = repeat_interval(per.tolist(), level)
    out.update(estimate=ci["mean"], sd=ci["sd"], per_round=per.tolist(),
               lo=None if ci["lo"] is None else max(0.0, ci["lo"]),
               hi=None if ci["hi"] is None else min(1.0, ci["hi"]))
    return out


__all__ = ["pass_at_k", "estimate_over_rounds"]
