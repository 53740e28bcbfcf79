"""Bootstrap intervals of return statistics and the Sharpe-ratio difference test, on daily returns.

Generic (no task is named here). Inputs are daily simple returns ``r`` (1-D arrays, decimals, one per
trading day); conventions follow :mod:`quantgym.metrics`: arithmetic mean, sample standard deviation
(ddof 1), ``periods_per_year`` days a year, annual risk-free ``rf`` subtracted from the annualised
mean.

Intervals (:func:`bootstrap_intervals`)
    The stationary bootstrap of Politis & Romano (1994, JASA 89:1303) resamples blocks of geometric
    random length with mean ``b`` (wrapping around the end), so it keeps the series' short-range
    dependence (volatility clustering) that an iid bootstrap destroys. ``b`` is the automatic choice of
    Politis & White (2004, Econometric Reviews 23:53; corrected by Patton, Politis & White 2009) unless
    :class:`~quantgym.stats.config.BootstrapConfig` fixes it. The resample indices come from
    ``arch.bootstrap.StationaryBootstrap`` (seeded); the statistics of all ``B`` resamples are then
    computed at once on a ``(B, n)`` matrix, and the interval is the percentile interval (the
    ``α/2`` and ``1 − α/2`` quantiles of the ``B`` values, numpy's linear rule -- what
    ``StationaryBootstrap.conf_int(method="percentile")`` returns, tested).

Sharpe difference (:func:`sharpe_difference_test`)
    Ledoit & Wolf (2008, J. Empirical Finance 15:850), "Robust performance hypothesis testing with the
    Sharpe ratio": ``Δ = SR_1 − SR_2`` of two return series observed on the same days (paired). Its
    standard error is the delta method on ``v = (μ_1, μ_2, γ_1, γ_2)`` (means and uncentred second
    moments of the excess returns) with a HAC long-run covariance (quadratic-spectral kernel, automatic
    bandwidth of Andrews 1991, ``arch.covariance.kernel.QuadraticSpectral``; LW prewhiten first, we do
    not). The reported p-value and interval are LW's **studentised circular block bootstrap**
    (their §3.2, Remark 3.2): ``B`` circular-block resamples (``arch.bootstrap.CircularBlockBootstrap``,
    block ``b`` from Politis–White's circular estimate, the larger of the two series'), each
    studentised by the block-sum standard error of LW's eq. (9)-(10); p-value
    ``(#{|Δ* − Δ| / s(Δ*) ≥ |Δ| / s(Δ)} + 1) / (B + 1)``, interval ``Δ ± q_{1−α} · s(Δ)`` with
    ``q_{1−α}`` the ``1 − α`` quantile of ``|Δ* − Δ| / s(Δ*)`` (symmetric). LW's data-driven choice of
    ``b`` (their Algorithm 3.1) is replaced by Politis–White (documented deviation). The plain HAC
    p-value (normal approximation, LW §3.1, liberal in small samples) is reported beside it as
    ``p_hac``. LW's formulas use population moments (ddof 0); we report Δ on the ddof-1 Sharpe of
    :mod:`quantgym.metrics` (so Δ equals the difference of the Sharpe columns), scaling Δ and its
    standard error by ``sqrt((n − 1) / n)`` (the ratio of the two, identical for both series); the
    studentised statistics, hence p-values, are unchanged by that scaling.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantgym.stats.config import DEFAULT_BOOTSTRAP, BootstrapConfig

#: statistics of :func:`return_stats` / :func:`bootstrap_intervals`, in their order
STATS = ("sharpe", "total_return", "ann_return", "volatility", "max_drawdown")


def _returns(r: Any) -> np.ndarray:
    a = np.asarray(r, dtype=np.float64).ravel()
    if not np.all(np.isfinite(a)):
        raise ValueError("returns must be finite")
    return a


def block_length(x: Any, config: BootstrapConfig = DEFAULT_BOOTSTRAP, kind: str = "stationary") -> int:
    """Block length of the bootstrap of ``x`` (a (n,) series or (n, k) series side by side).

    Parameters
    ----------
    x : (n,) or (n, k) array; with k columns the largest of the per-column choices is used.
    config : ``config.block_length`` when set, else Politis & White (2004) through
        ``arch.bootstrap.optimal_block_length``.
    kind : ``"stationary"`` (mean block length of the stationary bootstrap) or ``"circular"``.

    Returns
    -------
    int
        ``ceil`` of the estimate, clipped to ``[1, max(1, n // 2)]``; 1 when the estimate is not finite
        (a constant series).
    """
    a = np.asarray(x, dtype=np.float64)
    a = a.reshape(a.shape[0], -1)
    n = a.shape[0]
    cap = max(1, n // 2)
    if config.block_length is not None:
        return int(min(int(config.block_length), cap))
    if kind not in ("stationary", "circular"):
        raise ValueError(f"kind must be 'stationary' or 'circular', got {kind!r}")
    from arch.bootstrap import optimal_block_length

    est = 1.0
    for j in range(a.shape[1]):
        col = a[:, j]
        if np.ptp(col) == 0:
            continue
        with np.errstate(all="ignore"):
            v = float(optimal_block_length(col)[kind].iloc[0])
        if math.isfinite(v):
            est = max(est, v)
    return int(min(max(1, math.ceil(est)), cap))


def resample_indices(n: int, block: int, config: BootstrapConfig = DEFAULT_BOOTSTRAP,
                     kind: str = "stationary") -> np.ndarray:
    """The ``(B, n)`` integer matrix of resampled positions ``0..n−1`` (``B = config.n_boot``).

    Drawn by ``arch.bootstrap.StationaryBootstrap`` (``kind="stationary"``, mean block length
    ``block``) or ``CircularBlockBootstrap`` (``kind="circular"``, block length ``block``), seeded with
    ``config.seed``: the same call gives the same matrix.
    """
    from arch.bootstrap import CircularBlockBootstrap, StationaryBootstrap

    cls = {"stationary": StationaryBootstrap, "circular": CircularBlockBootstrap}[kind]
    bs = cls(int(block), np.arange(n), seed=config.seed)
    return np.stack([data[0] for data, _ in bs.bootstrap(config.n_boot)]).astype(np.int64, copy=False)


def return_stats(R: Any, rf: float = 0.0, periods_per_year: int = 252, include_start: bool = True
                 ) -> dict[str, np.ndarray]:
    """The statistics of each row of ``R`` (vectorised; one row = one daily return series).

    Parameters
    ----------
    R : (m, n) daily simple returns (decimals); a (n,) array is one row.
    rf : annual risk-free rate (decimal) subtracted from the annualised mean in the Sharpe ratio.
    periods_per_year : annualisation (252 trading days).
    include_start : the drawdown path starts at a peak of 1 before the first return
        (:func:`quantgym.metrics.drawdown_path`).

    Returns
    -------
    dict of (m,) arrays, decimals
        ``sharpe`` ``(mean·p − rf)/(std·√p)`` (0 where std is 0 or n < 2), ``total_return``
        ``Π(1+r) − 1``, ``ann_return`` ``(Π(1+r))^{p/n} − 1`` (−1 if the product ≤ 0, 0 if n < 2),
        ``volatility`` ``std·√p`` (ddof 1), ``max_drawdown`` (≤ 0). Same numbers as
        :func:`quantgym.metrics.performance_summary` row by row (tested).
    """
    R = np.atleast_2d(np.asarray(R, dtype=np.float64))
    m, n = R.shape
    growth = np.prod(1.0 + R, axis=1)
    if n < 2:
        zeros = np.zeros(m)
        vol = zeros
        sharpe = zeros
        ann = zeros
    else:
        vol = R.std(axis=1, ddof=1) * math.sqrt(periods_per_year)
        with np.errstate(divide="ignore", invalid="ignore"):
            sharpe = np.where((vol > 0) & np.isfinite(vol), (R.mean(axis=1) * periods_per_year - rf) / vol, 0.0)
            ann = np.where(growth > 0, np.abs(growth) ** (periods_per_year / n) - 1.0, -1.0)
    path = np.cumprod(1.0 + R, axis=1)
    if include_start:
        path = np.concatenate([np.ones((m, 1)), path], axis=1)
    mdd = (path / np.maximum.accumulate(path, axis=1) - 1.0).min(axis=1) if path.shape[1] else np.zeros(m)
    return {"sharpe": sharpe, "total_return": growth - 1.0, "ann_return": ann, "volatility": vol,
            "max_drawdown": mdd}


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval ``(q_{α/2}, q_{1−α/2})`` of bootstrap values (numpy linear quantiles)."""
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(np.asarray(values, dtype=np.float64), [a, 1.0 - a])
    return float(lo), float(hi)


def bootstrap_intervals(r: Any, config: BootstrapConfig = DEFAULT_BOOTSTRAP, *, rf: float = 0.0,
                        periods_per_year: int = 252, include_start: bool = True) -> dict[str, Any]:
    """Stationary block bootstrap percentile intervals of a return series' statistics.

    Parameters
    ----------
    r : (n,) daily simple returns (decimals).
    config : seed, ``B``, confidence level and block rule.
    rf, periods_per_year, include_start : as in :func:`return_stats`.

    Returns
    -------
    dict
        ``n``, ``block`` (mean block length used; None when ``n < config.min_obs``), ``n_boot``,
        ``confidence``, ``seed``, ``block_rule``, and per statistic of :data:`STATS` a dict
        ``{"est": point estimate, "lo": ..., "hi": ...}`` (decimals; Sharpe a ratio). ``lo``/``hi`` are
        None when ``n < config.min_obs``.

    Notes
    -----
    Source: Politis & Romano (1994); block length Politis & White (2004). A percentile interval need
    not contain the point estimate: the maximum drawdown of a resample that breaks a crash into
    separate blocks is milder than the sample's, so the drawdown interval is biased towards zero
    when one long slide dominates the period.
    """
    a = _returns(r)
    n = a.size
    est = {k: float(v[0]) for k, v in return_stats(a, rf, periods_per_year, include_start).items()}
    out: dict[str, Any] = {"n": n, "block": None, "n_boot": config.n_boot, "confidence": config.confidence,
                           "seed": config.seed, "block_rule": config.block_rule}
    if n < max(2, config.min_obs):
        out.update({k: {"est": est[k], "lo": None, "hi": None} for k in STATS})
        return out
    b = block_length(a, config, "stationary")
    boot = return_stats(a[resample_indices(n, b, config, "stationary")], rf, periods_per_year, include_start)
    out["block"] = b
    for k in STATS:
        lo, hi = percentile_interval(boot[k], config.confidence)
        out[k] = {"est": est[k], "lo": lo, "hi": hi}
    return out


# --------------------------------------------------------------------------- Ledoit & Wolf (2008)


def _sr_and_gradient(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``v = (μ1, μ2, γ1, γ2)`` (shape (m, 4)): ``Δ = f(v)`` (per-period, ddof 0) and ``∇f``
    (shape (m, 4)), LW (2008) eq. (2) and the gradient below their eq. (3)."""
    mu1, mu2, g1, g2 = v[:, 0], v[:, 1], v[:, 2], v[:, 3]
    s1, s2 = g1 - mu1 ** 2, g2 - mu2 ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        d = mu1 / np.sqrt(s1) - mu2 / np.sqrt(s2)
        grad = np.stack([g1 / s1 ** 1.5, -g2 / s2 ** 1.5, -mu1 / (2 * s1 ** 1.5), mu2 / (2 * s2 ** 1.5)], axis=1)
    return d, grad


def _moments(E1: np.ndarray, E2: np.ndarray) -> np.ndarray:
    """``(m, 4)`` moments ``(μ1, μ2, γ1, γ2)`` of each row pair of excess returns (shape (m, n))."""
    return np.stack([E1.mean(axis=1), E2.mean(axis=1), (E1 ** 2).mean(axis=1), (E2 ** 2).mean(axis=1)], axis=1)


def _centred(E1: np.ndarray, E2: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``y_t = (e1 − μ1, e2 − μ2, e1² − γ1, e2² − γ2)``, shape (m, n, 4)."""
    return np.stack([E1 - v[:, :1], E2 - v[:, 1:2], E1 ** 2 - v[:, 2:3], E2 ** 2 - v[:, 3:4]], axis=2)


def hac_sharpe_se(e1: np.ndarray, e2: np.ndarray, bandwidth: float | None = None) -> tuple[float, float, float]:
    """LW (2008) §3.1 HAC standard error of the per-period (ddof 0) Sharpe difference.

    Parameters
    ----------
    e1, e2 : (n,) paired excess returns (decimals, per period).
    bandwidth : QS kernel bandwidth; None = Andrews (1991) automatic (``arch``).

    Returns
    -------
    (delta, se, bandwidth)
        ``Δ`` per period (ddof 0), ``s(Δ) = sqrt(∇f' Ψ ∇f / n)``, and the bandwidth used.
    """
    from arch.covariance.kernel import QuadraticSpectral

    E1, E2 = e1[None, :], e2[None, :]
    v = _moments(E1, E2)
    d, g = _sr_and_gradient(v)
    y = _centred(E1, E2, v)[0]
    k = QuadraticSpectral(y, bandwidth=bandwidth)
    psi = _long_run(y, k.kernel_weights)
    var = float(g[0] @ psi @ g[0]) / e1.size
    return float(d[0]), math.sqrt(max(var, 0.0)), float(k.bandwidth)


def _long_run(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The kernel long-run covariance ``Γ0 + Λ1 + Λ1'`` of ``y`` (n, k), centred, with kernel weights ``w``:
    ``arch``'s ``CovarianceEstimator.cov.long_run`` (its defaults: centred, no degrees-of-freedom adjustment)
    in the same operations, in numpy: ``arch`` compiles its lag sum with numba without a disk cache, about a
    second of CPU in every process that calls it (equality with ``arch`` tested)."""
    x = y - y.mean(0)
    df = x.shape[0]
    oss = np.zeros((x.shape[1], x.shape[1]))
    for i in range(1, w.shape[0]):
        oss += w[i] * (x[i:].T @ x[:-i]) / df
    return x.T @ x / df + oss + oss.T


def sharpe_difference_test(r1: Any, r2: Any, config: BootstrapConfig = DEFAULT_BOOTSTRAP, *, rf: float = 0.0,
                           periods_per_year: int = 252) -> dict[str, Any]:
    """Ledoit–Wolf (2008) test of ``H0: SR_1 = SR_2`` on paired daily returns (studentised circular
    block bootstrap; see the module docstring).

    Parameters
    ----------
    r1, r2 : (n,) daily simple returns of the two strategies on the same n days (decimals).
    config : seed, ``B``, confidence level and block rule.
    rf : annual risk-free rate; the test runs on excess returns ``r − rf / periods_per_year``.
    periods_per_year : annualisation of the Sharpe ratios (√p).

    Returns
    -------
    dict
        ``delta`` annualised ``SR_1 − SR_2`` (ddof 1, = the difference of :func:`quantgym.metrics.sharpe`),
        ``lo`` / ``hi`` its studentised bootstrap interval, ``p`` the two-sided bootstrap p-value,
        ``se`` the HAC standard error of ``delta``, ``p_hac`` the HAC normal p-value, ``block``,
        ``bandwidth`` (HAC), ``n``, ``n_boot``, ``confidence``, ``seed``, ``block_rule``, ``method``.
        Identical series give ``delta = lo = hi = 0``, ``p = p_hac = 1``. Fewer than
        ``config.min_obs`` days, or a series with zero variance, give None for everything but ``n``.

    Raises
    ------
    ValueError
        Different lengths, or non-finite returns.
    """
    from scipy.stats import norm

    a, b = _returns(r1), _returns(r2)
    if a.size != b.size:
        raise ValueError(f"paired returns must have equal length, got {a.size} and {b.size}")
    n = a.size
    out: dict[str, Any] = {"n": n, "delta": None, "lo": None, "hi": None, "p": None, "se": None, "p_hac": None,
                           "block": None, "bandwidth": None, "n_boot": config.n_boot,
                           "confidence": config.confidence, "seed": config.seed, "block_rule": config.block_rule,
                           "method": "ledoit-wolf-2008 studentised circular block bootstrap"}
    if n < max(3, config.min_obs) or np.ptp(a) == 0 or np.ptp(b) == 0:
        return out
    scale = math.sqrt(periods_per_year) * math.sqrt((n - 1) / n)  # per-period ddof 0 -> annual ddof 1
    if np.array_equal(a, b):
        return {**out, "delta": 0.0, "lo": 0.0, "hi": 0.0, "p": 1.0, "se": 0.0, "p_hac": 1.0}
    e1, e2 = a - rf / periods_per_year, b - rf / periods_per_year
    d, se, bw = hac_sharpe_se(e1, e2)
    blk = block_length(np.stack([a, b], axis=1), config, "circular")
    idx = resample_indices(n, blk, config, "circular")
    E1, E2 = e1[idx], e2[idx]
    v = _moments(E1, E2)
    ds, g = _sr_and_gradient(v)
    nb = n // blk  # complete blocks: LW eq. (9)-(10) on the first nb·b resampled days
    zeta = _centred(E1, E2, v)[:, : nb * blk].reshape(idx.shape[0], nb, blk, 4).sum(axis=2) / math.sqrt(blk)
    psi = np.einsum("mlj,mlk->mjk", zeta, zeta) / nb
    se_star = np.sqrt(np.maximum(np.einsum("mj,mjk,mk->m", g, psi, g), 0.0) / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.abs(ds - d) / se_star
    t_star = t_star[np.isfinite(t_star)]
    t_obs = abs(d) / se if se > 0 else math.inf
    p = (np.count_nonzero(t_star >= t_obs) + 1) / (t_star.size + 1)
    q = float(np.quantile(t_star, config.confidence)) if t_star.size else math.nan
    return {**out, "delta": d * scale, "lo": (d - q * se) * scale, "hi": (d + q * se) * scale, "p": float(p),
            "se": se * scale, "p_hac": float(2 * norm.sf(t_obs)), "block": blk, "bandwidth": bw}


__all__ = ["STATS", "BootstrapConfig", "block_length", "bootstrap_intervals", "hac_sharpe_se", "percentile_interval",
           "resample_indices", "return_stats", "sharpe_difference_test"]
