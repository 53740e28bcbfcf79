"""A run where the model never answered is not a result: summary.csv's ``status`` (ok | partial | failed),
the eval table's marks, ``quantgym report`` (failed rows never ranked), and the two stop rules end to end
through ``quantgym eval`` against a real local server (tests/llm/server.py): a server that answers every
POST with 501, and one killed mid-run whose transcripts then resume the run (``--cache-from``)."""

from __future__ import annotations

import json
import threading

from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.results import (SUMMARY_COLUMNS, SectionResult, SummaryRow, combined_status, episode_status,
                              read_summary_csv, write_results)

from . import pb_script as S

PERIOD = "2020-03-01:2020-03-31:weekly"


def _eval(server_url, out, *extra):
    return CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server_url,
                                    "--env", "PortBench-Balanced-v0", "--period", PERIOD, "--out", str(out),
                                    "--no-plots", "--retries", "1", "--concurrency", "1", *extra])


def _dies_after(server, n: int):
    """A responder that answers ``n`` calls validly, then crashes the server during the next one."""
    seen = {"k": 0}

    def respond(req):
        seen["k"] += 1
        if seen["k"] <= n:
            return S.valid(req)
        threading.Thread(target=server.kill).start()  # the server dies while this request is in flight
        return {"drop": True}

    return respond


def _errors(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error:")]


def test_episode_status_from_usage():
    assert episode_status(None) == "ok" and episode_status({}) == "ok"
    assert episode_status({"calls": 9, "failures": 0, "answered": 9}) == "ok"
    assert episode_status({"calls": 9, "failures": 9, "answered": 0}) == "failed"
    assert episode_status({"calls": 9, "failures": 2, "answered": 7}) == "partial"
    # a usage record without the count: calls + cache hits - adaptations - failures
    assert episode_status({"calls": 4, "cache_hits": 0, "adaptations": 1, "failures": 3}) == "failed"
    assert combined_status(["ok", "ok"]) == "ok" and combined_status(["ok", "failed"]) == "partial"
    assert combined_status(["failed", "failed"]) == "failed" and combined_status([None, "partial"]) == "partial"


def test_a_failed_row_is_written_without_numbers(tmp_path):
    rows = [SummaryRow(task="portbench", agent="openai:m", profile="balanced", period="p", sharpe=-7.8, ret_pct=-3.0,
                       ceps=0.03, gate=False, status="failed", extra={"S": 0.1}),
            SummaryRow(task="portbench", agent="equal_weight", profile="balanced", period="p", sharpe=0.5,
                       extra={"S": 0.2})]
    write_results(tmp_path, [SectionResult(task="portbench", rows=rows)])
    got = read_summary_csv(tmp_path / "summary.csv")
    assert list(got[0])[:len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS) and SUMMARY_COLUMNS[-1] == "status"
    assert got[0]["status"] == "failed" and got[1]["status"] == "ok"
    assert all(got[0][c] == "" for c in ("sharpe", "ret_pct", "ceps", "gate", "S"))
    assert got[1]["sharpe"] == "0.5" and got[1]["S"] == "0.2"


def test_eval_every_call_failing_is_no_result(server, tmp_path, monkeypatch, sleeps):
    # a model that is always busy (503: retried, never a reason to stop early): the episode runs to its end on
    # its fallbacks, but an endpoint that answered no call of the run gives one line, exit 2 and no folder
    server.responder = lambda req: {"status": 503, "message": "model is loading"}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = _eval(server.base_url, tmp_path / "results" / "f")
    assert r.exit_code == 2, r.output
    errs = _errors(r.output)
    assert len(errs) == 1 and errs[0].startswith(f"error: no call to {server.base_url} was answered: all ")
    assert "503" in errs[0] and "Traceback" not in r.output
    assert not (tmp_path / "results").exists()


def test_eval_a_failed_episode_beside_answered_ones_is_marked_failed(server, tmp_path, monkeypatch, sleeps):
    # two episodes: the conservative one's calls all fail (503), the balanced one's are answered
    def respond(req):
        text = json.dumps(req["messages"]).lower()
        return {"status": 503, "message": "busy"} if "conservative" in text else S.valid(req)

    server.responder = respond
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url, "--env",
                                 "PortBench-Balanced-v0,PortBench-Conservative-v0", "--period", PERIOD, "--out",
                                 str(tmp_path / "f"), "--no-plots", "--retries", "0", "--concurrency", "1"])
    assert r.exit_code == 0, r.output
    rows = [row for row in read_summary_csv(tmp_path / "f" / "summary.csv") if row["agent"] == "openai:test-model"]
    status = {row["profile"]: row for row in rows}
    assert status["conservative"]["status"] == "failed" and status["conservative"]["sharpe"] == ""
    assert status["balanced"]["status"] == "ok" and status["balanced"]["sharpe"] != ""
    doc = json.loads((tmp_path / "f" / "results.json").read_text())
    run = next(x for x in doc["tasks"]["portbench"]["runs"] if x["agent"] == "openai:test-model"
               and x["status"] == "failed")
    assert run["usage"]["answered"] == 0 and run["usage"]["failures"] > 0
    # the table marks the row and says why; one warning line names the failed episode
    out = " ".join(r.output.split())
    assert "openai:test-model (failed)" in out and "no LLM call was answered" in out
    assert "warning: 1 of 2 episode(s) failed" in out


def test_a_short_run_that_was_never_answered_is_no_result(server, tmp_path, monkeypatch, sleeps):
    # Quant-Arena's one-shot track makes fewer calls than the first-calls rule needs: it ends the same way
    server.responder = lambda req: {"status": 501, "message": "Unsupported method ('POST')"}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url, "--env",
                                 "QuantArena-OneShot-v0", "--out", str(tmp_path / "results" / "q"), "--no-plots",
                                 "--retries", "0"])
    assert r.exit_code == 2, r.output
    errs = _errors(r.output)
    assert len(errs) == 1 and f"no call to {server.base_url} was answered" in errs[0] and "501" in errs[0]
    assert not (tmp_path / "results").exists()


def test_eval_some_calls_failing_is_partial(server, tmp_path, monkeypatch, sleeps):
    n = {"k": 0}

    def flaky(req):
        n["k"] += 1
        return {"status": 503, "message": "busy"} if n["k"] % 4 == 0 else S.valid(req)

    server.responder = flaky
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = _eval(server.base_url, tmp_path / "p", "--retries", "0")
    assert r.exit_code == 0, r.output
    rows = {row["agent"]: row for row in read_summary_csv(tmp_path / "p" / "summary.csv")}
    assert rows["openai:test-model"]["status"] == "partial" and rows["openai:test-model"]["sharpe"] != ""
    assert "openai:test-model (partial)" in " ".join(r.output.split())


def test_eval_against_a_plain_web_server_stops_with_one_line(server, tmp_path, monkeypatch, sleeps):
    # python -m http.server: 501 on every POST
    server.responder = lambda req: {"status": 501, "message": "Unsupported method ('POST')"}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "results" / "eval-x"
    r = _eval(server.base_url, out)
    assert r.exit_code == 2, r.output
    errs = _errors(r.output)
    assert len(errs) == 1 and errs[0].startswith(f"error: the first 3 calls to {server.base_url} all failed with "
                                                 "HTTP 501") and "Traceback" not in r.output
    assert len(server.requests) == 3  # 501 is not retried, and the run stops at the third call
    assert not (tmp_path / "results").exists()  # no folder left behind: nothing was answered


def test_endpoint_killed_mid_run_marks_the_run_failed_and_resumes(server, tmp_path, monkeypatch, sleeps):
    server.responder = _dies_after(server, 5)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    url = server.base_url
    r = _eval(url, out)
    assert r.exit_code == 2, r.output
    errs = _errors(r.output)
    assert len(errs) == 1, r.output
    line = " ".join(errs[0].split())
    assert line.startswith(f"error: lost {url}: 3 calls in a row could not connect")
    assert "marked failed in" in line and "--cache-from" in line
    rows = read_summary_csv(out / "summary.csv")
    assert [(x["agent"], x["status"], x["sharpe"]) for x in rows] == [("openai:test-model", "failed", "")]
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["status"] == "failed" and doc["meta"]["error"].startswith("lost ")
    transcripts = doc["meta"]["transcripts"]
    assert len(transcripts) == 1 and f"--cache-from {transcripts[0]}" in line
    # quantgym report lists the stopped run apart, with its error, and ranks nothing of it
    from quantgym.sweep.report import build_report

    rep = build_report([out], tmp_path / "rep")
    assert [sec.anchor for sec in rep.sections] == ["failed"]
    assert rep.sections[0].tables[0].rows[0][-1].startswith(f"lost {url}")
    # the transcript keeps the five answers: a rerun with --cache-from sends only the rest
    from .server import ScriptedServer

    srv = ScriptedServer().start()
    try:
        srv.responder = S.valid
        r2 = _eval(srv.base_url, tmp_path / "resumed", "--cache-from", transcripts[0])
        assert r2.exit_code == 0, r2.output
        rows2 = {x["agent"]: x for x in read_summary_csv(tmp_path / "resumed" / "summary.csv")}
        assert rows2["openai:test-model"]["status"] == "ok"
        doc2 = json.loads((tmp_path / "resumed" / "results.json").read_text())
        run = next(x for x in doc2["tasks"]["portbench"]["runs"] if x["agent"] == "openai:test-model")
        assert run["usage"]["cache_hits"] == 5 and len(srv.requests) == run["usage"]["calls"]
    finally:
        srv.stop()


def test_report_never_ranks_a_failed_row(tmp_path):
    from quantgym.sweep.report import build_report

    ok_rows = [SummaryRow(task="portbench", agent="equal_weight", profile="balanced", period="covid_2020",
                          sharpe=-1.0, maxdd_pct=-20.0),
               SummaryRow(task="portbench", agent="openai:good", profile="balanced", period="covid_2020", sharpe=0.5,
                          maxdd_pct=-10.0, status="partial")]
    bad = SummaryRow(task="portbench", agent="openai:never-answered", profile="balanced", period="covid_2020",
                     sharpe=9.9, maxdd_pct=-1.0, status="failed")
    write_results(tmp_path / "a", [SectionResult(task="portbench", rows=ok_rows + [bad], runs=[
        {"task": "portbench", "agent": "openai:never-answered", "period": "covid_2020", "status": "failed",
         "usage": {"failures_by_kind": {"server": 12}}}])])
    rep = build_report([tmp_path / "a"], tmp_path / "rep")
    ranked = [t for sec in rep.sections if sec.anchor != "failed" for t in sec.tables]
    assert ranked and not any("never-answered" in c for t in ranked for row in t.rows for c in row)
    failed = next(sec for sec in rep.sections if sec.anchor == "failed")
    assert failed.tables[0].rows == [["a", "portbench", "openai:never-answered", "balanced", "covid_2020",
                                      "every LLM call failed (12 server)"]]
    md = rep.markdown_path.read_text()
    assert "## Failed runs (not ranked)" in md and "| status |" in md
    merged = read_summary_csv(rep.csv_path)
    assert {x["agent"]: x["status"] for x in merged} == {"equal_weight": "ok", "openai:good": "partial",
                                                        "openai:never-answered": "failed"}
    assert "Failed runs (not ranked)" in rep.html_path.read_text()


def test_sweep_marks_an_llm_run_that_was_never_answered(server, tmp_path, monkeypatch):
    from rich.console import Console

    from quantgym.sweep.cli import results_table
    from quantgym.sweep.grid import parse_grid
    from quantgym.sweep.runner import run_sweep

    server.responder = lambda req: {"status": 503, "message": "overloaded"}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    grid = parse_grid({"agents": [{"spec": "openai:test-model", "options": {"base_url": server.base_url,
                                                                            "retries": 0}}, "equal_weight"],
                       "envs": ["PortBench-Conservative-v0"],
                       "env_kwargs": {"period": {"start": "2020-03-01", "end": "2020-03-31", "freq": "weekly"}}})
    out = run_sweep(grid, tmp_path / "s", workers=1)
    assert out.failed == []  # the run itself ran to its end...
    rows = {x["agent"]: x for x in read_summary_csv(tmp_path / "s" / "summary.csv")}
    assert rows["openai:test-model"]["status"] == "failed" and rows["openai:test-model"]["sharpe"] == ""
    assert rows["equal_weight"]["status"] == "ok"
    con = Console(width=100, record=True)
    con.print(results_table("sweep", out))
    text = con.export_text()
    line = next(ln for ln in text.splitlines() if "openai:test-model" in ln)
    assert "(failed)" in line and "failed" in line.split("(failed)")[1]  # ...but it is no result


def _bench(tmp_path, out):
    return CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods",
                                    "covid_2020", "--agents", "equal_weight", "--agent", "openai:test-model",
                                    "--no-plots", "-q", "-o", str(out)])


def test_bench_agent_against_a_plain_web_server_leaves_no_folder(server, tmp_path, monkeypatch, sleeps):
    server.responder = lambda req: {"status": 501, "message": "Unsupported method ('POST')"}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    r = _bench(tmp_path, tmp_path / "results" / "bench-x")
    assert r.exit_code == 2 and "Traceback" not in r.output
    errs = _errors(r.output)
    assert len(errs) == 1 and "the first 3 calls" in errs[0] and "HTTP 501" in errs[0]
    assert not (tmp_path / "results").exists()


def test_bench_agent_whose_server_dies_says_where_its_answers_are(server, tmp_path, monkeypatch, sleeps):
    server.responder = _dies_after(server, 4)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    out = tmp_path / "b"
    r = _bench(tmp_path, out)
    assert r.exit_code == 2, r.output
    line = " ".join(_errors(r.output)[0].split())
    transcript = next((out / "transcripts").glob("portbench-test-model-*.jsonl"))  # <task>-<model>-<run>
    assert "3 calls in a row could not connect" in line and f"4 answered call(s) kept in {transcript}" in line
    from quantgym.agents.llm.client import read_transcript

    assert sum(c["ok"] for c in read_transcript(transcript)[1]) == 4


def test_repeats_leave_a_failed_repeat_out_of_the_mean():
    from quantgym.evaluation import repeats_section

    def rep(sharpe, status):
        return [SectionResult(task="portbench", rows=[SummaryRow(task="portbench", agent="openai:m",
                                                                 profile="balanced", period="p", sharpe=sharpe,
                                                                 status=status)])]

    sec = repeats_section([rep(1.0, "ok"), rep(9.0, "failed"), rep(2.0, "ok")])
    row = sec.rows[0]
    assert row.sharpe == 1.5 and row.extra["n_repeats"] == 2 and row.status == "partial"
    assert sec.runs[0]["statuses"] == ["ok", "failed", "ok"]
    every = repeats_section([rep(9.0, "failed"), rep(8.0, "failed")])
    assert every.rows[0].status == "failed" and every.rows[0].sharpe is None
