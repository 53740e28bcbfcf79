"""An endpoint that cannot be reached before it ever answered stops the run with one line (exit 2) after
``unreachable_tries`` quick tries; once it has answered, a dropped connection is retried and becomes a
recorded failure. Against a real local server and a local port with nothing listening."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from quantgym.agents.llm.client import ChatEngine, LLMConfig, LLMConfigError, read_transcript
from quantgym.cli import app

from .server import closed_port_url

MSG = [{"role": "user", "content": "say something"}]


def _engine(base_url, tmp_path, name="u", **kw):
    cfg = LLMConfig(model="test-model", base_url=base_url, timeout=5.0,
                    **{"retries": 5, "backoff_base": 30.0, "backoff_max": 60.0, **kw})
    return ChatEngine(cfg, api_key="test-key", transcript=tmp_path / f"{name}.jsonl")


def test_unreachable_first_call_is_a_config_error_after_two_quick_tries(tmp_path, sleeps):
    eng = _engine(closed_port_url(), tmp_path)
    with pytest.raises(LLMConfigError) as e:
        eng.chat(MSG)
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg
    assert msg.startswith(f"cannot reach {eng.endpoint}") and "2 tries" in msg and "--base-url" in msg
    assert "Connection refused" in msg
    # one short pause between the two tries, never the long backoff (backoff_base=30 here)
    assert sleeps == [LLMConfig.unreachable_delay]
    assert "no API key" not in msg  # a key was given
    assert not eng.reached
    # no call record: the run stops before any call is scored
    assert read_transcript(tmp_path / "u.jsonl")[1] == []
    # every later call (another episode's thread) stops at once, without a new try
    with pytest.raises(LLMConfigError):
        eng.chat(MSG + [{"role": "user", "content": "again"}])
    assert sleeps == [LLMConfig.unreachable_delay]


def test_unreachable_without_a_key_says_so_too(tmp_path, sleeps, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = LLMConfig(model="test-model", base_url=closed_port_url(), timeout=5.0)
    with pytest.raises(LLMConfigError, match="no API key is set either") as e:
        ChatEngine(cfg, api_key=None, transcript=tmp_path / "k.jsonl").chat(MSG)
    assert "\n" not in str(e.value) and str(e.value).startswith("cannot reach")


def test_unreachable_tries_option_and_retries_zero(tmp_path, sleeps):
    with pytest.raises(LLMConfigError, match="3 tries"):
        _engine(closed_port_url(), tmp_path, name="a", unreachable_tries=3, unreachable_delay=0.25).chat(MSG)
    assert sleeps == [0.25, 0.25]
    sleeps.clear()
    with pytest.raises(LLMConfigError, match="1 try"):
        _engine(closed_port_url(), tmp_path, name="b", retries=0).chat(MSG)
    assert sleeps == []
    with pytest.raises(ValueError):
        LLMConfig(model="m", unreachable_tries=0)


def test_concurrent_first_calls_all_stop(tmp_path, sleeps):
    eng = _engine(closed_port_url(), tmp_path)
    errors: list[BaseException] = []

    def worker(i):
        try:
            eng.chat([{"role": "user", "content": f"episode {i}"}])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and all(isinstance(x, LLMConfigError) for x in errors)
    assert sleeps == [LLMConfig.unreachable_delay]  # only the first thread tried the endpoint


def test_answered_once_then_dropped_is_a_recorded_failure(server, tmp_path, sleeps):
    server.script("first answer", {"drop": True}, {"drop": True}, {"drop": True})
    eng = _engine(server.base_url, tmp_path, name="d", retries=2, backoff_base=0.01, backoff_max=0.05)
    r1 = eng.chat(MSG)
    assert r1.ok and r1.text == "first answer" and eng.reached
    r2 = eng.chat(MSG + [{"role": "user", "content": "second"}])
    assert not r2.ok and r2.error_kind == "connection" and r2.error.startswith("connection error")
    _, calls = read_transcript(tmp_path / "d.jsonl")
    assert [c["ok"] for c in calls] == [True, False]
    assert len(calls[1]["tries"]) == 3 and all(t["status"] is None for t in calls[1]["tries"])
    assert len(sleeps) == 2 and all(s <= 0.05 for s in sleeps)  # the ordinary backoff


def test_an_http_error_first_marks_the_endpoint_reachable(server, tmp_path, sleeps):
    # a 503 is an answer: a dropped connection after it is retried, not a configuration error
    server.script({"status": 503, "message": "loading model"}, {"drop": True}, "ok now")
    eng = _engine(server.base_url, tmp_path, name="h", retries=3, backoff_base=0.01, backoff_max=0.05)
    res = eng.chat(MSG)
    assert res.ok and res.text == "ok now"
    _, calls = read_transcript(tmp_path / "h.jsonl")
    assert [t["status"] for t in calls[0]["tries"]] == [503, None, 200]


# ------------------------------------------------------------------------------------------ CLI
def _error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error:")]


def test_eval_unreachable_base_url_one_line_exit_2(tmp_path, monkeypatch, sleeps):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = closed_port_url()
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", url,
                                 "--env", "MarketBench-Pairs-v0", "--round", "1", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2, r.output
    errs = _error_lines(r.output)
    assert len(errs) == 1 and errs[0].startswith(f"error: cannot reach {url}") and "Traceback" not in r.output
    assert sleeps == [LLMConfig.unreachable_delay]
    assert not (tmp_path / "x").exists()  # no run full of failures, no folder holding a transcript without answers


def test_eval_portbench_unreachable_stops_before_any_fallback(tmp_path, monkeypatch, sleeps):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", closed_port_url(),
                                 "--env", "PortBench-Balanced-v0", "--period", "2020-03-01:2020-03-31:weekly",
                                 "--out", str(tmp_path / "p"), "--quiet", "--concurrency", "2"])
    assert r.exit_code == 2 and len(_error_lines(r.output)) == 1 and "cannot reach" in r.output
    assert not (tmp_path / "p" / "summary.csv").exists()


def test_eval_server_answers_once_then_drops_records_failures(server, tmp_path, monkeypatch):
    server.script("no code in this reply")  # attempt 1 answered; later attempts: the server drops
    server.responder = lambda req: {"drop": True}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "mb"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url,
                                 "--env", "MarketBench-Pairs-v0", "--round", "1", "--attempts", "2",
                                 "--retries", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    run = doc["tasks"]["market_bench"]["runs"][0]
    reasons = [rec["reason"] for rec in run["records"]]
    assert len(reasons) == 2 and "call failed: connection error" in reasons[1]
    # progress: a start line, a failed-call line and a done line for the episode
    assert "start MarketBench-Pairs-v0 round 1" in r.output
    assert "LLM call failed" in r.output and "[1/1] done MarketBench-Pairs-v0 round 1" in r.output


class _RaisingClient:
    """Stands in for ``openai.OpenAI``: every ``chat.completions.create`` raises what the transport would."""

    def __init__(self, make_exc):
        self.n = 0
        outer = self

        class _Completions:
            def create(self, **req):
                outer.n += 1
                raise make_exc()

        class _Chat:
            completions = _Completions()

        self.chat = _Chat()


def _timeout_from(cause_name: str):
    import openai

    from openai import _exceptions

    transport = getattr(_exceptions, "httpx", None) or getattr(_exceptions, "httpx2")  # openai's HTTP library
    request = transport.Request("POST", "http://127.0.0.1:1/v1/chat/completions")

    def make():
        try:
            raise getattr(transport, cause_name)("timed out")
        except Exception as cause:  # noqa: BLE001
            exc = openai.APITimeoutError(request=request)
            exc.__cause__ = cause
            return exc

    return make


def test_connect_timeout_before_any_answer_is_a_config_error(tmp_path, sleeps):
    eng = _engine("http://127.0.0.1:1/v1", tmp_path, name="ct")
    eng._client = _RaisingClient(_timeout_from("ConnectTimeout"))
    with pytest.raises(LLMConfigError, match=r"connect timeout after 5 s; 2 tries"):
        eng.chat(MSG)
    assert eng._client.n == 2 and sleeps == [LLMConfig.unreachable_delay]


def test_read_timeout_on_the_first_call_is_retried_not_fatal(tmp_path, sleeps):
    # a slow first answer (a local server loading its model) is no sign of a wrong URL
    eng = _engine("http://127.0.0.1:1/v1", tmp_path, name="rt", retries=2, backoff_base=0.01, backoff_max=0.05)
    eng._client = _RaisingClient(_timeout_from("ReadTimeout"))
    res = eng.chat(MSG)
    assert not res.ok and res.error_kind == "timeout" and res.error == "timeout after 5 s"
    assert eng._client.n == 3 and len(sleeps) == 2


def test_bench_with_an_unreachable_llm_agent_exits_2_without_traceback(tmp_path, monkeypatch, sleeps):
    # LLMConfigError must be the ClickException class the quantgym (typer) app handles
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", "covid_2020",
                                 "--agents", "equal_weight", "--agent", "openai:test-model", "--no-plots", "-q",
                                 "-o", str(tmp_path / "b")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "cannot reach" in " ".join(r.output.split())


def test_a_long_server_error_is_one_short_progress_line(server, tmp_path, monkeypatch):
    """A server's error body can run to kilobytes (a stack trace): the progress line quotes its start in one
    short line."""
    body = "internal error: " + "frame " * 400
    server.responder = lambda req: {"status": 500, "message": body}
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "mb"
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url,
                                 "--env", "MarketBench-Pairs-v0", "--round", "1", "--attempts", "1",
                                 "--retries", "0", "--out", str(out)])
    assert r.exit_code == 2, r.output  # no call answered: the run is no result (one error line)
    lines = [ln for ln in r.output.splitlines() if "LLM call failed" in ln]
    assert lines and all(len(ln) <= 200 for ln in lines) and lines[0].endswith("..."), lines
