"""Quant-Arena tool mode (docs/tools.md): describe_data, explore, submit, freeze on both ids; budgets; the
exploration snippet's point-in-time, blinded view in the sandbox; failures recorded, never raised."""

from __future__ import annotations

import json
import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.blind import bundled_vocabulary
from quantgym.envs.quant_arena.config import ArenaSandboxLimits, ArenaToolConfig
from quantgym.envs.quant_arena.env import QuantArenaEnv
from quantgym.envs.quant_arena.examples import example_source
from quantgym.envs.quant_arena.records import read_record
from quantgym.envs.quant_arena.tools import explore_payload, print_last_expression, research_days
from quantgym.evaluation import evaluate
from tests.tools.scripted import Scripted, call

from .conftest import SMALL_WINDOWS

FAST = ArenaSandboxLimits(day_seconds=10.0, eval_seconds=120.0, cpu_seconds=120.0, memory_mb=4096)
LOWVOL = example_source("low_volatility")


def make(small_real, tmp_path, **kw):
    kw.setdefault("record_dir", tmp_path)
    kw.setdefault("sandbox", FAST)
    return QuantArenaEnv(data=small_real, **SMALL_WINDOWS, tools=True, **kw)


# ---------------------------------------------------------------------- the scripted tool-using policy
@pytest.mark.parametrize("env_id", ["QuantArena-v0", "QuantArena-OneShot-v0"])
def test_scripted_tool_policy_scores_as_the_same_text_submissions(small_real, tmp_path, env_id):
    kw = dict(data=small_real, executor="inprocess", **SMALL_WINDOWS)
    iterative = env_id == "QuantArena-v0"
    text = [LOWVOL, {"freeze": 1}] if iterative else [LOWVOL]
    tools = [call("describe_data"), call("explore", code="view.history('adj_close', 5).shape", day=0),
             call("submit", source=LOWVOL)] + ([call("freeze", candidate=1)] if iterative else [])
    plain = evaluate(env_id, Scripted(text), record_dir=tmp_path / "plain", **kw)
    with_tools = evaluate(env_id, Scripted(tools), record_dir=tmp_path / "tools", tools=True, **kw)
    for key in ("S", "S_in", "S_out", "frozen_candidate", "status_research", "status_sealed"):
        assert with_tools.metrics[key] == plain.metrics[key], key
    assert with_tools.metrics["S"] > 0
    # the answers' rewards are the text answers' rewards; the two information calls give 0
    assert [s["reward"] for s in with_tools.steps[2:]] == [s["reward"] for s in plain.steps]
    assert [s["reward"] for s in with_tools.steps[:2]] == [0.0, 0.0]
    steps = with_tools.steps
    assert [s["tool"]["tool"] for s in steps] == [a["tool"] for a in tools]
    assert all(s["tool"]["ok"] for s in steps)
    assert steps[1]["tool"]["content"].strip() == "(5, 40)"  # the last bare expression is printed
    assert steps[1]["tool_budget"]["explore_left"] == 9
    assert steps[2]["tool"]["calls_left"] == 20  # a stage answer starts a new stage
    assert ("tools" in steps[2]) is iterative and "tools" not in steps[1] and "tools" not in steps[-1]


def test_reset_info_observation_and_record(small_real, tmp_path):
    env = make(small_real, tmp_path, executor="inprocess")
    brief, info = env.reset(seed=0)
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ["describe_data", "explore", "submit", "freeze"] == env.toolbox.names
    assert info["tool_budget"]["calls_left"] == 20 and info["tool_budget"]["explore_left"] == 10
    assert env.tool_budget.calls == 20 and env.tool_budget.chars == 20_000
    assert "## Tools" in brief and "## Tools" in env.render_prompt("minimal")
    obs, r, term, trunc, info = env.step(call("describe_data"))
    assert (r, term, trunc) == (0.0, False, False) and obs == info["tool"]["content"]
    d0, n = research_days(env)
    assert f"{n} decision dates" in obs and "2023-12: day" in obs and "Candidates left: 5" in obs
    assert env.budget_left == 5 and env.candidates == []  # the run did not move
    json_call = json.dumps(call("describe_data"))  # a tool call as JSON text is a tool call too
    assert env.step(json_call)[4]["tool"]["ok"]
    events = read_record(env.record_path)
    assert [e["event"] for e in events] == ["brief", "tool_call", "tool_call"]
    assert events[0]["tools"]["explore_runs"] == 10 and events[1]["call"]["tool"] == "describe_data"
    one = QuantArenaEnv("oneshot", small_real, **SMALL_WINDOWS, tools=True, record_dir=False, executor="inprocess")
    assert one.reset()[1]["tool_budget"] and one.toolbox.names == ["describe_data", "explore", "submit"]


def test_budgets_and_agent_errors_are_results_never_exceptions(small_real, tmp_path):
    env = make(small_real, tmp_path, executor="inprocess", max_candidates=1,
               tool_config=ArenaToolConfig(calls=6, chars=400, explore_runs=1))
    env.reset(seed=0)
    r = env.step(call("describe_data"))[4]["tool"]
    assert r["ok"] and r["truncated"] > 0 and r["content"].endswith(f"[truncated: {r['truncated']} chars]")
    assert r["chars_left"] == 0
    r = env.step(call("describe_data"))[4]["tool"]
    assert not r["ok"] and r["error"] == "budget_exhausted"  # no characters left this stage
    env = make(small_real, tmp_path, executor="inprocess", max_candidates=1,
               tool_config={"calls": 7, "chars": 20_000, "explore_runs": 1})
    env.reset(seed=0)
    outcomes = [env.step(a)[4]["tool"] for a in (
        call("nope"), call("explore"), call("explore", code="1", day="last"), call("explore", code="1", day=999),
        call("explore", code="print(1)"), call("explore", code="print(2)"), call("freeze", candidate=3))]
    assert [o["error"] for o in outcomes] == ["unknown_tool", "bad_arguments", "bad_arguments", "bad_arguments",
                                              None, "budget_exhausted", "tool_error"]
    assert "day must be in 0..42" in outcomes[3]["content"] and outcomes[4]["content"] == "1\n"
    assert "exploration budget exhausted (1 runs per episode)" in outcomes[5]["content"]
    assert "no candidate" in outcomes[6]["content"]
    assert all(o["content"].startswith("error: ") for o in outcomes if not o["ok"])
    assert outcomes[-1]["calls_left"] == 1  # the failed answer used one call; the refused explore none
    obs, reward, term, _, info = env.step(call("submit", source=LOWVOL))
    assert info["tool"]["ok"] and reward > 0 and not term and info["tool"]["calls_left"] == 7
    r = env.step(call("submit", source=LOWVOL))[4]["tool"]
    assert r["error"] == "budget_exhausted" and "call freeze" in r["content"] and len(env.candidates) == 1
    assert r["calls_left"] == 7  # a refused call uses nothing
    for _ in range(7):
        env.step(call("describe_data"))
    r = env.step(call("describe_data"))[4]["tool"]
    assert r["error"] == "budget_exhausted" and "7 calls per stage" in r["content"]
    obs, S, term, _, fin = env.step(call("freeze"))  # an answer is never refused for the call budget
    assert term and fin["tool"]["ok"] and S == fin["S"] > 0
    m = env.episode_result()["metrics"]
    assert m["tool_calls"] == len(env.tool_calls) == 18 and m["explore_runs_used"] == 1
    assert m["tool_error_kinds"] == {"unknown_tool": 1, "bad_arguments": 3, "budget_exhausted": 3, "tool_error": 1}
    assert [c["candidate"] for c in env.tool_calls][-3:] == [2, 2, 2]


def test_check_env_and_pickle_with_tools(small_real, tmp_path):
    env = make(small_real, tmp_path, executor="inprocess")
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    env.step(call("describe_data"))
    clone = pickle.loads(pickle.dumps(env))
    assert clone.toolbox.names == env.toolbox.names and clone._tools.env is clone
    assert clone._tools.state.calls_used == 1
    assert clone.step(call("describe_data"))[4]["tool"]["ok"]


def test_print_last_expression_keeps_line_numbers():
    assert print_last_expression("x = 1\nx + 1").splitlines()[1] == "__explore_value__ = (x + 1)"
    assert print_last_expression("print(1)") == "print(1)"
    assert print_last_expression("x = 1") == "x = 1"
    assert print_last_expression("def f(:") == "def f(:"
    src = print_last_expression("a = 'é'; (a\n + 'b')  # c")
    ns: dict = {}
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(src, ns)
    assert out.getvalue() == "éb\n"


# ---------------------------------------------------------------------- point in time, in the sandbox
def test_explore_payload_holds_no_row_after_the_chosen_date_and_never_the_sealed_window(small_real, tmp_path):
    env = make(small_real, tmp_path)
    env.reset(seed=0)
    d0, n = research_days(env)
    dates = env._research_data().dates
    for day in (0, 7, n - 1, -1, None):
        blk = explore_payload(env, day)["block"]
        j = (n - 1) if day in (None, -1) else day
        assert blk["dates"][-1] == str(dates[d0 + j])
        assert max(blk["dates"]) < SMALL_WINDOWS["sealed_start"]
        for k in ("close", "has_row"):
            assert blk[k].shape[0] == len(blk["dates"])


def test_explore_in_the_sandbox_reads_the_view_up_to_its_date_and_nothing_sealed(small_real, tmp_path):
    env = make(small_real, tmp_path)
    env.reset(seed=0)
    snippet = ("h = view.history('close', view.max_lookback)\n"
               "print(view.date.date(), h.index.min().date(), h.index.max().date(), len(h))\n"
               "print(sorted(str(d.date()) for d in h.index)[-1])")
    r = env.step(call("explore", code=snippet))[4]["tool"]
    assert r["ok"], r
    first, lo, hi, _rows = r["content"].split("\n")[0].split()
    assert first == hi == "2023-12-28" and lo >= SMALL_WINDOWS["warmup_start"]
    assert "2024" not in r["content"]
    # the panel file itself is out of reach: the sandbox refuses it
    from quantgym.envs.quant_arena.data import BUNDLED_DIR

    r = env.step(call("explore", code=f"open({str(BUNDLED_DIR / 'daily_default.parquet')!r}, 'rb').read(10)"))[4]
    assert not r["tool"]["ok"] and r["tool"]["error"] == "tool_error" and "forbidden" in r["tool"]["content"]
    r = env.step(call("explore", code="import os\nos.listdir('/')"))[4]["tool"]
    assert not r["ok"] and "forbidden" in r["content"]


def test_crashing_and_hanging_snippets_are_recorded_failures(small_real, tmp_path):
    env = make(small_real, tmp_path)
    env.reset(seed=0)
    r = env.step(call("explore", code="x = 1\nraise ValueError('no luck')"))[4]["tool"]
    assert not r["ok"] and r["error"] == "tool_error"
    assert "ValueError: no luck (line 2 of <explore>" in r["content"] and "\n" not in r["content"]
    slow = make(small_real, tmp_path, sandbox=ArenaSandboxLimits(import_seconds=2.0, day_seconds=1.0,
                                                                 eval_seconds=10.0, cpu_seconds=10.0))
    slow.reset(seed=0)
    obs, reward, term, trunc, info = slow.step(call("explore", code="while True:\n    pass"))
    r = info["tool"]
    assert not r["ok"] and r["error"] == "tool_error" and "timeout" in r["content"]
    assert (reward, term, trunc) == (0.0, False, False) and info["tool_budget"]["explore_left"] == 9
    events = read_record(slow.record_path)
    assert events[-1]["event"] == "tool_call" and events[-1]["call"]["ok"] is False
    assert events[-1]["explore_used"] == 1


def test_blind_tool_results_carry_no_date_code_or_period(small_real, tmp_path):
    vocab = bundled_vocabulary(["quant_arena"])
    env = make(small_real, tmp_path, blind=True)
    env.reset(seed=3)
    snippet = ("print(view.date, list(view.symbols)[:40])\nprint(view.info.to_string())\n"
               "for f in view.fields:\n    print(view.history(f, 3).to_string())")
    results = [env.step(call("describe_data"))[4]["tool"], env.step(call("explore", code=snippet))[4]["tool"],
               env.step(call("submit", source=LOWVOL))[4]["tool"], env.step(call("freeze"))[4]["tool"]]
    assert all(r["ok"] for r in results), results
    assert [r["tool"] for r in results] == ["describe_data", "explore", "submit", "freeze"]
    for r in results:
        assert vocab.scan(r["content"]) == [], (r["tool"], vocab.scan(r["content"])[:3])
    assert results[1]["content"].startswith("42 ['")  # the last research decision date as a relative day
    named = make(small_real, tmp_path)
    named.reset(seed=3)
    kinds = {k.kind for k in vocab.scan(named.step(call("explore", code=snippet))[4]["tool"]["content"])}
    assert {"date", "ticker"} <= kinds  # the scan finds what the named view shows
