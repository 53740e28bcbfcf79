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
    # summary.csv extras (issue #16): the paper's overall figures; no unbiased estimate (stop at first success)
    extra = {r.agent: r.extra for r in res.rows}
    assert extra["reference"]["pass@3"] == extra["reference"]["correct@1"] == 1.0 and extra["reference"]["mae"] == 0.0
    assert extra["stub_zeros"]["pass@1"] == 1.0 and extra["stub_zeros"]["correct@3"] == 0.0
    assert extra["reference"]["pass@1_unbiased"] is None and "first success" in res.extra["unbiased_note"]
    to_jsonable(res.extra)  # results.json-ready
