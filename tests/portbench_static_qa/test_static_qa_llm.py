"""The QA layer with the LLM agent: a real openai client against a local scripted
server that answers each prompt with its ground truth, then ``quantgym qa --agent replay:FILE`` offline."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner  # noqa: E402

from quantgym.cli import app  # noqa: E402
from quantgym.envs.portbench.static_qa import OraclePolicy, run_qa  # noqa: E402
from quantgym.envs.portbench.static_qa.env import PortBenchQAEnv  # noqa: E402
from llm.server import ScriptedServer, fast_options  # noqa: E402  (tests/ is on sys.path: prepend import mode)


def test_llm_agent_scores_and_replays_through_the_cli(tmp_path):
    from quantgym.agents.llm import make_openai_agent

    env = PortBenchQAEnv(templates=["T1", "T4", "T6", "T7"], n_per_template=3, restricted="both")
    oracle = OraclePolicy()
    truth = {}
    for i in range(env.n_items):
        obs, info = env.reset(options={"index": i})
        truth[obs["prompt"]] = oracle(obs, info)
    srv = ScriptedServer().start()
    try:
        srv.responder = lambda req: truth[req["messages"][-1]["content"]]
        agent = make_openai_agent("test-model", task="portbench_qa", **fast_options(srv, tmp_path, "qa"))
        run = run_qa(agent, agent="openai:test-model", env=env, workers=3)
    finally:
        srv.stop()
    assert len(run.records) == 3 * 4 + 3 and all(r["score"] == 1.0 for r in run.records)
    out = tmp_path / "replay"
    res = CliRunner().invoke(app, ["qa", "--agent", f"replay:{tmp_path / 'qa.jsonl'}", "--out", str(out), "--n", "3",
                                   "--templates", "T1,T4,T6,T7", "-q"])
    assert res.exit_code == 0, res.output
    rec = json.load(open(out / "results.json"))["tasks"]["portbench_qa"]["runs"][0]
    assert rec["metrics"]["T1"] == 1.0 and rec["metrics"]["T4_r"] == 1.0 and rec["metrics"]["T7"] == 1.0
    assert [r["response"] for r in rec["records"]] == [r["response"] for r in run.records]
