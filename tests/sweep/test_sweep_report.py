"""``quantgym report``: merged leaderboard from real bench / eval / sweep outputs."""

from __future__ import annotations

import base64
import json
import re

import pytest
from typer.testing import CliRunner

from quantgym.results import SUMMARY_COLUMNS, read_summary_csv
from quantgym.sweep.report import ReportError, build_report, load_source


def test_report_merges_all_inputs_into_markdown_html_csv(report, bench_dir, eval_dir, local_sweep):
    n_rows = sum(len(read_summary_csv(d / "summary.csv")) for d in (bench_dir, eval_dir, local_sweep.out_dir))
    merged = read_summary_csv(report.csv_path)
    assert len(merged) == len(report.rows) == n_rows
    assert list(merged[0]) == [*SUMMARY_COLUMNS, "source"]
    assert {r["source"] for r in merged} == {bench_dir.name, eval_dir.name, local_sweep.out_dir.name}
    md = report.markdown_path.read_text()
    for text in ("## PortBench", "### PortBench — Conservative (drawdown tolerance 10%)",
                 "### PortBench — Aggressive (drawdown tolerance 35%)", "Equal-Weight", "Risk Parity", "trend-x5",
                 "trend-x20", "Δ vs EqW", "## All rows"):
        assert text in md, text
    for fig in ("portbench_nav", "portbench_stages", "portbench_stress_dd", "portbench_sharpe_vs_eqw"):
        png = (report.markdown_path.parent / "img" / f"{fig}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and f"(img/{fig}.png)" in md


def test_leaderboard_numbers_come_from_the_inputs(report, bench_dir):
    md = report.markdown_path.read_text()
    cons = md.split("### PortBench — Conservative")[1].split("###")[0]
    bench = {r["agent"]: r for r in read_summary_csv(bench_dir / "summary.csv")}
    # EqW's covid Sharpe is the mean of its identical bench and sweep runs; Δ vs EqW of EqW is 0
    eqw = next(line for line in cons.splitlines() if "| Equal-Weight |" in line).split("|")
    assert f"{float(bench['equal_weight']['sharpe']):.3f}" in [c.strip() for c in eqw]
    assert "0.000" in [c.strip() for c in eqw]
    # gates: only covid_2020 was run, so the 3-window stress gate is unknown unless a window fails
    rp = next(line for line in cons.splitlines() if "| Risk Parity |" in line)
    assert "✓" not in rp


def test_html_is_self_contained(report):
    page = report.html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert not re.search(r'(src|href)="(?!data:|#)', page), "external reference in the page"
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(imgs) >= 4 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in imgs)
    assert page.count('<table class="lb"') == 5  # inputs, conservative, aggressive, uncertainty, all rows


def test_stage_scores_and_band_only_with_stage_scored_agents(tmp_path, bench_dir):
    rep = build_report([bench_dir], tmp_path)
    names = [f.name for s in rep.sections for f in s.figures]
    assert "portbench_stages" not in names and "portbench_nav" in names
    assert "No stage-scored" in rep.markdown_path.read_text()


def test_partial_sweep_folder_is_read_from_its_run_files(tmp_path, local_sweep):
    import shutil

    part = tmp_path / "partial"
    shutil.copytree(local_sweep.out_dir / "runs", part / "runs")
    src = load_source(part)
    assert len(src.rows) == 4 and "portbench" in src.doc["tasks"]


def test_other_tasks_results_with_missing_fields_are_tolerated(tmp_path):
    """Quant-Arena / Market-Bench sections read what is there and skip what is not."""
    d = tmp_path / "other"
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"meta": {"command": "bench"}, "tasks": {
        "quant_arena": {"runs": [{"agent": "low_volatility", "S": 52.7, "sealed": {"sharpe": 1.3}},
                                 {"agent": "market_reference"}]},
        "market_bench": {"scores": [{"agent": "reference", "strategy": "overall", "pass@3": 1.0,
                                     "mean_mae_solved": 0.0, "rank": 1}]}}}))
    rep = build_report([d], tmp_path / "rep")
    titles = [t.title for s in rep.sections for t in s.tables]
    assert "Quant-Arena — sealed window" in titles and "Market-Bench — overall" in titles
    md = rep.markdown_path.read_text()
    assert "| low_volatility |" in md and "| 1.00 |" in md


def test_bad_inputs_give_clear_errors(tmp_path):
    with pytest.raises(ReportError, match="not a quantgym results folder"):
        build_report([tmp_path], tmp_path / "out")
    with pytest.raises(ReportError, match="not a folder"):
        build_report([tmp_path / "missing"], tmp_path / "out")


def test_report_cli(tmp_path, bench_dir, eval_dir):
    from quantgym.cli import app
    from quantgym.sweep.cli import register

    if "report" not in {c.name for c in app.registered_commands}:
        register(app)  # until the lead adds "quantgym.sweep.cli" to quantgym.cli.PLUGINS
    res = CliRunner().invoke(app, ["report", str(bench_dir), str(eval_dir), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "leaderboard.html").is_file() and (tmp_path / "leaderboard.md").is_file()
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "not a folder" in res.output
