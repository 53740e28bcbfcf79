"""Gymnasium's env checker is silent on the stagewise, allocation and tool-mode PortBench envs, and two resets with
the same seed return observations that share no memory (a step's date arrays are read-only views of the per-date
cache, docs/portbench.md)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids

MODES = {"stagewise": dict(stagewise=True), "allocation": dict(), "tools": dict(stagewise=True, tools=True)}


@pytest.mark.parametrize("mode", list(MODES))
def test_env_checker_is_silent_and_same_seed_resets_share_nothing(mode):
    env = gym.make("PortBench-Balanced-v0", period="covid_2020", **MODES[mode]).unwrapped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    arrays = [k for k, v in a.items() if isinstance(v, np.ndarray)]
    assert arrays and not any(np.shares_memory(a[k], b[k]) for k in arrays)
    assert all(a[k].flags.writeable for k in arrays)  # reset copies: the user may edit them
    steps = []
    for _ in range(2):  # the same first step after two same-seed resets
        env.reset(seed=3)
        env.action_space.seed(0)
        steps.append(env.step(env.action_space.sample())[0])
    shared = [k for k in arrays if np.shares_memory(steps[0][k], steps[1][k])]
    assert all(not steps[0][k].flags.writeable for k in shared)  # shared only as read-only views
