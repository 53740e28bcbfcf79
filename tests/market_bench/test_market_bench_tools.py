"""Market-Bench tool mode (docs/tools.md): peek, run_draft on a sample slice (output or error, never a reference
value or a score), submit on the attempt's path; budgets; failures recorded, never raised."""

from __future__ import annotations

import json
import pickle

import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.market_bench import env as env_module
from quantgym.envs.market_bench.agents import mutants_for, reference_source
from quantgym.envs.market_bench.config import METRIC_KEYS, MarketBenchSandboxLimits, MarketBenchToolConfig
from quantgym.envs.market_bench.env import MarketBenchEnv
from quantgym.evaluation import evaluate
from tests.tools.scripted import Scripted, call


def test_scripted_tool_policy_scores_as_the_same_text_attempts():
    params = MarketBenchEnv("scheduled", 2).round.params
    wrong, right = mutants_for("scheduled")[0].source(params), reference_source("scheduled", params)
    kw = dict(round=2, end_on_success=False, attempts=2)
    plain = evaluate("MarketBench-Scheduled-v0", Scripted([wrong, right]), **kw)
    tools = [call("peek", rows=3), call("run_draft", source=right), call("submit", source=wrong),
             call("submit", source=right)]
    used = evaluate("MarketBench-Scheduled-v0", Scripted(tools), tools=True, **kw)
    assert {k: used.metrics[k] for k in plain.metrics} == plain.metrics and used.metrics["correct"]
    assert used.metrics["tool_calls"] == 4 and used.metrics["draft_runs_used"] == 1
    strip = ("wall_seconds", "cpu_seconds")
    assert [{k: v for k, v in r.items() if k not in strip} for r in used.records] == \
        [{k: v for k, v in r.items() if k not in strip} for r in plain.records]
    assert [s["reward"] for s in used.steps] == [0.0, 0.0] + [s["reward"] for s in plain.steps]
    assert [s["tool"]["tool"] for s in used.steps] == ["peek", "run_draft", "submit", "submit"]
    assert all(s["tool"]["ok"] for s in used.steps)
    assert used.steps[2]["tool"]["content"].startswith("attempt 1 of 2: SUCCESS")
    assert used.steps[3]["tool"]["calls_left"] == 12  # an attempt starts a new stage
    assert "tools" in used.steps[2] and "tools" not in used.steps[1] and "tools" not in used.steps[3]


def test_peek_draft_and_the_observation(tmp_path):
    env = MarketBenchEnv("delta_hedge", 1, tools=True, workdir=tmp_path)
    obs, info = env.reset()
    assert [t["function"]["name"] for t in info["tools"]] == ["peek", "run_draft", "submit"] == env.toolbox.names
    assert info["tool_budget"]["drafts_left"] == 5 and env.tool_budget.calls == 12 and "## Tools" in obs["prompt"]
    obs, r, term, trunc, info = env.step(call("peek", file="option_delta.csv", rows=2))
    book = pd.read_csv(env._inputs["option_delta.csv"])
    assert obs["prompt"] == info["tool"]["content"] and (r, term, trunc) == (0.0, False, False)
    lines = obs["prompt"].splitlines()
    assert lines[0] == "ts_event,option_delta" and len(lines) == 4 and lines[-1] == f"(2 of {len(book)} rows shown)"
    assert obs["attempt"] == 0 and env.records == []
    src = reference_source("delta_hedge", env.round.params).replace(
        "def run_backtest(inputs):", "def run_backtest(inputs):\n    print('rows', sum(1 for _ in open(inputs['book.csv'])))")
    obs, r, term, _, info = env.step(call("run_draft", source=src))
    text = info["tool"]["content"]
    assert info["tool"]["ok"] and r == 0.0 and not term and obs["attempt"] == 0 and env.records == []
    assert "the first 300 of 692 rows of book.csv, option_delta.csv whole" in text
    assert "rows 301" in text  # what the draft printed: the header and the 300 sample rows
    assert f"returned {len(METRIC_KEYS['delta_hedge'])} of the" in text and "every metric key present" in text
    assert (tmp_path / "delta_hedge_round1" / "sample" / "book.csv").exists()
    assert env.episode_result()["tool_calls"][1]["tool"] == "run_draft"


def test_a_draft_is_never_scored_nor_compared_with_the_reference(monkeypatch):
    env = MarketBenchEnv("scheduled", 1, tools=True)
    env.reset()
    src = reference_source("scheduled", env.round.params)

    def refused(*a, **k):
        raise AssertionError("a draft reached the scorer")

    for name in ("metric_errors", "is_correct", "mae", "attempt_reward", "path_correlation"):
        monkeypatch.setattr(env_module, name, refused)
    obs, r, _, _, info = env.step(call("run_draft", source=src))
    assert info["tool"]["ok"] and r == 0.0 and not ({"mae", "status", "correct", "record"} & set(info))
    metrics = json.loads(info["tool"]["content"].splitlines()[2])
    ref = env.round.metrics
    assert set(metrics) == set(METRIC_KEYS["scheduled"]) and metrics != {k: ref[k] for k in metrics}
    for word in ("reference", "mae", "correct", "reward"):
        assert word not in info["tool"]["content"].lower()


def test_budgets_and_agent_errors_are_results_never_exceptions():
    env = MarketBenchEnv("scheduled", 1, tools=True,
                         tool_config=MarketBenchToolConfig(calls=6, chars=300, draft_runs=1, peek_rows=20))
    env.reset()
    r = env.step(call("peek", rows=20))[4]["tool"]
    assert r["ok"] and r["truncated"] > 0 and r["content"].endswith(f"[truncated: {r['truncated']} chars]")
    env = MarketBenchEnv("scheduled", 1, tools=True, tool_config={"calls": 7, "draft_runs": 1})
    env.reset()
    outcomes = [env.step(a)[4]["tool"] for a in (
        call("nope"), call("peek", rows="5"), call("peek", file="secret.csv"), call("peek", rows=51),
        call("run_draft", source="def run_backtest(inputs):\n    return 1/0\n"), call("run_draft", source="x = 1"),
        call("submit"))]
    assert [o["error"] for o in outcomes] == ["unknown_tool", "bad_arguments", "bad_arguments", "bad_arguments",
                                              "tool_error", "budget_exhausted", "bad_arguments"]
    assert "ZeroDivisionError: division by zero (line 2 of <backtester>, in run_backtest)" in outcomes[4]["content"]
    assert "draft budget exhausted (1 runs per episode)" in outcomes[5]["content"]
    assert all(o["content"].startswith("error: ") and "\n" not in o["content"] for o in outcomes)
    assert env.records == [] and env._attempt == 0
    for _ in range(3):
        env.step(call("peek"))
    r = env.step(call("peek"))[4]["tool"]
    assert r["error"] == "budget_exhausted" and "7 calls per stage" in r["content"]
    obs, reward, term, _, info = env.step(call("submit", source="x = 1"))  # never refused for the call budget
    assert info["tool"]["ok"] and info["status"] == "FAILED" and obs["attempt"] == 1 and not term
    assert info["tool"]["content"].startswith("attempt 1 of 3: FAILED") and info["tool"]["calls_left"] == 7
    m = env.episode_result()["metrics"]
    assert m["tool_calls"] == len(env.tool_calls) == 12 and m["draft_runs_used"] == 1
    assert m["tool_error_kinds"] == {"unknown_tool": 1, "bad_arguments": 4, "tool_error": 1, "budget_exhausted": 4}
    assert [c["attempt"] for c in env.tool_calls] == [0] * 11 + [0]


def test_a_hanging_draft_is_a_recorded_failure():
    env = MarketBenchEnv("scheduled", 1, tools=True, sandbox=MarketBenchSandboxLimits(cpu_seconds=2.0,
                                                                                      wall_seconds=8.0))
    env.reset()
    obs, r, term, trunc, info = env.step(call("run_draft", source="def run_backtest(inputs):\n    while True:\n"
                                                                   "        pass\n"))
    assert not info["tool"]["ok"] and info["tool"]["error"] == "tool_error" and "timeout" in info["tool"]["content"]
    assert (r, term, trunc) == (0.0, False, False) and info["tool_budget"]["drafts_left"] == 4
    assert env.tool_calls[-1]["ok"] is False and env.tool_calls[-1]["attempt"] == 0


def test_check_env_and_pickle_with_tools():
    env = MarketBenchEnv("scheduled", 1, attempts=2, tools=True)
    check_env(env, skip_render_check=True)
    env.reset()
    env.step(call("peek"))
    clone = pickle.loads(pickle.dumps(env))
    assert clone.toolbox.names == env.toolbox.names and clone._tools.env is clone
    clone.reset()
    assert clone.step(call("peek", rows=1))[4]["tool"]["ok"]


@pytest.mark.parametrize("action", [json.dumps(call("peek")), call("peek")])
def test_a_tool_call_as_dict_or_json_text(action):
    env = MarketBenchEnv("scheduled", 1, tools=True)
    env.reset()
    assert env.step(action)[4]["tool"]["ok"] and env._attempt == 0
