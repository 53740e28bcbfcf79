"""``blind`` and ``tools`` are switches: ``"yes"`` or ``1`` is refused in one line, not read as true."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import quantgym  # noqa: F401  (registers the ids)


@pytest.mark.parametrize("env_id,kw", [("PortBench-Balanced-v0", {"stagewise": True}), ("QuantArena-v0", {}),
                                       ("PortBench-QA-v0", {})])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_blind_takes_a_bool_only(env_id, kw, value):
    with pytest.raises(ValueError, match=r"^blind must be True or False, got ") as e:
        gym.make(env_id, blind=value, **kw)
    assert "\n" not in str(e.value)


def test_portbench_tools_takes_a_bool_only_and_numpy_bools_pass():
    with pytest.raises(ValueError, match=r"^tools must be True or False, got 'maybe'$"):
        gym.make("PortBench-Balanced-v0", stagewise=True, tools="maybe")
    env = gym.make("PortBench-Balanced-v0", stagewise=True, blind=np.bool_(True))
    assert env.unwrapped.blind is True
