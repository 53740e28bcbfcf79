"""quantgym report never drops an input silently: a corrupt run file and Market-Bench
attempt records whose scores cannot be recomputed are named in the report, the markdown, the HTML page and
the command's output."""

import json

from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.sweep.report import build_report


def _sweep_folder(tmp_path):
    d = tmp_path / "sweep" / "runs"
    d.mkdir(parents=True)
    (d / "good.json").write_text(json.dumps({
        "schema": "quantgym-sweep-run-v1", "run_id": "good", "task": "portbench", "status": "error",
        "spec": {"agent": "equal_weight", "env_id": "PortBench-Balanced-v0", "env_kwargs": {}, "seed": 0,
                 "agent_options": {}}, "result": None, "summary": None,
        "error": {"type": "ValueError", "message": "x", "traceback": ""}}))
    (d / "torn.json").write_text('{"run_id": "torn", "sta')  # a write cut by a crash
    return d.parent


def _mb_folder(tmp_path):
    d = tmp_path / "mb"
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"tasks": {"market_bench": {"runs": [{"records": [{"bogus": 1}]}]}}}))
    return d


def test_corrupt_run_files_and_unscorable_records_are_reported(tmp_path):
    rep = build_report([_sweep_folder(tmp_path), _mb_folder(tmp_path)], tmp_path / "out")
    ws = rep.warnings
    assert any("torn.json is not valid JSON" in w and "skipped" in w for w in ws), ws
    assert any(w.startswith("mb: Market-Bench scores could not be recomputed") for w in ws), ws
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    html = (tmp_path / "out" / "leaderboard.html").read_text()
    for w in ws:
        assert f"**warning:** {w}" in md
    assert html.count("<b>warning:</b>") == len(ws)


def test_the_report_command_prints_each_warning(tmp_path):
    r = CliRunner().invoke(app, ["report", str(_sweep_folder(tmp_path)), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "warning:" in r.output and "torn.json" in r.output
