"""Tool mode (docs/llm-agents.md §10) on a real llama.cpp server with SmolLM2-135M-Instruct: llama-cpp-python's
``chatml-function-calling`` chat format answers with native tool calls (conftest.py, fixture ``llama_tools``).

Whatever the model calls runs in the env within its budget and is in the transcript with its outcome; the
run is scored and a replay reproduces it offline. Modules of their own (this one and
test_llama_tools_market_bench.py), so that pytest-xdist (``--dist loadfile``) spreads the real-server work over
both workers. Marked ``slow``.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ._helpers import canon as _canon, runs as _runs, tasks as _tasks
from .conftest import MISSING, REQUIRED

if MISSING and not REQUIRED:  # one skip line for the module (under REQUIRED the fixtures fail instead)
    pytest.skip(MISSING, allow_module_level=True)

from quantgym.agents.llm.client import read_transcript
from quantgym.cli import app

pytestmark = pytest.mark.slow

PERIOD_1_CLI = "2020-03-02:2020-03-13:monthly"  # one decision date (2020-03-02), ten trading days of NAV

#: a small per-stage budget keeps the real-model run short (2 calls and 2,000 result characters per stage: the
#: prompts that carry the results stay short, and a long result is cut with its recorded marker)
TOOL_BUDGET = {"tool_config": {"calls": 2, "chars": 2000}}


def _replay_cli(transcript, out, *flags: str) -> None:
    """`quantgym eval --agent replay:TRANSCRIPT` into ``out`` (offline): the recorded plan holds ``tools`` and the
    ``tool_config``, so no flag is passed again."""
    r = CliRunner().invoke(app, ["eval", "--agent", f"replay:{transcript}", "--out", str(out), "--no-plots", "--quiet",
                                 *flags])
    assert r.exit_code == 0, r.output


def _tool_lines(path) -> list[dict]:
    from pathlib import Path

    return [r for r in map(json.loads, Path(path).read_text().splitlines()) if r.get("type") == "tool"]


def test_tool_mode_portbench_then_replay(llama_tools, tmp_path):
    """`quantgym eval --tools` on one decision date (five stages): what the real server and model do, then a
    replay."""
    out = tmp_path / "tools"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama_tools.base_url,
                                 "--env", "PortBench-Balanced-v0", "--period", PERIOD_1_CLI, "--tools",
                                 "--env-kwargs", json.dumps(TOOL_BUDGET), "--max-tokens", "256", "--out", str(out),
                                 "--no-plots", "--quiet"])  # 256: the tool-call cap too (TOOL_CALL_CAP)
    assert r.exit_code == 0, r.output
    run = _runs(out)[0]
    assert run["metrics"]["n_rebalances"] == 1  # the run finishes: every stage answered
    _, calls = read_transcript(run["transcript"])
    tools = _tool_lines(run["transcript"])
    made = sum(len(c.get("tool_calls") or []) for c in calls if c["ok"])
    stepped = [c for c in calls if c.get("unsupported") == "tools"]
    # with the function-calling chat format the server answers with native tool calls (the ladder stays on
    # "native"); a server that refused `tools` would show one adapted call instead
    assert made > 0 or len(stepped) == 1
    assert made > 0 and not stepped and all(c["rung"] for c in calls)
    assert any("tools" in c["request"] and c["request"]["tool_choice"] == "auto" for c in calls)
    # every call the model made ran in the env and is in the transcript with its outcome
    assert len(tools) == made and all(t["ok"] in (True, False) and t["content"] for t in tools)
    assert all(t["ok"] or t["error"] in ("unknown_tool", "bad_arguments", "budget_exhausted", "tool_error")
               for t in tools)
    # budgets hold: at most 2 calls of each stage ran (budget_exhausted answers use none)
    ran: dict = {}
    for t in tools:
        key = (t["meta"]["date"], t["meta"]["stage"])
        ran[key] = ran.get(key, 0) + (t["error"] != "budget_exhausted")
    assert ran and max(ran.values()) <= 2
    assert all(t["truncated"] == 0 or t["content"].endswith(f"[truncated: {t['truncated']} chars]")
               for t in tools if t["ok"])
    assert run["llm"]["tool_calls"] == made and "native" in run["llm"]["tool_rungs"]
    # replay: offline, the same path and the same results bit for bit
    out2 = tmp_path / "tools_replay"
    _replay_cli(run["transcript"], out2)
    assert (out / "summary.csv").read_text() == (out2 / "summary.csv").read_text()
    a, b = _runs(out)[0], _runs(out2)[0]
    # the scores, and each stage answer and each tool call with its result
    assert _canon([a[k] for k in ("metrics", "stage_scores", "ceps", "nav", "parse_stats")]) == _canon(
        [b[k] for k in ("metrics", "stage_scores", "ceps", "nav", "parse_stats")])
    assert _canon([(s.get("text"), s.get("tool")) for s in a["steps"]]) == _canon(
        [(s.get("text"), s.get("tool")) for s in b["steps"]])


def _tool_run_checks(transcript, budget_calls: int, answer_tools: tuple[str, ...] = ()) -> tuple[int, list[dict]]:
    """(calls the model made, tool lines): every call is recorded with its outcome, the budget held.

    A call of an answer tool (``answer_tools``) in the model's last reply ended the episode: its outcome is
    the run's record, not a tool line, and a call after it in that reply never ran."""
    _, calls = read_transcript(transcript)
    tools = _tool_lines(transcript)
    replies = [c.get("tool_calls") or [] for c in calls if c["ok"]]
    made = sum(map(len, replies))
    stepped = [c for c in calls if c.get("unsupported") == "tools"]
    assert made > 0 or len(stepped) == 1  # tool calls were made, or the ladder stepped down once
    last = replies[-1] if replies else []
    ended = next((i for i, c in enumerate(last) if c["name"] in answer_tools), len(last))
    assert len(tools) == made - (len(last) - ended) and all(t["ok"] or t["error"] for t in tools)
    ran: dict = {}
    for t in tools:
        key = json.dumps(t["meta"], sort_keys=True)
        ran[key] = ran.get(key, 0) + (t["error"] != "budget_exhausted")
    assert max(ran.values(), default=0) <= budget_calls
    return made, tools


def test_tool_mode_quant_arena_research_step(llama_tools, tmp_path):
    """One-shot track in tool mode: describe/explore/submit/freeze offered; whatever the model calls runs in the
    env within the budget (one exploration run at most), the run ends with a score, and replays."""
    out = tmp_path / "qa_tools"
    kw = {"tool_config": {"calls": 2, "chars": 4000, "explore_runs": 1}}
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama_tools.base_url,
                                 "--env", "QuantArena-OneShot-v0", "--tools", "--env-kwargs", json.dumps(kw),
                                 "--max-tokens", "768", "--out", str(out), "--quiet", "--no-plots"])
    assert r.exit_code == 0, r.output
    run = _tasks(out)["quant_arena"]["runs"][0]
    made, tools = _tool_run_checks(run["transcript"], 2)
    assert sum(1 for t in tools if t["tool"] == "explore" and t["ok"]) <= 1
    fin = run["final"]
    assert fin["status_research"] and 0.0 <= float(run["S"]) <= 100.0
    out2 = tmp_path / "qa_tools_replay"
    _replay_cli(run["transcript"], out2)
    assert _tasks(out2)["quant_arena"]["runs"][0]["S"] == run["S"]
