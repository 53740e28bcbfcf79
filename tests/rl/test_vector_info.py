"""The batched vector env's info in Gymnasium's vector convention (``info[key]`` over the envs, ``info["_" + key]``
the mask of the envs that set it): NAV and turnover equal the single env's, episode statistics at episode ends
as RecordEpisodeStatistics records them (under its own key, so that wrapper still applies)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.allocation import AllocationWrapper
from quantgym.envs.portbench.training import RandomPeriod
from quantgym.envs.portbench.vector import PortBenchVectorEnv

ENV_ID = "PortBench-Balanced-v0"


def test_vector_info_matches_single_envs_and_records_episodes():
    n, seed = 3, 11
    vec = PortBenchVectorEnv(n, train_windows=True, episode_len=6, action_mode="weights")
    singles = [AllocationWrapper(RandomPeriod(gym.make(ENV_ID, scoring=False), episode_len=6),
                                 action_mode="weights", reward="log_return") for _ in range(n)]
    _, info = vec.reset(seed=seed)
    navs = [e.reset(seed=seed + i)[1]["nav"] for i, e in enumerate(singles)]
    assert info["_nav"].all() and info["nav"] == pytest.approx(navs, rel=1e-12)
    rng = np.random.default_rng(seed)
    pending, ret, length, ends = [False] * n, np.zeros(n), np.zeros(n, int), 0
    for _ in range(20):
        act = rng.uniform(0, 1, (n, 80)).astype(np.float32)
        _, rv, tv, trv, info = vec.step(act)
        assert set(info) >= {"nav", "_nav", "turnover", "_turnover"} and info["_nav"].all()
        done = np.zeros(n, bool)
        for i, e in enumerate(singles):
            if pending[i]:  # next-step autoreset: no trade on this step
                _, si = e.reset()
                pending[i], ret[i], length[i] = False, 0.0, 0
                assert not info["_turnover"][i] and info["turnover"][i] == 0.0
            else:
                _, r, t, tr, si = e.step(act[i])
                pending[i] = done[i] = t or tr
                ret[i] += r
                length[i] += 1
                assert info["_turnover"][i] and info["turnover"][i] == pytest.approx(si["turnover"], rel=1e-12)
            assert info["nav"][i] == pytest.approx(si["nav"], rel=1e-12)
        np.testing.assert_array_equal(done, tv | trv)
        if done.any():
            ends += 1
            np.testing.assert_array_equal(info["_episode_stats"], done)
            ep = info["episode_stats"]
            assert set(ep) == {"r", "l", "t"}
            np.testing.assert_allclose(ep["r"], np.where(done, ret, 0.0), rtol=1e-9, atol=1e-15)
            np.testing.assert_array_equal(ep["l"], np.where(done, length, 0))
            assert (ep["t"][done] >= 0).all() and (ep["t"][~done] == 0).all()
        else:
            assert "episode_stats" not in info and "_episode_stats" not in info
    assert ends >= 2


def test_vector_info_arrays_are_new_every_call():
    vec = PortBenchVectorEnv(2, period="covid_2020")
    _, i0 = vec.reset(seed=0)
    _, _, _, _, i1 = vec.step(vec.action_space.sample())
    _, _, _, _, i2 = vec.step(vec.action_space.sample())
    for a in (i0, i1):
        for b in (i1, i2):
            if a is not b:
                assert not any(np.shares_memory(a[k], b[k]) for k in a if k in b)
    assert i1["nav"].dtype == np.float64 and i1["_turnover"].dtype == bool
