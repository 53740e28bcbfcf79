"""The compiled kernels and plain-float helpers of the PortBench step give numpy's floats
bit for bit (compiled, and interpreted with QUANTGYM_JIT=0 through ``py_func``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantgym.envs.portbench.ceps import ceps, clip_float
from quantgym.envs.portbench.observation import clip_count as _clip
from quantgym.envs.portbench.execution import execute_trade, trade_into
from quantgym.envs.portbench.stages import _risk_numbers
from quantgym.jit import np_sum
from quantgym.metrics import max_drawdown, quantile_linear


def _same(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))


@pytest.mark.parametrize("interpreted", [False, True])
def test_np_sum_is_numpys_pairwise_sum(interpreted):
    f = np_sum.py_func if interpreted else np_sum
    rng = np.random.default_rng(0)
    for n in [0, 1, 7, 8, 9, 80, 127, 128, 129, 300, 1000, 2999]:
        a = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, size=n)
        assert f(a, 0, n) == a.sum()
        if n > 3:
            assert f(a, 3, n - 3) == a[3:].sum()


def test_clip_helpers_are_numpys_clip_signed_zeros_and_nan_included():
    vals = np.array([-0.0, 0.0, 1.0, -1.0, np.nan, 0.5, 2.0, -2.0, np.inf, -np.inf])
    for lo, hi in [(0.0, 1.0), (-1.0, 1.0), (-0.0, 1.0), (0.0, 1e7)]:
        ref = np.clip(vals, lo, hi)
        out = np.empty_like(vals)
        _clip(vals, lo, hi, out)
        assert all(_same(a, b) for a, b in zip(out, ref))
        assert all(_same(clip_float(x, lo, hi), float(np.clip(x, lo, hi))) for x in vals)


def test_ceps_is_the_numpy_formula():
    rng = np.random.default_rng(1)
    choices = [None, 0.0, -0.0, 1.0, float("nan"), 0.3, 0.9, 1.2, -0.1]
    for _ in range(3000):
        k = int(rng.choice([1, 3, 5, 5, 9]))
        sc = [choices[int(i)] if i < len(choices) else float(rng.random()) for i in rng.integers(0, 12, k)]
        s = np.array([0.0 if (x is None or not np.isfinite(x)) else float(x) for x in sc])
        ref = round(float(np.clip(s.mean() - 0.1 * np.maximum(s[:-1] - s[1:], 0.0).sum(), 0.0, 1.0)), 4)
        assert _same(ceps(sc, 0.1), ref)


def test_trade_into_is_execute_trade_then_the_numpy_day_loop():
    rng = np.random.default_rng(2)
    h, j = 2, 1  # the trade at history row h - 1, recorded in trades row j
    for n, m in [(80, 1), (80, 21), (5, 7), (200, 3)]:
        w = rng.uniform(0, 1, n)
        w /= w.sum()
        target = np.round(rng.uniform(0, 1, n) / (n / 2), 4)
        r0 = rng.normal(0, 0.02, (m + 3, n))
        hist = np.full((h + m + 2, n + 1), -7.0)  # rows before h - 1 and after the marked days stay untouched
        hist[h - 1, :n], hist[h - 1, n] = w, 1e6
        trades = np.full((3, n + 5), -7.0)
        tau, cost = trade_into(hist, h, target, 0.0015, 1e-6, r0, 1, m, trades, j)
        ex = execute_trade(w, target, np.float64(1e6), 0.0015, 1e-6)
        assert tau == ex.turnover and cost == ex.cost and hist[h - 1, n] == ex.nav
        assert np.array_equal(hist[h - 1, :n], ex.weights) and np.array_equal(trades[j, :n], ex.delta)
        assert list(trades[j, n:]) == [ex.turnover, ex.cost, ex.nav, 1e6, 1.0]
        assert (hist[:h - 1] == -7.0).all() and (hist[h + m:-1] == -7.0).all()
        assert (trades[[0, 2]] == -7.0).all()
        wt, nav = ex.weights, ex.nav
        for d in range(1, m + 1):
            growth = wt * (1.0 + r0[1 + d])
            g = growth.sum()
            nav *= g
            wt = growth / g
            assert np.array_equal(hist[h - 1 + d, :n], wt) and hist[h - 1 + d, n] == nav


def test_risk_numbers_are_quantile_linear_and_max_drawdown():
    rng = np.random.default_rng(3)
    for i in range(2000):
        n = int(rng.integers(1, 80))
        p = rng.normal(0, 0.02, n)
        if i % 4 == 0:
            p = np.round(p, 3)  # ties
        w, a = rng.uniform(0, 1, 20), rng.uniform(0, 1, 20) > 0.3
        inc = bool(i % 2)
        ok, var, dd, drift = _risk_numbers(p, w, a, 0.05, 10, inc)
        assert ok
        assert _same(var, quantile_linear(p, 0.05) if n > 10 else 0.0)
        assert _same(dd, max_drawdown(p, include_start=inc) if n > 10 else 0.0)
        m = int(a.sum())
        assert drift == (float(np.abs(w[a] - 1.0 / m).max()) if m else 0.0)
    assert not _risk_numbers(np.array([0.1, np.nan] * 8), w, a, 0.05, 10, True)[0]  # NaN: numpy's own rules


def _correlation_score_numpy(weights, snap):
    """correlation_score as it was written with numpy before the kernel (the reference)."""
    from quantgym.envs.portbench.market import ASSET_CLASSES

    k = len(ASSET_CLASSES)
    cw = np.bincount(snap.class_id, weights=np.where(snap.available, weights, 0.0), minlength=k)
    held = cw > 0
    use_i = np.isfinite(snap.intra) & held
    i_score = float(np.clip(1.0 - (cw[use_i] * np.maximum(snap.intra[use_i], 0.0)).sum(), 0.0, 1.0))
    active = np.flatnonzero(held)
    h = 1.0
    if active.size >= 2:
        ca = cw[active]
        ww = ca[:, None] * ca[None, :]
        rho = snap.inter[active[:, None], active]
        mask = ~np.eye(active.size, dtype=bool) & np.isfinite(rho)
        den = ww[mask].sum()
        if den > 0:
            h = float(np.clip((1.0 - (ww[mask] * rho[mask]).sum() / den) / 2.0, 0.0, 1.0))
    return i_score, h, {ASSET_CLASSES[c]: v for c, v in enumerate(cw.tolist()) if v > 0}


def test_correlation_score_is_the_numpy_formula():
    from types import SimpleNamespace

    from quantgym.envs.portbench.stages import correlation_score

    rng = np.random.default_rng(4)
    for i in range(500):
        n = int(rng.integers(2, 40))
        inter = rng.uniform(-1, 1, (6, 6))
        inter = (inter + inter.T) / 2
        inter[rng.uniform(size=(6, 6)) < 0.1] = np.nan
        intra = np.diag(inter).copy()
        snap = SimpleNamespace(class_id=rng.integers(0, 6, n), available=rng.uniform(size=n) > 0.2, intra=intra,
                               inter=inter)
        w = np.round(rng.uniform(0, 1, n) * (rng.uniform(size=n) > 0.3), 4)
        cs = correlation_score(w, snap)
        i_ref, h_ref, cw_ref = _correlation_score_numpy(w, snap)
        assert _same(cs.intra, i_ref) and _same(cs.inter, h_ref) and cs.class_weights == cw_ref


@pytest.mark.parametrize("interpreted", [False, True])
def test_turnover_mae_and_pas_sums_are_numpys(interpreted):
    """turnover (S4), the S3 MAE over A_d and the PAS class sums: one kernel each, numpy's floats bit for bit
    (NaN, exact zeros below min_trade, empty selections and long vectors included)."""
    from quantgym.envs.portbench.execution import _turnover_sum
    from quantgym.envs.portbench.profiles import _class_sums
    from quantgym.envs.portbench.stages import _mae_available

    tsum, mae, csum = ((_turnover_sum.py_func, _mae_available.py_func, _class_sums.py_func) if interpreted
                       else (_turnover_sum, _mae_available, _class_sums))
    rng = np.random.default_rng(7)
    for n in [0, 1, 5, 8, 68, 80, 129, 1000]:
        for _ in range(20):
            a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
            same = rng.random(n) < 0.2
            b[same] = a[same] + rng.uniform(-1e-7, 1e-7, same.sum())  # some |Δ| below min_trade
            if n and rng.random() < 0.2:
                a[rng.integers(n)] = np.nan
            mask = rng.random(n) < rng.random()
            d = np.abs(a - b)
            assert _same(tsum(a, b, 1e-6, np.empty(n)), float(d[d >= 1e-6].sum()))
            ref = float(np.abs(a[mask] - b[mask]).mean()) if mask.any() else 0.0
            assert _same(mae(a, b, mask, np.empty(n)), ref)
            other = rng.random(n) < 0.5
            e, f = csum(a, mask, other, np.empty(n))
            assert _same(e, float(a[mask].sum())) and _same(f, float(a[other].sum()))
