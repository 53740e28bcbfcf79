"""quantgym's tasks as Inspect AI evals (docs/inspect.md), with Inspect's ``mockllm/model`` provider: no network.

The real-model runs (llama.cpp server, SmolLM2-135M, Inspect's OpenAI-compatible provider) are in
tests/llm_server/test_llama_server.py (they share its server).
"""

from __future__ import annotations

import csv
import json
import math

import pytest

pytest.importorskip("inspect_ai", reason="the Inspect tests need the extra: pip install -e '.[inspect]'")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai._eval.registry import task_create  # noqa: E402
from inspect_ai.model import ModelOutput, get_model  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from quantgym.cli import app  # noqa: E402
from quantgym.integrations.inspect import MISSING_EXTRA, require_inspect  # noqa: E402
from quantgym.integrations.inspect.tasks import TaskArgumentError, argument_names, inspect_tasks  # noqa: E402
from quantgym.leaderboard.metrics import summary_columns  # noqa: E402
from quantgym.leaderboard.sources import ReportError, load_source  # noqa: E402
from quantgym.tasks import get_task, register_task, tasks, unregister_task  # noqa: E402
from tests.llm import pb_script as S  # noqa: E402

PERIOD = "2020-03-02:2020-03-13:weekly"  # two decision dates
PERIOD_1 = "2020-03-02:2020-03-06:weekly"  # one decision date


def _run(name: str, args: dict, tmp_path, model: str | object = "mockllm/model", limit: int | None = None):
    logs = inspect_eval(name, task_args=args, model=model, log_dir=str(tmp_path / "logs"), display="none",
                        limit=limit)
    assert logs[0].status == "success", logs[0].error
    return logs[0]


def _score(sample) -> dict:
    (score,) = sample.scores.values()
    return score


def _req(messages) -> dict:
    return {"messages": [{"role": m.role, "content": m.text} for m in messages]}


def scripted(tool_first: str | None = None):
    """mockllm answers computed from the stage prompt (tests/llm/pb_script.py); with ``tool_first``, each
    stage conversation first calls that tool (when the model is offered tools)."""
    seen: list[list[str]] = []

    def outputs(messages, tools, tool_choice, config):
        seen.append([t.name for t in tools])
        if tool_first and tools and tool_choice != "none" and not any(m.role == "tool" for m in messages):
            return ModelOutput.for_tool_call("mockllm/model", tool_first, {})
        return ModelOutput.from_content("mockllm/model", S.valid(_req(messages)))

    return get_model("mockllm/model", custom_outputs=outputs), seen


def test_every_task_with_an_llm_agent_is_an_inspect_task_with_the_records_arguments():
    made = inspect_tasks()
    assert list(made) == [t.name for t in tasks() if t.llm]
    assert set(made) >= {"portbench", "portbench_qa", "quant_arena", "market_bench"}
    pb = argument_names(get_task("portbench"))
    assert pb[:2] == ["profile", "period"] and {"blind", "tools", "seed", "after"} <= set(pb)
    assert "baseline" not in pb  # quantgym eval's Equal-Weight reference runs: no Inspect meaning
    assert argument_names(get_task("quant_arena"))[0] == "track"
    mb = argument_names(get_task("market_bench"))
    assert mb[:4] == ["strategy", "round", "attempts", "feedback"] and "task_set" in mb
    # a task registered later is an Inspect task too (no hand-written twin)
    qa = get_task("portbench_qa")
    register_task(type(qa)(name="toy_qa", title="Toy QA", envs={"ToyQA-v0": qa.envs["PortBench-QA-v0"]},
                           llm=qa.llm))
    try:
        t = inspect_tasks()["toy_qa"](n_per_template=1, templates="T1")
        assert len(t.dataset) >= 1 and all(str(s.id).startswith("ToyQA-v0") for s in t.dataset)
    finally:
        unregister_task("toy_qa")


@pytest.mark.parametrize("args, words", [
    ({"colour": "red"}, ["takes no argument 'colour'", "profile, period"]),
    ({"profile": "reckless"}, ["profile must be one of conservative, balanced, aggressive", "reckless"]),
    ({"period": "covid_2021"}, ["covid_2021"]),
    ({"seed": "x"}, ["seed takes an integer"]),
    ({"blind": "yes"}, ["blind takes true or false"]),
    ({"structured": "maybe"}, ["structured must be one of"]),
])
def test_a_bad_argument_or_value_is_one_line_naming_what_exists(args, words):
    with pytest.raises(TaskArgumentError) as exc:
        task_create("quantgym/portbench", **args)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("quantgym/portbench")
    assert all(w in msg for w in words), msg


def test_inspect_eval_command_line_refuses_an_unknown_argument_as_a_prerequisite_error(tmp_path):
    """``inspect eval`` prints a PrerequisiteError's message alone (no traceback)."""
    from click.testing import CliRunner as ClickRunner
    from inspect_ai._cli.main import inspect as inspect_cli
    from inspect_ai._util.error import PrerequisiteError

    r = ClickRunner().invoke(inspect_cli, ["eval", "quantgym/portbench", "-T", "colour=red", "--model",
                                           "mockllm/model", "--log-dir", str(tmp_path)])
    assert r.exit_code != 0 and isinstance(r.exception, PrerequisiteError)
    assert "\n" not in str(r.exception) and "takes no argument 'colour'" in str(r.exception)


def test_market_bench_bad_round_and_task_set_are_one_line():
    for args, word in (({"round": 9}, "round"), ({"task_set": "v9"}, "v9"), ({"attempts": "many"}, "attempts")):
        with pytest.raises(TaskArgumentError) as exc:
            task_create("quantgym/market_bench", **args)
        assert "\n" not in str(exc.value) and word in str(exc.value)


def test_without_the_extra_quantgym_says_which_extra_to_install(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "inspect_ai" else real(name, *a))
    with pytest.raises(ImportError) as exc:
        require_inspect()
    assert str(exc.value) == MISSING_EXTRA and "quantgym[inspect]" in MISSING_EXTRA
    (tmp_path / "x.eval").write_bytes(b"PK")
    with pytest.raises(ReportError) as rep:
        load_source(tmp_path)
    assert "\n" not in str(rep.value) and "pip install 'quantgym[inspect]'" in str(rep.value)


@pytest.mark.parametrize("name, args, keys", [
    ("quantgym/portbench", {"period": PERIOD, "profile": "balanced"}, {"ceps", "sharpe", "ret_pct", "maxdd_pct"}),
    ("quantgym/portbench_qa", {"n_per_template": 1, "templates": "T1"}, {"score"}),
    ("quantgym/quant_arena", {"track": "oneshot"}, {"S", "S_in", "S_out", "sharpe"}),
    ("quantgym/market_bench", {"round": 1, "attempts": 1}, {"pass@1", "correct@1"}),
])
def test_mockllm_runs_each_task_end_to_end(name, args, keys, tmp_path):
    log = _run(name, args, tmp_path, limit=2)  # PortBench-QA: two of its questions
    sample = log.samples[0]
    score = _score(sample)
    assert keys <= set(score.value) and score.metadata["rows"][0]["agent"] == "inspect:mockllm/model"
    assert all(isinstance(v, float) for v in score.value.values())
    # the sample's messages are the episode's last model call and its answer; the log has the metrics
    assert sample.messages[-1].role == "assistant" and log.results.scores
    if name.endswith("market_bench"):  # one attempt, run in quantgym's sandbox and scored
        (rec,) = score.metadata["run"]["records"]
        assert rec["sandbox_status"] and rec["status"] in ("SUCCESS", "FAILED")
    src = load_source(tmp_path / "logs")
    assert {r["task"] for r in src.rows} == {name.split("/")[1]} and len(src.rows) == len(log.samples)
    assert set(src.rows[0]) >= set(summary_columns())


def test_same_answers_through_inspect_and_quantgym_eval_give_the_same_scores(tmp_path, monkeypatch):
    """PortBench, two dates: mockllm and a scripted OpenAI-compatible server answer each stage prompt alike
    (tests/llm/pb_script.py); Inspect's score is quantgym eval's summary row, and `quantgym report` puts both
    runs on one leaderboard with the same columns."""
    from tests.llm.server import ScriptedServer

    model, _ = scripted()
    log = _run("quantgym/portbench", {"period": PERIOD, "profile": "balanced",
                                      "transcript": str(tmp_path / "tr")}, tmp_path, model)
    score = _score(log.samples[0])
    srv = ScriptedServer().start()
    srv.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    try:
        r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", srv.base_url,
                                     "--env", "PortBench-Balanced-v0", "--period", PERIOD, "--structured", "off",
                                     "--out", str(tmp_path / "qg"), "--no-plots", "--quiet"])
    finally:
        srv.stop()
    assert r.exit_code == 0, r.output
    run = json.loads((tmp_path / "qg" / "results.json").read_text())["tasks"]["portbench"]["runs"][0]
    assert run["agent"] == "openai:test-model"
    assert all(st["text"]["status"] == "ok" for st in run["steps"])  # every stage answer parsed: real scores
    for k in ("sharpe", "ret_pct", "maxdd_pct", "vol_pct"):
        assert score.value[k] == run["metrics"][k], k
    assert score.value["ceps"] == run["ceps"] > 0
    # the quantgym transcript of the Inspect run replays offline through quantgym eval: the same row again
    (tr,) = (tmp_path / "tr").glob("*.jsonl")
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{tr}", "--env", "PortBench-Balanced-v0", "--period",
                                  PERIOD, "--out", str(tmp_path / "replay"), "--no-plots", "--quiet", "--no-baseline"])
    assert r2.exit_code == 0, r2.output
    with (tmp_path / "replay" / "summary.csv").open() as fh:
        again = next(csv.DictReader(fh))
    assert again["agent"] == "inspect:mockllm/model"
    assert all(math.isclose(score.value[k], float(again[k]), rel_tol=1e-5) for k in ("sharpe", "ceps"))
    # one leaderboard: the Inspect log folder beside the quantgym eval folder
    out = tmp_path / "report"
    r3 = CliRunner().invoke(app, ["report", str(tmp_path / "logs"), str(tmp_path / "qg"), "--out", str(out)])
    assert r3.exit_code == 0, r3.output
    with (out / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    agents = {d["agent"] for d in rows}
    assert {"inspect:mockllm/model", "openai:test-model"} <= agents
    ins = next(d for d in rows if d["agent"] == "inspect:mockllm/model")
    qg = next(d for d in rows if d["agent"] == "openai:test-model")
    assert all(ins[k] == qg[k] for k in ("sharpe", "ret_pct", "ceps", "gate", "period", "profile"))


def test_tool_mode_offers_the_tasks_toolbox_as_inspect_tools_and_the_env_runs_the_calls(tmp_path):
    model, seen = scripted(tool_first="list_universe")
    log = _run("quantgym/portbench", {"period": PERIOD_1, "profile": "balanced", "tools": True}, tmp_path, model)
    offered = next(names for names in seen if names)
    assert "list_universe" in offered and len(offered) >= 5
    run = _score(log.samples[0]).metadata["runs"][0]
    calls = [st["tool"] for st in run["steps"] if st.get("tool")]
    assert calls and all(c["tool"] == "list_universe" and c["ok"] for c in calls)
    assert run["ceps"] is not None


def test_a_score_keeps_every_column_of_the_row_so_every_sample_has_the_same_keys():
    """Inspect's per-key metrics need each key in every sample: an empty cell (an unsolved round's mae) is
    NaN, not missing; text cells are no score."""
    from quantgym.integrations.inspect.tasks import score_values

    solved = score_values("market_bench", {"task": "market_bench", "agent": "a", "pass@1": 1.0, "mae": 0.2,
                                           "track": "x", "gate": None})
    unsolved = score_values("market_bench", {"task": "market_bench", "agent": "a", "pass@1": 0.0, "mae": None,
                                             "track": "x", "gate": None})
    assert set(solved) == set(unsolved) and "mae" in solved and math.isnan(unsolved["mae"])
    assert "track" not in solved and "agent" not in solved and "sharpe" not in solved  # no Sharpe in Market-Bench
    assert "sharpe" in score_values("portbench", {"task": "portbench"})  # NaN when the episode has none
    # no price table under Inspect: the cost columns are no score (Inspect's log holds the tokens)
    pb = score_values("portbench", {"task": "portbench", "sharpe": 0.5, "cost_usd": None, "net_pnl_usd": None,
                                    "pnl_per_cost": None})
    assert pb["sharpe"] == 0.5 and not {"cost_usd", "net_pnl_usd", "pnl_per_cost"} & set(pb)


def test_inspect_command_line_settings_win_over_quantgyms_per_call_settings(tmp_path):
    """quantgym's temperature 0 and per-call cap are sent unless the eval sets its own (``--temperature``)."""
    configs = []

    def outputs(messages, tools, tool_choice, config):
        configs.append(config)
        return ModelOutput.from_content("mockllm/model", S.valid(_req(messages)))

    args = {"period": PERIOD_1, "profile": "balanced"}
    _run("quantgym/portbench", args, tmp_path, get_model("mockllm/model", custom_outputs=outputs))
    assert {c.temperature for c in configs} == {0.0} and all(c.max_tokens for c in configs)
    configs.clear()
    logs = inspect_eval("quantgym/portbench", task_args=args, display="none", log_dir=str(tmp_path / "l2"),
                        model=get_model("mockllm/model", custom_outputs=outputs), temperature=0.7, max_tokens=999)
    assert logs[0].status == "success"
    assert {(c.temperature, c.max_tokens) for c in configs} == {(0.7, 999)}


def test_an_episode_whose_model_answered_no_call_is_a_sample_error_not_a_score(tmp_path):
    def outputs(messages, tools, tool_choice, config):
        raise ConnectionError("model unreachable")

    model = get_model("mockllm/model", custom_outputs=outputs)
    logs = inspect_eval("quantgym/portbench", task_args={"period": PERIOD_1}, model=model,
                        log_dir=str(tmp_path / "logs"), display="none", max_retries=0, retry_on_error=0)
    assert logs[0].status == "error"
    assert "was answered" in logs[0].error.message and "model unreachable" in logs[0].error.message
