"""ToolUsingAllocation: an RL policy on PortBench's tool interface (docs/tools.md, "RL policies on the tool
interface"): the checkers, the same actions as a scripted policy, recorded calls and errors, blind mode, and a
short seeded PPO run (examples/rl_tools.py)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.config import PortBenchToolsConfig
from quantgym.envs.portbench.rl import ToolUsingAllocation
from quantgym.envs.portbench.rl.tools import MENU
from quantgym.evaluation import evaluate
from tests.rl import NEEDS_RL
from tests.tools.scripted import Scripted

ENV_ID = "PortBench-Balanced-v0"
PERIOD = {"start": "2020-02-03", "end": "2020-03-06", "freq": "weekly"}  # 5 weekly decisions
ROOT = Path(__file__).resolve().parents[2]


def _env(**kw):
    windows = kw.pop("windows", None)
    env = gym.make(ENV_ID, **{"period": PERIOD, "stagewise": True, "tools": True, **kw})
    return ToolUsingAllocation(env) if windows is None else ToolUsingAllocation(env, windows=windows)


def _play(env, seed: int = 0, call_bias: float = 0.3):
    """One episode of seeded random Box actions: (the env actions sent, rewards, last info)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=0)
    sent, rewards, done, info = [], [], False, {}
    while not done:
        a = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        a[0] = np.clip(a[0] + call_bias, -1, 1)
        obs, r, term, trunc, info = env.step(a)
        assert env.observation_space.contains(obs)
        sent.append(env.last_env_action)
        rewards.append(r)
        done = term or trunc
    return sent, rewards, info


def test_gymnasium_and_sb3_checkers_pass():
    env = _env()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    # gymnasium's one note on any wrapper ("it likely has a wrapper applied to it") is the only warning
    assert [str(w.message) for w in caught if "wrapper applied" not in str(w.message)] == []
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason=NEEDS_RL)
    sb3_checker.check_env(_env(), warn=True)
    assert env.action_space.shape == (81,) and env.observation_space.shape == (8 * 80 + 50,)
    with pytest.raises(ValueError, match="tool mode"):
        ToolUsingAllocation(gym.make(ENV_ID, period=PERIOD, stagewise=True))


def test_a_scripted_policy_sending_the_same_actions_gets_the_same_scores_nav_and_records():
    env = _env()
    sent, rewards, info = _play(env)
    assert sent[0] == {"tool": "asset_stats", "arguments": {"assets": [], "window": 20}}
    assert {a["tool"] for a in sent if "tool" in a} >= {"asset_stats", "macro_series"}
    base = env.unwrapped
    calls = [a for a in sent if "tool" in a]
    assert len(base.tool_calls) == len(calls) == info["tool_use"]["calls"] > 0
    assert [c["tool"] for c in base.tool_calls] == [a["tool"] for a in calls]
    assert info["episode_metrics"]["tool_calls"] == len(calls) and info["tool_use"]["errors"] == 0
    res = evaluate(gym.make(ENV_ID, period=PERIOD, stagewise=True, tools=True), Scripted(sent), seed=0)
    assert [s["reward"] for s in res.steps] == rewards
    m = info["episode_metrics"]
    assert (res.metrics["ceps"], res.metrics["final_nav"], res.metrics["tool_calls"]) == (
        m["ceps"], m["final_nav"], m["tool_calls"])
    assert [s["tool"]["content"] for s in res.steps if "tool" in s] == [c["content"] for c in base.tool_calls]


def test_the_observation_is_what_the_tool_results_say():
    """After the whole menu: the 60-day slots are the snapshot's trailing returns and the weights the drifted
    ones (to the results' printed precision); every entry fetched, the budget left as the env states it."""
    env = _env()
    env.reset(seed=0)
    call = np.ones(81, np.float32)
    for _ in MENU:
        obs, r, *_, info = env.step(call)
        assert r == 0.0 and "tool" in info
    lay, snap = env.layout, env.unwrapped.snapshot
    avail = snap.available
    np.testing.assert_allclose(obs[lay["return_1"]][avail], np.clip(snap.trailing_return[avail], -1, 10), atol=6e-5)
    np.testing.assert_allclose(obs[lay["weights"]], snap.current_weights, atol=6e-5)
    assert obs[lay["fetched"]].tolist() == [1.0] * 5 == obs[lay["spent"]].tolist()
    assert obs[lay["macro_mask"]].sum() >= 15 and obs[lay["stage"]].tolist() == [1.0, 0.0, 0.0]
    assert obs[lay["budget"]][0] == pytest.approx(info["tool"]["calls_left"] / 8)
    assert env.env_action(call)[1] is None  # the menu is spent: a call action answers
    obs, *_ = env.step(-call)  # S1 answered: S2 with a fresh budget, the decision's data kept
    assert obs[lay["stage"]].tolist() == [0.0, 1.0, 0.0] and obs[lay["budget"]].tolist() == [1.0, 1.0]
    assert obs[lay["fetched"]].sum() == 5
    for _ in range(2):
        obs, *_ = env.step(-call)
    assert obs[lay["fetched"]].sum() == 0 and obs[lay["return_1"]].sum() == 0  # the next decision


def test_errors_and_budget_exhaustion_are_the_envs_recorded_results():
    env = _env(windows=(20, 5000), tool_config=PortBenchToolsConfig(calls=2))
    env.reset(seed=0)
    call = np.ones(81, np.float32)
    kinds = []
    for _ in range(3):
        obs, *_, info = env.step(call)
        kinds.append(info["tool"]["error"])
    assert kinds == [None, "bad_arguments", "budget_exhausted"]
    assert info["tool_use"] == {"calls": 3, "errors": 2, "error_kinds": {"bad_arguments": 1, "budget_exhausted": 1}}
    lay = env.layout
    assert obs[lay["fetched"]].tolist() == [1, 0, 0, 0] and obs[lay["spent"]].tolist() == [1, 1, 1, 0]
    assert [c["error"] for c in env.unwrapped.tool_calls] == kinds


def test_blind_mode_through_the_wrapper():
    named, blind = _env(), _env(blind=True)
    sent_n, rew_n, info_n = _play(named, seed=3)
    sent_b, rew_b, info_b = _play(blind, seed=3)
    assert rew_b == rew_n and info_b["nav"] == info_n["nav"]  # blind scores and simulation are named mode's
    contents = [c["content"] for c in blind.unwrapped.tool_calls]
    assert contents and not any("SPY" in c or "2020-" in c for c in contents)
    assert any("SPY" in c for c in (c["content"] for c in named.unwrapped.tool_calls))
    last = {}
    for env in (named, blind):  # the asset slots of the blind results are named mode's (universe order)
        env.reset(seed=0)
        for _ in MENU:
            last[env] = env.step(np.ones(81, np.float32))[0]
    lay = named.layout
    for key in ("return_0", "vol_1", "return_2", "weights"):
        np.testing.assert_array_equal(last[named][lay[key]], last[blind][lay[key]])
    assert last[blind][lay["macro_mask"]].sum() >= 15


def test_short_ppo_run_trains_evaluates_and_reproduces():
    pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
    spec = importlib.util.spec_from_file_location("rl_tools_example", ROOT / "examples" / "rl_tools.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    runs = [example.main(timesteps=256, seed=0, verbose=False) for _ in range(2)]
    for label in ("mean action", "sampled"):
        a, b = (r[label] for r in runs)
        assert [s["reward"] for s in a["result"].steps] == [s["reward"] for s in b["result"].steps]
        assert a["result"].metrics["final_nav"] == b["result"].metrics["final_nav"]
        assert a["per_stage"] == b["per_stage"]
    sampled = runs[0]["sampled"]
    assert sum(sampled["per_stage"].values()) == sampled["result"].metrics["tool_calls"] > 0
    steps = sampled["result"].steps
    assert all(s["tool"]["tool"] in {c["tool"] for c in MENU} for s in steps if "tool" in s)


def test_cli_train_tools_trains_on_the_tool_interface_and_loads_as_a_tool_policy(tmp_path):
    """``quantgym train --tools``: tool-mode training envs, rl_meta.json says so, ``sb3:DIR`` evaluates the model
    through the tools again; a batched or risk_adjusted tool run is one line, exit 2."""
    typer_testing = pytest.importorskip("typer.testing")
    pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
    from quantgym.cli import app
    from quantgym.envs.portbench.rl import load_sb3_agent
    from quantgym.envs.portbench.rl.tools import ToolPolicy

    res = typer_testing.CliRunner().invoke(app, [
        "train", "--tools", "--algo", "ppo", "--timesteps", "128", "--seed", "1", "--out", str(tmp_path),
        "--n-envs", "2", "--episode-len", "3", "--eval-periods", "covid_2020", "--algo-kwargs",
        '{"n_steps": 64, "batch_size": 64, "n_epochs": 1}'])
    assert res.exit_code == 0, res.output
    assert "SB3-PPO-tools" in res.output and "covid_2020" in res.output
    policy = load_sb3_agent(str(tmp_path))
    assert isinstance(policy, ToolPolicy) and policy.name == "SB3-PPO-tools"
    ev = evaluate(ENV_ID, policy, seed=0, period=PERIOD)
    assert ev.metrics["tool_errors"] == 0 and ev.metrics["n_rebalances"] >= 1
    bad = typer_testing.CliRunner().invoke(app, ["train", "--tools", "--reward", "risk_adjusted", "--out",
                                                 str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "tools=True" in bad.output
