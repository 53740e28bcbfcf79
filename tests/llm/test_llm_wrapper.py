"""TextStageAction (spec portbench §11.5) on a real stagewise PortBench env, without any model."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from quantgym.envs.portbench.prompts import FORMAT_CORRECTION_SUFFIX
from quantgym.envs.portbench.text_protocol import TextStageAction

from . import pb_script as S

PERIOD = dict(start="2020-03-01", end="2020-03-31", freq="weekly")


@pytest.fixture
def env():
    e = TextStageAction(gym.make("PortBench-Balanced-v0", period=PERIOD, stagewise=True))
    yield e
    e.close()


def _req(prompt: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt}]}


def test_spaces_and_bad_construction():
    from quantgym.spaces import AnyText

    e = TextStageAction(gym.make("PortBench-Balanced-v0", period=PERIOD, stagewise=True))
    assert e.action_space == AnyText(65536)
    with pytest.raises(ValueError, match="stagewise"):
        TextStageAction(gym.make("PortBench-Balanced-v0", period=PERIOD))
    e.reset(seed=0)
    with pytest.raises(TypeError):
        e.step({"views": np.zeros(80)})


def test_valid_answers_score_like_the_array_protocol(env):
    obs, info = env.reset(seed=0)
    ans = S.valid(_req(obs["prompt"]))  # views = clip(R/10%) = the S1 truth up to the prompt's rounding
    obs, r, term, trunc, info = env.step(ans)
    assert info["text"]["status"] == "ok" and info["stage"] == "S2" and info["attempt"] == 1
    assert info["stage_scores"]["S1"] > 0.999
    assert "Your detected regime: high-volatility" in obs["prompt"]  # S1 notes reach the S2 prompt
    obs, r, term, trunc, info = env.step(S.valid(_req(obs["prompt"])))
    assert info["stage_scores"]["S2"] == 1.0
    obs, r, term, trunc, info = env.step(S.valid(_req(obs["prompt"])))
    assert info["text"]["stage"] == "S3" and int(obs["stage"]) == 0 and r == info["ceps"] > 0


def test_refusal_gives_fallback_and_zero_score(env):
    obs, info = env.reset(seed=0)
    obs, r, *_, info = env.step(S.REFUSAL)
    assert info["text"]["status"] == "refused" and info["refused"]
    assert info["stage_scores"]["S1"] == 0.0
    assert "Your detected regime: sideways" in obs["prompt"]
    assert np.all(obs["prev_views"] == 0)


def test_reask_does_not_advance_then_unparseable(env):
    obs0, info0 = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(S.GARBAGE)
    assert info["attempt"] == 1 and info["text"]["status"] == "retry" and r == 0.0 and not term
    assert obs["prompt"] == obs0["prompt"] + FORMAT_CORRECTION_SUFFIX
    assert info["date"] == info0["date"] and int(obs["stage"]) == 0
    obs, r, term, trunc, info = env.step(None)  # no answer (failed call) counts as a failed attempt
    assert info["attempt"] == 2 and info["text"]["error"].startswith("no answer")
    obs, r, term, trunc, info = env.step("still {not json")
    assert info["attempt"] == 3 and info["text"]["status"] == "unparseable" and info["unparseable"]
    assert info["text"]["answers"] == [S.GARBAGE, None, "still {not json"]
    assert info["stage_scores"]["S1"] == 0.0 and int(obs["stage"]) == 1


def test_coercions_are_recorded_and_zero_weights_invalid(env):
    obs, info = env.reset(seed=0)
    obs, *_, info = env.step(json.dumps({"SPY": 3.0, "TLT": "n/a"}))  # flat, clipped, non-numeric, missing
    cs = " | ".join(info["text"]["coercions"])
    assert "flat object" in cs and "clipped" in cs and "missing" in cs
    obs, *_, info = env.step(S.truncated(_req(obs["prompt"])))
    assert info["text"]["parse_method"] == "salvage"
    obs, r, *_, info = env.step(json.dumps({"weights": {"SPY": 0.0}}))
    assert info["text"]["status"] == "invalid" and "S3" in info["invalid"]
    assert info["stage_scores"]["S3"] == 0.0
