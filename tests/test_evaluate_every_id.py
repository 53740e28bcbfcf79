"""One loop for every env: quantgym.evaluation.evaluate runs a whole episode of every registered id through
the Evaluable protocol (episode_result) with a policy that samples the action space: random allocations,
random text (scored failures) and random code alike end in an EvalResult, never an AttributeError."""

import pytest

from quantgym.evaluation import EvalResult, Evaluable, evaluate
from quantgym.tasks import env_ids, task_of


class Sampler:
    name = "sampler"

    def reset(self, env):
        self.space = env.action_space
        self.space.seed(0)

    def act(self, obs, info):
        return self.space.sample()


@pytest.mark.parametrize("env_id", env_ids())
def test_evaluate_runs_every_registered_id(env_id, tmp_path):
    import gymnasium as gym

    env = gym.make(env_id, **({"record_dir": str(tmp_path)} if env_id.startswith("QuantArena") else {}))
    res = evaluate(env, Sampler(), seed=0)
    # results.json's config.config is the env's own config (never an empty dict)
    assert res.config["config"] and res.config["config"] == env.unwrapped.config.to_dict()
    assert not hasattr(env.unwrapped, "cfg")
    assert isinstance(res, EvalResult)
    assert res.task == task_of(env_id).name
    assert res.env_id == env_id and res.agent == "sampler"
    assert res.steps and isinstance(res.metrics, dict) and res.metrics
    row = res.summary_row()
    assert row.task == res.task
    res.to_dict()  # JSON-able shape


def test_evaluate_refuses_an_env_without_the_protocol_in_one_line():
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    assert not isinstance(env.unwrapped, Evaluable)
    with pytest.raises(TypeError, match="does not implement episode_result"):
        evaluate(env, lambda obs, info: 0)
