"""The Market-Bench prompt states both time limits: the CPU limit and the wall-clock
limit, which is the one that fires on a busy machine, in every prompt style."""

import gymnasium as gym
import pytest

import quantgym  # noqa: F401


@pytest.mark.parametrize("style", ["full", "compact", "minimal"])
def test_every_style_names_the_cpu_and_the_wall_limit(style):
    env = gym.make("MarketBench-Pairs-v0", round=1, prompt_style=style)
    obs, _ = env.reset(seed=0)
    cfg = env.unwrapped.sandbox_config
    p = obs["prompt"]
    assert f"{cfg.cpu_seconds:g} s" in p and f"{cfg.wall_seconds:g} s" in p, p[-600:]
    assert ("wall-clock" in p) or ("wall clock" in p) or ("wall " in p)
    env.close()
