"""End to end through the real openai client and a local server: one PortBench stagewise episode, one
Quant-Arena research run with a freeze, one Market-Bench round with 3 attempts; each replayed offline
(server stopped) to identical env results."""

from __future__ import annotations

import json

import gymnasium as gym
import pandas as pd
import pytest

from quantgym.evaluation import evaluate
from quantgym.agents.llm import make_openai_agent, make_replay_agent
from quantgym.agents.llm.client import read_transcript
from quantgym.results import to_jsonable

from . import pb_script as S
from .server import fast_options

PERIOD = dict(start="2020-03-01", end="2020-03-31", freq="weekly")


def _canon(x) -> str:
    return json.dumps(to_jsonable(x), sort_keys=True)


def test_portbench_episode_and_replay(server_no_rf, tmp_path):
    srv = server_no_rf  # no response_format support: detected once, then text parsing
    srv.responder = S.valid
    srv.script(S.valid, S.fenced, S.truncated,                        # 1st date
               S.REFUSAL, "", S.valid, S.GARBAGE, S.valid,             # 2nd: refusal; empty -> extra call; re-ask
               {"status": 429, "message": "slow down"}, S.valid,       # 3rd: 429 then success
               {"delay": 2.0, "content": "late"}, S.valid, S.valid,    #      timeout then success
               S.GARBAGE, S.GARBAGE, S.GARBAGE)                        # 4th: S1 unparseable after 3 attempts
    agent = make_openai_agent("test-model", task="portbench", **fast_options(srv, tmp_path, "pb", timeout=0.8))
    assert agent.env_kwargs == {"stagewise": True}
    res = evaluate("PortBench-Balanced-v0", agent, period=PERIOD)
    texts = [s["text"] for s in res.steps]
    assert [t["status"] for t in texts] == ["ok", "ok", "ok", "refused", "ok", "retry", "ok", "ok", "ok", "ok",
                                            "retry", "retry", "unparseable", "ok", "ok"]
    assert texts[2]["parse_method"] == "salvage" and texts[1]["parse_method"] == "balanced"
    assert res.metrics["refused_steps"] == 1 and res.metrics["n_rebalances"] == 4
    assert res.steps[0]["stage_scores"]["S1"] > 0.999  # the scripted views are the truth
    log = agent.logs[agent.current_episode]
    assert sum(1 for r in log if r.get("extra_call")) == 1
    u = agent.episode_usage()
    # 3 requests for the ladder's refused rungs (json_schema, json_object + schema, json_object), then text
    assert u["calls"] == 19 and u["failures"] == 0 and u["adaptations"] == 3 and u["total_tokens"] > 0
    header, calls = read_transcript(tmp_path / "pb.jsonl")
    assert header["task"] == "portbench" and len(calls) == 19
    assert [c["error_kind"] for c in calls[:4]] == ["unsupported"] * 3 + [None]
    srv.stop()
    replay = make_replay_agent(str(tmp_path / "pb.jsonl"), task="portbench")
    res2 = evaluate("PortBench-Balanced-v0", replay, period=PERIOD)
    assert replay.name == agent.name
    assert _canon(res.to_dict()) == _canon(res2.to_dict())


@pytest.fixture(scope="module")
def qa_small():
    """40 real stocks, 2023-09 .. 2024-02 (research Nov-Dec 2023, sealed Jan-Feb 2024)."""
    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset

    full = load_dataset()
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[::20][:40]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2023-09-01").date())
            & (df["date"] <= pd.Timestamp("2024-02-29").date())]
    return ArenaDataset.from_frame(df.reset_index(drop=True), info=full.info.reset_index(), name="small-real")


QA_WINDOWS = dict(research_start="2023-11-01", research_end="2023-12-31", sealed_start="2024-01-01",
                  sealed_end="2024-02-29", warmup_start="2023-09-01")
BUGGY = ("Lower volatility might work better:\n```python\nimport numpy as np\nFEATURES = ['x']\n\n"
         "def compute_features(view):\n    raise ValueError('bug in my feature')\n\n"
         "def score(features, view):\n    return features['x']\n```")


def _qa_episode(agent, ds):
    env = gym.make("QuantArena-v0", data=ds, record_dir=False, **QA_WINDOWS)
    try:
        obs, info = env.reset(seed=0)
        agent.reset(env)
        trace, done = [], False
        while not done:
            act = agent.act(obs, info)
            obs, r, done, _, info = env.step(act)
            trace.append((act, r, obs))
        return trace, info
    finally:
        env.close()


def test_quant_arena_research_freeze_and_replay(server, tmp_path, qa_small):
    from quantgym.envs.quant_arena.examples import example_source

    server.script("Momentum first.\n```python\n" + example_source("momentum_20d") + "```\n", BUGGY,
                  "Candidate 1 was better.\nFREEZE 1")
    agent = make_openai_agent("test-model", task="quant_arena", **fast_options(server, tmp_path, "qa"))
    trace, final = _qa_episode(agent, qa_small)
    assert [type(a).__name__ for a, _, _ in trace] == ["str", "str", "dict"]
    assert trace[-1][0] == {"freeze": 1} and final["frozen_candidate"] == 1
    fb2 = json.loads(trace[1][2])
    assert fb2["status"] != "ok" and "bug in my feature" in json.dumps(fb2["errors"])
    assert final["status_research"] == "ok" and final["S"] == trace[-1][1] > 0
    # the model saw the feedback of each candidate in its conversation
    last_req = server.requests[-1]["messages"]
    assert "bug in my feature" in last_req[-1]["content"] and len(last_req) == 6
    server.stop()
    replay = make_replay_agent(str(tmp_path / "qa.jsonl"), task="quant_arena")
    trace2, final2 = _qa_episode(replay, qa_small)
    assert _canon(trace) == _canon(trace2) and _canon(final) == _canon(final2)


def _mb_episode(agent, feedback=False):
    env = gym.make("MarketBench-Scheduled-v0", round=1, attempts=3, feedback=feedback)
    try:
        obs, info = env.reset(seed=0)
        agent.reset(env)
        done = False
        while not done:
            obs, r, done, _, info = env.step(agent.act(obs, info))
        return [{k: v for k, v in r.items() if k not in ("wall_seconds", "cpu_seconds")}
                for r in env.unwrapped.records], info["record"]
    finally:
        env.close()


def test_market_bench_three_attempts_reference_scores_mae_zero_and_replay(server, tmp_path):
    from quantgym.envs.market_bench.agents import reference_source
    from quantgym.envs.market_bench.rounds import load_round

    ref = reference_source("scheduled", load_round("scheduled", 1).params)
    server.script("I would walk the book level by level and charge the spread.",
                  "```python\ndef run_backtest(inputs):\n    raise KeyError('book.csv')\n```",
                  "Here is the backtester:\n```python\n" + ref + "```\n")
    agent = make_openai_agent("test-model", task="market_bench", **fast_options(server, tmp_path, "mb"))
    recs, rr = _mb_episode(agent)
    assert [r["status"] for r in recs] == ["FAILED", "FAILED", "SUCCESS"]
    assert "no code from the model" in recs[0]["reason"] and "KeyError" in recs[1]["reason"]
    assert recs[2]["mae"] == 0.0 and rr["solved"] and rr["first_attempt"] == 3
    # independent attempts: every request is the same fresh two-message conversation
    assert [len(r["messages"]) for r in server.requests] == [2, 2, 2]
    server.stop()
    replay = make_replay_agent(str(tmp_path / "mb.jsonl"), task="market_bench")
    assert _canon(_mb_episode(replay)) == _canon((recs, rr))


def test_market_bench_repair_mode_sends_the_trace(server, tmp_path):
    from quantgym.envs.market_bench.agents import reference_source
    from quantgym.envs.market_bench.rounds import load_round

    ref = reference_source("scheduled", load_round("scheduled", 1).params)
    server.script("```python\ndef run_backtest(inputs):\n    raise KeyError('book.csv')\n```",
                  "```python\n" + ref + "```")
    agent = make_openai_agent("test-model", task="market_bench", **fast_options(server, tmp_path, "mbr"))
    recs, rr = _mb_episode(agent, feedback=True)
    assert [r["status"] for r in recs] == ["FAILED", "SUCCESS"] and recs[1]["mae"] == 0.0
    second = server.requests[1]["messages"]
    assert len(second) == 4 and "KeyError" in second[-1]["content"]


def test_quant_arena_oneshot_through_the_eval_runner(server, tmp_path, qa_small, monkeypatch):
    from quantgym.agents.registry import make_eval_agents
    from quantgym.evaluation import EvalPlan, run_eval
    from quantgym.envs.quant_arena.examples import example_source

    server.script("```python\n" + example_source("low_volatility") + "```")
    plan = EvalPlan(env_ids=["QuantArena-OneShot-v0"], env_kwargs={"data": qa_small, **QA_WINDOWS}, plots=False)
    out = tmp_path / "out"
    agents, _ = make_eval_agents("openai:test-model", plan, out, {"base_url": server.base_url, "api_key": "test-key"})
    sections = run_eval(agents, plan, out, own_agents=True)
    (sec,) = sections
    run = sec.runs[0]
    assert run["final"]["status_research"] == "ok" and run["final"]["frozen_candidate"] == 1
    assert run["feedback"] == [] and len(server.requests) == 1  # one-shot: no feedback, one call
    assert "One-shot track" in server.requests[0]["messages"][1]["content"]
    assert sec.rows[0].task == "quant_arena" and sec.rows[0].sharpe is not None
    assert run["usage"]["calls"] == 1 and (out / "summary.csv").exists()
    doc = json.loads((out / "results.json").read_text())
    assert doc["tasks"]["quant_arena"]["usage"]["transcript"].endswith(".jsonl")


def test_portbench_qa_agent_answers_one_question(server, tmp_path):
    server.script("positive")
    agent = make_openai_agent("test-model", task="portbench_qa", **fast_options(server, tmp_path, "pbqa"))
    env = gym.make("PortBench-QA-v0")
    obs, info = env.reset(seed=0)
    agent.reset(env)
    answer = agent.act(obs, info)
    _, reward, terminated, _, info = env.step(answer)
    assert answer == "positive" and terminated and 0.0 <= reward <= 1.0
    assert server.requests[0]["messages"][1]["content"] == obs["prompt"]
    env.close()
