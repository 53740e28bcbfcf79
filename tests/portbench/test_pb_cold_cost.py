"""Cold cost of a PortBench step (issue #19 item 2): the compiled correlation finish is bit-identical to the
numpy formulation, and ``obs_keys`` leaves the (N, N) correlation out of the observation without
computing it, every other entry unchanged."""

import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401  (registers the ids)
from quantgym.envs.portbench import market
from quantgym.envs.portbench.env import OBS_KEYS, PortBenchEnv
from quantgym.envs.portbench.market import _corr_from_sums, _corr_from_sums_numpy, pairwise_corr

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_portbench_scaling import synthetic_data  # noqa: E402

NO_CORR = tuple(k for k in OBS_KEYS if k != "corr")


def _window(lookback: int, n: int, seed: int) -> np.ndarray:
    """Returns with the cases the finish treats apart: missing columns and cells, a zero variance, a
    single observation, a perfect negative correlation, values of very different scales."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(lookback, n)) * rng.uniform(1e-4, 0.05, n)
    x[:, rng.choice(n, max(1, n // 10), replace=False)] = np.nan
    x[rng.uniform(size=x.shape) < 0.05] = np.nan
    x[:, 1] = 0.01
    x[: lookback - 1, 2] = np.nan
    x[:, 3] = -2.0 * x[:, 4]
    return x


def _sums(x: np.ndarray):
    m = np.isfinite(x)
    mf = m.astype(np.float64)
    z = np.where(m, x, 0.0)
    return mf.T @ mf, z.T @ mf, (z * z).T @ mf, z.T @ z


@pytest.mark.parametrize("shape", [(60, 7), (60, 80), (25, 50), (60, 201)])
@pytest.mark.parametrize("seed", range(5))
def test_compiled_correlation_finish_is_bit_identical_to_numpy(shape, seed):
    x = _window(*shape, seed)
    want = _corr_from_sums_numpy(*_sums(x))
    got = _corr_from_sums(*_sums(x))
    np.testing.assert_array_equal(got, want)  # NaN in the same places, every other entry the same bits
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert np.isnan(want).any() and (want == 1.0).any()  # the edge cases are exercised


def test_interpreted_correlation_finish_is_the_compiled_one():
    """QUANTGYM_JIT=0 runs the numpy form; the kernel's own source, interpreted, gives the same bits."""
    x = _window(30, 12, 3)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        py = _corr_from_sums.py_func(*_sums(x))
    np.testing.assert_array_equal(py, _corr_from_sums_numpy(*_sums(x)))


def test_pairwise_corr_without_jit_is_the_same(monkeypatch):
    x = _window(60, 40, 1)
    want = pairwise_corr(x)
    monkeypatch.setenv("QUANTGYM_JIT", "0")
    np.testing.assert_array_equal(pairwise_corr(x), want)


DAILY_2016 = {"start": "2016-01-01", "end": "2016-03-31", "freq": "daily"}


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
    real = market.pairwise_corr
    monkeypatch.setattr(market, "pairwise_corr", lambda x: calls.append(1) or real(x))
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
