"""Cold cost of a PortBench step: the compiled correlation (pattern sums, one pass for
the correlation and its observation form) gives the bits of the numpy formulation and of the full
matrix-product sums it replaced, and ``obs_keys`` leaves the (N, N) correlation out of the observation
without computing it, every other entry unchanged."""

import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401  (registers the ids)
from quantgym.envs.portbench import correlation, market
from quantgym.envs.portbench.env import OBS_KEYS, PortBenchEnv
from quantgym.envs.portbench.correlation import (
    _corr_from_sums_numpy, _pattern_sums, _pattern_sums_numpy, corr_and_obs, mask_patterns, obs_corr, pairwise_corr,
)
from quantgym.envs.portbench.optimize import single_thread_blas

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_portbench_scaling import synthetic_data  # noqa: E402

NO_CORR = tuple(k for k in OBS_KEYS if k != "corr")
DAILY_2016 = {"start": "2016-01-01", "end": "2016-03-31", "freq": "daily"}


def _window(lookback: int, n: int, seed: int, cells: bool = True) -> np.ndarray:
    """Returns with the cases the finish treats apart: unavailable columns, late listings (a few missing-value
    patterns), missing cells (``cells``: a pattern per column, the full-sums path), a zero variance, a single
    observation, a perfect negative correlation, values of very different scales."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(lookback, n)) * rng.uniform(1e-4, 0.05, n)
    x[:, rng.choice(n, max(1, n // 10), replace=False)] = np.nan
    for i in rng.choice(n, max(1, n // 40), replace=False):
        x[: rng.integers(1, lookback), i] = np.nan
    if cells:
        x[rng.uniform(size=x.shape) < 0.05] = np.nan
    x[:, 1] = 0.01
    x[: lookback - 1, 2] = np.nan
    x[:, 3] = -2.0 * x[:, 4]
    return x


def _reference(x: np.ndarray) -> np.ndarray:
    """The correlation as computed before the pattern sums: the numpy finish of the four full matrix products."""
    m = np.isfinite(x)
    mf = m.astype(np.float64)
    z = np.where(m, x, 0.0)
    with single_thread_blas():
        return _corr_from_sums_numpy(mf.T @ mf, z.T @ mf, (z * z).T @ mf, z.T @ z)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got, want)  # NaN in the same places, every other entry the same bits
    assert np.array_equal(np.signbit(got), np.signbit(want))


SHAPES = [(60, 8), (60, 80), (25, 48), (60, 192), (37, 256), (70, 40)]  # N a multiple of 8: full tiles


@pytest.mark.parametrize("cells", [False, True], ids=["patterns", "cells"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"L{s[0]}xN{s[1]}")
@pytest.mark.parametrize("seed", range(3))
def test_correlation_and_observation_form_are_the_bits_of_before(shape, seed, cells):
    """N a multiple of 8 (single-threaded OpenBLAS sums its full tiles row by row): the pattern sums are
    the bits of the full matrix products, so every entry is what those products give."""
    x = _window(*shape, seed, cells)
    want = _reference(x)
    assert np.isnan(want).any() and (want == 1.0).any()  # the edge cases are exercised
    with single_thread_blas():
        both = corr_and_obs(x)
        corr_only = corr_and_obs(x, obs=False)
        obs_only = corr_and_obs(x, corr=False)
    _same(both[0], want)
    _same(corr_only[0], want)
    _same(both[1], obs_corr(want))
    _same(obs_only[1], obs_corr(want))
    assert corr_only[1] is None and obs_only[0] is None
    assert correlation._use_patterns(mask_patterns(np.isfinite(x))[1].shape[1], shape[1]) == (not cells or shape[1] <= 16)


@pytest.mark.parametrize("n", [7, 15, 50, 201, 333])
def test_elsewhere_the_pattern_sums_differ_from_the_products_in_the_last_bit_at_most(n):
    """N not a multiple of 8: OpenBLAS may sum its edge tile in another order (build-dependent: 0.3.31
    does at N = 7 and 15); the two agree to rounding, with NaN in the same places."""
    x = _window(60, n, 0, cells=False)
    want = _reference(x)
    with single_thread_blas():
        got = corr_and_obs(x)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shape", [(60, 80), (25, 50), (60, 201)])
def test_without_jit_the_numpy_form_gives_the_same_bits(shape, monkeypatch):
    for cells in (False, True):
        x = _window(*shape, 1, cells)
        with single_thread_blas():
            want = corr_and_obs(x), corr_and_obs(x, corr=False)[1]
        monkeypatch.setenv("QUANTGYM_JIT", "0")
        with single_thread_blas():
            got = corr_and_obs(x), corr_and_obs(x, corr=False)[1]
        monkeypatch.delenv("QUANTGYM_JIT")
        _same(got[0][0], want[0][0])
        _same(got[0][1], want[0][1])
        _same(got[1], want[1])


def test_pattern_sums_compiled_and_numpy_are_the_full_products():
    x = _window(60, 120, 4, cells=False)
    m = np.isfinite(x)
    z = np.where(m, x, 0.0)
    pid, pats = mask_patterns(m)
    sx, sxx = _pattern_sums(z, pats)
    sx_np, sxx_np = _pattern_sums_numpy(z, pats)
    _same(sx, sx_np)
    _same(sxx, sxx_np)
    mf = m.astype(np.float64)
    with single_thread_blas():
        _same(sx[:, pid], z.T @ mf)
        _same(sxx[:, pid], (z * z).T @ mf)


@pytest.mark.parametrize("rows", [1, 8, 60, 64, 65, 130])
def test_mask_patterns_groups_equal_columns(rows):
    rng = np.random.default_rng(rows)
    m = rng.uniform(size=(rows, 40)) < 0.5
    m[:, 3] = m[:, 7]
    m[:, 10:20] = True
    pid, pats = mask_patterns(m)
    assert pid.shape == (40,) and pats.dtype == np.float64
    np.testing.assert_array_equal(pats[:, pid], m)
    assert pats.shape[1] == len({tuple(c) for c in m.T})


def test_observation_form_shares_the_correlation_when_it_has_no_nan():
    x = np.random.default_rng(0).normal(size=(60, 30))
    corr, obs = corr_and_obs(x)
    assert obs is corr and not np.isnan(corr).any()
    np.testing.assert_array_equal(pairwise_corr(x), corr)
    with pytest.raises(ValueError, match="corr, obs or both"):
        corr_and_obs(x, corr=False, obs=False)


def test_pairwise_corr_without_jit_is_the_same(monkeypatch):
    x = _window(60, 40, 1)
    want = pairwise_corr(x)
    monkeypatch.setenv("QUANTGYM_JIT", "0")
    np.testing.assert_array_equal(pairwise_corr(x), want)


def test_row_cache_observation_alone_then_correlation(monkeypatch):
    """A raw step computes only the observation form; a later read of the correlation computes it (same
    numbers as :func:`pairwise_corr`); an array stored under two names counts once in the byte budget."""
    data = synthetic_data(30, seed=2)
    env = PortBenchEnv(period=DAILY_2016, scoring=False, data=data)
    env.reset(seed=0)
    view, t = env.view, int(env.snapshot.t)
    row = view._arrays.get(t)
    assert "obs_corr" in row and "corr" not in row
    corr = view.row_array(t, "corr")
    want = pairwise_corr(view.row_array(t, "returns"))
    np.testing.assert_array_equal(corr, want)
    np.testing.assert_array_equal(view.row_array(t, "obs_corr"), obs_corr(want))
    arrays = market.RowArrays(1 << 30)
    a = np.zeros((10, 10))
    arrays.put(0, "corr", a)
    arrays.put(0, "obs_corr", a)
    assert arrays.nbytes == a.nbytes



def _rollout(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    n = env.n_assets
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        act = {"views": np.zeros(n), "signals": np.ones(n, np.int64), "weights": rng.uniform(0, 1, n), "status": 0}
        obs, r, term, trunc, info = env.step(act)
        out.append(obs)
        if term:
            break
    return out


def test_obs_keys_without_corr_never_computes_it_and_keeps_every_other_entry(monkeypatch):
    calls = []
    real, batch = market.corr_and_obs, market.obs_corr_rows
    monkeypatch.setattr(market, "corr_and_obs", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(market, "obs_corr_rows", lambda *a, **k: calls.append(1) or batch(*a, **k))
    lean = PortBenchEnv(period=DAILY_2016, scoring=False, data=synthetic_data(30, seed=1), obs_keys=NO_CORR)
    assert set(lean.observation_space.spaces) == set(NO_CORR)  # gymnasium's Dict sorts its keys
    got = _rollout(lean, 20)
    assert calls == []  # a fresh dataset: nothing cached, and the correlation never asked for
    full = PortBenchEnv(period=DAILY_2016, scoring=False, data=synthetic_data(30, seed=1))
    want = _rollout(full, 20)
    assert calls  # the default observation does compute it
    assert len(got) == len(want) == 21
    for g, w in zip(got, want):
        assert tuple(g) == NO_CORR and tuple(w) == OBS_KEYS
        assert lean.observation_space.contains(g)
        for k in NO_CORR:
            np.testing.assert_array_equal(g[k], w[k])


def test_obs_keys_subset_in_canonical_order_and_checker(monkeypatch):
    env = PortBenchEnv(period="covid_2020", stagewise=True, obs_keys=["weights", "price", "corr"])
    assert set(env.observation_space.spaces) == {"price", "corr", "weights", "prompt"}
    obs, _ = env.reset(seed=0)
    assert tuple(obs) == ("price", "corr", "weights", "prompt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True, obs_keys=NO_CORR).unwrapped)
    assert [str(w.message) for w in caught] == []


def test_obs_keys_in_paper_mode():
    env = PortBenchEnv(period="covid_2020", fidelity="paper", obs_keys=NO_CORR)
    obs, _ = env.reset(seed=0)
    assert tuple(obs) == NO_CORR and env.observation_space.contains(obs)
    ref, _ = PortBenchEnv(period="covid_2020", fidelity="paper").reset(seed=0)
    for k in NO_CORR:
        np.testing.assert_array_equal(obs[k], ref[k])


@pytest.mark.parametrize("bad", [["corr", "prompt"], ["returns", "Corr"], "nav_"])
def test_obs_keys_unknown_is_a_one_line_error(bad):
    with pytest.raises(ValueError, match="obs_keys: unknown") as e:
        PortBenchEnv(period="covid_2020", obs_keys=bad)
    assert "\n" not in str(e.value)


def test_obs_keys_empty_is_the_prompt_alone_or_a_one_line_error():
    with pytest.raises(ValueError, match="observation would hold nothing") as e:
        PortBenchEnv(period="covid_2020", obs_keys=[])
    assert "\n" not in str(e.value)
    env = PortBenchEnv(period="covid_2020", obs_keys=[], text_obs=True)
    obs, _ = env.reset(seed=0)
    assert tuple(obs) == ("prompt",) and isinstance(obs["prompt"], str) and len(obs["prompt"]) > 100
    assert env.observation_space.contains(obs)


def test_check_obs_keys_is_the_one_validator():
    from quantgym.envs.portbench.observation import check_obs_keys

    assert check_obs_keys(None) == OBS_KEYS
    assert check_obs_keys(["nav", "corr"]) == ("corr", "nav")  # OBS_KEYS order
    assert check_obs_keys([], text_obs=True) == ()
    with pytest.raises(ValueError, match="would hold nothing"):
        check_obs_keys(())
    # stagewise episodes carry the prompt unless text_obs=False says otherwise
    PortBenchEnv(period="covid_2020", obs_keys=[], stagewise=True).close()
    with pytest.raises(ValueError, match="would hold nothing"):
        PortBenchEnv(period="covid_2020", obs_keys=[], stagewise=True, text_obs=False)


@pytest.mark.parametrize("shape", [(60, 1000), (60, 80), (5, 3), (61, 333), (1, 10)])
def test_window_statistics_compiled_are_the_numpy_bits(shape):
    rng = np.random.default_rng(shape[1])
    win = rng.normal(0.0, 0.02, shape)
    win[rng.uniform(size=shape) < 0.1] = np.nan
    win[:, :2] = np.nan
    win[:, -1] = -0.0
    got = market._window_stats(win)
    with np.errstate(all="ignore"):
        want = market._window_stats_numpy(win)
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("shape", [(0, 5), (1, 5), (2, 5), (60, 1), (3, 2), (60, 0)])
def test_degenerate_windows(shape):
    """No rows, one row, one column, no column: the same NaN rules as the full products."""
    x = np.random.default_rng(0).normal(size=shape)
    corr, obs = corr_and_obs(x)
    want = _reference(x) if shape[1] else np.empty((0, 0))
    _same(corr, want)
    _same(obs, obs_corr(want) if shape[1] else want)
