"""A host-side failure (quantgym's, not the submission's) gets its own status with the traceback and is never
scored against the agent: evaluate_submission returns status ``host_error``; the env
records the event and raises ArenaHostError instead of scoring the candidate 0."""

import gymnasium as gym
import pytest

import quantgym  # noqa: F401 - registers the ids
import quantgym.envs.quant_arena.executor as ex
from quantgym.envs.quant_arena.examples import example_source
from quantgym.envs.quant_arena.records import read_record

from .conftest import SMALL_WINDOWS


def _boom(*a, **k):
    raise OverflowError("payload too large to encode")


@pytest.mark.parametrize("where", ["build_payload", "_run_child"])
def test_host_failure_is_its_own_status_with_traceback(small_real, monkeypatch, where):
    monkeypatch.setattr(ex, where, _boom)
    res = ex.evaluate_submission(example_source("momentum_20d"), small_real, SMALL_WINDOWS["research_start"],
                                 SMALL_WINDOWS["research_end"], executor="inprocess")
    assert res.status == "host_error" and res.S == 0.0
    assert res.message.startswith("host error while") and "not the submission's" in res.message
    assert "OverflowError: payload too large to encode" in res.errors[0]["traceback"]
    assert "\n" not in res.message


def test_env_raises_and_records_instead_of_scoring(small_real, monkeypatch, tmp_path):
    env = gym.make("QuantArena-v0", data=small_real, record_dir=tmp_path, executor="inprocess", **SMALL_WINDOWS)
    env.reset(seed=0)
    monkeypatch.setattr(ex, "_run_child", _boom)
    with pytest.raises(ex.ArenaHostError, match="host error while running the sandbox"):
        env.step(example_source("momentum_20d"))
    ev = [e["event"] for e in read_record(env.unwrapped.record_path)]
    assert "host_error" in ev and "candidate" not in ev
    env.close()
