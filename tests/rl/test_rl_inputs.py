"""RL inputs refused in one line (Python: ValueError; CLI: exit 2) and what a saved SB3 model tells about itself."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from tests.rl import NEEDS_RL

pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
from stable_baselines3 import PPO  # noqa: E402

import quantgym  # noqa: E402,F401 - registers the ids
from quantgym.envs.portbench.allocation import AllocationWrapper, observation_bounds  # noqa: E402
from quantgym.envs.portbench.rl import load_sb3_agent, make_sb3_vec_env, train_sb3  # noqa: E402
from quantgym.envs.portbench.vector import PortBenchVectorEnv  # noqa: E402
from tests.test_cli_errors import run_bad  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV_ID = "PortBench-Balanced-v0"


class _Spaces(gym.Env):
    """Only the spaces of a PortBench allocation env (a model is saved untrained)."""

    def __init__(self, action_space: gym.Space):
        lo, hi = observation_bounds(80)
        self.observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, np.float32), 0.0, True, False, {}


def _saved_model(tmp_path, action_space) -> str:
    path = tmp_path / "model.zip"  # no rl_meta.json beside it
    PPO("MlpPolicy", _Spaces(action_space), n_steps=8, batch_size=8, policy_kwargs={"net_arch": [4]}).save(path)
    return str(path)


@pytest.mark.parametrize("low, mode", [(-1.0, "logits"), (0.0, "weights")])
def test_a_model_without_rl_meta_acts_in_the_mode_of_its_action_space(tmp_path, low, mode):
    agent = load_sb3_agent(_saved_model(tmp_path, spaces.Box(low, 1.0, (80,), np.float32)))
    assert agent.action_mode == mode
    env = agent.wrap_env(gym.make(ENV_ID, scoring=False, period="2020-03-01:2020-04-30:weekly"))
    assert env.action_space == agent.model.action_space  # the wrapper the model was trained on
    obs, _ = env.reset(seed=0)
    _, _, term, trunc, info = env.step(agent.act(obs, {}))
    assert not info.get("invalid") and not (term or trunc)


def test_a_model_in_no_portbench_action_space_is_refused_in_one_line(tmp_path):
    path = _saved_model(tmp_path, spaces.Box(-2.0, 2.0, (80,), np.float32))
    with pytest.raises(ValueError, match=r"neither PortBench action space") as exc:
        load_sb3_agent(path)
    assert "\n" not in str(exc.value) and path in str(exc.value)


@pytest.mark.parametrize("call, needle", [
    (lambda: PortBenchVectorEnv(0), "num_envs (parallel episodes) must be an integer >= 1, got 0"),
    (lambda: PortBenchVectorEnv(2, reward="risk_adjusted", risk_penalty=-0.5), "must be a finite number >= 0"),
    (lambda: make_sb3_vec_env(ENV_ID, 0), "n_envs (parallel episodes) must be an integer >= 1, got 0"),
    (lambda: make_sb3_vec_env(ENV_ID, 2, reward="ceps", risk_penalty=-1), "got -1"),
    (lambda: AllocationWrapper(gym.make(ENV_ID, scoring=False), risk_penalty=float("nan")), "got nan"),
    (lambda: train_sb3("ppo", ENV_ID, timesteps=8, n_envs=0), "n_envs"),
    (lambda: train_sb3("ppo", "PortBench-Foo-v0", timesteps=8), "'PortBench-Foo-v0' is not a PortBench allocation"),
    (lambda: train_sb3("ppo", ENV_ID, timesteps=8, algo_kwargs={"nosuch": 1}), "unexpected keyword argument 'nosuch'"),
])
def test_bad_rl_arguments_are_one_line_value_errors(call, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # train_sb3's default out_dir: nothing may be written
    with pytest.raises(ValueError) as exc:
        call()
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, needles", [
    (["--env", "PortBench-Foo-v0"], ["'PortBench-Foo-v0'", "PortBench-Balanced-v0"]),
    (["--algo-kwargs", "{n_steps: 8"], ["--algo-kwargs is not JSON", '{"n_steps": 128}']),
    (["--algo-kwargs", "[8]"], ["--algo-kwargs must be a JSON object"]),
    (["--algo-kwargs", '{"nosuch": 1}'], ["algo_kwargs", "'nosuch'"]),
    (["--n-envs", "0"], ["--n-envs must be an integer >= 1, got 0"]),
    (["--risk-penalty", "-1"], ["--risk-penalty", ">= 0", "got -1.0"]),
    (["--train-period", "2016"], ["--train-period must be START:END"]),
])
def test_train_cli_bad_inputs_are_one_line_exit_2(tmp_path, args, needles):
    run_bad(tmp_path, ["train", "--timesteps", "8", "--n-envs", "1", "--out", str(tmp_path / "t"), *args], *needles)
