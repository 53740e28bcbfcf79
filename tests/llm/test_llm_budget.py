"""Context budget, output caps and --dry-run against the scripted server (fast unit tests; the real
llama.cpp server is exercised in tests/llm_server)."""

from __future__ import annotations

import json
import os

import pytest

from typer.testing import CliRunner

from quantgym.evaluation import evaluate
from quantgym.agents.llm import make_openai_agent
from quantgym.agents.llm.client import read_transcript
from quantgym.envs.portbench.coercion import stage_json_schema
from quantgym.agents.llm.tokens import estimate_tokens, messages_tokens, schema_token_bound
from quantgym.cli import app

from . import pb_script as S
from .server import ScriptedServer, closed_port_url, fast_options

PERIOD = {"start": "2020-03-02", "end": "2020-03-13", "freq": "weekly"}


def test_estimate_counts_digits_and_punctuation_one_each():
    assert estimate_tokens("") == 0
    assert estimate_tokens("0.12") == 5  # 4 pieces x 1.10, rounded up
    assert estimate_tokens("abcdef") == 3  # a run of 6 letters = 2 pieces
    assert estimate_tokens("SPY: .94 .85\n") >= 9
    assert messages_tokens([{"role": "user", "content": "abc"}]) == estimate_tokens("abc") + 8


def test_caps_grow_linearly_with_the_universe():
    caps = [schema_token_bound(stage_json_schema(1, [f"T{i:02d}" for i in range(n)])) for n in (10, 20, 40, 80)]
    d = [b - a for a, b in zip(caps, caps[1:])]
    assert caps[0] > 64 and d[1] == 2 * d[0] and d[2] == 2 * d[1]


def test_agent_fits_prompts_and_caps_to_a_known_window(tmp_path):
    srv = ScriptedServer(context_window=4096).start()  # counts characters / 4
    try:
        srv.responder = S.valid
        agent = make_openai_agent("test-model", task="portbench",
                                  **fast_options(srv, tmp_path, "fit", context_window=4096))
        res = evaluate("PortBench-Balanced-v0", agent, period=PERIOD)
        _, calls = read_transcript(tmp_path / "fit.jsonl")
        assert res.metrics["n_rebalances"] == 2
        assert all(c["ok"] for c in calls) and not any(c["error_kind"] == "context" for c in calls)
        for c in calls:
            assert c["meta"]["prompt_tokens_est"] + c["request"]["max_tokens"] <= 4096
            assert c["meta"]["prompt_style"] in ("compact", "minimal")
        styles = {st["prompt_style"] for st in res.steps}
        assert styles <= {"compact", "minimal"}  # the step records what was sent, not the env's own style
    finally:
        srv.stop()


def test_unknown_window_learned_from_the_first_error_then_no_more_errors(tmp_path):
    srv = ScriptedServer(context_window=4096).start()
    try:
        srv.responder = S.valid
        agent = make_openai_agent("test-model", task="portbench", **fast_options(srv, tmp_path, "learn"))
        evaluate("PortBench-Balanced-v0", agent, period=PERIOD)
        _, calls = read_transcript(tmp_path / "learn.jsonl")
        kinds = [c["error_kind"] for c in calls]
        assert kinds.count("context") == 1 and kinds[0] == "context" and calls[0]["adapted"]
        assert calls[1]["meta"]["refit"] and calls[1]["meta"]["context_window"] == 4096
        u = agent.episode_usage()
        assert u["failures"] == 0 and u["adaptations"] == 1
    finally:
        srv.stop()


def test_fixed_style_and_fixed_cap_are_sent_as_given(server, tmp_path):
    server.responder = S.valid
    agent = make_openai_agent("test-model", task="portbench",
                              **fast_options(server, tmp_path, "fixed", prompt_style="minimal", max_tokens=777))
    evaluate("PortBench-Balanced-v0", agent, period=PERIOD)
    _, calls = read_transcript(tmp_path / "fixed.jsonl")
    assert {c["meta"]["prompt_style"] for c in calls} == {"minimal"}
    assert {c["request"]["max_tokens"] for c in calls} == {777}


@pytest.mark.parametrize("style", ["compact", "minimal"])
def test_market_bench_fixed_style_sends_that_style(server, tmp_path, style):
    """A Market-Bench attempt with one fixed prompt style (--prompt-style): that rendering is sent, no other."""
    import gymnasium as gym

    server.script("no code")
    agent = make_openai_agent("test-model", task="market_bench",
                              **fast_options(server, tmp_path, style, prompt_style=style))
    env = gym.make("MarketBench-Scheduled-v0", round=1, attempts=1)
    try:
        obs, info = env.reset(seed=0)
        agent.reset(env)
        env.step(agent.act(obs, info))
        want = env.unwrapped.render_prompt(style=style)
    finally:
        env.close()
    _, calls = read_transcript(tmp_path / f"{style}.jsonl")
    assert [c["meta"]["prompt_style"] for c in calls] == [style]
    assert calls[0]["request"]["messages"][-1]["content"] == want


def test_dry_run_sends_nothing_and_writes_nothing(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = CliRunner().invoke(app, ["eval", "--agent", "openai:some-model", "--base-url", closed_port_url(),
                                     "--env", "PortBench-Balanced-v0", "--period", "2020-03-02:2020-03-13:weekly",
                                     "--dry-run", "--context-window", "4096", "--price-in", "1", "--price-out", "2"])
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output
    assert "Dry run" in r.output and "6-18" in r.output and "context window: 4096" in r.output
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_dry_run_plan_numbers():
    from quantgym.agents.llm.dryrun import dry_run_plan
    from quantgym.evaluation import EvalPlan

    rep = dry_run_plan("openai:m", EvalPlan(env_ids=["PortBench-Balanced-v0", "MarketBench-Pairs-v0"],
                                            options={"periods": [PERIOD], "rounds": [1, 2], "attempts": 3}),
                       agent_options={"context_window": 8192, "price_in": 1.0, "price_out": 2.0},
                       tokens_per_s=100, prompt_tokens_per_s=1000)
    pb, mb = rep["rows"]
    assert (pb["calls_min"], pb["calls_max"]) == (6, 18) and (mb["calls_min"], mb["calls_max"]) == (2, 6)
    assert pb["completion_tokens"] < pb["completion_tokens_max"]
    assert rep["total"]["cost_usd"] == pytest.approx(
        (rep["total"]["prompt_tokens"] * 1 + rep["total"]["completion_tokens"] * 2) / 1e6)
    assert abs(pb["wall_s"] - (pb["prompt_tokens"] / 1000 + pb["completion_tokens"] / 100)) < 1e-9
    json.dumps(rep)  # JSON-able
