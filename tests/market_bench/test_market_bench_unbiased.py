"""``--attempts n`` keeps all n attempts; the unbiased pass@k / correct@k sit beside the
paper's sequential pass@k, which is unchanged; summary.csv, results and the report carry them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from quantgym.envs.market_bench.agents import ReferenceAgent, StubAgent
from quantgym.envs.market_bench.bench import records_to_attempts
from quantgym.envs.market_bench.eval import _section, run_market_bench
from quantgym.envs.market_bench.scoring import (FAILED, SUCCESS, AttemptRecord, first_success_prefix,
                                                summary_extra, unbiased_table)
from quantgym.evaluation import EvalPlan
from quantgym.results import SUMMARY_COLUMNS, write_summary_csv
from quantgym.stats.passk import pass_at_k

ENV = "MarketBench-Scheduled-v0"


class ScriptAgent:
    """Answers attempt i of every round with ``script[i]``: "stub", "ref" or "fail"."""

    name = "script"

    def __init__(self, script):
        self.script, self.logs, self.current_episode, self._n = script, {}, None, 0

    def reset(self, env):
        self._n += 1
        self.current_episode, self.i = f"ep{self._n}", 0

    def act(self, obs, info):
        what = self.script[self.i]
        self.i += 1
        if what == "ref":
            return ReferenceAgent().act(obs)
        if what == "stub":
            return StubAgent().act(obs)
        return "def run_backtest(inputs):\n    raise RuntimeError('no')\n"

    def episode_usage(self, label=None):  # as an LLM agent's: default the current episode
        return {}

    def usage(self):
        return {}


def _runs(plan):
    agent = ScriptAgent(["stub", "ref", "fail", "ref"])
    return agent, [run_market_bench(agent, ENV, r, plan) for r in plan.options["rounds"]]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    keep = EvalPlan(env_ids=[ENV], options={"rounds": [1, 2], "attempts": 4, "all_attempts": True})
    paper = EvalPlan(env_ids=[ENV], options={"rounds": [1, 2], "attempts": 4})
    return (keep, *_runs(keep)), (paper, *_runs(paper))


def test_all_attempts_kept_and_unbiased_estimates_beside_unchanged_sequential(both, tmp_path):
    (keep, agent, runs), (paper, agent2, runs_p) = both
    assert all(run["all_attempts"] for run in runs) and not any(run["all_attempts"] for run in runs_p)
    assert [len(run["records"]) for run in runs] == [4, 4]  # no stop at the first (stub) success
    assert [len(run["records"]) for run in runs_p] == [1, 1]  # the paper's protocol: stop at the first success
    out = io.StringIO()
    sec = _section(runs, agent, keep, Console(file=out, width=220))
    sec_p = _section(runs_p, agent2, paper, None)
    # the paper's sequential table is the same number for number
    assert json.dumps(sec.extra["scores"]) == json.dumps(sec_p.extra["scores"])
    # n = 4 attempts: c = 3 ran (stub, ref, ref), 2 correct (ref, ref)
    u = {r["strategy"]: r for r in sec.extra["unbiased"]}["overall"]
    assert u["pass@1_unbiased"] == pytest.approx(0.75) and u["correct@1_unbiased"] == pytest.approx(0.5)
    assert u["pass@3_unbiased"] == 1.0 and u["correct@3_unbiased"] == pytest.approx(pass_at_k(4, 2, 3))
    assert u["reason"] is None and u["n_min"] == 4 and u["n_rounds"] == 2
    row = sec.rows[0].extra
    assert row["pass@1"] == 1.0 and row["correct@1"] == 0.0  # the stub "solves" attempt 1 (paper's rule)
    assert row["pass@1_unbiased"] == pytest.approx(0.75) and row["n_attempts"] == 4
    assert "Unbiased pass@k" in out.getvalue() and "0.75" in out.getvalue()
    assert all(v is None for k, v in sec_p.rows[0].extra.items() if k.endswith(("_unbiased", "_lo", "_hi")))
    assert "first success" in sec_p.extra["unbiased_note"]
    write_summary_csv(tmp_path / "summary.csv", sec.rows)
    header = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    assert header[:len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)
    assert header[len(SUMMARY_COLUMNS):len(SUMMARY_COLUMNS) + 6] == ["pass@1", "pass@3", "correct@1", "correct@3",
                                                                    "mae", "n_attempts"]


def test_report_shows_the_unbiased_table(both, tmp_path):
    from quantgym.results import to_jsonable
    from quantgym.sweep.report import build_report

    (keep, agent, runs), _ = both
    sec = _section(runs, agent, keep, None)
    d = tmp_path / "res"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(to_jsonable({"meta": {"command": "eval"},
                                                            "tasks": {"market_bench": sec.extra}})))
    rep = build_report([d], tmp_path / "rep")
    t = next(t for s in rep.sections for t in s.tables if t.title == "Market-Bench — unbiased pass@k / correct@k")
    overall = next(r for r in t.rows if r[1] == "overall")
    assert overall[4].startswith("0.75 [") and t.columns[4] == "pass@1 [95 % CI]"


def test_repair_mode_and_stopped_episodes_give_a_reason_not_numbers():
    from quantgym.envs.market_bench.eval import not_samples_reason

    assert "repair mode" in not_samples_reason([{"all_attempts": True}], True)
    assert "first success" in not_samples_reason([{"all_attempts": False}], False)
    assert not_samples_reason([{"all_attempts": True}], False) is None


def test_first_success_prefix_and_summary_extra_on_a_hand_table():
    A = AttemptRecord
    att = [A("x", "pairs", 1, 1, FAILED), A("x", "pairs", 1, 2, SUCCESS, 0.5, correct=False),
           A("x", "pairs", 1, 3, SUCCESS, 0.0, correct=True), A("x", "pairs", 2, 1, FAILED),
           A("x", "pairs", 2, 2, FAILED), A("x", "pairs", 2, 3, FAILED)]
    pre = first_success_prefix(att)
    assert [(a.round, a.attempt) for a in pre] == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]
    ex = summary_extra(pre, unbiased_table(att), "x")
    assert ex["pass@1"] == 0.0 and ex["pass@3"] == 0.5 and ex["correct@3"] == 0.0 and ex["mae"] == 0.5
    assert ex["pass@1_unbiased"] == pytest.approx((2 / 3 + 0) / 2) and ex["correct@3_unbiased"] == 0.5
    short = [A("y", "pairs", 1, 1, SUCCESS, 0.0, correct=True), A("y", "pairs", 2, 1, FAILED)]  # K = 1
    assert summary_extra(short, unbiased_table(short), "y")["pass@3"] is None
    solved_early = [A("z", "pairs", 1, 1, SUCCESS, 0.0, correct=True), A("z", "pairs", 2, 2, SUCCESS, 1.0)]
    assert summary_extra(solved_early, unbiased_table(solved_early), "z")["pass@3"] == 1.0
    recs = [dict(agent="x", strategy="pairs", round=1, attempt=1, status=SUCCESS, mae=0.0, reason="",
                 sandbox_status="ok", path_corr=None, max_rel_error=None, correct=True)]
    assert records_to_attempts(recs)[0].correct is True


def test_eval_cli_attempts_sets_all_attempts(monkeypatch, tmp_path):
    """``--attempts n`` asks for every attempt; without it the plan is the paper's (K = 3, stop at success)."""
    from typer.testing import CliRunner

    from quantgym.cli import app
    from quantgym.agents.llm import dryrun

    seen = []
    monkeypatch.setattr(dryrun, "dry_run_plan", lambda spec, plan, **kw: seen.append(plan) or {"tasks": []})
    monkeypatch.setattr(dryrun, "render_plan", lambda report, console: None)
    for args in ([], ["--attempts", "5"]):
        r = CliRunner().invoke(app, ["eval", "--agent", "openai:m", "--env", ENV, "--round", "1", "--dry-run",
                                     "--out", str(tmp_path / "o"), *args])
        assert r.exit_code == 0, r.output
    assert len(seen) == 2  # both runs reached the dry-run planner
    from quantgym.envs.market_bench.eval import MarketBenchPlan

    paper, every = (MarketBenchPlan.of(p) for p in seen)
    assert (paper.rounds, paper.attempts, paper.all_attempts) == ((1,), 3, False)
    assert (every.attempts, every.all_attempts) == (5, True) and seen[1].options["all_attempts"] is True
