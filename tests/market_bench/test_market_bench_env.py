"""Market-Bench env end to end through the sandbox: reference agent, mutants, failure kinds, data door."""

import json
import re
import pickle

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from quantgym._util import unwrap_fence
from quantgym.envs import register_envs
from quantgym.envs.market_bench.agents import (MUTANTS, MutantAgent, ReferenceAgent, StubAgent, mutants_for,
                                               reference_source)
from quantgym.envs.market_bench.config import METRIC_KEYS, N_ROUNDS, STRATEGIES, TASK_SETS, MarketBenchSandboxLimits
from quantgym.envs.market_bench.env import InvalidActionError, MarketBenchEnv

from .market_bench_vectors import V1_BOOK, V1_C0, V1_SCHEDULE, V3_BOOK, V3_DELTA, V3_PARAMS

register_envs()
IDS = {"scheduled": "MarketBench-Scheduled-v0", "pairs": "MarketBench-Pairs-v0", "delta_hedge": "MarketBench-DeltaHedge-v0"}


def test_make_pairs_prompt_is_self_contained():
    env = gym.make("MarketBench-Pairs-v0", round=1)
    obs, info = env.reset(seed=0)
    p = obs["prompt"]
    assert "SYNTHETIC DATA" in p and "run_backtest(inputs: dict[str, str])" in p
    assert all(k in p for k in METRIC_KEYS["pairs"])
    paths = json.loads(obs["inputs_json"])
    assert set(paths) == {"book.csv"} and paths["book.csv"] in p
    with open(paths["book.csv"]) as fh:
        assert fh.readline().startswith("ts_event,symbol,bid_px_00,bid_sz_00,ask_px_00,ask_sz_00")
    assert info["meta"]["synthetic"] is True
    env.close()


@pytest.mark.parametrize("task_set", TASK_SETS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reference_perfect_and_mutants_wrong_round1(strategy, task_set):
    env = gym.make(IDS[strategy], round=1, task_set=task_set)
    obs, info = env.reset()
    assert info["task_version"] == task_set and env.unwrapped.config.task_set == task_set
    obs, reward, term, trunc, info = env.step(ReferenceAgent().act(obs))
    assert (info["status"], info["mae"], reward, term) == ("SUCCESS", 0.0, 1.0, True)
    assert info["correct"] is True and info["record"]["correct"] is True and info["record"]["first_correct"] == 1
    assert info["path_corr"] == pytest.approx(1.0) and info["record"]["first_attempt"] == 1
    for m in mutants_for(strategy):
        obs, _ = env.reset()
        obs, reward, term, _, info = env.step(MutantAgent(m).act(obs))
        assert info["status"] == "SUCCESS", (m.name, info["reason"])
        # LIFO equals FIFO on some rounds; round 1 separates every mutant from the reference
        assert info["mae"] > 1e-6, m.name
        # the paper still calls it solved; it is not correct, and its reward is < 0.5 (not 1.0)
        assert info["record"]["solved"] is True and info["correct"] is False and info["record"]["correct"] is False
        assert 0.0 <= reward < 0.5, (m.name, reward)
    env.close()


# the v1 rounds where LIFO equals FIFO (docs/market_bench.md): the lifo mutant's output is the right answer there
LIFO_EQUALS_FIFO = {("v1", 2), ("v1", 4), ("v1", 5)}


@pytest.mark.parametrize("task_set", TASK_SETS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("rnd", range(1, N_ROUNDS + 1))
def test_reference_exact_and_every_mutant_wrong_on_every_round(strategy, rnd, task_set):
    # the reference source scores MAE 0 on every round; every mutant is beyond the correctness tolerance
    # (run in-process: trusted sources; the sandboxed path is test_reference_perfect_and_mutants_wrong_round1)
    from quantgym.envs.market_bench.agents import trusted_maes

    res = trusted_maes(strategy, rnd, task_set)
    assert res.pop("reference") == {"mae": 0.0, "correct": True}
    assert set(res) == {m.name for m in mutants_for(strategy)}
    for name, r in res.items():
        if name == "lifo" and (task_set, rnd) in LIFO_EQUALS_FIFO:
            assert r["mae"] < 1e-9 and r["correct"], r
        else:
            assert r["mae"] > 1e-6 and not r["correct"], (name, r)


def test_make_v2_scheduled_runs_on_the_real_msft_hour():
    # gym.make("MarketBench-Scheduled-v0", task_set="v2") on real MSFT book data
    env = gym.make("MarketBench-Scheduled-v0", task_set="v2", round=5)
    obs, info = env.reset()
    with open(json.loads(obs["inputs_json"])["book.csv"]) as fh:
        n = sum(1 for _ in fh) - 1
    assert n == info["meta"]["n_rows"] == 105_464 and info["meta"]["window_local"] == ["09:30:00", "10:30:00"]
    assert "REAL DATA: MSFT (NASDAQ, LOBSTER, 2012-06-21)" in obs["prompt"]
    _, reward, _, _, info = env.step(ReferenceAgent().act(obs))
    assert (info["status"], info["mae"], info["correct"], reward) == ("SUCCESS", 0.0, True, 1.0)
    env.close()
    with pytest.raises(ValueError, match="unknown Market-Bench task set"):
        MarketBenchEnv("scheduled", 1, task_set="v9")


@pytest.mark.parametrize("strategy", ["pairs", "scheduled"])
def test_stub_answer_is_solved_but_not_correct(strategy):
    # fresh-user finding: a stub returning zeros is SUCCESS / solved under the paper's pass@k (kept),
    # but it is not correct and its reward is ~0 (0.5*exp(-mean_clipped_rel/0.1), mean_clipped_rel ~0.9)
    env = MarketBenchEnv(strategy, 1, attempts=1)
    obs, _ = env.reset()
    _, reward, term, _, info = env.step(StubAgent().act(obs))
    assert info["status"] == "SUCCESS" and info["record"]["solved"] is True and info["mae"] > 1000
    assert info["correct"] is False and info["record"]["correct"] is False and term
    assert 0.5 < info["mean_rel_error"] <= 1.0
    assert reward == pytest.approx(0.5 * np.exp(-info["mean_rel_error"] / 0.1)) and reward < 1e-2
    env.close()


def test_markdown_fenced_reply_is_stripped_and_runs():
    env = MarketBenchEnv("delta_hedge", 1, attempts=2)
    obs, _ = env.reset()
    src = ReferenceAgent().act(obs)
    _, reward, term, _, info = env.step(f"```python\n{src}\n```\n")
    assert info["status"] == "SUCCESS" and info["fence_stripped"] is True and info["correct"] is True
    assert reward == 1.0 and term
    obs, _ = env.reset()
    _, _, _, _, info = env.step(src)
    assert info["fence_stripped"] is False and info["correct"] is True
    env.close()


def test_unwrap_fence_rules():
    assert unwrap_fence("```python\nx = 1\n```") == ("x = 1\n", True)
    assert unwrap_fence("  ```\nx = 1\n```  \n") == ("x = 1\n", True)  # no language tag, outer blanks
    assert unwrap_fence("```py\r\nx = 1\r\n```") == ("x = 1\n", True)
    # only one surrounding fence: an inner fence inside a string literal is kept
    inner = 'x = """\n```\nin\n```\n"""'
    assert unwrap_fence(f"```python\n{inner}\n```") == (inner + "\n", True)
    # not a single fenced block: unchanged
    for text in ("x = 1\n", "Here it is:\n```python\nx = 1\n```", "```python\nx = 1\n```\nThanks", "```x = 1```"):
        assert unwrap_fence(text) == (text, False)


def test_every_mutant_pattern_applies_once(tmp_path):
    for m in MUTANTS:
        src = m.source({"c0": 1.0})
        assert "MUTANT" in src and src != reference_source(m.strategy, {"c0": 1.0})
    from quantgym.envs.market_bench.agents import write_mutant_sources

    files = write_mutant_sources(tmp_path)
    assert len(files) == 3 + len(MUTANTS)
    for f in files:  # every written source compiles and defines the entry point
        code = f.read_text()
        compile(code, str(f), "exec")
        assert "def run_backtest(inputs):" in code
        assert not re.search(r"^\s*(from|import)\s+quantgym", code, re.M)  # self-contained


def test_failure_kinds_are_failed_attempts_never_crashes():
    keys = METRIC_KEYS["scheduled"]
    good = "{" + ", ".join(f"'{k}': 1.0" for k in keys) + "}"
    cases = {
        "syntax": ("def run_backtest(inputs):\n  return {", "error", "SyntaxError"),
        "raises": ("def run_backtest(inputs):\n    raise ValueError('boom')\n", "error", "boom"),
        "not a dict": ("def run_backtest(inputs):\n    return 'garbage'\n", "bad_output", "expected a dict"),
        "missing metric": (f"def run_backtest(inputs):\n    d = {good}\n    del d['n_fills']\n    return d\n", "ok",
                           "missing metric(s): n_fills"),
        "nan": (f"def run_backtest(inputs):\n    d = {good}\n    d['final_cash'] = float('nan')\n    return d\n", "ok",
                "not finite"),
        "forbidden import": ("import socket\ndef run_backtest(inputs):\n    return {}\n", "forbidden", "socket"),
        "writes a file": ("def run_backtest(inputs):\n    open('mb_out.txt', 'w').write('x')\n    return {}\n",
                          "forbidden", "writing"),
        "hangs": ("def run_backtest(inputs):\n    while True:\n        pass\n", "timeout", "CPU-time limit"),
        "memory": ("import numpy as np\ndef run_backtest(inputs):\n    return np.ones(10**10)\n", "memory", "memory"),
    }
    env = MarketBenchEnv("scheduled", 1, attempts=len(cases), feedback=True,
                         sandbox=MarketBenchSandboxLimits(cpu_seconds=1, wall_seconds=30, memory_mb=2048))
    env.reset()
    for i, (name, (src, sandbox_status, text)) in enumerate(cases.items(), 1):
        obs, reward, term, trunc, info = env.step(src)
        assert info["status"] == "FAILED" and reward == 0.0 and info["mae"] is None, name
        assert info["sandbox_status"] == sandbox_status, (name, info["reason"])
        assert text in info["reason"], (name, info["reason"])
        assert obs["feedback"].startswith("FAILED") and obs["last_status"] == "FAILED"
        assert term == (i == len(cases))
    assert info["record"]["solved"] is False and info["record"]["attempts_used"] == len(cases)
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("x = 1")
    # a non-str action is a caller bug: a clear ValueError naming the expected type, no attempt used
    env.reset()
    for bad in (12345, b"def run_backtest(inputs): pass", {"source": "x"}, None):
        with pytest.raises(ValueError, match=r"action must be a str \(the Python source"):
            env.step(bad)
    with pytest.raises(TypeError):  # InvalidActionError is also a TypeError
        env.step(1.5)
    assert issubclass(InvalidActionError, ValueError) and env._attempt == 0
    env.close()


def test_user_data_door_with_hand_books():
    # spec §9.16 V1 book through data=: the reference reproduces the hand-worked cash 11,989.04
    env = MarketBenchEnv("scheduled", data={"book": V1_BOOK, "schedule": V1_SCHEDULE, "params": {"c0": V1_C0}})
    assert env.round.metrics["final_cash"] == pytest.approx(11_989.04)
    obs, _ = env.reset()
    assert obs["round"] == 0 and "user-supplied" in obs["prompt"]
    _, _, term, _, info = env.step(ReferenceAgent().act(obs))
    assert info["status"] == "SUCCESS" and info["mae"] == 0.0 and term
    env.close()
    env3 = MarketBenchEnv("delta_hedge", data={"book": V3_BOOK, "option_delta": V3_DELTA, "params": V3_PARAMS})
    assert env3.round.metrics["final_equity"] == pytest.approx(100_010.50)
    with pytest.raises(ValueError, match="needs 'option_delta'"):
        MarketBenchEnv("delta_hedge", data={"book": V3_BOOK, "params": V3_PARAMS})
    two = pd.concat([V1_BOOK, V1_BOOK.assign(symbol="OTHER", ts_event=V1_BOOK["ts_event"] + 1)]).sort_values("ts_event")
    with pytest.raises(ValueError, match="exactly one symbol"):
        MarketBenchEnv("scheduled", data={"book": two, "schedule": V1_SCHEDULE, "params": {"c0": V1_C0}})
    with pytest.raises(ValueError, match="sorted"):
        MarketBenchEnv("scheduled", data={"book": V1_BOOK.iloc[::-1], "schedule": V1_SCHEDULE, "params": {"c0": V1_C0}})
    with pytest.raises(ValueError, match="do not fit"):
        MarketBenchEnv("scheduled", data={"book": V1_BOOK, "schedule": V1_SCHEDULE, "params": {"cash": 1}})


def test_bad_kwargs_are_clear_errors():
    with pytest.raises(ValueError, match="round must be"):
        MarketBenchEnv("pairs", round=6)
    with pytest.raises(ValueError, match="unknown strategy"):
        MarketBenchEnv("momentum", round=1)
    with pytest.raises(ValueError, match="attempts"):
        MarketBenchEnv("pairs", round=1, attempts=0)


def test_env_checker_pickle_and_determinism():
    from gymnasium.utils.env_checker import check_env

    env = MarketBenchEnv("delta_hedge", 2, attempts=2)
    check_env(env, skip_render_check=True)
    o1, _ = env.reset(seed=1)
    clone = pickle.loads(pickle.dumps(env))
    o2, _ = clone.reset(seed=2)
    # the round is fixed by (version, strategy, round); only the copy's own input folder differs
    assert o1["prompt"].replace(str(env.workdir), "W") == o2["prompt"].replace(str(clone.workdir), "W")
    assert o1["params_json"] == o2["params_json"] and clone.workdir != env.workdir
    for e in (env, clone):
        folder = e.workdir
        e.close()
        assert not folder.exists()  # close() removes the env's temporary input folder


def test_config_and_kwarg_shortcuts_give_identical_episodes():
    """``config=MarketBenchConfig(...)`` is the composed form; the six kwargs are shortcuts into it."""
    from quantgym.envs.market_bench.config import MarketBenchConfig, MarketBenchScoringConfig

    kw = dict(feedback=True, end_on_success=False, prompt_style="compact",
              sandbox=MarketBenchSandboxLimits(cpu_seconds=60.0), scoring=MarketBenchScoringConfig(correct_atol=1e-3))
    composed = MarketBenchConfig(**{**kw, "scoring": MarketBenchScoringConfig(correct_atol=1e-3, attempts=2)})
    envs = [MarketBenchEnv("scheduled", 1, attempts=2, **kw), MarketBenchEnv("scheduled", 1, config=composed)]
    assert envs[0].config == envs[1].config == composed
    # K has one place, scoring.attempts: the attempts alias sets it, the episode length follows it
    one = MarketBenchEnv("scheduled", 1, config=composed, attempts=1)
    assert one.config.scoring.attempts == one.attempts == 1 and not hasattr(one.config, "attempts")
    assert MarketBenchEnv("scheduled", 1, config=composed).attempts == 2

    def norm(env, x):
        return json.loads(json.dumps(x, default=str).replace(str(env.workdir), "<workdir>"))

    first = [e.reset()[0] for e in envs]
    assert norm(envs[0], first[0]) == norm(envs[1], first[1])
    for action in (StubAgent().act(first[0]), ReferenceAgent().act(first[0])):
        steps = []
        for e in envs:
            o, r, t, u, info = e.step(action)
            steps.append((norm(e, o), r, t, u, info["status"], info["correct"]))
        assert steps[0] == steps[1]
    for e in envs:
        e.close()


def test_a_rejected_equity_curve_is_noted_not_silently_absent():
    # a returned path that cannot be compared must not look the same as no path at all
    from quantgym.envs.market_bench.harness import ENTRY_POINT

    env = MarketBenchEnv("delta_hedge", 1, attempts=2)
    obs, _ = env.reset()
    src = ReferenceAgent().act(obs) + (f"\n_orig = {ENTRY_POINT}\ndef {ENTRY_POINT}(inputs):\n    out = _orig(inputs)\n"
                                       "    out['equity_curve'] = ['a', 'b']\n    return out\n")
    _, _, _, _, info = env.step(src)
    assert info["status"] == "SUCCESS" and info["path_corr"] is None
    assert info["path_note"].startswith("equity_curve ignored: not a float array"), info["path_note"]
    obs, _ = env.reset()
    _, _, _, _, info = env.step(ReferenceAgent().act(obs))
    assert info["path_note"] is None and info["path_corr"] is not None
    env.close()
