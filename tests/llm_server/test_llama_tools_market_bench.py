"""One Market-Bench attempt in tool mode (docs/llm-agents.md §10) on the real llama.cpp server with SmolLM2-135M
(fixture ``llama_tools``, conftest.py). A module of its own so that pytest-xdist (``--dist loadfile``) can run it
on the other worker than the PortBench and Quant-Arena tool tests (test_llama_tools.py). Marked ``slow``.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ._helpers import tasks as _tasks
from .conftest import MISSING, REQUIRED

if MISSING and not REQUIRED:  # one skip line for the module (under REQUIRED the fixtures fail instead)
    pytest.skip(MISSING, allow_module_level=True)

from quantgym.cli import app
from quantgym.envs.market_bench.scoring import FAILED, SUCCESS

from .test_llama_tools import _replay_cli, _tool_run_checks

pytestmark = pytest.mark.slow


def test_tool_mode_market_bench_attempt(llama_tools, tmp_path):
    """One Market-Bench attempt in tool mode (peek, a draft run, submit offered): the attempt is scored whatever
    the model calls, the draft budget holds, and the replay gives the same records.

    The minimal prompt (about 1,700 tokens with the tool declarations, the full one about 2,900): evaluating
    the prompt is most of a call's time on one thread, and one fixed style keeps every call of the stage
    conversation an extension of the one before, so the server reuses the evaluated prefix. With
    ``--prompt-style auto`` the 4,096-token window is learned from a context error and the style steps down
    between calls, each step a new prefix to evaluate (docs/llm-agents.md §8.3), and a call that overruns the
    window fails only once the tool call's arguments have filled it (``chatml-function-calling`` generates
    them without the request's ``max_tokens``)."""
    out = tmp_path / "mb_tools"
    kw = {"tool_config": {"calls": 2, "chars": 2000, "draft_runs": 1}}
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:smollm2", "--base-url", llama_tools.base_url,
                                 "--env", "MarketBench-Scheduled-v0", "--round", "1", "--attempts", "1", "--tools",
                                 "--env-kwargs", json.dumps(kw), "--max-tokens", "256", "--prompt-style", "minimal",
                                 "--out", str(out), "--quiet", "--no-plots"])
    assert r.exit_code == 0, r.output
    mb = _tasks(out)["market_bench"]
    run = mb["runs"][0]
    made, tools = _tool_run_checks(run["transcript"], 2, answer_tools=("submit",))
    # the draft budget: one draft ran at most, whatever its outcome (a refused call reads budget_exhausted)
    assert sum(1 for t in tools if t["tool"] == "run_draft" and t["error"] != "budget_exhausted") <= 1
    assert len(run["records"]) == 1 and run["records"][0]["status"] in (SUCCESS, FAILED)
    out2 = tmp_path / "mb_tools_replay"
    _replay_cli(run["transcript"], out2)
    assert _tasks(out2)["market_bench"]["scores"] == mb["scores"]
