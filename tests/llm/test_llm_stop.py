"""A run whose endpoint never answers, or dies mid-run, stops with one line (``LLMConfig.stop_after``): the
first N calls all failing with the same HTTP status no retry cures, or N calls in a row that cannot connect
once the endpoint has answered. Against a real local server (tests/llm/server.py), no timing asserted."""

from __future__ import annotations

import pytest

from quantgym.agents.llm.client import ChatEngine, LLMConfig, LLMConfigError, read_transcript

MSG = [{"role": "user", "content": "say something"}]


def _engine(base_url, tmp_path, name="s", **kw):
    cfg = LLMConfig(model="test-model", base_url=base_url, timeout=5.0,
                    **{"retries": 2, "backoff_base": 0.01, "backoff_max": 0.05, **kw})
    return ChatEngine(cfg, api_key="test-key", transcript=tmp_path / f"{name}.jsonl")


def _msg(i):
    return [{"role": "user", "content": f"call {i}"}]


def test_first_calls_with_the_same_non_retryable_status_stop_the_run(server, tmp_path, sleeps):
    # a plain web server answers every POST with 501 (python -m http.server)
    server.responder = lambda req: {"status": 501, "message": "Unsupported method ('POST')"}
    eng = _engine(server.base_url, tmp_path)
    assert not eng.chat(_msg(1)).ok
    assert not eng.chat(_msg(2)).ok
    with pytest.raises(LLMConfigError) as e:
        eng.chat(_msg(3))
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg
    assert msg.startswith(f"the first 3 calls to {eng.endpoint} all failed with HTTP 501")
    assert "Unsupported method" in msg and "--base-url" in msg
    # 501 is not retried: one POST per call, no backoff
    assert len(server.requests) == 3 and sleeps == []
    # every later call (another episode's thread) stops at once, without a request
    with pytest.raises(LLMConfigError):
        eng.chat(_msg(4))
    assert len(server.requests) == 3
    # the three calls are in the transcript (what the endpoint said)
    _, calls = read_transcript(tmp_path / "s.jsonl")
    assert [c["tries"][-1]["status"] for c in calls] == [501, 501, 501]


def test_a_retried_status_counts_after_its_retries(server, tmp_path, sleeps):
    server.responder = lambda req: {"status": 502, "message": "bad gateway"}
    eng = _engine(server.base_url, tmp_path, stop_after=2)
    assert not eng.chat(_msg(1)).ok
    with pytest.raises(LLMConfigError, match="first 2 calls .* HTTP 502"):
        eng.chat(_msg(2))
    assert len(server.requests) == 2 * 3  # each call tried 1 + retries times


@pytest.mark.parametrize("status", [429, 503, 408, 504])
def test_rate_limits_and_timeouts_never_stop_the_run(server, tmp_path, sleeps, status):
    server.responder = lambda req: {"status": status, "message": "busy"}
    eng = _engine(server.base_url, tmp_path, retries=0)
    for i in range(5):
        assert not eng.chat(_msg(i)).ok


def test_different_statuses_or_an_answer_first_do_not_stop(server, tmp_path, sleeps):
    server.script({"status": 400, "message": "odd request"}, {"status": 501, "message": "no"},
                  {"status": 501, "message": "no"}, {"status": 501, "message": "no"})
    eng = _engine(server.base_url, tmp_path, name="a")
    assert [eng.chat(_msg(i)).ok for i in range(4)] == [False] * 4
    server.script("an answer", *[{"status": 501, "message": "no"}] * 4)
    eng = _engine(server.base_url, tmp_path, name="b")
    assert [eng.chat(_msg(i)).ok for i in range(5)] == [True] + [False] * 4


def test_endpoint_that_dies_mid_run_stops_after_n_calls(tmp_path, sleeps):
    from .server import ScriptedServer

    srv = ScriptedServer().start()
    url = srv.base_url
    srv.script("one", "two")
    eng = _engine(url, tmp_path, name="d")
    assert eng.chat(_msg(1)).ok and eng.chat(_msg(2)).ok
    srv.kill()  # the server dies: connections are refused from here on
    r = eng.chat(_msg(3))
    assert not r.ok and r.error_kind == "connection"
    assert not eng.chat(_msg(4)).ok
    with pytest.raises(LLMConfigError) as e:
        eng.chat(_msg(5))
    msg = str(e.value)
    assert msg.startswith(f"lost {url}: 3 calls in a row could not connect") and "after 2 answered" in msg
    assert "\n" not in msg
    with pytest.raises(LLMConfigError):  # later calls stop at once
        eng.chat(_msg(6))
    _, calls = read_transcript(tmp_path / "d.jsonl")
    assert [c["ok"] for c in calls] == [True, True, False, False, False]
    assert eng.episode_stats == {} and eng.answered == 2


def test_a_single_dropped_connection_resets_on_the_next_answer(server, tmp_path, sleeps):
    server.script("one", {"drop": True}, {"drop": True}, "two", {"drop": True}, {"drop": True}, "three")
    eng = _engine(server.base_url, tmp_path, name="r", retries=0)
    oks = [eng.chat(_msg(i)).ok for i in range(7)]
    assert oks == [True, False, False, True, False, False, True]


def test_stop_after_is_checked():
    with pytest.raises(ValueError, match="stop_after"):
        LLMConfig(model="m", stop_after=0)
    assert LLMConfig(model="m").stop_after == 3
