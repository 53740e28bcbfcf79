"""The bench section end to end on a reduced job list: pass@k beside correct@k in tables and results."""

import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.progress import Progress

from quantgym.envs.market_bench import bench
from quantgym.envs.market_bench.agents import MUTANTS, MutantAgent, ReferenceAgent, StubAgent
from quantgym.results import to_jsonable


def test_bench_section_reports_correct_at_k_beside_pass_at_k(monkeypatch, tmp_path):
    lifo = next(m for m in MUTANTS if m.name == "lifo")
    jobs = [(ReferenceAgent(), "scheduled", 1), (StubAgent(), "scheduled", 1),
            (MutantAgent(lifo), "scheduled", 1), (MutantAgent(lifo), "scheduled", 2)]
    monkeypatch.setattr(bench, "default_jobs", lambda *a, **k: jobs)
    out = io.StringIO()
    ctx = SimpleNamespace(out_dir=Path(tmp_path), console=Console(file=out, width=200), progress=Progress(),
                          options={"plots": False})
    res = bench.run_section(ctx)
    text = out.getvalue()
    assert "c@3" in text and "c@1" in text and "p@3" in text
    scores = {(r["agent"], r["strategy"]): r for r in res.extra["scores"]}
    ref, stub = scores[("reference", "scheduled")], scores[("stub_zeros", "scheduled")]
    assert ref["pass@1"] == ref["correct@1"] == ref["correct@3"] == 1.0
    # the stub passes the paper's test and fails correctness
    assert stub["pass@1"] == stub["pass@3"] == 1.0 and stub["correct@1"] == stub["correct@3"] == 0.0
    # lifo: MAE > 0 on round 1 (not correct), MAE 0 on round 2 (correct there)
    lifo_runs = {r["round"]: r for r in res.runs if r["agent"] == "mutant:scheduled/lifo"}
    assert lifo_runs[1]["mae"] > 0 and lifo_runs[1]["correct"] is False and lifo_runs[1]["reward"] < 0.5
    assert lifo_runs[2]["mae"] == 0.0 and lifo_runs[2]["correct"] is True and lifo_runs[2]["reward"] == 1.0
    assert scores[("mutant:scheduled/lifo", "scheduled")]["correct@1"] == 0.5
    assert "correct@k" in res.extra["metrics_note"]
    # summary.csv extras: the paper's overall figures; no unbiased estimate (stop at first success)
    extra = {r.agent: r.extra for r in res.rows}
    assert extra["reference"]["pass@3"] == extra["reference"]["correct@1"] == 1.0 and extra["reference"]["mae"] == 0.0
    assert extra["stub_zeros"]["pass@1"] == 1.0 and extra["stub_zeros"]["correct@3"] == 0.0
    assert extra["reference"]["pass@1_unbiased"] is None and "first success" in res.extra["unbiased_note"]
    to_jsonable(res.extra)  # results.json-ready


def test_bench_section_runs_the_task_set_of_its_options(monkeypatch, tmp_path):
    import pytest

    jobs = [(ReferenceAgent(), "pairs", 1), (StubAgent(), "pairs", 1)]
    monkeypatch.setattr(bench, "default_jobs", lambda *a, **k: jobs)
    out = io.StringIO()
    ctx = SimpleNamespace(out_dir=Path(tmp_path), console=Console(file=out, width=200), progress=Progress(),
                          options={"plots": False, "task_set": "v2"})
    res = bench.run_section(ctx)
    assert "Market-Bench v2 — pairs" in out.getvalue()
    assert {r.period for r in res.rows} == {"v2"} and res.extra["task_version"] == "v2"
    ref = next(r for r in res.runs if r["agent"] == "reference")
    assert ref["mae"] == 0.0 and ref["correct"] is True
    with pytest.raises(ValueError, match="unknown Market-Bench task set"):
        bench.validate({"task_set": "v3"})
    bench.validate({})  # default v1


class _ReferenceEvalAgent:
    """The reference agent behind quantgym eval's agent interface (no LLM calls)."""

    name = "reference"
    current_episode = "ep"
    logs: dict = {}

    def reset(self, env):
        pass

    def act(self, obs, info):
        return ReferenceAgent().act(obs)

    def episode_usage(self, label=None):  # as an LLM agent's: default the current episode
        return {}

    def usage(self):
        return {}


def test_eval_adapter_takes_the_task_set_from_env_kwargs():
    # quantgym eval --env MarketBench-Pairs-v0 --env-kwargs '{"task_set": "v2"}'
    from quantgym.envs.market_bench.eval import _section, run_market_bench
    from quantgym.evaluation import EvalPlan

    plan = EvalPlan(env_ids=["MarketBench-Pairs-v0"], options={"rounds": [3]}, env_kwargs={"task_set": "v2"})
    run = run_market_bench(_ReferenceEvalAgent(), "MarketBench-Pairs-v0", 3, plan)
    assert run["records"][0]["mae"] == 0.0 and run["round_record"]["task_version"] == "v2"
    sec = _section([run], _ReferenceEvalAgent(), plan, None)
    assert sec.rows[0].period == "v2" and sec.extra["task_version"] == "v2"
