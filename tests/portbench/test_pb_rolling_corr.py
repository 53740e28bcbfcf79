"""The observation's correlation of a wide universe from rolling cross products (correlation_rolling: RollingCross,
obs_corr_rolled; market.MarketView._fill_rows at N ≥ ROLLING_MIN_N): the cross products of a data row do not
depend on the rows visited before, and the observation form stays within 1e-12 of the direct computation."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from quantgym.envs.portbench import correlation, correlation_rolling
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.envs.portbench.correlation import corr_and_obs
from quantgym.envs.portbench.correlation_rolling import ROLLING_MIN_N, RollingCross, obs_corr_rolled
from quantgym.envs.portbench.market import MarketView
from quantgym.envs.portbench.optimize import single_thread_blas

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_portbench_scaling import synthetic_data  # noqa: E402

TOL = 1e-12


def _returns(t: int, n: int, seed: int, cells: bool) -> np.ndarray:
    """Daily-like returns with the cases the finish treats apart: late listings and a delisting (a few
    missing-value patterns), a constant column (zero variance), a perfect negative correlation, very different
    scales; ``cells``: scattered missing cells (a pattern per column: the direct path)."""
    rng = np.random.default_rng(seed)
    market = rng.normal(0.0, 0.01, t)
    x = market[:, None] * rng.uniform(0.2, 1.5, n) + rng.normal(size=(t, n)) * rng.uniform(1e-4, 0.05, n)
    for i in rng.choice(n, n // 10, replace=False):
        x[: rng.integers(1, t), i] = np.nan
    x[t // 2:, 5] = np.nan
    x[:, 1] = 0.01
    x[:, 3] = -2.0 * x[:, 4]
    if cells:
        x[rng.uniform(size=x.shape) < 0.05] = np.nan
    return x


def _windows(t: int, lookback: int) -> tuple[np.ndarray, np.ndarray]:
    hi = np.arange(1, t + 1, dtype=np.int64)
    lo = np.maximum(hi - lookback, 0)
    lo[t // 3: t // 3 + 5] = lo[t // 3]  # a stretch where the window grows (a gap in the calendar)
    return np.maximum.accumulate(lo), hi


def _window(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, d: int, min_obs: int = 20) -> np.ndarray:
    """Data row ``d``'s window with the columns of fewer than ``min_obs`` returns unavailable (NaN)."""
    w = x[lo[d]:hi[d]]
    return np.where((np.isfinite(w).sum(0) >= min_obs)[None, :], w, np.nan)


def _cross(chain: RollingCross, d: int) -> np.ndarray:
    s, zr, sign = chain.ops(d)
    correlation_rolling._apply_updates(s, zr, sign)
    return s.copy()


def test_cross_products_are_a_function_of_the_row():
    """Forward one row at a time, forward by jumps, backwards, restarts: the same bits at each row, close
    to the direct product."""
    t, n = 300, 40
    x = _returns(t, n, 0, cells=False)
    y = np.nan_to_num(x)
    lo, hi = _windows(t, 60)
    fresh = {d: _cross(RollingCross(y, lo, hi), d) for d in range(t)}
    for order in (range(t), range(0, t, 7), range(t - 1, -1, -3), np.random.default_rng(1).permutation(t)):
        chain = RollingCross(y, lo, hi)
        for d in order:
            got = _cross(chain, int(d))
            assert got.tobytes() == fresh[int(d)].tobytes(), int(d)
            direct = y[lo[d]:hi[d]].T @ y[lo[d]:hi[d]]
            chain_rows = np.abs(y[lo[d - d % correlation_rolling.ROLLING_ANCHOR]:hi[d]])  # every row added since the anchor
            assert (np.abs(got - direct) <= 1e-13 * (chain_rows.T @ chain_rows)).all()
            assert (got == got.T).all()


def test_windows_must_slide_forward():
    with pytest.raises(ValueError, match="slide forward"):
        RollingCross(np.zeros((3, 2)), np.array([0, 1, 0]), np.array([1, 2, 3]))


def test_a_copied_chain_starts_afresh():
    t, n = 80, 12
    y = np.nan_to_num(_returns(t, n, 2, cells=False))
    lo, hi = _windows(t, 30)
    chain = RollingCross(y, lo, hi)
    _cross(chain, 70)
    copy = pickle.loads(pickle.dumps(chain))
    assert copy.cross is None and copy.row == -1
    assert _cross(copy, 75).tobytes() == _cross(chain, 75).tobytes()


@pytest.mark.parametrize("cells", [False, True], ids=["patterns", "cells"])
def test_observation_form_within_tolerance_of_the_direct_one(cells):
    """Every row of a pass (short windows at the start, listings, a delisting, unavailable columns, a zero
    variance); with scattered missing cells the window is left to corr_and_obs (False) and the chain still
    advances."""
    t, n = 260, 48
    x = _returns(t, n, 3, cells)
    lo, hi = _windows(t, 60)
    chain = RollingCross(np.nan_to_num(x), lo, hi)
    out = np.empty((n, n))
    worst, done = 0.0, 0
    with single_thread_blas():
        for d in range(2, t):
            win = _window(x, lo, hi, d)
            z = np.nan_to_num(win)
            ok = obs_corr_rolled(win, z, win.shape[0], chain, d, out)
            if ok:
                want = corr_and_obs(win, corr=False)[1]
                assert (out == out.T).all() and (np.diag(out) == 1.0).all()
                assert ((want == 0.0) == (out == 0.0)).all(), d  # the same entries undefined
                worst = max(worst, float(np.abs(out - want).max()))
                done += 1
    assert worst <= TOL
    assert done == t - 2 if not cells else 0 < done < (t - 2) // 4  # with cells, only the shortest windows


def test_env_rows_roll_in_a_wide_universe_and_match_the_direct_path():
    """A MarketView at N ≥ ROLLING_MIN_N: a pass over consecutive rows, the same rows in another order, and the
    per-row path (corr_and_obs): the same bits whatever the order, within 1e-12 of the direct path."""
    n = ROLLING_MIN_N
    data = synthetic_data(n, seed=4)
    seq, jumps, direct = (MarketView(d, PortBenchConfig()) for d in (data, synthetic_data(n, seed=4),
                                                                      synthetic_data(n, seed=4)))
    direct._fill_rows = lambda t, with_corr: False
    rows = list(range(600, 680))
    got = {t: seq.row_array(t, "obs_corr").copy() for t in rows}
    assert seq._rolling is not None and seq._rolling.row >= rows[-1] - 1
    for t in np.random.default_rng(0).permutation(rows):
        assert jumps.row_array(int(t), "obs_corr").tobytes() == got[int(t)].tobytes(), t
    for t in rows[::9]:
        assert np.abs(got[t] - direct.row_array(t, "obs_corr")).max() <= TOL


def _reference_finish(s, cnt, pid, sx, var):
    """The documented entry of the rolled observation form, entry by entry in numpy (the same operations in the
    same order): ``clip((s_ij − (sx[i, q]·sx[j, p])·(1/n))·(r[i, q]·r[j, p]), −1, 1)``, 0 where n < 2, diagonal 1."""
    k = s.shape[0]
    r = np.where(var > 1e-14, 1.0 / np.sqrt(np.where(var > 1e-14, var, 1.0)), 0.0)  # (N, P)
    p, q = pid[:, None], pid[None, :]
    n = cnt[p, q]
    live = n >= 2.0
    inv_n = np.where(live, 1.0 / np.where(live, n, 1.0), 0.0)
    a = sx[np.arange(k)[:, None], q]  # sx[i, q]
    b = sx[np.arange(k)[None, :], p]  # sx[j, p]
    ri = np.where(live, r[np.arange(k)[:, None], q], 0.0)
    rj = r[np.arange(k)[None, :], p]
    out = np.clip((s - (a * b) * inv_n) * (ri * rj), -1.0, 1.0)
    np.fill_diagonal(out, 1.0)
    return out


@pytest.mark.parametrize("n_ops", [0, 1, 2, 3, 7])
@pytest.mark.parametrize("n", [1, 2, 7, 40, 41])
def test_rolled_finish_is_the_documented_entry_bit_for_bit(n, n_ops):
    """The pass finishes the most common pattern's rows two at a time and reads their entries in the other
    patterns' columns from those rows (symmetry): the bits of the documented entry, for odd and even counts of
    rows, other patterns (one with fewer than 2 rows: undefined, 0), a zero variance, and the fused (2 updates)
    and separate update paths."""
    rng = np.random.default_rng(n * 10 + n_ops)
    t = 50
    x = rng.normal(0.0, 0.01, (t, n)) * rng.uniform(0.5, 2.0, n)
    if n >= 7:
        x[:20, 2] = np.nan  # a late listing
        x[:45, 3] = np.nan  # five rows in the window
        x[:49, 4] = np.nan  # one row: n < 2 (undefined)
        x[:, 5] = 0.02  # zero variance
        x[:20, 6] = np.nan  # the late listing's pattern again
    win = x[-40:]
    z = np.nan_to_num(win)
    ok, cnt, pid, sx, var = correlation._window_sums(win, z, 40, 16)
    assert ok
    y = rng.normal(0.0, 0.01, (n_ops, n))
    sign = np.where(np.arange(n_ops) % 2, -1.0, 1.0)
    s0 = z.T @ z  # symmetric bit for bit, as a chain's cross products are
    assert (s0 == s0.T).all()
    s = s0.copy()
    out = np.full((n, n), np.nan)
    correlation_rolling._rolled_obs_corr(s, y, sign, cnt, pid, sx, np.ascontiguousarray(sx.T), var, out)
    s_ref = s0.copy()
    correlation_rolling._apply_updates(s_ref, y, sign)
    assert s.tobytes() == s_ref.tobytes()
    want = _reference_finish(s_ref, cnt, pid, sx, var)
    assert out.tobytes() == want.tobytes()
    assert (out == out.T).all()
