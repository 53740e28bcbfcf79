"""One evaluation loop and one source for each value between the CLI and the tasks: every episode runs in
``quantgym.evaluation.evaluate``; ``--agent`` is parsed once (``AgentSpec``) and ``run_eval`` takes built
agents; one transcript-path scheme; ``records`` reach results.json; a plain-function baseline is keyed by
its command-line name. The coin task below is the one docs/tasks.md writes."""

from __future__ import annotations

import csv
import json
import re
import sys

import gymnasium as gym
import pytest

import quantgym.tasks as qt
from quantgym.evaluation import evaluate
from quantgym.plan import EvalPlan, run_eval
from quantgym.results import SectionResult, write_results
from quantgym.spaces import AnyText

_M = __name__


class CoinEnv(gym.Env):
    """docs/tasks.md's minimal task, with two attempt records."""

    task_name = "coin"

    def __init__(self):
        self.observation_space = self.action_space = AnyText(max_length=100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._r = None
        return "heads or tails?", {}

    def step(self, action):
        self._r = float(str(action).strip() == "heads")
        return "", self._r, True, False, {"answer": str(action)}

    def episode_result(self):
        return {"metrics": {"score": self._r, "sharpe": self._r}, "period": "toy",
                "records": [{"attempt": 1, "answer": "heads"}, {"attempt": 2, "answer": "tails"}]}


class CoinEval:
    def jobs(self, env_id, agent, plan, ctx):
        return [(env_id, lambda: {"result": evaluate(env_id, ctx.new_agent(), seed=plan.seed)})]

    def section(self, runs, agent, plan, ctx):
        return SectionResult(task="coin", rows=[r["result"].summary_row() for r in runs],
                             runs=[r["result"].to_dict() for r in runs])


ADAPTER = CoinEval()


def make_baseline(name):  # a plain function, as docs/tasks.md writes it
    if name != "heads":
        raise ValueError(f"unknown coin agent {name!r}; choose from heads")
    return lambda obs, info: "heads"


@pytest.fixture
def coin():
    task = qt.Task(name="coin", title="Coin", envs={"Coin-v0": (f"{_M}:CoinEnv", {})}, eval=f"{_M}:ADAPTER",
                   baselines=f"{_M}:make_baseline", docs="docs/tasks.md")
    qt.register_task(task)
    yield task
    qt.unregister_task("coin")


def test_records_reach_results_json(coin, tmp_path):
    res = evaluate("Coin-v0", lambda obs, info: "heads")
    assert res.to_dict()["records"] == [{"attempt": 1, "answer": "heads"}, {"attempt": 2, "answer": "tails"}]
    assert res.info == {"answer": "heads"}  # the last step's info as the env gave it
    write_results(tmp_path, [SectionResult(task="coin", rows=[res.summary_row()], runs=[res.to_dict()])])
    run = json.loads((tmp_path / "results.json").read_text())["tasks"]["coin"]["runs"][0]
    assert [r["answer"] for r in run["records"]] == ["heads", "tails"]


def test_a_plain_function_baseline_is_keyed_by_its_command_line_name(coin, tmp_path):
    from typer.testing import CliRunner

    from quantgym.cli import app

    out = tmp_path / "e"
    r = CliRunner().invoke(app, ["eval", "--agent", "heads", "--env", "Coin-v0", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    with open(out / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [row["agent"] for row in rows] == ["heads"]  # not "function"
    run = json.loads((out / "results.json").read_text())["tasks"]["coin"]["runs"][0]
    assert run["agent"] == run["agent_key"] == "heads"


def test_the_agent_spec_is_parsed_once_into_one_shape():
    from quantgym.agents.registry import AgentSpec

    spec = AgentSpec.parse("openai:org/model:latest")
    assert (spec.scheme, spec.argument, spec.model, spec.is_llm) == ("openai", "org/model:latest",
                                                                     "org/model:latest", True)
    assert AgentSpec.parse(spec) is spec and str(spec) == "openai:org/model:latest"
    plain = AgentSpec.parse("equal_weight")
    assert (plain.scheme, plain.argument, plain.is_llm, plain.model) == (None, "equal_weight", False, None)
    assert AgentSpec.parse("replay:run.jsonl").is_llm and AgentSpec.parse("sb3:m.zip").scheme == "sb3"


def test_the_generic_layers_import_nothing_from_the_agents():
    import subprocess

    code = ("import sys, quantgym.evaluation, quantgym.plan, quantgym.results; "
            "print(sorted(m for m in sys.modules if m.startswith('quantgym.agents')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import inspect

    import quantgym.evaluation
    import quantgym.plan

    for mod in (quantgym.evaluation, quantgym.plan):
        assert "quantgym.agents" not in inspect.getsource(mod).replace(":func:`quantgym.agents", "")


def test_run_eval_takes_built_agents(coin, tmp_path):
    from quantgym.agents.registry import make_eval_agents

    plan = EvalPlan(env_ids=["Coin-v0"], plots=False)
    built: list = []

    def fresh(task):
        built.append(task)
        return make_baseline("heads")

    (sec,) = run_eval({"coin": make_baseline("heads")}, plan, tmp_path / "a", new_agent=fresh)
    assert built == ["coin"] and sec.rows[0].sharpe == 1.0
    agents, new_agent = make_eval_agents("heads", plan, tmp_path / "b")
    assert agents["coin"].key == "heads" and new_agent("coin").key == "heads"
    with pytest.raises(ValueError, match="unknown coin agent"):
        make_eval_agents("tails", plan, tmp_path / "c")


def test_one_transcript_path_scheme(tmp_path):
    from quantgym.agents.llm.transcript import transcript_path

    a = transcript_path(tmp_path, "portbench", "org/model:7b")
    b = transcript_path(tmp_path, "portbench", "org/model:7b")
    assert a != b and a.parent == tmp_path and a.name.startswith("portbench-org_model_7b-")
    assert a.suffix == ".jsonl"
    assert transcript_path(tmp_path, "portbench", "m", run="abc123").name == "portbench-m-abc123.jsonl"


def test_every_command_names_transcripts_with_the_one_helper():
    """No module builds a transcript file name of its own (``.jsonl`` paths come from transcript_path)."""
    from pathlib import Path

    import quantgym

    root = Path(quantgym.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        text = path.read_text()
        if path.name == "transcript.py":
            continue
        if re.search(r'"transcripts"\s*/\s*f?"', text):  # the folder joined with a file name of its own
            offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_a_sweep_run_goes_through_evaluate(coin):
    from quantgym.sweep.grid import RunSpec
    from quantgym.sweep.runs import execute_run

    rec = execute_run(RunSpec(agent="heads", env_id="Coin-v0", env_kwargs={}, seed=0).to_dict())
    assert rec["status"] == "ok", rec["error"]
    assert rec["summary"]["agent"] == "heads" and rec["summary"]["period"] == "toy"
    assert [r["attempt"] for r in rec["result"]["records"]] == [1, 2] and rec["result"]["metrics"]["score"] == 1.0


def test_evaluate_summarises_an_env_of_no_task_only_when_asked():
    res = evaluate("CartPole-v1", lambda obs, info: 0, seed=0, any_env=True)
    assert res.task == "other" and res.metrics["n_steps"] == len(res.steps) > 0
    assert res.metrics["total_reward"] == sum(s["reward"] for s in res.steps)
    with pytest.raises(TypeError, match="does not implement episode_result"):
        evaluate("CartPole-v1", lambda obs, info: 0)
