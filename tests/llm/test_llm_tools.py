"""LLM agents in tool mode against a scripted OpenAI-compatible server (tests/llm/server.py).

A toy two-stage env with a :class:`quantgym.tools.Toolbox` plays the env protocol of tool mode (a tool call
returns its result as the next observation, ``info["tool"]``; a stage answer ends the stage); a minimal
adapter plays a task's LLM adapter. Asserted: native ``tools`` / ``tool_calls`` (parallel calls executed
in order, each result sent back as a ``tool`` message), the tool ladder (an error answer to ``tools``:
one step down to the JSON action protocol, recorded, never retried), malformed calls recorded with
their outcome, the env's budget withholding the tools, and a replay that reproduces the run offline.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from quantgym.agents.llm.agents import LLMAgent, fit_log, parse_json_action
from quantgym.agents.llm.client import ChatEngine, LLMConfig, read_transcript
from quantgym.agents.llm.replay import ReplayEngine
from quantgym.tools import BudgetState, ToolBudget, Toolbox, parse_tool_call, tool

from .server import ScriptedServer

PRICES = {"AAA": 101.5, "BBB": 99.25}


@tool
def price(asset: str) -> str:
    """The last close of one asset.

    Parameters
    ----------
    asset : the ticker
    """
    return f"{asset}: {PRICES[asset]}"


@tool
def universe() -> str:
    """The tickers of the universe."""
    return ", ".join(PRICES)


class ToyToolEnv(gym.Env):
    """Two stages; each takes tool calls (budget per stage) until a stage answer."""

    def __init__(self, calls: int = 3, chars: int = 1000):
        self.toolbox = Toolbox([price, universe])
        self.tool_budget = ToolBudget(calls=calls, chars=chars)
        self.state = BudgetState(self.tool_budget)
        self.records: list[dict] = []
        self.stage = 0

    def _stage_obs(self):
        info = {"stage": self.stage}
        if self.toolbox is not None:
            info.update(tools=self.toolbox.schemas(), tool_budget=self.tool_budget.to_dict())
        return f"Stage {self.stage + 1}: name the asset to buy.", info

    def reset(self, *, seed=None, options=None):
        self.stage, self.records = 0, []
        self.state.reset()
        return self._stage_obs()

    def step(self, action):
        call = parse_tool_call(action)
        if call is not None:
            res = self.toolbox.call(call[0], call[1], self.state)
            self.records.append({"stage": self.stage, "tool": res.to_dict()})
            return res.content, 0.0, False, False, {"stage": self.stage, "tool": res.to_dict()}
        self.records.append({"stage": self.stage, "answer": action})
        self.stage += 1
        self.state.reset()
        obs, info = self._stage_obs()
        return obs, float(action == "BBB"), self.stage >= 2, False, info


class ToyAdapter(LLMAgent):
    task = "toy"
    output_cap = 64

    def act(self, observation, info):
        st = self._st()
        st["acts"] = st.get("acts", 0) + 1  # a side effect before the call: must happen once per stage

        def build(style):
            return [{"role": "system", "content": "You pick assets."}, {"role": "user", "content": observation}]

        res = self._fitted_call(build, cap=self.output_cap, meta={"stage": info["stage"]})
        self._log(**fit_log(res), ok=res.ok, rung=res.rung, error_kind=res.error_kind)
        st.setdefault("answers", []).append(res.text)
        return res.text if res.ok else None


def _calls(*calls, content=None):
    """A reply with native tool calls: ``(id, name, arguments text)``."""
    return {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": content,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]}}]}


def _run(agent, env):
    obs, info = env.reset()
    agent.reset(env)
    actions, done = [], False
    while not done:
        a = agent.act(obs, info)
        actions.append(a)
        obs, _, term, trunc, info = env.step(a)
        done = term or trunc
    return actions


def _agent(srv, tmp_path, name="run", **cfg):
    config = LLMConfig(model="test-model", base_url=srv.base_url, timeout=5.0, retries=1, backoff_base=0.01,
                       backoff_max=0.02, context_window=8192, **cfg)
    return ToyAdapter(ChatEngine(config, api_key="test-key", transcript=tmp_path / f"{name}.jsonl"))


def _replay(path, env=None):
    agent = ToyAdapter(ReplayEngine(path))
    env = env or ToyToolEnv()
    return agent, env, _run(agent, env)


def test_native_parallel_calls_run_in_order_and_replay(server, tmp_path):
    server.script(_calls(("c1", "universe", "{}"), ("c2", "price", '{"asset": "BBB"}')), "BBB",
                  _calls(("c3", "price", '{"asset": "AAA"}')), "AAA")
    agent, env = _agent(server, tmp_path), ToyToolEnv()
    actions = _run(agent, env)
    assert actions == [{"tool": "universe", "arguments": {}}, {"tool": "price", "arguments": {"asset": "BBB"}}, "BBB",
                       {"tool": "price", "arguments": {"asset": "AAA"}}, "AAA"]
    first, second = server.requests[0], server.requests[1]
    assert first["tools"] == env.toolbox.schemas() and first["tool_choice"] == "auto"
    # the results go back as tool messages, in the order of the calls, after the assistant's calls
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in second["messages"][3:]] == ["c1", "c2"]
    assert second["messages"][3]["content"] == "AAA, BBB" and second["messages"][4]["content"] == "BBB: 99.25"
    # the adapter's state is restored when a stage's call resumes: its side effects happen once per stage
    assert agent._st()["acts"] == 2 and agent._st()["answers"] == ["BBB", "AAA"]
    # the transcript holds every call and every result with its outcome
    header, calls = read_transcript(agent.engine.transcript_path)
    assert len(calls) == 4 and calls[0]["tool_calls"][1] == {"id": "c2", "name": "price",
                                                            "arguments": '{"asset": "BBB"}'}
    results = [json.loads(line) for line in agent.engine.transcript_path.read_text().splitlines()]
    results = [r for r in results if r["type"] == "tool"]
    assert [(r["tool"], r["ok"], r["content"]) for r in results] == [
        ("universe", True, "AAA, BBB"), ("price", True, "BBB: 99.25"), ("price", True, "AAA: 101.5")]
    label = agent.current_episode
    summary = agent.llm_summary(label)
    assert summary["tool_rungs"] == {"native": 4} and summary["tool_calls"] == 3
    server.stop()  # the replay needs no network
    _, env2, actions2 = _replay(agent.engine.transcript_path)
    assert actions2 == actions and env2.records == env.records


def test_tools_refused_step_down_once_to_json_protocol(tmp_path):
    srv = ScriptedServer(reject_params={"tools": "tools are not supported by this server"}).start()
    try:
        srv.script('{"tool": "price", "arguments": {"asset": "AAA"}}', '{"answer": "AAA"}',
                   '{"answer": "BBB"}')
        agent, env = _agent(srv, tmp_path), ToyToolEnv()
        actions = _run(agent, env)
    finally:
        srv.stop()
    assert actions == [{"tool": "price", "arguments": {"asset": "AAA"}}, "AAA", "BBB"]
    assert agent.engine.tool_rung() == "json"
    header, calls = read_transcript(agent.engine.transcript_path)
    # one refused request (recorded as an adaptation, not a failure), then never `tools` again
    assert calls[0]["error_kind"] == "unsupported" and calls[0]["unsupported"] == "tools" and calls[0]["adapted"]
    assert len(calls[0]["tries"]) == 1 and "tools" in calls[0]["request"]
    assert all("tools" not in c["request"] for c in calls[1:]) and len(calls) == 4
    # the JSON action protocol: the tools listed in the system message, a reply schema of a call or the answer
    sys_msg = calls[1]["request"]["messages"][0]["content"]
    assert '{"tool": "<name>"' in sys_msg and "- price:" in sys_msg
    assert calls[1]["request"]["response_format"]["json_schema"]["name"] == "tool_call_or_answer"
    assert calls[2]["request"]["messages"][-1] == {"role": "user", "content": "Result of price:\nAAA: 101.5"}
    assert env.records[0]["tool"]["ok"] and agent.engine.episode_stats[agent.current_episode]["failures"] == 0
    _, env2, actions2 = _replay(agent.engine.transcript_path)
    assert actions2 == actions and env2.records == env.records


def test_tools_refused_as_a_500_validation_error_steps_down(server, tmp_path):
    server.script({"status": 500, "message": "1 validation error: Input should be a valid list "
                                             "('loc': ('body', 'tools'))"},
                  '{"answer": "BBB"}', '{"answer": "AAA"}')
    agent = _agent(server, tmp_path)
    actions = _run(agent, ToyToolEnv())
    assert actions == ["BBB", "AAA"] and agent.engine.tool_rung() == "json"
    assert len(server.requests) == 3 and "tools" in server.requests[0] and "tools" not in server.requests[1]


def test_llama_server_without_jinja_steps_down(server, tmp_path):
    """llama-server refuses `tools` without --jinja with a server error naming the flag: one step down."""
    server.script({"status": 500, "message": "tools param requires --jinja flag"}, '{"answer": "BBB"}',
                  '{"answer": "AAA"}')
    agent = _agent(server, tmp_path)
    assert _run(agent, ToyToolEnv()) == ["BBB", "AAA"] and agent.engine.tool_rung() == "json"
    assert len(server.requests) == 3


def test_malformed_and_unknown_calls_are_recorded_with_their_outcome(server, tmp_path):
    server.script(_calls(("c1", "price", '{"asset": "AAA"'), ("c2", "news", "{}"), ("c3", "price", '{"asset": 7}')),
                  "BBB", "AAA")
    agent, env = _agent(server, tmp_path), ToyToolEnv(calls=5)
    actions = _run(agent, env)
    # the raw arguments text of a malformed call goes to the env, which answers bad_arguments
    assert actions[0] == {"tool": "price", "arguments": '{"asset": "AAA"'}
    assert [r["tool"]["error"] for r in env.records[:3]] == ["bad_arguments", "unknown_tool", "bad_arguments"]
    tool_lines = [json.loads(x) for x in agent.engine.transcript_path.read_text().splitlines()]
    tool_lines = [r for r in tool_lines if r["type"] == "tool"]
    assert [(r["malformed"], r["ok"], r["error"]) for r in tool_lines] == [
        (True, False, "bad_arguments"), (False, False, "unknown_tool"), (False, False, "bad_arguments")]
    assert tool_lines[0]["content"].startswith("error: bad arguments for price")
    assert agent.llm_summary(agent.current_episode)["malformed_tool_calls"] == 1
    # the model reads each error as the call's result
    assert [m["content"][:6] for m in server.requests[1]["messages"][3:]] == ["error:"] * 3


def test_used_up_budget_withholds_the_tools(server, tmp_path):
    greedy = _calls(("c1", "universe", "{}"))
    server.script(greedy, _calls(("c2", "universe", "{}")), "BBB", "AAA")
    agent, env = _agent(server, tmp_path), ToyToolEnv(calls=1)
    actions = _run(agent, env)
    assert actions[:3] == [{"tool": "universe", "arguments": {}}, {"tool": "universe", "arguments": {}}, "BBB"]
    assert env.records[0]["tool"]["ok"] and env.records[1]["tool"]["error"] == "budget_exhausted"
    # once the budget is used up the model is asked with tool_choice "none" and told to answer; a call it
    # still makes goes to the env, which answers budget_exhausted (recorded)
    for req in server.requests[1:3]:
        assert req["tool_choice"] == "none" and req["messages"][-1]["content"].startswith("No more tool calls")
    assert sum(1 for r in env.records if "tool" in r and r["stage"] == 0) == 2  # the env's budget held


def test_fixed_text_rung_sends_no_tools(server, tmp_path):
    server.script("AAA", "BBB")
    agent = _agent(server, tmp_path, tool_calls="text")
    assert _run(agent, ToyToolEnv()) == ["AAA", "BBB"]
    assert all("tools" not in r for r in server.requests)
    assert agent.llm_summary(agent.current_episode)["tool_rungs"] == {"text": 2}


def test_env_without_toolbox_is_unchanged(server, tmp_path):
    server.script("AAA", "BBB")
    agent, env = _agent(server, tmp_path), ToyToolEnv()
    env.toolbox = None
    assert _run(agent, env) == ["AAA", "BBB"] and all("tools" not in r for r in server.requests)


@pytest.mark.parametrize("text, expected", [
    ('{"tool": "price", "arguments": {"asset": "A"}}', ("price", {"asset": "A"})),
    ('```json\n{"tool": "universe"}\n```', ("universe", {})),
    ('{"answer": "BBB"}', "BBB"),
    ('{"answer": {"w": 1}}', '{"w": 1}'),
    ('{"weights": {"A": 1}}', '{"weights": {"A": 1}}'),
    ("plain words", "plain words"),
])
def test_json_protocol_reply_parsing(text, expected):
    assert parse_json_action(text) == expected


def test_config_rejects_an_unknown_tool_mode():
    with pytest.raises(ValueError, match="tool_calls must be one of"):
        LLMConfig(model="m", tool_calls="maybe")


def test_cli_tools_with_a_classical_agent_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from quantgym.cli import app

    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--tools",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "--tools" in r.output and "cannot call tools" in r.output
    assert not (tmp_path / "o").exists()
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:m", "--env", "PortBench-Balanced-v0", "--tools",
                                 "--tool-calls", "sometimes", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--tool-calls must be" in r.output


def test_portbench_tool_mode_through_the_cli_replays(server, tmp_path):
    """`quantgym eval --tools` on one PortBench date: a data tool call per stage, then the stage answer; the
    replay gives the same summary and the same steps."""
    from typer.testing import CliRunner

    from quantgym.cli import app

    from .pb_script import answer

    def reply(req):
        if not any(m["role"] == "tool" for m in req["messages"]):  # the stage's first call: fetch data
            return _calls(("c1", "asset_stats", '{"assets": ["SPY", "TLT"], "window": 20}'))
        stage = next(m["content"] for m in req["messages"] if m["role"] == "user")
        return json.dumps(answer({"messages": [{"role": "user", "content": stage}]}))

    server.responder = reply
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url, "--env",
                                 "PortBench-Balanced-v0", "--period", "2020-03-02:2020-03-06:weekly", "--tools",
                                 "--env-kwargs", '{"tool_config": {"calls": 2, "chars": 3000}}',
                                 "--no-baseline", "--out", str(out), "--quiet", "--no-plots", "--retries", "1"],
                           env={"OPENAI_API_KEY": "test-key"})
    assert r.exit_code == 0, r.output
    run = json.loads((out / "results.json").read_text())["tasks"]["portbench"]["runs"][0]
    # the tool budget is in the transcript's recorded plan: the replay below needs no flags
    from quantgym.agents.llm.client import read_transcript

    header, _ = read_transcript(run["transcript"])
    assert header["eval"]["env_kwargs"] == {"tools": True, "tool_config": {"calls": 2, "chars": 3000}}
    assert all("tools" in q and q["tool_choice"] == "auto" for q in server.requests[::2])
    # while the tools are offered the stage schema is not sent as response_format (a server that grammar-
    # constrains the reply to it would never return a tool call); the answers are parsed from the text
    assert all("response_format" not in q for q in server.requests if q.get("tool_choice") == "auto")
    assert all(s["text"]["status"] != "unparseable" for s in run["steps"] if s.get("text"))
    tool_steps = [s for s in run["steps"] if s.get("tool")]
    assert [s["tool"]["tool"] for s in tool_steps] == ["asset_stats"] * 3 and all(s["tool"]["ok"] for s in tool_steps)
    assert run["llm"]["tool_calls"] == 3 and run["llm"]["tool_rungs"] == {"native": 6}
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{run['transcript']}", "--out", str(tmp_path / "r"),
                                  "--quiet", "--no-plots"])
    assert r2.exit_code == 0, r2.output
    assert (tmp_path / "r" / "summary.csv").read_text() == (out / "summary.csv").read_text()
    run2 = json.loads((tmp_path / "r" / "results.json").read_text())["tasks"]["portbench"]["runs"][0]
    assert [(s.get("text"), s.get("tool")) for s in run2["steps"]] == [(s.get("text"), s.get("tool"))
                                                                        for s in run["steps"]]
