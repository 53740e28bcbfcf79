"""``quantgym report`` on PortBench-QA and Market-Bench outputs: their metrics live in results.json only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from quantgym.sweep.report import build_report

MB_FIXTURE = Path(__file__).parent / "fixtures" / "market_bench_small"


def _section(md: str, title: str) -> str:
    return md.split(f"### {title}")[1].split("\n### ")[0].split("\n## ")[0]


def _cells(block: str, agent: str) -> list[str]:
    line = next(x for x in block.splitlines() if f"| {agent} |" in x)
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.fixture(scope="module")
def qa_dir(tmp_path_factory):
    """A real ``quantgym qa --agent oracle --agent naive --n 5`` output."""
    from quantgym.envs.portbench.static_qa.cli import register

    app = typer.Typer()
    register(app)

    @app.callback()
    def _root():
        pass

    out = tmp_path_factory.mktemp("qa")
    res = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--agent", "naive", "--n", "5", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_report_shows_the_qa_per_template_table_from_results_json(qa_dir, tmp_path):
    rep = build_report([qa_dir], tmp_path / "rep")
    md = rep.markdown_path.read_text()
    assert "## PortBench-QA" in md and "## Other tasks" not in md
    block = _section(md, "PortBench-QA — accuracy per template")
    head = [c.strip() for c in block.strip().splitlines()[0].strip("|").split("|")]
    assert head[:16] == ["#", "agent", "T1", "T2", "T3", "T4", "T5", "T6", "T7", "Mean", "T4_r", "T5_r", "F", "J",
                         "Bull", "Bear"]
    runs = {r["agent"]: r for r in json.loads((qa_dir / "results.json").read_text())["tasks"]["portbench_qa"]["runs"]}
    for agent in ("oracle", "naive"):
        row = dict(zip(head, _cells(block, agent)))
        for col in ("T1", "T3", "T7", "Mean", "T4_r", "F", "J", "Bull"):
            assert row[col] == f"{runs[agent]['metrics'][col]:.3f}", (agent, col)
        assert row["items"] == "35"  # 5 per template x 7 templates
    assert _cells(block, "oracle")[0] == "1"  # sorted by Mean: the oracle first
    assert runs["naive"]["metrics"]["Mean"] < 1.0
    html = rep.html_path.read_text()
    assert 'id="pbqa-table"' in html and "PortBench-QA" in html


def test_report_market_bench_pass_at_k_and_mae_from_results_json(tmp_path):
    rep = build_report([MB_FIXTURE], tmp_path / "rep")
    md = rep.markdown_path.read_text()
    block = _section(md, "Market-Bench — overall")
    head = [c.strip() for c in block.strip().splitlines()[0].strip("|").split("|")]
    assert head == ["#", "agent", "pass@3", "pass@1", "correct@3", "correct@1", "mean MAE (solved)", "avg attempt"]
    scores = [x for x in json.loads((MB_FIXTURE / "results.json").read_text())["tasks"]["market_bench"]["scores"]
              if x["strategy"] == "overall"]
    assert len([ln for ln in block.splitlines() if ln.startswith("| ") and "agent" not in ln]) == len(scores)
    for x in scores:
        row = dict(zip(head, _cells(block, x["agent"])))
        assert row["pass@3"] == f"{x['pass@3']:.2f}" and row["correct@1"] == f"{x['correct@1']:.2f}"
        assert row["mean MAE (solved)"] == f"{x['mean_mae_solved']:.3g}"
    assert dict(zip(head, _cells(block, "stub_zeros")))["correct@3"] == "0.00"  # "solved" but wrong
    for strat in ("scheduled", "pairs", "delta_hedge"):
        assert f"### Market-Bench — {strat}" in md
    png = tmp_path / "rep" / "img" / "market_bench_passk.png"  # the plot people look at instead of the table
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "img/market_bench_passk.png" in md
    assert "market_bench_passk" in rep.html_path.read_text()


def test_report_market_bench_recomputes_scores_from_runs(tmp_path):
    src = tmp_path / "mb"
    shutil.copytree(MB_FIXTURE, src)
    doc = json.loads((src / "results.json").read_text())
    stored = {x["agent"]: x for x in doc["tasks"]["market_bench"].pop("scores") if x["strategy"] == "overall"}
    (src / "results.json").write_text(json.dumps(doc))
    md = build_report([src], tmp_path / "rep").markdown_path.read_text()
    block = _section(md, "Market-Bench — overall")
    head = [c.strip() for c in block.strip().splitlines()[0].strip("|").split("|")]
    for agent in ("reference", "stub_zeros"):  # the fixture keeps these two agents' attempt records
        row = dict(zip(head, _cells(block, agent)))
        assert row["pass@3"] == f"{stored[agent]['pass@3']:.2f}"
        assert row["mean MAE (solved)"] == f"{stored[agent]['mean_mae_solved']:.3g}"


def test_report_with_qa_and_market_bench_together(qa_dir, tmp_path):
    rep = build_report([qa_dir, MB_FIXTURE], tmp_path / "rep")
    assert [s.title for s in rep.sections] == ["PortBench-QA", "Market-Bench"]
    assert len(rep.rows) == 2 + 8


def test_report_qa_rows_without_results_json_say_so(qa_dir, tmp_path):
    src = tmp_path / "qa_csv_only"
    src.mkdir()
    shutil.copy(qa_dir / "summary.csv", src / "summary.csv")
    rep = build_report([src], tmp_path / "rep")
    sec = next(s for s in rep.sections if s.title == "PortBench-QA")
    assert not sec.tables and "no per-template accuracies" in sec.notes[0]
