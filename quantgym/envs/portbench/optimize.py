"""PortBench's long-only max-Sharpe solver and the BLAS thread control of its hot paths (spec §4.3 step 4, §8.6).

:func:`max_sharpe` is the S3 oracle's solver (:func:`quantgym.envs.portbench.stages.s3_truth`), the
Black–Litterman baseline's and the static QA layer's; :func:`single_thread_blas` limits BLAS to one
thread around the many tiny BLAS calls of the oracle, the scorers and the snapshot (speed only).
"""

from __future__ import annotations

import contextlib

import numpy as np
from scipy.optimize import minimize, nnls

__all__ = ["max_sharpe", "max_sharpe_weights"]

_BLAS = None
_BLAS_DEFAULT = 1
_BLAS_LIBS: tuple = ()


def single_thread_blas():
    """Context limiting BLAS to one thread (speed only; same numbers).

    SLSQP makes hundreds of tiny BLAS calls; with a multi-threaded OpenBLAS on a busy machine each
    call waits for worker threads, which made the oracle 10–100× slower than single-threaded
    (docs/performance.md). A run that fails under the limit is repeated without it, so the oracle
    returns what it returned before the limit existed (all 94 bench decision rows identical).
    Without threadpoolctl (a scikit-learn dependency) this is a no-op.
    """
    return _blas_limit(1)


def _blas_limit(n: int | None):
    """BLAS thread limit context: ``n`` threads, or None = the process's default (captured at first use)."""
    global _BLAS, _BLAS_DEFAULT, _BLAS_LIBS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
            _BLAS_LIBS = tuple(_BLAS.select(user_api="blas").lib_controllers)
            _BLAS_DEFAULT = max([lib.num_threads for lib in _BLAS_LIBS] or [1])
        except Exception:  # noqa: BLE001 - optional speed-up only
            _BLAS = False
    if not _BLAS:
        return contextlib.nullcontext()
    return _BlasThreads(_BLAS_LIBS, _BLAS_DEFAULT if n is None else n)


class _BlasThreads:
    """``threadpoolctl``'s ``limit(limits=n, user_api="blas")`` on the BLAS libraries found at first use:
    each library's thread count is set to ``n`` on entry and restored on exit, without re-scanning the
    process's libraries every time (speed only: the scored env enters it once per step)."""

    __slots__ = ("libs", "n", "prev")

    def __init__(self, libs, n: int):
        self.libs, self.n, self.prev = libs, n, ()

    def __enter__(self):
        self.prev = tuple(lib.num_threads for lib in self.libs)
        for lib in self.libs:
            lib.set_num_threads(self.n)
        return self

    def __exit__(self, *exc) -> None:
        for lib, k in zip(self.libs, self.prev):
            lib.set_num_threads(k)


def max_sharpe(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray | None:
    """Long-only maximum of ``wᵀμ / sqrt(wᵀΣw + 1e−10)``, ``Σw = 1`` (spec §4.3 step 4, §8.6).

    Parameters
    ----------
    mu : (n,) expected returns (daily decimals); sigma : (n, n) covariance (PSD, may be singular).

    Returns
    -------
    (n,) weights ≥ 0 summing to 1 (not rounded); ``None`` if the inputs are not finite or no
    solution exists.

    Notes
    -----
    Solved exactly (§11.9: the problem, not the code, is normative). On the simplex
    ``(1ᵀw)² = 1``, so the objective equals ``wᵀμ / sqrt(wᵀΣ'w)`` with ``Σ' = Σ + 1e−10·11ᵀ``.
    When ``max μ > 0`` the maximiser is ``y/1ᵀy`` for the non-negative least-squares solution of
    ``min_{y ≥ 0} ‖A y‖² + (μᵀy − 1)²`` with ``AᵀA = Σ'`` (for a fixed direction the best scale
    makes this increasing in the direction's variance per unit of μ, so its minimiser is the
    max-Sharpe direction). SciPy's SLSQP, used by the repo, stops far from this optimum on many
    real windows (e.g. Black–Litterman posteriors: Sharpe 1.1 vs the optimum 10.1); it is kept only
    for ``max μ ≤ 0``, where the maximum is a least-negative ratio.
    """
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    n = mu.size
    if n == 0 or not (np.all(np.isfinite(mu)) and np.all(np.isfinite(sigma))):
        return None
    if mu.max() <= 0:
        return _max_sharpe_slsqp(mu, sigma)
    s = sigma + 1e-10
    lam, vec = np.linalg.eigh(0.5 * (s + s.T))
    a = (vec * np.sqrt(np.clip(lam, 0.0, None))).T  # aᵀa = Σ'
    lhs = np.vstack([a, mu[None, :]])
    rhs = np.zeros(n + 1)
    rhs[-1] = 1.0
    y, _ = nnls(lhs, rhs, maxiter=50 * (n + 1))
    tot = y.sum()
    if not np.isfinite(tot) or tot <= 0:
        return None
    return y / tot


def _max_sharpe_slsqp(mu: np.ndarray, sigma: np.ndarray, last_iterate: bool = False) -> np.ndarray | None:
    """SLSQP from equal weight (ftol 1e−9, 500 iterations) with analytic gradients (the repo's solver).

    None when SLSQP reports failure, unless ``last_iterate`` (then its last finite iterate is returned)."""
    n = mu.size

    def neg_sharpe(w):
        return -(w @ mu) / np.sqrt(w @ sigma @ w + 1e-10)

    def grad(w):
        q = w @ sigma @ w + 1e-10
        sq = np.sqrt(q)
        return -(mu / sq - (w @ mu) * (sigma @ w) / (q * sq))

    res = minimize(
        neg_sharpe, np.full(n, 1.0 / n), jac=grad, method="SLSQP", bounds=[(0.0, 1.0)] * n,
        constraints=({"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones_like(w)},),
        options={"ftol": 1e-9, "maxiter": 500},
    )
    if not (res.success or last_iterate) or not np.all(np.isfinite(res.x)):
        return None
    w = np.clip(res.x, 0.0, None)
    tot = w.sum()
    return w / tot if tot > 0 else None


def max_sharpe_weights(x: np.ndarray) -> np.ndarray | None:
    """:func:`max_sharpe` on the sample mean and covariance (ddof 1, no rf) of returns ``x`` (T, n)."""
    n = x.shape[1]
    return max_sharpe(x.mean(axis=0), np.cov(x, rowvar=False, ddof=1).reshape(n, n))
