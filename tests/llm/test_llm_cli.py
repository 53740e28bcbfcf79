"""``quantgym eval`` (plugin quantgym.agents.llm.cli): a concurrent PortBench grid against the local server,
results in the bench schema, then ``--agent replay:FILE`` offline to the same summary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.results import SUMMARY_COLUMNS, read_summary_csv, to_jsonable

from . import pb_script as S

PERIODS = "2020-03-01:2020-03-31:weekly,2020-04-01:2020-04-30:weekly"


def test_cli_module_imports_no_openai():
    code = ("import sys, quantgym.cli, quantgym.agents.llm.cli, quantgym.agents.llm; "
            "print('openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_eval_portbench_concurrent_then_replay(server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    runner = CliRunner()
    r = runner.invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url,
                            "--env", "PortBench-Balanced-v0", "--period", PERIODS, "--out", str(out),
                            "--concurrency", "2", "--retries", "1", "--price-in", "0.5", "--price-out", "1.5",
                            "--quiet"])
    assert r.exit_code == 0, r.output
    rows = read_summary_csv(out / "summary.csv")
    assert list(rows[0]) == list(SUMMARY_COLUMNS)
    mine = [row for row in rows if row["agent"] == "openai:test-model"]
    assert len(mine) == 2 and all(row["ceps"] and row["profile"] == "balanced" for row in mine)
    assert {row["agent"] for row in rows} == {"openai:test-model", "equal_weight"}
    doc = json.loads((out / "results.json").read_text())
    pb = doc["tasks"]["portbench"]
    runs = [x for x in pb["runs"] if x["agent"] == "openai:test-model"]
    assert all(set(x["stage_scores"]) == {"S1", "S2", "S3", "S4", "S5"} for x in runs)
    assert all(x["usage"]["calls"] > 0 and x["usage"]["cost_usd"] > 0 for x in runs)
    transcript = pb["usage"]["transcript"]
    assert transcript and runs[0]["transcript"] == transcript
    assert len(list(out.glob("portbench_nav_*.png"))) == 2
    # every S1 prompt went out with the stage's JSON schema (structured output supported here)
    assert all(req.get("response_format", {}).get("type") == "json_schema" for req in server.requests)
    server.stop()
    out2 = tmp_path / "replay"
    r2 = runner.invoke(app, ["eval", "--agent", f"replay:{transcript}", "--out", str(out2), "--quiet",
                             "--concurrency", "2"])
    assert r2.exit_code == 0, r2.output
    assert (out2 / "summary.csv").read_text() == (out / "summary.csv").read_text()
    doc2 = json.loads((out2 / "results.json").read_text())
    key = lambda x: (x["agent"], x["period"])  # noqa: E731
    a = sorted(doc["tasks"]["portbench"]["runs"], key=key)
    b = sorted(doc2["tasks"]["portbench"]["runs"], key=key)
    for x, y in zip(a, b):
        assert (x["metrics"], x["stage_scores"], x["nav"], x["ceps"]) == (y["metrics"], y["stage_scores"], y["nav"],
                                                                         y["ceps"])


def test_eval_wrong_key_is_one_line_exit_2(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "bad-key")
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url,
                                 "--env", "PortBench-Balanced-v0", "--period", "2020-03-01:2020-03-31:weekly",
                                 "--out", str(tmp_path / "x"), "--quiet", "--no-baseline"])
    assert r.exit_code == 2
    assert "authentication failed" in r.output and "Traceback" not in r.output


def test_eval_bad_env_id(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--agent", "replay:/nonexistent.jsonl", "--env", "Nope-v0",
                                 "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_eval_baseline_on_portbench_goes_through_evaluate(tmp_path):
    out = tmp_path / "ew"
    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0",
                                 "--period", "2020-03-01:2020-03-31:weekly", "--out", str(out), "--no-plots"])
    assert r.exit_code == 0, r.output
    assert "current_episode" not in r.output and "Traceback" not in r.output
    rows = read_summary_csv(out / "summary.csv")
    # the agent itself, and no duplicate Equal-Weight reference row
    assert [row["agent"] for row in rows] == ["equal_weight"] and rows[0]["profile"] == "balanced"
    assert rows[0]["sharpe"] not in (None, "")
    doc = json.loads((out / "results.json").read_text())
    run = doc["tasks"]["portbench"]["runs"][0]
    assert run["usage"] is None and run["nav"]
    assert "[1/1] done PortBench-Balanced-v0" in r.output  # progress line


def test_eval_baseline_matches_bench_loop(tmp_path):
    from quantgym.evaluation import evaluate
    from quantgym.envs.portbench.baselines import make_baseline

    out = tmp_path / "rp"
    r = CliRunner().invoke(app, ["eval", "--agent", "risk_parity", "--env", "PortBench-Balanced-v0",
                                 "--period", "2020-03-01:2020-03-31:weekly", "--out", str(out), "--no-plots",
                                 "--quiet"])
    assert r.exit_code == 0, r.output
    direct = evaluate("PortBench-Balanced-v0", make_baseline("risk_parity"), seed=0,
                      period={"start": "2020-03-01", "end": "2020-03-31", "freq": "weekly"})
    rows = {row["agent"]: row for row in read_summary_csv(out / "summary.csv")}
    assert set(rows) == {direct.agent_key, "equal_weight"} and direct.agent_key == "risk_parity"
    runs = json.loads((out / "results.json").read_text())["tasks"]["portbench"]["runs"]
    mine = next(x for x in runs if x["agent"] == direct.agent)
    assert mine["metrics"]["sharpe"] == pytest.approx(direct.metrics["sharpe"], rel=1e-12)
    assert mine["nav"] == json.loads(json.dumps(to_jsonable(direct.to_dict()["nav"])))


def test_eval_baseline_on_other_tasks_is_one_line_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "MarketBench-Pairs-v0",
                                 "--out", str(tmp_path / "z")])
    assert r.exit_code == 2
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "PortBench only" in errs[0] and "quantgym bench --agents" in errs[0]
    assert "Traceback" not in r.output


def test_eval_help_shows_each_tasks_own_options_from_its_record():
    # width through COLUMNS/terminal_width only: typer reads TERMINAL_WIDTH once, at its first import, so
    # setting it here would fix every later --help in this pytest process at 400 columns
    r = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    text = " ".join(r.output.split())
    assert "classical agent of a task that has them" in text and "quantgym bench --agents" in text
    # the tasks' own options come from their records (eval_options), titled by task
    from quantgym.tasks import tasks

    for t in tasks():
        for o in t.eval_options:
            assert o.flag in text and f"{t.title}: {o.help}" in text


def test_replay_of_a_resumed_run_counts_the_resumed_answers_as_calls(tmp_path):
    """The shipped floor transcripts come from a run resumed with --cache-from: its answers are cache hits
    of source cache_from. A replay counts them as the run's calls (with their tokens), as the tables do."""
    import json
    from pathlib import Path

    from quantgym.agents.llm.client import read_transcript

    src = Path(__file__).resolve().parents[2] / "examples" / "llm_floor" / "quant_arena.jsonl.gz"
    if not src.exists():
        pytest.skip("no shipped floor transcripts")
    _, calls = read_transcript(src)
    oneshot = [c for c in calls if "OneShot" in str(c.get("episode"))]
    assert oneshot and all(c.get("cache_source") == "cache_from" for c in oneshot)
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["eval", "--agent", f"replay:{src}", "--env", "QuantArena-OneShot-v0", "--out",
                                 str(out), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    run = json.loads((out / "results.json").read_text())["tasks"]["quant_arena"]["runs"][0]
    assert run["usage"]["calls"] == len(oneshot) and run["usage"]["cache_hits"] == 0
    assert run["usage"]["total_tokens"] == sum(c["usage"]["total_tokens"] for c in oneshot)
    assert run["track"] == "oneshot" and run["period"] == "sealed_2024"


def test_eval_help_fits_80_columns_without_cutting_words():
    r = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0 and "…" not in r.output
    assert not [ln for ln in r.output.splitlines() if len(ln) > 80]
    text = " ".join(r.output.split()).replace("- ", "-")  # click breaks long ids after a hyphen
    assert "replay:TRANSCRIPT.jsonl" in text and "MarketBench-DeltaHedge-v0" in text
