"""quantgym.stats.bootstrap against independent answers.

- the vectorised statistics equal quantgym.metrics row by row;
- the percentile intervals equal arch's own loop (``StationaryBootstrap.conf_int``) on the same seed;
- the stationary bootstrap variance of the mean matches Politis & Romano's (1994) closed form
  (their Lemma 1) for a hand-written resampler and for ours;
- with block length 1 (the iid limit) the Sharpe interval matches ``scipy.stats.bootstrap``;
- the Ledoit–Wolf (2008) HAC standard error equals a hand-written delta method with the QS kernel,
  and, on iid normal data, Memmel's (2003) closed form; identical series give Δ = 0, p = 1;
  strongly different ones a small p; everything reproducible under the seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantgym import metrics
from quantgym.stats.bootstrap import (block_length, bootstrap_intervals, hac_sharpe_se, resample_indices,
                                      return_stats, sharpe_difference_test)
from quantgym.stats.config import DEFAULT_BOOTSTRAP, BootstrapConfig


def _garch_like(n: int, seed: int) -> np.ndarray:
    """Daily returns with volatility clustering and a little autocorrelation (fixed seed)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    r = np.empty(n)
    s2, prev = 1e-4, 0.0
    for t in range(n):
        s2 = 2e-6 + 0.1 * prev ** 2 + 0.85 * s2
        r[t] = 0.0004 + 0.1 * (prev - 0.0004) + math.sqrt(s2) * z[t]
        prev = r[t]
    return r


def test_default_config_is_the_documented_one():
    c = DEFAULT_BOOTSTRAP
    assert (c.seed, c.n_boot, c.confidence, c.block_length) == (16, 2000, 0.95, None)
    assert c.block_rule == "politis-white-2004"
    with pytest.raises(ValueError):
        BootstrapConfig(confidence=1.5)
    with pytest.raises(ValueError):
        BootstrapConfig(block_length=0)


def test_vectorised_stats_equal_the_metrics_module():
    R = np.random.default_rng(1).normal(0.0005, 0.01, size=(5, 120))
    R[0, 10:20] = -0.03  # a real drawdown
    for include_start in (True, False):
        got = return_stats(R, rf=0.04, include_start=include_start)
        for i, row in enumerate(R):
            ref = metrics.performance_summary(row, include_start=include_start, rf=0.04)
            for k, mk in (("sharpe", "sharpe"), ("total_return", "total_return"), ("ann_return", "cagr"),
                          ("volatility", "volatility"), ("max_drawdown", "max_drawdown")):
                assert got[k][i] == pytest.approx(ref[mk], rel=1e-12, abs=1e-15), (k, i)


def test_intervals_equal_arch_conf_int_on_the_same_seed():
    from arch.bootstrap import StationaryBootstrap

    r = _garch_like(300, 3)
    cfg = BootstrapConfig(n_boot=200)
    out = bootstrap_intervals(r, cfg, rf=0.04)
    b = out["block"]
    assert b == block_length(r, cfg) >= 1

    def stats(x):
        s = return_stats(x, rf=0.04)
        return np.array([s[k][0] for k in ("sharpe", "total_return", "volatility", "max_drawdown")])

    ci = StationaryBootstrap(b, r, seed=cfg.seed).conf_int(stats, reps=cfg.n_boot, method="percentile")
    for j, k in enumerate(("sharpe", "total_return", "volatility", "max_drawdown")):
        assert out[k]["lo"] == pytest.approx(ci[0, j], rel=1e-10)
        assert out[k]["hi"] == pytest.approx(ci[1, j], rel=1e-10)
        assert out[k]["lo"] <= out[k]["est"] <= out[k]["hi"]


def _politis_romano_var_of_mean(x: np.ndarray, p: float) -> float:
    """Politis & Romano (1994) Lemma 1: the stationary bootstrap variance of the resample mean,
    ``(1/n)[ĉ(0) + 2 Σ_{i=1}^{n−1} b_n(i) ĉ(i)]``, ``ĉ(i) = n⁻¹ Σ_{j ≤ n−i} (x_j − x̄)(x_{j+i} − x̄)``,
    ``b_n(i) = (1 − i/n)(1 − p)^i + (i/n)(1 − p)^{n−i}`` (the second term carries the wrap-around)."""
    n = x.size
    d = x - x.mean()
    c = np.array([d[: n - i] @ d[i:] / n for i in range(n)])
    i = np.arange(1, n)
    bn = (1 - i / n) * (1 - p) ** i + (i / n) * (1 - p) ** (n - i)
    return float((c[0] + 2 * (bn * c[1:]).sum()) / n)


def _own_stationary_resampler(n: int, block: float, reps: int, seed: int) -> np.ndarray:
    """A hand-written Politis–Romano resampler: start uniform, continue with prob 1 − 1/block, wrap."""
    rng = np.random.default_rng(seed)
    p = 1.0 / block
    idx = np.empty((reps, n), dtype=np.int64)
    for m in range(reps):
        pos = rng.integers(n)
        for t in range(n):
            if t > 0:
                pos = rng.integers(n) if rng.random() < p else (pos + 1) % n
            idx[m, t] = pos
    return idx


def test_stationary_bootstrap_variance_matches_politis_romano_lemma():
    x = _garch_like(150, 5)
    block = 6
    exact = _politis_romano_var_of_mean(x, 1.0 / block)
    ours = x[resample_indices(x.size, block, BootstrapConfig(n_boot=20000), "stationary")].mean(axis=1).var()
    own = x[_own_stationary_resampler(x.size, block, 4000, 7)].mean(axis=1).var()
    assert ours == pytest.approx(exact, rel=0.05)
    assert own == pytest.approx(exact, rel=0.10)  # fewer reps: wider Monte Carlo band


def test_iid_limit_matches_scipy_bootstrap():
    from scipy.stats import bootstrap

    r = np.random.default_rng(11).normal(0.0006, 0.01, 400)
    cfg = BootstrapConfig(n_boot=8000, block_length=1)
    ours = bootstrap_intervals(r, cfg, rf=0.04)["sharpe"]
    sp = bootstrap((r,), lambda x, axis: return_stats(np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis]),
                                                      rf=0.04)["sharpe"].reshape(np.delete(x.shape, axis)),
                   n_resamples=8000, method="percentile", random_state=np.random.default_rng(0),
                   vectorized=True).confidence_interval
    width = ours["hi"] - ours["lo"]
    assert abs(ours["lo"] - sp.low) < 0.05 * width
    assert abs(ours["hi"] - sp.high) < 0.05 * width


def test_intervals_are_reproducible_under_the_seed():
    r = _garch_like(200, 9)
    cfg = BootstrapConfig(n_boot=300)
    a, b = bootstrap_intervals(r, cfg), bootstrap_intervals(r, cfg)
    assert a == b
    c = bootstrap_intervals(r, BootstrapConfig(n_boot=300, seed=17))
    assert c["sharpe"]["lo"] != a["sharpe"]["lo"]
    t1 = sharpe_difference_test(r, _garch_like(200, 10), cfg)
    assert t1 == sharpe_difference_test(r, _garch_like(200, 10), cfg)


def test_short_series_give_no_interval():
    out = bootstrap_intervals([0.01, -0.02, 0.003], DEFAULT_BOOTSTRAP, rf=0.04)
    assert out["sharpe"]["lo"] is None and out["sharpe"]["est"] == pytest.approx(metrics.sharpe([0.01, -0.02, 0.003]))
    assert sharpe_difference_test([0.01, 0.0, 0.02], [0.0, 0.01, 0.0])["p"] is None


# --------------------------------------------------------------------------- Ledoit & Wolf (2008)


def _qs_long_run(y: np.ndarray, bw: float) -> np.ndarray:
    """Hand-written quadratic-spectral HAC (Andrews 1991): Γ0 + Σ_j k(j/bw)(Γj + Γj')."""
    n = y.shape[0]
    out = y.T @ y / n
    for j in range(1, n):
        z = 6 * math.pi * (j / bw) / 5
        k = 3 / z ** 2 * (math.sin(z) / z - math.cos(z))
        g = y[j:].T @ y[:-j] / n
        out += k * (g + g.T)
    return out


def _lw_delta_method_se(e1: np.ndarray, e2: np.ndarray, bw: float) -> tuple[float, float]:
    """LW (2008) §3.1 by hand: Δ = f(μ1, μ2, γ1, γ2), gradient by central differences, s = √(∇'Ψ∇/n)."""
    def f(v):
        return v[0] / math.sqrt(v[2] - v[0] ** 2) - v[1] / math.sqrt(v[3] - v[1] ** 2)

    v = np.array([e1.mean(), e2.mean(), (e1 ** 2).mean(), (e2 ** 2).mean()])
    grad = np.array([(f(v + h) - f(v - h)) / (2 * h[j]) for j, h in enumerate(np.diag(np.abs(v) * 1e-5 + 1e-12))])
    y = np.column_stack([e1 - v[0], e2 - v[1], e1 ** 2 - v[2], e2 ** 2 - v[3]])
    return f(v), math.sqrt(grad @ _qs_long_run(y, bw) @ grad / e1.size)


def test_hac_standard_error_equals_a_hand_written_delta_method():
    r1, r2 = _garch_like(250, 21), 0.6 * _garch_like(250, 21) + 0.4 * _garch_like(250, 22)
    e1, e2 = r1 - 0.04 / 252, r2 - 0.04 / 252
    d, se, bw = hac_sharpe_se(e1, e2)
    d_ref, se_ref = _lw_delta_method_se(e1, e2, bw)
    assert d == pytest.approx(d_ref, rel=1e-12)
    assert se == pytest.approx(se_ref, rel=1e-6)


@pytest.mark.parametrize("n", [40, 250, 1000])
def test_long_run_covariance_is_arch_s(n):
    """The kernel long-run covariance computed in numpy is arch's QuadraticSpectral ``cov.long_run``."""
    from arch.covariance.kernel import QuadraticSpectral

    from quantgym.stats.bootstrap import _long_run

    y = np.column_stack([_garch_like(n, 40 + j) for j in range(4)])
    k = QuadraticSpectral(y)
    want = np.asarray(k.cov.long_run)
    assert np.allclose(_long_run(y, k.kernel_weights), want, rtol=1e-12, atol=1e-16 * np.abs(want).max())


def test_hac_standard_error_matches_memmel_on_iid_normal_returns():
    """Jobson & Korkie (1981) with Memmel's (2003) correction, iid normal returns: n·Var(Δ) =
    2 − 2ρ + ½(SR1² + SR2² − 2·SR1·SR2·ρ²) (per-period Sharpe ratios, correlation ρ)."""
    rng = np.random.default_rng(4)
    n, rho = 5000, 0.6
    z = rng.standard_normal((n, 2))
    e1 = 0.001 + 0.01 * z[:, 0]
    e2 = 0.0002 + 0.012 * (rho * z[:, 0] + math.sqrt(1 - rho ** 2) * z[:, 1])
    sr1, sr2 = 0.1, 0.0002 / 0.012
    memmel = math.sqrt((2 - 2 * rho + 0.5 * (sr1 ** 2 + sr2 ** 2 - 2 * sr1 * sr2 * rho ** 2)) / n)
    _, se, _ = hac_sharpe_se(e1, e2)
    assert se == pytest.approx(memmel, rel=0.08)


def test_delta_is_the_difference_of_the_sharpe_columns():
    r1, r2 = _garch_like(252, 31), _garch_like(252, 32)
    t = sharpe_difference_test(r1, r2, BootstrapConfig(n_boot=400), rf=0.04)
    assert t["delta"] == pytest.approx(metrics.sharpe(r1, 0.04) - metrics.sharpe(r2, 0.04), rel=1e-10)
    assert t["lo"] < t["delta"] < t["hi"]
    assert t["delta"] - t["lo"] == pytest.approx(t["hi"] - t["delta"], rel=1e-10)  # LW's symmetric interval
    assert 0 < t["p"] <= 1 and 0 < t["p_hac"] <= 1 and t["block"] >= 1


def test_identical_series_give_zero_difference_and_p_one():
    r = _garch_like(252, 41)
    t = sharpe_difference_test(r, r.copy())
    assert (t["delta"], t["lo"], t["hi"], t["p"], t["p_hac"]) == (0.0, 0.0, 0.0, 1.0, 1.0)


def test_strongly_different_series_give_a_small_p_and_equal_ones_do_not():
    rng = np.random.default_rng(51)
    z = rng.standard_normal((756, 2)) * 0.01
    good, bad = 0.002 + z[:, 0], -0.001 + z[:, 1]  # annual Sharpe about 3.2 vs -1.6 over three years
    t = sharpe_difference_test(good, bad, BootstrapConfig(n_boot=1000))
    assert t["p"] < 0.01 and t["p_hac"] < 0.01 and t["lo"] > 0
    same = sharpe_difference_test(0.0005 + z[:, 0], 0.0005 + z[:, 1], BootstrapConfig(n_boot=1000))
    assert same["p"] > 0.05 and same["lo"] < 0 < same["hi"]


def test_bootstrap_p_value_is_roughly_uniform_under_the_null():
    """Size check on 40 seeded null pairs (iid, equal Sharpe): the 5 % test rejects a few at most."""
    cfg = BootstrapConfig(n_boot=300)
    rng = np.random.default_rng(61)
    ps = [sharpe_difference_test(*(0.0004 + 0.01 * rng.standard_normal((2, 250))), cfg)["p"] for _ in range(40)]
    assert sum(p < 0.05 for p in ps) <= 6
    assert 0.3 < float(np.median(ps)) < 0.7
