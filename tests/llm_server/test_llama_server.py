"""All three tasks against a real llama.cpp server and a real model (SmolLM2-135M-Instruct).

pytest-xdist (``--dist loadfile``, pyproject's addopts) runs each module of tests/llm_server on one worker,
which starts the session-scoped server it needs (tests/llm_server/conftest.py); tool mode is in
test_llama_tools.py, so the two workers share the real-server tests.

PortBench: what a real small model does is asserted, not scripted: the run finishes; every call is in the
transcript with its outcome; the capability ladder and the context window are found from the
server's own answers; with grammar-constrained JSON every S1-S3 answer parses into the schema;
without it the parse failures are scored as the spec says (status 2, stage score 0) and counted;
and a replay of the transcript reproduces the run bit for bit.

Quant-Arena (one-shot track) and Market-Bench (one attempt of each strategy): the code reply is
extracted, run in the sandbox and scored, whatever it is; every call is in the transcript; the replay
reproduces the scores.

Marked ``slow`` (about 12 minutes on one core of a 2-core machine): ``pytest -m slow`` runs them.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ._helpers import PERIOD_1, PERIOD_1_CLI, canon as _canon, runs as _runs, tasks as _tasks
from .conftest import MISSING, REQUIRED

if MISSING and not REQUIRED:  # one skip line for the module (under REQUIRED the fixtures fail instead)
    pytest.skip(MISSING, allow_module_level=True)

from quantgym.evaluation import evaluate
from quantgym.agents.llm import make_openai_agent, make_replay_agent
from quantgym.agents.llm.client import LLMConfigError, read_transcript
from quantgym.cli import app
from quantgym.envs.market_bench.config import STRATEGIES
from quantgym.envs.market_bench.scoring import FAILED, SUCCESS
from quantgym.sandbox import STATUSES as SANDBOX_STATUSES

pytestmark = pytest.mark.slow



def test_eval_with_default_options_then_replay(llama4k, tmp_path):
    """`quantgym eval` with default options: no failed call caused by the request format or the window."""
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama4k.base_url,
                                 "--env", "PortBench-Balanced-v0", "--period", PERIOD_1_CLI, "--out", str(out),
                                 "--no-plots", "--quiet"])
    assert r.exit_code == 0, r.output
    run = _runs(out)[0]
    header, calls = read_transcript(run["transcript"])
    # llama-cpp-python answers json_schema with HTTP 500: one request, then json_object + schema
    assert calls[0]["rung"] == "json_schema" and calls[0]["error_kind"] == "unsupported" and calls[0]["adapted"]
    assert len(calls[0]["tries"]) == 1
    # the full S1 prompt does not fit 4,096 tokens: the error names the window, the prompt is re-rendered once
    ctx = [c for c in calls if c["error_kind"] == "context"]
    assert len(ctx) == 1 and ctx[0]["context_window"] == 4096 and ctx[0]["adapted"]
    answered = [c for c in calls if c["ok"]]
    assert len(answered) == 3 and len(calls) == 5  # S1-S3 of the one date, plus the two adaptations
    # the server survives the default path's requests: the compact S1 prompt with {"type": "json_object",
    # "schema": ...} after the ladder's step-down and the refit, the request shape of the crash report in
    # docs/llm-servers.md (there with an 8,192-token window)
    assert llama4k.proc.poll() is None
    assert all(c["rung"] == "json_object_schema" for c in answered)
    assert all(c["usage"]["prompt_tokens"] + c["request"]["max_tokens"] <= 4096 for c in answered)
    assert all(c["meta"]["prompt_style"] in ("compact", "minimal") for c in answered)
    # the estimate never under-counts the real prompt
    assert all(c["meta"]["prompt_tokens_est"] >= c["usage"]["prompt_tokens"] for c in answered)
    u = run["usage"]
    assert u["failures"] == 0 and u["adaptations"] == 2 and u["calls"] == 5
    # grammar-constrained JSON: every stage answer parses into the schema
    assert all(st["text"]["status"] == "ok" for st in run["steps"])
    assert run["parse_stats"]["S1"]["ok"] == run["parse_stats"]["S3"]["ok"] == 1
    assert run["llm"]["context_window"] == 4096 and run["llm"]["context_source"] == "error"
    assert {st["prompt_style"] for st in run["steps"]} <= {"compact", "minimal"}
    # replay: offline, same results bit for bit
    out2 = tmp_path / "replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{run['transcript']}", "--out", str(out2),
                                  "--no-plots", "--quiet"])
    assert r2.exit_code == 0, r2.output
    assert (out / "summary.csv").read_text() == (out2 / "summary.csv").read_text()
    a, b = _runs(out)[0], _runs(out2)[0]
    for key in ("metrics", "stage_scores", "ceps", "nav", "parse_stats"):
        assert _canon(a[key]) == _canon(b[key]), key
    assert _canon([s["text"] for s in a["steps"]]) == _canon([s["text"] for s in b["steps"]])


#: json_object_schema is the rung the default-options test above ends on (every answer parses there)
@pytest.mark.parametrize("structured", ["json_schema", "json_object", "off"])
def test_each_structured_rung_through_the_python_api(llama4k, tmp_path, structured):
    """Each rung, fixed: what the real server and model do with it on one decision date, scored and replayed."""
    kw = dict(base_url=llama4k.base_url, structured=structured, context_window=4096, timeout=600, retries=1,
              transcript=tmp_path / "t.jsonl", max_tokens=200,  # free-running small-model output: keep it short
              prompt_style="minimal")  # the rung is what is tested: the shortest brief keeps prompt evaluation short
    period = PERIOD_1
    agent = make_openai_agent("smollm2", task="portbench", **kw)
    if structured == "json_schema":
        # a fixed rung is not climbed down: llama-cpp-python refuses every request (HTTP 500), and after the
        # first LLMConfig.stop_after (3) refusals the run stops in one line that says why, scoring nothing
        with pytest.raises(LLMConfigError) as exc:
            evaluate("PortBench-Balanced-v0", agent, period=period)
        agent.close()
        msg = str(exc.value)
        assert "\n" not in msg and "the first 3 calls" in msg and "HTTP 500" in msg and llama4k.base_url in msg
        assert "structured='json_schema'" in msg and "structured='auto'" in msg
        _, calls = read_transcript(tmp_path / "t.jsonl")
        assert len(calls) == 3
        assert all(not c["ok"] and c["error_kind"] == "unsupported" and not c["adapted"] for c in calls)
        assert all(c["request"]["response_format"]["type"] == "json_schema" for c in calls)
        return
    res = evaluate("PortBench-Balanced-v0", agent, period=period)
    agent.close()
    _, calls = read_transcript(tmp_path / "t.jsonl")
    texts = [s["text"] for s in res.steps]
    u = agent.episode_usage()
    # every call is in the transcript with its outcome; the episode always finishes
    assert res.metrics["n_rebalances"] == 1 and len(calls) == u["calls"]
    assert all(("ok" in c) and ("error_kind" in c) for c in calls)
    # no grammar over the schema: a 135M model rarely produces it; whatever it answers is scored as the
    # spec says (§4.0, §11.4, §11.5), and each outcome is visible in the step it happened in
    finals = [t for t in texts if t["status"] != "retry"]
    assert [t["stage"] for t in finals] == ["S1", "S2", "S3"]  # every stage answered
    assert len(texts) == len(calls) == u["calls"] and u["failures"] == 0  # one step per answer, retries too
    if structured == "json_object":
        # grammar-constrained JSON always parses: every stage on its first attempt, never a retry or an
        # unparseable answer; a JSON object without the stage's keys is an invalid (not a missing) answer
        assert all(t["status"] in ("ok", "invalid") and t["attempt"] == 1 for t in texts)
    for st in res.steps:
        t = st["text"]
        if t["status"] == "retry":  # a parse failure before the last attempt: the same stage is asked again
            assert t["attempt"] < 3 and t["error"]
        elif t["status"] == "ok":
            assert t["stage"] not in st["invalid"]
        else:  # invalid / unparseable (after the 3rd attempt) / refused: the stage's fallback, score 0
            assert t["stage"] in st["invalid"] and st["stage_scores"][t["stage"]] == 0.0
            # info's unparseable / refused flags hold for the decision so far (any of its stages)
            assert t["status"] != "unparseable" or (st["unparseable"] and t["attempt"] == 3
                                                    and len(t["answers"]) == 3)
            assert t["status"] != "refused" or st["refused"]
    assert res.metrics["invalid_steps"] == int(any(t["status"] != "ok" for t in finals))
    assert res.metrics["refused_steps"] == int(any(t["status"] == "refused" for t in finals))
    replay = make_replay_agent(str(tmp_path / "t.jsonl"), task="portbench")
    res2 = evaluate("PortBench-Balanced-v0", replay, period=period)
    assert _canon(res.to_dict()) == _canon(res2.to_dict())


# ------------------------------------------------------------------ Quant-Arena and Market-Bench
def test_quant_arena_oneshot_step(llama4k, tmp_path):
    out = tmp_path / "qa"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama4k.base_url,
                                 "--env", "QuantArena-OneShot-v0", "--out", str(out), "--max-tokens", "768",
                                 "--quiet", "--no-plots"])
    assert r.exit_code == 0, r.output
    run = _tasks(out)["quant_arena"]["runs"][0]
    _, calls = read_transcript(run["transcript"])
    answered = [c for c in calls if c["ok"]]
    assert len(answered) == 1 and run["usage"]["failures"] == 0
    assert answered[0]["usage"]["prompt_tokens"] + 768 <= 4096
    fin = run["final"]
    # the one submission was evaluated on both windows (whatever the model wrote) and the run ended with a
    # score; a broken module is the agent's recorded failure (status and message), never an env crash
    assert fin["frozen_candidate"] == 1 and fin["status_research"] and fin["status_sealed"]
    assert fin["status_research"] == "ok" or fin["message_research"]
    assert 0.0 <= float(fin["S"]) <= 100.0 and float(run["S"]) == float(fin["S"])
    out2 = tmp_path / "qa_replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{run['transcript']}", "--out", str(out2),
                                  "--quiet", "--no-plots"])
    assert r2.exit_code == 0, r2.output
    assert _tasks(out2)["quant_arena"]["runs"][0]["S"] == run["S"]


def test_market_bench_one_attempt_of_each_strategy(llama4k, tmp_path):
    out = tmp_path / "mb"
    envs = "MarketBench-Scheduled-v0,MarketBench-Pairs-v0,MarketBench-DeltaHedge-v0"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama4k.base_url,
                                 "--env", envs, "--round", "1", "--attempts", "1", "--max-tokens", "384",
                                 "--out", str(out), "--quiet", "--no-plots"])
    assert r.exit_code == 0, r.output
    mb = _tasks(out)["market_bench"]
    assert len(mb["runs"]) == 3
    assert sorted(run["records"][0]["strategy"] for run in mb["runs"]) == sorted(STRATEGIES)
    for run in mb["runs"]:
        assert len(run["records"]) == 1  # one attempt, run in the sandbox and scored
        rec = run["records"][0]
        assert (rec["round"], rec["attempt"]) == (1, 1) and run["usage"]["failures"] == 0
        # whatever the model wrote ran in the sandbox (a status of its own) and was scored or refused in one line
        assert rec["sandbox_status"] in SANDBOX_STATUSES and rec["wall_seconds"] > 0
        assert rec["status"] in (SUCCESS, FAILED)
        if rec["status"] == SUCCESS:
            assert rec["sandbox_status"] == "ok" and rec["mae"] >= 0 and isinstance(rec["correct"], bool)
        else:
            assert rec["mae"] is None and rec["reason"] and "\n" not in rec["reason"]
            # the reason starts with the sandbox's status, or bad_output for a run whose result is no metric dict
            why = rec["sandbox_status"] if rec["sandbox_status"] != "ok" else "bad_output"
            assert rec["reason"].startswith(f"{why}:"), rec["reason"]
    _, calls = read_transcript(mb["runs"][0]["transcript"])
    assert sum(1 for c in calls if c["ok"]) == 3
    out2 = tmp_path / "mb_replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{mb['runs'][0]['transcript']}", "--out", str(out2),
                                  "--quiet", "--no-plots"])
    assert r2.exit_code == 0, r2.output
    assert _tasks(out2)["market_bench"]["scores"] == mb["scores"]


# ------------------------------------------------------------------ blind mode (docs/blind.md)
#: one monthly decision date, 19 daily returns: enough for the gap's bootstrap interval (min_obs 10)
GAP_PERIOD_CLI = "2020-02-03:2020-02-28:monthly"


def test_eval_blind_both_writes_the_gap_and_the_replay_reproduces_it(llama4k, tmp_path):
    """`quantgym eval --blind both`: each episode named and blind, the gap with its intervals in summary.csv."""
    import csv

    out = tmp_path / "both"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama4k.base_url,
                                 "--env", "PortBench-Balanced-v0", "--period", GAP_PERIOD_CLI, "--blind", "both",
                                 "--prompt-style", "minimal", "--max-tokens", "256", "--concurrency", "1",
                                 "--no-baseline", "--out",
                                 str(out), "--no-plots", "--quiet"])  # one request at a time: none waits in a queue
    assert r.exit_code == 0, r.output
    named, blind = list(csv.DictReader(open(out / "summary.csv")))
    assert (named["agent"], blind["agent"]) == ("openai:smollm2", "openai:smollm2 (blind)")
    assert float(blind["gap_sharpe"]) == pytest.approx(float(blind["sharpe"]) - float(named["sharpe"]), abs=1e-5)
    for m in ("sharpe", "ret_pct"):
        lo, hi = float(blind[f"gap_{m}_lo"]), float(blind[f"gap_{m}_hi"])
        assert lo <= hi, m
    assert 0 < float(blind["gap_sharpe_p"]) <= 1 and blind["likely_recall"] in ("true", "false")
    runs = _runs(out)
    assert [x["config"]["env_kwargs"].get("blind") for x in runs] == [None, True]
    assert all(x["metrics"]["n_rebalances"] == 1 for x in runs)
    _, calls = read_transcript(runs[0]["transcript"])
    episodes = {c["episode"] for c in calls if c["ok"]}
    assert len(episodes) == 2 and sum("/blind#" in e for e in episodes) == 1
    # replay: offline, both views again, the same gap and intervals
    out2 = tmp_path / "both_replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{runs[0]['transcript']}", "--out", str(out2),
                                  "--no-plots", "--quiet"])
    assert r2.exit_code == 0, r2.output
    assert (out2 / "summary.csv").read_text() == (out / "summary.csv").read_text()
